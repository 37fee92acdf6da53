"""The selftest worker's rows (one JSON line per row) and its score, as the worker writes them and as
`trace-tui verify --campaign` recomputes them (standard library only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Complete rows in order, and the byte length they take (a torn last line is not a row)."""
    rows: list[dict[str, Any]] = []
    good = 0
    if not path.exists():
        return rows, 0
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                obj = json.loads(raw)
            except ValueError:
                break
            if not isinstance(obj, dict) or obj.get("row") != len(rows):
                break
            rows.append(obj)
            good += len(raw)
    return rows, good


def score_rows(rows: list[dict[str, Any]]) -> float:
    return 100.0 * sum(1 for r in rows if r["correct"]) / len(rows) if rows else 0.0


def recompute_score(campaign: Path, receipt_content: dict[str, Any]) -> float:
    """How `trace-tui verify --campaign` recomputes the selftest worker's score from its per-row results.

    For a whole-step receipt, verify passes the slice it asks about as ``receipt_content["slice"]``.
    """
    sl = receipt_content.get("slice") or ""
    suffix = f"/slices/{sl}/rows.jsonl" if sl.count("/") == 2 and receipt_content.get("slices") else "/rows.jsonl"
    rows_path = next(campaign / p for p in receipt_content["outputs"] if p.endswith(suffix))
    rows, _ = read_rows(rows_path)
    return score_rows(rows)

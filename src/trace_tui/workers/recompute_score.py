"""How `trace-tui verify --campaign` recomputes the score worker's record (score.json) from the extract rows it
names, and the scoring of those rows the worker itself uses (accuracy with breakdowns by task and domain)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trace_tui.common.safe_read import Folder, NotRead
from trace_tui.scoring import answers_match

SCORE_FILE = "score.json"


def row_correct(row: dict[str, Any]) -> bool:
    """A row is right when it has a final value equal to the reference under the semantic match (§2)."""
    if row.get("value") is None or row.get("final") == "unresolved":
        return False
    return answers_match(row["value"], {"type": row["answer_type"], "value": row["answer_gt"]})


def _group(rows: list[dict[str, Any]], flags: list[bool], key: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row, ok in zip(rows, flags, strict=True):
        g = out.setdefault(str(row[key]), {"correct": 0, "total": 0})
        g["correct"] += int(ok)
        g["total"] += 1
    for g in out.values():
        g["accuracy"] = percent(g["correct"], g["total"])
    return dict(sorted(out.items()))


def percent(correct: int, total: int) -> float:
    return round(100.0 * correct / total, 10) if total else 0.0


def score_rows(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy over all rows with breakdowns (pure)."""
    rows = sorted(rows, key=lambda r: int(r["index"]))
    flags = [row_correct(r) for r in rows]
    correct = sum(flags)
    return {
        "accuracy": percent(correct, len(rows)), "correct": correct, "total": len(rows),
        "unresolved": sum(1 for r in rows if r.get("final") == "unresolved"),
        "judged": sum(1 for r in rows if r.get("final") == "judged"),
        "by_task": _group(rows, flags, "task"), "by_domain": _group(rows, flags, "domain"),
        "rows": {str(r["index"]): ok for r, ok in zip(rows, flags, strict=True)},
    }


ROW_LIMIT = 1 << 20  # an extract row is a few hundred bytes; a file larger than this is not one


def _inside(campaign: Path, rel: Any, what: str) -> str:
    """``rel`` when it names a place inside the campaign (checked before anything is opened); else ValueError."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or rel.startswith("/") or ".." in rel.split("/"):
        raise ValueError(f"{what} {str(rel)[:200]!r} is not a path inside the campaign; it was not read")
    real, top = os.path.realpath(campaign / rel), os.path.realpath(campaign)
    if not real.startswith(top + os.sep):
        raise ValueError(f"{what} {rel!r} leads out of the campaign (a link); it was not read")
    return rel


def _read_rows(campaign: Path, source: str, read: dict[str, tuple[str, Any]] | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(the rows of the campaign's folder ``source``, {campaign-relative path: sha256}), each file read once and
    only when it is a regular file inside the campaign (common.safe_read: a FIFO there fails, never blocks).
    ``read``: rows the caller read and hashed in this same check (path -> (sha256, row)), taken as they are."""
    try:
        with os.scandir(campaign / source) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".json") and not e.name.startswith("."))
    except OSError as exc:
        raise ValueError(f"source {source}: not a folder to read rows from ({exc.strerror or exc})") from None
    folder = Folder(campaign, name="the campaign")
    rows, inputs = [], {}
    for name in names:
        rel = f"{source}/{name}"
        if read is not None and rel in read:
            inputs[rel], row = read[rel]
            rows.append(row)
            continue
        try:
            got = folder.sha256_size(rel, keep=ROW_LIMIT)
        except NotRead as exc:
            raise ValueError(f"{rel}: {exc.reason}") from None
        if got is None or got[2] is None:
            raise ValueError(f"{rel}: {'vanished while read' if got is None else 'too large to be a row'}")
        inputs[rel] = got[0]
        try:
            rows.append(json.loads(got[2]))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{rel}: not a JSON row ({exc})") from None
    return rows, inputs


def recompute(campaign: Path, score_path: Path, read: dict[str, tuple[str, Any]] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(recorded, recomputed) for a score.json: the scores again from the extract rows it names.

    The rows' bytes must still be the ones the score read (their sha256 is recorded), so
    a changed row is reported as a mismatch of inputs, not silently rescored. Only files inside
    the campaign are read (its "source" is data: a path out of it is refused unread).
    """
    campaign = Path(campaign)
    rel = _inside(campaign, Path(score_path).relative_to(campaign).as_posix(), "score file")
    try:
        data = Folder(campaign, name="the campaign").read(rel, ROW_LIMIT * 64)
        recorded = json.loads(data) if data is not None else None
    except NotRead as exc:
        raise ValueError(f"{rel}: {exc.reason}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{rel}: not JSON ({exc})") from None
    if not isinstance(recorded, dict):
        raise ValueError(f"{rel}: {'missing' if data is None else 'not a score record'}")
    src = _inside(campaign, recorded.get("source"), f"{rel}: source")
    rows, inputs = _read_rows(campaign, src, read)
    again = score_rows(rows)
    keys = ("accuracy", "correct", "total", "unresolved", "judged", "by_task", "by_domain", "rows")
    rec = {k: recorded.get(k) for k in keys}
    rec["inputs"] = recorded.get("inputs")
    new = {k: again[k] for k in keys}
    new["inputs"] = inputs
    rec["source"] = new["source"] = src
    return rec, new


def upstream_rows(score_rel: str, content: dict[str, Any]) -> str | None:
    """The rows folder a score job's score.json must name: the step before it (its receipt's pinned inputs name
    it), same slice (outputs/STEP/SLICE/score.json -> outputs/UPSTREAM/SLICE/rows); None when not known."""
    upstream = (content.get("inputs") or {}).get("upstream")
    parts = score_rel.split("/")
    if not isinstance(upstream, dict) or len(upstream) != 1 or len(parts) < 4 or parts[0] != "outputs":
        return None
    return "/".join(["outputs", str(next(iter(upstream))), *parts[2:-1], "rows"])


def recompute_score(campaign: Path, receipt_content: dict[str, Any],
                    read: dict[str, tuple[str, Any]] | None = None) -> float:
    """The recomputer ``verify --campaign`` calls with a score job's receipt: the accuracy again from
    the extract rows. Any disagreement with the recorded file (rows changed, breakdowns differ, rows of
    another step or slice than the one before it) raises, which verify reports as this score's failure."""
    outputs = receipt_content.get("outputs") or {}
    rel = next((k for k in sorted(outputs) if k.rsplit("/", 1)[-1] == SCORE_FILE), None)
    if rel is None:
        raise ValueError(f"the receipt lists no {SCORE_FILE}")
    rec, new = recompute(Path(campaign), Path(campaign) / rel, read)
    want = upstream_rows(rel, receipt_content)
    if want is not None and rec["source"] != want:
        raise ValueError(f"{rel}: scores the rows in {rec['source']}, not its slice's rows of the step before it "
                         f"({want})")
    problems = [f"{rel}: {k} recorded {str(rec[k])[:80]} but recomputed {str(new[k])[:80]}"
                for k in rec if rec[k] != new[k]]
    if problems:
        raise ValueError(problems[0])
    return float(new["accuracy"])

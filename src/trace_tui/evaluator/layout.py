"""The release evaluator's campaign layout, read as progress and scores (EXTERNAL-SUITE.md).

    seed_<s>/runs/<benchmark>/<slug>/<run_name>/api_row_results/<index>.<sha16>.json   one per finished row
    seed_<s>/runs/<benchmark>/<slug>/<run_name>/generation_summary.json               rows, expected_rows
    scoring/seed_<s>/benchmark/<benchmark>/<slug>/<run_name>/scores.json              "score" ("accuracy": MME-Reasoning)
    scoring/score_campaign_completion_seed_<s>.json                                   per-seed completion receipt

The evaluator's own status script has no per-benchmark breakdown, so the grid
counts row files per slice itself. Reading is cheap (directory listings only)
and never writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from trace_tui.common.digest import sha256_file

SCORE_KEYS = ("score", "accuracy")


class EvalSlice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slug: str
    seed: int
    benchmark: str
    rows_done: int
    rows_expected: int
    generation_complete: bool
    score: float | None = None
    scores_path: str | None = None  # relative to the campaign root
    scores_sha256: str | None = None

    @property
    def phase(self) -> str:
        if self.score is not None:
            return "scored"
        return "generated" if self.generation_complete else "generating"


def _count_rows(run_dir: Path) -> int:
    rows = run_dir / "api_row_results"
    try:
        # Written atomically by the evaluator; a temp file does not end in .json.
        return sum(1 for e in os.scandir(rows) if e.is_file() and e.name.endswith(".json"))
    except FileNotFoundError:
        return 0


def _run_dirs(parent: Path) -> list[Path]:
    try:
        return sorted(p for p in parent.iterdir() if p.is_dir())
    except FileNotFoundError:
        return []


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def score_of(data: dict, benchmark: str | None = None) -> float | None:
    """The slice's metric: `score`, `accuracy` for MME-Reasoning (the key the evaluator's receipts check)."""
    if benchmark is not None:
        value = data.get("accuracy" if benchmark == "mme_reasoning" else "score")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    for key in SCORE_KEYS:
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def scan_campaign(root: Path, *, slugs: list[str], seeds: list[int], rows: dict[str, int]) -> list[EvalSlice]:
    """One EvalSlice per (slug, seed, benchmark) asked for, in that order; absent slices are at 0."""
    out = []
    for slug in slugs:
        for seed in seeds:
            for bench, expected in rows.items():
                done, complete = 0, False
                for run in _run_dirs(root / f"seed_{seed}" / "runs" / bench / slug):
                    done = max(done, _count_rows(run))
                    summary = _read_json(run / "generation_summary.json")
                    if summary and summary.get("rows") == summary.get("expected_rows") == expected:
                        complete = True
                        done = max(done, expected)
                score = scores_path = scores_sha = None
                for run in _run_dirs(root / "scoring" / f"seed_{seed}" / "benchmark" / bench / slug):
                    path = run / "scores.json"
                    data = _read_json(path)
                    if data is not None and score_of(data, bench) is not None:
                        score = score_of(data, bench)
                        scores_path = path.relative_to(root).as_posix()
                        scores_sha = sha256_file(path)
                out.append(EvalSlice(slug=slug, seed=seed, benchmark=bench, rows_done=min(done, expected),
                                     rows_expected=expected, generation_complete=complete, score=score,
                                     scores_path=scores_path, scores_sha256=scores_sha))
    return out


def completion_receipts(root: Path, seeds: list[int]) -> dict[int, dict | None]:
    return {s: _read_json(root / "scoring" / f"score_campaign_completion_seed_{s}.json") for s in seeds}


def receipt_problems(root: Path, slices: list[EvalSlice], seeds: list[int]) -> list[str]:
    """Each per-seed completion receipt against the score files it names (one line per problem)."""
    problems = []
    by_key = {(s.seed, s.benchmark, s.slug): s for s in slices}
    for seed, receipt in completion_receipts(root, seeds).items():
        if receipt is None:
            problems.append(f"scoring/score_campaign_completion_seed_{seed}.json: missing")
            continue
        if receipt.get("completed_slices") != receipt.get("expected_slices"):
            problems.append(f"seed {seed}: {receipt.get('completed_slices')} of {receipt.get('expected_slices')} "
                            "slices completed")
        for entry in receipt.get("slices") or []:
            s = by_key.get((seed, entry.get("benchmark_key"), entry.get("model_slug")))
            if s is None:
                continue
            if entry.get("scores_sha256") != s.scores_sha256:
                problems.append(f"{s.scores_path or entry.get('scores_path')}: sha256 differs from the seed {seed} "
                                "completion receipt")
            if s.score is not None and isinstance(entry.get("score"), (int, float)) and \
                    abs(float(entry["score"]) - s.score) > 1e-9:
                problems.append(f"{s.scores_path}: score {s.score} differs from the receipt's {entry['score']}")
    return problems

"""The reproduced trace_eval_v1 scores beside the published ones (SPEC §3 verdicts).

Per (model, seed, benchmark) and per model overall: the difference and whether
it lies within max(2 x the canonical seed standard deviation, 1 point). The
tables are the release page's, built by the same code as `trace-tui report`.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from trace_tui.evaluator.layout import EvalSlice
from trace_tui.release import ReleaseLock
from trace_tui.verify import aggregate as agg
from trace_tui.verify.campaign import Comparison, compare, load_published
from trace_tui.verify.tables import ReleaseTables, build_tables


class OverallComparison(BaseModel):
    model: str
    score: float
    published: float | None
    difference: float | None
    tolerance: float | None
    verdict: str  # within | outside | unpublished


class Reproduction(BaseModel):
    slices: list[Comparison]
    unpublished: list[str]  # "model/seed/benchmark" reproduced with nothing published to compare
    overall: list[OverallComparison]
    tables: ReleaseTables | None

    @property
    def outside(self) -> list[Comparison]:
        return [c for c in self.slices if c.verdict == "outside"]

    def verdict_line(self) -> str:
        out = self.outside
        overall_out = [o for o in self.overall if o.verdict == "outside"]
        if not out and not overall_out:
            return (f"all {len(self.slices)} reproduced scores are within the canonical spread "
                    "(max(2 x seed std, 1 point))")
        names = [f"{c.model}/{c.seed}/{c.benchmark} ({c.difference:+.2f})" for c in out]
        names += [f"{o.model} overall ({o.difference:+.2f})" for o in overall_out]
        return f"{len(names)} outside the canonical spread: " + ", ".join(names)


def records_from_slices(slices: list[EvalSlice], model_of_slug: dict[str, str]) -> list[agg.ScoreRecord]:
    return [agg.ScoreRecord(model_of_slug.get(s.slug, s.slug), s.seed, s.benchmark, s.score)
            for s in slices if s.score is not None]


def reproduction(slices: list[EvalSlice], lock: ReleaseLock, release_dir: Path | None) -> Reproduction:
    """Compare what was scored with results.json (when the release copy is at hand)."""
    model_of_slug = {m.evaluator_slug: m.id for m in lock.models}
    records = records_from_slices(slices, model_of_slug)
    published = load_published(release_dir, lock) if release_dir is not None else {}
    comparisons, unpublished = [], []
    for r in records:
        c = compare("score", r.model_id, r.seed, r.benchmark_id, r.score, published)
        if c is None:
            unpublished.append(f"{r.model_id}/{r.seed}/{r.benchmark_id}")
        else:
            comparisons.append(c)
    overall = _overall(records, lock, release_dir)
    tables = build_tables(records, lock) if records else None
    return Reproduction(slices=comparisons, unpublished=unpublished, overall=overall, tables=tables)


def _overall(records: list[agg.ScoreRecord], lock: ReleaseLock, release_dir: Path | None) -> list[OverallComparison]:
    suite = [b.key for b in lock.trace_eval.benchmarks]
    complete: dict[str, list[int]] = {}
    have = {(r.model_id, r.seed, r.benchmark_id) for r in records}
    for model in dict.fromkeys(r.model_id for r in records):
        seeds = sorted({r.seed for r in records if r.model_id == model})
        full = [s for s in seeds if all((model, s, b) in have for b in suite)]
        if full:
            complete[model] = full
    published = _published_overall(release_dir, lock) if release_dir is not None else {}
    out = []
    for model, seeds in complete.items():
        mine = agg.overall_scores([r for r in records if r.model_id == model and r.seed in seeds], suite)
        score = agg.mean([mine[(model, s)] for s in seeds])
        pub = published.get(model)
        if pub is None:
            out.append(OverallComparison(model=model, score=score, published=None, difference=None,
                                         tolerance=None, verdict="unpublished"))
            continue
        values = [pub[s] for s in seeds if s in pub]
        ref = agg.mean(values)
        spread = agg.sample_std(list(pub.values())) or 0.0
        tol = max(2 * spread, 1.0)
        diff = score - ref
        out.append(OverallComparison(model=model, score=score, published=ref, difference=diff, tolerance=tol,
                                     verdict="within" if abs(diff) <= tol + 1e-12 else "outside"))
    return out


def _published_overall(release_dir: Path, lock: ReleaseLock) -> dict[str, dict[int, float]]:
    path = release_dir / lock.trace_eval.results_path
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, dict[int, float]] = {}
    for row in data["scores"]["overall_scores"]:
        out.setdefault(row["model_id"], {})[int(row["seed"])] = float(row["score"])
    return out

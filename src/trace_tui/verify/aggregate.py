"""How the release aggregates benchmark scores (SPEC §4), as pure functions over score records.

These are shared by release verification (recompute what results.json stores),
the report command, the TUI, and a reproduction campaign (aggregate reproduced
scores the same way the release did). They take plain score records — anything
with ``model_id``, ``seed``, ``benchmark_id`` and ``score`` (a mapping or an
object) — so a caller never has to build a results.json first.

Aggregation (fact):
- per benchmark: mean and *sample* (n-1) standard deviation over the seeds;
- per seed: overall = unweighted mean of the benchmark scores, category = mean
  of its benchmarks;
- overall / category summaries: mean ± sample std of the per-seed values;
- paired change: per seed ``d = value(model) - value(base)``, reported as
  mean(d) ± sample std(d).

Sums use ``math.fsum`` (correctly rounded), so every result is independent of
record and seed order, bit for bit.
"""

from __future__ import annotations

import math
from collections import namedtuple
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from trace_tui.verify.record import FrozenRecord

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any


class ScoreRecord(namedtuple("ScoreRecord", "model_id seed benchmark_id score")):
    """model_id (str), seed (int), benchmark_id (str), score (float)."""

    __slots__ = ()


# Frozen records, not pydantic models: computed here from typed numbers (never parsed from
# outside), thousands per `trace-tui verify`, whose timed path must not import pydantic at all.
class Summary(FrozenRecord):
    """mean ± sample standard deviation over seeds; ``stddev`` is None with fewer than 2 seeds."""

    __slots__ = ("mean", "stddev", "n")
    mean: float
    stddev: float | None
    n: int


class PairedDelta(FrozenRecord):
    __slots__ = ("mean", "stddev", "seed_values")
    mean: float
    stddev: float | None
    seed_values: dict[int, float]


def as_records(rows: Iterable[Any]) -> list[ScoreRecord]:
    """Normalize mappings or objects with the four fields into ScoreRecords."""
    out: list[ScoreRecord] = []
    for r in rows:
        t = type(r)
        if t is ScoreRecord:  # exact-type tests first: an ABC isinstance per record is the slow part
            out.append(r)
        elif t is dict or (not hasattr(r, "model_id") and isinstance(r, Mapping)):
            out.append(ScoreRecord(str(r["model_id"]), int(r["seed"]), str(r["benchmark_id"]), float(r["score"])))
        else:
            out.append(ScoreRecord(str(r.model_id), int(r.seed), str(r.benchmark_id), float(r.score)))
    return out


def mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("mean of no values")
    return math.fsum(values) / len(values)


def sample_std(values: Sequence[float]) -> float | None:
    """Sample (n-1) standard deviation; None for fewer than two values (no spread measured)."""
    n = len(values)
    if n < 2:
        return None
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))


def summarize(values: Sequence[float]) -> Summary:
    return Summary(mean=mean(values), stddev=sample_std(values), n=len(values))


def index(records: Iterable[Any] | dict[tuple[str, int, str], float]) -> dict[tuple[str, int, str], float]:
    """(model, seed, benchmark) -> score; a duplicate key is an error (the caller checked completeness).

    Given an index already (a dict), returns it: a caller computing several aggregates over the
    same scores indexes them once and passes the index to each function here.
    """
    if type(records) is dict:
        return records
    out: dict[tuple[str, int, str], float] = {}
    for r in as_records(records):
        key = (r.model_id, r.seed, r.benchmark_id)
        if key in out:
            raise ValueError(f"duplicate score for {key[0]}/{key[1]}/{key[2]}")
        out[key] = r.score
    return out


def _seeds_of(scores: Mapping[tuple[str, int, str], float], model: str) -> list[int]:
    return sorted({s for (m, s, _b) in scores if m == model})


def benchmark_summaries(records: Iterable[Any]) -> dict[tuple[str, str], Summary]:
    """(model, benchmark) -> mean ± sample std over that model's seeds."""
    by: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for (m, s, b), v in index(records).items():
        by.setdefault((m, b), []).append((s, v))
    return {k: summarize([v for _s, v in sorted(vals)]) for k, vals in by.items()}


def overall_scores(records: Iterable[Any], benchmarks: Sequence[str] | None = None) -> dict[tuple[str, int], float]:
    """(model, seed) -> unweighted mean of that seed's benchmark scores (all, or ``benchmarks``)."""
    scores = index(records)
    by: dict[tuple[str, int], list[float]] = {}
    wanted = set(benchmarks) if benchmarks is not None else None
    for (m, s, b), v in sorted(scores.items()):
        if wanted is None or b in wanted:
            by.setdefault((m, s), []).append(v)
    return {k: mean(v) for k, v in by.items()}


def category_scores(records: Iterable[Any], categories: Mapping[str, Sequence[str]]) -> dict[tuple[str, int, str], float]:
    """(model, seed, category) -> unweighted mean of the category's benchmarks for that seed."""
    scores = index(records)
    out: dict[tuple[str, int, str], float] = {}
    pairs = sorted({(m, s) for (m, s, _b) in scores})
    for m, s in pairs:
        for cat, members in categories.items():
            vals = [scores[(m, s, b)] for b in members if (m, s, b) in scores]
            if vals:
                out[(m, s, cat)] = mean(vals)
    return out


def _summaries_by(values: Mapping[tuple, float], key_of) -> dict:
    grouped: dict[Any, list[tuple[int, float]]] = {}
    for k, v in values.items():
        grouped.setdefault(key_of(k), []).append((k[1], v))
    return {k: summarize([v for _s, v in sorted(vals)]) for k, vals in grouped.items()}


def category_summaries(records: Iterable[Any], categories: Mapping[str, Sequence[str]], *,
                       per_seed: Mapping[tuple[str, int, str], float] | None = None) -> dict[tuple[str, str], Summary]:
    """(model, category) -> mean ± sample std of the per-seed category scores (``per_seed``, when the
    caller has ``category_scores(records, categories)`` already)."""
    return _summaries_by(category_scores(records, categories) if per_seed is None else per_seed,
                         lambda k: (k[0], k[2]))


def overall_summaries(records: Iterable[Any], benchmarks: Sequence[str] | None = None, *,
                      per_seed: Mapping[tuple[str, int], float] | None = None) -> dict[str, Summary]:
    """model -> mean ± sample std of the per-seed overall scores (``per_seed``, when the caller has
    ``overall_scores(records, benchmarks)`` already)."""
    return _summaries_by(overall_scores(records, benchmarks) if per_seed is None else per_seed, lambda k: k[0])


def paired(values: Mapping[int, float], base: Mapping[int, float]) -> PairedDelta:
    """Paired change over the seeds both sides have: d_seed = value - base."""
    seeds = sorted(set(values) & set(base))
    if not seeds:
        raise ValueError("no seed in common between the model and its base")
    d = {s: values[s] - base[s] for s in seeds}
    ds = [d[s] for s in seeds]
    return PairedDelta(mean=mean(ds), stddev=sample_std(ds), seed_values=d)


def overall_delta(records: Iterable[Any], model: str, base: str, benchmarks: Sequence[str] | None = None, *,
                  overall: Mapping[tuple[str, int], float] | None = None) -> PairedDelta:
    """Paired change of the per-seed overall score of ``model`` against ``base``.

    ``overall``: ``overall_scores(records, benchmarks)`` when the caller has it already (it pairs
    several models over the same scores)."""
    ov = overall_scores(records, benchmarks) if overall is None else overall
    return paired({s: v for (m, s), v in ov.items() if m == model}, {s: v for (m, s), v in ov.items() if m == base})


def seed_scores(records: Iterable[Any]) -> dict[tuple[str, str], dict[int, float]]:
    """(model, benchmark) -> {seed: score}."""
    by: dict[tuple[str, str], dict[int, float]] = {}
    for (m, s, b), v in index(records).items():
        by.setdefault((m, b), {})[s] = v
    return by


def benchmark_deltas(records: Iterable[Any], model: str, base: str, *,
                     by_seed: Mapping[tuple[str, str], Mapping[int, float]] | None = None) -> dict[str, PairedDelta]:
    """benchmark -> paired change of ``model`` against ``base`` on that benchmark.

    ``by_seed``: ``seed_scores(records)`` when the caller has it already."""
    by = seed_scores(records) if by_seed is None else by_seed
    out: dict[str, PairedDelta] = {}
    for (m, b), mine in by.items():
        theirs = by.get((base, b), {})
        if m == model and set(mine) & set(theirs):
            out[b] = paired(mine, theirs)
    return out

"""Aggregation (SPEC §4) as properties, and against every figure results.json stores."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from trace_tui.verify import aggregate as agg

scores = st.floats(min_value=0.0, max_value=100.0, allow_nan=False, allow_infinity=False)
SEEDS = [42, 43, 44]


@st.composite
def score_sets(draw, models=("base", "trained"), n_bench=(1, 6), n_seeds=(2, 4)):
    benches = [f"b{i}" for i in range(draw(st.integers(*n_bench)))]
    seeds = draw(st.lists(st.integers(0, 10_000), min_size=n_seeds[0], max_size=n_seeds[1], unique=True))
    recs = [agg.ScoreRecord(m, s, b, draw(scores)) for m in models for s in seeds for b in benches]
    return recs, benches, seeds


@settings(max_examples=60, deadline=None)
@given(score_sets(), st.randoms(use_true_random=False))
def test_record_and_seed_order_do_not_matter(data, rnd) -> None:
    recs, benches, _seeds = data
    shuffled = list(recs)
    rnd.shuffle(shuffled)
    cats = {"c0": benches[: len(benches) // 2 or 1], "c1": benches[len(benches) // 2 or 1:]}
    cats = {k: v for k, v in cats.items() if v}
    # Bit-for-bit: fsum is correctly rounded, so order cannot change a single ulp.
    assert agg.benchmark_summaries(recs) == agg.benchmark_summaries(shuffled)
    assert agg.overall_summaries(recs) == agg.overall_summaries(shuffled)
    assert agg.category_summaries(recs, cats) == agg.category_summaries(shuffled, cats)
    assert agg.overall_delta(recs, "trained", "base") == agg.overall_delta(shuffled, "trained", "base")
    assert agg.benchmark_deltas(recs, "trained", "base") == agg.benchmark_deltas(shuffled, "trained", "base")


@settings(max_examples=80, deadline=None)
@given(st.lists(scores, min_size=2, max_size=8))
def test_sample_standard_deviation_uses_n_minus_1(values) -> None:
    s = agg.sample_std(values)
    assert s is not None
    assert math.isclose(s, statistics.stdev(values), rel_tol=1e-9, abs_tol=1e-9)
    if len(set(values)) > 1:
        # Strictly larger than the population (n) deviation.
        assert s > statistics.pstdev(values) or math.isclose(s, statistics.pstdev(values), abs_tol=1e-12)
    assert agg.sample_std(values[:1]) is None  # one seed: no spread measured, never a 0 that looks like one


@settings(max_examples=60, deadline=None)
@given(score_sets(n_seeds=(2, 4)))
def test_paired_deltas_are_per_seed_differences(data) -> None:
    recs, benches, seeds = data
    ov = agg.overall_scores(recs)
    d = agg.overall_delta(recs, "trained", "base")
    per_seed = {s: ov[("trained", s)] - ov[("base", s)] for s in seeds}
    assert d.seed_values == per_seed
    assert math.isclose(d.mean, statistics.fmean(per_seed.values()), abs_tol=1e-9)
    assert math.isclose(d.stddev, statistics.stdev(per_seed.values()), abs_tol=1e-9)
    # The paired mean change equals the difference of the means (linearity) ...
    om = agg.overall_summaries(recs)
    assert math.isclose(d.mean, om["trained"].mean - om["base"].mean, abs_tol=1e-9)
    # ... and per benchmark likewise, on the same seeds.
    bd = agg.benchmark_deltas(recs, "trained", "base")
    bs = agg.benchmark_summaries(recs)
    assert set(bd) == set(benches)
    for b in benches:
        assert math.isclose(bd[b].mean, bs[("trained", b)].mean - bs[("base", b)].mean, abs_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.lists(scores, min_size=12, max_size=12), st.lists(scores, min_size=12, max_size=12))
def test_overall_is_the_mean_of_equal_size_category_means(a, b) -> None:
    benches = [f"b{i}" for i in range(12)]
    recs = [agg.ScoreRecord("m", 42, k, v) for k, v in zip(benches, a)]
    recs += [agg.ScoreRecord("m", 43, k, v) for k, v in zip(benches, b)]
    cats = {f"c{i}": benches[4 * i: 4 * i + 4] for i in range(3)}
    cs = agg.category_scores(recs, cats)
    for seed in (42, 43):
        overall = agg.overall_scores(recs)[("m", seed)]
        assert math.isclose(overall, statistics.fmean(cs[("m", seed, c)] for c in cats), abs_tol=1e-9)


def test_records_may_be_mappings_or_objects() -> None:
    rows = [{"model_id": "m", "seed": s, "benchmark_id": "b", "score": v} for s, v in ((42, 10.0), (43, 20.0))]
    assert agg.benchmark_summaries(rows)[("m", "b")] == agg.Summary(mean=15.0, stddev=math.sqrt(50.0), n=2)


def test_duplicate_records_are_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="duplicate score for m/42/b"):
        agg.index([agg.ScoreRecord("m", 42, "b", 1.0), agg.ScoreRecord("m", 42, "b", 2.0)])


def test_recomputes_every_published_figure(trace_release_dir: Path) -> None:
    data = json.loads((trace_release_dir / "rlvr/evaluation/trace_eval/results.json").read_text())
    suite = json.loads((trace_release_dir / "rlvr/evaluation/trace_eval/suite.v1.json").read_text())
    recs = data["scores"]["benchmark_scores"]
    random.Random(0).shuffle(recs)
    s = data["scores"]
    bs = agg.benchmark_summaries(recs)
    for x in s["benchmark_summaries"]:
        r = bs[(x["model_id"], x["benchmark_id"])]
        assert abs(r.mean - x["mean"]) <= 1e-10 and abs(r.stddev - x["stddev"]) <= 1e-10
    ov = agg.overall_summaries(recs)
    for x in s["overall_summaries"]:
        assert abs(ov[x["model_id"]].mean - x["mean"]) <= 1e-10
        assert abs(ov[x["model_id"]].stddev - x["stddev"]) <= 1e-10
    cs = agg.category_summaries(recs, suite["categories"])
    for x in s["category_summaries"]:
        assert abs(cs[(x["model_id"], x["category_name"])].mean - x["mean"]) <= 1e-10
    for c in data["comparisons"]:
        d = agg.overall_delta(recs, c["model_id"], c["base_model_id"])
        assert abs(d.mean - c["overall_delta"]["mean"]) <= 1e-10
        assert abs(d.stddev - c["overall_delta"]["stddev"]) <= 1e-10
        bd = agg.benchmark_deltas(recs, c["model_id"], c["base_model_id"])
        for x in c["benchmark_deltas"]:
            assert abs(bd[x["benchmark_id"]].mean - x["mean"]) <= 1e-10

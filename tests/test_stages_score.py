"""The score worker: accuracy over all rows (unresolved rows are wrong), breakdowns, the
published comparison of SPEC §3 on the real results.v1.json, and its recomputation."""

from __future__ import annotations

from pathlib import Path

import pytest

from stages_support import run_worker


def row(i, kind, ref, final, value, task="t1", domain="d1") -> dict:
    return {"index": i, "instance_id": f"id{i}", "domain": domain, "task": task, "answer_type": kind,
            "answer_gt": ref, "final": final, "value": value}


ROWS = [
    row(0, "integer", 42, "found", 42),
    row(1, "integer", 42, "found", 42.0, task="t2"),  # integral float equals the int
    row(2, "string", "Harbor", "judged", "  harbor ", domain="d2"),  # trimmed, case-insensitive
    row(3, "option_letter", "C", "found", "D", domain="d2"),
    row(4, "number", 2.5, "unresolved", None, task="t2"),  # unresolved: wrong, still counted
    row(5, "number", 0.1, "found", 0.10000001),  # no numeric tolerance
]


def test_score_rows_counts_unresolved_as_wrong() -> None:
    from trace_tui.stages.score import score_rows

    s = score_rows(ROWS)
    assert (s["correct"], s["total"], s["unresolved"], s["judged"]) == (3, 6, 1, 1)
    assert s["accuracy"] == 50.0
    assert s["by_task"] == {"t1": {"correct": 2, "total": 4, "accuracy": 50.0},
                            "t2": {"correct": 1, "total": 2, "accuracy": 50.0}}
    assert s["by_domain"]["d2"] == {"correct": 1, "total": 2, "accuracy": 50.0}
    assert s["rows"] == {"0": True, "1": True, "2": True, "3": False, "4": False, "5": False}


def test_published_verdict_on_the_real_results(trace_release_dir: Path) -> None:
    from trace_tui.stages.score import binomial_interval, compare_published, published_results

    pub = published_results(trace_release_dir / "rlvr/evaluation/trace_validation/results.v1.json")
    assert len(pub) == 8 and pub["trace-qwen2.5-vl-7b"] == 51.55
    lo, hi = binomial_interval(51.55, 2000)
    assert hi - 51.55 == pytest.approx(1.96 * (0.5155 * 0.4845 / 2000) ** 0.5 * 100)
    inside = compare_published(50.0, pub["trace-qwen2.5-vl-7b"], 2000)
    assert inside["inside"] and inside["difference"] == pytest.approx(-1.55)
    outside = compare_published(47.0, pub["trace-qwen2.5-vl-7b"], 2000)
    assert not outside["inside"] and outside["verdict"] == "outside the 95% interval"
    assert compare_published(lo, 51.55, 2000)["inside"]  # the bounds belong to the interval


def write_rows(campaign: Path, rel: str, rows: list[dict]) -> None:
    from trace_tui.common.atomic import atomic_write_json

    for r in rows:
        atomic_write_json(campaign / rel / "rows" / f"{r['index']:06d}.json", r)


def score_job(**extra) -> dict:
    return {"step": "score", "slice": {"model": "trace-qwen2.5-vl-3b", "seed": 42, "benchmark": "trace-validation"},
            "upstream_outputs": {"extract": "outputs/extract/s"}, "output_dir": "outputs/score/s", **extra}


def test_score_worker_record_metric_and_recomputation(monkeypatch, tmp_path, trace_release_dir) -> None:
    from trace_tui.stages import score
    from trace_tui.verify.campaign import recomputer_for

    write_rows(tmp_path, "outputs/extract/s", ROWS)
    job = score_job(benchmark={"key": "trace-validation", "route": "trace_validation"}, total=6,
                    paths={"published": str(trace_release_dir / "rlvr/evaluation/trace_validation/results.v1.json")})
    record, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", score.run, job)
    assert record["accuracy"] == 50.0
    assert record["published"]["published"] == 41.05 and record["published"]["n"] == 2000
    assert not record["published"]["inside"]  # 50% vs 41.05%: outside, reported as information
    metric = [e for e in events if e["type"] == "metric"]
    assert metric == [{"type": "metric", "name": "score", "value": 50.0, "model": "trace-qwen2.5-vl-3b", "seed": 42,
                       "benchmark": "trace-validation"}]
    # verify --campaign finds the recomputer by the step kind (the worker module).
    fn = recomputer_for("trace_tui.stages.score")
    content = {"outputs": {"outputs/score/s/score.json": {}}}
    assert fn(tmp_path, content) == 50.0
    # A changed row no longer recomputes to the record: the recomputer says which field.
    bad = dict(ROWS[3], value="C")
    write_rows(tmp_path, "outputs/extract/s", [bad])
    with pytest.raises(ValueError, match="accuracy recorded 50.0"):
        fn(tmp_path, content)


def test_score_refuses_a_partial_extraction(monkeypatch, tmp_path) -> None:
    from trace_tui.stages import score
    from trace_tui.stages.jobs import JobError

    write_rows(tmp_path, "outputs/extract/s", ROWS[:4])
    with pytest.raises(JobError, match="holds 4 extracted rows, the slice has 6"):
        run_worker(monkeypatch, tmp_path, tmp_path / "store", score.run, score_job(total=6))


def test_score_finds_the_published_accuracies_in_the_store(monkeypatch, tmp_path, trace_release_dir) -> None:
    """No explicit path: the worker reads results.v1.json from the release entry of the store, the way
    a validation campaign runs (the entry is staged here from the real release copy)."""
    from trace_tui.release import release_lock
    from trace_tui.stages import score
    from trace_tui.store.manifest import Source
    from trace_tui.store.names import release_entry
    from trace_tui.store.store import Store

    lock = release_lock()
    store = Store(tmp_path / "store")
    with store.staging(release_entry(lock)) as st:
        st.add(lock.trace_validation.results_path, trace_release_dir / lock.trace_validation.results_path)
        st.commit(revision=lock.upstream.commit, source=Source(type="import", imported_from=str(trace_release_dir)))
    write_rows(tmp_path, "outputs/extract/s", ROWS)
    job = score_job(benchmark={"key": "trace-validation", "route": "trace_validation"}, total=6)
    record, events = run_worker(monkeypatch, tmp_path, tmp_path / "store", score.run, job)
    assert record["published"]["published"] == 41.05
    logs = [e["message"] for e in events if e["type"] == "log"]
    assert any("published 41.05% (+8.95), outside the 95% interval" in m for m in logs)
    # The demo (or anything that is not TRACE validation) has no published value.
    demo = score_job(benchmark={"key": "counting", "route": "demo"}, total=6)
    record, _ = run_worker(monkeypatch, tmp_path, tmp_path / "store", score.run, demo)
    assert "published" not in record

"""A keep_loaded step (the judge's extraction): one worker per GPU group loads its model once and
serves its share of the slices in turn, while every slice stays its own job — receipted as soon as
the worker reports it done, resumed on its own, shown on its own.

The engine with the local runtime (real subprocesses of the selftest worker, whose `rows` mode
serves a batch after one "model loaded" line, as trace_tui.stages.extract does with its judge).
No Docker here; GPU ids are only labels (CUDA_VISIBLE_DEVICES), the scheduling is real.
"""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from test_engine_support import content_of, make_recipe, resolved_for, selftest_step

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.events import Log, Progress, SliceState
from trace_tui.engine.planner import PlannedJob, deal_batches
from trace_tui.engine.printer import HeadlessPrinter
from trace_tui.engine.runner import Runner, RunResult
from trace_tui.engine.status import campaign_status
from trace_tui.recipe.catalog import Step
from trace_tui.runtime.local import LocalRuntime
from trace_tui.tui.progress import ProgressModel
from trace_tui.verify.campaign import verify_campaign

LOADED = "selftest: model loaded"


def kept(step: Step) -> Step:
    return Step.model_validate({**step.model_dump(), "keep_loaded": True})


def recipe(*args: str, **needs):
    return make_recipe([kept(selftest_step("gen", "rows", *args, image=None, **needs))])


def run_campaign(tmp: Path, resolved, name: str = "c", on_event=None, **kw) -> tuple[RunResult, list]:
    events: list = []
    with Campaign(tmp / name) as c:
        runner = Runner(resolved, c, LocalRuntime(), store=tmp / "store", **kw)

        def sink(ev) -> None:
            events.append(ev)
            if on_event is not None:
                on_event(runner, ev)

        result = runner.run(sink)
    return result, events


def loads(events: list) -> int:
    return sum(1 for e in events if isinstance(e, Log) and e.message == LOADED)


def states(events: list, state: str) -> list[str]:
    return [e.benchmark for e in events if isinstance(e, SliceState) and e.state == state]


def receipt(tmp: Path, bench: str, name: str = "c") -> dict:
    return json.loads((tmp / name / f"receipts/gen/tiny-a/42/{bench}.json").read_text())


BENCHES = {"t1": 3, "t2": 8, "t3": 2}


def test_one_worker_loads_once_and_every_slice_is_its_own_job(tmp_path: Path) -> None:
    result, events = run_campaign(tmp_path, resolved_for(recipe(), benchmarks=BENCHES))
    assert result.exit_code == 0, result.message
    assert loads(events) == 1  # one per-slice container each would have been 3 workers
    assert result.jobs_done == 3 and result.rows_done == 13
    # Each slice is announced, run and completed on its own, in turn, by the one worker.
    assert sorted(states(events, "running")) == ["t1", "t2", "t3"]
    assert sorted(states(events, "completed")) == ["t1", "t2", "t3"]
    for bench, rows in BENCHES.items():
        r = receipt(tmp_path, bench)
        assert r["content"]["rows"] == rows and r["content"]["slice"] == f"tiny-a/42/{bench}"
        assert r["circumstance"]["worker"] == "_worker-0"
    batch = json.loads((tmp_path / "c/jobs/gen/_worker-0/job.json").read_text())
    assert [s["slice"]["benchmark"] for s in batch["batch"]] == ["t1", "t2", "t3"]
    st = campaign_status(tmp_path / "c")
    assert st["complete"] and [s["state"] for s in st["slices"]] == ["completed"] * 3
    assert verify_campaign(tmp_path / "c").ok()
    # What the TUI's grid and the headless printer make of the events: a cell and a line per slice.
    grid = ProgressModel()
    grid.apply_all(events)
    assert {(c.benchmark, c.state, c.done, c.total) for c in grid.step_cells["gen"].values()} == \
           {(b, "completed", n, n) for b, n in BENCHES.items()}
    out = io.StringIO()
    printer = HeadlessPrinter(out)
    for ev in events:
        printer(ev)
    for b, n in BENCHES.items():
        assert f"{b} running" in out.getvalue() and f"{b} completed ({n}/{n} rows" in out.getvalue()
    # The same recipe without keep_loaded: the same outputs and receipt contents, one worker per slice.
    plain = make_recipe([selftest_step("gen", "rows", image=None)])
    again, events2 = run_campaign(tmp_path, resolved_for(plain, benchmarks=BENCHES), name="plain")
    assert again.exit_code == 0 and loads(events2) == 3
    assert content_of(tmp_path / "c") == content_of(tmp_path / "plain")


def test_a_crash_keeps_finished_slices_and_a_rerun_does_only_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = resolved_for(recipe(), benchmarks=BENCHES)
    monkeypatch.setenv("SELFTEST_FAIL_AT", "5")  # t1 (3 rows) finishes; t2 dies at row 5; t3 never starts
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 1
    assert states(events, "completed") == ["t1"]
    assert receipt(tmp_path, "t1")["content"]["rows"] == 3
    assert not (tmp_path / "c/receipts/gen/tiny-a/42/t2.json").exists()
    assert "slice tiny-a/42/t2 failed: exit code 4" in result.failed[0]
    assert "failing at row 5" in result.failed[0] and "logs/gen/_worker-0.log" in result.failed[0]
    assert any("slice tiny-a/42/t3 not run: its group's worker ended first" in f for f in result.failed)
    by = {s["benchmark"]: s for s in campaign_status(tmp_path / "c")["slices"]}
    assert (by["t1"]["state"], by["t2"]["state"], by["t2"]["done"], by["t3"]["state"]) == \
           ("completed", "failed", 5, "failed")
    monkeypatch.delenv("SELFTEST_FAIL_AT")
    result, events = run_campaign(tmp_path, resolved)
    assert result.exit_code == 0, result.message
    assert "t1" not in states(events, "running") + states(events, "resumed")
    resumed = [e for e in events if isinstance(e, SliceState) and e.state == "resumed"]
    assert [(e.benchmark, e.done) for e in resumed] == [("t2", 5)]
    assert states(events, "running") == ["t3"] and loads(events) == 1
    batch = json.loads((tmp_path / "c/jobs/gen/_worker-0/job.json").read_text())
    assert [s["slice"]["benchmark"] for s in batch["batch"]] == ["t2", "t3"]
    clean, _ = run_campaign(tmp_path, resolved, name="clean")
    assert clean.exit_code == 0
    assert content_of(tmp_path / "c") == content_of(tmp_path / "clean")
    assert verify_campaign(tmp_path / "c").ok()


def test_coalesced_progress_gives_each_slice_of_a_batch_its_exact_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker holds back every count but the first, the completing one and the one before any
    other event or its exit (an interval no run reaches): each slice still ends at its own count."""
    monkeypatch.setenv("TRACE_TUI_PROGRESS_INTERVAL_S", "3600")
    monkeypatch.setenv("SELFTEST_FAIL_AT", "5")  # t1 (3 rows) finishes; t2 dies at row 5, with no status line
    result, events = run_campaign(tmp_path, resolved_for(recipe(), benchmarks=BENCHES))
    assert result.exit_code == 1
    counts: dict = {}
    for e in events:
        if isinstance(e, Progress):
            counts.setdefault(e.benchmark, []).append(e.done)
    assert counts == {"t1": [0, 3], "t2": [0, 5]}
    by = {s["benchmark"]: s for s in campaign_status(tmp_path / "c")["slices"]}
    assert (by["t1"]["state"], by["t1"]["done"], by["t2"]["state"], by["t2"]["done"]) == ("completed", 3, "failed", 5)


def test_cancel_inside_a_batch_keeps_the_finished_slice(tmp_path: Path) -> None:
    resolved = resolved_for(recipe("--delay", "0.05"), benchmarks={"t1": 3, "t2": 400, "t3": 2})

    def cancel_in_t2(runner: Runner, ev) -> None:
        if isinstance(ev, Progress) and ev.benchmark == "t2" and ev.done == 5:
            threading.Thread(target=runner.cancel).start()

    result, events = run_campaign(tmp_path, resolved, on_event=cancel_in_t2)
    assert result.exit_code == 130
    by = {s["benchmark"]: s for s in campaign_status(tmp_path / "c")["slices"]}
    assert by["t1"]["state"] == "completed" and by["t2"]["state"] == "cancelled" and 5 <= by["t2"]["done"] < 400
    assert by["t3"]["state"] == "pending"
    assert (tmp_path / "c/receipts/gen/tiny-a/42/t1.json").is_file()


def test_each_gpu_group_gets_one_worker_with_its_share(tmp_path: Path) -> None:
    step = kept(selftest_step("gen", "rows", image="infer", gpus=1))
    resolved = resolved_for(make_recipe([step]), seeds=[1, 2], benchmarks={"t1": 4, "t2": 2, "t3": 2})
    result, events = run_campaign(tmp_path, resolved, gpu_groups=[[2], [5]])
    assert result.exit_code == 0, result.message
    assert loads(events) == 2  # two groups, two workers, one load each
    served: dict[int, set] = {}
    for i, host in ((0, 2), (1, 5)):
        batch = json.loads((tmp_path / f"c/jobs/gen/_worker-{i}/job.json").read_text())
        assert batch["host_gpus"] == [host] and all(s["host_gpus"] == [host] for s in batch["batch"])
        served[host] = {s["input_hash"] for s in batch["batch"]}
    assert not served[2] & served[5] and len(served[2] | served[5]) == 6
    rows = {h: 0 for h in served}
    for rec in (tmp_path / "c/receipts/gen").rglob("*.json"):
        r = json.loads(rec.read_text())
        host = r["circumstance"]["gpus"][0]
        assert r["circumstance"]["worker"] == f"_worker-{(2, 5).index(host)}"
        assert r["content"]["input_hash"] in served[host]
        rows[host] += r["content"]["rows"]
    assert rows == {2: 8, 5: 8}  # 16 rows dealt evenly: largest slice first, to the least loaded worker


def test_deal_batches_balances_rows_and_keeps_the_plan_order() -> None:
    jobs = [PlannedJob(step=None, position=0, slice=f"m/1/{b}", model="m", seed=1, benchmark=b, inputs={},
                       input_hash=b, total=n) for b, n in (("a", 2), ("b", 10), ("c", 3), ("d", 6), ("e", 1))]
    batches = deal_batches(jobs, 2)
    assert [[j.benchmark for j in b] for b in batches] == [["b", "e"], ["a", "c", "d"]]
    assert [[j.benchmark for j in b] for b in deal_batches(jobs, 1)] == [["a", "b", "c", "d", "e"]]
    assert [len(b) for b in deal_batches(jobs[:1], 3)] == [1, 0, 0]


def test_keep_loaded_needs_a_per_slice_step_and_a_batch_worker() -> None:
    base = selftest_step("gen", "rows", image=None).model_dump()
    with pytest.raises(ValueError, match="set per_slice: true"):
        Step.model_validate({**base, "per_slice": False, "keep_loaded": True})
    with pytest.raises(ValueError, match="runs one slice per job"):
        Step.model_validate({**base, "run": ["trace_tui.stages.generate"], "keep_loaded": True})

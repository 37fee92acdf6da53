"""The run screen's data: ProgressModel (pure, clock injected) and the thread-safe EventPump."""

from __future__ import annotations

import threading

from trace_tui.engine.events import Artifact, Log, Progress, RunState, SliceState, Status, StepState
from trace_tui.tui.progress import EventPump, ProgressModel, format_duration, format_rate


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_progress_rates_and_eta_from_the_first_event_seen() -> None:
    clock = Clock()
    m = ProgressModel(clock=clock)
    m.add_slice("m", "b", 42, total=100)
    m.apply(Progress(step="gen", model="m", seed=42, benchmark="b", phase="generate", done=40, total=100))
    cell = m.slices[("m", "b", 42)]
    assert cell.rate() is None and cell.eta() is None  # resumed at 40: no speed claimed yet
    clock.t += 2.0
    m.apply(Progress(step="gen", model="m", seed=42, benchmark="b", phase="generate", done=60, total=100))
    assert cell.rate() == 10.0 and cell.eta() == 4.0
    assert m.totals() == (60, 100) and m.overall_rate() == 10.0 and m.overall_eta() == 4.0
    assert ("m", "b", 42) in m.dirty_slices
    assert m.steps["gen"].total == 0  # per-slice progress goes to the grid, not the step line
    m.apply(Progress(step="prep", phase="prepare", done=1, total=2))  # a whole-step job
    assert (m.steps["prep"].done, m.steps["prep"].total) == (1, 2) and len(m.slices) == 1


def test_slice_and_step_states_logs_and_run_state() -> None:
    m = ProgressModel(clock=Clock())
    m.add_step("gen", "Generate")
    m.apply(StepState(step="gen", state="running"))
    assert m.running
    m.apply(SliceState(step="gen", model="m", seed=1, benchmark="b", state="completed", done=0, total=7, score=0.5))
    cell = m.slices[("m", "b", 1)]
    assert cell.complete and cell.done == 7 and cell.score == 0.5
    m.apply(SliceState(step="gen", state="running"))  # a whole-step job: no cell
    assert len(m.slices) == 1
    for i in range(2100):
        m.apply(Log(step="gen", message=f"line {i}"))
    m.apply(Log(step="gen", level="warning", message="careful"))
    step = m.steps["gen"]
    assert step.log_count == 2101 and len(step.logs) == 2000 and step.logs[-1] == "[warning] careful"
    m.apply(Artifact(step="gen", path="x", sha256="0" * 64, bytes=1))
    m.apply(Status(step="gen", state="completed", message="ok"))
    m.apply(StepState(step="gen", state="completed"))
    m.apply(RunState(state="completed", message="campaign complete"))
    assert not m.running and m.run_state == "completed" and step.artifacts == 1
    assert m.final_status is not None and m.final_status.message == "ok"


def test_formatting() -> None:
    assert format_duration(None) == "—" and format_duration(59) == "59s"
    assert format_duration(61) == "1m01s" and format_duration(3700) == "1h01m"
    assert format_rate(None) == "—" and format_rate(1234.5) == "1,234.5/s"


def test_pump_rings_once_per_batch_and_loses_nothing() -> None:
    clock = Clock()
    rings = []
    pump = EventPump(lambda: rings.append(1), min_interval=0.05, clock=clock)
    for i in range(1000):
        pump.push(i)
    assert len(rings) == 1  # not one per event
    assert pump.drain() == list(range(1000))
    pump.push("a")
    assert len(rings) == 1  # within min_interval of the last ring: the redraw timer drains it
    clock.t += 0.1
    pump.push("b")
    assert len(rings) == 2 and pump.drain() == ["a", "b"] and pump.drain() == []


def test_pump_is_thread_safe() -> None:
    pump = EventPump(lambda: None, min_interval=0.0)
    got: list[int] = []
    stop = threading.Event()

    def consumer() -> None:
        while not stop.is_set():
            got.extend(pump.drain())

    def producer(k: int) -> None:
        for i in range(20_000):
            pump.push(k * 100_000 + i)

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
    c = threading.Thread(target=consumer)
    c.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    c.join()
    got.extend(pump.drain())
    assert len(got) == 80_000 and len(set(got)) == 80_000 and pump.pushed == 80_000


def test_each_per_slice_step_has_its_own_cells_and_the_grid_follows_the_active_one() -> None:
    m = ProgressModel(clock=Clock())
    for step in ("generate", "extract"):
        for b in ("b1", "b2"):
            m.add_slice("m", b, 42, total=8, step=step)
    m.grid_step = "generate"
    for b in ("b1", "b2"):
        m.apply(Progress(step="generate", model="m", seed=42, benchmark=b, phase="generate", done=8, total=8))
    assert m.totals() == (16, 16)
    version = m.structure_version
    m.apply(SliceState(step="extract", model="m", seed=42, benchmark="b1", state="running", done=0, total=8))
    assert m.grid_step == "extract" and m.structure_version > version  # the grid redraws for extract
    assert m.totals() == (0, 16)
    assert all(c.done == 8 for c in m.step_cells["generate"].values())  # generate's cells are kept


def test_cluster_rows_say_where_a_shard_is_and_why_it_waits() -> None:
    """The Slurm run screen's table from the dict `status --json` prints for a sharded campaign (pure)."""
    from trace_tui.tui.progress import CLUSTER_COLUMNS, cluster_rows, cluster_summary

    def shard(sid, state, **kw):
        return {"id": sid, "slurm_state": state, "reason": "", "node": "", "exit_code": "", "campaign_state": "",
                "rows_done": 0, "rows_total": 1200, "rate": None, "eta_s": None, "complete": False,
                "log": f"/c/slurm/logs/shard-7_{sid}.log", "failures": [], **kw}

    st = {"shards": [shard("a", "RUNNING", node="gpu17", campaign_state="running", rows_done=300, rate=2.5,
                           eta_s=360.0),
                     shard("b", "PENDING", reason="Resources", campaign_state="not started"),
                     shard("c", "FAILED", exit_code="2:0", node="gpu03", campaign_state="failed",
                           failures=["generate m/1/b: exit 2"]),
                     shard("d", "COMPLETED", node="gpu04", campaign_state="complete", rows_done=1200, complete=True),
                     shard("e", "TIMEOUT", exit_code="0:15", node="gpu05", campaign_state="interrupted")],
          "finishing": [{"kind": "merge", "job_id": "8", "slurm_state": "PENDING", "reason": "Dependency",
                         "exit_code": "", "log": "/c/slurm/logs/merge-8.log"}],
          "shards_completed": 1, "shards_total": 5, "shard_by": "model-seed", "rows_done": 1500,
          "rows_total": 6000, "rate": 2.5, "eta_s": 1800.0, "complete": False}
    rows = {r[0]: r for r in cluster_rows(st)}
    assert all(len(r) == len(CLUSTER_COLUMNS) for r in rows.values())
    assert rows["a"] == ("a", "RUNNING", "on gpu17", "running", "300/1,200", "2.5/s", "6m00s",
                         "/c/slurm/logs/shard-7_a.log")
    assert rows["b"][1:3] == ("PENDING", "Resources")
    assert rows["c"][1:3] == ("FAILED (exit 2:0)", "on gpu03")
    assert rows["d"][1] == "COMPLETED" and rows["d"][6] == "done"
    assert rows["e"][1] == "TIMEOUT (exit 0:15)"
    assert rows["merge"][1:3] == ("PENDING", "Dependency") and rows["merge"][7] == "/c/slurm/logs/merge-8.log"
    summary = cluster_summary(st)
    assert summary.startswith("Slurm · 1/5 shards complete (by model-seed) · 1,500/6,000 rows · 2.5/s · ETA 30m00s")
    assert "failed: c: generate m/1/b: exit 2" in summary and "merged" not in summary


def test_scheduler_choice_from_the_form_and_back_to_flags() -> None:
    import pytest

    from trace_tui.errors import UsageError
    from trace_tui.tui.cluster_backend import SchedulerChoice

    c = SchedulerChoice.from_form("slurm", partition=" gpu ", account="", gpus_per_node="8", time="2-00:00:00",
                                  max_parallel="4", shard_by="")
    assert c.cli_args() == ["--scheduler", "slurm", "--partition", "gpu", "--gpus-per-node", "8", "--time",
                            "2-00:00:00", "--max-parallel", "4"]
    assert SchedulerChoice.from_form("none", partition="gpu").cli_args() == []
    for field, value, said in (("max_parallel", "0", "--max-parallel 0: give 1 or more"),
                               ("gpus_per_node", "two", "--gpus-per-node 'two' is not a whole number")):
        with pytest.raises(UsageError) as err:
            SchedulerChoice.from_form("slurm", **{field: value})
        assert said in err.value.line()

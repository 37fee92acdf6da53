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

"""What the run screen shows, as plain data updated one event at a time.

The runner can publish thousands of events per second. Widgets never see
events directly: the worker thread pushes them into an :class:`EventPump`,
which posts one doorbell message per batch; the screen drains the batch into a
:class:`ProgressModel` (cheap dict updates) and a timer redraws at most ten
times per second from the model. Nothing is dropped: the model always holds
the last state of every slice and step.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from trace_tui.engine import events as ev
from trace_tui.engine.events import Artifact, Log, Progress, Status, StepState

# Events added by the engine later are optional here, so the UI runs against any engine version.
SliceState = getattr(ev, "SliceState", None)
RunState = getattr(ev, "RunState", None)

SliceId = tuple[str, str, "int | None"]  # (model, benchmark, seed)

LOG_LINES_PER_STEP = 2000


@dataclass
class SliceProgress:
    model: str
    benchmark: str
    seed: int | None
    total: int = 0
    done: int = 0
    phase: str = ""
    state: str = "pending"
    score: float | None = None
    # Rate is measured from the first event seen in this session, so a resumed
    # slice does not claim the rows done before the resume as this session's speed.
    first_seen: float | None = None
    done_at_first: int = 0
    last_seen: float | None = None
    # When the runner started its job in this session (SliceState running): its start-up (a container,
    # a model to load) is part of the time its rows take, so rates and ETAs count it.
    started: float | None = None

    @property
    def since(self) -> float | None:
        """The start of this session's measurement: the job's start, else its first progress."""
        if self.started is not None and (self.first_seen is None or self.started <= self.first_seen):
            return self.started
        return self.first_seen

    def rate(self) -> float | None:
        if self.first_seen is None or self.last_seen is None:
            return None
        elapsed = self.last_seen - self.since  # type: ignore[operator]
        gained = self.done - self.done_at_first
        if elapsed <= 0 or gained <= 0:
            return None
        return gained / elapsed

    def eta(self) -> float | None:
        rate = self.rate()
        if rate is None:
            return None
        return max(self.total - self.done, 0) / rate

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.done >= self.total


@dataclass
class CampaignState:
    """What the campaign's own database says before a run starts (the numbers `trace-tui status` prints):
    pushed through the run's EventPump ahead of the runner's first event, so the grid starts from it."""

    events: list[Any]  # SliceState per job and per slice of a whole-step job
    step_states: dict[str, str]
    live: bool = False  # another process runs it now: its "running" steps are running
    keep: frozenset[str] = frozenset()  # steps the user chose to skip: they keep their "skipped"


def group_rate(cells: Iterable[SliceProgress], since: float | None = None) -> float | None:
    """Rows per second of a group of slices: the rows they gained in this session over the time from the
    first one's start (or SINCE, the step's, when earlier) to the last one's latest event. Slices of a step
    mostly run one after another, so adding up each slice's own rate would count the same seconds several
    times (and make the ETA short)."""
    measured = [c for c in cells if c.first_seen is not None and c.last_seen is not None]
    if not measured:
        return None
    start = min(c.since for c in measured)  # type: ignore[type-var]
    if since is not None:
        start = min(start, since)
    elapsed = max(c.last_seen for c in measured) - start  # type: ignore[type-var,operator]
    gained = sum(max(c.done - c.done_at_first, 0) for c in measured)
    if elapsed <= 0 or gained <= 0:
        return None
    return gained / elapsed


@dataclass
class StepProgress:
    id: str
    title: str = ""
    state: str = "pending"
    message: str = ""
    phase: str = ""
    done: int = 0
    total: int = 0
    logs: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES_PER_STEP))
    artifacts: int = 0
    log_count: int = 0  # lines ever appended (the deque keeps the last ones)
    started: float | None = None  # when it began running in this session (its rate counts from then)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"


def format_rate(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:,.1f}/s"


class ProgressModel:
    """The campaign's live state: steps, slices, logs. Pure; the clock is injected.

    Each per-slice step has its own cells (generate's 8/8 is not extract's 0/8); the grid
    shows one step's cells, ``grid_step``: the step that most recently reported slice progress.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.steps: dict[str, StepProgress] = {}
        self.step_cells: dict[str, dict[SliceId, SliceProgress]] = {}
        self.grid_step: str | None = None
        # the step the user chose to see in the grid (the step list): progress elsewhere does not take it away
        self.pinned_step: str | None = None
        self.template: dict[SliceId, int] = {}  # the planned slices and their rows (seed_model)
        self.models: list[str] = []
        self.benchmarks: dict[str, list[str]] = {}
        self.seeds: dict[str, list[int | None]] = {}
        self.final_status: Status | None = None
        self.run_state: str = ""  # planned | running | completed | failed | cancelled (RunState)
        self.run_message: str = ""
        self.events_applied = 0
        # Redraw bookkeeping: the structure version changes when rows/columns/tabs
        # appear; dirty_slices lists cells whose text changed since the last redraw.
        self.structure_version = 0
        self.dirty_slices: set[SliceId] = set()
        self.dirty = True
        self._started: float | None = None
        self.loading = False  # applying a campaign's recorded state (load_campaign), not live events

    # -- set-up ------------------------------------------------------------------
    def add_step(self, step_id: str, title: str = "", state: str = "pending") -> None:
        if step_id not in self.steps:
            self.steps[step_id] = StepProgress(id=step_id, title=title, state=state)
            self.structure_version += 1
            self.dirty = True

    @property
    def slices(self) -> dict[SliceId, SliceProgress]:
        """The cells of the step the grid shows."""
        return self.step_cells.get(self.grid_step or "", {})

    def pin_step(self, step_id: str | None) -> None:
        """Show STEP's cells until unpinned (None: the grid follows the step that reports progress again)."""
        self.pinned_step = step_id if step_id in self.step_cells else None
        if self.pinned_step is not None:
            self.show_step(self.pinned_step)

    def follow_step(self, step_id: str) -> None:
        if self.pinned_step is None:
            self.show_step(step_id)

    def show_step(self, step_id: str) -> None:
        if step_id != self.grid_step and step_id in self.step_cells:
            self.grid_step = step_id
            self.structure_version += 1  # the grid redraws every cell
            self.dirty_slices.clear()
            self.dirty = True

    def add_slice(self, model: str, benchmark: str, seed: int | None, total: int = 0,
                  step: str | None = None) -> SliceProgress:
        step = step or self.grid_step or "run"
        cells = self.step_cells.get(step)
        if cells is None:
            # A step that reports slice progress gets the whole planned matrix at once (the release
            # evaluator's generate step is one job that reports every slice), not only the slices seen so far.
            cells = self.step_cells[step] = {}
            for (m, b, sd), rows in self.template.items():
                cells[(m, b, sd)] = SliceProgress(model=m, benchmark=b, seed=sd, total=rows)
                self._register(m, b, sd)
        if self.grid_step is None:
            self.grid_step = step
        key = (model, benchmark, seed)
        cell = cells.get(key)
        if cell is None:
            cell = SliceProgress(model=model, benchmark=benchmark, seed=seed, total=total)
            cells[key] = cell
            self._register(model, benchmark, seed)
        return cell

    def _register(self, model: str, benchmark: str, seed: int | None) -> None:
        """Tabs (models), rows (benchmarks) and columns (seeds) of the grid, in the order first seen."""
        if model not in self.models:
            self.models.append(model)
            self.benchmarks[model] = []
            self.seeds[model] = []
        changed = False
        if benchmark not in self.benchmarks[model]:
            self.benchmarks[model].append(benchmark)
            changed = True
        if seed not in self.seeds[model]:
            self.seeds[model].append(seed)
            changed = True
        if changed:
            self.structure_version += 1
            self.dirty = True

    # -- events ------------------------------------------------------------------
    def apply(self, event: ev.Event) -> None:
        self.events_applied += 1
        self.dirty = True
        step_id = getattr(event, "step", None) or "run"
        if isinstance(event, Progress):
            now = self._clock()
            if self._started is None:
                self._started = now
            step = self._step(step_id)
            step.phase = event.phase
            if event.model is None and event.benchmark is None:
                # A whole-step job's own progress; per-slice progress lives in the grid instead.
                step.done, step.total = event.done, event.total
            else:
                cell = self.add_slice(event.model or "-", event.benchmark or step_id, event.seed, step=step_id)
                self.follow_step(step_id)
                if cell.first_seen is None:
                    cell.first_seen = now
                    cell.done_at_first = event.done
                cell.last_seen = now
                cell.done, cell.total, cell.phase = event.done, event.total, event.phase
                self.dirty_slices.add((cell.model, cell.benchmark, cell.seed))
        elif isinstance(event, Log):
            step = self._step(step_id)
            step.logs.append(event.message if event.level in ("info", "output")
                             else f"[{event.level}] {event.message}")
            step.log_count += 1
        elif isinstance(event, StepState):
            step = self._step(step_id)
            # A resumed campaign's finished steps: the runner skips them because they are complete.
            kept = event.state == "skipped" and event.message == "already complete"
            if event.state == "running" and step.started is None:
                step.started = self._clock()
            step.state = "completed" if kept else event.state
            step.message = event.message
        elif isinstance(event, Status):
            step = self._step(step_id)
            step.message = event.message
            self.final_status = event
        elif isinstance(event, Artifact):
            self._step(step_id).artifacts += 1
        elif SliceState is not None and isinstance(event, SliceState):
            if event.model is None and event.benchmark is None:
                return  # a whole-step job: the step list shows it through StepState
            cell = self.add_slice(event.model or "-", event.benchmark or step_id, event.seed, step=step_id)
            if event.state in ("running", "resumed"):
                self.follow_step(step_id)
                if cell.started is None and cell.first_seen is None and not self.loading:
                    cell.started = self._clock()
            cell.state = event.state
            if event.total:
                cell.done, cell.total = event.done, event.total
            if event.state == "completed" and cell.total:
                cell.done = cell.total
            if event.score is not None:
                cell.score = event.score
            if step_id == self.grid_step:
                self.dirty_slices.add((cell.model, cell.benchmark, cell.seed))
        elif RunState is not None and isinstance(event, RunState):
            self.run_state = event.state
            self.run_message = event.message
        elif isinstance(event, CampaignState):
            self.load_campaign(event)

    def load_campaign(self, state: CampaignState) -> None:
        """Start from the campaign's recorded state: finished slices show their rows (not 0/N), each step
        its state, and the grid the last step (in recipe order) whose slices have started."""
        self.loading = True  # recorded states: nothing starts now
        try:
            for event in state.events:
                self.apply(event)
        finally:
            self.loading = False
        for cells in self.step_cells.values():
            for cell in cells.values():
                if cell.first_seen is None:
                    cell.done_at_first = cell.done  # rows done before this session are no one's speed
        started = [step_id for step_id, cells in self.step_cells.items()
                   if any(c.done or c.state != "pending" for c in cells.values())]
        started.sort(key=lambda step_id: list(self.steps).index(step_id) if step_id in self.steps else -1)
        if started:
            self.show_step(started[-1])
        for step_id, recorded in state.step_states.items():
            if step_id in state.keep:
                continue
            self.add_step(step_id)
            # "running" in the database of a campaign nobody runs now means it was interrupted.
            self.steps[step_id].state = "pending" if recorded == "running" and not state.live else recorded
        self.structure_version += 1  # every cell is redrawn
        self.dirty = True

    def apply_all(self, events: Iterable[Any]) -> None:
        for event in events:
            self.apply(event)

    def _step(self, step_id: str) -> StepProgress:
        step = self.steps.get(step_id)
        if step is None:
            self.add_step(step_id)
            step = self.steps[step_id]
        return step

    def stop_rates(self) -> None:
        """No run is measured now (it ended, or a new one starts): forget every rate, so none stays on screen."""
        for cells in self.step_cells.values():
            for cell in cells.values():
                cell.first_seen = cell.last_seen = cell.started = None
                cell.done_at_first = cell.done
        for step in self.steps.values():
            step.started = None
        self._started = None
        self.structure_version += 1  # every cell (and its row's rate and ETA) is redrawn
        self.dirty = True

    # -- summaries ---------------------------------------------------------------
    def totals(self, model: str | None = None) -> tuple[int, int]:
        cells = [c for c in self.slices.values() if model is None or c.model == model]
        return sum(c.done for c in cells), sum(c.total for c in cells)

    def overall_rate(self) -> float | None:
        """The shown step's rate: its rows over the time since it began running (see group_rate)."""
        step = self.steps.get(self.grid_step or "")
        return group_rate(self.slices.values(), since=step.started if step is not None else None)

    def overall_eta(self) -> float | None:
        rate = self.overall_rate()
        if rate is None:
            return None
        done, total = self.totals()
        return max(total - done, 0) / rate

    @property
    def running(self) -> bool:
        return any(s.state == "running" for s in self.steps.values())


class EventPump:
    """Thread-safe hand-off from the runner's thread to the UI thread.

    ``push`` is called for every event on the worker thread and is O(1). It
    rings the doorbell (``signal``, which posts a message) only when the
    buffer was drained since the last ring and at least ``min_interval``
    seconds have passed, so a flood of events produces a few messages per
    second, not one per event, and the UI's queue stays free for keys. The
    run screen's redraw timer drains too, so no event waits longer than one
    redraw interval.
    """

    def __init__(self, signal: Callable[[], None], min_interval: float = 0.05,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._signal = signal
        self._min_interval = min_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._buffer: list[Any] = []
        self._signalled = False
        self._last_signal = float("-inf")
        self.pushed = 0
        self.signals = 0

    def push(self, event: ev.Event) -> None:
        with self._lock:
            self._buffer.append(event)
            self.pushed += 1
            if self._signalled:
                return
            now = self._clock()
            if now - self._last_signal < self._min_interval:
                return  # the redraw timer (or the next ring) drains it
            self._signalled = True
            self._last_signal = now
            self.signals += 1
        self._signal()

    def drain(self) -> list[Any]:
        with self._lock:
            batch, self._buffer = self._buffer, []
            self._signalled = False
        return batch


# -- a campaign across nodes (Slurm) -----------------------------------------------------------------
# The run screen of a sharded campaign shows, per shard, what `trace-tui status --campaign DIR` prints:
# both read the same dict (trace_tui.engine.cluster_status.cluster_status); these only lay it out.

CLUSTER_COLUMNS = ("shard", "Slurm", "where / why", "campaign", "rows", "rows/s", "ETA", "log")


def _where(state: str, node: str, reason: str) -> str:
    """Running: on which node; pending: why it waits (Slurm's reason); after: the node it ran on."""
    if state == "RUNNING":
        return f"on {node}" if node else ""
    if state == "PENDING":
        return reason
    return reason or (f"on {node}" if node else "")


def cluster_rows(status: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per shard, then the finishing jobs (merge, verify), in CLUSTER_COLUMNS order."""
    rows = []
    for s in status.get("shards", []):
        state = s["slurm_state"] + (f" (exit {s['exit_code']})" if s.get("exit_code") and
                                    s["slurm_state"] in ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL") else "")
        rows.append((s["id"], state, _where(s["slurm_state"], s.get("node", ""), s.get("reason", "")),
                     s["campaign_state"], f"{s['rows_done']:,}/{s['rows_total']:,}",
                     format_rate(s.get("rate")), "done" if s.get("complete") else format_duration(s.get("eta_s")),
                     s.get("log") or "—"))
    for f in status.get("finishing", []):
        rows.append((f["kind"], f["slurm_state"], _where(f["slurm_state"], "", f.get("reason", "")), "", "", "",
                     "", f.get("log") or "—"))
    return rows


def cluster_summary(status: dict[str, Any]) -> str:
    """The line under the shard table: shards and rows done, rate and ETA, whether it is merged."""
    text = (f"Slurm · {status['shards_completed']}/{status['shards_total']} shards complete (by "
            f"{status['shard_by']}) · {status['rows_done']:,}/{status['rows_total']:,} rows · "
            f"{format_rate(status.get('rate'))} · ETA {format_duration(status.get('eta_s'))}")
    if status.get("complete"):
        text += " · merged"
    failures = [f"{s['id']}: {m}" for s in status.get("shards", []) for m in s.get("failures", [])]
    if failures:
        # the others are one key away: `i` on a shard's row lists every failure of that shard
        more = f" (+{len(failures) - 1} more: i on a shard lists its failures)" if len(failures) > 1 else ""
        text += f" · failed: {failures[0]}{more}"
    return text


def cluster_details(status: dict[str, Any], index: int) -> list[tuple[str, str]]:
    """Row INDEX of cluster_rows in full: its columns, then every failure of that shard."""
    rows = cluster_rows(status)
    if not 0 <= index < len(rows):
        return []
    fields = list(zip(CLUSTER_COLUMNS, rows[index]))
    shards = status.get("shards", [])
    if index < len(shards):
        fields += [("failed" if n == 0 else "", m) for n, m in enumerate(shards[index].get("failures", []))]
    return fields

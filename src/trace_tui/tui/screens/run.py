"""Run: step states, the live progress grid, GPU use, the selected step's log; cancel and resume.

The runner runs in a thread worker. It calls ``pump.push`` for each event; the
pump posts one EngineEvents message per batch; the handler applies the batch
to the ProgressModel; a 0.1 s timer redraws what changed (≤ 10 redraws/s).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, RichLog, Static

from trace_tui.tui.dialogs.confirm import ConfirmScreen
from trace_tui.tui.dialogs.steps import StepsScreen
from trace_tui.tui.messages import CampaignRead, EngineEvents, GpuSamples, LogTail, RunFinished
from trace_tui.tui.progress import CampaignState, EventPump, ProgressModel
from trace_tui.tui.views import run_env_text
from trace_tui.tui.widgets.gpu_panel import GpuPanel
from trace_tui.tui.widgets.progress_grid import ProgressGrid
from trace_tui.tui.widgets.step_list import StepList

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.engine.runner import RunResult
    from trace_tui.recipe.schema import ResolvedRecipe
    from trace_tui.tui.backends import OpenedCampaign

REDRAW_INTERVAL_S = 0.1
# Below these sizes the run screen makes room for the grid: the step list shows marks only (narrow), the
# log and the runtime line give way (short; f still shows the log full-screen).
NARROW_COLUMNS = 70
SHORT_ROWS = 20
STEPS_MIN_WIDTH = 16
STEPS_MAX_SHARE = 0.45  # of the screen's width, at most: the rest is the grid's
GPU_INTERVAL_S = 1.5
WATCH_INTERVAL_S = 1.0
LOG_INTERVAL_S = 1.0
LOG_TAIL_LINES = 200
LOG_TAIL_BYTES = 64 * 1024


def tail_step_log(campaign_dir: Path, step_id: str) -> tuple[str, list[str], bool] | None:
    """The most recently written log of a step (logs/STEP/...: a stage's stderr and non-event stdout): its
    path, its last lines, and whether lines before them were left out."""
    root = Path(campaign_dir) / "logs" / step_id
    try:
        files = [p for p in root.rglob("*.log") if p.is_file()]
        if not files:
            return None
        newest = max(files, key=lambda p: p.stat().st_mtime)
        with open(newest, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            data = fh.read()
    except OSError:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    cut = size > LOG_TAIL_BYTES or len(lines) > LOG_TAIL_LINES
    if size > LOG_TAIL_BYTES and lines:
        lines = lines[1:]  # the first line was cut by the seek
    if not lines:
        return None  # nothing written yet: the step's events are shown meanwhile
    return newest.relative_to(campaign_dir).as_posix(), lines[-LOG_TAIL_LINES:], cut


def seed_model(model: ProgressModel, resolved: ResolvedRecipe, skip: frozenset[str] = frozenset()) -> None:
    """Steps and slices known before the first event, so the grid shows the whole campaign."""
    for step in resolved.recipe.steps:
        model.add_step(step.id, step.title, "skipped" if step.id in skip else "pending")
    rows: dict[str, int] = {}
    for b in getattr(resolved, "benchmarks", None) or []:
        key = b.get("key") if isinstance(b, dict) else getattr(b, "key", None)
        n = b.get("rows") if isinstance(b, dict) else getattr(b, "rows", 0)
        if key:
            rows[str(key)] = int(n or 0)
    model.template = {(str(s.model), str(s.benchmark), s.seed): rows.get(str(s.benchmark), 0)
                      for s in getattr(resolved, "slices", None) or []}
    per_slice = [step.id for step in resolved.recipe.steps if step.per_slice and step.id not in skip]
    for step_id in per_slice or ["run"]:
        for s in getattr(resolved, "slices", None) or []:
            model.add_slice(str(s.model), str(s.benchmark), s.seed, rows.get(str(s.benchmark), 0), step=step_id)
    if per_slice:
        model.grid_step = per_slice[0]


def campaign_state(opened: OpenedCampaign, keep: frozenset[str] = frozenset()) -> CampaignState:
    """An opened campaign (backends.open_campaign) as the state the run screen's model starts from."""
    return CampaignState(events=list(getattr(opened, "events", None) or []),
                         step_states=dict(getattr(opened, "step_states", None) or {}),
                         live=bool(getattr(opened, "live", False)), keep=keep)


class RunScreen(Screen):
    TITLE = "Run"
    shows_a_run = True  # how the app finds the run screens on its stack without importing this module
    # The grid has the keys at first; the step list (and so the log) follows the running step
    # until the user moves to it (tab) and picks one.
    AUTO_FOCUS = "#grid-table"
    BINDINGS = [
        Binding("c", "cancel", "Cancel run"),
        Binding("slash", "filter", "Filter"),
        Binding("r", "resume", "Resume"),
        Binding("v", "verify", "Verify"),
        Binding("f", "toggle_log", "Full log"),  # the log full-screen (and focused, to scroll it); f again: back
        Binding("escape", "back", "Back"),  # while a run goes on: to the campaigns list (the run continues)
    ]

    def __init__(self, resolved: ResolvedRecipe, campaign_dir: Path, skip: frozenset[str] = frozenset(),
                 start: bool = True, model: ProgressModel | None = None, note: str = "",
                 clock: Callable[[], float] = time.monotonic, watch: bool = False, runtime: str = "") -> None:
        super().__init__()
        self.runtime = runtime
        self.resolved = resolved
        self.campaign_dir = Path(campaign_dir)
        self.skip = skip
        self.model = model or ProgressModel(clock=clock)
        if model is None:
            seed_model(self.model, resolved, skip)
        self.pump = EventPump(lambda: self.post_message(EngineEvents()))
        self.runner: Any = None
        self.outcome: str | None = None if start else "interrupted"
        self.note = note
        self._start_on_mount = start
        # Another process runs this campaign: follow its state from the campaign database (read-only).
        self.watching = watch
        self._watch_timer: Any = None
        self._log_step: str | None = None
        self._log_shown = 0
        self._file_tail: tuple[str, tuple[str, ...]] | None = None
        self.redraw_count = 0
        self._steps_width = (0, 0)  # (terminal width, step list width) of the last _fit_layout

    # -- layout ------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        where = f" · runtime {self.runtime}" if self.runtime else ""
        yield Static(f"trace-tui · Run · {self.resolved.recipe.name}{where}", id="run-title", classes="title",
                     markup=False)
        with Horizontal(id="run-main"):
            yield StepList(self.model, id="run-steps")
            with Vertical(id="run-right"):
                yield ProgressGrid(self.model, id="run-grid")
        yield GpuPanel("GPUs: sampling…", id="run-gpus")
        yield Static("", id="run-env", markup=False)
        # Whole lines: wrapped, never cut; f shows the log full-screen.
        yield RichLog(id="run-log", max_lines=500, wrap=True, markup=False, highlight=False)
        yield Static("", id="run-status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        # Each step's image as the hardware check found it (id, and whether its tag moved): i on a step shows it.
        view = getattr(self.app, "hardware_view", None)
        images = dict(getattr(view, "images", ()) or ())
        self.query_one(StepList).images = {
            s.id: f"{s.image}: {images.get(s.image, 'not checked')}" if s.image else "host (no container)"
            for s in self.resolved.recipe.steps}
        self.query_one("#run-env", Static).update(run_env_text(
            self.runtime, images.items(), [s.image for s in self.resolved.recipe.steps if s.image]))
        self.set_interval(REDRAW_INTERVAL_S, self.redraw)
        self.set_interval(GPU_INTERVAL_S, self.sample_gpus)
        self.set_interval(LOG_INTERVAL_S, self._poll_log)
        self.sample_gpus()
        self.redraw()
        self._fit_layout()
        if self._start_on_mount:
            self.start_runner()
        else:
            self._status(self.note or "interrupted campaign · r: resume · v: verify")
        if self.watching:
            self._watch_timer = self.set_interval(WATCH_INTERVAL_S, self._poll_campaign)

    # -- following a campaign that another process runs --------------------------------
    def _poll_campaign(self) -> None:
        self._read_campaign()

    @work(thread=True, exclusive=True, group="watch")
    def _read_campaign(self) -> None:
        try:
            opened = self.app.backends.open_campaign(self.campaign_dir)
        except Exception as exc:  # noqa: BLE001 - shown, and the next poll tries again
            self.post_message(CampaignRead(None, str(exc)))
            return
        self.post_message(CampaignRead(opened))

    def on_campaign_read(self, message: CampaignRead) -> None:
        message.stop()
        opened = message.opened
        if opened is None or not self.watching:
            return
        self.model.apply_all(opened.events)
        for step_id, state in opened.step_states.items():
            self.model.add_step(step_id)
            step = self.model.steps[step_id]
            if step.state != state:
                step.state = state
                self.model.dirty = True
        if not opened.live:
            self.watching = False
            if self._watch_timer is not None:
                self._watch_timer.stop()
            self.refresh_bindings()
            ended = opened.last_state or "stopped"
            self._status(f"the other run has ended ({ended}) · r: resume here · v: verify")

    # -- the runner --------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.outcome == "running"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer shows only what applies now: cancel while running; resume and verify when stopped."""
        if action == "cancel":
            return self.running
        if action == "resume":
            return not self.running and not self.watching
        if action == "verify":
            return not self.running
        return True

    def start_runner(self) -> None:
        self.model.stop_rates()  # this run's rates are measured from its own first rows
        self.outcome = "running"
        self.refresh_bindings()
        self._status(f"running · campaign {self.campaign_label}")
        self._run_worker()

    @property
    def what_runs(self) -> str:
        """What a cancel stops: the local runtime runs each step as processes on this host, not containers."""
        return "processes" if self.runtime == "local" else "containers"

    @property
    def campaign_label(self) -> str:
        return self.campaign_dir.name

    @work(thread=True, exclusive=True, group="runner")
    def _run_worker(self) -> None:
        self._push_campaign_state()
        try:
            self.runner = self.app.backends.runner_factory(self.resolved, self.campaign_dir, skip=self.skip)
            result = self.runner.run(self.pump.push)
        except Exception as exc:  # noqa: BLE001 - the run screen shows the one line
            line = exc.line() if hasattr(exc, "line") else f"{type(exc).__name__}: {exc}"
            self.post_message(RunFinished("error", line))
            return
        self.post_message(RunFinished(self._outcome_of(result)))

    def _push_campaign_state(self) -> None:
        """The campaign's recorded state, ahead of the runner's first event: a resumed campaign's finished
        slices are never reported again by the runner (it skips them), so without this they would show 0/N."""
        if not (self.campaign_dir / "state.sqlite").exists():
            return  # a new campaign: nothing recorded yet
        try:
            opened = self.app.backends.open_campaign(self.campaign_dir)
        except Exception:  # noqa: BLE001 - the runner opens it next and says what is wrong, if anything
            return
        self.pump.push(campaign_state(opened, keep=self.skip))

    def _outcome_of(self, result: RunResult) -> str:
        # Drained on the UI thread later; here we look only at what the runner said.
        if getattr(self.runner, "cancelled", False) is True:
            return "cancelled"
        code = getattr(result, "exit_code", None)
        if isinstance(code, int):
            return {0: "completed", 130: "cancelled"}.get(code, "failed")
        if isinstance(result, int) and not isinstance(result, bool):
            return {0: "completed", 130: "cancelled"}.get(result, "failed")
        state = (getattr(result, "state", None) or getattr(result, "outcome", None)
                 or (result if isinstance(result, str) else None))
        if state in ("completed", "failed", "cancelled", "interrupted"):
            return "cancelled" if state == "interrupted" else state
        if result is False:
            return "failed"
        return "completed"

    def on_engine_events(self, message: EngineEvents) -> None:
        message.stop()
        self.model.apply_all(self.pump.drain())

    def on_run_finished(self, message: RunFinished) -> None:
        message.stop()
        self.model.apply_all(self.pump.drain())  # the final state is never lost
        outcome = message.outcome
        if outcome != "error" and self.model.run_state in ("completed", "failed", "cancelled"):
            outcome = self.model.run_state
        states = {s.state for s in self.model.steps.values()}
        if outcome == "completed" and "failed" in states:
            outcome = "failed"
        if outcome == "completed" and "cancelled" in states:
            outcome = "cancelled"
        self.outcome = outcome
        self.refresh_bindings()
        self.model.stop_rates()  # nothing runs now: no rate or ETA stays on screen
        self.redraw()
        text = {
            "completed": "completed · v: verify the campaign",
            "failed": "failed · the failed step's log is below · r: resume · v: verify",
            "cancelled": f"cancelled · {self.what_runs} stopped · campaign is resumable · r: resume",
            "error": f"could not run: {message.detail}",
        }[outcome]
        self._status(text)
        if outcome == "error":
            # The status line is one line; the log pane shows the reason whole (wrapped).
            self.query_one("#run-log", RichLog).write(f"could not run: {message.detail}")
        if outcome == "failed":
            # Show the failed step's log: the reason is usually in its last lines.
            failed = [i for i, s in enumerate(self.model.steps.values()) if s.state == "failed"]
            if failed:
                self.query_one(StepList).move_cursor(row=failed[0])
                self._update_log()
        self.app.on_run_finished(self, outcome)

    # -- drawing -----------------------------------------------------------------
    def redraw(self) -> None:
        self.model.apply_all(self.pump.drain())
        if not self.model.dirty:
            return
        self.redraw_count += 1
        steps = self.query_one(StepList)
        steps.redraw()
        if not steps.has_focus:
            # Follow the running step (and so its log) unless the user is choosing one.
            running = [i for i, s in enumerate(self.model.steps.values()) if s.state == "running"]
            if running and steps.cursor_row != running[0]:
                steps.move_cursor(row=running[0])
        self.query_one(ProgressGrid).redraw()
        self._fit_layout()
        self._update_log()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_layout()

    def _fit_layout(self) -> None:
        """The step list as wide as its longest step and state (within its share of the width), the rest
        for the grid; on a small terminal, the grid keeps its room (see NARROW_COLUMNS, SHORT_ROWS)."""
        width, height = self.size
        if not width:
            return
        self.set_class(height < SHORT_ROWS, "short")
        steps = self.query_one(StepList)
        steps.set_compact(width < NARROW_COLUMNS)
        wanted = max(STEPS_MIN_WIDTH, min(steps.natural_width(), int(width * STEPS_MAX_SHARE)))
        if self._steps_width[0] == width:
            wanted = max(wanted, self._steps_width[1])  # only grows while the terminal keeps its size: no jitter
        self._steps_width = (width, wanted)
        if steps.styles.width is None or steps.styles.width.value != wanted:
            steps.styles.width = wanted

    def _log_step_id(self) -> str | None:
        step_id = self.query_one(StepList).selected_step
        if step_id is None:
            running = [s.id for s in self.model.steps.values() if s.state == "running"]
            step_id = running[0] if running else None
        return step_id

    def _update_log(self) -> None:
        """The selected step's container log (its log file in the campaign) or, before there is one, its events."""
        step_id = self._log_step_id()
        log = self.query_one("#run-log", RichLog)
        if step_id != self._log_step:
            log.clear()
            self._log_step, self._log_shown, self._file_tail = step_id, 0, None
            self._read_log_file()
        if self._file_tail is not None:
            return  # the file tail is shown (and refreshed by _poll_log)
        step = self.model.steps.get(step_id) if step_id else None
        if step is None:
            return
        lines = list(step.logs)
        new = min(step.log_count - self._log_shown, len(lines))
        for line in lines[len(lines) - new:] if new > 0 else []:
            log.write(line)
        self._log_shown = step.log_count

    def _poll_log(self) -> None:
        if self._log_step is not None:
            self._read_log_file()

    @work(thread=True, exclusive=True, group="log")
    def _read_log_file(self) -> None:
        step_id = self._log_step
        if step_id is None:
            return
        found = tail_step_log(self.campaign_dir, step_id)
        if found is not None:
            self.post_message(LogTail(step_id, *found))

    def on_log_tail(self, message: LogTail) -> None:
        message.stop()
        if message.step != self._log_step:
            return
        tail = (message.path, tuple(message.lines))
        if tail == self._file_tail:
            return
        log = self.query_one("#run-log", RichLog)
        log.clear()
        # "(last 5 lines)" over 8 screen lines (long lines wrap) read as lines missing: say only whether the
        # file's start is left out
        log.write(f"── {message.path}" + (f" (its last {len(message.lines)} lines)" if message.cut else ""))
        for line in message.lines:
            log.write(line)
        self._file_tail = tail

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "run-steps":
            steps = self.query_one(StepList)
            if steps.has_focus:
                self._show_grid_of(steps.selected_step)
            self._update_log()

    def _show_grid_of(self, step_id: str | None) -> None:
        """The step chosen in the list shows its own grid (an earlier step's cells, not only the last
        step's); choosing the running step follows the run again."""
        running = [s.id for s in self.model.steps.values() if s.state == "running"]
        if step_id is None or step_id not in self.model.step_cells:
            return
        self.model.pin_step(None if step_id in running else step_id)
        if step_id in running:
            self.model.show_step(step_id)
        self.query_one(ProgressGrid).redraw(force=True)

    def sample_gpus(self) -> None:
        self._sample()

    @work(thread=True, exclusive=True, group="gpu")
    def _sample(self) -> None:
        try:
            samples = self.app.backends.gpu_sampler()
        except Exception:  # noqa: BLE001
            samples = []
        self.post_message(GpuSamples(samples))

    def on_gpu_samples(self, message: GpuSamples) -> None:
        self.query_one(GpuPanel).show(message.samples)

    def _status(self, text: str) -> None:
        self.query_one("#run-status", Static).update(text)

    # -- actions -----------------------------------------------------------------
    def action_filter(self) -> None:
        self.query_one(ProgressGrid).open_filter()

    def action_toggle_log(self) -> None:
        self.toggle_class("log-full")
        if self.has_class("log-full"):
            self.query_one("#run-log", RichLog).focus()

    def action_cancel(self) -> None:
        if not self.running:
            self.notify("nothing is running")
            return

        def answer(yes: bool | None) -> None:
            if yes:
                self.cancel_runner()

        self.app.push_screen(ConfirmScreen(
            f"Cancel the run? Running {self.what_runs} are stopped; the campaign stays resumable.",
            yes="Cancel run", no="Keep running"), answer)

    def cancel_runner(self) -> None:
        self._status(f"cancelling · stopping {self.what_runs}…")
        if self.runner is not None:
            self.runner.cancel()

    def action_resume(self) -> None:
        if self.running:
            self.notify("already running")
            return
        if self.watching:
            self.notify("another trace-tui is running this campaign; resume once it stops")
            return
        self.start_runner()

    def action_verify(self) -> None:
        if self.running:
            self.notify("the campaign is still running")
            return
        self.app.show_verify("campaign", self.campaign_dir)

    def action_back(self) -> None:
        filt = self.query("#grid-filter")
        if filt and not filt.first().has_class("hidden"):
            self.query_one(ProgressGrid).close_filter()
            return
        if self.running:
            # The run goes on behind the list of campaigns; enter on it there (or esc) comes back here.
            self.app.action_show_campaigns()
            self.notify("the run goes on · enter on it (or esc) comes back to it", markup=False, timeout=4)
            return
        self.app.pop_screen()

        # The steps walked for this run are decided and done: back to the preview, not to a Steps screen
        # whose `a` would start the same run again.
        while isinstance(self.app.screen, StepsScreen) and len(self.app.screen_stack) > 2:
            self.app.pop_screen()


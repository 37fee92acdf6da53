"""The headless printer: what `trace-tui --recipe NAME --yes` prints while the runner works.

Console: a line when a job starts or ends, a step changes state or a warning
arrives; otherwise at most one progress line every ``interval`` seconds (rows
done/total, rows per second, ETA). JSON (``--log-format json``): every event as
one JSON line. A summary at the end either way.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from trace_tui.engine.events import Event, Log, Progress, RunState, SliceState, Status, StepState

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.engine.runner import RunResult


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _where(ev: Event) -> str:
    if getattr(ev, "model", None) is None:
        return ev.step or ""
    return f"{ev.step} {ev.model}/{ev.seed}/{ev.benchmark}"


class HeadlessPrinter:
    def __init__(self, stream: TextIO | None = None, *, fmt: str = "console", interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stdout
        self.fmt = fmt
        self.interval = interval
        self.clock = clock
        self._last_print = clock()
        self._start: dict[tuple, int] = {}  # job -> rows it had when it started (resume)
        self._gain: dict[tuple, int] = {}  # job -> rows done in this run
        self._planned: dict[tuple, bool] = {}  # job -> whether its rows are in the planned total
        self._rows_total = 0
        self._rows_base = 0  # rows already done when the run started (complete and partial jobs)
        self._t0 = clock()
        # The rate and the ETA are a step's own: generate's rows per second said nothing of extract's or
        # score's (an ETA of 1m17s, done 19 s later). step -> [rows done before this run, rows planned]
        self._step_rows: dict[str, list[int]] = {}
        self._rate_step: str | None = None  # the step the rate below was measured on
        self._step_start: dict[str | None, tuple[float, int]] = {}  # step -> (when it started, its rows then)
        self._rate_t = clock()
        self._rate_rows = 0
        self._rate: float | None = None
        self._last_progress: Progress | None = None

    def _line(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.stream.write(f"[{stamp}] {text}\n")
        self.stream.flush()

    def rows_done(self) -> int:
        return self._rows_base + sum(self._gain.values())

    def step_rows_done(self, step: str | None) -> int:
        """Rows of STEP done (before this run and in it); all rows when the plan named no steps."""
        if not self._step_rows:
            return self.rows_done()
        base = self._step_rows.get(step or "", [0, 0])[0]
        return base + sum(g for k, g in self._gain.items() if k[0] == step)

    def __call__(self, ev: Event) -> None:
        if self.fmt == "json":
            self.stream.write(ev.model_dump_json(exclude_none=True) + "\n")
            if not isinstance(ev, Progress):
                self.stream.flush()
            return
        if isinstance(ev, Progress):
            self._progress(ev)
        elif isinstance(ev, SliceState):
            key = (ev.step, ev.model, ev.seed, ev.benchmark)
            if ev.state in ("running", "resumed"):
                self._start[key] = ev.done
                # Rows count against the planned totals only (as the run summary does): a job that plans
                # none (prepare, train) reports rows of its own that are in neither "done" nor "total".
                self._planned[key] = bool(ev.total)
            elif ev.state == "completed" and self._planned.get(key, True):
                self._gain[key] = ev.done - self._start.get(key, ev.done)
            score = f", score {ev.score:.2f}" if ev.score is not None else ""
            rows = f" ({ev.done}/{ev.total} rows{score})" if ev.total else score
            msg = f": {ev.message}" if ev.message else ""
            self._line(f"{_where(ev)} {ev.state}{rows}{msg}")
        elif isinstance(ev, StepState):
            if ev.state == "running":
                self._step_start[ev.step] = (self.clock(), self.step_rows_done(ev.step))
            self._line(f"step {ev.step}: {ev.state}{': ' + ev.message if ev.message else ''}")
        elif isinstance(ev, RunState):
            if ev.state == "planned":
                self._rows_total = ev.rows_total
                self._rows_base = self._rate_rows = ev.rows_done
                self._step_rows = {k: list(v) for k, v in ev.step_rows.items() if v[1]}
                self._rate_t = self.clock()
                self._line(f"campaign {ev.campaign}: {ev.message}")
        elif isinstance(ev, Log):
            if ev.level in ("warning", "error", "critical"):
                self._line(f"{ev.step or 'runner'} {ev.level}: {ev.message}")
        elif isinstance(ev, Status) and ev.state == "failed":
            self._line(f"{ev.step}: worker failed: {ev.message}")

    def _progress(self, ev: Progress) -> None:
        key = (ev.step, ev.model, ev.seed, ev.benchmark)
        if self._planned.get(key, True):
            self._gain[key] = ev.done - self._start.setdefault(key, ev.done)
        self._last_progress = ev
        now = self.clock()
        if now - self._last_print < self.interval:
            return
        rows = self.rows_done()
        step_rows = self.step_rows_done(ev.step)
        if ev.step != self._rate_step:  # a new step: its rate is measured from its own rows, since it started
            if ev.step in self._step_start:
                self._rate_t, self._rate_rows = self._step_start[ev.step]
            elif self._rate_step is not None:  # unannounced: from now
                self._rate_t, self._rate_rows = now, step_rows
            self._rate_step, self._rate = ev.step, None
        dt = now - self._rate_t
        if dt > 0:
            inst = (step_rows - self._rate_rows) / dt
            self._rate = inst if self._rate is None else 0.5 * self._rate + 0.5 * inst
        self._rate_t, self._rate_rows = now, step_rows
        self._last_print = now
        total = self._rows_total or ev.total
        self._line(f"{_where(ev)} {ev.phase} {ev.done}/{ev.total} | all {rows}/{total} rows, "
                   f"{self._eta_text(ev.step, step_rows, total)}")

    def _eta_text(self, step: str | None, step_rows: int, total: int) -> str:
        """The step's rate and the time left: for the whole run when no later step has rows to do, else
        for this step, naming the steps whose rate is not known yet."""
        rate = f"{self._rate:.1f} rows/s" if self._rate is not None else "? rows/s"
        if not self._step_rows:
            left = total - step_rows
            return f"{rate}, ETA {fmt_duration(left / self._rate if self._rate and total else None)}"
        if step not in self._step_rows:  # a step with no planned rows (prepare, train): no ETA from its rate
            return f"{rate}, ETA ?"
        left = self._step_rows[step][1] - step_rows
        eta = fmt_duration(left / self._rate if self._rate else None)
        steps = list(self._step_rows)
        later = [s for s in steps[steps.index(step) + 1:] if self.step_rows_done(s) < self._step_rows[s][1]]
        if not later:
            return f"{rate}, ETA {eta}"
        return f"{rate}, ETA {step} {eta}, then {', '.join(later)} (not measured yet)"

    def summary(self, result: RunResult) -> str:
        lines = [f"{result.message}",
                 f"jobs {result.jobs_done}/{result.jobs_total}, rows {result.rows_done}/{result.rows_total}, "
                 f"{fmt_duration(result.seconds)}"]
        for f in result.failed:
            lines.append(f"failed: {f}")
        return "\n".join(lines)

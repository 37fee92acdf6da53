"""Running jobs' live state, and the hot path that folds each worker event into it.

Every line a worker prints passes through :meth:`LiveEvents.dispatch`: its rows and
rate go to the job's context, its progress to the state database (at most every
``DB_INTERVAL_S`` per job, which is what ``status`` needs) and every event to the
event stream. A whole-step job (the release evaluator's one generate job) reports
many slices; each has its own :class:`Live` inside the job's :class:`JobContext`.
"""

from __future__ import annotations

import time
from typing import Protocol

from trace_tui.engine.campaign import Campaign
from trace_tui.engine.events import Artifact, Event, Metric, Progress, SliceState, StageEvent, Status
from trace_tui.engine.planner import PlannedJob

DB_INTERVAL_S = 0.5  # progress reaches SQLite at most this often per job (status reads it)
RATE_WINDOW_S = 2.0


class Emit(Protocol):
    """The runner's way out for events: into the event log (unless ``log`` is false) and to its subscriber."""

    def __call__(self, event: Event, log: bool = True) -> None: ...


class Live:
    """Rows, rate and the last database write of a job or of one slice of a whole-step job."""

    __slots__ = (
        "announced",
        "done",
        "emitted",
        "finished",
        "job",
        "last_db",
        "phase",
        "rate",
        "score",
        "total",
        "win_done",
        "win_t",
    )

    def __init__(self, job: PlannedJob, score: float | None = None) -> None:
        self.job = job
        self.done = job.done
        self.total = job.total
        self.phase = ""
        self.score = score
        self.last_db = 0.0
        self.rate: float | None = None
        self.win_t = time.monotonic()
        self.win_done = job.done
        self.announced = False
        self.finished = False  # all its rows are done
        self.emitted = False  # its "completed" event went out (after its score, when one comes)

    def tick(self, now: float) -> None:
        if now - self.win_t >= RATE_WINDOW_S:
            inst = (self.done - self.win_done) / (now - self.win_t)
            self.rate = inst if self.rate is None else 0.5 * self.rate + 0.5 * inst
            self.win_t, self.win_done = now, self.done


class JobContext(Live):
    """Live state of one running job (touched only by the thread that runs it)."""

    __slots__ = ("artifacts", "started", "status", "subs")

    def __init__(self, job: PlannedJob, sub_scores: dict[str, float | None] | None = None) -> None:
        super().__init__(job)
        self.artifacts: dict[str, str] = {}
        self.status: Status | None = None
        self.started = time.monotonic()
        self.subs = {(x.model, x.seed, x.benchmark): Live(x, (sub_scores or {}).get(x.slice)) for x in job.subs}
        if self.subs:
            self.done = self.win_done = sum(x.done for x in self.subs.values())


class LiveEvents:
    """Worker events into a job's context, the campaign's state database and the event stream."""

    def __init__(self, campaign: Campaign, emit: Emit) -> None:
        self.campaign = campaign
        self.emit = emit

    def dispatch(self, ev: StageEvent, ctx: JobContext) -> None:
        """The hot path: one parsed stage event."""
        job = ctx.job
        if isinstance(ev, Progress):
            now = time.monotonic()
            sub = ctx.subs.get((ev.model, ev.seed, ev.benchmark)) if ctx.subs else None
            if sub is not None:
                ctx.done += ev.done - sub.done
                self._sub_progress(ctx, sub, ev, now)
            elif not ctx.subs:
                ctx.done, ctx.total = ev.done, ev.total or ctx.total
            ctx.phase = ev.phase
            ctx.tick(now)
            # Progress reaches the database and the event log at most every DB_INTERVAL_S per job:
            # the latest numbers are what status needs; every other event is logged in full.
            logged = now - ctx.last_db >= DB_INTERVAL_S
            if logged:
                ctx.last_db = now
                self.campaign.update_job(job.step.id, job.slice, done=ctx.done, total=ctx.total, phase=ctx.phase,
                                         rate=ctx.rate)
            if ev.model is None and job.model is not None:
                # A new event, not model_copy: the same fields, validated in pydantic's core, at less cost
                ev = Progress(step=ev.step, model=job.model, seed=job.seed, benchmark=job.benchmark,
                              phase=ev.phase, done=ev.done, total=ev.total)
            self.emit(ev, log=logged)
            return
        elif isinstance(ev, Artifact):
            ctx.artifacts[ev.path] = ev.sha256
        elif isinstance(ev, Metric):
            if ev.name == "score":
                sub = ctx.subs.get((ev.model, ev.seed, ev.benchmark)) if ctx.subs else None
                if sub is not None:
                    sub.score = ev.value
                    self.campaign.update_slice(job.step.id, sub.job.slice, score=ev.value)
                    if sub.finished:
                        self.emit(ev)
                        self._emit_sub_done(ctx, sub)
                        return
                else:
                    ctx.score = ev.value
        elif isinstance(ev, Status):
            ctx.status = ev
        self.emit(ev)

    def _sub_progress(self, ctx: JobContext, sub: Live, ev: Progress, now: float) -> None:
        step, x = ctx.job.step, sub.job
        if not sub.announced:
            for other in ctx.subs.values():  # a finished slice that never got a score is done now
                if other.finished and not other.emitted:
                    self._emit_sub_done(ctx, other)
            sub.announced = True
            resumed = ev.done > 0
            self.emit(SliceState(step=step.id, model=x.model, seed=x.seed, benchmark=x.benchmark,
                                 state="resumed" if resumed else "running", done=ev.done, total=ev.total or x.total))
        sub.done, sub.total, sub.phase = ev.done, ev.total or sub.total, ev.phase
        sub.tick(now)
        planned = x.total or sub.total  # a slice is finished at its planned rows, whatever total the worker says
        if planned and sub.done >= planned and not sub.finished:
            sub.finished = True
            self.campaign.update_slice(step.id, x.slice, done=sub.done, total=sub.total, phase=sub.phase,
                                       rate=None, state="completed")
        elif now - sub.last_db >= DB_INTERVAL_S:
            sub.last_db = now
            self.campaign.update_slice(step.id, x.slice, done=sub.done, total=sub.total, phase=sub.phase,
                                       rate=sub.rate, state="running")

    def _emit_sub_done(self, ctx: JobContext, sub: Live) -> None:
        sub.emitted = True
        x = sub.job
        self.emit(SliceState(step=ctx.job.step.id, model=x.model, seed=x.seed, benchmark=x.benchmark,
                             state="completed", done=sub.done, total=sub.total, score=sub.score))

    def flush_subs(self, ctx: JobContext, outcome: str) -> None:
        """A whole-step job's announced slices recorded as the job ended (``outcome``: its state)."""
        step = ctx.job.step
        for sub in ctx.subs.values():
            if not sub.announced:
                continue
            state = "completed" if (outcome == "completed" or sub.finished) else outcome
            self.campaign.update_slice(step.id, sub.job.slice, done=sub.done, total=sub.total, phase=sub.phase,
                                       rate=None, score=sub.score, state=state)
            if (outcome == "completed" or sub.finished) and not sub.emitted:
                self._emit_sub_done(ctx, sub)
        if outcome == "completed":
            self.campaign.complete_sub_slices(step.id)

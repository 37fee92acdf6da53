"""A keep_loaded step's worker: the slices dealt to one GPU group, served in turn by one process.

The worker loads its model once; each slice is still its own job: it goes to running when the
worker reaches it, and is receipted and marked complete as soon as the worker reports it done (a
slice finished before a crash or Ctrl-C stays complete; a rerun does the others).
"""

from __future__ import annotations

import time

from trace_tui.common.safe_write import NotWritten
from trace_tui.engine.events import Artifact, SliceState, Status, parse_stage_line
from trace_tui.engine.execution import Execution
from trace_tui.engine.live import JobContext
from trace_tui.engine.planner import PlannedJob
from trace_tui.runtime.base import ExitInfo

SliceKey = tuple[str | None, int | None, str | None]  # (model, seed, benchmark), as the worker's events name it


def run_batch(ex: Execution, jobs: list[PlannedJob], gpus: list[int], worker: str) -> list[str]:
    """Run ``jobs`` (one step's slices dealt to host GPUs ``gpus``) in the worker named ``worker``, in turn.

    Returns the failure lines.
    """
    c, step = ex.campaign, jobs[0].step
    try:
        launch = ex.launches.for_batch(jobs, gpus, worker)
    except NotWritten as exc:  # a link planted where a slice writes: none of the batch starts
        return [ex.refuse(j, str(exc)) for j in jobs]
    by_key: dict[SliceKey, PlannedJob] = {(j.model, j.seed, j.benchmark): j for j in jobs}
    prefixes = [(c.output_rel(step.id, j.slice) + "/", (j.model, j.seed, j.benchmark)) for j in jobs]
    live: dict[SliceKey, tuple[JobContext, float]] = {}  # started slices: their context and wall start
    ended: set[SliceKey] = set()
    failed: list[str] = []
    current: SliceKey | None = None  # the slice the worker is on (its artifacts and logs belong to it)
    worker_status: Status | None = None
    if ex.cancellation.is_set():
        return failed
    with ex.cancellation.running(ex.runtime_for(step).start(launch)) as handle:
        for line in handle.lines():
            ev = parse_stage_line(line, step=step.id)
            key = (getattr(ev, "model", None), getattr(ev, "seed", None), getattr(ev, "benchmark", None))
            if isinstance(ev, Artifact):
                key = next((k for p, k in prefixes if ev.path.startswith(p)), current)
            if key not in by_key or key in ended:
                if isinstance(ev, Status) and ev.model is None:
                    worker_status = ev  # the worker's own end: read after it exits
                ex.emit(ev)
                continue
            if key not in live:
                job = by_key[key]
                live[key] = (JobContext(job), ex.begin(job))
            current = key
            ctx, started_wall = live[key]
            if isinstance(ev, Status):  # this slice is over: receipt it now, whatever comes after
                ctx.status = ev
                ex.emit(ev)
                err = ex.finish(ctx.job, ctx, ExitInfo(exit_code=0), started_wall, gpus, worker=worker)
                ended.add(key)
                current = None
                if err:
                    failed.append(err)
                continue
            ex.live.dispatch(ev, ctx)
        info = handle.wait()
    for key, job in by_key.items():
        if key in ended:
            continue
        if key in live:  # the worker stopped inside this slice: cancelled, or failed with the worker's reason
            ctx, started_wall = live[key]
            if worker_status is not None and worker_status.state == "failed":
                ctx.status = worker_status
            elif info.exit_code == 0 and not info.stopped:
                ctx.status = Status(state="failed", message="the worker ended without finishing this slice")
            err = ex.finish(job, ctx, info, started_wall, gpus, worker=worker)
            if err:
                failed.append(err)
        elif not ex.cancellation.is_set() and not info.stopped:  # never reached: to do on the next run
            why = (worker_status.message if worker_status is not None and worker_status.message
                   else info.describe())
            line = (f"step {step.id} slice {job.slice} not run: its group's worker ended first ({why}); "
                    f"log: {c.log_path(step.id, worker)}; fix the cause and run the same command again to resume")
            c.update_job(step.id, job.slice, state="failed", message=line[:2000], finished_at=time.time())
            ex.emit(SliceState(step=step.id, model=job.model, seed=job.seed, benchmark=job.benchmark,
                               state="failed", done=job.done, total=job.total, message=line))
            failed.append(line)
    c.flush_events()
    return failed

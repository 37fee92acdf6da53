"""One job through a runtime to its recorded end: started, its worker's lines folded in, its outcome.

The outcome is decided here: cancelled (interrupted, resumed by the next run), failed (one line
naming the cause, the last log lines and the log, what the run and the TUI show), or completed
with its receipt (trace_tui.engine.receipts). A keep_loaded step's worker serves many of these
jobs in turn (trace_tui.engine.batch).

A training job's checkpoint is signed here, on the host, when the home has a key: after the worker
exited and before its receipt is written, so that the receipt lists the signature among the job's
outputs (the stage images need no signing library, and never see the key).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trace_tui.campaign_files.state import STEP_SLICE
from trace_tui.common.safe_write import NotWritten
from trace_tui.engine.campaign import Campaign
from trace_tui.engine.cancellation import Cancellation
from trace_tui.engine.events import Log, SliceState, coalesce_progress, parse_stage_line
from trace_tui.engine.launches import Launches
from trace_tui.engine.live import Emit, JobContext, LiveEvents
from trace_tui.engine.planner import PlannedJob
from trace_tui.engine.receipts import short_slices_reason, write_receipt
from trace_tui.errors import CheckFailed
from trace_tui.runtime.base import ExitInfo, Runtime
from trace_tui.signing.checkpoints import SIGNATURE_FILE
from trace_tui.signing.keys import short
from trace_tui.workers import registry

if TYPE_CHECKING:
    from trace_tui.recipe.schema import Step
    from trace_tui.signing.checkpoints import CheckpointSigner

SIGNING_SCHEME = "OpenSSF model signing (model_signing), ECDSA P-256 key"


class Execution:
    def __init__(self, campaign: Campaign, launches: Launches, runtime_for: Callable[[Step], Runtime],
                 cancellation: Cancellation, emit: Emit, checkpoint_signer: CheckpointSigner | None = None,
                 store_trust: Callable[[Step], dict[str, str]] | None = None) -> None:
        self.campaign = campaign
        self.launches = launches
        self.runtime_for = runtime_for  # the container runtime for a step with an image, else the host's
        self.cancellation = cancellation
        self.emit = emit
        self.live = LiveEvents(campaign, emit)
        self.checkpoint_signer = checkpoint_signer  # None: the home has no key, checkpoints stay unsigned
        self.store_trust = store_trust  # a step -> the trust level of each store entry it reads

    def begin(self, job: PlannedJob) -> float:
        """The job's record says running (one more attempt) and its slice is announced; returns the wall start."""
        c, step = self.campaign, job.step
        started_wall = time.time()
        rec = c.job(step.id, job.slice)
        attempts = (rec.attempts if rec else 0) + 1
        c.update_job(step.id, job.slice, state="running", attempts=attempts, started_at=started_wall, message="")
        resumed = job.action == "resume" and job.done > 0
        self.emit(SliceState(step=step.id, model=job.model, seed=job.seed, benchmark=job.benchmark,
                             state="resumed" if resumed else "running", done=job.done, total=job.total,
                             message=f"resuming at row {job.done}" if resumed else ""))
        return started_wall

    def run(self, job: PlannedJob, gpus: list[int]) -> str | None:
        """Run one job to its end. Returns a failure line, or None (done or cancelled)."""
        step = job.step
        try:
            launch = self.launches.for_job(job, gpus)
        except NotWritten as exc:  # a link planted where the job writes: the job fails, nothing is written there
            return self.refuse(job, str(exc))
        started_wall = self.begin(job)
        if self.cancellation.is_set():
            return None
        known = self.campaign.sub_slices() if job.subs else {}
        ctx = JobContext(job, {x.slice: getattr(known.get((step.id, x.slice)), "score", None) for x in job.subs})
        with self.cancellation.running(self.runtime_for(step).start(launch)) as handle:
            batches = getattr(handle, "batches", None)  # lines that arrived together, where a runtime reads so
            seen: set[str] = set()
            for batch in batches() if batches is not None else ([line] for line in handle.lines()):
                for line in coalesce_progress(batch, seen):
                    self.live.dispatch(parse_stage_line(line, step=step.id), ctx)
            info = handle.wait()
        return self.finish(job, ctx, info, started_wall, gpus)

    def refuse(self, job: PlannedJob, why: str) -> str:
        """The job fails before it starts (one line: why, and what to do); returns that line."""
        step = job.step
        where = job.slice if job.slice != STEP_SLICE else ""
        line = (f"step {step.id}{' slice ' + where if where else ''} not started: {why}; a campaign handed over is "
                "data: fix the campaign and run the same command again")
        self.campaign.update_job(step.id, job.slice, state="failed", message=line[:2000], finished_at=time.time())
        self.emit(SliceState(step=step.id, model=job.model, seed=job.seed, benchmark=job.benchmark, state="failed",
                             done=job.done, total=job.total, message=line))
        return line

    def finish(self, job: PlannedJob, ctx: JobContext, info: ExitInfo, started_wall: float,
               gpus: list[int], worker: str | None = None) -> str | None:
        """Record how the job ended (``worker``: the keep_loaded worker that ran it, whose log it is)."""
        c, step = self.campaign, job.step
        fields: dict[str, Any] = dict(done=ctx.done, total=ctx.total, phase=ctx.phase, rate=ctx.rate)
        ident = dict(step=step.id, model=job.model, seed=job.seed, benchmark=job.benchmark)
        if self.cancellation.is_set() or info.stopped:
            self.live.flush_subs(ctx, "cancelled")
            c.update_job(step.id, job.slice, state="cancelled", message="interrupted", **fields)
            self.emit(SliceState(state="cancelled", done=ctx.done, total=ctx.total, message="interrupted", **ident))
            return None
        reason = None
        if info.exit_code != 0 or info.oom_killed:
            reason = info.describe()
            if any("[Errno 28]" in t or "No space left on device" in t for t in info.tail):
                reason = f"no space left on device (ENOSPC) writing {c.path / c.output_rel(step.id, job.slice)} " \
                         f"({reason}); free space there"
            if ctx.status is not None and ctx.status.state == "failed" and ctx.status.message:
                reason += f": {ctx.status.message}"
        elif ctx.status is not None and ctx.status.state != "completed":
            # A worker that exits 0 without a status line (e.g. `trace_tui verify`) is judged by its exit code.
            reason = ctx.status.message or "the worker reported failure"
        if reason is None and ctx.subs:
            reason = short_slices_reason(ctx.subs.values())
        receipt = None
        signed: list[dict[str, str]] = []
        if reason is None:
            signed, reason = self.sign_checkpoints(job)
        if reason is None:
            runtime = self.runtime_for(step)
            settings = getattr(runtime, "gpu_settings", None)
            receipt, reason = write_receipt(c, job, rows=ctx.done, total=ctx.total, score=ctx.score,
                                            artifacts=ctx.artifacts, subs=ctx.subs.values(), info=info,
                                            started_wall=started_wall, gpus=gpus, runtime=runtime.name,
                                            worker=worker, checkpoint_signatures=signed,
                                            store_trust=self.store_trust(step) if self.store_trust else None,
                                            gaps=getattr(runtime, "gaps", ()),
                                            gpu_request=settings(list(gpus)) if settings and gpus else None)
        if reason is not None:
            where = job.slice if job.slice != STEP_SLICE else ""
            last = " | ".join(info.tail[-5:])
            line = (f"step {step.id}{' slice ' + where if where else ''} failed: {reason}"
                    + (f"; last log lines: {last}" if last else "")
                    + f"; log: {c.log_path(step.id, worker or job.slice)}; fix the cause and run the same command "
                      "again to resume")
            self.live.flush_subs(ctx, "failed")
            c.update_job(step.id, job.slice, state="failed", message=line[:2000], finished_at=time.time(), **fields)
            self.emit(SliceState(state="failed", done=ctx.done, total=ctx.total, message=line, **ident))
            return line
        self.live.flush_subs(ctx, "completed")
        c.update_job(step.id, job.slice, state="completed", score=ctx.score, receipt=receipt,
                     finished_at=time.time(), message="", **fields)
        self.emit(SliceState(state="completed", done=ctx.done, total=ctx.total, score=ctx.score, **ident))
        c.flush_events()
        return None

    def sign_checkpoints(self, job: PlannedJob) -> tuple[list[dict[str, str]], str | None]:
        """(what the receipt records of each checkpoint signed, None) or ([], why the job fails): each checkpoint
        folder the job's worker left, signed with the home's key; nothing when the home has no key."""
        if self.checkpoint_signer is None:
            return [], None
        c, step = self.campaign, job.step
        signed: list[dict[str, str]] = []
        try:
            for rel in registry.checkpoints(step.run[0], c.path, c.output_rel(step.id, job.slice)):
                done = self.checkpoint_signer.sign(c.path / rel)
                signed.append({"checkpoint": rel, "signature": f"{rel}/{SIGNATURE_FILE}", "keyid": done.keyid,
                               "scheme": SIGNING_SCHEME})
                self.emit(Log(level="info", step=step.id, message=f"checkpoint {rel} signed with key "
                              f"{short(done.keyid)} (OpenSSF model signing): {rel}/{SIGNATURE_FILE}"))
        except ValueError as exc:
            return [], f"its checkpoint cannot be signed: {exc}"
        except CheckFailed as exc:
            return [], exc.line()
        return signed, None

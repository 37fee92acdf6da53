"""The runner: run the jobs the planner (trace_tui.engine.planner) decided, publish events, write receipts.

``Runner(resolved, campaign, runtime).run(on_event)`` is synchronous (the TUI
calls it in a worker thread, the headless command in the main thread) and
``cancel()`` may be called from any thread or a signal handler.

The planner decides what each job must do (skip, resume, invalidate, run); here
its launches go to a runtime, the workers' lines become events and database rows,
an invalidated job's outputs are superseded before it reruns, and a finished job
gets its receipt (trace_tui.engine.receipts).
"""

from __future__ import annotations

import collections
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.common.atomic import atomic_write_json
from trace_tui.campaign_files.state import STEP_SLICE, slice_path
from trace_tui.engine.campaign import Campaign
from trace_tui.engine.events import (
    Artifact,
    Log,
    Metric,
    Progress,
    RunState,
    SliceState,
    Status,
    StepState,
    coalesce_progress,
    parse_stage_line,
)
from trace_tui.engine.planner import (
    Plan,
    PlannedJob,
    deal_batches,
    deal_queues,
    dump,
    expected_jobs,
    get_field,
    job_spec,
    needs_gpus,
    plan_against,
    plan_rows,
    step_groups,
)
from trace_tui.engine.receipts import short_slices_reason, write_receipt
from trace_tui.errors import CheckFailed, ExitCode, RequirementsError, UsageError
from trace_tui.runtime.base import LABEL_CAMPAIGN, ExitInfo, Handle, Launch, Runtime

if TYPE_CHECKING:  # the recipe schema (pydantic) is imported by whoever builds a Runner, not here
    from trace_tui.recipe_schema import Step

EventSink = Callable[[Any], None]
DB_INTERVAL_S = 0.5  # progress reaches SQLite at most this often per job (status reads it)
RATE_WINDOW_S = 2.0


@dataclass
class RunResult:
    exit_code: int
    message: str
    failed: list[str] = field(default_factory=list)
    jobs_total: int = 0
    jobs_done: int = 0
    rows_done: int = 0
    rows_total: int = 0
    seconds: float = 0.0


class _Live:
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


class _JobContext(_Live):
    """Live state of one running job (touched only by the thread that runs it)."""

    __slots__ = ("artifacts", "started", "status", "subs")

    def __init__(self, job: PlannedJob, sub_scores: dict[str, float | None] | None = None) -> None:
        super().__init__(job)
        self.artifacts: dict[str, str] = {}
        self.status: Status | None = None
        self.started = time.monotonic()
        self.subs = {(x.model, x.seed, x.benchmark): _Live(x, (sub_scores or {}).get(x.slice)) for x in job.subs}
        if self.subs:
            self.done = self.win_done = sum(x.done for x in self.subs.values())


class Runner:
    def __init__(self, resolved: Any, campaign: Campaign, runtime: Runtime, *, store: Path | None = None,
                 offline: bool = False, gpu_groups: list[list[int]] | None = None,
                 slice_groups: dict[str, int] | None = None, plan: Any = None,
                 host_runtime: Runtime | None = None, mem_limit: str | None = None,
                 extra_inputs: Callable[[Any, PlannedJob, Any], dict[str, Any]] | None = None,
                 redo: bool = False, confirm_redo: Callable[[list[str]], bool] | None = None) -> None:
        self.resolved = resolved
        self.recipe = resolved.recipe
        self.campaign = campaign
        self.runtime = runtime
        if host_runtime is None:
            from trace_tui.runtime.local import LocalRuntime

            host_runtime = runtime if runtime.name == "local" else LocalRuntime()
        self.host_runtime = host_runtime
        self.store = Path(store) if store else campaign.path.parent / "store"
        self.offline = offline
        # GPU groups (one model endpoint each) and which group each slice was dealt to
        # (trace_tui.plan.gpu_plan); a group that runs out of its own slices takes others' (work stealing).
        self.gpu_groups = [list(g) for g in (gpu_groups or []) if g]
        self.slice_groups = slice_groups or {}
        # The run's GPU plan (trace_tui.plan.run_plan): each step's own groups (generation, judge, trainer).
        # Given, it decides every step's GPUs; gpu_groups/slice_groups remain for callers without one.
        self.gpu_plan = plan
        if plan is not None:
            self.slice_groups = plan.slice_groups()
        self.mem_limit = mem_limit
        self.extra_inputs = extra_inputs
        # Finished work whose inputs changed is replaced only when asked: `--redo`, or a yes from
        # confirm_redo (the TUI's question), which gets every change in full.
        self.redo = redo
        self.confirm_redo = confirm_redo
        self._cancel = threading.Event()
        self._handles: set[Handle] = set()
        self._handles_lock = threading.Lock()
        self._emit_lock = threading.Lock()
        self._sink: EventSink = lambda e: None
        self.owner = getattr(runtime, "owner", f"{socket.gethostname()}-{os.getpid()}")

    # -- planning (trace_tui.engine.planner, over the resolved recipe and the campaign's records) ----
    def _runtime_for(self, step: Step) -> Runtime:
        return self.runtime if step.image else self.host_runtime

    def expected_jobs(self) -> list[PlannedJob]:
        image_ids: dict[Any, str] = {}
        for step in self.recipe.steps:
            if step.image not in image_ids:
                image_ids[step.image] = self._runtime_for(step).image_id(step.image)
        return expected_jobs(self.resolved, self.recipe.steps, image_ids)

    def plan(self) -> Plan:
        return plan_against(self.expected_jobs(), self.campaign.jobs(), self.campaign.sub_slices())

    def preflight(self) -> None:
        """Everything that must hold before the first container starts (exit 3 otherwise)."""
        kinds = {s.image for s in self.recipe.steps if s.image}
        gpus = any(needs_gpus(s) for s in self.recipe.steps)
        problems = self.runtime.check(kinds, gpus=gpus) if kinds else []
        if self.gpu_plan is not None:  # a step the plan refused never starts on no GPU (or the wrong ones)
            problems += [f"{s.step}: {s.refusal}" for s in self.gpu_plan.steps
                         if s.refusal and any(st.id == s.step for st in self.recipe.steps)]
        if problems:
            raise RequirementsError("this machine cannot run the recipe: " + "; ".join(problems))

    # -- events -------------------------------------------------------------------
    def _emit(self, event: Any, log: bool = True) -> None:
        with self._emit_lock:
            if log:
                self.campaign.append_event(event.model_dump_json(exclude_none=True))
            self._sink(event)

    def _log(self, message: str, level: str = "info", step: str | None = None) -> None:
        self._emit(Log(level=level, message=message, step=step))

    # -- running ------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop everything (thread-safe, returns at once; run() then saves state and returns 130)."""
        self._cancel.set()
        with self._handles_lock:
            handles = list(self._handles)
        for h in handles:
            threading.Thread(target=h.stop, daemon=True).start()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self, on_event: EventSink | None = None) -> RunResult:
        """Plan and run; a full disk stops the run with one line naming where (the job is marked failed)."""
        try:
            return self._run(on_event)
        except (OSError, sqlite3.OperationalError) as exc:
            where = disk_full_path(exc, self.campaign.path)
            if where is None:
                raise
            self._mark_unfinished_failed("no space left on device")
            raise CheckFailed(f"no space left on device writing {where}",
                              hint="free space there and run the same command again to resume") from None

    def _mark_unfinished_failed(self, why: str) -> None:
        try:
            for (step, slice_), rec in self.campaign.jobs().items():
                if rec.state == "running":
                    self.campaign.update_job(step, slice_, state="failed", message=why, rate=None)
        except (OSError, sqlite3.Error):
            pass  # still full: a job left "running" is resumed on the next run anyway

    def redo_changes(self, plan: Plan) -> list[str]:
        """One line per finished job (or slice) whose pinned inputs changed, with the full old and new values."""
        c = self.campaign
        lines = []
        for j in plan.jobs:
            if j.action == "invalidate" and ((c.path / c.output_rel(j.step.id, j.slice)).exists()
                                             or c.receipt_path(j.step.id, j.slice).exists()):
                lines.append(f"{j.step.id} {j.slice}: {j.reason}")
            elif j.action != "invalidate":
                out = c.path / c.output_rel(j.step.id, j.slice) / "slices"
                lines += [f"{j.step.id} {x.slice}: {x.reason}" for x in j.subs
                          if x.action == "invalidate" and (out / slice_path(x.slice)).exists()]
        return lines

    def _run(self, on_event: EventSink | None = None) -> RunResult:
        self._sink = on_event or (lambda e: None)
        t0 = time.monotonic()
        self.preflight()
        c = self.campaign
        # A killed runner's containers may still be writing into the campaign: they go first, before
        # anything is planned, removed or swept.
        stale = self.runtime.cleanup(c.id)
        plan = self.plan()
        changes = self.redo_changes(plan)
        if changes and not self.redo and not (self.confirm_redo is not None and self.confirm_redo(changes)):
            for line in changes:
                self._log(f"inputs changed for finished work: {line}", "warning")
            c.flush_events()
            raise UsageError(f"{len(changes)} finished job(s) or slice(s) have changed inputs, first: {changes[0]}",
                             hint="nothing was changed; run again with --redo to redo them (their outputs are "
                                  f"kept under {c.path / 'superseded'})")
        if c.rebuilt:
            self._log(f"state.sqlite was missing or empty: {c.rebuilt} finished job(s) restored from their receipts",
                      "warning")
        stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
        c.sweep_temporaries()
        atomic_write_json(c.path / "recipe.json", dump(self.resolved))
        c.set_meta(run_tag=str(get_field(self.resolved, "run_tag", "")), recipe=self.recipe.name,
                   config_sha256=str(get_field(self.resolved, "config_sha256", "")), runtime=self.runtime.name,
                   rows_total=str(get_field(self.resolved, "rows_total", 0) or 0),
                   offline=str(self.offline).lower(), last_run_started=str(time.time()))
        if self.gpu_plan is not None:  # `status` shows the plan this run's containers were given
            c.set_meta(gpu_plan=json.dumps([s.model_dump() for s in self.gpu_plan.steps], sort_keys=True))
        c.upsert_steps((s.id, i, s.title, s.run[0], s.per_slice) for i, s in enumerate(self.recipe.steps))
        for j in plan.jobs:
            if j.action == "invalidate":
                c.supersede(j.step.id, j.slice, stamp, [j.reason])
        job_rows, sub_rows = plan_rows(plan, time.time())
        c.record_plan(job_rows)
        for j in plan.jobs:
            for x in j.subs:
                if x.action == "invalidate" and j.action != "invalidate":
                    # Convention for whole-step workers: a slice's outputs live in OUTPUT_DIR/slices/SLICE.
                    c.supersede_slice(j.step.id, x.slice, stamp, [x.reason])
        c.record_sub_slices(sub_rows)
        rows_total = sum(j.total for j in plan.jobs)
        self._emit(RunState(state="planned", message=plan.summary(), campaign=str(c.path),
                            jobs_total=len(plan.jobs), jobs_done=plan.count("skip"), rows_total=rows_total,
                            rows_done=sum(sum(x.done for x in j.subs) if j.subs else j.done for j in plan.jobs)))
        if stale:
            self._log(f"removed {stale} container(s) left by an earlier run of this campaign", "warning")
        for j in plan.jobs:
            for x in ([j] if j.action == "invalidate" else []) + [x for x in j.subs if x.action == "invalidate"]:
                self._emit(SliceState(step=j.step.id, model=x.model, seed=x.seed, benchmark=x.benchmark,
                                      state="invalidated", message=x.reason, total=x.total))
        if self.offline and self.runtime.name == "local":
            self._log("--offline with the local runtime: steps run without network isolation", "warning")

        failed: list[str] = []
        try:
            for pos, step in enumerate(self.recipe.steps):
                if self._cancel.is_set():
                    break
                jobs = [j for j in plan.jobs if j.position == pos]
                todo = [j for j in jobs if j.action != "skip"]
                if not todo:
                    c.set_step_state(step.id, "completed", "already complete")
                    self._emit(StepState(step=step.id, state="skipped", message="already complete"))
                    continue
                c.set_step_state(step.id, "running")
                self._emit(StepState(step=step.id, state="running",
                                     message=f"{len(todo)} of {len(jobs)} jobs to run"))
                step_failed = self._run_step(step, todo)
                if self._cancel.is_set():
                    c.set_step_state(step.id, "cancelled")
                    self._emit(StepState(step=step.id, state="cancelled"))
                    break
                if step_failed:
                    failed += step_failed
                    msg = f"{len(step_failed)} job(s) failed"
                    c.set_step_state(step.id, "failed", msg)
                    self._emit(StepState(step=step.id, state="failed", message=msg))
                    break  # later steps read this one's outputs
                c.set_step_state(step.id, "completed")
                self._emit(StepState(step=step.id, state="completed"))
        finally:
            if self._cancel.is_set():
                self.runtime.cleanup(c.id)
            c.flush_events()

        jobs_after = c.jobs()
        expected = [jobs_after[(j.step.id, j.slice)] for j in plan.jobs]
        done_jobs = sum(1 for j in expected if j.state == "completed")
        # Rows count against the planned totals only: a job whose rows were unknown when planned (a
        # preparation step) must not push "rows done" past "rows total".
        rows_done = sum(min(j.done, p.total) for j, p in zip(expected, plan.jobs) if p.total)
        result = RunResult(exit_code=ExitCode.OK, message="", failed=failed, jobs_total=len(expected),
                           jobs_done=done_jobs, rows_done=rows_done, rows_total=rows_total,
                           seconds=time.monotonic() - t0)
        if self._cancel.is_set():
            result.exit_code = ExitCode.INTERRUPTED
            result.message = "interrupted; state saved — run the same command again to resume"
            state = "cancelled"
        elif failed:
            result.exit_code = ExitCode.FAILED
            result.message = failed[0]
            state = "failed"
        else:
            result.message = f"campaign complete: {done_jobs}/{len(expected)} jobs"
            state = "completed"
        self._emit(RunState(state=state, message=result.message, campaign=str(c.path), jobs_total=len(expected),
                            jobs_done=done_jobs, rows_total=rows_total, rows_done=result.rows_done))
        c.set_meta(last_run_state=state, last_run_finished=str(time.time()))
        c.flush_events()
        return result

    def _step_gpus(self, step: Step) -> Any:
        return self.gpu_plan.step(step.id) if self.gpu_plan is not None else None

    def groups_for(self, step: Step) -> list[list[int]]:
        """The host GPUs of each container the step runs at a time (one list per GPU group; [[]]: no GPUs)."""
        return step_groups(step, self._step_gpus(step), self.gpu_groups)

    def _run_step(self, step: Step, todo: list[PlannedJob]) -> list[str]:
        groups = self.groups_for(step)
        if getattr(step, "keep_loaded", False):
            return self._run_batches(deal_batches(todo, len(groups)), groups)
        failed: list[str] = []
        if len(groups) == 1 or len(todo) == 1:
            for j in todo:
                if self._cancel.is_set():
                    break
                err = self._run_job(j, groups[0])
                if err:
                    failed.append(err)
            return failed
        planned = self._step_gpus(step)
        # the plan's slice deal is over the generation groups; other steps (the judge's) deal in turn
        dealt = self.slice_groups if planned is None or planned.role == "generation" else {}
        queues = [collections.deque(q) for q in deal_queues(todo, len(groups), dealt)]
        lock = threading.Lock()

        def next_job(me: int) -> PlannedJob | None:
            with lock:
                if queues[me]:
                    return queues[me].popleft()
                other = max(range(len(queues)), key=lambda k: len(queues[k]))
                return queues[other].pop() if queues[other] else None

        def worker(me: int) -> None:
            while not self._cancel.is_set():
                j = next_job(me)
                if j is None:
                    return
                err = self._run_job(j, groups[me])
                if err:
                    with lock:
                        failed.append(err)

        threads = [threading.Thread(target=worker, args=(i,), name=f"gpu-group-{'-'.join(map(str, g))}")
                   for i, g in enumerate(groups)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return failed

    def _run_batches(self, batches: list[list[PlannedJob]], groups: list[list[int]]) -> list[str]:
        """One worker per GPU group with slices, all at once; each serves its batch in turn."""
        failed: list[str] = []
        lock = threading.Lock()

        def worker(i: int) -> None:
            errs = self._run_batch(batches[i], groups[i], f"_worker-{i}")
            with lock:
                failed.extend(errs)

        mine = [i for i, b in enumerate(batches) if b]
        if len(mine) == 1:
            worker(mine[0])
            return failed
        threads = [threading.Thread(target=worker, args=(i,), name=f"gpu-group-{'-'.join(map(str, groups[i]))}")
                   for i in mine]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return failed

    def job_spec(self, job: PlannedJob, gpus: list[int]) -> dict[str, Any]:
        return job_spec(self.resolved, self.recipe, self.campaign, job, gpus, planned=self._step_gpus(job.step),
                        gpu_groups=self.gpu_groups, offline=self.offline, extra_inputs=self.extra_inputs)

    def batch_launch_for(self, jobs: list[PlannedJob], gpus: list[int], worker: str) -> Launch:
        """A keep_loaded step's worker for ``jobs`` on host GPUs ``gpus``: each slice's spec in its own
        job.json (as a per-slice job has) and all of them, in order, as the worker's ``batch``."""
        c, step = self.campaign, jobs[0].step
        specs = [self._write_spec(j, gpus) for j in jobs]
        job_dir = c.job_dir(step.id, worker)
        atomic_write_json(job_dir / "job.json", {"step": step.id, "recipe": self.recipe.name, "worker": worker,
                                                 "args": list(step.run[1:]), "gpus": list(range(len(gpus))),
                                                 "host_gpus": gpus, "batch": specs})
        os.chmod(job_dir / "job.json", 0o644)
        return Launch(step=step.id, slice=worker, module=step.run[0], args=list(step.run[1:]), job_dir=job_dir,
                      campaign=c.path, store=self.store, log_path=c.log_path(step.id, worker), image=step.image,
                      network=step.needs.network and not self.offline, gpus=gpus, labels={LABEL_CAMPAIGN: c.id},
                      mem_limit=self.mem_limit, env=dict(getattr(step, "env", {}) or {}),
                      output_dir=c.path / "outputs" / step.id)

    def _write_spec(self, job: PlannedJob, gpus: list[int]) -> dict[str, Any]:
        """The job's spec into its job.json (and its output folder made); returns the spec."""
        c = self.campaign
        spec = self.job_spec(job, gpus)
        job_dir = c.job_dir(job.step.id, job.slice)
        atomic_write_json(job_dir / "job.json", spec)
        os.chmod(job_dir / "job.json", 0o644)  # the container user must read it
        (c.path / c.output_rel(job.step.id, job.slice)).mkdir(parents=True, exist_ok=True)
        return spec

    def launch_for(self, job: PlannedJob, gpus: list[int]) -> Launch:
        """Write the job's spec and return what the runtime is asked to start for it on host GPUs ``gpus``."""
        c, step = self.campaign, job.step
        job_dir = c.job_dir(step.id, job.slice)
        self._write_spec(job, gpus)
        out_dir = c.path / c.output_rel(step.id, job.slice)
        network = step.needs.network and not self.offline
        return Launch(step=step.id, slice=job.slice, module=step.run[0], args=list(step.run[1:]), job_dir=job_dir,
                      campaign=c.path, store=self.store, log_path=c.log_path(step.id, job.slice), image=step.image,
                      network=network, gpus=gpus, labels={LABEL_CAMPAIGN: c.id}, mem_limit=self.mem_limit,
                      env=dict(getattr(step, "env", {}) or {}), output_dir=out_dir)

    def _begin_job(self, job: PlannedJob) -> float:
        """The job's record says running (one more attempt) and its slice is announced; returns the wall start."""
        c, step = self.campaign, job.step
        started_wall = time.time()
        rec = c.job(step.id, job.slice)
        attempts = (rec.attempts if rec else 0) + 1
        c.update_job(step.id, job.slice, state="running", attempts=attempts, started_at=started_wall, message="")
        resumed = job.action == "resume" and job.done > 0
        self._emit(SliceState(step=step.id, model=job.model, seed=job.seed, benchmark=job.benchmark,
                              state="resumed" if resumed else "running", done=job.done, total=job.total,
                              message=f"resuming at row {job.done}" if resumed else ""))
        return started_wall

    def _run_job(self, job: PlannedJob, gpus: list[int]) -> str | None:
        """Run one job to its end. Returns a failure line, or None (done or cancelled)."""
        step = job.step
        launch = self.launch_for(job, gpus)
        started_wall = self._begin_job(job)
        if self._cancel.is_set():
            return None
        known = self.campaign.sub_slices() if job.subs else {}
        ctx = _JobContext(job, {x.slice: getattr(known.get((step.id, x.slice)), "score", None) for x in job.subs})
        handle = self._runtime_for(step).start(launch)
        with self._handles_lock:
            self._handles.add(handle)
        if self._cancel.is_set():  # cancel() raced with start(): stop what we just started
            handle.stop()
        try:
            batches = getattr(handle, "batches", None)  # lines that arrived together, where a runtime reads so
            seen: set[str] = set()
            for batch in batches() if batches is not None else ([line] for line in handle.lines()):
                for line in coalesce_progress(batch, seen):
                    self._dispatch(parse_stage_line(line, step=step.id), ctx)
            info = handle.wait()
        finally:
            with self._handles_lock:
                self._handles.discard(handle)
        return self._finish_job(job, ctx, info, started_wall, gpus)

    def _run_batch(self, jobs: list[PlannedJob], gpus: list[int], worker: str) -> list[str]:
        """Run a keep_loaded step's ``jobs`` (its slices dealt to one GPU group) in one worker, in turn.

        The worker loads its model once; each slice is still its own job: it goes to running when
        the worker reaches it, and is receipted and marked complete as soon as the worker reports it
        done (a slice finished before a crash or Ctrl-C stays complete; a rerun does the others).
        Returns the failure lines.
        """
        c, step = self.campaign, jobs[0].step
        launch = self.batch_launch_for(jobs, gpus, worker)
        by_key = {(j.model, j.seed, j.benchmark): j for j in jobs}
        prefixes = [(c.output_rel(step.id, j.slice) + "/", (j.model, j.seed, j.benchmark)) for j in jobs]
        live: dict[Any, tuple[_JobContext, float]] = {}  # started slices: their context and wall start
        ended: set[Any] = set()
        failed: list[str] = []
        current: Any = None  # the slice the worker is on (its artifacts and logs belong to it)
        worker_status: Status | None = None
        if self._cancel.is_set():
            return failed
        handle = self._runtime_for(step).start(launch)
        with self._handles_lock:
            self._handles.add(handle)
        if self._cancel.is_set():
            handle.stop()
        try:
            for line in handle.lines():
                ev = parse_stage_line(line, step=step.id)
                key = (getattr(ev, "model", None), getattr(ev, "seed", None), getattr(ev, "benchmark", None))
                if isinstance(ev, Artifact):
                    key = next((k for p, k in prefixes if ev.path.startswith(p)), current)
                if key not in by_key or key in ended:
                    if isinstance(ev, Status) and ev.model is None:
                        worker_status = ev  # the worker's own end: read after it exits
                    self._emit(ev)
                    continue
                if key not in live:
                    job = by_key[key]
                    live[key] = (_JobContext(job), self._begin_job(job))
                current = key
                ctx, started_wall = live[key]
                if isinstance(ev, Status):  # this slice is over: receipt it now, whatever comes after
                    ctx.status = ev
                    self._emit(ev)
                    err = self._finish_job(ctx.job, ctx, ExitInfo(exit_code=0), started_wall, gpus, worker=worker)
                    ended.add(key)
                    current = None
                    if err:
                        failed.append(err)
                    continue
                self._dispatch(ev, ctx)
            info = handle.wait()
        finally:
            with self._handles_lock:
                self._handles.discard(handle)
        for key, job in by_key.items():
            if key in ended:
                continue
            if key in live:  # the worker stopped inside this slice: cancelled, or failed with the worker's reason
                ctx, started_wall = live[key]
                if worker_status is not None and worker_status.state == "failed":
                    ctx.status = worker_status
                elif info.exit_code == 0 and not info.stopped:
                    ctx.status = Status(state="failed", message="the worker ended without finishing this slice")
                err = self._finish_job(job, ctx, info, started_wall, gpus, worker=worker)
                if err:
                    failed.append(err)
            elif not self._cancel.is_set() and not info.stopped:  # never reached: to do on the next run
                why = (worker_status.message if worker_status is not None and worker_status.message
                       else info.describe())
                line = (f"step {step.id} slice {job.slice} not run: its group's worker ended first ({why}); "
                        f"log: {c.log_path(step.id, worker)}; fix the cause and run the same command again to resume")
                c.update_job(step.id, job.slice, state="failed", message=line[:2000], finished_at=time.time())
                self._emit(SliceState(step=step.id, model=job.model, seed=job.seed, benchmark=job.benchmark,
                                      state="failed", done=job.done, total=job.total, message=line))
                failed.append(line)
        c.flush_events()
        return failed

    def _dispatch(self, ev: Any, ctx: _JobContext) -> None:
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
            self._emit(ev, log=logged)
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
                        self._emit(ev)
                        self._emit_sub_done(ctx, sub)
                        return
                else:
                    ctx.score = ev.value
        elif isinstance(ev, Status):
            ctx.status = ev
        self._emit(ev)

    def _sub_progress(self, ctx: _JobContext, sub: _Live, ev: Progress, now: float) -> None:
        step, x = ctx.job.step, sub.job
        if not sub.announced:
            for other in ctx.subs.values():  # a finished slice that never got a score is done now
                if other.finished and not other.emitted:
                    self._emit_sub_done(ctx, other)
            sub.announced = True
            resumed = ev.done > 0
            self._emit(SliceState(step=step.id, model=x.model, seed=x.seed, benchmark=x.benchmark,
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

    def _emit_sub_done(self, ctx: _JobContext, sub: _Live) -> None:
        sub.emitted = True
        x = sub.job
        self._emit(SliceState(step=ctx.job.step.id, model=x.model, seed=x.seed, benchmark=x.benchmark,
                              state="completed", done=sub.done, total=sub.total, score=sub.score))

    def _flush_subs(self, ctx: _JobContext, outcome: str) -> None:
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

    def _finish_job(self, job: PlannedJob, ctx: _JobContext, info: ExitInfo, started_wall: float,
                    gpus: list[int], worker: str | None = None) -> str | None:
        c, step = self.campaign, job.step
        fields: dict[str, Any] = dict(done=ctx.done, total=ctx.total, phase=ctx.phase, rate=ctx.rate)
        ident = dict(step=step.id, model=job.model, seed=job.seed, benchmark=job.benchmark)
        if self._cancel.is_set() or info.stopped:
            self._flush_subs(ctx, "cancelled")
            c.update_job(step.id, job.slice, state="cancelled", message="interrupted", **fields)
            self._emit(SliceState(state="cancelled", done=ctx.done, total=ctx.total, message="interrupted", **ident))
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
        if reason is None:
            receipt, reason = write_receipt(c, job, rows=ctx.done, total=ctx.total, score=ctx.score,
                                            artifacts=ctx.artifacts, subs=ctx.subs.values(), info=info,
                                            started_wall=started_wall, gpus=gpus,
                                            runtime=self._runtime_for(step).name, worker=worker)
        if reason is not None:
            where = job.slice if job.slice != STEP_SLICE else ""
            last = " | ".join(info.tail[-5:])
            line = (f"step {step.id}{' slice ' + where if where else ''} failed: {reason}"
                    + (f"; last log lines: {last}" if last else "")
                    + f"; log: {c.log_path(step.id, worker or job.slice)}; fix the cause and run the same command "
                      "again to resume")
            self._flush_subs(ctx, "failed")
            c.update_job(step.id, job.slice, state="failed", message=line[:2000], finished_at=time.time(), **fields)
            self._emit(SliceState(state="failed", done=ctx.done, total=ctx.total, message=line, **ident))
            return line
        self._flush_subs(ctx, "completed")
        c.update_job(step.id, job.slice, state="completed", score=ctx.score, receipt=receipt,
                     finished_at=time.time(), message="", **fields)
        self._emit(SliceState(state="completed", done=ctx.done, total=ctx.total, score=ctx.score, **ident))
        c.flush_events()
        return None


def disk_full_path(exc: BaseException, campaign: Path) -> str | None:
    """Where a write failed for want of space (ENOSPC, EDQUOT, SQLite's "disk is full"), else None."""
    import errno

    if isinstance(exc, sqlite3.OperationalError):
        return str(campaign / "state.sqlite") if "disk is full" in str(exc) else None
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return str(exc.filename or campaign)
    return None


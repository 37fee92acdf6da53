"""The runner: run the jobs the planner (trace_tui.engine.planner) decided, step by step, and say how it went.

``Runner(resolved, campaign, runtime).run(on_event)`` is synchronous (the TUI
calls it in a worker thread, the headless command in the main thread) and
``cancel()`` may be called from any thread or a signal handler.

The planner decides what each job must do (skip, resume, invalidate, run). Here the
plan is recorded (an invalidated job's outputs superseded before it reruns), each
step's jobs are spread over its GPU groups (trace_tui.engine.scheduling) and each
job runs through a runtime (trace_tui.engine.execution; a keep_loaded step's
slices through one worker per group, trace_tui.engine.batch) from its spec
(trace_tui.engine.launches), its worker's lines becoming events and database rows
(trace_tui.engine.live) and, when it finishes, its receipt (trace_tui.engine.receipts).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui.campaign_files.presence import damaged_jobs, read_presence
from trace_tui.campaign_files.recipe_file import RECIPE_FILE
from trace_tui.campaign_files.state import slice_path
from trace_tui.common.atomic import atomic_write_json
from trace_tui.engine.batch import run_batch
from trace_tui.engine.campaign import Campaign
from trace_tui.engine.cancellation import Cancellation
from trace_tui.engine.events import Event, Log, RunState, SliceState, StepState
from trace_tui.engine.execution import Execution
from trace_tui.engine.launches import ExtraInputs, Launches
from trace_tui.engine.planner import (
    Plan,
    PlannedJob,
    deal_batches,
    dump,
    expected_jobs,
    get_field,
    needs_gpus,
    plan_against,
    plan_rows,
    repair_damaged,
    step_groups,
)
from trace_tui.engine.scheduling import run_batches, run_on_groups
from trace_tui.errors import CheckFailed, ExitCode, RequirementsError, UsageError, out_of_space
from trace_tui.recipe.schema import entry_point_problem
from trace_tui.release import release_lock
from trace_tui.runtime.base import Runtime
from trace_tui.runtime.local import LocalRuntime
from trace_tui.store.store import Store
from trace_tui.store.trust import trust_levels

if TYPE_CHECKING:  # the recipe schema (pydantic) is imported by whoever builds a Runner, not here
    from trace_tui.gpu_plan import RunPlan, StepGpus
    from trace_tui.recipe.schema import ResolvedRecipe, Step
    from trace_tui.signing.checkpoints import CheckpointSigner

EventSink = Callable[[Event], None]


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


class Runner:
    def __init__(self, resolved: ResolvedRecipe, campaign: Campaign, runtime: Runtime, *, store: Path | None = None,
                 offline: bool = False, gpu_groups: list[list[int]] | None = None,
                 slice_groups: dict[str, int] | None = None, plan: RunPlan | None = None,
                 host_runtime: Runtime | None = None, mem_limit: str | None = None,
                 extra_inputs: ExtraInputs | None = None,
                 redo: bool = False, confirm_redo: Callable[[list[str]], bool] | None = None,
                 listed_steps: Sequence[Step] | None = None, checkpoint_signer: CheckpointSigner | None = None) -> None:
        self.resolved = resolved
        self.recipe = resolved.recipe
        # The steps the campaign lists (`trace-tui status`, the campaigns list): the recipe's as it was chosen,
        # where RESOLVED is it less the steps the user skipped; those are listed as skipped, not left out.
        self.listed_steps = list(listed_steps) if listed_steps is not None else list(self.recipe.steps)
        self.campaign = campaign
        self.runtime = runtime
        if host_runtime is None:
            host_runtime = runtime if runtime.name == "local" else LocalRuntime()
        self.host_runtime = host_runtime
        self.offline = offline
        # GPU groups (one model endpoint each) and which group each slice was dealt to
        # (trace_tui.gpu_plan.gpu_plan); a group that runs out of its own slices takes others' (work stealing).
        self.gpu_groups = [list(g) for g in (gpu_groups or []) if g]
        self.slice_groups = slice_groups or {}
        # The run's GPU plan (trace_tui.gpu_plan.run_plan): each step's own groups (generation, judge, trainer).
        # Given, it decides every step's GPUs; gpu_groups/slice_groups remain for callers without one.
        self.gpu_plan = plan
        if plan is not None:
            self.slice_groups = plan.slice_groups()
        # Finished work whose inputs changed is replaced only when asked: `--redo`, or a yes from
        # confirm_redo (the TUI's question), which gets every change in full.
        self.redo = redo
        self.confirm_redo = confirm_redo
        self._cancellation = Cancellation()
        self._emit_lock = threading.Lock()
        self._sink: EventSink = lambda e: None
        self.launches = Launches(resolved, campaign, store=Path(store) if store else campaign.path.parent / "store",
                                 offline=offline, mem_limit=mem_limit, gpu_groups=self.gpu_groups,
                                 step_gpus=self._step_gpus, extra_inputs=extra_inputs)
        self.execution = Execution(campaign, self.launches, self._runtime_for, self._cancellation, self._emit,
                                   checkpoint_signer=checkpoint_signer, store_trust=self._store_trust)
        self._trust_of: dict[str, dict[str, str]] = {}

    def _store_trust(self, step: Step) -> dict[str, str]:
        """The trust level of each store entry STEP reads, read once per step (its receipts record it)."""
        if step.id not in self._trust_of:
            names = list((get_field(self.resolved, "store_entries", {}) or {}).get(step.id, []))
            try:
                self._trust_of[step.id] = trust_levels(Store(self.launches.store), names, release_lock())
            except Exception:  # noqa: BLE001 - a receipt records what could be read; the preflight judged trust
                self._trust_of[step.id] = {}
        return self._trust_of[step.id]

    # -- planning (trace_tui.engine.planner, over the resolved recipe and the campaign's records) ----
    def _runtime_for(self, step: Step) -> Runtime:
        return self.runtime if step.image else self.host_runtime

    def expected_jobs(self) -> list[PlannedJob]:
        image_ids: dict[str | None, str] = {}
        for step in self.recipe.steps:
            if step.image not in image_ids:
                image_ids[step.image] = self._runtime_for(step).image_id(step.image)
        return expected_jobs(self.resolved, self.recipe.steps, image_ids)

    def plan(self) -> Plan:
        records = self.campaign.jobs()
        plan = plan_against(self.expected_jobs(), records, self.campaign.sub_slices())
        # Finished work whose receipt or outputs are gone or cut short is redone (presence and sizes, cheaply).
        with self.campaign._mutex:
            noted = read_presence(self.campaign.db)
        return repair_damaged(plan, damaged_jobs(self.campaign.path, records.values(), noted))

    def preflight(self) -> None:
        """Everything that must hold before the first container starts (exit 3 otherwise)."""
        for step in self.recipe.steps:  # the schema's check, again on what is about to run (exit 2)
            problem = entry_point_problem(list(step.run))
            if problem is not None:
                raise UsageError(f"step {step.id}: run {problem}", hint="a step runs only trace-tui's own workers")
        kinds = {s.image for s in self.recipe.steps if s.image}
        gpus = any(needs_gpus(s) for s in self.recipe.steps)
        problems = self.runtime.check(kinds, gpus=gpus) if kinds else []
        if self.gpu_plan is not None:  # a step the plan refused never starts on no GPU (or the wrong ones)
            problems += [f"{s.step}: {s.refusal}" for s in self.gpu_plan.steps
                         if s.refusal and any(st.id == s.step for st in self.recipe.steps)]
        if problems:
            raise RequirementsError("this machine cannot run the recipe: " + "; ".join(problems))

    # -- events -------------------------------------------------------------------
    def _emit(self, event: Event, log: bool = True) -> None:
        with self._emit_lock:
            if log:
                self.campaign.append_event(event.model_dump_json(exclude_none=True))
            self._sink(event)

    def _log(self, message: str, level: str = "info", step: str | None = None) -> None:
        self._emit(Log(level=level, message=message, step=step))

    # -- running ------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop everything (thread-safe, returns at once; run() then saves state and returns 130)."""
        self._cancellation.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancellation.is_set()

    def run(self, on_event: EventSink | None = None) -> RunResult:
        """Plan and run; a full disk stops the run with one line naming where (the job is marked failed)."""
        try:
            return self._run(on_event)
        except (OSError, sqlite3.OperationalError) as exc:
            where = disk_full_path(exc, self.campaign.path)
            if where is None:
                raise
            error = CheckFailed(f"no space left on device writing {where}",
                                hint="free space there and run the same command again to resume")
            self._mark_unfinished_failed("no space left on device", error.line())
            raise error from None

    def _mark_unfinished_failed(self, why: str, line: str) -> None:
        """The jobs and the step a stopping error cut short: failed, the step with the error's one line (the
        TUI, the headless printer and `status` showed it "running")."""
        steps: list[str] = []
        try:
            for (step, slice_), rec in self.campaign.jobs().items():
                if rec.state == "running":
                    self.campaign.update_job(step, slice_, state="failed", message=why, rate=None)
            steps = [r[0] for r in self.campaign.db.execute("SELECT step FROM steps WHERE state='running'")]
            for step in steps:
                self.campaign.set_step_state(step, "failed", line)
        except (OSError, sqlite3.Error):
            pass  # still full: a job left "running" is resumed on the next run anyway
        for step in steps:
            self._emit(StepState(step=step, state="failed", message=line), log=False)  # the events file may be full

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
        atomic_write_json(c.path / RECIPE_FILE, dump(self.resolved))
        c.set_meta(run_tag=str(get_field(self.resolved, "run_tag", "")), recipe=self.recipe.name,
                   config_sha256=str(get_field(self.resolved, "config_sha256", "")), runtime=self.runtime.name,
                   rows_total=str(get_field(self.resolved, "rows_total", 0) or 0),
                   offline=str(self.offline).lower(), last_run_started=str(time.time()))
        if self.gpu_plan is not None:  # `status` shows the plan this run's containers were given
            c.set_meta(gpu_plan=json.dumps([s.model_dump() for s in self.gpu_plan.steps], sort_keys=True))
        c.upsert_steps((s.id, i, s.title, s.run[0], s.per_slice) for i, s in enumerate(self.listed_steps))
        run_ids = {s.id for s in self.recipe.steps}
        for step in self.listed_steps:
            if step.id not in run_ids:
                c.set_step_state(step.id, "skipped", "skipped when this run was started: not run")
        for j in plan.jobs:
            if j.action in ("invalidate", "repair"):
                c.supersede(j.step.id, j.slice, stamp, [j.reason])
            if j.action == "repair":  # not finished any more, whatever happens to this run
                c.update_job(j.step.id, j.slice, state="pending", receipt=None, done=0, score=None, message=j.reason)
        job_rows, sub_rows = plan_rows(plan, time.time())
        c.record_plan(job_rows)
        for j in plan.jobs:
            for x in j.subs:
                if x.action == "invalidate" and j.action != "invalidate":
                    # Convention for whole-step workers: a slice's outputs live in OUTPUT_DIR/slices/SLICE.
                    c.supersede_slice(j.step.id, x.slice, stamp, [x.reason])
        c.record_sub_slices(sub_rows)
        rows_total = sum(j.total for j in plan.jobs)
        step_rows: dict[str, list[int]] = {}  # each step's own [done, total]: the printer's per-step ETA
        for j in plan.jobs:
            if j.total:
                counts = step_rows.setdefault(j.step.id, [0, 0])
                counts[0] += min(sum(x.done for x in j.subs) if j.subs else j.done, j.total)
                counts[1] += j.total
        self._emit(RunState(state="planned", message=plan.summary(), campaign=str(c.path),
                            jobs_total=len(plan.jobs), jobs_done=plan.count("skip"), rows_total=rows_total,
                            rows_done=sum(sum(x.done for x in j.subs) if j.subs else j.done for j in plan.jobs),
                            step_rows=step_rows))
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
                if self._cancellation.is_set():
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
                if self._cancellation.is_set():
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
            if self._cancellation.is_set():
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
        if self._cancellation.is_set():
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

    def _step_gpus(self, step: Step) -> StepGpus | None:
        return self.gpu_plan.step(step.id) if self.gpu_plan is not None else None

    def groups_for(self, step: Step) -> list[list[int]]:
        """The host GPUs of each container the step runs at a time (one list per GPU group; [[]]: no GPUs)."""
        return step_groups(step, self._step_gpus(step), self.gpu_groups)

    def _run_step(self, step: Step, todo: list[PlannedJob]) -> list[str]:
        groups = self.groups_for(step)
        if step.keep_loaded:
            return run_batches(deal_batches(todo, len(groups)), groups, partial(run_batch, self.execution))
        planned = self._step_gpus(step)
        # the plan's slice deal is over the generation groups; other steps (the judge's) deal in turn
        dealt = self.slice_groups if planned is None or planned.role == "generation" else {}
        return run_on_groups(todo, groups, dealt, self.execution.run, self._cancellation)


def disk_full_path(exc: BaseException, campaign: Path) -> str | None:
    """Where a write failed for want of space (ENOSPC, EDQUOT, SQLite's "disk is full"), else None."""
    if isinstance(exc, sqlite3.OperationalError):
        return str(campaign / "state.sqlite") if "disk is full" in str(exc) else None
    if out_of_space(exc):
        return str(exc.filename or campaign)  # type: ignore[attr-defined]  # an OSError
    return None


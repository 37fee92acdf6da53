"""A campaign across nodes on Slurm: shards submitted as a job array, merged when all are complete.

Layout inside the parent campaign directory::

    shards.json                the shard plan (trace_tui.campaign_files.shards.ShardPlan)
    recipe.json                the parent's resolved recipe (all slices)
    shards/ID/                 one campaign per shard (its own state.sqlite, outputs, receipts)
    slurm/shards.sbatch        the job array: task i runs shard i with the same engine, headless
    slurm/merge.sbatch         after every task: `trace-tui merge` (and the summary tables, where the recipe has them)
    slurm/verify.sbatch        after the merge: `trace-tui verify --campaign PARENT`
    slurm/submissions.json     every submission: job ids, which shard each array task runs
    slurm/logs/                Slurm's output files (shard-ARRAYJOB_TASK.log, merge-JOB.log, verify-JOB.log)
    slurm/tasks/               each job's exit record (written by the batch script; Slurm's accounting may be off)
    merged.json                the merged view: written by `trace-tui merge` once every shard is complete

Only the submitting host writes the parent's files; each node writes only its shard's
directory, so no SQLite database is shared between nodes. Reading a campaign's status is
trace_tui.engine.cluster_status.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.campaign_files.recipe_file import RECIPE_FILE, read_campaign_recipe
from trace_tui.campaign_files.shard_files import MERGED_FILE, is_sharded, read_plan, shard_dir
from trace_tui.campaign_files.shards import PLAN_FILE, Shard, ShardPlan, coverage_problems
from trace_tui.campaign_files.state import read_snapshot
from trace_tui.common.atomic import atomic_write_json
from trace_tui.engine.cluster_status import ACTIVE, latest_task, read_submissions, shard_progress, slurm_states
from trace_tui.errors import CheckFailed, UsageError
from trace_tui.runtime import slurm

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe.schema import ResolvedRecipe

def write_parent_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, data)


# --------------------------------------------------------------------------- merge


def merge_campaign(parent: Path | str) -> dict[str, Any]:
    """Check that every shard is complete and covers its slices, then write the parent's merged view."""
    parent = Path(parent).resolve()
    plan = read_plan(parent)
    problems = coverage_problems(plan)
    if problems:
        raise CheckFailed(f"{parent / PLAN_FILE}: {problems[0]}")
    entries = []
    for shard in plan.shards:
        where = shard_dir(parent, shard)
        if where is None or not (where / "state.sqlite").exists():
            raise CheckFailed(f"shard {shard.id} has not started ({parent / shard.dir})",
                              hint="run the same `--scheduler slurm` command again to resubmit it")
        meta, _steps, jobs, subs = read_snapshot(where)
        unfinished = [j for j in jobs if j.state != "completed"] + [x for x in subs if x.state != "completed"]
        if not jobs or unfinished:
            what = f"{unfinished[0].step} {unfinished[0].slice} is {unfinished[0].state}" if unfinished else "no jobs"
            raise CheckFailed(f"shard {shard.id} is not complete ({what})",
                              hint="run the same `--scheduler slurm` command again to finish it")
        resolved = read_campaign_recipe(where)
        got = sorted(f"{x['model']}/{x['seed']}/{x['benchmark']}" for x in resolved.get("slices", []))
        if got != sorted(shard.slices):
            raise CheckFailed(f"shard {shard.id} ran other slices than its plan ({len(got)} vs {len(shard.slices)})",
                              hint=f"remove {where} and run the same command again")
        scores = {f"{j.step} {j.slice}": j.score for j in jobs if j.score is not None}
        scores.update({f"{x.step} {x.slice}": x.score for x in subs if x.score is not None})
        entries.append({"id": shard.id, "dir": shard.dir, "run_tag": meta.get("run_tag"), "slices": shard.slices,
                        "jobs": len(jobs), "receipts": sum(1 for j in jobs if j.receipt), "scores": scores})
    merged = {"schema": "trace-tui-merged-v1", "recipe": plan.recipe, "run_tag": plan.run_tag,
              "config_sha256": plan.config_sha256, "merged_at": time.time(), "shards": entries}
    write_parent_json(parent / MERGED_FILE, merged)
    return merged


# --------------------------------------------------------------------------- submission


def prepare_parent(parent: Path, resolved: ResolvedRecipe, plan: ShardPlan) -> None:
    """The parent's plan and recipe; refuses a directory that holds a single-node campaign or another plan."""
    if (parent / "state.sqlite").is_file():
        raise UsageError(f"{parent} holds a single-node campaign; a Slurm campaign needs its own directory",
                         hint="give --campaign DIR a new directory")
    if (parent / PLAN_FILE).is_file():
        old = read_plan(parent)
        if (old.config_sha256, old.shard_by, [s.id for s in old.shards]) != \
                (plan.config_sha256, plan.shard_by, [s.id for s in plan.shards]):
            raise UsageError(f"{parent} was split differently (by {old.shard_by}, {len(old.shards)} shards)",
                             hint=f"use --shard-by {old.shard_by} and the same selection, or a new --campaign DIR")
    parent.mkdir(parents=True, exist_ok=True)
    write_parent_json(parent / PLAN_FILE, plan.model_dump(mode="json", by_alias=True))
    write_parent_json(parent / RECIPE_FILE, resolved.model_dump(mode="json"))


def afterok_dependency(array_job: str | None, tasks: list[int], still_running: list[str]) -> str | None:
    # afterok on named array tasks (JOB_TASK), so a task that failed in an earlier submission and is
    # resubmitted now does not hold the merge forever. None: every shard is complete, the merge can start.
    deps = ([f"{array_job}_{i}" for i in tasks] if array_job else []) + still_running
    return "afterok:" + ":".join(deps) if deps else None


def plan_submission(parent: Path, plan: ShardPlan) -> tuple[list[Shard], list[str], list[str]]:
    """(shards to submit now, array tasks still queued or running, finishing jobs still waiting)."""
    subs = read_submissions(parent)
    states = slurm_states(parent, subs)
    active_tasks, to_run = [], []
    for shard in plan.shards:
        latest = latest_task(subs, shard)
        st = states.get(latest[1]) if latest else None
        if st is not None and st.state in ACTIVE:
            active_tasks.append(latest[1])  # never resubmit a queued or running shard
        elif not shard_progress(parent, shard)["complete"]:
            to_run.append(shard)
    waiting = [str(s[k]) for s in subs for k in ("merge_job", "verify_job")
               if s.get(k) and (st := states.get(str(s[k]))) is not None and st.state in ACTIVE]
    return to_run, active_tasks, waiting


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A Slurm campaign made ready to submit: its parent written, its batch scripts in PARENT/slurm."""

    parent: Path
    plan: ShardPlan
    scripts: dict[str, Path]
    opts: slurm.BatchOptions
    max_parallel: int | None


@dataclasses.dataclass(frozen=True)
class Submitted:
    """What one submission did: the record it added to submissions.json (None: nothing was left to run)."""

    parent: Path
    shards_total: int
    submitted: list[str]  # shard ids put in the array now
    active: list[str]  # array tasks of earlier submissions still queued or running (never resubmitted)
    record: dict[str, Any] | None

    @property
    def complete(self) -> int:
        return self.shards_total - len(self.submitted) - len(self.active)

    def line(self) -> str:
        if self.record is None:
            return f"campaign {self.parent}: all {self.shards_total} shards are complete and merged"
        r = self.record
        return (f"campaign {self.parent}: submitted {len(self.submitted)} of {self.shards_total} shards"
                + (f" as array job {r['array_job']}" if r["array_job"] else "")
                + (f"; {len(self.active)} still queued or running" if self.active else "")
                + (f"; {self.complete} complete" if self.complete else "")
                + f"; merge job {r['merge_job']}, verify job {r['verify_job']}")


def campaign_jobs(parent: Path) -> list[str]:
    """The campaign's Slurm jobs that are queued or running now."""
    subs = read_submissions(parent)
    states = slurm_states(parent, subs)
    jobs = []
    for s in subs:
        for key in [f"{s['array_job']}_{i}" for i in s.get("tasks", {})] + \
                [str(s[k]) for k in ("merge_job", "verify_job") if s.get(k)]:
            st = states.get(key)
            if st is not None and st.state in ACTIVE:
                jobs.append(key)
    return jobs


def cancel_campaign(parent: Path) -> list[str]:
    """scancel the campaign's queued and running jobs (Ctrl-C while watching, `c` in the TUI); the shards keep
    what they finished, so the same command resumes them. The jobs cancelled."""
    jobs = campaign_jobs(parent)
    slurm.cancel(jobs)
    return jobs


def check_not_sharded(path: Path) -> None:
    """A single-node run must not write into a Slurm campaign's parent directory."""
    if is_sharded(path):
        raise UsageError(f"{path} is a Slurm campaign (it has {PLAN_FILE})",
                         hint="run it with the same `--scheduler slurm` command, or give --campaign a new directory")


__all__ = ["Prepared", "Submitted", "afterok_dependency", "campaign_jobs", "cancel_campaign", "check_not_sharded",
           "merge_campaign", "plan_submission", "prepare_parent"]

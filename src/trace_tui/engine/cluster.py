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
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from trace_tui.campaign_files.recipe_file import RECIPE_FILE, read_campaign_recipe
from trace_tui.campaign_files.shard_files import MERGED_FILE, is_sharded, merged_problem, read_plan, shard_dir
from trace_tui.campaign_files.shards import PLAN_FILE, Shard, ShardPlan, coverage_problems, plan_shards, shard_arguments
from trace_tui.campaign_files.state import cut, read_snapshot
from trace_tui.common.atomic import atomic_write_json, atomic_write_text
from trace_tui.common.safe_write import NotWritten, directory_inside
from trace_tui.engine.campaign_folder import campaign_folder
from trace_tui.engine.cluster_status import (
    ACTIVE,
    SLURM_DIR,
    SUBMISSIONS,
    cluster_status,
    latest_task,
    read_submissions,
    shard_progress,
    slurm_states,
)
from trace_tui.engine.planner import needs_gpus
from trace_tui.errors import CheckFailed, ExitCode, UsageError
from trace_tui.runtime import slurm

POLL_S = 5.0


def _write_json(path: Path, data: Any) -> None:
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
    _write_json(parent / MERGED_FILE, merged)
    return merged


# --------------------------------------------------------------------------- submission


# Python before 3.11 has no -P: the same, by hand (sys.path[0] is the working directory under -c).
_SAFE_PATH_MAIN = "import runpy, sys; sys.path.pop(0); runpy.run_module('trace_tui', run_name='__main__', alter_sys=True)"


def _trace_tui_argv() -> list[str]:
    # The same interpreter (and so the same installed trace-tui) on every node: the venv on a shared path.
    # -P: a batch job starts in the folder it was submitted from, and `python -m` puts that folder first
    # on sys.path, so a trace_tui/ (or json.py) there would run in place of the installed package.
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", "trace_tui"]
    return [sys.executable, "-c", _SAFE_PATH_MAIN]  # pragma: no cover - Python 3.10


def _common_args(args: Any) -> list[str]:
    out = []
    if getattr(args, "home", None):
        out += ["--home", str(Path(args.home).expanduser().resolve())]
    return out


def shard_command(args: Any, plan: ShardPlan, shard: Shard, parent: Path) -> list[str]:
    argv = [*_trace_tui_argv(), *_common_args(args), *shard_arguments(plan, shard),
            "--campaign", str(parent / shard.dir), "--yes", "--log-format", "json"]
    if getattr(args, "runtime", None):
        argv += ["--runtime", args.runtime]
    if getattr(args, "offline", False):
        argv.append("--offline")
    for spec in getattr(args, "local_model", None) or []:
        argv += ["--local-model", spec]
    return argv


def finishing_commands(args: Any, resolved: Any, parent: Path) -> tuple[list[list[str]], list[list[str]]]:
    """(merge job commands, verify job commands): merge, then the summary tables where the recipe has a report step."""
    base = [*_trace_tui_argv(), *_common_args(args)]
    merge = [[*base, "merge", "--campaign", str(parent)]]
    if any(list(s.run[:2]) == ["trace_tui", "report"] for s in resolved.recipe.steps):
        merge.append([*base, "report", "--campaign", str(parent), "--format", "markdown"])
    return merge, [[*base, "verify", "--campaign", str(parent)]]


def write_scripts(args: Any, resolved: Any, plan: ShardPlan, parent: Path, opts: slurm.BatchOptions,
                  max_parallel: int | None) -> dict[str, Path]:
    # Slurm appends each job's log in slurm/logs and the scripts write their exit records in slurm/tasks:
    # never a folder linked out of the campaign (one line naming it).
    try:
        d = directory_inside(parent, SLURM_DIR)
        for sub in ("logs", "tasks"):
            directory_inside(parent, f"{SLURM_DIR}/{sub}")
    except NotWritten as exc:
        raise UsageError(str(exc), hint="a campaign handed over is data: its files are written only in place") from None
    name = plan.run_tag[:40]
    commands = {s.index: shard_command(args, plan, s, parent) for s in plan.shards}
    scripts = {
        "shards": slurm.array_script(name=f"{name}-shards", log=str(d / "logs" / "shard-%A_%a.log"), opts=opts,
                                     array=slurm.array_spec([s.index for s in plan.shards], max_parallel),
                                     commands=commands,
                                     record=str(d / "tasks") + "/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.json"),
    }
    merge_cmds, verify_cmds = finishing_commands(args, resolved, parent)
    host_opts = slurm.BatchOptions(partition=opts.partition, account=opts.account, time=opts.time)
    scripts["merge"] = slurm.single_script(name=f"{name}-merge", log=str(d / "logs" / "merge-%j.log"),
                                           opts=host_opts, commands=merge_cmds,
                                           record=str(d / "tasks") + "/${SLURM_JOB_ID}.json")
    scripts["verify"] = slurm.single_script(name=f"{name}-verify", log=str(d / "logs" / "verify-%j.log"),
                                            opts=host_opts, commands=verify_cmds,
                                            record=str(d / "tasks") + "/${SLURM_JOB_ID}.json")
    paths = {}
    for kind, text in scripts.items():
        p = d / f"{kind}.sbatch"
        atomic_write_text(p, text)  # a link in its place is replaced, never written through
        p.chmod(0o755)
        paths[kind] = p
    return paths


def prepare_parent(parent: Path, resolved: Any, plan: ShardPlan) -> None:
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
    _write_json(parent / PLAN_FILE, plan.model_dump(mode="json", by_alias=True))
    _write_json(parent / RECIPE_FILE, resolved.model_dump(mode="json"))


def _dependency(array_job: str | None, tasks: list[int], still_running: list[str]) -> str | None:
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


# What goes into an `#SBATCH` line unquoted (Slurm reads the line up to its end: a newline in a value would
# start a line of shell). Slurm's time formats: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS,
# DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS, or no limit.
SLURM_TIME = re.compile(r"[0-9]{1,9}(:[0-9]{1,2}){0,2}|[0-9]{1,6}-[0-9]{1,2}(:[0-9]{1,2}){0,2}|UNLIMITED|INFINITE")
SLURM_NAME = re.compile(r"[A-Za-z0-9_.,-]{1,200}")  # partitions (a comma list) and accounts
MAX_GPUS_PER_NODE = 1024


def _script_safe_path(path: Path, flag: str) -> None:
    """A path the batch scripts write into `#SBATCH --output=` and a double-quoted shell word: nothing there
    may end the line, the word or the quotes, and Slurm reads % in a file name as a pattern."""
    bad = next((c for c in str(path) if not (c.isalnum() or c in "/_.,+=@:~-")), None)
    if bad is not None:
        raise UsageError(f"{flag} {cut(str(path))}: {bad!r} cannot go into a Slurm batch script",
                         hint="give a directory whose path has letters, digits and / _ . , + = @ : ~ - only")


def check_slurm_options(args: Any) -> None:
    """Every site choice that goes into the batch scripts, checked before anything is written (exit 2)."""
    max_parallel = getattr(args, "max_parallel", None)
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel {max_parallel}: give a positive number of array tasks")
    gpus = getattr(args, "gpus_per_node", None)
    if gpus is not None and not 0 <= gpus <= MAX_GPUS_PER_NODE:
        raise UsageError(f"--gpus-per-node {gpus}: give 0 to {MAX_GPUS_PER_NODE}")
    when = getattr(args, "time", None)
    if when is not None and not SLURM_TIME.fullmatch(when):
        raise UsageError(f"--time {cut(when)}: not a Slurm time limit",
                         hint="MINUTES, HOURS:MINUTES:SECONDS or DAYS-HOURS:MINUTES:SECONDS, e.g. 2-00:00:00")
    for flag, name in (("--partition", "partition"), ("--account", "account")):
        value = getattr(args, name, None)
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise UsageError(f"{flag} {cut(value)}: not a Slurm {name} name",
                             hint="letters, digits and _ . - (a comma between several partitions)")


def prepare_submission(args: Any, resolved: Any) -> Prepared:
    """Check the options, split the campaign and write its parent files and batch scripts (nothing submitted).

    The command line and the TUI's run screen both submit through this and :func:`submit_prepared`.
    """
    check_slurm_options(args)
    plan = plan_shards(resolved, getattr(args, "shard_by", None),
                       narrowed_benchmarks=bool(getattr(args, "benchmarks", None)))
    if not SLURM_NAME.fullmatch(plan.run_tag):  # the job names; a recipe name is already one
        raise UsageError(f"run tag {cut(plan.run_tag)} cannot name a Slurm job")
    if not getattr(args, "dry_run", False):
        slurm.require_sbatch()
    parent = campaign_folder(getattr(args, "campaign", None), resolved.recipe.name, resolved.run_tag,
                             getattr(args, "home", None))
    _script_safe_path(parent, "--campaign")
    gpus = args.gpus_per_node if getattr(args, "gpus_per_node", None) is not None else _default_gpus(resolved)
    opts = slurm.BatchOptions(partition=getattr(args, "partition", None), account=getattr(args, "account", None),
                              gpus_per_node=gpus, time=getattr(args, "time", None))
    prepare_parent(parent, resolved, plan)
    max_parallel = getattr(args, "max_parallel", None)
    scripts = write_scripts(args, resolved, plan, parent, opts, max_parallel)
    return Prepared(parent=parent, plan=plan, scripts=scripts, opts=opts, max_parallel=max_parallel)


def submit_prepared(args: Any, prep: Prepared) -> Submitted:
    """Submit the shards that are not complete (never a queued or running one), then merge and verify after them."""
    parent, plan, scripts, opts = prep.parent, prep.plan, prep.scripts, prep.opts
    to_run, active, waiting = plan_submission(parent, plan)
    if not to_run and not active and merged_problem(parent, plan) is None:
        return Submitted(parent=parent, shards_total=len(plan.shards), submitted=[], active=[], record=None)
    if waiting:  # finishing jobs of an earlier submission that can no longer run as chained
        slurm.cancel(waiting)
    record: dict[str, Any] = {"submitted_at": time.time(), "tasks": {}, "array_job": None,
                              "options": {"partition": opts.partition, "account": opts.account,
                                          "gpus_per_node": opts.gpus_per_node, "time": opts.time,
                                          "max_parallel": prep.max_parallel, "shard_by": plan.shard_by,
                                          # what the shards run with, so a resume (the TUI's r) repeats it
                                          "runtime": getattr(args, "runtime", None),
                                          "offline": bool(getattr(args, "offline", False)),
                                          "local_model": list(getattr(args, "local_model", None) or [])}}
    if to_run:
        spec = slurm.array_spec([s.index for s in to_run], prep.max_parallel)
        record["array_job"] = slurm.submit(scripts["shards"], array=spec)
        record["tasks"] = {str(s.index): s.id for s in to_run}
    record["merge_job"] = slurm.submit(scripts["merge"], dependency=_dependency(
        record["array_job"], [s.index for s in to_run], active))
    record["verify_job"] = slurm.submit(scripts["verify"], dependency=f"afterok:{record['merge_job']}")
    _write_json(parent / SUBMISSIONS, read_submissions(parent) + [record])
    return Submitted(parent=parent, shards_total=len(plan.shards), submitted=[s.id for s in to_run],
                     active=active, record=record)


def submit_campaign(args: Any, resolved: Any) -> int:
    prep = prepare_submission(args, resolved)
    parent, plan, scripts = prep.parent, prep.plan, prep.scripts
    out = sys.stdout
    if getattr(args, "dry_run", False):
        out.write(f"campaign {parent}: {len(plan.shards)} shards by {plan.shard_by}; scripts in {parent / SLURM_DIR}\n"
                  "submit them with:\n")
        out.write(f"  ARRAY=$({shlex.join(slurm.sbatch_argv(scripts['shards']))})\n")
        out.write(f"  MERGE=$({shlex.join(slurm.sbatch_argv(scripts['merge']))[:-len(str(scripts['merge']))]}"
                  f"--dependency=afterok:$ARRAY {scripts['merge']})\n")
        out.write(f"  {shlex.join(slurm.sbatch_argv(scripts['verify']))[:-len(str(scripts['verify']))]}"
                  f"--dependency=afterok:$MERGE {scripts['verify']}\n")
        return ExitCode.OK

    if not getattr(args, "yes", False) and sys.stdin.isatty() and not _ask(
            f"submit {len(plan.shards)} shards of {plan.recipe} ({plan.rows_total} rows) to Slurm? [y/N] "):
        out.write(f"nothing submitted; the scripts are in {parent / SLURM_DIR}\n")
        return ExitCode.OK
    done = submit_prepared(args, prep)
    out.write(done.line() + "\n")
    if done.record is None:
        out.write(f"verify: trace-tui verify --campaign {parent}\n")
        return ExitCode.OK
    out.flush()
    if getattr(args, "no_wait", False):
        out.write(f"watch: trace-tui status --campaign {parent}\n")
        return ExitCode.OK
    return watch(parent, done.record)


def _default_gpus(resolved: Any) -> int:
    """GPUs a node needs for a shard: the most any step of the recipe asks for (0 for CPU recipes)."""
    need = [int(getattr(s.needs, "gpus", 0) or 0) for s in resolved.recipe.steps if needs_gpus(s)]
    return max(need, default=0)


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


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        return True  # no one to ask: Ctrl-C (or SIGINT) means stop, as on one node
    try:
        return input(question).strip().lower() in ("y", "yes")
    except (EOFError, KeyboardInterrupt):
        return False


def watch(parent: Path, record: dict[str, Any], *, poll_s: float | None = None) -> int:
    """Follow the submission until the verify job ends or a shard fails; Ctrl-C asks, then scancels."""
    import os

    poll = poll_s if poll_s is not None else float(os.environ.get("TRACE_TUI_SLURM_POLL_S", POLL_S))
    out = sys.stdout
    seen: dict[str, str] = {}
    rows: dict[str, int] = {}
    printed: dict[str, float] = {}
    try:
        while True:
            st = cluster_status(parent)
            for s in st["shards"]:
                line = f"{s['slurm_state']} {s['campaign_state']}"
                moved = s["rows_done"] != rows.get(s["id"]) and time.time() - printed.get(s["id"], 0.0) >= 30
                if seen.get(s["id"]) != line or moved:  # a change of state at once, progress every 30 s
                    seen[s["id"]], rows[s["id"]], printed[s["id"]] = line, s["rows_done"], time.time()
                    out.write(f"shard {s['id']}: {s['slurm_state'].lower()}"
                              + (f" on {s['node']}" if s["slurm_state"] == "RUNNING" and s["node"] else "")
                              + (f" ({s['reason']})" if s["reason"] and s["slurm_state"] == "PENDING" else "")
                              + f", {s['rows_done']}/{s['rows_total']} rows\n")
            for f in st["finishing"]:
                if seen.get(f["kind"]) != f["slurm_state"]:
                    seen[f["kind"]] = f["slurm_state"]
                    out.write(f"{f['kind']} job {f['job_id']}: {f['slurm_state'].lower()}\n")
            out.flush()
            failed = [s for s in st["shards"] if s["slurm_state"] in slurm.TERMINAL
                      and s["slurm_state"] != "COMPLETED" and not s["complete"]]
            fin = {f["kind"]: f for f in st["finishing"]}
            if failed and not any(s["slurm_state"] in ACTIVE for s in st["shards"]):
                waiting = [f["job_id"] for f in st["finishing"] if f["slurm_state"] in ACTIVE]
                slurm.cancel(waiting)  # afterok can never be met: do not leave them pending
                for s in failed:
                    out.write(f"failed: shard {s['id']}: Slurm {s['slurm_state']} (exit {s['exit_code'] or '?'}); "
                              f"log {s['log']}\n")
                out.write(f"the merge did not run; fix the cause and run the same command again "
                          f"(campaign {parent})\n")
                return ExitCode.FAILED
            for kind in ("merge", "verify"):
                f = fin.get(kind)
                if f and f["slurm_state"] in slurm.TERMINAL and f["slurm_state"] != "COMPLETED":
                    out.write(f"failed: {kind} job {f['job_id']}: Slurm {f['slurm_state']}; log {f['log']}\n")
                    return ExitCode.FAILED
            if fin.get("verify", {}).get("slurm_state") == "COMPLETED":
                out.write(f"campaign {parent}: {len(st['shards'])} shards complete, merged and verified\n"
                          f"status: trace-tui status --campaign {parent}\nverify: trace-tui verify --campaign "
                          f"{parent}\n")
                return ExitCode.OK
            time.sleep(poll)
    except KeyboardInterrupt:
        jobs = campaign_jobs(parent)
        if jobs and _ask(f"\ncancel this campaign's {len(jobs)} Slurm job(s)? [y/N] "):
            jobs = cancel_campaign(parent)
            out.write(f"cancelled {len(jobs)} job(s); the shards keep what they finished: run the same command "
                      f"again to resume (campaign {parent})\n")
        else:
            out.write(f"left running; watch: trace-tui status --campaign {parent}\n")
        return ExitCode.INTERRUPTED


def check_not_sharded(path: Path) -> None:
    """A single-node run must not write into a Slurm campaign's parent directory."""
    if is_sharded(path):
        raise UsageError(f"{path} is a Slurm campaign (it has {PLAN_FILE})",
                         hint="run it with the same `--scheduler slurm` command, or give --campaign a new directory")


__all__ = ["Prepared", "Submitted", "cancel_campaign", "check_not_sharded", "merge_campaign", "prepare_submission",
           "submit_campaign", "submit_prepared", "watch"]

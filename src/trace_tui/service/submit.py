"""Submitting a campaign to Slurm: the shard plan, the batch scripts and the job array, the same for the command
line (`trace-tui --recipe NAME --scheduler slurm`) and the TUI's run screen."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui.campaign_files.shard_files import merged_problem
from trace_tui.campaign_files.shards import Shard, ShardPlan, plan_shards, shard_arguments
from trace_tui.campaign_files.state import cut
from trace_tui.common.atomic import atomic_write_text
from trace_tui.common.safe_write import NotWritten, directory_inside
from trace_tui.engine.campaign_folder import campaign_folder
from trace_tui.engine.cluster import (
    Prepared,
    Submitted,
    afterok_dependency,
    plan_submission,
    prepare_parent,
    write_parent_json,
)
from trace_tui.engine.cluster_status import SLURM_DIR, SUBMISSIONS, read_submissions
from trace_tui.engine.planner import needs_gpus
from trace_tui.errors import UsageError
from trace_tui.runtime import slurm
from trace_tui.service.requests import RunOptions, SlurmOptions, SubmitRequest

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe.schema import ResolvedRecipe


# Python before 3.11 has no -P: the same, by hand (sys.path[0] is the working directory under -c).
_SAFE_PATH_MAIN = "import runpy, sys; sys.path.pop(0); runpy.run_module('trace_tui', run_name='__main__', alter_sys=True)"


def _trace_tui_argv() -> list[str]:
    # The same interpreter (and so the same installed trace-tui) on every node: the venv on a shared path.
    # -P: a batch job starts in the folder it was submitted from, and `python -m` puts that folder first
    # on sys.path, so a trace_tui/ (or json.py) there would run in place of the installed package.
    if sys.version_info >= (3, 11):
        return [sys.executable, "-P", "-m", "trace_tui"]
    return [sys.executable, "-c", _SAFE_PATH_MAIN]  # pragma: no cover - Python 3.10


def _common_args(options: RunOptions) -> list[str]:
    return ["--home", str(Path(options.home).expanduser().resolve())] if options.home else []


def shard_command(options: RunOptions, plan: ShardPlan, shard: Shard, parent: Path) -> list[str]:
    argv = [*_trace_tui_argv(), *_common_args(options), *shard_arguments(plan, shard),
            "--campaign", str(parent / shard.dir), "--yes", "--log-format", "json"]
    if options.runtime:
        argv += ["--runtime", options.runtime]
    if options.offline:
        argv.append("--offline")
    for spec in options.local_models:
        argv += ["--local-model", spec]
    return argv


def finishing_commands(options: RunOptions, resolved: ResolvedRecipe, parent: Path) -> tuple[list[list[str]], list[list[str]]]:
    """(merge job commands, verify job commands): merge, then the summary tables where the recipe has a report step."""
    base = [*_trace_tui_argv(), *_common_args(options)]
    merge = [[*base, "merge", "--campaign", str(parent)]]
    if any(list(s.run[:2]) == ["trace_tui", "report"] for s in resolved.recipe.steps):
        merge.append([*base, "report", "--campaign", str(parent), "--format", "markdown"])
    return merge, [[*base, "verify", "--campaign", str(parent)]]


def write_scripts(options: RunOptions, resolved: ResolvedRecipe, plan: ShardPlan, parent: Path, opts: slurm.BatchOptions,
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
    commands = {s.index: shard_command(options, plan, s, parent) for s in plan.shards}
    scripts = {
        "shards": slurm.array_script(name=f"{name}-shards", log=str(d / "logs" / "shard-%A_%a.log"), opts=opts,
                                     array=slurm.array_spec([s.index for s in plan.shards], max_parallel),
                                     commands=commands,
                                     record=str(d / "tasks") + "/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.json"),
    }
    merge_cmds, verify_cmds = finishing_commands(options, resolved, parent)
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


def check_slurm_options(opts: SlurmOptions) -> None:
    """Every site choice that goes into the batch scripts, checked before anything is written (exit 2)."""
    max_parallel = opts.max_parallel
    if max_parallel is not None and max_parallel < 1:
        raise UsageError(f"--max-parallel {max_parallel}: give a positive number of array tasks")
    gpus = opts.gpus_per_node
    if gpus is not None and not 0 <= gpus <= MAX_GPUS_PER_NODE:
        raise UsageError(f"--gpus-per-node {gpus}: give 0 to {MAX_GPUS_PER_NODE}")
    when = opts.time
    if when is not None and not SLURM_TIME.fullmatch(when):
        raise UsageError(f"--time {cut(when)}: not a Slurm time limit",
                         hint="MINUTES, HOURS:MINUTES:SECONDS or DAYS-HOURS:MINUTES:SECONDS, e.g. 2-00:00:00")
    for flag, name in (("--partition", "partition"), ("--account", "account")):
        value = getattr(opts, name)
        if value is not None and not SLURM_NAME.fullmatch(value):
            raise UsageError(f"{flag} {cut(value)}: not a Slurm {name} name",
                             hint="letters, digits and _ . - (a comma between several partitions)")


def prepare_submission(request: SubmitRequest, resolved: ResolvedRecipe) -> Prepared:
    """Check the options, split the campaign and write its parent files and batch scripts (nothing submitted).

    The command line and the TUI's run screen both submit through this and :func:`submit_prepared`.
    """
    site, options = request.slurm, request.run.options
    check_slurm_options(site)
    plan = plan_shards(resolved, site.shard_by, narrowed_benchmarks=bool(request.run.selection.benchmarks))
    if not SLURM_NAME.fullmatch(plan.run_tag):  # the job names; a recipe name is already one
        raise UsageError(f"run tag {cut(plan.run_tag)} cannot name a Slurm job")
    if not request.dry_run:
        slurm.require_sbatch()
    parent = campaign_folder(options.campaign, resolved.recipe.name, resolved.run_tag, options.home)
    _script_safe_path(parent, "--campaign")
    gpus = site.gpus_per_node if site.gpus_per_node is not None else _default_gpus(resolved)
    opts = slurm.BatchOptions(partition=site.partition, account=site.account, gpus_per_node=gpus, time=site.time)
    prepare_parent(parent, resolved, plan)
    max_parallel = site.max_parallel
    scripts = write_scripts(options, resolved, plan, parent, opts, max_parallel)
    return Prepared(parent=parent, plan=plan, scripts=scripts, opts=opts, max_parallel=max_parallel)


def submit_prepared(request: SubmitRequest, prep: Prepared) -> Submitted:
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
                                          "runtime": request.run.options.runtime,
                                          "offline": request.run.options.offline,
                                          "local_model": list(request.run.options.local_models)}}
    if to_run:
        spec = slurm.array_spec([s.index for s in to_run], prep.max_parallel)
        record["array_job"] = slurm.submit(scripts["shards"], array=spec)
        record["tasks"] = {str(s.index): s.id for s in to_run}
    record["merge_job"] = slurm.submit(scripts["merge"], dependency=afterok_dependency(
        record["array_job"], [s.index for s in to_run], active))
    record["verify_job"] = slurm.submit(scripts["verify"], dependency=f"afterok:{record['merge_job']}")
    write_parent_json(parent / SUBMISSIONS, read_submissions(parent) + [record])
    return Submitted(parent=parent, shards_total=len(plan.shards), submitted=[s.id for s in to_run],
                     active=active, record=record)



def _default_gpus(resolved: ResolvedRecipe) -> int:
    """GPUs a node needs for a shard: the most any step of the recipe asks for (0 for CPU recipes)."""
    need = [int(getattr(s.needs, "gpus", 0) or 0) for s in resolved.recipe.steps if needs_gpus(s)]
    return max(need, default=0)

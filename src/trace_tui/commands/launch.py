"""`trace-tui` without a subcommand or a recipe: open the TUI. The flags of a run become the service's typed
requests here (`commands/run_recipe.py`, the run of `--recipe NAME`, builds its requests with these too);
nothing below sees the parsed command line. Nothing heavy is imported at the top: opening the TUI loads no
pydantic before its first paint (textual itself is imported when the UI opens)."""

from __future__ import annotations

import argparse
import sys

from trace_tui.errors import UsageError
from trace_tui.service.requests import RunOptions, RunRequest, Selection, SlurmOptions


def _given(values: list | None) -> tuple | None:
    return tuple(values) if values else None


def run_request(args: argparse.Namespace) -> RunRequest:
    """The run the flags ask for (also what the TUI opens with)."""
    options = RunOptions(home=args.home, campaign=args.campaign, runtime=args.runtime, offline=bool(args.offline),
                         redo=bool(args.redo), local_models=tuple(args.local_model or ()),
                         log_format=args.log_format or "console", log_file=args.log_file)
    selection = Selection(models=_given(args.models), seeds=_given(args.seeds), benchmarks=_given(args.benchmarks))
    return RunRequest(recipe=args.recipe, selection=selection, options=options, yes=bool(args.yes))


def slurm_options(args: argparse.Namespace) -> SlurmOptions | None:
    """The site's Slurm choices; None: the run is for this machine (`--scheduler none`)."""
    if args.scheduler != "slurm":
        return None
    return SlurmOptions(shard_by=args.shard_by, partition=args.partition, account=args.account,
                        gpus_per_node=args.gpus_per_node, time=args.time, max_parallel=args.max_parallel)


def run(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the terminal UI needs a terminal",
                         hint="run it in a terminal, or use a command: `trace-tui --help`")
    from trace_tui.tui.app import run_tui  # textual: only for the UI

    return run_tui(run_request(args), slurm_options(args))

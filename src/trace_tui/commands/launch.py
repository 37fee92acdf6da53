"""`trace-tui` without a subcommand: run a recipe (--recipe) or open the TUI. The flags become the service's
typed requests here, and the outcome is rendered here; nothing below sees the parsed command line."""

from __future__ import annotations

import argparse
import sys

from trace_tui.commands.submit import submit_campaign
from trace_tui.engine.printer import HeadlessPrinter
from trace_tui.errors import ExitCode, UsageError
from trace_tui.paths import campaign_dir_arg
from trace_tui.service.requests import RunOptions, RunRequest, Selection, SlurmOptions, SubmitRequest
from trace_tui.service.run import resolve_request, run_on_this_machine


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
    if args.recipe:
        return run_recipe(args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the terminal UI needs a terminal",
                         hint="run it in a terminal, or use a command: `trace-tui --help`")
    from trace_tui.tui.app import run_tui  # textual: only for the UI

    return run_tui(run_request(args), slurm_options(args))


def run_recipe(args: argparse.Namespace) -> int:
    """`--recipe NAME`: the TUI drives the runner in a terminal (unless --yes); headless otherwise."""
    if args.campaign:  # before anything is resolved or created
        campaign_dir_arg(args.campaign, new_ok=True)
    request = run_request(args)
    resolved = resolve_request(request)
    slurm = slurm_options(args)
    if not args.yes and not (slurm and args.dry_run) and sys.stdin.isatty() and sys.stdout.isatty():
        # the TUI; with --scheduler slurm it submits through the same service as below
        from trace_tui.tui.app import run_tui  # textual: only for the UI

        return int(run_tui(request, slurm))
    if slurm is not None:
        return submit_campaign(SubmitRequest(run=request, slurm=slurm, dry_run=bool(args.dry_run),
                                             no_wait=bool(args.no_wait)), resolved)
    fmt = request.options.log_format
    printer = HeadlessPrinter(sys.stdout, fmt=fmt)
    outcome = run_on_this_machine(request, resolved, printer)
    out = sys.stdout if fmt == "console" else sys.stderr
    out.write(printer.summary(outcome.result) + "\n")
    path = outcome.campaign
    if outcome.exit_code == ExitCode.OK:
        out.write(f"status: trace-tui status --campaign {path}\nverify: trace-tui verify --campaign {path}\n")
    elif outcome.exit_code in (ExitCode.FAILED, ExitCode.INTERRUPTED):
        out.write(f"resume: run the same command again (campaign {path})\n")
    out.flush()
    return outcome.exit_code

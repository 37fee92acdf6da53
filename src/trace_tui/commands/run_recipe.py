"""`trace-tui --recipe NAME`: the TUI drives the runner in a terminal (unless --yes), a Slurm submission with
`--scheduler slurm`, else a headless run on this machine, whose outcome is rendered here; with `--check`, only
what that run would check before it starts (its preflight), item by item."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from trace_tui.commands.launch import run_request, slurm_options
from trace_tui.commands.submit import submit_campaign
from trace_tui.engine.printer import HeadlessPrinter
from trace_tui.errors import ExitCode
from trace_tui.paths import campaign_dir_arg
from trace_tui.service.requests import RunRequest, SubmitRequest
from trace_tui.service.run import preflight_on_this_machine, resolve_request, run_on_this_machine

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.recipe.schema import ResolvedRecipe


def run(args: argparse.Namespace) -> int:
    """`--recipe NAME`: the TUI drives the runner in a terminal (unless --yes); headless otherwise."""
    if args.campaign:  # before anything is resolved or created
        campaign_dir_arg(args.campaign, new_ok=True)
    request = run_request(args)
    resolved = resolve_request(request)
    if args.check:
        return _check(request, resolved)
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


def _check(request: RunRequest, resolved: ResolvedRecipe) -> int:
    """`--check`: the run's preflight, item by item (stdout), exit 0 when it can run here, 3 when not."""
    checked = preflight_on_this_machine(request, resolved)
    if request.options.log_format == "json":
        sys.stdout.write(checked.model_dump_json(indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(checked.lines()) + "\n")
    return ExitCode.REQUIREMENTS if checked.problems() else ExitCode.OK

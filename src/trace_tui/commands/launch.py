"""`trace-tui` without a subcommand: run a recipe (--recipe) or open the TUI."""

from __future__ import annotations

import argparse
import sys

from trace_tui.engine.headless import run_headless
from trace_tui.errors import UsageError
from trace_tui.local_models import import_local_models
from trace_tui.paths import campaign_dir_arg, home, store_dir


def run(args: argparse.Namespace) -> int:
    if args.recipe:
        return run_recipe(args)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the terminal UI needs a terminal",
                         hint="run it in a terminal, or use a command: `trace-tui --help`")
    from trace_tui.tui.app import run_tui

    return run_tui(args)


def run_recipe(args: argparse.Namespace) -> int:
    """`--recipe NAME`: the TUI drives the runner in a terminal (unless --yes); headless otherwise."""
    from trace_tui.recipes import load_recipe, resolve_recipe

    if getattr(args, "campaign", None):  # before anything is resolved or created

        campaign_dir_arg(args.campaign, new_ok=True)
    recipe = load_recipe(args.recipe)
    own = None
    if getattr(args, "local_model", None):
        own = import_local_models(args.local_model, store_dir(home(args.home)))
    resolved = resolve_recipe(recipe, models=args.models, seeds=args.seeds, benchmarks=args.benchmarks,
                              local_models=own)
    slurm = getattr(args, "scheduler", "none") == "slurm"
    if not args.yes and not (slurm and getattr(args, "dry_run", False)) and sys.stdin.isatty() \
            and sys.stdout.isatty():
        try:  # the TUI; with --scheduler slurm it submits through the same code as below
            from trace_tui.tui.app import run_tui
        except ImportError:
            pass
        else:
            return int(run_tui(args))
    if slurm:
        from trace_tui.engine.cluster import submit_campaign

        return submit_campaign(args, resolved)

    return run_headless(args, resolved)

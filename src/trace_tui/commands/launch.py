"""`trace-tui` without a subcommand: run a recipe (--recipe) or open the TUI."""

from __future__ import annotations

import argparse

from trace_tui.errors import UsageError


def run(args: argparse.Namespace) -> int:
    if args.recipe:
        raise UsageError(f"running recipe {args.recipe!r} is not available in this build yet")
    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("the terminal UI needs a terminal",
                         hint="run it in a terminal, or use a command: `trace-tui --help`")
    from trace_tui.tui.app import run_tui

    return run_tui(args)

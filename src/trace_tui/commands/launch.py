"""`trace-tui` without a subcommand: run a recipe (--recipe) or open the TUI."""

from __future__ import annotations

import argparse

from trace_tui.errors import UsageError


def run(args: argparse.Namespace) -> int:
    if args.recipe:
        raise UsageError(f"running recipe {args.recipe!r} is not available in this build yet")
    raise UsageError("the terminal UI is not available in this build yet",
                     hint="try `trace-tui verify --release-dir DIR`")

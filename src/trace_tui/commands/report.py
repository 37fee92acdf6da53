"""`trace-tui report --release-dir DIR [--format markdown|json]`: the release page's tables, recomputed.

Every figure comes from results.json's 576 benchmark scores (and the TRACE
validation results) through trace_tui.verify.aggregate; labels come from the
release lock and results.json. A missing or non-release DIR exits 2. A release
file the tables need that fails (not read, not valid JSON, fields missing or
ill-typed, scores incomplete or not percentages) exits 1 with one line naming
the file and the problem: the same file fails `verify` (exit 1), with the same
words, since both read it the same way (verify.release.checked_release_tables).
"""

from __future__ import annotations

import argparse
import json
import sys

from trace_tui.commands.arguments import non_empty
from trace_tui.external.summary import run_report
from trace_tui.verify.release import checked_release_tables, release_dir_arg


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--release-dir", metavar="DIR", required=False, type=non_empty,
                   help="a release directory laid out like the upstream repository (rlvr/...)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown", help="output format")
    p.add_argument("--campaign", metavar="DIR", type=non_empty, help="a `full` campaign: its reproduced scores beside the published "
                   "ones (results.json from --release-dir DIR, else from the store) and its release tables")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "campaign", None):
        return run_report(args)
    root = release_dir_arg(args.release_dir)
    warnings: list[str] = []
    tables = checked_release_tables(root, warn=warnings.append)
    # Only once the tables stand: a failure is its one error line, not a warning and then the error.
    for line in warnings:
        print(f"trace-tui: warning: {line}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps(tables.to_dict(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(tables.to_markdown())
    return 0


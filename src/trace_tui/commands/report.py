"""`trace-tui report --release-dir DIR [--format markdown|json]`: the release page's tables, recomputed.

Every figure comes from results.json's 576 benchmark scores (and the TRACE
validation results) through trace_tui.verify.aggregate; labels come from the
release lock and results.json. Bad input exits 1 naming the file and the
problem; a missing or non-release DIR exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--release-dir", metavar="DIR", required=False,
                   help="a release directory laid out like the upstream repository (rlvr/...)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown", help="output format")
    p.add_argument("--campaign", metavar="DIR", help="a `full` campaign: its reproduced scores beside the published "
                   "ones (results.json from --release-dir DIR, else from the store) and its release tables")


def run(args: argparse.Namespace) -> int:
    from trace_tui.verify.release import release_dir_arg
    from trace_tui.verify.tables import release_tables

    if getattr(args, "campaign", None):
        from trace_tui.external.summary import run_report

        return run_report(args)
    root = release_dir_arg(args.release_dir)
    tables = release_tables(root, warn=lambda line: print(f"trace-tui: warning: {line}", file=sys.stderr))
    if args.format == "json":
        print(json.dumps(tables.to_dict(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(tables.to_markdown())
    return 0

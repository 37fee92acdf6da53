"""`trace-tui status --campaign DIR`: where a campaign stands (read-only; works while a run goes on)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from trace_tui.campaign_files.shard_files import is_sharded
from trace_tui.commands.arguments import non_empty, short
from trace_tui.engine.cluster_status import cluster_status, render_cluster_status
from trace_tui.engine.status import campaign_status, render_status
from trace_tui.paths import campaign_dir_arg

# --watch: below this a reader polls the database in a busy loop; above it, "watch" is not watching.
WATCH_MIN_S = 0.2
WATCH_MAX_S = 86_400.0


def watch_seconds(text: str) -> float:
    """An argparse type: --watch's seconds, a finite number from WATCH_MIN_S to WATCH_MAX_S."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{short(text)} is not a number of seconds") from None
    if not math.isfinite(value) or not WATCH_MIN_S <= value <= WATCH_MAX_S:
        raise argparse.ArgumentTypeError(f"{short(text)}: give {WATCH_MIN_S:g} to {WATCH_MAX_S:g} seconds")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--campaign", required=True, type=non_empty, metavar="DIR", help="the campaign directory")
    p.add_argument("--json", action="store_true", help="one JSON object (with --watch: one per line)")
    p.add_argument("--watch", type=watch_seconds, metavar="N",
                   help=f"print again every N seconds ({WATCH_MIN_S:g} to {WATCH_MAX_S:g}) until complete or Ctrl-C")
    p.add_argument("--fail-if-incomplete", action="store_true", help="exit 1 unless every job is complete")


def run(args: argparse.Namespace) -> int:
    campaign_dir_arg(args.campaign)  # a file, a link loop, a folder this user may not read: one line first
    # a Slurm campaign: its shards plus squeue/sacct
    status_of, render = ((cluster_status, render_cluster_status) if is_sharded(args.campaign)
                         else (campaign_status, render_status))
    try:
        while True:
            st = status_of(args.campaign)
            if args.json:
                sys.stdout.write(json.dumps(st, sort_keys=True) + "\n")
            else:
                if args.watch is not None and sys.stdout.isatty():
                    sys.stdout.write("\x1b[2J\x1b[H")
                sys.stdout.write(render(st) + "\n")
            sys.stdout.flush()
            finished = not st["running"] and st["last_run_state"] is not None and args.fail_if_incomplete
            if args.watch is None or st["complete"] or st.get("damaged") or finished:
                break
            time.sleep(args.watch)
    except KeyboardInterrupt:
        pass
    if st.get("damaged"):  # shown with the status above; as an error line too, and a failed exit
        print(f"trace-tui: error: {st['damaged']}", file=sys.stderr)
        return 1
    return 1 if args.fail_if_incomplete and not st["complete"] else 0

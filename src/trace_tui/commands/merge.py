"""`trace-tui merge --campaign DIR`: a Slurm campaign's shards merged into its parent view.

Run by the campaign's merge job once every array task has succeeded; by hand after a
site submitted the scripts itself. Checks that every shard is complete and covers its
slices, then writes DIR/merged.json, after which `verify --campaign DIR` and
`report --campaign DIR` read the campaign like a single-node one.
"""

from __future__ import annotations

import argparse

from trace_tui.commands.arguments import non_empty
from trace_tui.engine.cluster import merge_campaign


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--campaign", required=True, type=non_empty, metavar="DIR",
                   help="the parent campaign directory (has shards.json)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    merged = merge_campaign(Path(args.campaign).expanduser())
    slices = sum(len(s["slices"]) for s in merged["shards"])
    print(f"merged {len(merged['shards'])} shards ({slices} slices) into {Path(args.campaign).expanduser().resolve()}")
    return 0

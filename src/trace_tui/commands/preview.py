"""`trace-tui preview --recipe NAME [--models ...] [--seeds ...] [--benchmarks ...] [--json]`.

The configuration-only preview: resolves and prints everything a run would
use; starts nothing and writes nothing.
"""

from __future__ import annotations

import argparse

from trace_tui import paths
from trace_tui.commands.arguments import add_recipe_selection
from trace_tui.common.runtimes import RUNTIME_NAMES
from trace_tui.preview import build_preview
from trace_tui.recipe import catalog as recipes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recipe", metavar="NAME", required=True, help="the recipe to preview (name or YAML file)")
    add_recipe_selection(p)
    p.add_argument("--campaign", metavar="DIR", help="campaign directory a run would use (default: HOME/campaigns/RUN_TAG)")
    p.add_argument("--runtime", choices=RUNTIME_NAMES, default="docker", metavar="NAME",
                   help=f"where the steps would run: {', '.join(RUNTIME_NAMES)} (local: no image checks)")
    p.add_argument("--json", action="store_true", help="the same content as JSON")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    resolved = recipes.resolve_recipe(recipes.load_recipe(args.recipe), models=args.models, seeds=args.seeds,
                                      benchmarks=args.benchmarks)
    preview = build_preview(resolved, home=paths.home(args.home),
                            campaign_dir=Path(args.campaign).expanduser().resolve() if args.campaign else None,
                            runtime=args.runtime)
    print(preview.model_dump_json(indent=2) if args.json else preview.render_text())
    return 0

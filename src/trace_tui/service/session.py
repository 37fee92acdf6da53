"""What a long-lived session (the TUI) asks the service for once its first screen is painted: the recipes, the
hardware verdicts, a runner over a campaign, verification, the preview, the campaign list and the Slurm side.
Everything here loads pydantic's models, so the TUI's backends import this module on first use
(:func:`trace_tui.service.load_session`) and its first paint loads none of it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_tui import paths
from trace_tui.campaign_files.shard_files import is_sharded, read_plan
from trace_tui.campaign_files.shards import ShardPlan
from trace_tui.engine.campaign import Campaign
from trace_tui.engine.campaign_list import list_campaigns
from trace_tui.engine.cluster import Submitted, cancel_campaign
from trace_tui.engine.cluster_status import cluster_status, read_submissions
from trace_tui.engine.runner import Runner
from trace_tui.hardware import check_recipe
from trace_tui.local_models import import_local_models
from trace_tui.preview import build_preview
from trace_tui.recipe.catalog import known_recipes, load_recipe, resolve_recipe, trusted_resolved
from trace_tui.recipe.schema import ResolvedRecipe, Step
from trace_tui.service.campaigns import OwnedRunner
from trace_tui.service.requests import SubmitRequest
from trace_tui.service.runtimes import detect_runtimes, runtime_lines
from trace_tui.service.submit import prepare_submission, submit_prepared
from trace_tui.signing.checkpoints import checkpoint_signer
from trace_tui.verify.campaign import verify_campaign

if TYPE_CHECKING:  # pragma: no cover
    from trace_tui.gpu_plan import RunPlan
    from trace_tui.runtime.base import Runtime

# what the session offers beside its own functions below
__all__ = ["build_preview", "cancel_campaign", "check_recipe", "cluster_status", "detect_runtimes", "is_sharded",
           "known_recipes", "list_campaigns", "load_recipe", "resolve_recipe", "runtime_lines", "verify_campaign"]


def trusted(resolved: ResolvedRecipe, campaign_dir: Path, recipe_file: str | None) -> ResolvedRecipe:
    """A resumed campaign's recipe comes from its recipe.json, which is data: what runs is the recipe trace-tui
    ships (or the user's --recipe FILE) for the same selection, as a headless run takes it."""
    return trusted_resolved(resolved, source=str(Path(campaign_dir) / "recipe.json"), recipe_file=recipe_file)


def open_runner(steps: ResolvedRecipe, campaign_dir: Path, runtime: Runtime, *, home: Path, offline: bool,
                plan: RunPlan | None, redo: bool, listed_steps: list[Step]) -> OwnedRunner:
    """A runner over the campaign it opens (closed with it when the run returns), with HOME's store, and its
    key to sign training checkpoints with when it has one."""
    campaign = Campaign(campaign_dir)
    try:
        runner = Runner(steps, campaign, runtime, store=paths.store_dir(home), offline=offline, plan=plan, redo=redo,
                        listed_steps=listed_steps, checkpoint_signer=checkpoint_signer(home))
    except BaseException:
        campaign.close()
        raise
    return OwnedRunner(runner, campaign)


def submit(submission: SubmitRequest, resolved: ResolvedRecipe) -> Submitted:
    return submit_prepared(submission, prepare_submission(submission, resolved))


def read_sharded(path: Path) -> tuple[ShardPlan, dict[str, Any]]:
    """A sharded parent's plan and the options of its last submission, read without writing."""
    subs = read_submissions(path)
    return read_plan(path), dict(subs[-1].get("options", {})) if subs else {}


def resolve_again(plan: ShardPlan, local_model: list[str] | None, home: Path | None) -> ResolvedRecipe:
    """The plan's recipe and narrowing, resolved as `trace-tui --recipe NAME --models ... --seeds ...` does."""
    own = None
    if local_model:
        own = import_local_models(local_model, paths.store_dir(paths.home(home)))
    return resolve_recipe(load_recipe(plan.recipe), models=plan.models, seeds=plan.seeds,
                          benchmarks=plan.benchmarks if plan.narrowed_benchmarks else None, local_models=own)

"""Opening a campaign the faces show or resume: its recipe and states read without writing, whether a runner
holds it now, which folder a run of a recipe goes to, and a runner that owns the campaign it opened."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trace_tui import paths
from trace_tui.campaign_files.recipe_file import campaign_recipe_name, read_campaign_recipe
from trace_tui.campaign_files.state import read_snapshot
from trace_tui.common.digest import sha256_json
from trace_tui.common.runtimes import known_runtime
from trace_tui.engine.status import runner_active
from trace_tui.errors import TraceTuiError

if TYPE_CHECKING:  # pragma: no cover - the pydantic models, loaded where a campaign is opened or run
    from trace_tui.engine.campaign import Campaign
    from trace_tui.engine.events import Event, SliceState
    from trace_tui.engine.runner import Runner, RunResult
    from trace_tui.recipe.schema import ResolvedRecipe


@dataclass
class OpenedCampaign:
    """An existing campaign read without writing: its recipe, step and slice states, and whether it runs now."""

    path: Path
    resolved: ResolvedRecipe
    step_states: dict[str, str]
    events: list[SliceState]
    live: bool
    last_state: str = ""
    runtime: str = ""  # where its last run ran (common.runtimes: "docker", "podman", "local"); "" when not recorded


def read_campaign(path: Path) -> OpenedCampaign:
    """The campaign's state from its SQLite database and recipe.json, read-only."""
    # pydantic (the recipe and event models): loaded when a campaign is opened, not before the first screen
    from trace_tui.engine.events import SliceState
    from trace_tui.recipe.catalog import recorded_recipe

    path = Path(path).expanduser().resolve()
    # validated: a field no recipe may hold is one line naming the file (shown; a run takes the shipped recipe)
    resolved = recorded_recipe(read_campaign_recipe(path), source=str(path / "recipe.json"))
    # Expected jobs, and the slices that whole-step jobs report (the release evaluator's one generate job).
    meta, steps, jobs, subs = read_snapshot(path)
    known = ("pending", "skipped", "running", "resumed", "completed", "failed", "cancelled", "invalidated")
    events = [SliceState(step=j.step, model=j.model, seed=j.seed, benchmark=j.benchmark,
                         state=j.state if j.state in known else "pending", done=j.done, total=j.total, score=j.score)
              for j in [*jobs, *subs] if j.model is not None]
    return OpenedCampaign(path=path, resolved=resolved, step_states={s["step"]: s["state"] for s in steps},
                          events=events, live=runner_active(path), last_state=meta.get("last_run_state", ""),
                          runtime=known_runtime(meta.get("runtime")) or "")


class OwnedRunner:
    """A Runner with the campaign it opened: closing the campaign (and its lock) when the run returns."""

    def __init__(self, runner: Runner, campaign: Campaign) -> None:
        self.runner = runner
        self.campaign = campaign

    def run(self, on_event: Callable[[Event], None]) -> RunResult:
        try:
            return self.runner.run(on_event)
        finally:
            self.campaign.close()

    def cancel(self) -> None:
        self.runner.cancel()

    @property
    def cancelled(self) -> bool:
        return self.runner.cancelled


def without_steps(resolved: ResolvedRecipe, skip: frozenset[str]) -> ResolvedRecipe:
    """The resolved recipe less the steps the user chose to skip (the runner runs every step it is given)."""
    if not skip:
        return resolved
    recipe = resolved.recipe
    kept = [s for s in recipe.steps if s.id not in skip]
    # a skipped step's store entries are not needed either (the requirement check reads these)
    entries = {k: v for k, v in resolved.store_entries.items() if k not in skip}
    narrowed = recipe.model_copy(update={"steps": kept})
    # The campaign records the recipe it ran, less the skipped steps; its configuration hash is the one of
    # that content (as trace_tui.recipe.catalog computes it), so `verify --campaign` recomputes it and a skip is not
    # taken for an edit. The run tag stays: it names the campaign folder the run was planned in.
    from trace_tui.recipe.schema import config_data  # pydantic: loaded when steps are skipped

    sha = sha256_json(config_data(narrowed, resolved.suite, resolved.suite_sha256, resolved.models, resolved.seeds,
                                  resolved.benchmarks, resolved.settings, resolved.training, entries))
    return resolved.model_copy(update={"recipe": narrowed, "store_entries": entries, "config_sha256": sha})


def campaign_holds(campaign: Path, recipe: str) -> bool:
    """Whether CAMPAIGN is new (no recipe written yet) or holds a run of RECIPE."""
    try:
        return campaign_recipe_name(campaign) in (None, recipe)
    except TraceTuiError:
        return False  # a damaged campaign is never written into by another run


def session_campaign_folder(given: Path | None, resolved: ResolvedRecipe, home: Path) -> Path:
    """Where the TUI runs RESOLVED: GIVEN (the --campaign the session opened) when it is new or holds this
    recipe's campaign, else HOME/campaigns/RUN_TAG. Unlike a headless run, which refuses a --campaign holding
    another recipe, a session may choose another recipe after opening one: that run gets its own folder, never
    the opened campaign's."""
    if given is not None and campaign_holds(given, resolved.recipe.name):
        return given
    return paths.campaigns_dir(home) / resolved.run_tag

"""Where a run's campaign lives: the one rule the headless run and the Slurm submission share."""

from __future__ import annotations

from pathlib import Path

from trace_tui import paths
from trace_tui.campaign_files.recipe_file import campaign_recipe_name
from trace_tui.errors import UsageError


def campaign_folder(given: str | Path | None, recipe_name: str, run_tag: str, home: str | Path | None) -> Path:
    """``given`` (--campaign) when it is free or holds this recipe's campaign, else HOME/campaigns/RUN_TAG."""
    if given:
        folder = Path(given).expanduser().resolve()
        held = campaign_recipe_name(folder) if folder.is_dir() else None
        if held is not None and held != recipe_name:
            # its recipe.json, state and outputs are that run's: another recipe would write over them
            raise UsageError(f"--campaign {folder} holds a campaign of recipe {held}, not {recipe_name}",
                             hint=f"resume it with `trace-tui --campaign {folder}`, or give {recipe_name} "
                                  "its own folder (leave out --campaign)")
        return folder
    return paths.campaigns_dir(paths.home(home)) / run_tag

"""The one reader of a campaign's ``recipe.json``: the resolved recipe its latest run wrote.

Standard library only: the stage workers read it inside the images.

The runner and the Slurm parent write it; the TUI, the verifier, the external summary, the shard
check and the stage workers read it. Each caller validates the fields it reads; here the file is
only found, read and parsed, and every way that fails is one line naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_tui.common.safe_read import MAX_DOCUMENT_BYTES, NotRead, read_regular_file
from trace_tui.errors import CheckFailed, UsageError

RECIPE_FILE = "recipe.json"


def read_campaign_recipe(campaign: Path) -> dict[str, Any]:
    """The resolved recipe of CAMPAIGN as a JSON object.

    Raises UsageError when CAMPAIGN holds no recipe.json (it is not a campaign: bad input), and
    CheckFailed when the file cannot be read or is not a JSON object (a damaged campaign).
    """
    path = Path(campaign) / RECIPE_FILE
    try:
        # A regular file only, and only so much of it: a FIFO in its place would block the read
        # forever, a link to /dev/zero would fill memory.
        value = json.loads(read_regular_file(path, MAX_DOCUMENT_BYTES))
    except FileNotFoundError:
        raise UsageError(f"{campaign} is not a campaign directory (no {RECIPE_FILE})",
                         hint="give a directory that `trace-tui --recipe NAME` created") from None
    except NotRead as exc:
        raise CheckFailed(f"{path}: {exc.reason}", hint="the runner writes it as a regular JSON file") from None
    except OSError as exc:
        raise CheckFailed(f"{path}: unreadable ({exc.strerror or exc})") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise CheckFailed(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise CheckFailed(f"{path}: nested too deeply to be a resolved recipe") from None
    if not isinstance(value, dict):
        raise CheckFailed(f"{path}: not a resolved recipe (a JSON {type(value).__name__} at the top level)")
    return value


def campaign_recipe_name(campaign: Path) -> str | None:
    """The name of the recipe CAMPAIGN holds a run of; None for a folder no run has written yet.

    Raises CheckFailed as read_campaign_recipe does for a damaged recipe.json.
    """
    if not (Path(campaign) / RECIPE_FILE).exists():
        return None
    held = read_campaign_recipe(campaign).get("recipe")
    name = held.get("name") if isinstance(held, dict) else None
    if not isinstance(name, str):
        raise CheckFailed(f"{Path(campaign) / RECIPE_FILE}: names no recipe (no recipe.name)")
    return name

"""Where the package data lives: recipes and the release lock.

Installed, they are the module ``trace_tui.recipe_files``; from a source checkout
without an install they are the repository's ``recipes/`` folder.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def recipes_dir() -> Path:
    try:
        import trace_tui.recipe_files as pkg  # installed: package-dir maps recipes/ here

        return Path(pkg.__file__).resolve().parent
    except ImportError:  # pragma: no cover - running from a bare checkout
        return Path(__file__).resolve().parents[2] / "recipes"


def release_lock_path() -> Path:
    return recipes_dir() / "release.lock.json"

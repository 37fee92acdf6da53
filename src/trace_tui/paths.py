"""Where trace-tui keeps its store and campaigns (SPEC §3)."""

from __future__ import annotations

import os
from pathlib import Path


def home(override: str | os.PathLike[str] | None = None) -> Path:
    """TRACE_TUI_HOME: --home, then $TRACE_TUI_HOME, then $XDG_DATA_HOME/trace-tui (a directory, or none yet)."""
    path = _home(override)
    if path.exists() and not path.is_dir():
        from trace_tui.errors import UsageError

        raise UsageError(f"trace-tui home {path} is not a directory (from --home, $TRACE_TUI_HOME or $XDG_DATA_HOME)",
                         hint="name a directory; it is created when missing")
    return path


def _home(override: str | os.PathLike[str] | None = None) -> Path:
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get("TRACE_TUI_HOME")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return (Path(xdg) / "trace-tui").resolve()


def store_dir(root: Path) -> Path:
    return root / "store"


def campaigns_dir(root: Path) -> Path:
    return root / "campaigns"

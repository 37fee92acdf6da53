"""Where trace-tui keeps its store and campaigns (SPEC §3)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from trace_tui.errors import UsageError


def home(override: str | os.PathLike[str] | None = None) -> Path:
    """TRACE_TUI_HOME: --home, then $TRACE_TUI_HOME, then $XDG_DATA_HOME/trace-tui (a directory, or none yet)."""
    path = _home(override)
    if path.exists() and not path.is_dir():
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


# Why a path cannot be used, for a one-line message (errno -> words).
_UNUSABLE = {
    errno.ENAMETOOLONG: ("a name in it is too long (at most 255 bytes a folder or file name)", "shorten it"),
    errno.ELOOP: ("a symbolic link loop (a link that leads back to itself)", "give a path without the loop"),
    errno.EACCES: ("permission denied (a folder on the way this user may not read or enter)",
                   "give a folder this user can read, or change its permissions"),
    errno.ENOTDIR: ("a part of the path is a file, not a directory", "give a path through directories"),
}


def _unusable(shown: str, exc: OSError) -> Exception:
    what, fix = _UNUSABLE.get(exc.errno or 0, (exc.strerror or str(exc), "give a path that can be used"))
    return UsageError(f"{shown}: {what}", hint=fix)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "something else"


def campaign_dir_arg(value: str | os.PathLike[str], *, option: str = "--campaign", new_ok: bool = False) -> Path:
    """The campaign directory a command was given, or a UsageError (exit 2) saying in one line what is wrong with
    it: a file, a name too long, a link loop, a folder this user may not read. NEW_OK: a run may name a
    directory that does not exist yet (it is created); status and verify need one that does."""
    path = Path(value).expanduser()
    shown = f"{option} {value}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if new_ok:
            return path
        raise UsageError(f"{shown}: no such directory", hint="give the folder a `trace-tui --recipe` run printed") \
            from None
    except OSError as exc:
        raise _unusable(shown, exc) from None
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{shown}: is {_kind(mode)}, not a campaign directory",
                         hint="give the campaign directory: the folder that holds its state.sqlite")
    try:
        with os.scandir(path):
            pass
    except OSError as exc:
        raise _unusable(shown, exc) from None
    return path

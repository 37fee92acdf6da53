"""Writing into a folder handed to trace-tui (a campaign): never through a link, never outside it.

A campaign may come from someone else, and any name in it may be a link planted there: ``.lock``
or ``state.sqlite`` linked to a file elsewhere (a resume would overwrite it or add tables to it),
``events.jsonl`` or a log linked out (lines appended elsewhere), an ``outputs/.../rows`` folder
linked out (a worker would write its rows there, and the receipt would list none of them). The
writers here go down from the campaign's root one name at a time and refuse the first link (or
non-directory) they meet, so what they return lies inside the root as its real path; a file is
opened with ``O_NOFOLLOW``. Refusal is ``NotWritten``, whose message is one line naming the path.

Standard library only, like the rest of ``common``: the stage workers write with it inside the
images (the counterpart of ``safe_read``, whose ``Folder`` reads a handed-over folder).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from trace_tui.common.safe_read import _kind

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class NotWritten(Exception):
    """A path trace-tui does not write to (a link, not a directory, outside the folder); str() is one line."""

    def __init__(self, path: os.PathLike | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


def _link_reason(path: str) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (f"is a link (to {target[:200]}); trace-tui writes into a campaign only in place, never through a "
            "link: remove the link")


def _parts(rel: os.PathLike | str) -> list[str]:
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    if Path(rel).is_absolute() or ".." in parts:
        raise NotWritten(rel, "not a path inside the folder (absolute, or with '..')")
    return parts


def directory_inside(root: os.PathLike | str, rel: os.PathLike | str, *, create: bool = True) -> Path:
    """ROOT/REL as a directory inside ROOT: each name on the way is a directory, none a link (made when
    missing and ``create``). Raises NotWritten for a link or anything else in the way, FileNotFoundError
    for a missing one when not ``create``."""
    path = os.fspath(root)
    for part in _parts(rel):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(path)
            except FileExistsError:
                pass  # made meanwhile (another worker): looked at below like any other
            st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise NotWritten(path, _link_reason(path))
        if not stat.S_ISDIR(st.st_mode):
            raise NotWritten(path, f"is {_kind(st.st_mode)}, not a directory")
    return Path(path)


def file_inside(root: os.PathLike | str, rel: os.PathLike | str, *, create_folder: bool = True) -> Path:
    """ROOT/REL for writing: its folder a directory inside ROOT (directory_inside), the name itself absent
    or a regular file, never a link (a dangling one included)."""
    parts = _parts(rel)
    if not parts:
        raise NotWritten(rel, "names no file")
    folder = directory_inside(root, os.path.join(*parts[:-1]) if len(parts) > 1 else ".", create=create_folder)
    path = folder / parts[-1]
    check_not_link(path)
    return path


def check_not_link(path: os.PathLike | str) -> None:
    """NotWritten when PATH is a link (dangling or not) or something else than a regular file; absent is fine."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise NotWritten(path, _link_reason(os.fspath(path)))
    if not stat.S_ISREG(st.st_mode):
        raise NotWritten(path, f"is {_kind(st.st_mode)}, not a regular file")


def open_nofollow(path: os.PathLike | str, flags: int, mode: int = 0o644) -> int:
    """os.open with O_NOFOLLOW: a link in PATH's place (planted after a check) is NotWritten, not followed."""
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotWritten(path, _link_reason(os.fspath(path))) from None
        raise


def open_append(path: os.PathLike | str, encoding: str = "utf-8"):  # noqa: ANN201 - a text file object
    """PATH opened for appending text, created when missing, never through a link."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotWritten(path, f"is {_kind(st.st_mode)}, not a regular file")
        return os.fdopen(fd, "a", encoding=encoding)
    except BaseException:
        os.close(fd)
        raise


def links_under(root: os.PathLike | str, rel: os.PathLike | str) -> Path | None:
    """The first link found under ROOT/REL (itself included), going down without following any; None when
    there is none (or nothing there). Directory entries say what they are (no stat per file): a whole-step
    job's folder of hundreds of thousands of rows is walked in well under a second."""
    top = os.path.join(os.fspath(root), os.fspath(rel))
    if os.path.islink(top):
        return Path(top)
    stack = [top]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for entry in entries:
                if entry.is_symlink():
                    return Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return None

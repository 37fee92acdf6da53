"""All-or-nothing writes (stdlib only): a reader sees the old file or the new one, never a torn one,
and after return the rename itself survives a power cut (the directory is fsync'd too)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# The mode a plain open() would give: mkstemp's 0600 would make every output private to its writer, and
# what a host step writes (as root) is then unreadable to the unprivileged uid stage containers run as,
# and stays so in the store, which keeps a file's permissions no wider than they came.
FILE_MODE = 0o666 & ~_umask()


def fsync_dir(path: Path) -> None:
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    """Readable JSON (indented, sorted keys), written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")

"""All-or-nothing writes (stdlib only): a reader sees the old file or the new one, never a torn one,
and after return the rename itself survives a power cut (the directory is fsync'd too)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


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


def _replace(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename over ``path`` (the directory is not fsync'd)."""
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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename, fsync the directory."""
    _replace(path, data)
    fsync_dir(path.parent)


def atomic_write_batch(files: list[tuple[Path, bytes]]) -> None:
    """Each file written as atomic_write_bytes writes it, each directory fsync'd once after all its renames:
    a batch of rows costs one directory fsync instead of one per row."""
    for path, data in files:
        _replace(path, data)
    for parent in dict.fromkeys(path.parent for path, _ in files):
        fsync_dir(parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def json_bytes(obj: object) -> bytes:
    """The bytes atomic_write_json writes for ``obj``: readable JSON (indented, sorted keys), UTF-8."""
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8")


def atomic_write_json(path: Path, obj: object) -> None:
    """Readable JSON (indented, sorted keys), written atomically."""
    atomic_write_bytes(path, json_bytes(obj))

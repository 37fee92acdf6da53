"""A real tmpfs for the tests that need a small or read-only filesystem (mounting needs root)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def tmpfs(where: Path, options: str) -> Iterator[bool]:
    """Mount a tmpfs with OPTIONS (e.g. "size=1m") at WHERE for the block; yields whether it mounted.

    Unmounted (lazily, as a test may still hold a file there) when the block ends.
    """
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                             capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)

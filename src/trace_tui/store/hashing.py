"""File hashing for the store: large blocks, several files at once.

hashlib releases the GIL while it hashes a block, so a thread pool hashes as
many files in parallel as there are cores; 8 MiB reads keep the per-call
overhead negligible. (One file is inherently sequential: SHA-256 is a chain.)
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

from trace_tui.common.digest import BLOCK, sha256_file


def _hashers(size: int, algorithms: Iterable[str]) -> dict[str, "hashlib._Hash"]:
    hashers: dict[str, "hashlib._Hash"] = {"sha256": hashlib.sha256()}
    for alg in algorithms:
        if alg == "md5":
            hashers["md5"] = hashlib.md5(usedforsecurity=False)
        elif alg == "git-sha1":  # the git blob id the hub reports for files not in LFS
            g = hashlib.sha1(usedforsecurity=False)
            g.update(b"blob %d\0" % size)
            hashers["git-sha1"] = g
        elif alg != "sha256":
            raise ValueError(f"unknown digest {alg}")
    return hashers


def digest_file(path: Path, algorithms: Iterable[str], *, block: int = BLOCK) -> dict[str, str]:
    """Several digests in one read: sha256 always, plus md5 / git-sha1 where a source publishes one."""
    hashers = _hashers(path.stat().st_size, algorithms)
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(block)
        view = memoryview(buf)
        while n := f.readinto(buf):
            for h in hashers.values():
                h.update(view[:n])
    return {k: h.hexdigest() for k, h in hashers.items()}


def copy_digest(src: Path, dst: Path, algorithms: Iterable[str], *, block: int = BLOCK) -> dict[str, str]:
    """Copy ``src`` to ``dst`` and digest the bytes written, in one pass (a 65 GB model is read once);
    fsync'd, so a committed entry never points at bytes still in flight."""
    hashers = _hashers(src.stat().st_size, algorithms)
    with open(src, "rb", buffering=0) as fi, open(dst, "wb", buffering=0) as fo:
        buf = bytearray(block)
        view = memoryview(buf)
        while n := fi.readinto(buf):
            chunk = view[:n]
            fo.write(chunk)
            for h in hashers.values():
                h.update(chunk)
        os.fsync(fo.fileno())
    return {k: h.hexdigest() for k, h in hashers.items()}


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def sha256_files(paths: list[Path], *, workers: int | None = None,
                 on_file: Callable[[Path, str], None] | None = None,
                 errors: dict[Path, OSError] | None = None) -> dict[Path, str]:
    """sha256 of many files, in parallel; biggest first so the pool ends together.

    ``errors``: where a file that cannot be read is noted (and left out of the result) instead of
    stopping the whole run; without it, the first such file raises.
    """
    order = sorted(paths, key=lambda p: -p.stat().st_size)
    out: dict[Path, str] = {}

    def one(path: Path) -> str | OSError:
        try:
            return sha256_file(path)
        except OSError as exc:
            if errors is None:
                raise
            return exc

    with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:
        for path, digest in zip(order, pool.map(one, order)):
            if isinstance(digest, OSError):
                assert errors is not None
                errors[path] = digest
                continue
            out[path] = digest
            if on_file is not None:
                on_file(path, digest)
    return out

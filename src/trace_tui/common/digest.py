"""Hashes and canonical JSON, defined once (stdlib only).

Two canonical JSON forms exist on purpose, and each has exactly one function:

- ``canonical_json``: sorted keys, compact separators, UTF-8 text (non-ASCII
  characters written as themselves). Our own identities -- job input hashes,
  receipt ``content_sha256``, resolved-config hashes -- are this form, so every
  campaign already on disk keeps its hashes.
- ``sha256set``: the release's definition (SPEC §4, "sha256 of the canonical
  JSON (sorted keys, compact separators) of {relative path: file sha256}"). The
  release's evaluator writes that JSON with ASCII escapes
  (``json.dumps(..., ensure_ascii=True)`` in
  ``rlvr/evaluation/scripts/prepare_trace_eval_models.py``), and the store has
  always recorded its entries that way, so a ``sha256set:`` over
  ``données/x.bin`` is the same value here, in the store and in the release.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
BLOCK = 8 << 20  # large reads: hashlib releases the GIL per block, and per-call overhead vanishes


def sha256_file(path: Path, *, block: int = BLOCK, on_bytes: Callable[[int], None] | None = None) -> str:
    """The hex sha256 of a file's bytes; ``on_bytes(n)`` after each block read (progress)."""
    return sha256_file_size(path, block=block, on_bytes=on_bytes)[0]


def sha256_file_size(path: Path, *, block: int = BLOCK,
                     on_bytes: Callable[[int], None] | None = None) -> tuple[str, int]:
    """(hex sha256, size in bytes) of a file, in one read."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(block)
        view = memoryview(buf)
        while n := fh.readinto(buf):
            h.update(view[:n])
            size += n
            if on_bytes is not None:
                on_bytes(n)
    return h.hexdigest(), size


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """The hex sha256 of a string's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def response_sha256(value: object) -> str | None:
    """sha256_text of a row's response as read back from its file; None when it is not a string, or not one a
    model could have written (a lone surrogate, which a JSON escape like \\ud800 can put in a forged row, has
    no UTF-8 form): a row holding one proves nothing, and must not stop the reader with a traceback."""
    if not isinstance(value, str):
        return None
    try:
        return sha256_text(value)
    except UnicodeEncodeError:
        return None


def canonical_json(obj: object) -> str:
    """Sorted keys, compact separators, UTF-8 (no ASCII escapes); values JSON cannot hold become ``str``."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_json(obj: object) -> str:
    """The hex sha256 of ``canonical_json(obj)``."""
    return sha256_text(canonical_json(obj))


def sha256set(files: dict[str, str]) -> str:
    """``sha256set:<hex>`` of {relative POSIX path: file sha256}, as the release defines it (module docstring)."""
    canon = json.dumps(files, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256set:" + sha256_text(canon)


def dir_files(path: Path) -> list[Path]:
    """Every regular file under ``path``, in a stable order."""
    return sorted(p for p in path.rglob("*") if p.is_file())


def dir_sha256s(path: Path) -> dict[str, str]:
    """{relative POSIX path: sha256} of every file under ``path``."""
    return {f.relative_to(path).as_posix(): sha256_file(f) for f in dir_files(path)}

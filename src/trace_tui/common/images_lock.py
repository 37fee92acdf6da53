"""The one tolerant reader of ``images.lock.json`` (stdlib only).

``trace_tui.images`` writes the lock and validates it strictly for the
``images`` commands; everything that only needs to know which image serves a
stage (the hardware probe, the Docker runtime) reads it here, tolerantly:
unknown keys are ignored, a malformed entry is skipped, a missing or unreadable
file is a status with a message, never an exception.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, NamedTuple

FIX_IMAGES = "make appliance"
# Older and hand-written locks name the image under any of these keys (first one present wins).
_REF_KEYS = ("tag", "ref", "name", "image", "id")


class ImageLockRead(NamedTuple):
    status: Literal["ok", "missing", "unreadable"]
    entries: dict[str, dict[str, Any]]  # stage image name -> its lock entry
    message: str
    flavor: str | None


def read_image_lock(path: Path, *, fix: str = FIX_IMAGES) -> ImageLockRead:
    """{"flavor": ..., "images": {name: {"tag", "id", ...} | "tag"}}; a bare string entry reads as {"tag": it}."""
    if not path.is_file():
        return ImageLockRead("missing", {}, f"no image lock at {path}: images not built (run `{fix}`)", None)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return ImageLockRead("unreadable", {}, f"image lock {path} is not readable JSON ({exc}); rebuild with `{fix}`",
                             None)
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, dict):
        return ImageLockRead("unreadable", {}, f"image lock {path} has no 'images' object; rebuild with `{fix}`", None)
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in images.items():
        if isinstance(entry, str) and entry:
            entries[str(name)] = {"tag": entry}
        elif isinstance(entry, dict):
            entries[str(name)] = entry
    flavor = data.get("flavor") if isinstance(data.get("flavor"), str) else None
    return ImageLockRead("ok", entries, f"image lock {path}", flavor)


def image_ref(entry: dict[str, Any]) -> str | None:
    """The name to run an entry's image by, or None when the entry names none."""
    for key in _REF_KEYS:
        if entry.get(key):
            return str(entry[key])
    return None


def image_refs(path: Path) -> dict[str, str]:
    """{stage image name: name to run it by}; empty when there is no usable lock."""
    read = read_image_lock(path)
    return {name: ref for name, entry in read.entries.items() if (ref := image_ref(entry))}


def image_export(path: Path, runtime: str, kind: str) -> dict[str, Any]:
    """Where RUNTIME reads the KIND image, as the lock at PATH records it (`images export`: its ``exports``);
    {} when the lock records none or cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    exports = data.get("exports") if isinstance(data, dict) else None
    kinds = exports.get(runtime) if isinstance(exports, dict) else None
    entry = kinds.get(kind) if isinstance(kinds, dict) else None
    return entry if isinstance(entry, dict) else {}

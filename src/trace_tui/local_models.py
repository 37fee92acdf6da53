"""`--local-model ID=PATH[@REVISION]`: a user's own checkpoint, evaluated by `full` like a release model.

It enters the store as an unpinned `local:model/ID` entry (hashes computed on
import); its revision is the one the user names, else the sha256set of its
files. It is shown without a published comparison.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from trace_tui.errors import UsageError
from trace_tui.recipe.schema import LocalModel
from trace_tui.store import Store, local_entry

_SPEC = re.compile(r"^(?P<id>[a-z0-9][a-z0-9.-]*)=(?P<path>[^@]+)(?:@(?P<rev>[A-Za-z0-9:._-]+))?$")
# hidden_size of the Qwen2.5-VL text models, for the GPU requirement of the checkpoint's size.
_SCALE_BY_HIDDEN = {2048: "3B", 3584: "7B"}


def parse_local_model(spec: str) -> tuple[str, Path, str | None]:
    m = _SPEC.match(spec)
    if not m:
        raise UsageError(f"--local-model {spec!r}: expected ID=PATH[@REVISION]",
                         hint="e.g. --local-model my-ckpt=/data/ckpt@v1 (ID: lower-case letters, digits, '.', '-')")
    path = Path(m["path"]).expanduser()
    if not (path / "config.json").is_file():
        raise UsageError(f"--local-model {m['id']}: {path} has no config.json", hint="name a checkpoint directory")
    return m["id"], path, m["rev"]


def scale_of(path: Path) -> str:
    """3B or 7B from the checkpoint's config; unknown sizes are planned as 7B (the larger requirement)."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path / 'config.json'}: not readable JSON ({exc})") from exc
    hidden = cfg.get("hidden_size") or (cfg.get("text_config") or {}).get("hidden_size")
    return _SCALE_BY_HIDDEN.get(hidden, "7B")


def import_local_models(specs: list[str], store_root: Path) -> list:
    """Import each checkpoint into the store and describe it for resolve_recipe(local_models=...)."""
    store = Store(store_root)
    out = []
    for spec in specs:
        model_id, path, revision = parse_local_model(spec)
        entry = local_entry("model", model_id)
        record = store.import_local(entry, path, notes={"revision": revision} if revision else None)
        out.append(LocalModel(id=model_id, label=model_id, store_entry=entry, scale=scale_of(path),
                              revision=revision or record.sha256set))
    return out

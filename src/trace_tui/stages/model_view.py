"""The runtime view a validation model is generated from: its store files, or the release's compatibility view.

The release's validation suite pins each model it evaluated by the content of the files it ran
(``published_revision_sets["trace_validation"]`` in the release lock, a ``sha256set:``). For
most models that is the pinned Hugging Face snapshot itself. For one it is not: the Game-RL
checkpoint's ``preprocessor_config.json`` names ``Qwen2_5_VLImageProcessor``, which the pinned
transformers (4.57.6) does not know, and the release ran it from a runtime-only view whose
config names ``Qwen2VLImageProcessor`` instead (the same processor under the name 4.57.6 has).

Here that view is made the same way for any model whose files differ from its pin only by that
name: the other files are linked from the read-only store, the rewritten config is written
beside them in a private scratch folder (never the campaign or the store), and the view is
used only when its ``sha256set`` is exactly the pinned one. A model whose content is neither the
pin nor that view is refused before anything is generated.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

from trace_tui.common.digest import sha256set, sha256_text
from trace_tui.stages.jobs import JobError

PREPROCESSOR_CONFIG = "preprocessor_config.json"
# (the name the checkpoint gives, the name the pinned transformers knows the same processor by)
IMAGE_PROCESSOR_ALIAS = ("Qwen2_5_VLImageProcessor", "Qwen2VLImageProcessor")
VIEW_NAME = "image_processor_type Qwen2_5_VLImageProcessor -> Qwen2VLImageProcessor"


def aliased_preprocessor_config(text: str) -> str | None:
    """The config with the image processor renamed, serialised as the release writes it (two-space
    indent, a final newline); None when the config does not name the original processor."""
    try:
        config = json.loads(text)
    except ValueError:
        return None
    if not isinstance(config, dict) or config.get("image_processor_type") != IMAGE_PROCESSOR_ALIAS[0]:
        return None
    config["image_processor_type"] = IMAGE_PROCESSOR_ALIAS[1]
    return json.dumps(config, indent=2) + "\n"


def runtime_model(model_id: str, model_dir: Path, files: dict[str, str], current: str,
                  pinned: str | None) -> tuple[Path, dict[str, str], str]:
    """(folder, {file: sha256}, sha256set) to generate from: MODEL_DIR itself when it has the PINNED content
    (or nothing is pinned), else the compatibility view when that has it."""
    if not pinned or current == pinned:
        return model_dir, files, current
    source = model_dir / PREPROCESSOR_CONFIG
    aliased = aliased_preprocessor_config(source.read_text(encoding="utf-8")) if source.is_file() else None
    if aliased is not None:
        view_files = {**files, PREPROCESSOR_CONFIG: sha256_text(aliased)}
        view_set = sha256set(view_files)
        if view_set == pinned:
            return _materialise(model_dir, view_files, aliased), view_files, view_set
    raise JobError(f"model {model_id}: its files in the store are {current}, not the content the release's validation "
                   f"ran ({pinned})" + (", nor is its compatibility view" if aliased is not None else ""),
                   "fetch the model again (`trace-tui store fetch --recipe validation`) or check its pinned revision")


def _materialise(model_dir: Path, files: dict[str, str], config_text: str) -> Path:
    """The view in a private scratch folder: links to the store's files, the rewritten config as a file."""
    view = Path(tempfile.mkdtemp(prefix="trace-tui-model-view-"))
    atexit.register(shutil.rmtree, view, True)
    for rel in files:
        target = view / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel == PREPROCESSOR_CONFIG:
            target.write_text(config_text, encoding="utf-8")
        else:
            os.symlink(model_dir / rel, target)
    return view

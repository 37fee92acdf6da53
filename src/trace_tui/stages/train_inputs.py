"""The train stage's inputs: store entries and paths resolved, rows read, checkpoints identified."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trace_tui.common.digest import sha256_file, sha256set
from trace_tui.errors import RequirementsError, UsageError
from trace_tui.release import release_lock
from trace_tui.stages.jobs import DEMO_SYSTEM_PROMPT_FILE, DEMO_TASKS_ENTRY
from trace_tui.stages.train_job import InputSpec, TrainJob
from trace_tui.stages.train_profile import load_profile
from trace_tui.store import names
from trace_tui.store.store import Store

IMAGE_PLACEHOLDER = "<image>"
# What identifies a checkpoint: its weights and its config, never trainer state
# (optimizer, scheduler, RNG, trainer_state.json, training_args.bin) or timing.
CHECKPOINT_CONTENT_SUFFIXES = (".safetensors",)
CHECKPOINT_CONTENT_NAMES = ("config.json", "generation_config.json", "model.safetensors.index.json")


# ---------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------


def checkpoint_content_files(ckpt: Path) -> list[Path]:
    return sorted(p for p in ckpt.iterdir()
                  if p.is_file() and (p.suffix in CHECKPOINT_CONTENT_SUFFIXES or p.name in CHECKPOINT_CONTENT_NAMES))


def checkpoint_sha256set(ckpt: Path) -> tuple[str, dict[str, str]]:
    files = {p.name: sha256_file(p) for p in checkpoint_content_files(ckpt)}
    return sha256set(files), files


def split_prompt(text: str, n_images: int) -> list[dict[str, Any]]:
    """The user turn as content parts: each ``<image>`` placeholder becomes an image part, in place."""
    pieces = text.split(IMAGE_PLACEHOLDER)
    if len(pieces) - 1 != n_images:
        raise ValueError(f"{len(pieces) - 1} '<image>' placeholder(s) for {n_images} image(s)")
    parts: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        if i:
            parts.append({"type": "image", "text": None})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def pick_rows(total: int, k: int, *, shuffle: bool, seed: int) -> list[int]:
    """The step's rows: a seeded draw without replacement (profile: shuffle with data.seed), else the first k."""
    if k > total:
        raise UsageError(f"train data: {total} row(s) for {k} prompts per step",
                         hint="name more train files or lower settings.prompts_per_step")
    return sorted(random.Random(seed).sample(range(total), k)) if shuffle else list(range(k))


def reward_stats(rewards: list[float]) -> tuple[float, float]:
    """Mean and population standard deviation of every rollout reward of the step."""
    n = len(rewards)
    mean = sum(rewards) / n
    return mean, (sum((r - mean) ** 2 for r in rewards) / n) ** 0.5

# ---------------------------------------------------------------------------
# I/O edges
# ---------------------------------------------------------------------------


def _entry_name(entry: str) -> str:
    # The runner names a training base model "model/REPO@REV"; the store calls it "model:REPO@REV".
    if entry.startswith("model/") and "@" in entry:
        return "model:" + entry[len("model/"):]
    return entry


def spec_label(spec: InputSpec) -> str:
    """How the receipt names an input: its path or its store entry (and file)."""
    if isinstance(spec, str):
        return spec
    for key in ("entry", "path", "store", "campaign"):
        if key in spec:
            label = _entry_name(str(spec[key])) if key == "entry" else str(spec[key])
            return f"{label}/{spec['file']}" if spec.get("file") else label
    return json.dumps(spec, sort_keys=True)


def _entry_path(entry: str, store: Path) -> Path:
    st = Store(store)
    if not st.has(entry):
        raise RequirementsError(f"store entry {entry} is not in the store ({store})",
                                hint="run the recipe's prepare step, eval-setup, or import a bundle first")
    return st.path_of(entry)


def _resolve(spec: InputSpec, store: Path, campaign: Path) -> Path:
    if isinstance(spec, str):
        p = Path(spec)
        return p if p.is_absolute() else store / p
    if "entry" in spec:
        path = _entry_path(_entry_name(str(spec["entry"])), store)
    elif "path" in spec:
        path = Path(spec["path"])
        path = path if path.is_absolute() else store / path
    elif "store" in spec:
        path = store / spec["store"]
    elif "campaign" in spec:
        path = campaign / spec["campaign"]
    else:
        raise UsageError(f"job input {spec!r} names none of entry/path/store/campaign",
                         hint="give a path or an input spec")
    return path / spec["file"] if spec.get("file") else path


def _base_scale(entry: str) -> str | None:
    """The release training scale ('3B'/'7B') whose pinned base model this store entry is, if any."""
    for scale, pin in release_lock().training_base_models.items():
        if _entry_name(entry) == f"model:{pin.repo_id}@{pin.revision}":
            return scale
    return None


class Inputs(BaseModel):
    """Where the run's inputs are, with the names the receipt gives them."""

    model_dir: Path
    model_label: str
    profile_path: Path | None  # None: the built-in demo profile
    profile_label: str
    prompt_path: Path
    prompt_label: str
    train_files: list[Path]
    train_labels: list[str]


def resolve_inputs(job: TrainJob, store: Path, campaign: Path) -> Inputs:
    """The model, profile, system prompt and train files: named in the job, or derived from its model.

    A pinned base model (smoke-3b/-7b) trains with the release profile of its
    scale from the release entry, the prompt that profile names and the
    pinned train shards; any other model (the demo's local one) with the
    built-in demo profile, the demo tasks and the prompt beside them.
    """
    inp = job.inputs
    model_dir = _must_exist(_resolve(inp.model, store, campaign), "model checkpoint directory", is_dir=True)
    entry = inp.model.get("entry") if isinstance(inp.model, dict) else None
    scale = _base_scale(str(entry)) if entry else None
    release_root: Path | None = None
    if scale is not None and (inp.profile is None or inp.system_prompt is None or inp.train_files is None):
        lock = release_lock()
        release_name = names.release_entry(lock)
        release_root = _entry_path(release_name, store)

    if inp.profile is not None:
        profile_path, profile_label = _resolve(inp.profile, store, campaign), spec_label(inp.profile)
    elif scale is not None:
        rel = release_lock().training.configs[scale]
        profile_path, profile_label = release_root / rel, f"{release_name}/{rel}"
    else:
        profile_path, profile_label = None, "built-in demo profile (trace_tui.stages.train_profile)"
    if profile_path is not None:
        _must_exist(profile_path, "training profile")

    if inp.system_prompt is not None:
        prompt_path, prompt_label = _resolve(inp.system_prompt, store, campaign), spec_label(inp.system_prompt)
    elif scale is not None:
        rel = ((load_profile(profile_path).get("release") or {}).get("prompt") or {}).get("path")
        if not rel:
            raise UsageError(f"{profile_path}: field 'release.prompt.path' missing",
                             hint="use the release's training profile unchanged")
        prompt_path, prompt_label = release_root / rel, f"{release_name}/{rel}"
    else:
        prompt_path = _entry_path(DEMO_TASKS_ENTRY, store) / DEMO_SYSTEM_PROMPT_FILE
        prompt_label = f"{DEMO_TASKS_ENTRY}/{DEMO_SYSTEM_PROMPT_FILE}"
    _must_exist(prompt_path, "system prompt file")

    if inp.train_files is not None:
        if not inp.train_files:
            raise UsageError("job field 'inputs.train_files' is empty", hint="name at least one parquet file")
        train_files = [_resolve(f, store, campaign) for f in inp.train_files]
        train_labels = [spec_label(f) for f in inp.train_files]
    elif scale is not None:
        lock = release_lock()
        ds_name = names.dataset_entry(lock, "train")
        root = _entry_path(ds_name, store)
        rels = [f.path for f in lock.dataset.file("train")]
        train_files = [root / r if (root / r).is_file() else root / Path(r).name for r in rels]
        train_labels = [f"{ds_name}/{r}" for r in rels]
    else:
        root = _entry_path(DEMO_TASKS_ENTRY, store)
        train_files = sorted(root.glob("*.parquet"))
        train_labels = [f"{DEMO_TASKS_ENTRY}/{f.name}" for f in train_files]
        if not train_files:
            raise UsageError(f"{root}: no parquet files in {DEMO_TASKS_ENTRY}", hint="run the demo's prepare step")
    for f in train_files:
        _must_exist(f, "train data file")
    return Inputs(model_dir=model_dir, model_label=spec_label(inp.model), profile_path=profile_path,
                  profile_label=profile_label, prompt_path=prompt_path, prompt_label=prompt_label,
                  train_files=train_files, train_labels=train_labels)


def _must_exist(path: Path, what: str, is_dir: bool = False) -> Path:
    ok = path.is_dir() if is_dir else path.is_file()
    if not ok:
        raise RequirementsError(f"{what} not found: {path}", hint="run eval-setup (or import a bundle) first")
    return path


def read_rows(files: list[Path], indices: list[int], columns: list[str]) -> list[dict[str, Any]]:
    """Rows at global ``indices`` over the concatenated files, reading only the row groups that hold them."""
    import pyarrow.parquet as pq

    wanted = sorted(indices)
    out: dict[int, dict[str, Any]] = {}
    base = 0
    for f in files:
        pf = pq.ParquetFile(str(f))
        rg_start = base
        for rg in range(pf.num_row_groups):
            n = pf.metadata.row_group(rg).num_rows
            local = [i - rg_start for i in wanted if rg_start <= i < rg_start + n]
            if local:
                table = pf.read_row_group(rg, columns=columns)
                for li in local:
                    row = table.slice(li, 1).to_pylist()[0]
                    row["_file"], row["_row"] = f.name, li + rg_start - base
                    out[rg_start + li] = row
            rg_start += n
        base += pf.metadata.num_rows
    return [out[i] for i in indices]


def parquet_rows(files: list[Path], columns: list[str]) -> int:
    import pyarrow.parquet as pq

    total = 0
    for f in files:
        pf = pq.ParquetFile(str(f))
        missing = [c for c in columns if c not in pf.schema_arrow.names]
        if missing:
            raise UsageError(f"{f}: missing column(s) {', '.join(missing)}",
                             hint="use the TRACE training shards (release.dataset.train_files)")
        total += pf.metadata.num_rows
    return total



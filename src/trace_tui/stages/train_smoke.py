"""The train stage worker: one GRPO step with the release training profile, on TRL (`python -m trace_tui.stages.train_smoke`).

Stage contract (SPEC section 3): the job spec comes from ``TRACE_TUI_JOB``,
the campaign directory from ``TRACE_TUI_CAMPAIGN``, the store from
``TRACE_TUI_STORE``; progress, log, artifact and status lines go to stdout
(trace_tui.stages.protocol). Nothing is fetched: every input is a file in the
store (or a path the job names), and the Hugging Face libraries run offline.

Job spec (JSON; the runner's whole-step job works as it is)::

    {
      "step": "train-smoke",
      "recipe": "smoke-3b" | "smoke-7b" | "demo",
      "slice": null | {"model": ..., "seed": ..., "benchmark": ...},   # labels the progress lines
      "output_dir": "steps/train-smoke",           # relative to the campaign (default: the step id)
      "inputs": {
        # Each input: a path (relative: inside the store) or {"entry": STORE ENTRY, "file"?: ...},
        # {"path": ...}, {"store": ...}, {"campaign": ...}.
        "model": {"entry": "model:Qwen/Qwen2.5-VL-3B-Instruct@6628..."} | {"entry": "local:model/tiny-qwen2.5-vl"},
        # Optional; derived from the model when absent:
        #   a pinned training base model -> the release profile of its scale (release entry),
        #     the system prompt that profile names, the pinned train shards (dataset entry, split train);
        #   any other model (the demo)   -> the built-in demo profile (train_profile.DEMO_PROFILE_SETTINGS),
        #     the demo tasks (local:dataset/demo-tasks, every *.parquet) and system_prompt.txt beside them.
        "profile": ..., "system_prompt": ..., "train_files": [...],
        "model_id": "...", "model_revision": "..."  # optional, recorded
      },
      "settings": {                                # all optional; other keys (the recipe's) are ignored
        "device": "auto" | "cpu" | "cuda", "cpu_threads": 1,
        "train": {"prompts_per_step": 2, "num_generations": 4, "max_response_length": 64,
                  "min_pixels": 3136, "max_pixels": 50176, "per_device_train_batch_size": 1,
                  "learning_rate": 1e-6},          # the same keys are also read at the top level
        "min_image_pixels": ..., "max_image_pixels": ..., "max_tokens": ...   # demo profile only
      }
    }

Every override is recorded in the receipt beside the profile value.

Outputs in ``<campaign>/<output_dir>/``: ``run_receipt.json`` (written
atomically, ``status: launching`` first, then ``completed`` or ``failed``),
``checkpoint-1/`` (weights, config, processor; trainer state beside them) and
``resolved_config.json``.
"""

from __future__ import annotations

import json
import os
import platform
import random
import socket
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.digest import dir_sha256s, sha256_bytes, sha256_file, sha256_json, sha256set
from trace_tui.stages import protocol
from trace_tui.stages.train_profile import Hardware, Overrides, ResolvedTraining

RECEIPT_SCHEMA = "trace-tui-train-smoke-receipt-v1"
SMOKE_STEPS = 1
IMAGE_PLACEHOLDER = "<image>"
# What identifies a checkpoint: its weights and its config, never trainer state
# (optimizer, scheduler, RNG, trainer_state.json, training_args.bin) or timing.
CHECKPOINT_CONTENT_SUFFIXES = (".safetensors",)
CHECKPOINT_CONTENT_NAMES = ("config.json", "generation_config.json", "model.safetensors.index.json")


InputSpec = str | dict[str, Any]


class SliceSpec(BaseModel):
    model: str | None = None
    seed: int | None = None
    benchmark: str | None = None


class TrainInputs(BaseModel):
    """Each input: a path (relative: inside the store) or an input spec {"entry"|"path"|"store"|"campaign", "file"?}."""

    model_config = ConfigDict(extra="allow")  # the runner adds "upstream"

    model: InputSpec
    profile: InputSpec | None = None
    system_prompt: InputSpec | None = None
    train_files: list[InputSpec] | None = None
    model_id: str | None = None
    model_revision: str | None = None


class TrainSettings(Overrides):
    # The recipe's settings travel here too (generation settings of other steps): ignored unless named below.
    model_config = ConfigDict(extra="ignore")

    device: Literal["auto", "cpu", "cuda"] = "auto"
    cpu_threads: int | None = 1
    # GPU weight precision: fp32 master weights (as upstream) when they fit, else bf16 (recorded).
    weights: Literal["auto", "fp32", "bf16"] = "auto"
    train: Overrides | None = None
    # The demo's generation settings, which also bound its training step (built-in demo profile only).
    min_image_pixels: int | None = None
    max_image_pixels: int | None = None
    max_tokens: int | None = None

    def overrides(self, *, demo: bool) -> Overrides:
        fields = set(Overrides.model_fields)
        values = {k: v for k, v in self.model_dump(include=fields).items() if v is not None}
        if self.train is not None:
            values.update({k: v for k, v in self.train.model_dump().items() if v is not None})
        if demo:
            for name, alias in (("min_pixels", self.min_image_pixels), ("max_pixels", self.max_image_pixels),
                                ("max_response_length", self.max_tokens)):
                if alias is not None:
                    values.setdefault(name, alias)
        return Overrides(**values)


class TrainJob(BaseModel):
    model_config = ConfigDict(extra="allow")

    step: str = "train-smoke"
    recipe: str | None = None
    slice: SliceSpec | None = None
    inputs: TrainInputs
    settings: TrainSettings = TrainSettings()
    output_dir: str | None = None  # relative to the campaign (the runner sets it)
    output: str | None = None  # older name of output_dir


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
        from trace_tui.errors import UsageError

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
    from trace_tui.errors import RequirementsError
    from trace_tui.store.store import Store

    st = Store(store)
    if not st.has(entry):
        raise RequirementsError(f"store entry {entry} is not in the store ({store})",
                                hint="run the recipe's prepare step, eval-setup, or import a bundle first")
    return st.path_of(entry)


def _resolve(spec: InputSpec, store: Path, campaign: Path) -> Path:
    from trace_tui.errors import UsageError

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
    from trace_tui.release import release_lock

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
    from trace_tui.errors import UsageError
    from trace_tui.stages.jobs import DEMO_SYSTEM_PROMPT_FILE, DEMO_TASKS_ENTRY

    inp = job.inputs
    model_dir = _must_exist(_resolve(inp.model, store, campaign), "model checkpoint directory", is_dir=True)
    entry = inp.model.get("entry") if isinstance(inp.model, dict) else None
    scale = _base_scale(str(entry)) if entry else None
    release_root: Path | None = None
    if scale is not None and (inp.profile is None or inp.system_prompt is None or inp.train_files is None):
        from trace_tui.release import release_lock
        from trace_tui.store import names

        lock = release_lock()
        release_name = names.release_entry(lock)
        release_root = _entry_path(release_name, store)

    if inp.profile is not None:
        profile_path, profile_label = _resolve(inp.profile, store, campaign), spec_label(inp.profile)
    elif scale is not None:
        from trace_tui.release import release_lock

        rel = release_lock().training.configs[scale]
        profile_path, profile_label = release_root / rel, f"{release_name}/{rel}"
    else:
        profile_path, profile_label = None, "built-in demo profile (trace_tui.stages.train_profile)"
    if profile_path is not None:
        _must_exist(profile_path, "training profile")

    if inp.system_prompt is not None:
        prompt_path, prompt_label = _resolve(inp.system_prompt, store, campaign), spec_label(inp.system_prompt)
    elif scale is not None:
        from trace_tui.stages.train_profile import load_profile

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
        from trace_tui.release import release_lock
        from trace_tui.store import names

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
    from trace_tui.errors import RequirementsError

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

    from trace_tui.errors import UsageError

    total = 0
    for f in files:
        pf = pq.ParquetFile(str(f))
        missing = [c for c in columns if c not in pf.schema_arrow.names]
        if missing:
            raise UsageError(f"{f}: missing column(s) {', '.join(missing)}",
                             hint="use the TRACE training shards (release.dataset.train_files)")
        total += pf.metadata.num_rows
    return total


def _hardware(settings: TrainSettings) -> Hardware:
    import torch

    from trace_tui.errors import RequirementsError

    want = settings.device
    if want == "cuda" and not torch.cuda.is_available():
        raise RequirementsError("settings.device is 'cuda' but torch sees no CUDA GPU",
                                hint="run on a GPU machine with the NVIDIA runtime, or use device 'cpu'")
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        props = torch.cuda.get_device_properties(0)
        return Hardware(device="cuda", devices=1, device_name=props.name, memory_gib=props.total_memory / 2**30)
    return Hardware(device="cpu", devices=1, device_name=platform.processor() or platform.machine())


# fp32 master weights, gradients and two AdamW moments (upstream: FSDP mixed
# precision over fp32 parameters); bf16 weights keep all four in bf16.
BYTES_PER_PARAM = {"fp32": 16, "bf16": 8}


def plan_gpu_memory(model_dir: Path, hardware: Hardware, resolved: ResolvedTraining,
                    weights: str = "auto") -> dict[str, Any] | None:
    """Which weight precision one GPU can train in, before minutes of loading (None on CPU).

    fp32 master weights under bf16 autocast is what upstream computed; when
    that cannot fit but bf16 weights can (8 instead of 16 bytes per parameter),
    ``auto`` takes bf16 and the receipt says so. Neither fitting is a
    requirements failure naming the sizes.
    """
    from trace_tui.errors import RequirementsError
    from trace_tui.gpu_needs import ACTIVATION_GIB

    if hardware.device != "cuda":
        return None
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    text = cfg.get("text_config", cfg)
    stored = sum(p.stat().st_size for p in model_dir.glob("*.safetensors"))
    dtype = str(text.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    params = stored / (4 if "32" in dtype else 2)
    heads = int(text.get("num_attention_heads", 1))
    head_dim = int(text.get("head_dim") or int(text.get("hidden_size", 0)) // max(heads, 1))
    kv_per_token = int(text.get("num_hidden_layers", 0)) * int(text.get("num_key_value_heads", heads)) * head_dim * 4
    tokens = resolved.stage["max_prompt_length"] + resolved.trl["max_completion_length"]
    kv = kv_per_token * resolved.scaling.completions_per_step["run"] * tokens / 2**30
    rest = kv + (ACTIVATION_GIB if params > 1e8 else 0.5)
    need = {w: round(params * b / 2**30 + rest, 1) for w, b in BYTES_PER_PARAM.items()}
    have = hardware.memory_gib if hardware.memory_gib is not None else float("inf")
    choices = [weights] if weights != "auto" else ["fp32", "bf16"]
    chosen = next((w for w in choices if need[w] <= have), None)
    if chosen is None:
        w = choices[-1]
        raise RequirementsError(
            f"one smoke step needs about {need[w]:.0f} GiB on one GPU ({params / 1e9:.2f}B parameters x "
            f"{BYTES_PER_PARAM[w]} bytes for AdamW training in {w} + {kv:.0f} GiB rollout cache); "
            f"{hardware.device_name} has {have:.0f} GiB",
            hint="use a larger GPU, or lower settings.train.prompts_per_step")
    return {"parameters": int(params), "need_gib": need, "have_gib": round(hardware.memory_gib or 0, 1),
            "weights": chosen}


def _versions() -> dict[str, str]:
    import datasets
    import torch
    import transformers
    import trl

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__, "datasets": datasets.__version__}


def trl_processor(model_dir: Path, *, min_pixels: int, max_pixels: int):
    """The checkpoint's processor as GRPOTrainer needs it.

    TRL left-pads the prompt ids it generated from, and takes the per-token
    image mask (mm_token_type_ids) from a fresh padded processor call: both must
    pad on the left, as TRL's own processor loading sets, or a batch of prompts
    of different lengths misplaces its image tokens in the multimodal RoPE
    positions (silently, or with a shape error when the shift is large).
    """
    from trace_tui.stages.tiny_model import load_processor

    processor = load_processor(model_dir, min_pixels=min_pixels, max_pixels=max_pixels)
    processor.tokenizer.padding_side = "left"
    processor.tokenizer.truncation_side = "left"
    return processor


def _trace_reward():
    try:
        from trace_tui.scoring import trace_reward
    except ImportError as exc:  # pragma: no cover - the scoring library ships with the package
        from trace_tui.errors import RequirementsError

        raise RequirementsError(f"trace_tui.scoring.trace_reward unavailable ({exc})",
                                hint="install the trace-tui package completely") from None
    return trace_reward


def make_reward_func(answer_key: str, sink: list[float]):
    """TRL reward function over the TRACE training reward (CONTRACTS.md section 3); every value goes to ``sink``."""
    trace_reward = _trace_reward()

    def trace_training_reward(prompts, completions, **kwargs) -> list[float]:
        out = []
        for completion, gt in zip(completions, kwargs[answer_key], strict=True):
            if isinstance(completion, list):  # conversational: the assistant message
                content = completion[-1]["content"]
                text = content if isinstance(content, str) else "".join(
                    p.get("text") or "" for p in content if isinstance(p, dict))
            else:
                text = completion
            answer_gt = json.loads(gt) if isinstance(gt, str) else gt
            out.append(float(trace_reward(text, answer_gt)))
        sink.extend(out)
        return out

    return trace_training_reward


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


class _Run:
    def __init__(self, job: TrainJob, campaign: Path, store: Path) -> None:
        self.job = job
        self.campaign = campaign
        self.store = store
        rel = job.output_dir or job.output or job.step
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            from trace_tui.errors import UsageError

            raise UsageError(f"job field 'output_dir' {rel!r} must be relative to the campaign, without '..'")
        self.out = campaign / rel
        self.receipt_path = self.out / "run_receipt.json"
        self.started = time.time()
        self.receipt: dict[str, Any] = {
            "schema": RECEIPT_SCHEMA,
            "status": "launching",
            "exit_code": None,
            "mode": "smoke",
            "step": job.step,
            "recipe": job.recipe,
            "slice": job.slice.model_dump() if job.slice else None,
            "circumstance": {"started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                             "host": socket.gethostname()},
        }

    def _progress(self, phase: str, done: int, total: int) -> None:
        s = self.job.slice or SliceSpec()
        protocol.progress(phase=phase, done=done, total=total, model=s.model, seed=s.seed, benchmark=s.benchmark)

    def write_receipt(self) -> None:
        atomic_write_json(self.receipt_path, self.receipt)

    def finish(self, status: str, exit_code: int, message: str = "") -> None:
        ended = time.time()
        self.receipt["status"] = status
        self.receipt["exit_code"] = exit_code
        if message:
            self.receipt["message"] = message
        self.receipt["circumstance"].update({
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "wall_time_s": round(ended - self.started, 3)})
        self.receipt["wall_time_s"] = round(ended - self.started, 3)
        self.write_receipt()
        protocol.artifact(self.receipt_path, self.campaign)

    def run(self) -> None:
        job, store = self.job, self.store
        from trace_tui.errors import UsageError
        from trace_tui.stages.train_profile import (
            demo_profile,
            load_profile,
            resolve_training,
        )

        self.out.mkdir(parents=True, exist_ok=True)
        self.write_receipt()  # status: launching
        found = resolve_inputs(job, store, self.campaign)
        model_dir, prompt_path, train_files = found.model_dir, found.prompt_path, found.train_files

        # Hash every input file first: the receipt names exactly what was trained on.
        total = 3 + len(train_files)
        self._progress("hash-inputs", 0, total)
        model_files = dir_sha256s(model_dir)
        self._progress("hash-inputs", 1, total)
        prompt_bytes = prompt_path.read_bytes()
        prompt_sha = sha256_bytes(prompt_bytes)
        if found.profile_path is not None:
            profile_sha = sha256_file(found.profile_path)
            profile = load_profile(found.profile_path)
        else:
            from trace_tui.release import release_lock

            profile = demo_profile(release_lock().trace_validation.system_prompt_sha256)
            profile_sha = sha256_json(profile)
        self._progress("hash-inputs", 2, total)
        file_records = []
        for i, f in enumerate(train_files):
            file_records.append({"path": found.train_labels[i], "sha256": sha256_file(f)})
            self._progress("hash-inputs", 3 + i, total)
        self._progress("hash-inputs", total, total)

        want_prompt_sha = (((profile.get("release") or {}).get("prompt") or {}).get("sha256"))
        if want_prompt_sha and want_prompt_sha != prompt_sha:
            raise UsageError(f"{prompt_path}: sha256 {prompt_sha} differs from the profile's release.prompt.sha256 "
                             f"{want_prompt_sha}", hint="use the release's system prompt file unchanged")
        hardware = _hardware(job.settings)
        overrides = job.settings.overrides(demo=found.profile_path is None)
        resolved = resolve_training(profile, hardware, overrides, smoke_steps=SMOKE_STEPS)
        memory = plan_gpu_memory(model_dir, hardware, resolved, job.settings.weights)
        self.weights_dtype = memory["weights"] if memory else "fp32"
        if self.weights_dtype != "fp32":
            resolved.device_adaptations["weights"] = {
                "profile": "fp32 master weights (FSDP mixed precision, bf16 compute)", "run": "bf16 weights",
                "reason": f"fp32 training needs ~{memory['need_gib']['fp32']} GiB; this GPU has "
                          f"{memory['have_gib']} GiB"}
        self.receipt["inputs"] = {
            "model": {"path": found.model_label, "model_id": job.inputs.model_id,
                      "revision": job.inputs.model_revision, "sha256set": sha256set(model_files),
                      "files": model_files},
            "profile": {"path": found.profile_label, "sha256": profile_sha, "config_id": resolved.config_id,
                        "builtin": found.profile_path is None},
            "system_prompt": {"path": found.prompt_label, "sha256": prompt_sha},
            "train_files": file_records,
        }
        resolved_doc = {"profile_config_id": resolved.config_id, "trl": resolved.trl, "stage": resolved.stage,
                        "scaling": resolved.scaling.model_dump(), "overrides": resolved.overrides,
                        "device_adaptations": resolved.device_adaptations,
                        "inputs": {"model": sha256set(model_files), "profile": profile_sha, "system_prompt": prompt_sha,
                                   "train_files": [r["sha256"] for r in file_records]}}
        resolved_path = self.out / "resolved_config.json"
        atomic_write_json(resolved_path, resolved_doc)
        self.receipt.update({
            "resolved_config": resolved_doc,
            "resolved_config_sha256": sha256_json(resolved_doc),
            "profile_mapping": {"mapped": resolved.mapped, "unmappable": resolved.unmappable},
            "scaling": resolved.scaling.model_dump(),
            "overrides": resolved.overrides,
            "device_adaptations": resolved.device_adaptations,
            "hardware": {**hardware.model_dump(), "cpu_count": os.cpu_count(), "memory_estimate": memory,
                         "cpu_threads": job.settings.cpu_threads if hardware.device == "cpu" else None},
            "versions": _versions(),
        })
        self.write_receipt()
        protocol.artifact(resolved_path, self.campaign)
        self._train(model_dir, train_files, prompt_bytes.decode("utf-8"), resolved, hardware)

    def _train(self, model_dir: Path, train_files: list[Path], system_prompt: str, resolved: ResolvedTraining,
               hardware: Hardware) -> None:
        import datasets
        import torch
        from transformers import Qwen2_5_VLForConditionalGeneration, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        from trace_tui.errors import UsageError

        st = resolved.stage
        if hardware.device == "cpu" and self.job.settings.cpu_threads:
            # Small CPU models run fastest (and reproducibly) on one thread; more
            # threads only fight over shared cores.
            torch.set_num_threads(self.job.settings.cpu_threads)
        columns = [st["prompt_key"], st["image_key"], st["answer_key"], "instance_id"]
        total = parquet_rows(train_files, columns)
        indices = pick_rows(total, st["prompts_per_step"], shuffle=st["shuffle"], seed=st["data_seed"])
        rows = read_rows(train_files, indices, columns)

        processor = trl_processor(model_dir, min_pixels=st["min_pixels"], max_pixels=st["max_pixels"])
        import io

        from PIL import Image

        examples, used, prompt_tokens = [], [], []
        for gi, row in zip(indices, rows, strict=True):
            images = [Image.open(io.BytesIO(im["bytes"])) if isinstance(im, dict) else im
                      for im in (row[st["image_key"]] or [])]
            try:
                parts = split_prompt(row[st["prompt_key"]], len(images))
            except ValueError as exc:
                raise UsageError(f"{row['_file']}: row {row['_row']}: {exc}",
                                 hint="prompt_answer must carry one '<image>' per image") from None
            messages = [{"role": "system", "content": [{"type": "text", "text": system_prompt}]},
                        {"role": "user", "content": parts}]
            text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            n_tok = int(processor(text=[text], images=images or None, return_tensors="pt")["input_ids"].shape[1])
            prompt_tokens.append(n_tok)
            answer = row[st["answer_key"]]
            examples.append({"prompt": messages, "images": images,
                             st["answer_key"]: answer if isinstance(answer, str) else json.dumps(answer)})
            used.append({"file": row["_file"], "row": row["_row"], "index": gi, "instance_id": row["instance_id"],
                         "prompt_tokens": n_tok})
        features = datasets.Features({
            "prompt": [{"role": datasets.Value("string"),
                        "content": [{"type": datasets.Value("string"), "text": datasets.Value("string")}]}],
            "images": datasets.Sequence(datasets.Image()),
            st["answer_key"]: datasets.Value("string"),
        })
        train_ds = datasets.Dataset.from_list(examples, features=features)
        overlong = sum(1 for n in prompt_tokens if n > st["max_prompt_length"])
        self.receipt["data"] = {"rows_total": total, "rows_used": used, "prompt_tokens_max": max(prompt_tokens),
                                "max_prompt_length": st["max_prompt_length"], "overlong_prompts": overlong}
        if overlong:
            protocol.log(f"{overlong} prompt(s) longer than max_prompt_length {st['max_prompt_length']} "
                         f"(kept whole, as filter_overlong_prompts is false)", level="warning")
        self.write_receipt()

        protocol.log(f"loading {model_dir.name} on {hardware.device}")
        dtype = torch.bfloat16 if getattr(self, "weights_dtype", "fp32") == "bf16" else torch.float32
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(model_dir), dtype=dtype,
                                                                   local_files_only=True)
        for p in model.parameters():  # freeze_vision_tower: false -> every weight trains
            p.requires_grad_(True)

        rewards: list[float] = []
        step_logs: list[dict[str, float]] = []
        run = self

        class _Events(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs:
                    step_logs.append(dict(logs))

            def on_step_end(self, args, state, control, **kwargs):
                run._progress("train", state.global_step, SMOKE_STEPS)

        trainer_dir = self.out
        import dataclasses

        trl_kwargs, adapted = fit_to_trl(resolved.trl, {f.name for f in dataclasses.fields(GRPOConfig)})
        self.receipt["trl_version_adaptations"] = adapted
        args = GRPOConfig(output_dir=str(trainer_dir), use_cpu=hardware.device == "cpu", disable_tqdm=True,
                          dataloader_num_workers=0, remove_unused_columns=False, **trl_kwargs)
        trainer = GRPOTrainer(model=model, reward_funcs=[make_reward_func(st["answer_key"], rewards)], args=args,
                              train_dataset=train_ds, processing_class=processor, callbacks=[_Events()])
        # stdout is the event channel: the trainer's own printers (a dict per log, progress bars) stay off it;
        # the same metrics reach the receipt and the log lines through _Events.
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        self._progress("train", 0, SMOKE_STEPS)
        t0 = time.time()
        if hardware.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
        step_time = time.time() - t0
        ckpt = trainer_dir / f"checkpoint-{SMOKE_STEPS}"
        if not ckpt.is_dir():
            raise RuntimeError(f"TRL saved no checkpoint at {ckpt}")
        step_log = next((entry for entry in step_logs if "grad_norm" in entry), {})
        if not rewards:
            raise RuntimeError("the step computed no rewards")
        mean, std = reward_stats(rewards)
        if std == 0:
            protocol.log(f"every rollout got the same reward ({mean}): the advantages are zero and the step leaves "
                         f"the weights as they were (expected for a random model, whose replies never end in a "
                         f"JSON answer)", level="warning")
        ckpt_set, ckpt_files = checkpoint_sha256set(ckpt)
        self.receipt.update({
            "reward_mean": mean,
            "reward_std": std,
            "grad_norm": float(step_log.get("grad_norm", float("nan"))),
            "rewards": rewards,
            "trl_metrics": {k: v for k, v in step_log.items() if isinstance(v, (int, float))},
            "checkpoint": {"path": ckpt.relative_to(self.campaign).as_posix(), "step": SMOKE_STEPS,
                           "sha256set": ckpt_set, "files": ckpt_files},
        })
        self.receipt["circumstance"]["train_time_s"] = round(step_time, 3)
        if hardware.device == "cuda":
            self.receipt["circumstance"]["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        for name in ckpt_files:
            protocol.artifact(ckpt / name, self.campaign)
        protocol.log(f"step 1: reward mean {mean:.4f} std {std:.4f}, grad norm {self.receipt['grad_norm']:.4g}; "
                     f"checkpoint {ckpt_set}")


# GRPOConfig fields of newer TRL releases that an older TRL may lack, and why
# leaving them out changes nothing in this configuration.
INERT_WHEN_ABSENT = {
    "sapo_temperature_pos": "used by the SAPO loss only; the profile's loss is the clipped PPO loss",
    "sapo_temperature_neg": "used by the SAPO loss only; the profile's loss is the clipped PPO loss",
    # Only false is inert: the stage loads the model itself and never runs remote code.
    "trust_remote_code": "the stage loads the model itself, without remote code (false in the profile)",
}


def fit_to_trl(trl_kwargs: dict[str, Any], fields: set[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The GRPOConfig arguments this TRL accepts, and what had to be adapted (recorded in the receipt).

    An absent setting is dropped only when it is inert here; an absent setting
    that matters is a requirements failure, never a silent drop.
    """
    from trace_tui.errors import RequirementsError

    kwargs, adapted = dict(trl_kwargs), {}
    for key in sorted(set(kwargs) - fields):
        if key not in INERT_WHEN_ABSENT or (key == "trust_remote_code" and kwargs[key]):
            raise RequirementsError(f"this TRL has no GRPOConfig setting '{key}', which the release profile needs",
                                    hint="use the train image's pinned TRL")
        kwargs.pop(key)
        adapted[key] = f"absent in this TRL; {INERT_WHEN_ABSENT[key]}"
    warmup = kwargs.get("warmup_steps")
    if isinstance(warmup, float) and 0 < warmup < 1 and "warmup_ratio" in fields:
        # transformers 4.x takes a warmup ratio under its own name.
        kwargs["warmup_steps"], kwargs["warmup_ratio"] = 0, warmup
        adapted["warmup_steps"] = f"passed as warmup_ratio={warmup} (transformers 4.x)"
    if "max_prompt_length" in fields:
        # Older TRL truncates prompts to this length (default 512), which would cut
        # image tokens; the stage keeps prompts whole and counts overlong ones.
        kwargs["max_prompt_length"] = None
        adapted["max_prompt_length"] = "set to None: prompts are kept whole (overlong ones are counted)"
    return kwargs, adapted


def _offline_env() -> str | None:
    """Never reach a hub at run time: every input is a file named in the job spec. Returns a temp HF_HOME to remove."""
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[key] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "HF_HOME" not in os.environ:
        # Caches (datasets, modules) must not land in a read-only home inside a container.
        os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="trace-tui-hf-")
        return os.environ["HF_HOME"]
    return None


def main(argv: list[str] | None = None) -> int:
    hf_home = _offline_env()
    try:
        return _main()
    finally:
        if hf_home:
            import shutil

            shutil.rmtree(hf_home, ignore_errors=True)


def _main() -> int:
    from trace_tui.errors import ExitCode, TraceTuiError, UsageError

    campaign = Path(os.environ.get("TRACE_TUI_CAMPAIGN", "/campaign"))
    store = Path(os.environ.get("TRACE_TUI_STORE", "/store"))
    job_path = os.environ.get("TRACE_TUI_JOB", "/job/job.json")
    try:
        try:
            raw = protocol.load_job(job_path)
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"{job_path}: cannot read the job spec ({exc})", hint="pass a JSON job spec") from None
        try:
            job = TrainJob.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise UsageError(f"{job_path}: field '{field}': {err['msg']} (got {str(err.get('input'))[:80]!r})",
                             hint="see the job spec format in trace_tui/stages/train_smoke.py") from None
        run = _Run(job, campaign, store)
    except TraceTuiError as exc:
        protocol.status("failed", exc.line(), exc.exit_code)
        return exc.exit_code

    try:
        run.run()
    except TraceTuiError as exc:
        run.finish("failed", exc.exit_code, exc.line())
        protocol.status("failed", exc.line(), exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt:
        run.finish("failed", ExitCode.INTERRUPTED, "interrupted")
        protocol.status("failed", "interrupted", ExitCode.INTERRUPTED)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - any failure must end in a failed receipt and status
        for line in traceback.format_exc().rstrip().splitlines():
            protocol.log(line, level="debug")
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        message = f"{type(exc).__name__}: {first}"[:500]
        run.finish("failed", ExitCode.FAILED, message)
        protocol.status("failed", message, ExitCode.FAILED)
        return ExitCode.FAILED
    run.finish("completed", ExitCode.OK)
    protocol.status("completed", f"checkpoint {run.receipt['checkpoint']['sha256set']}", ExitCode.OK)
    return ExitCode.OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

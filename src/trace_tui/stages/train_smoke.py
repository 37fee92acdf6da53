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
import socket
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trace_tui.common.atomic import atomic_write_json
from trace_tui.common.digest import dir_sha256s, sha256_bytes, sha256_file, sha256_json, sha256set
from trace_tui.errors import ExitCode, TraceTuiError, UsageError
from trace_tui.release import release_lock
from trace_tui.stages import protocol
from trace_tui.stages.jobs import WorkerContext, run_step
from trace_tui.stages.train_inputs import (
    checkpoint_sha256set,
    parquet_rows,
    pick_rows,
    read_rows,
    resolve_inputs,
    reward_stats,
    split_prompt,
)
from trace_tui.stages.train_job import SliceSpec, TrainJob
from trace_tui.stages.train_memory import device_hardware, plan_gpu_memory
from trace_tui.stages.train_profile import Hardware, ResolvedTraining, demo_profile, load_profile, resolve_training
from trace_tui.stages.train_trl import fit_to_trl, library_versions, make_reward_func, trl_processor

RECEIPT_SCHEMA = "trace-tui-train-smoke-receipt-v1"
SMOKE_STEPS = 1

class _Run:
    def __init__(self, job: TrainJob, campaign: Path, store: Path) -> None:
        self.job = job
        self.campaign = campaign
        self.store = store
        rel = job.output_dir or job.output or job.step
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
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
        hardware = device_hardware(job.settings)
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
            "versions": library_versions(),
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
        # a stop before the run's own handling (the job loading): one line, no traceback (run_step)
        return run_step(train, load=load_train_job, quiet=False)
    finally:
        if hf_home:
            import shutil

            shutil.rmtree(hf_home, ignore_errors=True)


def load_train_job(job_path: Path) -> TrainJob:
    """The job spec at ``job_path`` as a TrainJob; UsageError naming the field when it is not one."""
    try:
        raw = protocol.load_job(job_path)
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{job_path}: cannot read the job spec ({exc})", hint="pass a JSON job spec") from None
    try:
        return TrainJob.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise UsageError(f"{job_path}: field '{field}': {err['msg']} (got {str(err.get('input'))[:80]!r})",
                         hint="see the job spec format in trace_tui/stages/train_smoke.py") from None


def train(job: TrainJob, context: WorkerContext) -> int:
    try:
        run = _Run(job, context.campaign, context.store)
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

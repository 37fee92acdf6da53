"""The release training profile (EasyR1/verl) mapped onto TRL's GRPOTrainer.

Upstream trained with EasyR1 (`rlvr/configs/trace-qwen2.5-vl-{3b,7b}.yaml`,
section ``easyr1``). ``PROFILE_MAP`` below is the ONE table saying, for every
key of that section, either which TRL setting (or which behaviour of our
train stage) honours it, or why it cannot be honoured. ``resolve_training``
applies the table to a profile and to the hardware of the run and returns the
GRPOConfig keyword arguments, the stage settings, the batch scaling and the
list of unmappable keys with their reasons — everything the run receipt
records. No key is dropped silently: a key the table does not know makes
resolution fail.

Pure functions over plain data (no torch, no TRL import): testable in
milliseconds; the worker (train_smoke.py) does the I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from trace_tui.errors import UsageError

# ---------------------------------------------------------------------------
# The mapping table
# ---------------------------------------------------------------------------

Kind = Literal["trl", "stage", "unmappable"]


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Kind
    # trl: the GRPOConfig field(s) it sets; stage: the stage setting it drives.
    target: str = ""
    # unmappable: why TRL (or this smoke run) cannot honour it.
    reason: str = ""
    # unmappable: "none" when the run behaves as upstream anyway (the key is inert
    # in this configuration or only affects speed/memory), "differs" when the run
    # really differs from upstream because of it.
    effect: Literal["none", "differs"] = "none"


def _trl(target: str) -> Rule:
    return Rule(kind="trl", target=target)


def _stage(target: str) -> Rule:
    return Rule(kind="stage", target=target)


def _no(reason: str, effect: Literal["none", "differs"] = "none") -> Rule:
    return Rule(kind="unmappable", reason=reason, effect=effect)


_NO_VAL = "the smoke run trains one step and runs no validation"
_NO_VIDEO = "TRACE has no videos; the stage processes images only"
_KL_OFF = "KL is disabled (beta=0), so this KL setting is inert"
_FILTER_OFF = "TRL has no online filtering; upstream disabled it (online_filtering: false), so nothing differs"
_FSDP = "verl FSDP sharding/precision detail; the smoke run is one process (accelerate) on one device"
_OFFLOAD = "verl CPU offload is a memory setting; it does not change the computed update"
_VLLM = "vLLM engine setting; TRL generates rollouts with transformers generate in-process"
_REF = "reference-model worker setting; KL is disabled, so TRL loads no reference model"
_LORA_OFF = "LoRA is off upstream (rank 0): full fine-tuning, so this LoRA setting is inert"

PROFILE_MAP: dict[str, Rule] = {
    # --- data -------------------------------------------------------------
    "data.train_files": _stage("train_files: the dataset shards named in the job spec (release.dataset.train_files)"),
    "data.val_files": _no(_NO_VAL),
    "data.prompt_key": _stage("prompt column"),
    "data.answer_key": _stage("reward reference column (passed to trace_reward)"),
    "data.image_key": _stage("image column"),
    "data.video_key": _no(_NO_VIDEO),
    "data.image_dir": _no("images are embedded in the parquet rows; no image directory is read"),
    "data.video_fps": _no(_NO_VIDEO),
    "data.max_prompt_length": _stage(
        "max_prompt_length: every prompt's token count (image tokens included) is measured and overlong prompts are "
        "counted in the receipt; TRL 1.x has no prompt truncation, and cutting a multimodal prompt would cut image "
        "tokens"),
    "data.max_response_length": _trl("max_completion_length"),
    "data.rollout_batch_size": _trl("generation_batch_size (prompts per step x num_generations, scaled)"),
    "data.mini_rollout_batch_size": _no("null upstream: no mini rollout batches, nothing to set"),
    "data.val_batch_size": _no(_NO_VAL),
    "data.format_prompt": _stage("format prompt: null upstream, so the prompt column is used as it is"),
    "data.system_prompt_file": _stage(
        "system prompt: the release prompt file (release.prompt.path), checked against release.prompt.sha256"),
    "data.override_chat_template": _stage("chat template: null upstream, so the checkpoint's own template"),
    "data.shuffle": _trl("shuffle_dataset (and the seeded choice of the step's rows)"),
    "data.seed": _trl("data_seed (and the seeded choice of the step's rows)"),
    "data.min_pixels": _stage("image processor min_pixels"),
    "data.max_pixels": _stage("image processor max_pixels"),
    "data.filter_overlong_prompts": _stage("overlong prompts are not filtered (false upstream); they are counted"),
    "data.filter_overlong_prompts_workers": _no("only used when filtering overlong prompts, which is off"),
    # --- algorithm ----------------------------------------------------------
    "algorithm.gamma": _no("GAE discount; the GRPO advantage does not use it (upstream neither)"),
    "algorithm.lam": _no("GAE lambda; the GRPO advantage does not use it (upstream neither)"),
    "algorithm.adv_estimator": _trl("GRPOTrainer with scale_rewards='group' (group-normalised advantages)"),
    "algorithm.disable_kl": _trl("beta"),
    "algorithm.use_kl_loss": _trl("beta"),
    "algorithm.kl_penalty": _no(_KL_OFF),
    "algorithm.kl_coef": _trl("beta"),
    "algorithm.kl_type": _no(_KL_OFF),
    "algorithm.kl_horizon": _no(_KL_OFF),
    "algorithm.kl_target": _no(_KL_OFF),
    "algorithm.online_filtering": _no(_FILTER_OFF),
    "algorithm.filter_key": _no(_FILTER_OFF),
    "algorithm.filter_low": _no(_FILTER_OFF),
    "algorithm.filter_high": _no(_FILTER_OFF),
    "algorithm.perfect_solve_threshold": _no("EasyR1 solve-rate metric threshold; logging only"),
    "algorithm.zero_solve_threshold": _no("EasyR1 solve-rate metric threshold; logging only"),
    # --- actor --------------------------------------------------------------
    "worker.hybrid_engine": _no("verl colocates actor and rollout engines; TRL generates with the training model "
                                "in-process, which is the same policy"),
    "worker.actor.strategy": _no(_FSDP),
    "worker.actor.global_batch_size": _trl(
        "per_device_train_batch_size x gradient_accumulation_steps x processes (x num_generations, scaled)"),
    "worker.actor.micro_batch_size_per_device_for_update": _trl("per_device_train_batch_size"),
    "worker.actor.micro_batch_size_per_device_for_experience": _no(
        "log-prob micro-batching is a memory setting; TRL computes log-probs in per_device_train_batch_size chunks"),
    "worker.actor.max_grad_norm": _trl("max_grad_norm"),
    "worker.actor.clip_ratio_low": _trl("epsilon"),
    "worker.actor.clip_ratio_high": _trl("epsilon_high"),
    # Dual-clip PPO caps a negative-advantage token's loss at -A*c; TRL's two-sided
    # clipping (delta) clamps the unclipped ratio at delta before the min, which
    # gives the same loss and gradient whenever delta > 1 + epsilon_high.
    "worker.actor.clip_ratio_dual": _trl("delta"),
    "worker.actor.loss_avg_mode": _trl("loss_type ('token' -> 'dapo': mean over all completion tokens of the batch)"),
    "worker.actor.loss_type": _trl("loss_type / importance_sampling_level ('default' -> clipped PPO loss, token level)"),
    "worker.actor.ppo_epochs": _trl("num_iterations"),
    "worker.actor.padding_free": _no("packing is a speed setting; TRL pads, the loss masks padding"),
    "worker.actor.dynamic_batching": _no("token-budget batching is a speed setting; it does not change the update"),
    "worker.actor.ulysses_size": _no("sequence parallelism of 1 means none; nothing to set"),
    "worker.actor.use_torch_compile": _no("compilation is a speed setting; the smoke run stays eager to start fast"),
    "worker.actor.tau_positive": _trl("sapo_temperature_pos (used by the SAPO loss only; inert with loss_type default)"),
    "worker.actor.tau_negative": _trl("sapo_temperature_neg (used by the SAPO loss only; inert with loss_type default)"),
    "worker.actor.model.model_path": _stage("model: the base checkpoint directory named in the job spec"),
    "worker.actor.model.tokenizer_path": _stage("tokenizer: the one in the model directory"),
    "worker.actor.model.enable_gradient_checkpointing": _trl("gradient_checkpointing"),
    "worker.actor.model.trust_remote_code": _trl("trust_remote_code"),
    "worker.actor.model.freeze_vision_tower": _stage("vision tower trainable (every parameter requires grad)"),
    "worker.actor.model.lora.rank": _stage("full fine-tuning: rank 0 means no LoRA adapter"),
    "worker.actor.model.lora.alpha": _no(_LORA_OFF),
    "worker.actor.model.lora.target_modules": _no(_LORA_OFF),
    "worker.actor.model.lora.exclude_modules": _no(_LORA_OFF),
    "worker.actor.optim.lr": _trl("learning_rate"),
    "worker.actor.optim.betas": _trl("adam_beta1, adam_beta2"),
    "worker.actor.optim.weight_decay": _trl("weight_decay"),
    "worker.actor.optim.strategy": _trl("optim ('adamw' -> 'adamw_torch')"),
    "worker.actor.optim.lr_warmup_ratio": _trl("warmup_steps (a value below 1 is a ratio in transformers 5)"),
    "worker.actor.optim.lr_warmup_steps": _trl("warmup_steps (when set, it wins over the ratio)"),
    "worker.actor.optim.min_lr_ratio": _no("null upstream and the schedule is constant; nothing to set"),
    "worker.actor.optim.lr_scheduler_type": _trl("lr_scheduler_type"),
    "worker.actor.fsdp.enable_full_shard": _no(_FSDP),
    "worker.actor.fsdp.enable_cpu_offload": _no(_FSDP),
    "worker.actor.fsdp.enable_rank0_init": _no(_FSDP),
    "worker.actor.fsdp.use_orig_params": _no(_FSDP),
    "worker.actor.fsdp.torch_dtype": _no("null upstream: weights load in their stored dtype and train in fp32 master "
                                         "copies, as here"),
    "worker.actor.fsdp.fsdp_size": _no(_FSDP),
    "worker.actor.fsdp.mp_param_dtype": _trl("bf16 (autocast; on CPU the run computes in fp32, see receipt)"),
    "worker.actor.fsdp.mp_reduce_dtype": _no("gradient reduction dtype across GPUs; one process reduces nothing"),
    "worker.actor.fsdp.mp_buffer_dtype": _no("buffers stay fp32 (as upstream) under autocast"),
    "worker.actor.offload.offload_params": _no(_OFFLOAD),
    "worker.actor.offload.offload_optimizer": _no(_OFFLOAD),
    # --- rollout ------------------------------------------------------------
    "worker.rollout.name": _no("rollouts come from transformers generate (TRL's built-in path), not vLLM: the same "
                               "sampling distribution, different kernels and random streams", effect="differs"),
    "worker.rollout.n": _trl("num_generations"),
    "worker.rollout.temperature": _trl("temperature"),
    "worker.rollout.top_p": _trl("top_p"),
    "worker.rollout.top_k": _trl("top_k (-1 -> 0: disabled)"),
    "worker.rollout.seed": _trl("seed"),
    "worker.rollout.limit_images": _no(_VLLM + " (0: no per-prompt image limit)"),
    "worker.rollout.dtype": _trl("bf16 (rollouts use the training model under autocast)"),
    "worker.rollout.gpu_memory_utilization": _no(_VLLM),
    "worker.rollout.ignore_eos": _stage("generation stops at the end-of-turn token (false upstream, TRL's behaviour)"),
    "worker.rollout.enforce_eager": _no(_VLLM),
    "worker.rollout.enable_chunked_prefill": _no(_VLLM),
    "worker.rollout.tensor_parallel_size": _no(_VLLM),
    "worker.rollout.max_model_len": _no(_VLLM),
    "worker.rollout.max_num_batched_tokens": _no(_VLLM),
    "worker.rollout.disable_log_stats": _no(_VLLM),
    "worker.rollout.disable_tqdm": _no(_VLLM),
    "worker.rollout.val_override_config.temperature": _no(_NO_VAL),
    "worker.rollout.val_override_config.top_p": _no(_NO_VAL),
    "worker.rollout.val_override_config.n": _no(_NO_VAL),
    # --- reference model ----------------------------------------------------
    "worker.ref.strategy": _no(_REF),
    "worker.ref.fsdp.enable_full_shard": _no(_REF),
    "worker.ref.fsdp.enable_cpu_offload": _no(_REF),
    "worker.ref.fsdp.enable_rank0_init": _no(_REF),
    "worker.ref.fsdp.use_orig_params": _no(_REF),
    "worker.ref.fsdp.torch_dtype": _no(_REF),
    "worker.ref.fsdp.fsdp_size": _no(_REF),
    "worker.ref.fsdp.mp_param_dtype": _no(_REF),
    "worker.ref.fsdp.mp_reduce_dtype": _no(_REF),
    "worker.ref.fsdp.mp_buffer_dtype": _no(_REF),
    "worker.ref.offload.offload_params": _no(_REF),
    "worker.ref.offload.offload_optimizer": _no(_REF),
    # --- reward -------------------------------------------------------------
    "worker.reward.reward_function": _stage("reward: trace_tui.scoring.trace_reward (CONTRACTS.md section 3)"),
    "worker.reward.reward_function_kwargs": _stage("reward keyword arguments: none (empty upstream)"),
    "worker.reward.skip_special_tokens": _stage("completions decoded with skip_special_tokens=True (TRL does so)"),
    "worker.reward.num_cpus": _no("Ray CPU reservation for the reward worker; the reward runs in-process"),
    # --- trainer ------------------------------------------------------------
    "trainer.total_epochs": _no("the smoke run stops after max_steps=1", effect="differs"),
    "trainer.max_steps": _trl("max_steps (1 in a smoke run; the profile value is recorded)"),
    "trainer.project_name": _no("experiment-tracker project name; the run logs to the campaign"),
    "trainer.experiment_name": _trl("run_name"),
    "trainer.logger": _trl("report_to=[] (console): metrics go to the stage's log lines and the receipt"),
    "trainer.nnodes": _stage("reference device count for batch scaling (nnodes x n_gpus_per_node)"),
    "trainer.n_gpus_per_node": _stage("reference device count for batch scaling (nnodes x n_gpus_per_node)"),
    "trainer.max_try_make_batch": _no(_FILTER_OFF),
    "trainer.critic_warmup": _no("GRPO has no critic"),
    "trainer.val_freq": _no(_NO_VAL),
    "trainer.val_before_train": _no(_NO_VAL),
    "trainer.val_only": _no(_NO_VAL),
    "trainer.val_generations_to_log": _no(_NO_VAL),
    "trainer.save_freq": _trl("save_steps (1 in a smoke run: the checkpoint at step 1)"),
    "trainer.save_limit": _trl("save_total_limit"),
    "trainer.save_model_only": _trl("save_only_model"),
    "trainer.save_checkpoint_path": _stage("checkpoint directory: the step's folder in the campaign"),
    "trainer.load_checkpoint_path": _stage("no checkpoint to resume: null upstream, a fresh run"),
    "trainer.ray_timeline": _no("Ray profiling output; no Ray here"),
    "trainer.find_last_checkpoint": _stage("no checkpoint to resume: false upstream, a fresh run"),
}


# ---------------------------------------------------------------------------
# The demo's own profile
# ---------------------------------------------------------------------------

# The demo runs offline on a machine that may hold no release files, so it
# cannot read the release profile from the store. It trains with this built-in
# profile instead: the settings resolve_training reads, each with the value of
# the release 3B profile (a test checks every one against the release file),
# under the demo's own experiment name. Its receipt says which profile it used.
DEMO_PROFILE_SETTINGS: dict[str, Any] = {
    "data.prompt_key": "prompt_answer",
    "data.answer_key": "answer_gt",
    "data.image_key": "images",
    "data.max_prompt_length": 2048,
    "data.max_response_length": 2048,
    "data.rollout_batch_size": 128,
    "data.shuffle": True,
    "data.seed": 1,
    "data.min_pixels": 262144,
    "data.max_pixels": 4194304,
    "algorithm.adv_estimator": "grpo",
    "algorithm.disable_kl": True,
    "algorithm.use_kl_loss": False,
    "algorithm.kl_coef": 0.0,
    "worker.actor.global_batch_size": 128,
    "worker.actor.micro_batch_size_per_device_for_update": 1,
    "worker.actor.max_grad_norm": 1.0,
    "worker.actor.clip_ratio_low": 0.2,
    "worker.actor.clip_ratio_high": 0.3,
    "worker.actor.clip_ratio_dual": 3.0,
    "worker.actor.loss_avg_mode": "token",
    "worker.actor.loss_type": "default",
    "worker.actor.ppo_epochs": 1,
    "worker.actor.tau_positive": 1.0,
    "worker.actor.tau_negative": 1.05,
    "worker.actor.model.enable_gradient_checkpointing": True,
    "worker.actor.model.trust_remote_code": False,
    "worker.actor.model.freeze_vision_tower": False,
    "worker.actor.model.lora.rank": 0,
    "worker.actor.optim.lr": 1.0e-6,
    "worker.actor.optim.betas": [0.9, 0.999],
    "worker.actor.optim.weight_decay": 0.01,
    "worker.actor.optim.strategy": "adamw",
    "worker.actor.optim.lr_warmup_ratio": 0.0,
    "worker.actor.optim.lr_warmup_steps": None,
    "worker.actor.optim.lr_scheduler_type": "constant",
    "worker.actor.fsdp.mp_param_dtype": "bf16",
    "worker.rollout.n": 8,
    "worker.rollout.temperature": 1.0,
    "worker.rollout.top_p": 1.0,
    "worker.rollout.top_k": -1,
    "worker.rollout.seed": 1,
    "trainer.max_steps": 500,
    "trainer.experiment_name": "trace-tui-demo",
    "trainer.nnodes": 1,
    "trainer.n_gpus_per_node": 8,
    "trainer.save_freq": 100,
    "trainer.save_limit": 1,
    "trainer.save_model_only": False,
}


def demo_profile(prompt_sha256: str | None = None) -> dict[str, Any]:
    """The built-in demo profile, nested like a release profile (``easyr1`` section)."""
    easyr1: dict[str, Any] = {}
    for dotted, value in DEMO_PROFILE_SETTINGS.items():
        node = easyr1
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    release = {"prompt": {"sha256": prompt_sha256}} if prompt_sha256 else {}
    return {"schema_version": "trace-tui-demo-training-profile-v1", "config_id": "trace-tui-demo",
            "release": release, "easyr1": easyr1}


# ---------------------------------------------------------------------------
# Profile loading and flattening
# ---------------------------------------------------------------------------


def load_profile(path: str | Path) -> dict[str, Any]:
    """The profile YAML as a dict; a bad file is one clear UsageError line."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: training profile not found",
                         hint="name the release's rlvr/configs/trace-qwen2.5-vl-{3b,7b}.yaml") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise UsageError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})",
                         hint="use the release's training profile unchanged") from None
    if not isinstance(data, dict) or not isinstance(data.get("easyr1"), dict):
        raise UsageError(f"{path}: field 'easyr1' missing or not a mapping",
                         hint="use the release's training profile (schema trace-rlvr-training-config-v1)")
    return data


def flatten(section: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Leaf keys as dotted paths; an empty mapping is a leaf (its value is {})."""
    out: dict[str, Any] = {}
    for key, value in section.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def unknown_keys(profile: dict[str, Any]) -> list[str]:
    return sorted(set(flatten(profile["easyr1"])) - set(PROFILE_MAP))


# ---------------------------------------------------------------------------
# Resolution: profile + hardware + overrides -> TRL settings and receipt record
# ---------------------------------------------------------------------------


class Hardware(BaseModel):
    """What the run trains on (one process)."""

    device: Literal["cpu", "cuda"]
    devices: int = 1  # processes x devices used by this run
    device_name: str = ""
    memory_gib: float | None = None


class Overrides(BaseModel):
    """Settings a job spec may change for a small run; each one is recorded beside the profile value."""

    model_config = ConfigDict(extra="forbid")

    prompts_per_step: int | None = None  # replaces the scaled rollout batch (prompts per step)
    num_generations: int | None = None
    max_response_length: int | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    per_device_train_batch_size: int | None = None
    learning_rate: float | None = None


class Scaling(BaseModel):
    reference_devices: int
    run_devices: int
    device: str
    factor: float  # run prompts per step / profile prompts per step
    rule: str
    rollout_batch_size: dict[str, int]  # {"profile": .., "run": ..} prompts per step
    global_batch_size: dict[str, int]
    completions_per_step: dict[str, int]
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    steps_per_generation: int


class ResolvedTraining(BaseModel):
    config_id: str
    trl: dict[str, Any]  # GRPOConfig keyword arguments (output_dir and the like excluded)
    stage: dict[str, Any]  # settings our stage applies itself
    mapped: dict[str, dict[str, Any]]  # profile key -> {value, kind, target}
    unmappable: dict[str, dict[str, Any]]  # profile key -> {value, reason, effect}
    overrides: dict[str, dict[str, Any]]  # setting -> {profile, run}
    device_adaptations: dict[str, dict[str, Any]]  # setting -> {profile, run, reason}
    scaling: Scaling


# Prompts per step on a CPU when the job spec names none: enough for one
# group-normalised step, small enough for minutes on a laptop.
CPU_PROMPTS_PER_STEP = 2


def _get(flat: dict[str, Any], key: str) -> Any:
    if key not in flat:
        raise UsageError(f"training profile: field 'easyr1.{key}' missing",
                         hint="use the release's training profile unchanged")
    return flat[key]


def resolve_training(profile: dict[str, Any], hardware: Hardware, overrides: Overrides | None = None,
                     *, smoke_steps: int = 1) -> ResolvedTraining:
    overrides = overrides or Overrides()
    flat = flatten(profile["easyr1"])
    unknown = sorted(set(flat) - set(PROFILE_MAP))
    if unknown:
        # Never drop a key silently: a profile with keys we have not judged is refused.
        raise UsageError(f"training profile: key(s) {', '.join('easyr1.' + k for k in unknown)} not in the "
                         f"TRL mapping table", hint="add them to PROFILE_MAP in trace_tui/stages/train_profile.py")
    g = lambda key: _get(flat, key)

    if g("algorithm.adv_estimator") != "grpo":
        raise UsageError(f"training profile: easyr1.algorithm.adv_estimator={g('algorithm.adv_estimator')!r}",
                         hint="only 'grpo' maps onto TRL's GRPOTrainer")
    if g("worker.actor.loss_type") != "default" or g("worker.actor.loss_avg_mode") != "token":
        raise UsageError("training profile: easyr1.worker.actor.loss_type/loss_avg_mode "
                         f"= {g('worker.actor.loss_type')!r}/{g('worker.actor.loss_avg_mode')!r}",
                         hint="the TRL mapping covers loss_type 'default' with loss_avg_mode 'token'")
    if int(g("worker.actor.model.lora.rank")) != 0:
        raise UsageError("training profile: easyr1.worker.actor.model.lora.rank is not 0",
                         hint="the smoke stage does full fine-tuning only")
    if g("worker.actor.optim.strategy") != "adamw":
        raise UsageError(f"training profile: easyr1.worker.actor.optim.strategy={g('worker.actor.optim.strategy')!r}",
                         hint="the TRL mapping covers 'adamw'")

    kl_off = bool(g("algorithm.disable_kl")) and not bool(g("algorithm.use_kl_loss"))
    beta = 0.0 if kl_off else float(g("algorithm.kl_coef"))

    # Batch sizes. Upstream: rollout_batch_size prompts per step, n rollouts each,
    # global_batch_size prompts per optimizer update, on nnodes x n_gpus_per_node
    # devices. Per-device load is kept: prompts per step scale with the device
    # count (a CPU run takes CPU_PROMPTS_PER_STEP), and one rollout batch still
    # gives rollout_batch_size / global_batch_size updates.
    ref_devices = int(g("trainer.nnodes")) * int(g("trainer.n_gpus_per_node"))
    rollout_prompts = int(g("data.rollout_batch_size"))
    global_prompts = int(g("worker.actor.global_batch_size"))
    if rollout_prompts % global_prompts:
        raise UsageError(f"training profile: rollout_batch_size {rollout_prompts} is not a multiple of "
                         f"global_batch_size {global_prompts}", hint="use the release's training profile unchanged")
    updates_per_rollout = rollout_prompts // global_prompts
    if overrides.prompts_per_step is not None:
        run_prompts = overrides.prompts_per_step
        rule = "prompts per step set by the job spec"
    elif hardware.device == "cpu":
        run_prompts = CPU_PROMPTS_PER_STEP
        rule = f"CPU run: {CPU_PROMPTS_PER_STEP} prompts per step"
    else:
        run_prompts = max(updates_per_rollout, rollout_prompts * hardware.devices // ref_devices)
        rule = f"per-device load kept: rollout_batch_size x {hardware.devices}/{ref_devices} devices"
    if run_prompts < 1 or run_prompts % updates_per_rollout:
        raise UsageError(f"job spec: prompts_per_step={run_prompts} must be a positive multiple of "
                         f"{updates_per_rollout} (rollout_batch_size / global_batch_size)",
                         hint="choose another prompts_per_step")
    n = overrides.num_generations or int(g("worker.rollout.n"))
    if n < 2:
        raise UsageError(f"job spec: num_generations={n}", hint="GRPO needs at least 2 rollouts per prompt")
    run_global_prompts = run_prompts // updates_per_rollout
    micro = overrides.per_device_train_batch_size or int(g("worker.actor.micro_batch_size_per_device_for_update"))
    completions_per_update = run_global_prompts * n
    if completions_per_update % (micro * hardware.devices):
        raise UsageError(f"job spec: per_device_train_batch_size={micro} x {hardware.devices} device(s) does not "
                         f"divide {completions_per_update} completions per update",
                         hint="choose a per_device_train_batch_size that divides it")
    grad_accum = completions_per_update // (micro * hardware.devices)
    scaling = Scaling(
        reference_devices=ref_devices,
        run_devices=hardware.devices,
        device=hardware.device,
        factor=run_prompts / rollout_prompts,
        rule=rule,
        rollout_batch_size={"profile": rollout_prompts, "run": run_prompts},
        global_batch_size={"profile": global_prompts, "run": run_global_prompts},
        completions_per_step={"profile": rollout_prompts * int(g("worker.rollout.n")), "run": run_prompts * n},
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=grad_accum,
        steps_per_generation=grad_accum * updates_per_rollout,
    )

    warmup = g("worker.actor.optim.lr_warmup_steps")
    # transformers 5 reads a warmup_steps below 1 as a ratio; a whole count stays an int.
    warmup = int(warmup) if warmup is not None else float(g("worker.actor.optim.lr_warmup_ratio") or 0.0)
    if warmup == 0:
        warmup = 0
    betas = g("worker.actor.optim.betas")
    top_k = int(g("worker.rollout.top_k"))
    bf16 = hardware.device == "cuda" and g("worker.actor.fsdp.mp_param_dtype") == "bf16"
    max_response = overrides.max_response_length or int(g("data.max_response_length"))
    lr = overrides.learning_rate if overrides.learning_rate is not None else float(g("worker.actor.optim.lr"))
    trl: dict[str, Any] = {
        "learning_rate": lr,
        "adam_beta1": float(betas[0]),
        "adam_beta2": float(betas[1]),
        "weight_decay": float(g("worker.actor.optim.weight_decay")),
        "optim": "adamw_torch",
        "lr_scheduler_type": str(g("worker.actor.optim.lr_scheduler_type")),
        "warmup_steps": warmup,
        "max_grad_norm": float(g("worker.actor.max_grad_norm")),
        "beta": beta,
        "epsilon": float(g("worker.actor.clip_ratio_low")),
        "epsilon_high": float(g("worker.actor.clip_ratio_high")),
        "delta": float(g("worker.actor.clip_ratio_dual")),
        "loss_type": "dapo",
        "importance_sampling_level": "token",
        "scale_rewards": "group",
        "num_iterations": int(g("worker.actor.ppo_epochs")),
        "sapo_temperature_pos": float(g("worker.actor.tau_positive")),
        "sapo_temperature_neg": float(g("worker.actor.tau_negative")),
        "num_generations": n,
        "temperature": float(g("worker.rollout.temperature")),
        "top_p": float(g("worker.rollout.top_p")),
        "top_k": max(top_k, 0),
        "max_completion_length": max_response,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": grad_accum,
        "steps_per_generation": scaling.steps_per_generation,
        "shuffle_dataset": bool(g("data.shuffle")),
        "seed": int(g("worker.rollout.seed")),
        "data_seed": int(g("data.seed")),
        "gradient_checkpointing": bool(g("worker.actor.model.enable_gradient_checkpointing")),
        "trust_remote_code": bool(g("worker.actor.model.trust_remote_code")),
        "bf16": bf16,
        "max_steps": smoke_steps,
        "save_steps": smoke_steps,
        "save_strategy": "steps",
        "save_total_limit": int(g("trainer.save_limit")),
        "save_only_model": bool(g("trainer.save_model_only")),
        "run_name": str(g("trainer.experiment_name")),
        "report_to": [],
        "logging_steps": 1,
    }
    stage = {
        "prompt_key": g("data.prompt_key"),
        "answer_key": g("data.answer_key"),
        "image_key": g("data.image_key"),
        "max_prompt_length": int(g("data.max_prompt_length")),
        "min_pixels": overrides.min_pixels or int(g("data.min_pixels")),
        "max_pixels": overrides.max_pixels or int(g("data.max_pixels")),
        "freeze_vision_tower": bool(g("worker.actor.model.freeze_vision_tower")),
        "prompts_per_step": run_prompts,
        "shuffle": bool(g("data.shuffle")),
        "data_seed": int(g("data.seed")),
    }
    if stage["freeze_vision_tower"]:
        raise UsageError("training profile: freeze_vision_tower is true", hint="the smoke stage trains every weight")

    mapped: dict[str, dict[str, Any]] = {}
    unmappable: dict[str, dict[str, Any]] = {}
    for key, value in sorted(flat.items()):
        rule_ = PROFILE_MAP[key]
        if rule_.kind == "unmappable":
            unmappable[key] = {"value": value, "reason": rule_.reason, "effect": rule_.effect}
        else:
            mapped[key] = {"value": value, "kind": rule_.kind, "target": rule_.target}

    over: dict[str, dict[str, Any]] = {}
    for name, profile_value in (("prompts_per_step", rollout_prompts), ("num_generations", int(g("worker.rollout.n"))),
                                ("max_response_length", int(g("data.max_response_length"))),
                                ("min_pixels", int(g("data.min_pixels"))), ("max_pixels", int(g("data.max_pixels"))),
                                ("per_device_train_batch_size",
                                 int(g("worker.actor.micro_batch_size_per_device_for_update"))),
                                ("learning_rate", float(g("worker.actor.optim.lr")))):
        value = getattr(overrides, name)
        if value is not None and value != profile_value:
            over[name] = {"profile": profile_value, "run": value}
    over["max_steps"] = {"profile": int(g("trainer.max_steps")), "run": smoke_steps}
    over["save_freq"] = {"profile": int(g("trainer.save_freq")), "run": smoke_steps}

    adapt: dict[str, dict[str, Any]] = {}
    if hardware.device == "cpu":
        adapt["precision"] = {"profile": "bf16 mixed precision", "run": "fp32",
                              "reason": "CPU run: bf16 autocast on a CPU is slow and not what a GPU computes"}
    return ResolvedTraining(
        config_id=str(profile.get("config_id", "")), trl=trl, stage=stage, mapped=mapped, unmappable=unmappable,
        overrides=over, device_adaptations=adapt, scaling=scaling)


# ---------------------------------------------------------------------------
# What a smoke run needs (for the smoke-3b / smoke-7b recipes and the worker's own check)
# ---------------------------------------------------------------------------

# The numbers and the estimate of what a smoke run needs live in trace_tui.gpu_needs (hardware reads them too).


def mapping_rows() -> list[tuple[str, str, str]]:
    """(profile key, TRL/stage setting or 'unmappable', note) for documentation and the TUI."""
    rows = []
    for key, rule_ in PROFILE_MAP.items():
        rows.append((f"easyr1.{key}", rule_.target if rule_.kind != "unmappable" else "unmappable",
                     rule_.reason if rule_.kind == "unmappable" else rule_.kind))
    return rows

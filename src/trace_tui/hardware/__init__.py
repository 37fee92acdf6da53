"""Hardware check: GPUs (NVML), Docker (engine, GPU runtime, stage images), disk — and per-step verdicts.

The probes are the only I/O here, each behind a small seam that tests replace
at the narrowest edge: ``probe_gpus(nvml=...)`` takes the pynvml module (or a
fake exposing the same functions and the real exception classes),
``probe_docker(client_factory=...)`` takes a callable returning a docker-py
client. Everything after the probes — :func:`check_recipe` and the
requirements it applies — is a pure function of a :class:`HardwareReport`.

A machine without a driver, with a driver/library mismatch, with zero GPUs,
without Docker or without built images is a *status* with a plain explanation
and the command that fixes it, never an exception.

GPU requirements per model size (REQUIREMENTS below) and why
------------------------------------------------------------
All model work is bf16 (the release serves and trains in bf16), so every GPU
step needs compute capability >= 8.0 (Ampere or newer: bf16 tensor cores, and
FlashAttention 2). Memory is stated per GPU for one *model endpoint* (one
vLLM server or one trainer); ``tp`` GPUs form one endpoint (tensor parallel
for inference, sharded states for training). Sizes are nominal card classes
(24, 40, 48, 80 GiB); a GPU meets a class when its total memory is within 3%
of it, because drivers report slightly less than the marketed decimal GB
(an RTX 4090 shows 23.99 GiB, an H100 80GB 79.65 GiB).

Inference, profile ``generate`` (vLLM, one endpoint per GPU group). The
longest request of trace_eval_v1 is an image at the suite's 12,845,056-pixel
bound (16,384 vision tokens after the 2x2 patch merge) plus max_tokens 4,096
of output: about 20,600 tokens of KV cache.
- 3B (Qwen2.5-VL-3B: 3.75e9 parameters, bf16 weights 7.0 GiB; KV cache
  36 KiB/token = 36 layers x 2 KV heads x 128 dims x 2 (K,V) x 2 bytes, so
  0.72 GiB per full-length request): weights + vision-encoder profiling
  (~4 GiB) + 8 concurrent full-length requests (5.8 GiB) + CUDA context and
  graphs (~2 GiB) ≈ 19 GiB → 1 GPU with >= 24 GiB (tp 1).
- 7B (Qwen2.5-VL-7B: 8.29e9 parameters, bf16 weights 15.5 GiB; KV cache
  56 KiB/token = 28 layers x 4 KV heads x 128 x 2 x 2 bytes, 1.1 GiB per
  full-length request): 15.5 + ~5 + 8 x 1.1 + ~2 ≈ 31 GiB → 1 GPU with
  >= 40 GiB (tp 1); otherwise tp 2 on two >= 24 GiB GPUs (weights split
  7.8 GiB each; 4 KV heads divide by 2).
Scoring, profile ``judge`` (Qwen3-32B, temperature 0, short outputs <= 512
tokens): bf16 weights 61 GiB, KV 256 KiB/token (64 layers x 8 KV heads x 128
x 2 x 2 bytes) → 1 GPU with >= 80 GiB (tp 1, ~11 GiB left for KV at vLLM's 0.90
memory utilisation, ~44k tokens), or tp 2 on >= 40 GiB, or tp 4 on >= 24 GiB. The run plan
(trace_tui.gpu_plan.judge_groups) derives the judge's tp from the same need on each GPU's reported
memory, among the sizes that divide its 64 attention and 8 KV heads; a test keeps the two equal.
Training, profile ``train`` (one GRPO step, TRL, in one process on one GPU —
the smoke worker does not shard): the worker's own estimate
(``trace_tui.gpu_needs.smoke_requirement``): bf16 weights, gradients
and AdamW moments at 8 bytes per parameter, the rollout KV cache for 16 prompts
x 8 rollouts x 4,096 tokens, and activations → 3B: 1 GPU with >= 55 GiB;
7B: 1 GPU with >= 98 GiB (an H200 or B200; an 80 GiB H100 cannot hold it
without sharding, which upstream did with FSDP over 8 GPUs). With room for
fp32 master weights (3B: ~83 GiB) the worker keeps them, as upstream did.
"""


from __future__ import annotations

# The check's parts: requirements (what a step needs), report (what was found), probes (the I/O), verdicts.
from trace_tui.hardware.probes import (
    gpu_runtime_of,
    hardware_report,
    image_lock_path,
    probe_disk,
    probe_docker,
    probe_gpus,
    read_image_lock,
)
from trace_tui.hardware.report import (
    GIB,
    MEMORY_SLACK,
    DiskStatus,
    DockerStatus,
    GpuInfo,
    GpuStatus,
    HardwareReport,
    ImageStatus,
)
from trace_tui.hardware.requirements import (
    REQUIREMENTS,
    EndpointOption,
    describe_requirement,
    estimate_generate_gib,
    kv_bytes_per_token,
    meets,
    required_tp,
)
from trace_tui.hardware.verdicts import (
    StepCheck,
    check_recipe,
    check_step,
    step_scales,
    worst,
)

__all__ = [
    "GIB",
    "DiskStatus",
    "DockerStatus",
    "EndpointOption",
    "GpuInfo",
    "GpuStatus",
    "HardwareReport",
    "ImageStatus",
    "MEMORY_SLACK",
    "REQUIREMENTS",
    "StepCheck",
    "check_recipe",
    "check_step",
    "describe_requirement",
    "estimate_generate_gib",
    "gpu_runtime_of",
    "hardware_report",
    "image_lock_path",
    "kv_bytes_per_token",
    "meets",
    "probe_disk",
    "probe_docker",
    "probe_gpus",
    "read_image_lock",
    "required_tp",
    "step_scales",
    "worst",
]

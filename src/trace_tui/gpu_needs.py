"""What one GRPO smoke step needs of a GPU, by base model scale (stdlib only).

Shared by the hardware verdicts (``trace_tui.hardware``) and the training
worker's own check (``trace_tui.stages.train_profile`` / ``train_smoke``), so
the number a preflight promises is the number the worker enforces.
"""

from __future__ import annotations

from typing import Any

from trace_tui.errors import UsageError

# Base model sizes (from their config.json at the pinned revisions): parameter
# count, and the text decoder's layers x key/value heads x head dim for the
# rollout KV cache.
BASE_MODELS = {
    "3B": {"params": 3.76e9, "layers": 36, "kv_heads": 2, "head_dim": 128},
    "7B": {"params": 8.30e9, "layers": 28, "kv_heads": 4, "head_dim": 128},
}
# Full fine-tuning with AdamW keeps fp32 weights, fp32 gradients and two fp32
# moments: 16 bytes per parameter.
BYTES_PER_PARAM_TRAINING = 16
# Activations of one checkpointed micro-batch of 4,096 tokens and its logits over
# the 151k vocabulary (log-softmax copies included).
ACTIVATION_GIB = 8


def smoke_requirement(scale: str, *, prompts_per_step: int = 16, num_generations: int = 8,
                      max_tokens: int = 4096) -> dict[str, Any]:
    """GPU needs of one smoke step (one process on one GPU) for a base model scale ('3B' or '7B').

    Defaults: the release profile scaled to one GPU (128 prompts x 1/8) with its
    8 rollouts per prompt and 2,048 + 2,048 tokens. ``min_gpu_memory_gib`` is
    the least the worker runs on (bf16 weights, 8 bytes per parameter);
    ``fp32_gpu_memory_gib`` what it needs to keep fp32 master weights as
    upstream did (16 bytes per parameter) — the worker takes fp32 when it fits.
    """
    if scale not in BASE_MODELS:
        raise UsageError(f"model scale {scale!r}", hint=f"one of {', '.join(BASE_MODELS)}")
    m = BASE_MODELS[scale]
    kv_per_token = m["layers"] * m["kv_heads"] * m["head_dim"] * 2 * 2  # k and v, bf16
    kv = kv_per_token * prompts_per_step * num_generations * max_tokens / 2**30
    need = {b: int(-(-(m["params"] * b / 2**30 + kv + ACTIVATION_GIB) // 1)) for b in (8, BYTES_PER_PARAM_TRAINING)}
    return {
        "gpus": 1,
        "min_gpu_memory_gib": need[8],
        "fp32_gpu_memory_gib": need[BYTES_PER_PARAM_TRAINING],
        "reason": (f"one GRPO step trains every weight of the {scale} base model with AdamW in one process on one "
                   f"GPU: {m['params'] / 1e9:.2f}B parameters x 16 bytes (fp32 master weights, gradients, two "
                   f"moments, as upstream) or x 8 bytes (bf16, taken when fp32 does not fit), the rollout KV cache "
                   f"for {prompts_per_step} prompts x {num_generations} rollouts x {max_tokens} tokens = {kv:.0f} "
                   f"GiB, and {ACTIVATION_GIB} GiB of activations; upstream spread this over 8 GPUs with FSDP and "
                   f"CPU offload, which the one-process smoke run does not do (a smaller prompts_per_step lowers "
                   f"the cache)"),
    }

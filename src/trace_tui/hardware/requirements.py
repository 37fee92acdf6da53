"""GPU requirements per step profile and model size, and the arithmetic behind them (pure)."""

from __future__ import annotations

from typing import Any

from trace_tui.gpu_needs import smoke_requirement
from trace_tui.hardware.report import GIB, MEMORY_SLACK, GpuInfo, _Model

# --------------------------------------------------------------------------- requirements


class EndpointOption(_Model):
    tp: int  # GPUs per endpoint
    min_gib: int  # nominal memory class per GPU


class ProfileRequirement(_Model):
    what: str  # "7B model endpoint", "judge endpoint (Qwen3-32B)", ...
    options: list[EndpointOption]  # in order of preference (fewest GPUs first)
    compute_capability: str = "8.0"


# profile -> scale -> requirement. The arithmetic behind each number is in the
# module docstring; tests/test_hardware_requirements.py checks the estimates
# against these classes for both suites' settings.
REQUIREMENTS: dict[str, dict[str, ProfileRequirement]] = {
    "generate": {
        "3B": ProfileRequirement(what="3B model endpoint", options=[EndpointOption(tp=1, min_gib=24)]),
        "7B": ProfileRequirement(what="7B model endpoint",
                                 options=[EndpointOption(tp=1, min_gib=40), EndpointOption(tp=2, min_gib=24)]),
    },
    "judge": {
        "judge": ProfileRequirement(what="judge endpoint (Qwen3-32B)",
                                    options=[EndpointOption(tp=1, min_gib=80), EndpointOption(tp=2, min_gib=40),
                                             EndpointOption(tp=4, min_gib=24)]),
    },
}


def _train_requirements() -> dict[str, ProfileRequirement]:
    # The smoke step is one process on one GPU (no FSDP): its own estimate is the requirement,
    # so the check and the worker's own refusal can never disagree.

    return {scale: ProfileRequirement(what=f"{scale} GRPO trainer", options=[
                EndpointOption(tp=1, min_gib=smoke_requirement(scale)["min_gpu_memory_gib"])])
            for scale in ("3B", "7B")}


REQUIREMENTS["train"] = _train_requirements()

# Constants used to *estimate* memory (GiB) per endpoint; the table above rounds
# these up to card classes. Kept as data so a test recomputes them.
MODEL_FACTS: dict[str, dict[str, float]] = {
    # params (1e9), layers, kv_heads, head_dim
    "3B": {"params_b": 3.75, "layers": 36, "kv_heads": 2, "head_dim": 128},
    "7B": {"params_b": 8.29, "layers": 28, "kv_heads": 4, "head_dim": 128},
    "judge": {"params_b": 32.8, "layers": 64, "kv_heads": 8, "head_dim": 128},
}
PIXELS_PER_VISION_TOKEN = 28 * 28  # 14x14 patches merged 2x2
CONCURRENT_FULL_LENGTH = 8  # requests of maximal length an endpoint must hold at once to make progress


def kv_bytes_per_token(scale: str) -> int:
    f = MODEL_FACTS[scale]
    return int(f["layers"] * f["kv_heads"] * f["head_dim"] * 2 * 2)  # K and V, bf16


def estimate_generate_gib(scale: str, settings: dict[str, Any]) -> float:
    """bf16 weights + vision encoder + CONCURRENT_FULL_LENGTH max-length requests + CUDA context (GiB)."""
    weights = MODEL_FACTS[scale]["params_b"] * 1e9 * 2 / GIB
    tokens = settings.get("max_image_pixels", 0) / PIXELS_PER_VISION_TOKEN + settings.get("max_tokens", 0) + 200
    kv = CONCURRENT_FULL_LENGTH * tokens * kv_bytes_per_token(scale) / GIB
    encoder = 4.0 if scale == "3B" else 5.0
    return weights + encoder + kv + 2.0


def required_tp(profile: str, scale: str, gpus: list["GpuInfo"]) -> EndpointOption | None:
    """The first endpoint option that this set of GPUs can host, or None."""
    req = REQUIREMENTS[profile][scale]
    for opt in req.options:
        if sum(1 for g in gpus if meets(g, opt.min_gib, req.compute_capability)) >= opt.tp:
            return opt
    return None


def meets(gpu: "GpuInfo", min_gib: float, compute_capability: str | None) -> bool:
    if gpu.mig_enabled:  # a MIG-partitioned GPU cannot host a whole-GPU endpoint
        return False
    if compute_capability and _cc(gpu.compute_capability) < _cc(compute_capability):
        return False
    return gpu.memory_total_bytes >= min_gib * MEMORY_SLACK * GIB


def _cc(text: str | None) -> tuple[int, int]:
    try:
        major, minor = (text or "0.0").split(".")
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


def describe_requirement(profile: str, scale: str) -> str:
    req = REQUIREMENTS[profile][scale]
    first, *rest = req.options
    text = f"needs {_gpus(first.tp)} with >= {first.min_gib} GiB per {req.what}"
    if rest:
        text += " (or " + ", or ".join(f"{_gpus(o.tp)} with >= {o.min_gib} GiB" for o in rest) + ")"
    return text


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"



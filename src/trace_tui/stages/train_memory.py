"""The train stage's device and memory plan: which weight precision one GPU can train in, before loading."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from trace_tui.errors import RequirementsError
from trace_tui.gpu_needs import ACTIVATION_GIB
from trace_tui.stages.train_job import TrainSettings
from trace_tui.stages.train_profile import Hardware, ResolvedTraining


def device_hardware(settings: TrainSettings) -> Hardware:
    import torch

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


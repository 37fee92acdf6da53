"""The vLLM backend, written against vLLM's documented offline API (``LLM.generate`` with
``SamplingParams(seed=...)`` per request and ``multi_modal_data``), as the release served
its campaigns (vLLM 0.10.2, a per-request seed on every request).

vLLM needs CUDA, so this path is not exercised where there is no GPU; it is kept as
thin as possible: the prompt is rendered with the checkpoint's own chat template
(the same rendering as the transformers backend) and everything else is vLLM's.
"""

from __future__ import annotations

from typing import Any

from trace_tui.stages.backends import Request


class VllmBackend:
    name = "vllm"

    def __init__(self, model_dir: str, *, dtype: str | None = None, max_model_len: int | None = None,
                 tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                 min_pixels: int | None = None, max_pixels: int | None = None, max_images: int = 1) -> None:
        try:
            from vllm import LLM
        except ImportError as exc:  # the infer image carries vLLM; anywhere else say what to use
            from trace_tui.errors import RequirementsError

            raise RequirementsError(f"the vllm backend needs the vllm package ({exc})",
                                    hint="run inside the infer image, or use --backend transformers") from exc
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        import json
        from pathlib import Path

        kwargs: dict[str, Any] = {"model": model_dir, "dtype": dtype or "bfloat16",
                                  "tensor_parallel_size": tensor_parallel_size,
                                  "gpu_memory_utilization": gpu_memory_utilization}
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        if "vision_config" in config:  # the evaluated VL models; the judge is text only
            kwargs["limit_mm_per_prompt"] = {"image": max_images}
            if min_pixels is not None and max_pixels is not None:
                kwargs["mm_processor_kwargs"] = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        self.llm = LLM(**kwargs)

    def render(self, request: Request) -> str:
        return self.tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True,
                                                  **request.template_kwargs)

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

"""The transformers backend: the checkpoint's own chat template and processor, one row at a time.

Rows are generated one by one with the global generators re-seeded from the
row's seed before each (``torch.manual_seed`` seeds CPU and every CUDA device),
so a row's sample depends on its prompt and seed alone — never on which rows
shared a batch, their order, or a resume. Padding a batch would change the
numerics of the padded rows, which is why rows are not batched here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trace_tui.errors import UsageError
from trace_tui.stages.backends.request import Request, render_prompt
from trace_tui.stages.tiny_model import load_processor as _load

if TYPE_CHECKING:
    from transformers import ProcessorMixin

TINY_PARAMETERS = 50_000_000


class TransformersBackend:
    name = "transformers"

    def __init__(self, model_dir: str, *, min_pixels: int | None = None, max_pixels: int | None = None,
                 device: str | None = None, dtype: str | None = None) -> None:
        import json
        from pathlib import Path

        import torch

        self._torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        # bf16 on a GPU (as served upstream), fp32 on CPU (bf16 matmuls on CPU are slow and lossy).
        torch_dtype = getattr(torch, dtype) if dtype else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
        # A vision-language checkpoint (the evaluated models) or a text-only one (the judge).
        self.multimodal = "vision_config" in config
        if self.multimodal:
            from transformers import AutoModelForImageTextToText as auto_cls

            self.processor = load_processor(model_dir, min_pixels=min_pixels, max_pixels=max_pixels)
            self.tokenizer = self.processor.tokenizer
        else:
            from transformers import AutoModelForCausalLM as auto_cls
            from transformers import AutoTokenizer

            self.processor = None
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = auto_cls.from_pretrained(model_dir, dtype=torch_dtype).to(self.device)
        self.model.eval()
        if self.device == "cpu" and sum(p.numel() for p in self.model.parameters()) < TINY_PARAMETERS:
            # A tiny model's matmuls are microseconds: with several threads, their synchronisation
            # dominates (10x slower measured on a busy 2-core machine). Sampling is unaffected.
            torch.set_num_threads(1)

    def render(self, request: Request) -> str:
        return render_prompt(request, self.processor, self.tokenizer)

    def generate(self, requests: list[Request]) -> list[str]:
        return [self._one(r) for r in requests]

    def _one(self, request: Request) -> str:
        torch = self._torch
        text = self.render(request)
        if request.images:
            inputs = self.processor(text=[text], images=list(request.images), return_tensors="pt")
        else:
            inputs = self.tokenizer([text], return_tensors="pt", add_special_tokens=False)
        inputs = inputs.to(self.device)
        s = request.sampling
        if s.presence_penalty or s.frequency_penalty:
            raise UsageError("the transformers backend has no presence/frequency penalty; "
                             f"got presence={s.presence_penalty} frequency={s.frequency_penalty} (use the vllm backend)")
        gen: dict[str, Any] = {"max_new_tokens": s.max_tokens, "repetition_penalty": s.repetition_penalty}
        if s.temperature > 0:
            gen.update(do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=s.top_k if s.top_k > 0 else None)
        else:
            gen.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        torch.manual_seed(request.seed)
        with torch.inference_mode():
            out = self.model.generate(**inputs, **gen)
        new_tokens = out[:, inputs["input_ids"].shape[1]:]
        return self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)[0]


def load_processor(model_dir: str, *, min_pixels: int | None = None, max_pixels: int | None = None) -> ProcessorMixin:
    """The checkpoint's image-only processor with its own chat template (no torchvision needed)."""
    return _load(model_dir, min_pixels=min_pixels, max_pixels=max_pixels)

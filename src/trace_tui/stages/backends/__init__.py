"""Generation backends: one interface, two engines (transformers on CPU/GPU, vLLM on GPU or its CPU build).

A :class:`Request` carries everything a single sample depends on — the chat
messages, the images, the sampling settings and the seed — so a backend can
honour the release's rule that a row's sample depends on its prompt and seed
alone (every upstream request carried the run seed as vLLM's per-request seed).

Heavy imports (torch, transformers, vllm) happen inside the backends' methods,
when a backend is built.
"""

from __future__ import annotations

from trace_tui.errors import UsageError
from trace_tui.stages.backends.request import GenerationBackend, Request, Sampling, render_prompt
from trace_tui.stages.backends.transformers_backend import TransformersBackend
from trace_tui.stages.backends.vllm_backend import VllmBackend

BACKENDS = ("transformers", "vllm")
__all__ = ["BACKENDS", "GenerationBackend", "Request", "Sampling", "build_backend", "render_prompt"]


def build_backend(name: str, model_dir: str, *, min_pixels: int | None = None, max_pixels: int | None = None,
                  device: str | None = None, dtype: str | None = None, **options: object) -> GenerationBackend:
    """Build the named backend over a local model directory (the store entry's files).

    ``min_pixels``/``max_pixels`` are the run's image bounds, handed to the model's own
    image processor (the worker has already resized the images into them, so the
    processor keeps their size up to its patch grid).
    """
    if name == "transformers":
        return TransformersBackend(model_dir, min_pixels=min_pixels, max_pixels=max_pixels, device=device, dtype=dtype)
    if name == "vllm":
        return VllmBackend(model_dir, min_pixels=min_pixels, max_pixels=max_pixels, dtype=dtype, **options)

    raise UsageError(f"unknown generation backend {name!r}; choose one of: {', '.join(BACKENDS)}")

"""Run inside the gpu infer image: the vLLM backend's calls against the real vLLM installed there.

    python3 vllm_api_check.py MODEL_DIR   -> one JSON line: what was checked, and any mismatch

No GPU is needed: the real `vllm.LLM` cannot start an engine without CUDA, so it is replaced by a
checker that validates every argument the backend passes against the real vLLM (LLM.__init__'s
parameters and EngineArgs' fields, LLM.generate's signature, the TextPrompt keys, the
multi-modal data key, SamplingParams built for real, the Qwen2.5-VL image placeholder) and answers
with vLLM's own output types. Everything else is the real backend over a real tiny checkpoint.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys


def main(model_dir: str) -> dict:
    import vllm
    from vllm import EngineArgs, SamplingParams
    from vllm.inputs import TextPrompt
    from vllm.outputs import CompletionOutput, RequestOutput

    real = vllm.LLM
    problems: list[str] = []
    seen: dict = {}
    llm_params = set(inspect.signature(real.__init__).parameters) - {"self", "kwargs"}
    engine_fields = {f.name for f in dataclasses.fields(EngineArgs)}

    class CheckedLLM:
        def __init__(self, **kw):
            seen.setdefault("llm_kwargs", sorted(kw))
            seen.setdefault("mm_options", {k: kw[k] for k in ("limit_mm_per_prompt", "mm_processor_kwargs") if k in kw})
            problems.extend(f"LLM({k}=...) is neither an LLM parameter nor an EngineArgs field"
                            for k in kw if k not in llm_params | engine_fields)
            inspect.signature(real.__init__).bind(None, **kw)
            # The engine arguments as vLLM builds them (names and values; no engine is started).
            EngineArgs(**{k: v for k, v in kw.items() if k in engine_fields})

        def generate(self, prompts, sampling_params=None, use_tqdm=True):
            inspect.signature(real.generate).bind(None, prompts, sampling_params=sampling_params, use_tqdm=use_tqdm)
            keys = set(TextPrompt.__annotations__)
            for p in prompts:
                problems.extend(f"prompt key {k!r} is not a TextPrompt key {sorted(keys)}" for k in p if k not in keys)
                for modality in p.get("multi_modal_data", {}):
                    if modality != "image":
                        problems.append(f"multi_modal_data key {modality!r}")
            seen.setdefault("prompt_keys", sorted({k for p in prompts for k in p}))
            seen.setdefault("sampling_params", [type(s).__name__ for s in sampling_params])
            seen.setdefault("sampling", [{f: getattr(s, f) for f in ("temperature", "top_p", "top_k", "max_tokens",
                                                                    "presence_penalty", "frequency_penalty",
                                                                    "repetition_penalty", "seed")}
                                         for s in sampling_params])
            seen.setdefault("prompt", prompts[0]["prompt"])
            seen["last_prompts"] = prompts
            out = CompletionOutput(index=0, text='{"answer": 1}', token_ids=[1], cumulative_logprob=None,
                                   logprobs=None)
            return [RequestOutput(request_id=str(i), prompt=p["prompt"], prompt_token_ids=[1], prompt_logprobs=None,
                                  outputs=[out], finished=True) for i, p in enumerate(prompts)]

    vllm.LLM = CheckedLLM
    from PIL import Image

    from trace_tui.stages.backends import Request, Sampling, build_backend

    backend = build_backend("vllm", model_dir, min_pixels=3136, max_pixels=50176, max_model_len=4096,
                            gpu_memory_utilization=0.9)
    msgs = [{"role": "system", "content": "S"},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Q"}]}]
    req = Request(messages=msgs, images=[Image.new("RGB", (64, 64))],
                  sampling=Sampling(temperature=0.6, top_p=0.95, top_k=20, max_tokens=7), seed=42)
    texts = backend.generate([req, req])
    if texts != ['{"answer": 1}'] * 2:
        problems.append(f"outputs read back as {texts}")
    if seen["last_prompts"][0].get("multi_modal_data", {}).get("image") is not req.images[0]:
        problems.append("the request's image is not the prompt's multi_modal_data image")
    # A text-only checkpoint (the judge, Qwen3-32B): no image limits or processor options, no image data.
    judge = _text_only_copy(model_dir)
    seen.pop("last_prompts")
    jcalls = {}
    vllm.LLM = _recording(CheckedLLM, jcalls)
    jb = build_backend("vllm", judge, min_pixels=3136, max_pixels=50176)
    jb.generate([Request(messages=[{"role": "user", "content": "hi"}], sampling=Sampling(temperature=0.0, max_tokens=128))])
    seen["judge_llm_kwargs"] = sorted(jcalls["init"])
    seen["judge_prompt_keys"] = sorted(seen.pop("last_prompts")[0])
    # The processor's chat template puts Qwen2.5-VL's image placeholder where vLLM looks for it.
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration

    placeholder = Qwen2_5_VLForConditionalGeneration.get_placeholder_str("image", 0)
    if placeholder not in seen["prompt"]:
        problems.append(f"the rendered prompt lacks vLLM's image placeholder {placeholder!r}")
    seen["placeholder"] = placeholder
    # A real SamplingParams, field by field as the backend sets them.
    sp = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, max_tokens=7, presence_penalty=0.0,
                        frequency_penalty=0.0, repetition_penalty=1.0, seed=42)
    seen["sampling_seed"] = sp.seed
    seen.pop("last_prompts", None)
    return {"vllm": vllm.__version__, "problems": problems, **seen}


def _text_only_copy(model_dir: str) -> str:
    import shutil
    import tempfile
    from pathlib import Path

    out = Path(tempfile.mkdtemp()) / "judge"
    shutil.copytree(model_dir, out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.pop("vision_config", None)
    (out / "config.json").write_text(json.dumps(cfg))
    return str(out)


def _recording(cls, calls: dict):
    class Recording(cls):
        def __init__(self, **kw):
            calls["init"] = kw
            super().__init__(**kw)

    return Recording


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))

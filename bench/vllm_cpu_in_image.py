"""Runs inside the cpu infer image for bench_vllm_cpu: python3 vllm_cpu_in_image.py MODEL SAMPLE OUT.

One vLLM engine (the generate worker's own VllmBackend, CPU settings) is loaded once; the bare side
calls its ``LLM.generate`` directly, the worker side runs ``generate.run`` with that backend. Both
sides load their rows and build their requests inside the timing. They run in pairs, back to back,
which of the two goes first alternating; a shared machine's drift moves both sides of a pair alike,
so the ratio reported is the median of the pairs' ratios (with each side's median rows/s) in
OUT/result.json.

max_tokens is 256 (the release generates with up to 4096): with 32 the engine's share of a run was
about a third, the rest image decoding that both sides do alike, so a few tens of milliseconds of
receipt and row files swung the ratio by several points; 256 keeps the bench to a few minutes with
the engine's work most of each run, as it is in a real one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROWS = list(range(64))
REPEATS = 9
SETTINGS = {"temperature": 0.6, "top_p": 0.95, "top_k": -1, "max_tokens": 256, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "repetition_penalty": 1.0, "min_image_pixels": 3136,
            "max_image_pixels": 50176, "seed": 42}


def bare(backend, sample: Path) -> tuple[float, list[str]]:
    """What a script would do: rows, prompts through the chat template, one SamplingParams per row."""
    from vllm import SamplingParams

    from trace_tui.stages.backends import Sampling
    from trace_tui.stages.dataset import TraceDataset
    from trace_tui.stages.generate import make_request

    t0 = time.perf_counter()
    system = (sample / "system_prompt_answer.txt").read_text(encoding="utf-8")
    rows = TraceDataset(sample / "trace-sample.parquet").rows(ROWS)
    s = Sampling.from_settings(SETTINGS)
    reqs = [make_request(r, system, s, SETTINGS["seed"], SETTINGS["min_image_pixels"], SETTINGS["max_image_pixels"])
            for r in rows]
    prompts = [{"prompt": backend.render(r), "multi_modal_data": {"image": r.images[0]}} for r in reqs]
    params = [SamplingParams(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens,
                             seed=r.seed) for r in reqs]
    out = backend.llm.generate(prompts, sampling_params=params, use_tqdm=False)
    return time.perf_counter() - t0, [o.outputs[0].text for o in out]


def worker(backend, name: str, model: Path, sample: Path, campaign: Path) -> tuple[float, list[str]]:
    from trace_tui.stages import generate

    campaign.mkdir(parents=True)
    os.environ["TRACE_TUI_CAMPAIGN"] = str(campaign)
    os.environ["TRACE_TUI_STORE"] = str(campaign / "store")
    job = {"step": "generate", "slice": {"model": "tiny", "seed": SETTINGS["seed"], "benchmark": "sample"},
           "settings": SETTINGS, "rows": ROWS, "output_dir": "outputs/generate/s", "backend": name,
           "paths": {"model": {"path": str(model)}, "dataset": {"path": str(sample / "trace-sample.parquet")},
                     "system_prompt": {"path": str(sample / "system_prompt_answer.txt")}}}
    with contextlib.redirect_stdout(io.StringIO()):  # the events, as a runner would read them
        t0 = time.perf_counter()
        generate.run(job, backend=backend)
        took = time.perf_counter() - t0
    rows = sorted((campaign / "outputs/generate/s/rows").glob("*.json"))
    return took, [json.loads(f.read_text())["response"] for f in rows]


def main() -> int:
    import tempfile

    import vllm

    from trace_tui.stages.backends import build_backend
    from trace_tui.stages.jobs import quiet_libraries

    quiet_libraries()
    model, sample, out = (Path(a) for a in sys.argv[1:4])
    backend = build_backend("vllm", str(model), min_pixels=SETTINGS["min_image_pixels"],
                            max_pixels=SETTINGS["max_image_pixels"])
    with tempfile.TemporaryDirectory() as tmp:
        bare(backend, sample)  # warm-up: first-call allocations, page cache
        b_times, w_times = [], []
        for i in range(REPEATS):
            if i % 2:
                w, w_out = worker(backend, "vllm", model, sample, Path(tmp) / f"v{i}")
                b, b_out = bare(backend, sample)
            else:
                b, b_out = bare(backend, sample)
                w, w_out = worker(backend, "vllm", model, sample, Path(tmp) / f"v{i}")
            if b_out != w_out:
                raise SystemExit("the worker must produce exactly bare LLM.generate's responses")
            b_times.append(b)
            w_times.append(w)
        tf = build_backend("transformers", str(model), min_pixels=SETTINGS["min_image_pixels"],
                           max_pixels=SETTINGS["max_image_pixels"])
        t_time, _ = worker(tf, "transformers", model, sample, Path(tmp) / "t")
    n = len(ROWS)
    result = {"vllm": vllm.__version__, "rows": n, "repeats": REPEATS, "max_tokens": SETTINGS["max_tokens"],
              "bare_rows_s": n / statistics.median(b_times), "worker_rows_s": n / statistics.median(w_times),
              "paired_ratio": statistics.median(b / w for b, w in zip(b_times, w_times, strict=True)),
              "transformers_rows_s": n / t_time}
    (out / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

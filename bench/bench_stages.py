"""The generate worker's overhead over calling the transformers backend directly on the same rows.

Baseline: load the rows with `datasets`, build the backend, build the requests and call
``backend.generate`` (what any script would do). Worker: ``trace_tui.stages.generate.run``
on the same rows and settings, in process (imports already paid by both), which adds the
model's sha256set, the dataset hash, one atomic file per row, progress events and the
receipt. Goal: ratio < 1.05.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
from pathlib import Path

ROWS = list(range(12))
SETTINGS = {"temperature": 0.6, "top_p": 0.95, "top_k": -1, "max_tokens": 32, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "repetition_penalty": 1.0, "min_image_pixels": 3136,
            "max_image_pixels": 50176, "seed": 42}


def _sample_dir() -> Path:
    repo = Path(__file__).resolve().parents[1]
    return Path(os.environ.get("TRACE_SAMPLE_DIR", repo.parent / "shared" / "trace-sample")).resolve()


def direct(model_dir: Path, sample: Path) -> tuple[float, list[str]]:
    from trace_tui.stages.backends import Sampling, build_backend
    from trace_tui.stages.dataset import TraceDataset
    from trace_tui.stages.generate import make_request

    t0 = time.perf_counter()
    system = (sample / "system_prompt_answer.txt").read_text(encoding="utf-8")
    rows = TraceDataset(sample / "trace-sample.parquet").rows(ROWS)
    backend = build_backend("transformers", str(model_dir), min_pixels=SETTINGS["min_image_pixels"],
                            max_pixels=SETTINGS["max_image_pixels"])
    s = Sampling.from_settings(SETTINGS)
    reqs = [make_request(r, system, s, 42, SETTINGS["min_image_pixels"], SETTINGS["max_image_pixels"]) for r in rows]
    out = backend.generate(reqs)
    return time.perf_counter() - t0, out


def worker(model_dir: Path, sample: Path, campaign: Path) -> tuple[float, list[str]]:
    import json

    import contextlib

    from trace_tui.stages import generate

    os.environ["TRACE_TUI_CAMPAIGN"] = str(campaign)
    os.environ["TRACE_TUI_STORE"] = str(campaign / "store")
    job = {"step": "generate", "slice": {"model": "tiny", "seed": 42, "benchmark": "sample"}, "settings": SETTINGS,
           "rows": ROWS, "output_dir": "outputs/generate/s", "backend": "transformers",
           "paths": {"model": {"path": str(model_dir)}, "dataset": {"path": str(sample / "trace-sample.parquet")},
                     "system_prompt": {"path": str(sample / "system_prompt_answer.txt")}}}
    with contextlib.redirect_stdout(io.StringIO()):  # the events, as a runner would read them
        t0 = time.perf_counter()
        generate.run(job)
        took = time.perf_counter() - t0
    rows = sorted((campaign / "outputs/generate/s/rows").glob("*.json"))
    return took, [json.loads(f.read_text())["response"] for f in rows]


def run() -> list[str]:
    from trace_tui.stages.jobs import quiet_libraries
    from trace_tui.stages.tiny_model import build_tiny_qwen25vl

    quiet_libraries()
    sample = _sample_dir()
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_qwen25vl(Path(tmp) / "model", seed=0)
        direct(model, sample)  # warm-up: imports, kernels, page cache
        d_times, w_times = [], []
        for i in range(5):
            d, d_out = direct(model, sample)
            w, w_out = worker(model, sample, Path(tmp) / f"c{i}")
            assert d_out == w_out, "the worker must produce exactly the backend's responses"
            d_times.append(d)
            w_times.append(w)
    d, w = min(d_times), min(w_times)
    return [f"rows: {len(ROWS)} real TRACE sample rows, tiny Qwen2.5-VL, max_tokens {SETTINGS['max_tokens']}, CPU",
            f"backend directly: {d:.3f} s (best of 5)",
            f"generate worker:  {w:.3f} s (best of 5)",
            f"overhead ratio:   {w / d:.3f} (goal < 1.05)"]


if __name__ == "__main__":
    for line in run():
        print(line)

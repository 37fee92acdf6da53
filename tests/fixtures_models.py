"""Session fixtures with tiny local Qwen2.5-VL checkpoints (built here in seconds, no downloads).

Loaded for every test module through ``pytest_plugins`` in tests/conftest.py, so
any test can ask for:

* ``tiny_qwen25vl_dir`` -- a random tiny Qwen2.5-VL checkpoint directory
  (trace_tui.stages.tiny_model.build_tiny_qwen25vl, seed 0);
* ``tiny_qwen25vl_processor`` -- its image-only processor (load_processor);
* ``tiny_qwen25vl_warm_dir`` -- the same model after a short supervised warm-up
  on real TRACE rows, so that its replies often end in ``{"answer": ...}``.

Built once per session; treat the directories as read-only.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_qwen25vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from trace_tui.stages.tiny_model import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("tiny-qwen25vl"), seed=0)


@pytest.fixture(scope="session")
def tiny_qwen25vl_processor(tiny_qwen25vl_dir: Path):
    from trace_tui.stages.tiny_model import load_processor

    return load_processor(tiny_qwen25vl_dir)


# Warm-up data: the first rows of the real TRACE sample, answered in the
# release's answer format. Small pixel bounds keep the CPU steps fast.
WARM_ROWS = 16
WARM_STEPS = 60
WARM_LR = 3e-3
WARM_MIN_PIXELS = 56 * 56
WARM_MAX_PIXELS = 28 * 28 * 64


def trace_warm_up_examples(sample_dir: Path, n: int = WARM_ROWS) -> list[dict]:
    import io
    import json

    import pyarrow.parquet as pq
    from PIL import Image

    system = (sample_dir / "system_prompt_answer.txt").read_text(encoding="utf-8")
    rows = pq.read_table(sample_dir / "trace-sample.parquet",
                         columns=["prompt_answer", "images", "answer_gt"]).slice(0, n).to_pylist()
    examples = []
    for row in rows:
        examples.append({
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": [{"type": "image"}, {
                             "type": "text", "text": row["prompt_answer"].removeprefix("<image>")}]}],
            "images": [Image.open(io.BytesIO(im["bytes"])) for im in row["images"]],
            "target": json.dumps({"answer": json.loads(row["answer_gt"])["value"]}),
        })
    return examples


@pytest.fixture(scope="session")
def tiny_qwen25vl_warm_dir(tiny_qwen25vl_dir: Path, trace_sample_dir: Path,
                           tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model after a short supervised warm-up on TRACE rows: its sampled replies
    often end in ``{"answer": ...}`` (so the TRACE reward varies), mostly with wrong values."""
    import torch

    from trace_tui.stages.tiny_model import supervised_warm_up

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is fastest on shared cores
    try:
        return supervised_warm_up(tiny_qwen25vl_dir, tmp_path_factory.mktemp("tiny-qwen25vl-warm"),
                                  trace_warm_up_examples(trace_sample_dir), steps=WARM_STEPS, lr=WARM_LR, seed=0,
                                  min_pixels=WARM_MIN_PIXELS, max_pixels=WARM_MAX_PIXELS)
    finally:
        torch.set_num_threads(threads)

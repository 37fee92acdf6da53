"""Session fixtures with tiny local Qwen2.5-VL checkpoints (built here in seconds, no downloads).

Loaded for every test module through ``pytest_plugins`` in tests/conftest.py, so
any test can ask for:

* ``tiny_qwen25vl_dir`` -- a random tiny Qwen2.5-VL checkpoint directory
  (trace_tui.stages.tiny_model.build_tiny_qwen25vl, seed 0);
* ``tiny_qwen25vl_processor`` -- its image-only processor (load_processor).

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

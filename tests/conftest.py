"""Shared fixtures: the real release copy and the real TRACE instances (never copied into the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tiny local Qwen2.5-VL checkpoints as session fixtures (tests/fixtures_models.py).
pytest_plugins = ["fixtures_models", "fixtures_stages", "fixtures_evaluator"]


def release_dir() -> Path:
    return Path(os.environ.get("TRACE_RELEASE_DIR", REPO.parent / "shared" / "trace-release")).resolve()


def sample_dir() -> Path:
    return Path(os.environ.get("TRACE_SAMPLE_DIR", REPO.parent / "shared" / "trace-sample")).resolve()


@pytest.fixture(scope="session")
def trace_release_dir() -> Path:
    path = release_dir()
    assert (path / "rlvr").is_dir(), f"TRACE_RELEASE_DIR={path} is not a release copy"
    return path


@pytest.fixture(scope="session")
def trace_sample_dir() -> Path:
    path = sample_dir()
    assert (path / "trace-sample.jsonl").is_file(), f"TRACE_SAMPLE_DIR={path} has no trace-sample.jsonl"
    return path


@pytest.fixture(autouse=True)
def _environment_restored():
    """Workers called in-process (their ``main()``) set process-wide variables on purpose, e.g.
    ``HF_HUB_OFFLINE=1`` in ``stages.jobs.quiet_libraries``; each test starts from the environment the
    one before it started from, so no test runs offline, or anything else, by accident of order."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
        # huggingface_hub reads HF_HUB_OFFLINE once, when it is first imported (maybe during that test)
        import sys

        hub = sys.modules.get("huggingface_hub.constants")
        if hub is not None:
            hub.HF_HUB_OFFLINE = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")

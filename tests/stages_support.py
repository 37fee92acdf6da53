"""Helpers for the stage worker tests: run a worker in-process with its stage-contract
environment and collect the JSON lines it prints."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Callable

GEN_SETTINGS = {"temperature": 0.6, "top_p": 0.95, "top_k": -1, "max_tokens": 12, "presence_penalty": 0.0,
                "frequency_penalty": 0.0, "repetition_penalty": 1.0, "min_image_pixels": 3136,
                "max_image_pixels": 50176, "seed": 42}


def run_worker(monkeypatch: Any, campaign: Path, store: Path, fn: Callable[..., Any], job: dict[str, Any],
               **kwargs: Any) -> tuple[Any, list[dict[str, Any]]]:
    """``fn(job, **kwargs)`` with TRACE_TUI_CAMPAIGN/STORE set; returns (result, events printed)."""
    import contextlib

    buf = io.StringIO()
    monkeypatch.setenv("TRACE_TUI_CAMPAIGN", str(campaign))
    monkeypatch.setenv("TRACE_TUI_STORE", str(store))
    from trace_tui.stages import protocol

    with contextlib.redirect_stdout(buf):  # the protocol prints events on the current sys.stdout
        try:
            result = fn(job, **kwargs)
        finally:
            protocol.flush()  # what a worker process's exit does with a progress count still held
    return result, [json.loads(line) for line in buf.getvalue().splitlines()]


def sample_generate_job(model_dir: Path, sample_dir: Path, rows: list[int], out: str = "outputs/generate/s",
                        **extra: Any) -> dict[str, Any]:
    return {"step": "generate", "recipe": "test",
            "slice": {"model": "tiny", "seed": 42, "benchmark": "trace-sample"},
            "settings": dict(GEN_SETTINGS), "output_dir": out, "rows": rows,
            "paths": {"model": {"path": str(model_dir)},
                      "dataset": {"path": str(sample_dir / "trace-sample.parquet")},
                      "system_prompt": {"path": str(sample_dir / "system_prompt_answer.txt")}},
            **extra}


def responses(campaign: Path, out: str = "outputs/generate/s") -> dict[int, str]:
    rows = sorted((campaign / out / "rows").glob("*.json"))
    return {json.loads(f.read_text())["index"]: json.loads(f.read_text())["response"] for f in rows}

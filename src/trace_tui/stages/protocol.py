"""The stage contract, worker side (SPEC §3).

A worker reads its job spec from ``/job/job.json`` (or the path in
``TRACE_TUI_JOB``), writes outputs under the campaign directory atomically,
and prints one JSON object per line on stdout:

    {"type": "progress", "model": ..., "seed": ..., "benchmark": ..., "phase": ..., "done": N, "total": N}
    {"type": "log", "level": "info", "message": "..."}
    {"type": "artifact", "path": "relative/to/campaign", "sha256": "...", "bytes": N}
    {"type": "status", "state": "completed" | "failed", "message": "...", "exit_code": N}

A worker that keeps a model loaded may serve several slices in turn (a *batch*: the job
spec's ``batch`` holds one per-slice job spec each); it ends each slice with a status line
that names the slice (``model``, ``seed``, ``benchmark``), and the worker with a plain one.

Standard library only: this module is imported inside every image.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from trace_tui.common.digest import sha256_file_size


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n"


def _write(line: str) -> None:
    # sys.stdout looked up per call: whoever redirects stdout (a test, an embedding caller) gets the events.
    out: TextIO = sys.stdout
    out.write(line)
    out.flush()


def _emit(obj: dict[str, Any]) -> None:
    _write(_line(obj))


_progress_parts: tuple[tuple[Any, ...], str, str] | None = None


def progress(*, phase: str, done: int, total: int, model: str | None = None, seed: int | None = None,
             benchmark: str | None = None) -> None:
    global _progress_parts
    if type(done) is not int:  # noqa: E721 - bool, float or anything else: the general encoder decides
        _write(_line({"type": "progress", "model": model, "seed": seed, "benchmark": benchmark,
                      "phase": phase, "done": done, "total": total}))
        return
    # The same text json.dumps(sort_keys=True) writes, with everything but the count encoded once
    # per slice and phase: a stage reporting every row pays a string join, not an encoder pass.
    key = (phase, total, type(total), model, seed, type(seed), benchmark)  # 1, 1.0 and True differ in JSON
    parts = _progress_parts
    if parts is None or parts[0] != key:
        head = '{"benchmark":%s,"done":' % json.dumps(benchmark)
        tail = ',"model":%s,"phase":%s,"seed":%s,"total":%s,"type":"progress"}\n' % (
            json.dumps(model), json.dumps(phase), json.dumps(seed), json.dumps(total))
        parts = _progress_parts = (key, head, tail)
    _write(f"{parts[1]}{done}{parts[2]}")


def log(message: str, level: str = "info") -> None:
    _emit({"type": "log", "level": level, "message": message})


def artifact(path: Path, campaign: Path) -> str:
    digest, size = sha256_file_size(path)
    _emit({"type": "artifact", "path": path.relative_to(campaign).as_posix(), "sha256": digest, "bytes": size})
    return digest


def metric(name: str, value: float, **where: Any) -> None:
    """A named number a stage computed, e.g. the score of a slice (``model``/``seed``/``benchmark``)."""
    _emit({"type": "metric", "name": name, "value": value, **where})


def status(state: str, message: str = "", exit_code: int = 0, *, model: str | None = None, seed: int | None = None,
           benchmark: str | None = None) -> None:
    """The worker's end; given a slice (model, seed, benchmark): that slice's end inside a batch worker."""
    obj: dict[str, Any] = {"type": "status", "state": state, "message": message, "exit_code": exit_code}
    if model is not None:
        obj.update(model=model, seed=seed, benchmark=benchmark)
    _emit(obj)


def load_job(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    job_path = Path(path or os.environ.get("TRACE_TUI_JOB", "/job/job.json"))
    return json.loads(job_path.read_text(encoding="utf-8"))

"""The stage contract, worker side (SPEC §3).

A worker reads its job spec from ``/job/job.json`` (or the path in
``TRACE_TUI_JOB``), writes outputs under the campaign directory atomically,
and prints one JSON object per line on stdout:

    {"type": "progress", "model": ..., "seed": ..., "benchmark": ..., "phase": ..., "done": N, "total": N}
    {"type": "log", "level": "info", "message": "..."}
    {"type": "artifact", "path": "relative/to/campaign", "sha256": "...", "bytes": N}
    {"type": "status", "state": "completed" | "failed", "message": "...", "exit_code": N}

Standard library only: this module is imported inside every image.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from trace_tui.common.digest import sha256_file_size

# Progress lines are batched: a stage reporting every row (tens of thousands a second) would
# otherwise pay one write syscall per line (workers run with PYTHONUNBUFFERED) and the runner one
# read per line. A progress line waits at most FLUSH_S; every other event flushes what is pending
# first and goes out at once, so the order of events is kept and a status is never held back.
FLUSH_S = 0.05
_MAX_PENDING = 4096
_lock = threading.Lock()
_pending: list[str] = []
_last_flush = 0.0
_timer: threading.Timer | None = None


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n"


def _write_pending() -> None:  # with _lock held
    global _last_flush
    if _pending:
        # sys.stdout looked up per write: whoever redirects stdout (a test, an embedding caller) gets the events.
        out: TextIO = sys.stdout
        out.write("".join(_pending))
        _pending.clear()
        out.flush()
    _last_flush = time.monotonic()


def flush() -> None:
    """Write out any batched progress lines now (also done at exit and before every other event)."""
    with _lock:
        _write_pending()


def _flush_later() -> None:
    global _timer
    with _lock:
        _timer = None
        _write_pending()


def _emit(obj: dict[str, Any]) -> None:
    """Any event, at once (after the progress lines still batched, so the order is kept)."""
    line = _line(obj)
    with _lock:
        _pending.append(line)
        _write_pending()


def _emit_progress_line(line: str) -> None:
    global _timer
    with _lock:
        _pending.append(line)
        if time.monotonic() - _last_flush >= FLUSH_S or len(_pending) >= _MAX_PENDING:
            _write_pending()
        elif _timer is None:  # a burst followed by a long silence still shows its last line within FLUSH_S
            _timer = threading.Timer(FLUSH_S, _flush_later)
            _timer.daemon = True
            _timer.start()


atexit.register(flush)


_progress_parts: tuple[tuple[Any, ...], str, str] | None = None


def progress(*, phase: str, done: int, total: int, model: str | None = None, seed: int | None = None,
             benchmark: str | None = None) -> None:
    global _progress_parts
    if type(done) is not int:  # noqa: E721 - bool, float or anything else: the general encoder decides
        _emit_progress_line(_line({"type": "progress", "model": model, "seed": seed, "benchmark": benchmark,
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
    _emit_progress_line(f"{parts[1]}{done}{parts[2]}")


def log(message: str, level: str = "info") -> None:
    _emit({"type": "log", "level": level, "message": message})


def artifact(path: Path, campaign: Path) -> str:
    digest, size = sha256_file_size(path)
    _emit({"type": "artifact", "path": path.relative_to(campaign).as_posix(), "sha256": digest, "bytes": size})
    return digest


def metric(name: str, value: float, **where: Any) -> None:
    """A named number a stage computed, e.g. the score of a slice (``model``/``seed``/``benchmark``)."""
    _emit({"type": "metric", "name": name, "value": value, **where})


def status(state: str, message: str = "", exit_code: int = 0) -> None:
    _emit({"type": "status", "state": state, "message": message, "exit_code": exit_code})


def load_job(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    job_path = Path(path or os.environ.get("TRACE_TUI_JOB", "/job/job.json"))
    return json.loads(job_path.read_text(encoding="utf-8"))

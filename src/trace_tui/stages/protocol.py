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

Progress is coalesced at the source, as tqdm's ``mininterval`` does: a stage may report every
row (hundreds of thousands a second), and one write and flush per row would cost the worker
more than its work. A progress line is written at once when it is the first of its *stream*
(its slice, phase and total, on the current ``sys.stdout``), when it completes its phase
(``done == total``), or when ``PROGRESS_INTERVAL_S`` has passed since its stream's last line;
otherwise only its count is kept, pending. Counts are cumulative: only intermediate counts
are lost. The pending count is written before anything else this module writes (any event,
or progress of another stream, so the slices of a batch each end at their own count), by
``flush()``, and at interpreter exit: the order of events and every final count stay exact.

Staleness: a held count shows at the latest with the next call into this module or the
worker's exit. There is no flushing thread (one writing stdout at interpreter shutdown made a
worker hang at exit), so a worker that goes quiet mid-phase shows its last written count until
then, and a worker killed by a signal loses at most ``PROGRESS_INTERVAL_S`` worth of counts.
``PROGRESS_INTERVAL_S = 0`` (or ``TRACE_TUI_PROGRESS_INTERVAL_S=0`` in the worker's
environment) writes every progress line, as before.

Meant to be called from one thread at a time, as stages do; a log line from another thread
while a count is held can at worst repeat or reorder that one count.

Standard library only: this module is imported inside every image.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from trace_tui.common.digest import sha256_file_size


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n"


def _interval_from_env(default: float) -> float:
    try:
        return max(0.0, float(os.environ.get("TRACE_TUI_PROGRESS_INTERVAL_S", default)))
    except ValueError:  # a typo in a debugging knob must not stop every worker
        return default


# 50 ms: below the TUI's redraw interval (0.1 s), at most 20 progress lines a second per stream.
PROGRESS_INTERVAL_S = _interval_from_env(0.05)

_UNSET: Any = object()
# The stream of the last progress line: its encoding (key, head, tail) and where it went.
_progress_parts: tuple[tuple[Any, ...], str, str] | None = None
_progress_out: TextIO | None = None
# The same stream as the very objects the last call passed (a loop over rows passes the same
# ones each time): the hot path compares these and builds nothing.
_last_phase = _last_total = _last_model = _last_seed = _last_benchmark = _UNSET
_progress_written_at = float("-inf")  # time.monotonic() of the stream's last line
_pending_done: int | None = None  # the stream's latest count, not yet written


def _write_pending() -> None:
    global _pending_done
    done, _pending_done = _pending_done, None
    if done is None or _progress_parts is None or _progress_out is None:
        return
    out = _progress_out
    try:
        out.write(f"{_progress_parts[1]}{done}{_progress_parts[2]}")
        out.flush()
    except ValueError:
        if out is sys.stdout:
            raise
        # held for a stream that stdout was redirected to and that was closed since: nobody reads it


def flush() -> None:
    """Write the pending progress count now (done before every other event and at exit anyway)."""
    _write_pending()


@atexit.register
def _flush_at_exit() -> None:
    try:
        _write_pending()
    except (OSError, ValueError):  # stdout closed or its reader gone: nobody is left to tell
        pass


def _write(line: str) -> None:
    if _pending_done is not None:
        _write_pending()
    # sys.stdout looked up per call: whoever redirects stdout (a test, an embedding caller) gets the events.
    out: TextIO = sys.stdout
    out.write(line)
    out.flush()


def _emit(obj: dict[str, Any]) -> None:
    _write(_line(obj))


def progress(*, phase: str, done: int, total: int, model: str | None = None, seed: int | None = None,
             benchmark: str | None = None) -> None:
    global _pending_done
    now = time.monotonic()
    if (phase is _last_phase and total is _last_total and model is _last_model and seed is _last_seed
            and benchmark is _last_benchmark and sys.stdout is _progress_out and type(done) is int
            and done != total and now - _progress_written_at < PROGRESS_INTERVAL_S):
        _pending_done = done
        return
    _progress_line(phase, done, total, model, seed, benchmark, now)


def _progress_line(phase: str, done: int, total: int, model: str | None, seed: int | None, benchmark: str | None,
                   now: float) -> None:
    """``progress`` past its hot path: written now, or held for a stream equal to the last but
    passed as other objects."""
    global _progress_parts, _progress_out, _progress_written_at, _pending_done
    global _last_phase, _last_total, _last_model, _last_seed, _last_benchmark
    if type(done) is not int:  # noqa: E721 - bool, float or anything else: the general encoder decides
        _write(_line({"type": "progress", "model": model, "seed": seed, "benchmark": benchmark,
                      "phase": phase, "done": done, "total": total}))
        return
    out: TextIO = sys.stdout
    key = (phase, total, type(total), model, seed, type(seed), benchmark)  # 1, 1.0 and True differ in JSON
    parts = _progress_parts
    if parts is not None and parts[0] == key and out is _progress_out:
        if done != total and now - _progress_written_at < PROGRESS_INTERVAL_S:
            _pending_done = done
            return
    else:
        if _pending_done is not None:  # the previous stream's count goes first
            _write_pending()
        # The same text json.dumps(sort_keys=True) writes, with everything but the count encoded once
        # per stream: a stage reporting every row pays a string join, not an encoder pass.
        head = '{"benchmark":%s,"done":' % json.dumps(benchmark)
        tail = ',"model":%s,"phase":%s,"seed":%s,"total":%s,"type":"progress"}\n' % (
            json.dumps(model), json.dumps(phase), json.dumps(seed), json.dumps(total))
        parts = _progress_parts = (key, head, tail)
        _progress_out = out
    _last_phase, _last_total, _last_model, _last_seed, _last_benchmark = phase, total, model, seed, benchmark
    _pending_done = None  # superseded by this count
    out.write(f"{parts[1]}{done}{parts[2]}")
    out.flush()
    _progress_written_at = now


def log(message: str, level: str = "info") -> None:
    _emit({"type": "log", "level": level, "message": message})


def artifact(path: Path, campaign: Path) -> str:
    digest, size = sha256_file_size(path)
    _emit({"type": "artifact", "path": path.relative_to(campaign).as_posix(), "sha256": digest, "bytes": size})
    return digest


def metric(name: str, value: float, **where: object) -> None:
    """A named number a stage computed, e.g. the score of a slice (``model``/``seed``/``benchmark``)."""
    _emit({"type": "metric", "name": name, "value": value, **where})


def status(state: str, message: str = "", exit_code: int = 0, *, model: str | None = None, seed: int | None = None,
           benchmark: str | None = None) -> None:
    """The worker's end; given a slice (model, seed, benchmark): that slice's end inside a batch worker."""
    obj: dict[str, Any] = {"type": "status", "state": state, "message": message, "exit_code": exit_code}
    if model is not None:
        obj.update(model=model, seed=seed, benchmark=benchmark)
    _emit(obj)


def stop_on_sigterm() -> None:
    """Make a stop interrupt the worker as Ctrl-C does: its cleanup runs and it reports "interrupted".

    Runtimes stop a worker with SIGTERM (`docker stop`, the local runtime's process-group kill).
    Python's default for it ends the process on the spot, so no `finally` or temporary directory
    cleanup ran; and in a container the worker is PID 1, for which the kernel drops a signal that
    has no handler: every stop waited out the runtime's grace period and ended in SIGKILL.
    """
    import signal

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def load_job(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    job_path = Path(path or os.environ.get("TRACE_TUI_JOB", "/job/job.json"))
    return json.loads(job_path.read_text(encoding="utf-8"))

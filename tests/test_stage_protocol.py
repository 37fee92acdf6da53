"""The worker side of the stage contract: what protocol writes, and that nothing is held back.

Each case runs a real worker process (the same interpreter, PYTHONUNBUFFERED as the runtimes
set it) and reads its stdout pipe as the runner does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _worker(code: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)}
    return subprocess.Popen([sys.executable, "-c", "from trace_tui.stages import protocol\n" + code],
                            stdout=subprocess.PIPE, env=env)


def test_progress_lines_are_the_json_the_contract_states() -> None:
    proc = _worker("protocol.progress(phase='a\"b\\\\é', done=3, total=10, model='m', seed=42, benchmark='x')\n"
                   "protocol.progress(phase='p', done=True, total=1.0)\n"
                   "protocol.progress(phase='p', done=2, total=1)\n"
                   "protocol.status('completed')\n")
    out, _ = proc.communicate(timeout=60)
    lines = out.decode().splitlines()
    want = [{"type": "progress", "model": "m", "seed": 42, "benchmark": "x", "phase": 'a"b\\é', "done": 3, "total": 10},
            {"type": "progress", "model": None, "seed": None, "benchmark": None, "phase": "p", "done": True, "total": 1.0},
            {"type": "progress", "model": None, "seed": None, "benchmark": None, "phase": "p", "done": 2, "total": 1},
            {"type": "status", "state": "completed", "message": "", "exit_code": 0}]
    assert lines == [json.dumps(w, separators=(",", ":"), sort_keys=True) for w in want]


def test_the_last_progress_before_a_silence_arrives_within_the_flush_interval() -> None:
    """Two quick progress lines, then a long computation: the second is not held until the next event."""
    proc = _worker("import time\nprotocol.progress(phase='p', done=1, total=2)\n"
                   "protocol.progress(phase='p', done=2, total=2)\ntime.sleep(30)\n")
    assert proc.stdout is not None
    try:
        t0 = time.monotonic()
        first = json.loads(proc.stdout.readline())
        second = json.loads(proc.stdout.readline())
        waited = time.monotonic() - t0
    finally:
        proc.kill()
        proc.wait()
    assert (first["done"], second["done"]) == (1, 2)
    assert waited < 10  # generous for a loaded machine, far below the 30 s silence

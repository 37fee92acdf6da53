"""The worker side of the stage contract: what protocol writes, which progress counts it holds
back (coalescing at the source) and that every held count is written before anything after it.

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

import pytest

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
    """Two quick progress lines, then a long computation: the second, which completes its phase, is
    not held until the next event."""
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


def _events(code: str, *, interval: str = "3600", expect_rc: int = 0) -> list[dict]:
    """The events a worker running ``code`` prints; the interval so long that only the coalescing
    rules decide which progress lines are written, never the clock."""
    proc = _worker(f"protocol.PROGRESS_INTERVAL_S = {interval}\n" + code)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == expect_rc
    return [json.loads(line) for line in out.decode().splitlines()]


def _counts(events: list[dict]) -> list:
    return [e["done"] if e["type"] == "progress" else e["type"] for e in events]


@pytest.mark.parametrize("ending, rc", [("", 0), ("import sys\nsys.exit(3)\n", 3), ("raise RuntimeError('x')\n", 1)],
                         ids=["normal end", "sys.exit", "uncaught exception"])
def test_a_burst_is_one_line_then_its_last_count_at_exit(ending: str, rc: int) -> None:
    events = _events("for i in range(20000):\n    protocol.progress(phase='p', done=i + 1, total=10**6)\n" + ending,
                     expect_rc=rc)
    assert _counts(events) == [1, 20000]  # the first announces the slice; the last count is exact


def test_a_held_count_is_written_before_every_other_event() -> None:
    events = _events("p = lambda n: protocol.progress(phase='p', done=n, total=100)\n"
                     "for n in range(1, 6): p(n)\n"
                     "protocol.log('between')\n"
                     "p(6); p(7)\n"
                     "protocol.metric('score', 1.0)\n"
                     "p(8)\n"
                     "protocol.status('completed')\n")
    assert _counts(events) == [1, 5, "log", 7, "metric", 8, "status"]


def test_a_held_count_waits_for_the_next_call_not_for_the_clock() -> None:
    """The staleness bound without a flushing thread: a mid-phase count is held until the next
    call into the protocol (or exit); the count that completes a phase is never held."""
    proc = _worker("import sys\nprotocol.PROGRESS_INTERVAL_S = 3600\n"
                   "protocol.progress(phase='p', done=1, total=3)\nprotocol.progress(phase='p', done=2, total=3)\n"
                   "sys.stdout.write('marker\\n')\n"
                   "protocol.log('next')\n"
                   "protocol.progress(phase='p', done=3, total=3)\nsys.stdout.write('end\\n')\n")
    out, _ = proc.communicate(timeout=60)
    lines = out.decode().splitlines()
    assert [ln if not ln.startswith("{") else _counts([json.loads(ln)])[0] for ln in lines] == \
        [1, "marker", 2, "log", 3, "end"]


def test_each_slice_of_a_batch_worker_keeps_its_own_latest_count() -> None:
    """Slices served in turn by one worker, some interleaved: a count is held for its own slice and
    written before anything of another slice, so every slice's last line is its latest count."""
    events = _events("def p(b, n, phase='rows'):\n"
                     "    protocol.progress(phase=phase, done=n, total=100, model='m', seed=1, benchmark=b)\n"
                     "for b, last in (('t1', 7), ('t2', 4)):\n"
                     "    for n in range(last + 1): p(b, n)\n"
                     "    protocol.status('completed', model='m', seed=1, benchmark=b)\n"
                     "p('t3', 1); p('t3', 2); p('t4', 1); p('t4', 2); p('t3', 3)\n"
                     "p('t3', 4, 'judge'); p('t3', 5, 'judge')\n"
                     "protocol.status('completed', '4 slices')\n")
    got = [(e.get("benchmark"), e["phase"], e["done"]) if e["type"] == "progress"
           else (e.get("benchmark"), e["type"]) for e in events]
    assert got == [("t1", "rows", 0), ("t1", "rows", 7), ("t1", "status"),
                   ("t2", "rows", 0), ("t2", "rows", 4), ("t2", "status"),
                   ("t3", "rows", 1), ("t3", "rows", 2), ("t4", "rows", 1), ("t4", "rows", 2), ("t3", "rows", 3),
                   ("t3", "judge", 4), ("t3", "judge", 5), (None, "status")]


def test_a_stream_passed_as_new_equal_objects_each_call_is_still_one_stream() -> None:
    events = _events("for i in range(1000):\n"
                     "    protocol.progress(phase=''.join(['ph', 'ase']), done=i + 1, total=int('1000000'),\n"
                     "                      model=f'm{1}', seed=int('7'), benchmark=f'b{2}')\n"
                     "protocol.status('completed')\n")
    assert _counts(events) == [1, 1000, "status"]


def test_an_interval_of_zero_writes_every_count() -> None:
    events = _events("for i in range(500):\n    protocol.progress(phase='p', done=i + 1, total=10**6)\n",
                     interval="0")
    assert _counts(events) == list(range(1, 501))


def test_the_interval_comes_from_the_workers_environment() -> None:
    code = ("from trace_tui.stages import protocol\nprint(protocol.PROGRESS_INTERVAL_S)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)}
    for value, want in (("0", "0.0"), ("0.2", "0.2"), ("not a number", "0.05"), ("-1", "0.0")):
        out = subprocess.run([sys.executable, "-c", code], env={**env, "TRACE_TUI_PROGRESS_INTERVAL_S": value},
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert out.strip() == want, value


def test_a_count_held_for_a_redirected_stdout_goes_to_that_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    import io

    from trace_tui.stages import protocol

    monkeypatch.setattr(protocol, "PROGRESS_INTERVAL_S", 3600)
    first, second = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(first):
        for n in (1, 2, 3):
            protocol.progress(phase="p", done=n, total=10)
    with contextlib.redirect_stdout(second):
        protocol.log("elsewhere")
    assert _counts([json.loads(x) for x in first.getvalue().splitlines()]) == [1, 3]
    assert _counts([json.loads(x) for x in second.getvalue().splitlines()]) == ["log"]

"""verify's worker processes (trace_tui.verify.workers): results in the parts' order, from forked processes only
where forking is safe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from trace_tui.verify.workers import ordered_map


def _where(part: list[int]) -> tuple[list[int], int]:
    return [x * 2 for x in part], os.getpid()


FORKED = """
import json, os
from trace_tui.verify.workers import ordered_map

def where(part):
    return [x * 2 for x in part], os.getpid()

parts = [[i, i + 1] for i in range(0, 40, 2)]
print(json.dumps({"me": os.getpid(), "got": list(ordered_map(where, parts, 2))}))
"""


def test_parts_are_worked_in_forked_processes_and_come_back_in_order() -> None:
    """In a process of its own, as `trace-tui verify` runs: this test process may hold other tests' threads,
    where nothing is forked (the next test)."""
    done = subprocess.run([sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    parts = [[i, i + 1] for i in range(0, 40, 2)]
    assert [r for r, _pid in out["got"]] == [[x * 2 for x in p] for p in parts]
    pids = {pid for _r, pid in out["got"]}
    assert out["me"] not in pids and 1 <= len(pids) <= 2


def test_one_worker_or_one_part_stays_in_this_process() -> None:
    assert {pid for _r, pid in ordered_map(_where, [[1], [2]], 1)} == {os.getpid()}
    assert {pid for _r, pid in ordered_map(_where, [[1]], 4)} == {os.getpid()}


def test_with_other_threads_running_nothing_is_forked() -> None:
    """A fork copies the locks other threads hold, held (the TUI verifies in a worker thread)."""
    got: list[tuple[list[int], int]] = []
    worker = threading.Thread(target=lambda: got.extend(ordered_map(_where, [[1], [2], [3]], 2)))
    worker.start()
    worker.join()
    assert [r for r, _pid in got] == [[2], [4], [6]] and {pid for _r, pid in got} == {os.getpid()}

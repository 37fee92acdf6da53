"""A step's jobs over its GPU groups at run time: one thread per group, each container on its own GPUs.

Single-slice jobs start in the queue of the group they were dealt to (trace_tui.engine.planner's
deal_queues); a group that runs out of its own takes the last job of the longest other queue (work
stealing). A keep_loaded step's batches are not stolen: each group's worker keeps its model.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from trace_tui.engine.cancellation import Cancellation
from trace_tui.engine.planner import PlannedJob, deal_queues

RunJob = Callable[[PlannedJob, list[int]], "str | None"]  # (job, host GPUs) -> a failure line, or None
RunBatch = Callable[[list[PlannedJob], list[int], str], list[str]]  # (jobs, host GPUs, worker) -> failure lines


def _in_threads(groups: list[list[int]], indices: list[int], work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(i,), name=f"gpu-group-{'-'.join(map(str, groups[i]))}")
               for i in indices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_on_groups(todo: list[PlannedJob], groups: list[list[int]], dealt: dict[str, int], run_job: RunJob,
                  cancellation: Cancellation) -> list[str]:
    """Every job of ``todo`` on one of ``groups`` (``dealt``: a slice's group by the plan); the failure lines."""
    failed: list[str] = []
    if len(groups) == 1 or len(todo) == 1:
        for j in todo:
            if cancellation.is_set():
                break
            err = run_job(j, groups[0])
            if err:
                failed.append(err)
        return failed
    queues = [collections.deque(q) for q in deal_queues(todo, len(groups), dealt)]
    lock = threading.Lock()

    def next_job(me: int) -> PlannedJob | None:
        with lock:
            if queues[me]:
                return queues[me].popleft()
            other = max(range(len(queues)), key=lambda k: len(queues[k]))
            return queues[other].pop() if queues[other] else None

    def worker(me: int) -> None:
        while not cancellation.is_set():
            j = next_job(me)
            if j is None:
                return
            err = run_job(j, groups[me])
            if err:
                with lock:
                    failed.append(err)

    _in_threads(groups, list(range(len(groups))), worker)
    return failed


def run_batches(batches: list[list[PlannedJob]], groups: list[list[int]], run_batch: RunBatch) -> list[str]:
    """One worker per GPU group with slices, all at once; each serves its batch in turn. The failure lines."""
    failed: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        errs = run_batch(batches[i], groups[i], f"_worker-{i}")
        with lock:
            failed.extend(errs)

    mine = [i for i, b in enumerate(batches) if b]
    if len(mine) == 1:
        worker(mine[0])
    else:
        _in_threads(groups, mine, worker)
    return failed

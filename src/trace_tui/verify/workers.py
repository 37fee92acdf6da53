"""A function over parts of a work list in forked worker processes, its results in the parts' order."""

from __future__ import annotations

import gc
import multiprocessing
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

Result = TypeVar("Result")

# The function the forked workers call: inherited by fork, so neither it nor what it holds is pickled; only each
# part goes to a worker and each result comes back.
_work: Callable[[Any], Any] | None = None


def _start_worker() -> None:
    # A worker holds a part's many small objects (parsed rows) and makes no garbage that needs the cycle collector
    # (what it drops is freed as it goes): its collections, each walking all it holds, took a sixth of its time.
    # Collected once after each part.
    gc.disable()


def _call(part: object) -> object:
    assert _work is not None
    try:
        return _work(part)
    finally:
        gc.collect()


def ordered_map(fn: Callable[[Any], Result], parts: list[Any], workers: int) -> Iterator[Result]:
    """``fn(part)`` for each part, in that order: in ``workers`` forked processes when there are several parts; in
    this process when there is one, when fork is not available, or when other threads run here (a fork copies the
    locks they hold, held: the TUI verifies in a worker thread)."""
    global _work
    workers = min(len(parts), workers)
    if workers <= 1 or threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(fn, parts)
        return
    _work = fn
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_start_worker) as pool:
            yield from pool.imap(_call, parts)
    finally:
        _work = None

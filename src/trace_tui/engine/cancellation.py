"""A run's stop flag and the workers running now: ``cancel()`` from any thread (or a signal handler)
sets the flag and stops each of them, without waiting."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from trace_tui.runtime.base import Handle


class Cancellation:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._handles: set[Handle] = set()
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Thread-safe and returns at once: each running worker is stopped in a thread of its own."""
        self._event.set()
        with self._lock:
            handles = list(self._handles)
        for h in handles:
            threading.Thread(target=h.stop, daemon=True).start()

    def is_set(self) -> bool:
        return self._event.is_set()

    @contextmanager
    def running(self, handle: Handle) -> Iterator[Handle]:
        """``handle`` is stopped by a cancel while the block runs, including one that came as it started."""
        with self._lock:
            self._handles.add(handle)
        if self._event.is_set():  # cancel() raced with start(): stop what was just started
            handle.stop()
        try:
            yield handle
        finally:
            with self._lock:
                self._handles.discard(handle)

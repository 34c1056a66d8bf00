"""`StopSignal`: the Stop button's event, which can also interrupt a blocked read.

A `threading.Event` checked between chunks is not enough when a read blocks on a stalled
server: the thread waiting for bytes never gets to the check. So whoever holds a resource that
can block (an HTTP stream, a child process) registers a callback that releases it, and `set()`
runs the callbacks at once, from the thread that pressed Stop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["StopSignal"]

log = logging.getLogger(__name__)


class StopSignal(threading.Event):
    """An event whose `set()` also calls the registered callbacks (each at most once)."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], object]] = []
        self._callbacks_lock = threading.Lock()

    def add_callback(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run `callback` when the signal is set (now, if it already is); returns a remover."""
        with self._callbacks_lock:
            if not self.is_set():
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
        _run(callback)
        return lambda: None

    def _remove(self, callback: Callable[[], object]) -> None:
        with self._callbacks_lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def set(self) -> None:
        with self._callbacks_lock:
            super().set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run(callback)


def _run(callback: Callable[[], object]) -> None:
    # A failing release must not stop the others; it is logged, not hidden.
    try:
        callback()
    except Exception:
        log.exception("a stop callback failed")

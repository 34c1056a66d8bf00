"""`StopSignal`: the Stop button's event, which can also interrupt a blocked read; waits on the
main thread that an interrupt can end (`wait_slice`, `wait_event`); and a wait's `Deadline`.

A `threading.Event` checked between chunks is not enough when a read blocks on a stalled
server: the thread waiting for bytes never gets to the check. So whoever holds a resource that
can block (an HTTP stream, a child process) registers a callback that releases it, and `set()`
runs the callbacks at once, from the thread that pressed Stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["Deadline", "StopSignal", "wait_event", "wait_slice"]

SIGNAL_SLICE = 0.25  # the longest the main thread waits before it looks for a signal (seconds)

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


class Deadline:
    """The end of a wait of `timeout` seconds from now (None: no end)."""

    def __init__(self, timeout: float | None) -> None:
        self._end = None if timeout is None else time.monotonic() + timeout

    def over(self) -> bool:
        return self._end is not None and time.monotonic() >= self._end

    def left(self) -> float | None:
        return None if self._end is None else max(0.0, self._end - time.monotonic())


def wait_slice(left: float | None) -> float | None:
    """How long this thread may wait at once, `left` being the time it has (None: no end).

    On the main thread, at most `SIGNAL_SLICE`: an interrupt (Ctrl-C, the kernel's Interrupt,
    SIGTERM) that the OS hands to another thread, say the one streaming the reply, only marks
    the signal, and Python runs its handler on the main thread once that wakes; a wait with no
    end would hold the interrupt until the reply ended. Elsewhere, `left`."""
    if threading.current_thread() is not threading.main_thread():
        return left
    return SIGNAL_SLICE if left is None else min(left, SIGNAL_SLICE)


def wait_event(event: threading.Event, timeout: float | None = None) -> bool:
    """`event.wait(timeout)`, in slices on the main thread (see `wait_slice`)."""
    deadline = Deadline(timeout)
    while not event.wait(wait_slice(deadline.left())):
        if deadline.over():
            return False
    return True

"""`Heartbeat`: calls a function every few seconds on a daemon thread, until stopped.

A `Store` runs one while it holds writer leases, to renew them before they expire even when
the kernel sends nothing for a while (see `nbchat.lease`). It holds only a weak reference to
the function's object, so a store nobody uses any more is not kept alive by its heartbeat (its
leases then expire, and another kernel may take the sessions over).

Must not: know what the beat does; it only logs a beat that failed and goes on.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)


class Heartbeat:
    """Calls `beat` every `interval` seconds on a thread named `name` (started by `start`)."""

    def __init__(self, beat: Callable[[], None], *, interval: float, name: str) -> None:
        self._beat = weakref.WeakMethod(beat)
        self.interval = interval
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start beating (a no-op while it runs)."""
        with self._lock:
            if self.running:
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name=self.name, daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop beating and wait for a beat in progress to end."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            beat = self._beat()
            if beat is None:  # its object is gone
                return
            try:
                beat()
            except Exception:  # retried at the next beat; a write meanwhile reports for itself
                log.warning("%s failed; retrying in %gs", self.name, self.interval, exc_info=True)
            del beat

"""`IdleWatch`: ends a streamed reply that sends no data for too long.

httpx's read timeout is per socket read, so a server that sends only SSE keep-alive comments
(`: ping`) resets it forever while the reply never moves. The reader calls `touch()` at every
data chunk; a watcher thread calls `on_idle` (which shuts the stream's socket, so the blocked
read ends) once `timeout` seconds pass without one, and `fired` tells the reader why it ended.

Must not: read the stream or classify errors; `nbchat.client` does both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["IdleWatch"]


class IdleWatch:
    """Call `on_idle` once when `touch()` was not called for `timeout` seconds (None: never)."""

    def __init__(self, timeout: float | None, on_idle: Callable[[], None]) -> None:
        self.timeout = timeout
        self.fired = False
        self._on_idle = on_idle
        self._last = time.monotonic()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def touch(self) -> None:
        """Data arrived: the idle time starts again (one float store, cheap on every chunk)."""
        self._last = time.monotonic()

    def __enter__(self) -> IdleWatch:
        if self.timeout is not None and self.timeout > 0:
            self._last = time.monotonic()
            self._thread = threading.Thread(target=self._watch, name="nbchat-idle", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        assert self.timeout is not None
        while True:
            left = self._last + self.timeout - time.monotonic()
            if left <= 0:
                self.fired = True
                self._on_idle()
                return
            if self._done.wait(left):
                return

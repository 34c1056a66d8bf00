"""`Worker`: the one background thread of a `ChatUI`, running jobs one at a time.

The kernel thread only enqueues jobs and flips a stop signal, so clicks are handled at once
while a reply streams. `wait()` returns when every submitted job has finished; `close()` ends
the thread and joins it, so no thread outlives its widget.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

__all__ = ["Worker"]

log = logging.getLogger(__name__)
Job = Callable[[], None]


class Worker:
    """A lazily started daemon thread with a job queue and an idle event."""

    def __init__(self, name: str = "nbchat-worker") -> None:
        self._name = name
        self._jobs: queue.Queue[tuple[Job, bool] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False
        self._idle_listeners: list[Callable[[], None]] = []

    def on_idle(self, listener: Callable[[], None]) -> None:
        """Call `listener` (on the worker thread) each time the last pending job finishes."""
        self._idle_listeners.append(listener)

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    def submit(self, job: Job, *, background: bool = False) -> None:
        """Run `job` on the worker thread after the jobs already queued. A `background` job
        (idle work, `nbchat.ui.background`) does not make the worker busy."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this chat was closed; create a new ChatUI")
            if not background:
                self._pending += 1
                self._idle.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._jobs.put((job, background))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every submitted job has finished; False if `timeout` passed first."""
        return self._idle.wait(timeout)

    def close(self, timeout: float | None = 10.0) -> bool:
        """Finish the queued jobs, end the thread and join it; True when it has ended."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            return True
        self._jobs.put(None)
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        while True:
            queued = self._jobs.get()
            if queued is None:
                return
            job, background = queued
            try:
                job()
            except Exception:  # a job must show its own errors; this is the last resort
                log.exception("an nbchat worker job failed")
            finally:
                with self._lock:
                    self._pending -= 0 if background else 1
                    idle = self._pending == 0
                    if idle:
                        self._idle.set()
                for listener in self._idle_listeners if idle else ():
                    listener()

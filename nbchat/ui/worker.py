"""The chat's one worker thread, the failed turns it collects, and the idle-time work it runs
after a turn.

`Worker`: the one background thread of a `ChatUI`, running jobs one at a time. The kernel
thread only enqueues jobs and flips a stop signal, so clicks are handled at once while a reply
streams. `wait()` returns when every submitted job has finished; `close()` ends the thread and
joins it, so no thread outlives its widget.

`CellReport`: what a `ChatUI` tells the cell that drives it, failures that happened since the
last `wait()`. A widget's HTML is invisible to a script, to nbconvert and to anyone reading a
saved notebook's text, so every failure (a failed turn, no model server, a session database
that cannot be opened) is also kept here and printed by `wait()` on stderr, which lands in the
calling cell's output, and makes `wait()` return False.

`IdleWork`: what a `ChatUI` does on its worker while the user reads. When a turn has ended the
widget queues one idle job: `Conversation.use_idle_moment`, which prepares the next
compaction's summary, applies it when the next turn would need it (shown like any compaction)
and warms the new prefix. The user always comes first: sending, Stop, New, switching session and
closing call `cancel()`, whose signal closes the summary's (or the warm-up's) HTTP stream at
once, so the server is free again and the turn queued behind starts; the work resumes at the
next idle moment. Idle jobs do not count as busy: Send and Stop stay as they were, and
`ChatUI.wait()` does not wait for them (`Worker.wait()` does).

Must not: touch widgets, write to the store or talk to the server itself (the conversation
does); failures are only collected and printed as text.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable

from nbchat.compaction.result import CompactionResult
from nbchat.conversation.loop import Conversation
from nbchat.stopping import StopSignal, wait_event

__all__ = ["CellReport", "IDLE_GRACE", "IdleWork", "Worker", "database_message"]


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
        (idle work, `nbchat.ui.worker`) does not make the worker busy."""
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
        return wait_event(self._idle, timeout)  # an interrupt ends it (`wait_slice`)

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


class CellReport:
    """Failure messages collected on the worker thread, reported (once) to the cell."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: list[str] = []

    def add(self, message: str) -> None:
        with self._lock:
            if message not in self._messages:  # the same failure twice is one failure
                self._messages.append(message)

    def report(self) -> bool:
        """Print what failed since the last report on stderr; True when nothing did."""
        with self._lock:
            messages, self._messages = self._messages, []
        for message in messages:
            print(f"nbchat: {message}", file=sys.stderr, flush=True)
        return not messages


def database_message(error: Exception) -> str:
    """The message for a session database that cannot be opened: the store's own words (they
    say what happened and what to do; saying it again here once doubled the advice)."""
    return f"The chat cannot start: {str(error).strip()}"


# Idle work starts this long after a turn ends: a reader takes longer to answer, and a script
# that sends at once never starts a summary it would cancel (llama.cpp reads a prompt batch to
# its end before it notices the request was closed).
IDLE_GRACE = 2.0


class IdleWork:
    """Queues, cancels and waits for the idle job of one widget."""

    def __init__(
        self,
        worker: Worker,
        conversation: Conversation,
        *,
        changed: Callable[[], None],
        applied: Callable[[CompactionResult], None],
    ) -> None:
        self._worker = worker
        self._conversation = conversation
        self._changed = changed  # refreshes the meter ("preparing…", "checkpoint ready")
        self._applied = applied  # shows a compaction made while the user read
        self._cancel = StopSignal()
        self._finished = threading.Event()
        self._finished.set()

    def schedule(self) -> None:
        """Queue one idle job behind whatever the worker has queued."""
        cancel = self._cancel = StopSignal()
        finished = self._finished = threading.Event()

        def job() -> None:
            try:
                result = None
                if not cancel.wait(IDLE_GRACE):
                    result = self._conversation.use_idle_moment(cancel, self._changed)
                if result is not None:
                    self._applied(result)
            except Exception:  # idle work is an optimisation: a bug is logged, never shown
                log.exception("idle work failed")
            finally:
                finished.set()
                self._changed()

        try:
            self._worker.submit(job, background=True)
        except RuntimeError:  # the widget was closed meanwhile
            finished.set()

    def cancel(self) -> None:
        """Stop the idle job now (its HTTP stream is closed); it runs again at the next idle
        moment."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the last queued idle job has ended; False on timeout."""
        return wait_event(self._finished, timeout)

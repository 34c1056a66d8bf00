"""`IdleWork`: what a `ChatUI` does on its worker while the user reads.

When a turn has ended the widget queues one idle job: `Conversation.use_idle_moment`, which
prepares the next compaction's summary, applies it when the next turn would need it (shown like
any compaction) and warms the new prefix. The user always comes first: sending, Stop, New,
switching session and closing call `cancel()`, whose signal closes the summary's (or the
warm-up's) HTTP stream at once, so the server is free again and the turn queued behind starts;
the work resumes at the next idle moment. Idle jobs do not
count as busy: Send and Stop stay as they were, and `ChatUI.wait()` does not wait for them
(`wait()` here does).

Must not: write to the store or talk to the server itself (the conversation does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from nbchat.compaction.result import CompactionResult
from nbchat.conversation.loop import Conversation
from nbchat.stopping import StopSignal
from nbchat.ui.worker import Worker

__all__ = ["IDLE_GRACE", "IdleWork"]

log = logging.getLogger(__name__)

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
        return self._finished.wait(timeout)

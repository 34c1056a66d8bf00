"""What a `ChatUI` tells the cell that drives it: failures that happened since the last `wait()`.

A widget's HTML is invisible to a script, to nbconvert and to anyone reading a saved notebook's
text, so every failure (a failed turn, no model server, a session database that cannot be opened)
is also kept here and printed by `wait()` on stderr, which lands in the calling cell's output,
and makes `wait()` return False.

Must not: touch widgets or the store; it only collects and prints text.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["CellReport", "database_message"]


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

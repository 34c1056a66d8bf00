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
from pathlib import Path

__all__ = ["CellReport", "database_message"]

CORRUPT_SIGNS = ("not a database", "malformed", "corrupt", "disk image")


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


def database_message(error: Exception, path: Path) -> str:
    """One message for a session database that cannot be opened, saying what to do."""
    text = str(error).strip()
    lowered = text.lower()
    advice = ""
    if "locked" in lowered:
        advice = (
            f" Close the program that holds {path} (another kernel's long write, a sqlite3 "
            "shell), then create the ChatUI again."
        )
    elif any(sign in lowered for sign in CORRUPT_SIGNS):
        advice = (
            f" Nothing was changed in {path}. Move it aside (`mv {path} {path}.bad`; a new one "
            "is created) or point NBCHAT_DB_PATH at another file, then create the ChatUI again."
        )
    check = "" if "nbchat doctor" in text else " `nbchat doctor` checks the database."
    return f"The chat cannot start: {text}{advice}{check}"

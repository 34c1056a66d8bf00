"""`SessionPicker`: the header's list of sessions, titles newest first, the current one
selected; choosing another one switches the chat to it.

Both the worker and the kernel thread refresh it, hence the lock; a refresh does not count as
the user choosing. Reads the store's session list only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from nbchat.conversation.loop import Conversation
from nbchat.store.store import Store

__all__ = ["SessionPicker"]


class SessionPicker:
    """The dropdown (`widget`); `switch(session_id)` runs when the user picks a session."""

    def __init__(
        self, store: Store, conversation: Conversation, *, switch: Callable[[str | None], None]
    ) -> None:
        self.store = store
        self.conversation = conversation
        self.switch = switch
        self._lock = threading.Lock()
        self._updating = False
        self.widget = widgets.Dropdown(options=[], layout=widgets.Layout(width="260px"))
        self.widget.observe(self._on_widget_change, names="value")

    @property
    def choices(self) -> list[tuple[str, str | None]]:
        """(label, session id) of each entry, the current session included."""
        return list(self.widget.options)

    def choose(self, session_id: str) -> None:
        """Pick a session, as the user does."""
        self.widget.value = session_id

    def refresh(self) -> None:
        """Fill the list (titles, newest first) and select the current session."""
        with self._lock:
            current = self.conversation.session_id
            sessions = self.store.list_sessions()
            options: list[tuple[str, str | None]] = [
                (f"{s.title} · {s.updated[:16].replace('T', ' ')}", s.id) for s in sessions
            ]
            if current not in [value for _, value in options]:
                options.insert(0, ("New chat", current))
            self._updating = True
            try:
                self.widget.options = options
                self.widget.value = current
            finally:
                self._updating = False

    def _on_widget_change(self, change: dict[str, Any]) -> None:
        if not self._updating and change["new"] != self.conversation.session_id:
            self.switch(change["new"])

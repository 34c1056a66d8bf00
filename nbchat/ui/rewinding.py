"""Rewinding from the chat: the "rewind to here" button under each of the user's messages,
`ui.rewind(back)` and `/rewind [n]`, all running the same flow on the chat's worker.

The flow: the conversation takes the chat and the notebook back together
(`nbchat.conversation.session`), the message list is rebuilt from the store (the archived rows
stay in it, marked, as after an edit), the message's text goes back in the input, and a notice
says what happened to each cell (restored, removed, or left alone because the user edited it
by hand). A chat without a notebook (a script, no kernel) rewinds the chat alone. The work runs
on the worker because the page's answers to the notebook changes arrive on the kernel's main
thread, which a click handler would block.

Also here: the variables' note about cells that changed or went, for the variables' listing.
No SQL, HTTP or prompt text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import ipywidgets as widgets

from nbchat.conversation.loop import Conversation
from nbchat.errors import NbchatError
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.tools.cells import NoDocument, stale_variables
from nbchat.ui.acting import NotebookActing, rewind_button
from nbchat.ui.cards import row_widget
from nbchat.ui.controls import ChatInput

__all__ = ["RewindTarget", "start_rewind", "stale_notes", "user_widget"]

NOTHING_TO_REWIND = "There is no earlier message of yours to rewind to (back={back})."


class RewindTarget(Protocol):
    """What the rewind uses of the chat widget (`ChatUI` has all of it)."""

    store: Store
    conversation: Conversation
    input: ChatInput
    acting: NotebookActing | None

    @property
    def busy(self) -> bool: ...

    def notice(self, text: str) -> None: ...

    def show_session(self) -> None: ...

    def submit_job(self, job: Callable[[], None]) -> None: ...


def user_widget(ui: RewindTarget, row: Row, row_id: int | None) -> widgets.Widget:
    """A user's message, with its "rewind to here" button when it is in the active history."""
    bubble = row_widget(row)
    if row_id is None:
        return bubble
    return rewind_button(bubble, lambda: start_rewind(ui, row_id=row_id))


def start_rewind(ui: RewindTarget, *, back: int = 1, row_id: int | None = None) -> None:
    """Rewind to the message `row_id`, or `back` of the user's messages ago, on the worker."""
    if ui.busy:
        ui.notice("A reply is still running; press Stop first, then rewind.")
        return
    if row_id is None:
        row_id = _message_back(ui, back)
        if row_id is None:
            ui.notice(NOTHING_TO_REWIND.format(back=back))
            return
    target = row_id

    def job() -> None:
        try:
            if ui.acting is not None:
                done = ui.acting.rewind(target)
            else:
                done = ui.conversation.rewind(target, _NO_NOTEBOOK)
        except NbchatError as exc:
            ui.notice(str(exc))
            return
        ui.show_session()
        ui.input.value = done.text
        for line in done.summary().splitlines():  # a notice is one line: one per change
            ui.notice(line)

    ui.submit_job(job)


def _message_back(ui: RewindTarget, back: int) -> int | None:
    session_id = ui.conversation.session_id
    if session_id is None or back < 1:
        return None
    users = [
        s.id
        for s in ui.store.load_full(session_id, problems=[])
        if not s.archived and s.row.role == "user"
    ]
    return users[-back] if back <= len(users) else None


def stale_notes(acting: NotebookActing | None) -> list[str]:
    """`name: set by In [N], whose cell …` for the variables whose cell changed or went (none
    without an open notebook)."""
    if acting is None or acting.document.why_absent():
        return []
    state = acting.state
    return stale_variables(state.origins(), acting.document.cells(), state.executions())


_NO_NOTEBOOK = NoDocument("this chat does not run in a notebook's kernel.")

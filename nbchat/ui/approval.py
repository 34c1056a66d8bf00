"""`ApprovalDesk`: a tool call waiting on the user. The approver a `ChatUI` gives its
conversation: it shows an `ApprovalCard`, pauses the turn (on the worker) until Approve, Deny
or Stop, and lets cells and tests find the waiting card (`wait_for`, `waiting_card`).

An edit of a cell shows its diff with Accept, Accept all and Reject; "Accept all" accepts the
rest of the reply's edits too (each still shown with its diff). A run shows exactly its code,
with Run and Don't run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nbchat.errors import NbchatError
from nbchat.stopping import StopSignal
from nbchat.tools import ApprovalRequest
from nbchat.ui.cards import ApprovalCard
from nbchat.ui.messages import MessageList
from nbchat.ui.review import render_review
from nbchat.ui.view import EventView

__all__ = ["ApprovalDesk"]

EDIT = "edit_cell"


class ApprovalDesk:
    """Asks in `messages`; `stop` gives the running turn's stop signal (Stop answers no)."""

    def __init__(
        self, messages: MessageList, view: EventView, *, stop: Callable[[], StopSignal]
    ) -> None:
        self.messages = messages
        self.view = view
        self.stop = stop
        self._shown = threading.Event()
        self._pending: ApprovalCard | None = None
        self._all_edits: StopSignal | None = None  # the turn whose edits were all accepted

    def ask(self, request: ApprovalRequest) -> bool:
        """Show the card and wait (on the worker) for the user's decision. An edit after
        "Accept all" in the same reply is shown accepted, without asking again."""
        stop = self.stop()
        card = _card_for(request)
        self.messages.add(card.widget)
        if request.name == EDIT and self._all_edits is stop:
            card.approve_all()
            return True
        self.view.set_status(f"waiting for your approval to run {request.name}…")
        self._pending = card
        self._shown.set()
        try:
            approved = card.wait(stop)
        finally:
            self._shown.clear()
            self._pending = None
        if card.approved_all:
            self._all_edits = stop  # this reply's turn: the next turn asks again
        return approved

    def wait_for(self, timeout: float | None = None) -> ApprovalCard | None:
        """The card waiting for a decision, once there is one; None on timeout."""
        if not self._shown.wait(timeout):
            return None
        return self._pending

    def waiting_card(self) -> ApprovalCard:
        card = self._pending
        if card is None:
            raise NbchatError("Nothing is waiting for approval: wait_for_approval() first.")
        return card


def _card_for(request: ApprovalRequest) -> ApprovalCard:
    """The plain card, or for an edit or a run the diff or the exact code (`nbchat.ui.review`)."""
    review = request.review
    if review is None:
        return ApprovalCard(request.name, request.arguments, reason=request.reason)
    question = render_review(request.name, review)
    if request.name == EDIT:
        labels = ("Accept", "Reject")
        return ApprovalCard(
            request.name, request.arguments, question=question, labels=labels, also="Accept all"
        )
    return ApprovalCard(
        request.name, request.arguments, question=question, labels=("Run", "Don't run")
    )

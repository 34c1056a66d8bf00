"""`ApprovalDesk`: a tool call waiting on the user. The approver a `ChatUI` gives its
conversation: it shows an `ApprovalCard`, pauses the turn (on the worker) until Approve, Deny
or Stop, and lets cells and tests find the waiting card (`wait_for`, `waiting_card`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nbchat.errors import NbchatError
from nbchat.stopping import StopSignal
from nbchat.tools import ApprovalRequest
from nbchat.ui.cards import ApprovalCard
from nbchat.ui.messages import MessageList
from nbchat.ui.view import EventView

__all__ = ["ApprovalDesk"]


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

    def ask(self, request: ApprovalRequest) -> bool:
        """Show the card and wait (on the worker) for the user's decision."""
        card = ApprovalCard(request.name, request.arguments, reason=request.reason)
        self.messages.add(card.widget)
        self.view.set_status(f"waiting for your approval to run {request.name}…")
        self._pending = card
        self._shown.set()
        try:
            return card.wait(self.stop())
        finally:
            self._shown.clear()
            self._pending = None

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

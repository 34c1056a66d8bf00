"""`CompactionFlow`: what a `ChatUI` does for compaction you steer.

`/compact [focus]` and the Compact button ask for a preview and show it as a `PreviewCard`;
Accept (or Edit, then accept) applies it, first asking for a confirmation when the edited
summary would put the history over the compaction trigger; Discard drops it. Every compaction
card in the chat, automatic ones too, shows what it replaced and an Undo button while it is the
latest; Undo (or `/undo-compact`) takes it back, first asking for a confirmation when the
history would be over the compaction trigger again. The work runs as turns on the chat's worker
(`run_turn`), so Stop, the busy state and the failure reporting work as for a reply; clicks only
queue it.

No SQL, HTTP or prompt text: the conversation (`nbchat.conversation.steer`) does the work; the
store is only read (the compaction records, the rows a record archived).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Protocol

import ipywidgets as widgets

from nbchat.compaction.result import CompactionResult
from nbchat.conversation.events import CompactionFinished, CompactionStarted, Done, Event, Failed
from nbchat.conversation.loop import Conversation
from nbchat.errors import NbchatError
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.store.undo import KINDS
from nbchat.ui.cards import row_widget
from nbchat.ui.compactcard import CompactionCard, Confirmation, PreviewCard
from nbchat.ui.messages import MessageList
from nbchat.ui.render import render_notice

__all__ = ["CompactionFlow", "FlowHost"]

Steps = Iterator[Event]


class FlowHost(Protocol):
    """What the flow uses of the chat widget (`ChatUI` has all of it)."""

    store: Store
    conversation: Conversation
    messages: MessageList

    def notice(self, text: str) -> None: ...

    def show_session(self) -> None: ...

    def run_turn(self, start: Callable[[threading.Event], Iterator[Event]]) -> None: ...


class CompactionFlow:
    """Preview → accept/edit/discard, and undo, for one chat widget."""

    def __init__(self, host: FlowHost) -> None:
        self.host = host
        self.preview_card: PreviewCard | None = None  # the newest one, decided or not
        self.confirmation: Confirmation | None = None
        self._cards: list[CompactionCard] = []

    # What the buttons and commands start (kernel thread: they only queue work)

    def preview(self, focus: str | None = None) -> None:
        """Propose a compaction (the Compact button, `/compact [focus]`)."""
        self.host.run_turn(lambda stop: self._preview(focus, stop))

    def undo(self, record_id: int | None = None, *, force: bool = False) -> None:
        """Undo the latest compaction (`/undo-compact`, the card's Undo button)."""
        self.host.run_turn(lambda _stop: self._undo(record_id, force=force))

    def press_undo(self) -> None:
        """Press Undo on the newest card that offers it."""
        card = next((c for c in reversed(self._cards) if c.can_undo), None)
        if card is None:
            raise NbchatError("No compaction card offers Undo; /undo-compact undoes the latest.")
        card.press_undo()

    # The cards

    def live_card(self, result: CompactionResult) -> widgets.Widget:
        """The card for a compaction that just happened (automatic or accepted)."""
        session_id = self.host.conversation.session_id
        info = self._records()[-1] if session_id else {}
        if result.edit.summary_row is None:  # pruned only: the placeholders are not shown
            text = f"Pruned old tool output: ~{result.tokens_before:,} → ~{result.tokens_after:,}"
            info = {**info, "rows_replaced": result.edit.rows_pruned}
            text = f"{text} tokens (read it back with read_archived_output)."
            return self._card(text, info, pruned=True)
        info = {
            **info,
            "rows_replaced": result.edit.rows_summarised,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
        }
        return self._card(result.edit.summary_row.content, info)

    def stored_card(self, row: Row, info: dict[str, Any] | None) -> widgets.Widget:
        """The card for a `compacted` row of a loaded session (`info`: its record)."""
        if info is None:
            return row_widget(row)
        latest = self._latest_undoable()
        return self._card(row.content, info, undoable=info.get("id") == latest)

    def _card(
        self, text: str, info: dict[str, Any], *, undoable: bool = True, pruned: bool = False
    ) -> widgets.Widget:
        record_id = info.get("id")
        undoable = undoable and record_id is not None
        card = CompactionCard(
            text,
            info,
            replaced=lambda: self._replaced(record_id),
            on_undo=self._on_undo if undoable else None,
            pruned=pruned,
        )
        if undoable:  # only the latest compaction can be undone: older cards lose the button
            for older in self._cards:
                older.hide_undo()
            self._cards = [card]
        return card.widget

    # Work on the worker thread

    def _preview(self, focus: str | None, stop: threading.Event) -> Steps:
        conversation = self.host.conversation
        yield CompactionStarted("manual")
        covered = list(conversation.history.rows)
        try:
            result = conversation.preview_compaction(focus, stop)
        except NbchatError as exc:
            yield Failed(exc, str(exc))
            return
        if not result.changed:
            yield CompactionFinished(result)  # "Nothing compacted: <why>"
        else:
            card = PreviewCard(
                result, covered, on_accept=self._on_accept, on_discard=self._on_discard
            )
            self.preview_card = card
            self.host.messages.add(card.widget)
        yield Done(stopped=stop.is_set())

    def _accept(self, card: PreviewCard, text: str | None, *, force: bool = False) -> Steps:
        if card.decision:  # accepted or discarded while this job waited
            return
        conversation = self.host.conversation
        warning = "" if force else conversation.steering.edit_warning(card.result, text)
        if warning:  # the card stays open: shorten the text, or accept it anyway
            self._confirm(
                warning, partial(self._on_accept, card, text, force=True), yes="Accept anyway"
            )
            yield Done()
            return
        card.mark("accepting")
        yield CompactionStarted("manual")
        try:
            applied = conversation.accept_compaction(card.result, text, force=force)
        except NbchatError as exc:
            card.mark("refused")
            yield Failed(exc, str(exc))
            return
        card.mark("accepted")
        yield CompactionFinished(applied)
        yield Done()

    def _undo(self, record_id: int | None, *, force: bool) -> Steps:
        try:
            outcome = self.host.conversation.undo_compaction(force=force, record_id=record_id)
        except NbchatError as exc:
            self._reoffer()
            yield Failed(exc, str(exc))
            return
        if outcome.done:
            self._cards = []  # the rebuilt transcript makes its own cards
            self.host.show_session()
            self.host.notice(outcome.message)
        else:
            self._confirm(
                outcome.warning, lambda: self.undo(record_id, force=True), yes="Undo anyway"
            )
            self._reoffer()
        yield Done()

    def _confirm(self, warning: str, action: Callable[[], None], *, yes: str) -> None:
        self.confirmation = Confirmation(warning, on_confirm=action, yes=yes, no="Keep it")
        self.host.messages.add(self.confirmation.widget)

    # Callbacks (kernel thread)

    def _on_accept(self, card: PreviewCard, text: str | None, *, force: bool = False) -> None:
        self.host.run_turn(lambda _stop: self._accept(card, text, force=force))

    def _on_discard(self, _card: PreviewCard) -> None:
        self.host.conversation.steering.discard()
        self.host.messages.add(
            widgets.HTML(value=render_notice("Compaction discarded; nothing was changed."))
        )

    def _on_undo(self, card: CompactionCard) -> None:
        self.undo(card.record_id)

    # Store reads

    def _records(self) -> list[dict[str, Any]]:
        session_id = self.host.conversation.session_id
        return self.host.store.list_compactions(session_id) if session_id else []

    def _latest_undoable(self) -> int | None:
        undoable = [r for r in self._records() if r["kind"] in KINDS and not r.get("undone_at")]
        return undoable[-1]["id"] if undoable else None

    def _replaced(self, record_id: int | None) -> list[Row]:
        session_id = self.host.conversation.session_id
        if record_id is None or session_id is None:
            return []
        full = self.host.store.load_full(session_id, problems=[])
        return [s.row for s in full if s.archived and s.compaction_id == record_id]

    def _reoffer(self) -> None:
        for card in self._cards[-1:]:
            card.undo_button.disabled = False

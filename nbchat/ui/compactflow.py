"""Compaction you steer, and its cards: preview → accept/edit/discard, the compaction card (what it
replaced, Undo) and undo with a confirmation.

`CompactionFlow`: what a `ChatUI` does for compaction you steer. `/compact [focus]` and the
Compact button ask for a preview and show it as a `PreviewCard`; Accept (or Edit, then accept)
applies it, first asking for a confirmation when the edited summary would put the history over
the compaction trigger; Discard drops it. Every compaction card in the chat, automatic ones too,
shows what it replaced and an Undo button while it is the latest; Undo (or `/undo-compact`)
takes it back, first asking for a confirmation when the history would be over the compaction
trigger again. The work runs as turns on the chat's worker (`run_turn`), so Stop, the busy state
and the failure reporting work as for a reply; clicks only queue it.

The cards: the preview card (a proposed compaction with Accept, Edit then accept, or Discard),
the compaction card in the chat (what was replaced, and Undo while it is the latest compaction),
and the confirmation an undo or an edited summary asks for when the history would be over the
compaction trigger. They are widgets only: each button calls the callback it was given (the flow
queues the work); model text is escaped or goes through `render`.

No SQL, HTTP or prompt text: the conversation (`nbchat.conversation.steer`) does the work; the
store is only read (the compaction records, the rows a record archived).
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, Protocol

import ipywidgets as widgets

from nbchat.compaction.result import CompactionResult
from nbchat.conversation.events import CompactionFinished, CompactionStarted, Done, Event, Failed
from nbchat.conversation.loop import Conversation
from nbchat.conversation.steer import split_summary
from nbchat.errors import NbchatError
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.store.undo import KINDS
from nbchat.ui.cards import Collapsible, row_widget
from nbchat.ui.messages import MessageList
from nbchat.ui.render import render_checkpoint, render_compacted, render_notice

__all__ = [
    "CompactionCard",
    "CompactionFlow",
    "Confirmation",
    "FlowHost",
    "LazyCollapsible",
    "PreviewCard",
    "render_replaced",
]


# What the preview says when the model's summary was not kept (it copied its instruction or
# repeated itself) or was empty.
NOT_KEPT = (
    "None kept: what the model wrote repeated itself or its instruction. The facts below "
    "stand alone."
)
# The "what was replaced" view shows this many rows, each cut to this many characters.
SHOWN_ROWS = 200
SHOWN_CHARACTERS = 300


def render_replaced(rows: Sequence[Row]) -> str:
    """The rows a compaction replaces, one short line each (escaped)."""
    lines = []
    for row in rows[:SHOWN_ROWS]:
        text = row.content or row.tool_args
        cut = text[:SHOWN_CHARACTERS] + ("…" if len(text) > SHOWN_CHARACTERS else "")
        name = f" {row.tool_name}" if row.tool_name else ""
        lines.append(f"<div><b>{html.escape(row.role + name)}</b>: {html.escape(cut)}</div>")
    if len(rows) > SHOWN_ROWS:
        lines.append(f"<div>… and {len(rows) - SHOWN_ROWS} more</div>")
    return f'<div class="nbchat-replaced">{"".join(lines)}</div>'


def describe(result: CompactionResult) -> str:
    """One line: what the compaction replaces and the size before and after."""
    parts = []
    if result.edit.summary_row is not None:
        parts.append(f"{result.edit.rows_summarised} rows → 1 summary")
    if result.edit.rows_pruned:
        parts.append(f"{result.edit.rows_pruned} old tool output(s) → placeholders")
    sizes = f"~{result.tokens_before:,} → ~{result.tokens_after:,} tokens"
    return f"{', '.join(parts)}; {sizes}"


class LazyCollapsible(Collapsible):
    """A `Collapsible` whose HTML body is made when first opened (a compaction may have
    replaced thousands of rows; most cards are never opened)."""

    def __init__(self, title: str, load: Callable[[], str]) -> None:
        self._load = load
        self.body = widgets.HTML(value="")
        super().__init__(title, self.body)

    def set_open(self, open_: bool) -> None:
        if open_ and not self.body.value:
            self.body.value = self._load()
        super().set_open(open_)


class PreviewCard:
    """A proposed compaction: the summary (model-written and code-kept parts apart), the rows
    it replaces, and Accept, Edit, Discard. Nothing has changed until Accept."""

    def __init__(
        self,
        result: CompactionResult,
        covered: Sequence[Row],
        *,
        on_accept: Callable[[PreviewCard, str | None], None],
        on_discard: Callable[[PreviewCard], None],
    ) -> None:
        self.result = result
        self._on_accept, self._on_discard = on_accept, on_discard
        said, kept = split_summary(result.summary)
        self.editor = widgets.Textarea(value=said, layout=widgets.Layout(width="100%"))
        self.editor.layout.display = "none"
        self._buttons = [
            widgets.Button(description=name, button_style=style)
            for name, style in (("Accept", "success"), ("Edit", ""), ("Discard", ""))
        ]
        for button, handler in zip(
            self._buttons,
            (self._on_accept_click, self._on_edit_click, self._on_discard_click),
            strict=True,
        ):
            button.on_click(handler)
        self._status = widgets.HTML(value="")
        self.widget = widgets.VBox(self._parts(said, kept, covered))
        self.widget.add_class("nbchat-preview")

    def _parts(self, said: str, kept: str, covered: Sequence[Row]) -> list[widgets.Widget]:
        result = self.result
        head = (
            f"<b>Proposed compaction</b> (nothing has changed yet): {html.escape(describe(result))}"
        )
        parts: list[widgets.Widget] = [widgets.HTML(value=f'<div class="nbchat-card">{head}</div>')]
        if result.edit.summary_row is not None:
            parts.append(widgets.HTML(value="<b>Summary written by the model</b>"))
            shown = render_checkpoint(said) if said.strip() else render_notice(NOT_KEPT)
            parts.append(widgets.HTML(value=shown))
        if kept:
            parts.append(
                Collapsible("Kept by code (facts)", widgets.HTML(value=render_checkpoint(kept)))
            )
        replaced = [*covered[: result.edit.rows_summarised]]
        replaced += [covered[i] for i in sorted(result.edit.replacements) if i < len(covered)]
        title = f"The {len(replaced)} rows it replaces"
        parts.append(Collapsible(title, widgets.HTML(value=render_replaced(replaced))))
        parts += [self.editor, widgets.HBox([*self._buttons, self._status])]
        return parts

    @property
    def decision(self) -> str:
        """ "" while undecided, then "accepting", "accepted", "discarded" or "refused"."""
        return str(self._status.value)

    @property
    def editing(self) -> bool:
        return bool(self.editor.layout.display != "none")

    def accept(self) -> None:
        """Press Accept (the edited text, when Edit was pressed)."""
        self._buttons[0].click()

    def edit(self, text: str | None = None) -> None:
        """Press Edit: the model-written summary becomes editable (set to `text`, if given)."""
        self._buttons[1].click()
        if text is not None:
            self.editor.value = text

    def discard(self) -> None:
        """Press Discard: nothing is changed."""
        self._buttons[2].click()

    def mark(self, decision: str) -> None:
        """Show the decision; every button is then disabled."""
        self._status.value = decision
        for button in self._buttons:
            button.disabled = bool(decision)
        self.editor.disabled = bool(decision)

    def _on_accept_click(self, _button: widgets.Button) -> None:
        # Marked "accepting" by the job once it runs: a click refused as busy changes nothing.
        if not self.decision:
            self._on_accept(self, self.editor.value if self.editing else None)

    def _on_edit_click(self, _button: widgets.Button) -> None:
        if self.result.edit.summary_row is None or self.decision:
            return
        self.editor.layout.display = ""
        self._buttons[0].description = "Accept edited"

    def _on_discard_click(self, _button: widgets.Button) -> None:
        if self.decision:
            return
        self.mark("discarded")
        self._on_discard(self)


class CompactionCard:
    """A compaction in the chat: its summary card, what it replaced (loaded when opened), and
    Undo while it is the latest compaction of the session."""

    def __init__(
        self,
        summary: str,
        info: dict[str, Any],
        *,
        replaced: Callable[[], list[Row]],
        on_undo: Callable[[CompactionCard], None] | None,
        pruned: bool = False,
    ) -> None:
        self.record_id = info.get("id")
        self._replaced = replaced
        self._on_undo = on_undo
        card = (
            render_notice(summary)  # pruned only: a line saying so, no summary to show
            if pruned
            else render_compacted(
                summary,
                rows_replaced=info.get("rows_replaced"),
                tokens_before=info.get("tokens_before"),
                tokens_after=info.get("tokens_after"),
            )
        )
        self.replaced_view = LazyCollapsible(
            "What was replaced", lambda: render_replaced(self._replaced())
        )
        self.undo_button = widgets.Button(description="Undo", tooltip="Undo this compaction")
        self.undo_button.on_click(self._on_undo_click)
        undone = info.get("undone_at")
        self.undo_button.layout.display = "" if on_undo and not undone else "none"
        note = (
            f"Undone at {str(undone)[:19].replace('T', ' ')} UTC: the rows are back."
            if undone
            else ""
        )
        self.widget = widgets.VBox(
            [widgets.HTML(value=card), widgets.HBox([self.replaced_view, self.undo_button])]
            + ([widgets.HTML(value=render_notice(note))] if note else [])
        )

    @property
    def can_undo(self) -> bool:
        return self.undo_button.layout.display != "none" and not self.undo_button.disabled

    def hide_undo(self) -> None:
        self.undo_button.layout.display = "none"

    def press_undo(self) -> None:
        self.undo_button.click()

    def _on_undo_click(self, _button: widgets.Button) -> None:
        if self._on_undo is not None:
            self.undo_button.disabled = True
            self._on_undo(self)


class Confirmation:
    """A change that would put the history over the trigger (an undo, an edited summary):
    `confirm` it anyway (the warning's button), or `cancel` (the other one)."""

    def __init__(self, warning: str, *, on_confirm: Callable[[], None], yes: str, no: str) -> None:
        self._on_confirm = on_confirm
        self._yes = widgets.Button(description=yes, button_style="warning")
        self._no = widgets.Button(description=no)
        self._yes.on_click(self._on_yes_click)
        self._no.on_click(self._on_no_click)
        self.decision = ""
        self.widget = widgets.VBox(
            [widgets.HTML(value=render_notice(warning)), widgets.HBox([self._yes, self._no])]
        )

    def confirm(self) -> None:
        self._yes.click()

    def cancel(self) -> None:
        self._no.click()

    def _decide(self, decision: str) -> None:
        self.decision = decision
        self._yes.disabled = self._no.disabled = True

    def _on_yes_click(self, _button: widgets.Button) -> None:
        if not self.decision:
            self._decide("confirmed")
            self._on_confirm()

    def _on_no_click(self, _button: widgets.Button) -> None:
        if not self.decision:
            self._decide("kept")


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

"""`EventView`: the conversation's events turned into widget updates, including a tool call waiting
on the user (the approval card, the turn paused until decided).

`EventView` runs on the worker thread. Streaming deltas go to a `StreamingText` (throttled); a saved
row freezes what streamed or adds the row's widget; tool cards, the compacted card, notices and
errors are added as they happen; the status line and the context meter follow along. Nothing here
talks to the store or the server.

`ApprovalDesk`: a tool call waiting on the user. The approver a `ChatUI` gives its
conversation: it shows an `ApprovalCard`, pauses the turn (on the worker) until Approve, Deny
or Stop, and lets cells and tests find the waiting card (`wait_for`, `waiting_card`).

An edit of a cell shows its diff with Accept, Accept all and Reject; "Accept all" accepts the
rest of the reply's edits too (each still shown with its diff). A run shows exactly its code,
with Run and Don't run.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import ipywidgets as widgets
from typing_extensions import assert_never

from nbchat.compaction.result import CompactionResult
from nbchat.conversation.events import (
    CompactionFinished,
    CompactionStarted,
    Done,
    Event,
    Failed,
    Notice,
    RequestStarted,
    RowSaved,
    ToolFinished,
    ToolStarted,
    UsageReported,
)
from nbchat.errors import NbchatError
from nbchat.history import Row
from nbchat.llm.reader import ReasoningDelta, TextDelta, TextWithdrawn
from nbchat.stopping import StopSignal
from nbchat.tools import ApprovalRequest
from nbchat.ui.cards import (
    ApprovalCard,
    Collapsible,
    RequestLink,
    render_review,
    row_widget,
    tool_result_widget,
)
from nbchat.ui.messages import MessageList, StreamingText
from nbchat.ui.render import render_label, render_notice

__all__ = ["ApprovalDesk", "ContextMeter", "EventView"]


class ContextMeter(widgets.HTML):
    """Tokens against the budget, with a mark where compaction triggers."""

    def show(
        self, tokens: int, threshold: int, trigger: int, *, reported: bool, note: str = ""
    ) -> None:
        """`note`: the background preparation's state ("preparing…", "checkpoint ready")."""
        share = min(100.0, 100.0 * tokens / max(1, threshold))
        mark = 100.0 * trigger / max(1, threshold)
        colour = (
            "var(--jp-warn-color1, #f57c00)"
            if tokens >= trigger
            else "var(--jp-brand-color1, #1976d2)"
        )
        kind = "reported" if reported else "estimated"
        self.value = (
            f'<div class="nbchat-meter" title="{tokens:,} of {threshold:,} tokens ({kind}); '
            f'compaction at {trigger:,}" style="position:relative;width:140px;height:8px;'
            f'background:var(--jp-layout-color3,rgba(127,127,127,0.25));display:inline-block">'
            f'<div style="width:{share:.1f}%;height:100%;background:{colour}"></div>'
            f'<div style="position:absolute;left:{mark:.1f}%;top:-2px;width:2px;height:12px;'
            f'background:var(--jp-ui-font-color1,currentColor)"></div></div>'
            f'<span style="font-size:11px;margin-left:6px">{_short(tokens)} / {_short(threshold)}'
            f"{' · ' + html.escape(note) if note else ''}</span>"
        )


def _short(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


@dataclass
class _Live:
    """The reply that is streaming now."""

    reasoning: StreamingText | None = None
    reply: StreamingText | None = None
    started: float = field(default_factory=time.monotonic)
    characters: int = 0


class EventView:
    """Applies events to the message list, the status line and the meter."""

    def __init__(
        self,
        messages: MessageList,
        status: widgets.HTML,
        update_meter: Callable[[], None],
        *,
        max_rate: float = 15.0,
    ) -> None:
        self.messages = messages
        self.status = status
        self.update_meter = update_meter
        self.max_rate = max_rate
        self.restore_input: Callable[[str], None] = lambda _text: None
        # The card for a compaction that happened (ChatUI's adds what it replaced and Undo).
        self.compaction_widget: Callable[[CompactionResult], widgets.Widget] | None = None
        # The "request" link under each reply (`nbchat.ui.cards`); ChatUI gives the maker.
        self.request_link: Callable[[], RequestLink | None] = lambda: None
        self.last_request_link: RequestLink | None = None
        # A user's message as shown (with its "rewind to here" button, `nbchat.ui.actions`),
        # from the row and its stored id (`user_row_id`: the newest active user row's).
        self.user_widget: Callable[[Row, int | None], widgets.Widget] = lambda row, _row_id: (
            row_widget(row)
        )
        self.user_row_id: Callable[[], int | None] = lambda: None
        self._live: _Live | None = None
        self._tool_widgets: dict[str, widgets.HTML] = {}
        self._last_status = 0.0
        self._compaction_reason = ""
        # Why the last reply was withdrawn, shown until the request asking again starts.
        self._asking_again = ""
        self._usage: UsageReported | None = None
        self.status_text = ""

    def set_status(self, text: str, *, error: bool = False) -> None:
        self.status_text = text
        colour = "var(--jp-error-color1,#d32f2f)" if error else "var(--jp-ui-font-color2,inherit)"
        self.status.value = (
            f'<span style="font-size:12px;color:{colour}">{html.escape(text)}</span>'
        )

    def handle(self, event: Event) -> None:
        """Apply one event (called on the worker thread, in order).

        Every event type has its case: one added to `Event` and not handled here fails mypy.
        """
        match event:
            case TextDelta():  # first: the most frequent by far
                self._on_text_delta(event)
            case ReasoningDelta():
                self._on_reasoning_delta(event)
            case TextWithdrawn():
                self._on_text_withdrawn(event)
            case RequestStarted():
                self._on_request_started(event)
            case RowSaved():
                self._on_row_saved(event)
            case UsageReported():
                self._on_usage_reported(event)
            case ToolStarted():
                self.set_status(f"running tool {event.call.name}…")
            case ToolFinished():
                self._on_tool_finished(event)
            case CompactionStarted():
                self._compaction_reason = event.reason
                self.set_status("compacting the history…")
            case CompactionFinished():
                self._on_compaction_finished(event)
            case Notice():
                pass  # shown by the `system` row saved with it, or (a retry's) by what follows
            case Failed():
                self._on_failed(event)
            case Done():
                self._on_done(event)
            case _:
                assert_never(event)

    def _on_request_started(self, event: RequestStarted) -> None:
        self._live = _Live()
        if event.attempt != 1:
            self.set_status("retrying after compaction…")
        elif self._asking_again:
            self.set_status(self._asking_again)
        else:
            self.set_status("thinking…")
        self._asking_again = ""

    def _on_reasoning_delta(self, event: ReasoningDelta) -> None:
        live = self._live or _Live()
        self._live = live
        if live.reasoning is None:
            live.reasoning = StreamingText(max_rate=self.max_rate)
            self.messages.add(Collapsible("Reasoning", live.reasoning.box, open_=True))
        live.reasoning.append(event.text)
        self._streaming_status(live, len(event.text))

    def _on_text_delta(self, event: TextDelta) -> None:
        live = self._live or _Live()
        self._live = live
        if live.reply is None:
            live.reply = StreamingText(max_rate=self.max_rate, label=render_label("assistant"))
            live.reply.box.add_class("nbchat-assistant")
            self.messages.add(live.reply.box)
        live.reply.append(event.text)
        self._streaming_status(live, len(event.text))

    def _on_text_withdrawn(self, event: TextWithdrawn) -> None:
        # What streamed was a call that did not validate, written as JSON, an answer naming
        # nothing its tool results show, or one speaking of a file it had not read: the model
        # is asked again (or looks first), and its new reply streams
        # into a box of its own. The status says why the text vanished (the re-ask's own
        # request starts next and keeps saying it).
        self._asking_again = f"asking again: {event.reason}…" if event.reason else ""
        if self._asking_again:
            self.set_status(self._asking_again)
        live = self._live
        if live is not None and live.reply is not None:
            live.reply.finish()
            live.reply.box.layout.display = "none"
            live.reply = None

    def _streaming_status(self, live: _Live, characters: int) -> None:
        live.characters += characters
        now = time.monotonic()
        if now - self._last_status >= 0.5:
            self._last_status = now
            rate = live.characters / 4 / max(1e-3, now - live.started)
            self.set_status(f"streaming · ~{rate:.0f} tok/s")

    def _on_row_saved(self, event: RowSaved) -> None:
        row = event.row
        live = self._live
        if row.role == "analysis" and live is not None and live.reasoning is not None:
            live.reasoning.finish()
        elif row.role in ("assistant", "assistant_full") and live is not None and live.reply:
            if row.role == "assistant_full" and not row.content:
                # What streamed was this call written as JSON: the card below replaces it.
                live.reply.box.layout.display = "none"
            live.reply.finish()
            if row.role == "assistant_full":
                self.messages.add(row_widget(Row("assistant_full", "", "", "", row.tool_args)))
            self._add_footer()
        elif row.role == "tool":
            # The round's streaming is over: words saved after its results (a refused call's
            # reply, written by nbchat) are a bubble of their own, not that stream's end.
            self._finish_live()
            widget = tool_result_widget(row.tool_name or "tool", row.content)
            self._tool_widgets[row.tool_id] = widget
            self.messages.add(widget)
        elif row.role == "user":
            self.messages.add(self.user_widget(row, self.user_row_id()))
        else:
            self.messages.add(row_widget(row))
        if row.role in ("assistant", "assistant_full"):
            link = self.last_request_link = self.request_link()
            if link is not None:
                self.messages.add(link)
        self.update_meter()

    def _on_usage_reported(self, event: UsageReported) -> None:
        self._usage = event  # shown once, under the reply (`_add_footer`), not in the status
        self.update_meter()

    def _add_footer(self) -> None:
        """Tokens, speed and time of the reply just finished, in small print under it."""
        usage, self._usage = self._usage, None
        if usage is None or not usage.completion_tokens or usage.duration <= 0:
            return
        rate = usage.completion_tokens / usage.duration
        line = f"{usage.completion_tokens} tokens · {rate:.1f} tok/s · {usage.duration:.1f} s"
        self.messages.add(widgets.HTML(value=f'<div class="nbchat-notice">{line}</div>'))

    def _on_tool_finished(self, event: ToolFinished) -> None:
        widget = self._tool_widgets.pop(event.call.id, None)
        if widget is not None and not event.outcome.ok:
            widget.value = tool_result_widget(
                event.call.name, event.outcome.content, ok=False
            ).value

    def _on_compaction_finished(self, event: CompactionFinished) -> None:
        result = event.result
        if result.changed and self.compaction_widget is not None:
            self.messages.add(self.compaction_widget(result))
        elif result.changed and result.edit.summary_row is not None:
            self.messages.add(
                row_widget(
                    result.edit.summary_row,
                    compaction={
                        "rows_replaced": result.edit.rows_summarised,
                        "tokens_before": result.tokens_before,
                        "tokens_after": result.tokens_after,
                    },
                )
            )
        elif result.changed:
            self.messages.add(
                widgets.HTML(
                    value=render_notice(
                        f"Pruned old tool output: ~{result.tokens_before:,} → "
                        f"~{result.tokens_after:,} tokens (read it back with "
                        "read_archived_output)."
                    )
                )
            )
        elif self._compaction_reason == "manual":  # automatic no-ops stay quiet
            self.messages.add(
                widgets.HTML(value=render_notice(f"Nothing compacted: {result.reason}"))
            )
        self.update_meter()

    def _on_failed(self, event: Failed) -> None:
        self._finish_live()
        self.messages.add(
            widgets.HTML(value=render_notice(event.message, error=True, traceback=event.traceback))
        )
        if event.unsent_text:
            self.restore_input(event.unsent_text)
        self.set_status(f"error: {event.message}", error=True)

    def _on_done(self, event: Done) -> None:
        self._finish_live()
        if event.stopped:
            self.set_status("stopped")
        else:
            self.set_status("ready")
        self.update_meter()

    def _finish_live(self) -> None:
        live, self._live = self._live, None
        for text in (live.reasoning, live.reply) if live else ():
            if text is not None:
                text.finish()


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
    """The plain card, or for an edit or a run the diff or the exact code (`nbchat.ui.cards`)."""
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

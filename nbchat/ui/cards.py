"""One widget per row, and the message list rebuilt from them, with what a row shows besides
its text: the request link under each reply, an edit's diff and a run's code.

Widgets for one row each: user and assistant bubbles, reasoning, tool cards, the compacted
card, notices — and the approval card that pauses a turn until the user decides. Every piece of
model or tool text goes through `render` (escaped, sanitised).

Rebuilding a chat's message list from the store: one widget factory per transcript entry,
each reply followed by its "request" link, compaction rows as their cards. Factories, not
widgets: the message list builds only the ones it shows (`MessageList`); the rows come from
`transcript_entries` and `reply_links`.

The request inspector: a small "request" link under each reply. Pressing it shows the request
that produced the reply exactly as it was sent (rebuilt by `nbchat.conversation.requestview`
from the store, so a request whose rows were compacted since still shows what was sent then):
each part (system prompt, summaries, messages, tool schemas, parameters) with its estimated
token count and its marks (summary, placeholder, attachment), the server's own count when it
reported one, and the whole body as JSON. The request is read from the store on the first press
only. Everything shown came from the model, the tools or the user, so none of it is rendered as
markdown: each text is escaped (`html.escape`, after `visible_text_lines` made every invisible
or bidi character a visible escape) inside a `<pre>`. The link is given a loader.

What the assistant does to the notebook: the approval card's question for an edit (the diff)
or a run (exactly the code), and the acting tools' results as open cards. The question is exact
text, as the plain approval card's arguments are (`nbchat.ui.visible`: every invisible or bidi
character shown as an escape), so what is approved is what runs or lands; a diff's lines are
coloured by their first character. A result (inserted, edited, the run's output, or the code to
copy where there is no notebook document) is rendered as markdown, open, its code blocks with
the widget's Copy button (the diff's colours are in `render.STYLE`).

No SQL, HTTP or prompt text here.
"""

from __future__ import annotations

import bisect
import functools
import html
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from nbchat.conversation.requestview import InspectedRequest, RequestPart, inspect_request
from nbchat.errors import NbchatError
from nbchat.history import Row
from nbchat.stopping import StopSignal
from nbchat.store.rowsql import StoredRow
from nbchat.store.store import Store
from nbchat.tools.acting import ACTING_TOOLS
from nbchat.tools.executor import FAILURE_PREFIXES, is_failed_result
from nbchat.tools.registry import Review
from nbchat.ui.render import (
    TOOL_ICON,
    render_approval,
    render_compacted,
    render_label,
    render_markdown,
    render_notice,
    render_tool_call,
    render_tool_result,
)
from nbchat.ui.transcript import transcript_entries
from nbchat.ui.visible import visible_text, visible_text_lines

__all__ = [
    "ApprovalCard",
    "Card",
    "Collapsible",
    "RequestLink",
    "User",
    "is_acting_tool",
    "latest_request_link",
    "render_acting_result",
    "render_request",
    "render_review",
    "reply_links",
    "row_widget",
    "tool_result_widget",
    "transcript_factories",
]


PART_CHARS = 4000  # characters of one part shown; the rest is counted
JSON_CHARS = 20_000  # characters of the whole body shown
PARTS_SHOWN = 200  # the newest parts shown; earlier ones are summed up in one line
WHOLE = "conversation.last_request().to_json()"

REPLY_ROLES = ("assistant", "assistant_full")

Loader = Callable[[], "InspectedRequest | None"]


class RequestLink(widgets.VBox):
    """A "request" button; pressing it shows (or hides) the request as it was sent."""

    def __init__(self, load: Loader) -> None:
        self._load = load
        self._button = widgets.Button(
            description="request",
            tooltip="Show the request exactly as it was sent to the model",
            layout=widgets.Layout(width="auto"),
        )
        self._button.add_class("nbchat-request-link")
        self.panel = widgets.HTML(value="", layout=widgets.Layout(display="none"))
        super().__init__([self._button, self.panel])
        self._button.on_click(self._on_button_click)
        self.is_open = False

    def press(self) -> None:
        """Click the link: show the request (loaded on the first press), or hide it again."""
        self._button.click()

    def _on_button_click(self, _button: widgets.Button) -> None:
        if not self.panel.value:
            try:
                request = self._load()
            except NbchatError as exc:
                self.panel.value = render_notice(str(exc), error=True)
            else:
                self.panel.value = (
                    render_request(request)
                    if request is not None
                    else render_notice("No record of this request was kept.")
                )
        self.is_open = not self.is_open
        self.panel.layout.display = "" if self.is_open else "none"


def latest_request_link(store: Store, session_id: str | None) -> RequestLink | None:
    """The link for the reply just saved: its request is the newest one recorded."""
    requests = store.sent_requests(session_id) if session_id is not None else []
    return _link(store, requests[-1][0]) if requests else None


def reply_links(
    store: Store, session_id: str, transcript: Sequence[StoredRow]
) -> dict[int, Callable[[], RequestLink]]:
    """Row id of each reply in a loaded transcript → a factory for its link. A reply's request
    is the newest one recorded before the reply's row was written (one turn at a time)."""
    requests = store.sent_requests(session_id)
    stamps = [created for _, created in requests]
    links: dict[int, Callable[[], RequestLink]] = {}
    for stored in transcript:
        index = bisect.bisect_right(stamps, stored.created) - 1
        if stored.row.role in REPLY_ROLES and index >= 0:
            links[stored.id] = functools.partial(_link, store, requests[index][0])
    return links


def _link(store: Store, request_id: int) -> RequestLink:
    return RequestLink(lambda: inspect_request(store, request_id))


def render_request(request: InspectedRequest) -> str:
    """The request as HTML: a heading, each part (escaped), then the body as JSON."""
    server = (
        f" · {request.prompt_tokens:,} prompt tokens counted by the server"
        if request.prompt_tokens is not None
        else ""
    )
    heading = (
        f"Request {request.id} · {html.escape(request.created[:19].replace('T', ' '))} · "
        f"~{request.estimated_tokens:,} tokens estimated{server}"
    )
    parts = list(request.parts)
    hidden = parts[:-PARTS_SHOWN] if len(parts) > PARTS_SHOWN else []
    lines = [f'<div class="nbchat-card nbchat-request"><div>{heading}</div>']
    if hidden:
        tokens = sum(part.tokens for part in hidden)
        lines.append(f"<div>… {len(hidden):,} earlier parts (~{tokens:,} tokens) not shown</div>")
    lines.extend(_part_html(part) for part in parts[len(hidden) :])
    body = _cut(request.to_json(), JSON_CHARS)
    lines.append(
        "<details><summary>The whole request as JSON</summary>"
        f'<pre class="nbchat-exact">{html.escape(visible_text_lines(body))}</pre></details></div>'
    )
    return "".join(lines)


def _part_html(part: RequestPart) -> str:
    marks = "".join(
        f' <span class="nbchat-badge nbchat-mark">{html.escape(mark)}</span>' for mark in part.marks
    )
    label = html.escape(visible_text_lines(part.label))
    return (
        f"<details><summary>{label} · ~{part.tokens:,} tokens{marks}</summary>"
        f'<pre class="nbchat-exact">{html.escape(visible_text_lines(_cut(part.text, PART_CHARS)))}'
        "</pre></details>"
    )


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters: see {WHOLE}]"


WHY_EDIT = "Nothing changes in the notebook until you accept (the tool policy is 'ask')."
WHY_RUN = (
    "It runs in your kernel, with your variables, only if you say so (the tool policy is 'ask')."
)
# How an acting tool's failed result starts (`nbchat.tools.kernelrun`, the executor).
FAILED = (*FAILURE_PREFIXES, "Invalid", "No ")


def is_acting_tool(name: str) -> bool:
    """Whether `name` is one of the tools that act on the notebook (their own cards)."""
    return name in ACTING_TOOLS


def render_review(name: str, review: Review) -> str:
    """The approval card's question: what it touches, why it asks, and the diff or the code,
    exactly."""
    verb = {"edit_cell": "Accept this edit", "run_cell": "Run this cell"}.get(name, "Run this code")
    why = f" {WHY_EDIT if review.kind == 'diff' else WHY_RUN}"
    note = f" ({html.escape(visible_text(review.note))})" if review.note else ""
    if review.kind == "diff":
        body = _diff_html(review.text)
        kind = "nbchat-exact nbchat-diff"
    else:
        body = html.escape(visible_text_lines(review.text))
        kind = "nbchat-exact"
    return (
        f'<div class="nbchat-card">{verb}?{note}<span class="nbchat-notice">{why}</span>'
        f'<pre class="{kind}">{body}</pre></div>'
    )


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        text = html.escape(visible_text(line)) or " "
        if line.startswith(("+++", "---")):
            lines.append(f'<span class="nbchat-hunk">{text}</span>')
        elif line.startswith("+"):
            lines.append(f'<span class="nbchat-add">{text}</span>')
        elif line.startswith("-"):
            lines.append(f'<span class="nbchat-del">{text}</span>')
        elif line.startswith("@@"):
            lines.append(f'<span class="nbchat-hunk">{text}</span>')
        else:
            lines.append(f"<span>{text}</span>\n")
    return "".join(lines)


def render_acting_result(name: str, content: str, *, ok: bool | None = None) -> str:
    """An acting tool's result as an open card: its text as markdown (the diff, the output,
    the code to copy)."""
    failed = content.startswith(FAILED) if ok is None else not ok
    status = " nbchat-failed" if failed else ""
    label = "failed" if failed else "result"
    return (
        f'<div class="nbchat-card nbchat-acting{status}"><details open><summary>{TOOL_ICON} '
        f"<b>{html.escape(name)}</b> · {label}</summary>"
        f"{render_markdown(content)}</details></div>"
    )


class Collapsible(widgets.VBox):
    """A header button that shows or hides its body (state kept while the body updates)."""

    def __init__(self, title: str, body: widgets.Widget, *, open_: bool = False) -> None:
        self._title = title
        self._toggle = widgets.Button(layout=widgets.Layout(width="auto"))
        self._toggle.add_class("nbchat-toggle")
        self._body = body
        super().__init__([self._toggle, body])
        self._toggle.on_click(self._on_toggle_click)
        self.set_open(open_)

    def set_open(self, open_: bool) -> None:
        self.is_open = open_
        self._toggle.description = ("▾ " if open_ else "▸ ") + self._title
        self._body.layout.display = "" if open_ else "none"

    def _on_toggle_click(self, _button: widgets.Button) -> None:
        self.set_open(not self.is_open)


def bubble(html: str, role: str) -> widgets.HTMLMath:
    widget = widgets.HTMLMath(value=html, layout=widgets.Layout(width="100%"))
    widget.add_class(f"nbchat-{role}")
    return widget


def tool_result_widget(name: str, content: str, *, ok: bool | None = None) -> widgets.HTML:
    if is_acting_tool(name):  # an edit's diff, a run's output, code to copy: shown open
        return widgets.HTML(value=render_acting_result(name, content, ok=ok))
    failed = is_failed_result(content) if ok is None else not ok
    return widgets.HTML(value=render_tool_result(name, content, ok=not failed))


def row_widget(row: Row, *, compaction: dict[str, object] | None = None) -> widgets.Widget:
    """The widget for one stored row (a loaded session, or a row saved just now)."""
    if row.role == "user":
        return bubble(render_label("user") + render_markdown(row.content), "user")
    if row.role == "assistant":
        return bubble(render_label("assistant") + render_markdown(row.content), "assistant")
    if row.role == "analysis":
        return Collapsible("Reasoning", bubble(render_markdown(row.content), "reasoning"))
    if row.role == "assistant_full":
        return _tool_calls_widget(row)
    if row.role == "tool":
        return tool_result_widget(row.tool_name or "tool", row.content)
    if row.role == "compacted":
        info = compaction or {}
        return widgets.HTML(
            value=render_compacted(
                row.content,
                rows_replaced=_int(info.get("rows_replaced")),
                tokens_before=_int(info.get("tokens_before")),
                tokens_after=_int(info.get("tokens_after")),
            )
        )
    return widgets.HTML(value=render_notice(row.content))


def _tool_calls_widget(row: Row) -> widgets.Widget:
    try:
        calls = json.loads(row.tool_args)
    except ValueError:
        calls = []
    parts: list[widgets.Widget] = []
    if row.content:
        parts.append(bubble(render_label("assistant") + render_markdown(row.content), "assistant"))
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        parts.append(
            widgets.HTML(
                value=render_tool_call(
                    str(function.get("name", "?")), str(function.get("arguments", ""))
                )
            )
        )
    return widgets.VBox(parts)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


class ApprovalCard:
    """Approve / Deny for one dangerous tool call; `wait()` blocks the worker until decided.

    Stop ends the wait as a refusal. The card stays in the transcript showing the decision.
    `question` (HTML) replaces the plain question (an edit's diff, the code a run runs),
    `labels` the buttons' words, and `also` adds a third button that approves this call and
    says so in `approved_all` (an edit's "Accept all").
    """

    def __init__(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        reason: str = "",
        question: str | None = None,
        labels: tuple[str, str] = ("Approve", "Deny"),
        also: str = "",
    ) -> None:
        self._decided = threading.Event()
        self.approved = False
        self.approved_all = False
        self._approve = widgets.Button(description=labels[0], button_style="success")
        self._deny = widgets.Button(description=labels[1], button_style="danger")
        self._approve.on_click(self._on_approve_click)
        self._deny.on_click(self._on_deny_click)
        self._status = widgets.HTML(value="")
        buttons: list[widgets.Widget] = [self._approve, self._deny]
        self._also = widgets.Button(description=also) if also else None
        if self._also is not None:
            self._also.on_click(self._on_also_click)
            buttons.insert(1, self._also)
        html_question = render_approval(name, arguments, reason) if question is None else question
        self.question = widgets.HTML(value=html_question)
        self.widget = widgets.VBox([self.question, widgets.HBox([*buttons, self._status])])
        self.widget.add_class("nbchat-approval")

    @property
    def decision(self) -> str:
        """What the card shows: "" while waiting, then "approved" or "denied"."""
        return str(self._status.value)

    def approve(self) -> None:
        self._decide(True)

    def approve_all(self) -> None:
        """The third button: approve this call and every like it in this reply."""
        self.approved_all = True
        self._decide(True, "approved (and the rest of this reply's)")

    def deny(self) -> None:
        self._decide(False)

    def wait(self, stop: threading.Event | None = None) -> bool:
        """Block until the user decides (True = approved) or Stop is pressed (False)."""
        if isinstance(stop, StopSignal):
            remove = stop.add_callback(self.deny)
            self._decided.wait()
            remove()
        else:
            while not self._decided.wait(0.1):
                if stop is not None and stop.is_set():
                    self.deny()
        return self.approved

    def _decide(self, approved: bool, status: str = "") -> None:
        if self._decided.is_set():
            return
        self.approved = approved
        self._approve.disabled = self._deny.disabled = True
        if self._also is not None:
            self._also.disabled = True
        self._status.value = status or ("approved" if approved else "denied")
        self._decided.set()

    def _on_approve_click(self, _button: widgets.Button) -> None:
        self.approve()

    def _on_deny_click(self, _button: widgets.Button) -> None:
        self.deny()

    def _on_also_click(self, _button: widgets.Button) -> None:
        self.approve_all()


# Makes a compaction row's card (Undo, what it replaced) from the row and its record.
Card = Callable[[Row, dict[str, Any] | None], widgets.Widget]
# Makes a user's message in the active history from the row and its stored id.
User = Callable[[Row, int], widgets.Widget]


def transcript_factories(
    store: Store, session_id: str, *, card: Card | None = None, user: User | None = None
) -> list[Callable[[], widgets.Widget]]:
    """Widget factories for the full transcript (`transcript_entries`), each reply followed by
    its request link; `card` makes the compaction cards (Undo, what was replaced), `user` the
    user's messages still in the active history (with their "rewind to here" button)."""
    entries = transcript_entries(store, session_id)
    links = reply_links(store, session_id, [stored for stored, _ in entries])
    factories: list[Callable[[], widgets.Widget]] = []
    for stored, info in entries:
        if user is not None and stored.row.role == "user" and not stored.archived:
            factories.append(_user_factory(user, stored.row, stored.id))
            continue
        factories.append(_row_factory(stored.row, info, card))
        factories.extend([links[stored.id]] if stored.id in links else [])
    return factories


def _row_factory(
    row: Row, info: dict[str, Any] | None, card: Card | None
) -> Callable[[], widgets.Widget]:
    if card is not None and row.role == "compacted":  # the card with Undo and what it replaced
        return lambda: card(row, info)
    return lambda: row_widget(row, compaction=info)


def _user_factory(user: User, row: Row, row_id: int) -> Callable[[], widgets.Widget]:
    return lambda: user(row, row_id)

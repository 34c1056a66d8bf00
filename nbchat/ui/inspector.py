"""The request inspector in the widget: a small "request" link under each reply.

Pressing it shows the request that produced the reply exactly as it was sent (rebuilt by
`nbchat.conversation.requestview` from the store, so a request whose rows were compacted since still
shows what was sent then): each part (system prompt, summaries, messages, tool schemas,
parameters) with its estimated token count and its marks (summary, placeholder, attachment),
the server's own count when it reported one, and the whole body as JSON. The request is read
from the store on the first press only.

Everything shown came from the model, the tools or the user, so none of it is rendered as
markdown: each text is escaped (`html.escape`, after `visible_text_lines` made every invisible
or bidi character a visible escape) inside a `<pre>`. No SQL here: the link is given a loader.
"""

from __future__ import annotations

import bisect
import functools
import html
from collections.abc import Callable, Sequence

import ipywidgets as widgets

from nbchat.conversation.requestview import InspectedRequest, RequestPart, inspect_request
from nbchat.errors import NbchatError
from nbchat.store.records import StoredRow
from nbchat.store.store import Store
from nbchat.ui.render import render_notice
from nbchat.ui.visible import visible_text_lines

__all__ = ["RequestLink", "latest_request_link", "render_request", "reply_links"]

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

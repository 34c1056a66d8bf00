"""The chat as static HTML, for a saved notebook opened where no kernel runs.

Displaying a `ChatUI` gives two outputs: the live widget, and beside it a `text/html` transcript
of the session under a display id, replaced through that id after each turn and each switch
(`TranscriptDisplay`). Where the widget renders live, its stylesheet (`render.STYLE`) hides the
transcript in the same output area; where it cannot (the notebook opened later without a kernel,
`jupyter nbconvert --to html`, a notebook viewer) the transcript is what shows.

Why a second output and not a `text/html` beside the widget view in one mime bundle: JupyterLab
and Notebook 7 prefer the widget view in a trusted notebook (and show "model not found" without
a kernel), and nbconvert prefers it whenever the widget state was saved (nbclient saves it), so
the fallback would not show in either.

Where an update lands depends on the front end: nbclient (nbconvert --execute, papermill) and
other clients that route display updates by id write it into the notebook; JupyterLab and
Notebook 7 apply an update only to an output displayed in that page since it loaded, so in a
notebook reopened while the kernel runs (a reload, another tab) the transcript would stay as it
was saved. So the transcript also goes to a model-only widget (`savedcopy.SavedCopy`) whose
front-end code writes it into the notebook's own copy of the output, found by the key in the
output's metadata.

Model text is untrusted: every message goes through `render` (the live view's sanitiser), then
the copy buttons are dropped, so the transcript holds no event handler and no script at all.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from IPython.display import display, update_display

from nbchat.errors import StoreError
from nbchat.history import Row
from nbchat.store.records import StoredRow
from nbchat.store.store import Store
from nbchat.ui.render import (
    COPY_BUTTON,
    render_compacted,
    render_label,
    render_markdown,
    render_notice,
    render_tool_call,
    render_tool_result,
)
from nbchat.ui.savedcopy import METADATA_KEY, SavedCopy

__all__ = ["TranscriptDisplay", "render_transcript", "transcript_entries", "transcript_rows"]

# The newest messages kept in the transcript: it is rebuilt after every turn.
TRANSCRIPT_LIMIT = 200
FAILURE_PREFIXES = ("Error", "Refused", "Denied", "Not run", "Unknown tool", "Timed out")
HEADING = "nbchat transcript (a saved copy: run the notebook to chat)"


def transcript_entries(
    store: Store, session_id: str
) -> list[tuple[StoredRow, dict[str, Any] | None]]:
    """The full transcript's stored rows, archived ones included and pruned placeholders not,
    each `compacted` row with its compaction record (matched by order of row id: each summary
    inserts one)."""
    full = store.load_full(session_id, problems=[])
    records = [c for c in store.list_compactions(session_id) if c["kind"] in ("summary", "chunked")]
    # By row id, the order they were made in (an undone one may sit after a later one).
    made = sorted(s.id for s in full if s.row.role == "compacted")
    info_of = dict(zip(made, records, strict=False))
    # A call's first result row is the original; a later one is a pruned placeholder.
    originals: dict[str, int] = {}
    for s in sorted(full, key=lambda s: s.id):
        if s.row.role == "tool":
            originals.setdefault(s.row.tool_id, s.id)
    entries: list[tuple[StoredRow, dict[str, Any] | None]] = []
    for stored in full:
        if stored.row.role == "tool" and originals[stored.row.tool_id] != stored.id:
            continue  # a pruned placeholder (active, or archived by an undo): the original shows
        entries.append((stored, info_of.get(stored.id)))
    return entries


def transcript_rows(store: Store, session_id: str) -> list[tuple[Row, dict[str, Any] | None]]:
    """`transcript_entries` without the store's bookkeeping: the rows and their records."""
    return [(stored.row, info) for stored, info in transcript_entries(store, session_id)]


def render_transcript(rows: list[tuple[Row, dict[str, Any] | None]]) -> str:
    """Static, sanitised HTML for the newest `TRANSCRIPT_LIMIT` rows."""
    shown = rows[-TRANSCRIPT_LIMIT:]
    parts = [f'<div class="nbchat-transcript"><p class="nbchat-label">{HEADING}</p>']
    if len(rows) > len(shown):
        parts.append(render_notice(f"{len(rows) - len(shown):,} earlier messages not shown."))
    if not rows:
        parts.append(render_notice("No messages yet."))
    parts += [_render_row(row, info) for row, info in shown]
    parts.append("</div>")
    return "".join(parts).replace(COPY_BUTTON, "")


def _message(role: str, text: str) -> str:
    body = render_markdown(text, highlight=False)  # no stylesheet to colour it where it shows
    return f'<div class="nbchat-{role}">{render_label(role)}{body}</div>'


def _render_row(row: Row, info: dict[str, Any] | None) -> str:
    if row.role in ("user", "assistant"):
        return _message(row.role, row.content)
    if row.role == "analysis":
        return f"<details><summary>Reasoning</summary>{render_markdown(row.content)}</details>"
    if row.role == "assistant_full":
        text = _message("assistant", row.content) if row.content else ""
        return text + "".join(render_tool_call(name, args) for name, args in _calls(row))
    if row.role == "tool":
        failed = row.content.startswith(FAILURE_PREFIXES)
        return render_tool_result(row.tool_name or "tool", row.content, ok=not failed)
    if row.role == "compacted":
        facts = info or {}
        return render_compacted(
            row.content,
            rows_replaced=_int(facts.get("rows_replaced")),
            tokens_before=_int(facts.get("tokens_before")),
            tokens_after=_int(facts.get("tokens_after")),
        )
    return render_notice(row.content)


def _calls(row: Row) -> list[tuple[str, str]]:
    """(name, arguments) of each call in an `assistant_full` row, as its card shows them."""
    try:
        calls = json.loads(row.tool_args)
    except ValueError:
        return []
    found = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        found.append((str(function.get("name", "?")), str(function.get("arguments", ""))))
    return found


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


class TranscriptDisplay:
    """The transcript output shown beside a widget, and its updates by display id."""

    def __init__(self, store: Store, session_id: Callable[[], str | None]) -> None:
        self._store = store
        self._session_id = session_id
        self.display_id = f"nbchat-transcript-{uuid.uuid4().hex}"
        self.shown = False
        self.saved: SavedCopy | None = None

    def html(self) -> str:
        session_id = self._session_id()
        return render_transcript(transcript_rows(self._store, session_id) if session_id else [])

    def show(self, widget_bundle: dict[str, Any]) -> None:
        """Display the widget's own bundle, then the transcript under the display id."""
        html = self.html()
        if self.saved is None:
            self.saved = SavedCopy(key=self.display_id, html=html)
        display(widget_bundle, raw=True)  # type: ignore[no-untyped-call]
        display(
            {"text/html": html},
            raw=True,
            metadata={METADATA_KEY: self.display_id},
            display_id=self.display_id,
        )  # type: ignore[no-untyped-call]
        self.shown = True

    def update(self) -> None:
        """Replace every shown transcript with the current one (nothing when never shown)."""
        if not self.shown:
            return
        try:
            html = self.html()
        except StoreError:
            return  # the chat shows the store's failure itself; the next turn tries again
        update_display(
            {"text/html": html},
            raw=True,
            metadata={METADATA_KEY: self.display_id},
            display_id=self.display_id,
        )  # type: ignore[no-untyped-call]
        if self.saved is not None:
            self.saved.html = html  # JupyterLab and Notebook 7 apply it to the saved notebook

    def close(self) -> None:
        """Close the saved copy's widget (the outputs shown stay as they are)."""
        if self.saved is not None:
            self.saved.close()

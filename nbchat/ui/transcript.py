"""The chat as static HTML, for a saved notebook opened where no kernel runs, and its copy kept
current in the notebook a front end saves.

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
notebook reopened while the kernel runs (a reload, another tab or browser) the transcript would
stay as it was saved. So the transcript also travels through a small model-only anywidget that
is never displayed (`SavedCopy`): its front-end code runs once per front end (`initialize`), and
where the widget manager has a notebook document (`widget_manager.context.model`, as in
JupyterLab and Notebook 7, which share ipywidgets' JupyterLab manager) it finds the outputs whose
metadata carries this transcript's key and replaces their `text/html` in the notebook's model,
so the next save writes it. Only outputs that carry the key are touched, and only when their
text differs.

What travels, so that a turn costs what it added and not the whole session (a display update
and a synced trait each re-sent every message, about twice the transcript per turn):

- the kernel holds the transcript as a `Transcript`: a head (the opening and its notices), one
  HTML string per message with the stored row id it came from, and a version that counts the
  changes; the HTML is `head + rows + TAIL`, in Python and in the front end alike;
- a front end's code says `hello` when it starts, with whether it has a notebook document;
  the kernel answers with the whole transcript (`full`), once per front end that loads;
- after a turn the kernel sends a `delta`: the version it applies to, the new head, which run
  of the rows the front end has to keep (`start`, `kept`) and the rows that follow them. A
  front end whose version is not the delta's base asks for the whole again (`resend`).

Display updates carry the whole transcript, so `TranscriptDisplay` sends them only while they
are needed (`needs_display_updates`): until a front end with a notebook document has said
hello (nbclient and other clients run no widget code, and say nothing), and for good once a
front end without one has (VS Code, Voila, a console, whose output only display updates reach).
Each message is rendered once and reused while it is shown.

Model text is untrusted: every message goes through `render` (the live view's sanitiser), then
the copy buttons are dropped, so the transcript holds no event handler and no script at all.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import anywidget
import traitlets
from IPython.display import display, update_display

from nbchat.errors import StoreError
from nbchat.history import Row
from nbchat.store.rowsql import StoredRow
from nbchat.store.store import Store
from nbchat.tools.executor import is_failed_result
from nbchat.ui.render import (
    COPY_BUTTON,
    render_compacted,
    render_label,
    render_markdown,
    render_notice,
    render_tool_call,
    render_tool_result,
)

__all__ = [
    "ESM",
    "METADATA_KEY",
    "SavedCopy",
    "TAIL",
    "Transcript",
    "TranscriptDisplay",
    "build_transcript",
    "delta",
    "render_transcript",
    "transcript_entries",
    "transcript_rows",
]


METADATA_KEY = "nbchat_transcript"
TAIL = "</div>"  # closes the transcript's opening <div>, which starts every head

ESM = """
const KEY = "nbchat_transcript";
const TAIL = "</div>";

function notebookCells(model) {
  const manager = model.widget_manager;
  const context = manager && manager.context;
  const cells = context && context.model && context.model.cells;
  return cells && typeof cells.get === "function" ? cells : null;
}

function textOf(data) {
  return Array.isArray(data) ? data.join("") : data;
}

function writeTranscript(cells, key, html) {
  for (let i = 0; i < cells.length; i++) {
    const outputs = cells.get(i).outputs;
    if (!outputs || typeof outputs.set !== "function") continue;
    for (let j = 0; j < outputs.length; j++) {
      const output = outputs.get(j);
      const metadata = output.metadata || {};
      if (metadata[KEY] !== key) continue;
      if (textOf(output.data["text/html"]) === html) continue;
      outputs.set(j, {
        output_type: "display_data",
        data: { "text/html": html },
        metadata: { ...metadata },
      });
    }
  }
}

// The transcript after the kernel's message: null while the whole has not arrived yet,
// undefined when a change was missed (the whole must be asked for again).
export function applyMessage(state, message) {
  if (message.kind === "full") {
    return { version: message.version, head: message.head, rows: message.rows };
  }
  if (message.kind !== "delta" || state === null) return state;
  if (state.version !== message.base) return undefined;
  const kept = state.rows.slice(message.start, message.start + message.kept);
  return { version: message.version, head: message.head, rows: kept.concat(message.rows) };
}

function initialize({ model }) {
  const cells = notebookCells(model);
  model.send({ kind: "hello", document: cells !== null });
  if (!cells) return;  // no notebook document here: nothing to keep current
  let state = null;
  model.on("msg:custom", (message) => {
    const next = applyMessage(state, message);
    if (next === state) return;
    if (next === undefined) {
      state = null;
      model.send({ kind: "resend" });
      return;
    }
    state = next;
    try {
      writeTranscript(cells, model.get("key"), state.head + state.rows.join("") + TAIL);
    } catch (error) {
      console.warn("nbchat: could not update the saved transcript", error);
    }
  });
}

export default { initialize };
"""


@dataclass(frozen=True)
class Transcript:
    """The transcript as sent: `head + rows + TAIL` is its HTML; `ids[i]` is the stored row
    `rows[i]` shows (what `delta` matches rows by)."""

    head: str
    rows: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()

    def html(self) -> str:
        return self.head + "".join(self.rows) + TAIL


def delta(old: Transcript, new: Transcript) -> tuple[int, int, tuple[str, ...]]:
    """`(start, kept, added)` such that `new.rows == old.rows[start:start + kept] + added`:
    the run of `old` that `new` begins with (found by row id; linear), then what follows it."""
    where = {row_id: i for i, row_id in enumerate(old.ids)}
    start = where.get(new.ids[0], len(old.rows)) if new.ids else len(old.rows)
    most = min(len(new.rows), len(old.rows) - start)
    kept = 0
    while kept < most and (old.ids[start + kept], old.rows[start + kept]) == (
        new.ids[kept],
        new.rows[kept],
    ):
        kept += 1
    return start, kept, new.rows[kept:]


class SavedCopy(anywidget.AnyWidget):
    """The transcript for the outputs marked with `key` in their metadata: `update` it after
    each turn, and every front end with a notebook document writes it there."""

    _esm = ESM
    key = traitlets.Unicode("").tag(sync=True)

    def __init__(self, key: str, transcript: Transcript) -> None:
        super().__init__(key=key)
        # The worker thread updates, the kernel's thread answers the front ends: one at a time,
        # so the versions go out in order.
        self._lock = threading.Lock()
        self.transcript = transcript
        self.version = 0
        self.kept_by_document = False  # a front end with a notebook document applies deltas
        self.shown_elsewhere = False  # a front end without one only sees display updates
        self.on_msg(self._on_front_end_message)

    @property
    def html(self) -> str:
        return self.transcript.html()

    @property
    def needs_display_updates(self) -> bool:
        return not self.kept_by_document or self.shown_elsewhere

    def update(self, transcript: Transcript) -> None:
        """Make `transcript` the current one; front ends that keep the notebook get the change."""
        with self._lock:
            if transcript == self.transcript:
                return
            old, self.transcript = self.transcript, transcript
            self.version += 1
            if not self.kept_by_document:
                return  # no front end applies deltas: one that says hello gets the whole
            start, kept, added = delta(old, transcript)
            self.send(
                {
                    "kind": "delta",
                    "base": self.version - 1,
                    "version": self.version,
                    "head": transcript.head,
                    "start": start,
                    "kept": kept,
                    "rows": list(added),
                }
            )

    def _on_front_end_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        kind = content.get("kind") if isinstance(content, dict) else None
        with self._lock:
            if kind == "hello" and content.get("document") is not True:
                self.shown_elsewhere = True
                return
            if kind == "hello":
                self.kept_by_document = True
            elif kind != "resend":
                return
            self.send(
                {
                    "kind": "full",
                    "version": self.version,
                    "head": self.transcript.head,
                    "rows": list(self.transcript.rows),
                }
            )


# The newest messages kept in the transcript: it is rebuilt after every turn.
TRANSCRIPT_LIMIT = 200
HEADING = "nbchat transcript (a saved copy: run the notebook to chat)"

# A message as the transcript shows it: its stored row id, the row, its compaction record.
Entry: TypeAlias = tuple[int, Row, "dict[str, Any] | None"]


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
    entries = [(i, row, info) for i, (row, info) in enumerate(rows)]
    return build_transcript(entries, lambda entry: render_message(entry[1], entry[2])).html()


def build_transcript(entries: Sequence[Entry], render: Callable[[Entry], str]) -> Transcript:
    """The newest `TRANSCRIPT_LIMIT` entries, each rendered by `render`, under the head that
    says how many are left out."""
    shown = entries[-TRANSCRIPT_LIMIT:]
    head = [f'<div class="nbchat-transcript"><p class="nbchat-label">{HEADING}</p>']
    if len(entries) > len(shown):
        head.append(render_notice(f"{len(entries) - len(shown):,} earlier messages not shown."))
    if not entries:
        head.append(render_notice("No messages yet."))
    return Transcript(
        "".join(head),
        tuple(render(entry) for entry in shown),
        tuple(row_id for row_id, _, _ in shown),
    )


def render_message(row: Row, info: dict[str, Any] | None) -> str:
    """One row's static HTML, without the copy buttons (nothing in the transcript runs)."""
    return _render_row(row, info).replace(COPY_BUTTON, "")


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
        failed = is_failed_result(row.content)
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
        self._displayed: Transcript | None = None  # what the display id's outputs show
        self._lock = threading.Lock()  # shown from the kernel's thread, updated from the worker
        self._rendered: dict[tuple[int, Row, tuple[object, ...]], str] = {}

    def current(self) -> Transcript:
        """The session's transcript now; messages rendered before are not rendered again."""
        session_id = self._session_id()
        stored = transcript_entries(self._store, session_id) if session_id else []
        entries = [(s.id, s.row, info) for s, info in stored]
        with self._lock:
            cache, self._rendered = self._rendered, {}  # keeps only what is still shown

            def render(entry: Entry) -> str:
                row_id, row, info = entry
                key = (row_id, row, _facts(info))
                html = cache.get(key)
                self._rendered[key] = html if html is not None else render_message(row, info)
                return self._rendered[key]

            return build_transcript(entries, render)

    def html(self) -> str:
        return self.current().html()

    def show(self, widget_bundle: dict[str, Any]) -> None:
        """Display the widget's own bundle, then the transcript under the display id."""
        transcript = self.current()
        if self.saved is None:
            self.saved = SavedCopy(key=self.display_id, transcript=transcript)
        else:
            self.saved.update(transcript)
        display(widget_bundle, raw=True)  # type: ignore[no-untyped-call]
        display(
            {"text/html": transcript.html()},
            raw=True,
            metadata={METADATA_KEY: self.display_id},
            display_id=self.display_id,
        )  # type: ignore[no-untyped-call]
        self._displayed = transcript
        self.shown = True

    def update(self) -> None:
        """Bring every shown transcript up to date (nothing when never shown): the saved
        copy's front ends get what changed; display updates, carrying the whole transcript,
        go out only while some front end needs them."""
        if not self.shown:
            return
        try:
            transcript = self.current()
        except StoreError:
            return  # the chat shows the store's failure itself; the next turn tries again
        needed = self.saved is None or self.saved.needs_display_updates
        if needed and transcript != self._displayed:
            update_display(
                {"text/html": transcript.html()},
                raw=True,
                metadata={METADATA_KEY: self.display_id},
                display_id=self.display_id,
            )  # type: ignore[no-untyped-call]
            self._displayed = transcript
        if self.saved is not None:
            self.saved.update(transcript)  # JupyterLab and Notebook 7 write it into the notebook

    def close(self) -> None:
        """Close the saved copy's widget (the outputs shown stay as they are)."""
        if self.saved is not None:
            self.saved.close()


def _facts(info: dict[str, Any] | None) -> tuple[object, ...]:
    """What of a compaction record a message's HTML shows (part of its cache key)."""
    facts = info or {}
    return tuple(
        _int(facts.get(name)) for name in ("rows_replaced", "tokens_before", "tokens_after")
    )

"""`SavedCopy`: keeps the transcript that a notebook saves current in JupyterLab and Notebook 7,
sending after each turn only what the turn changed.

The transcript beside the widget (`transcript.TranscriptDisplay`) can be replaced through its
display id. nbclient writes such an update into the notebook, and so do JupyterLab and
Notebook 7 in the page where the chat's cell ran; but they route an update only to outputs
displayed in that page since it loaded: in a notebook reopened while the kernel runs (a reload,
another tab or browser), the transcript output loaded from the file never changes, and the
notebook saved from there would hold the transcript as of the earlier save.

So the transcript also travels through this small model-only anywidget (never displayed): its
front-end code runs once per front end (`initialize`), and where the widget manager has a
notebook document (`widget_manager.context.model`, as in JupyterLab and Notebook 7, which share
ipywidgets' JupyterLab manager) it finds the outputs whose metadata carries this transcript's
key and replaces their `text/html` in the notebook's model, so the next save writes it. Only
outputs that carry the key are touched, and only when their text differs.

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
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import anywidget
import traitlets

__all__ = ["ESM", "METADATA_KEY", "TAIL", "SavedCopy", "Transcript", "delta"]

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

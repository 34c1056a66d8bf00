"""`SavedCopy`: keeps the transcript that a notebook saves current in JupyterLab and Notebook 7.

The transcript beside the widget (`transcript.TranscriptDisplay`) is replaced after each turn
through its display id. nbclient writes such an update into the notebook, and so do JupyterLab
and Notebook 7 in the page where the chat's cell ran; but they route an update only to outputs
displayed in that page since it loaded: in a notebook reopened while the kernel runs (a reload,
another tab or browser), the transcript output loaded from the file never changes, and the
notebook saved from there would hold the transcript as of the earlier save.

So the transcript also travels in this small model-only anywidget (never displayed): its
front-end code runs once per front end (`initialize`), and where the widget manager has a
notebook document (`widget_manager.context.model`, as in JupyterLab and Notebook 7, which share
ipywidgets' JupyterLab manager) it finds the outputs whose metadata carries this transcript's
key and replaces their `text/html` in the notebook's model, so the next save writes it. Where
there is no such document (VS Code, Voila, an embedded page) it does nothing. Only outputs that
carry the key are touched, and only when their text differs.
"""

from __future__ import annotations

import anywidget
import traitlets

__all__ = ["ESM", "METADATA_KEY", "SavedCopy"]

METADATA_KEY = "nbchat_transcript"

ESM = """
const KEY = "nbchat_transcript";

function notebookCells(model) {
  const manager = model.widget_manager;
  const context = manager && manager.context;
  const cells = context && context.model && context.model.cells;
  return cells && typeof cells.get === "function" ? cells : null;
}

function textOf(data) {
  return Array.isArray(data) ? data.join("") : data;
}

function writeTranscript(model) {
  const cells = notebookCells(model);
  if (!cells) return;  // no notebook document here: nothing to keep current
  const key = model.get("key");
  const html = model.get("html");
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

function initialize({ model }) {
  const write = () => {
    try {
      writeTranscript(model);
    } catch (error) {
      console.warn("nbchat: could not update the saved transcript", error);
    }
  };
  write();
  model.on("change:html", write);
}

export default { initialize };
"""


class SavedCopy(anywidget.AnyWidget):
    """The current transcript HTML (`html`) for the outputs marked with `key` in their
    metadata; set `html` and every front end with a notebook document writes it there."""

    _esm = ESM
    key = traitlets.Unicode("").tag(sync=True)
    html = traitlets.Unicode("").tag(sync=True)

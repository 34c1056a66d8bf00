"""`ChatInput`: the message box — Enter sends, Shift+Enter adds a newline.

ipywidgets' `Textarea` has no key events, so this is a tiny anywidget (an ES module shipped as
a string: no JavaScript build step). The browser sends the text with the submit message itself,
so a send never races the `value` sync. JupyterLab's own shortcuts are suppressed while typing.
Python code (tests, `ChatUI.send`) submits with `submit()`, exactly like pressing Enter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

__all__ = ["ChatInput"]

ESM = """
function render({ model, el }) {
  const area = document.createElement("textarea");
  area.className = "nbchat-input-area";
  area.rows = 3;
  area.setAttribute("data-lm-suppress-shortcuts", "true");
  const sync = () => {
    area.value = model.get("value");
    area.placeholder = model.get("placeholder");
    area.disabled = model.get("disabled");
  };
  sync();
  area.addEventListener("input", () => {
    model.set("value", area.value);
    model.save_changes();
  });
  area.addEventListener("keydown", (event) => {
    event.stopPropagation();
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      model.set("value", area.value);
      model.save_changes();
      model.send({ type: "submit", value: area.value });
    }
  });
  model.on("change:value", () => {
    if (area.value !== model.get("value")) area.value = model.get("value");
  });
  model.on("change:placeholder", sync);
  model.on("change:disabled", sync);
  el.appendChild(area);
}
export default { render };
"""

CSS = """
.nbchat-input-area { width: 100%; box-sizing: border-box; resize: vertical; font: inherit;
  color: var(--jp-ui-font-color1, inherit); background: var(--jp-layout-color1, transparent);
  border: 1px solid var(--jp-border-color1, rgba(127, 127, 127, 0.45)); padding: 4px 6px; }
"""


class ChatInput(anywidget.AnyWidget):
    """A textarea that submits on Enter; `on_submit(callback)` is called with the text."""

    _esm = ESM
    _css = CSS
    value = traitlets.Unicode("").tag(sync=True)
    placeholder = traitlets.Unicode("Message — Enter to send, Shift+Enter for a new line").tag(
        sync=True
    )
    disabled = traitlets.Bool(False).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._submit_callbacks: list[Callable[[str], object]] = []
        self.on_msg(self._on_frontend_message)

    def on_submit(self, callback: Callable[[str], object]) -> None:
        """Call `callback(text)` whenever the user presses Enter (or `submit()` is called)."""
        self._submit_callbacks.append(callback)

    def submit(self, text: str | None = None) -> None:
        """Submit `text` (default: the current value), as pressing Enter would."""
        if text is not None:
            self.value = text
        for callback in list(self._submit_callbacks):
            callback(self.value)

    def _on_frontend_message(self, _widget: object, content: Any, _buffers: object) -> None:
        if isinstance(content, dict) and content.get("type") == "submit":
            self.submit(str(content.get("value", "")))

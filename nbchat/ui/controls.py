"""The chat's controls and its link to the model server: header, session picker, message box, input
row, status line, the context meter's reading, and connecting (with "Start local model" when the
embedded server is not running).

`Controls`: a chat's buttons and bars, built and wired once. The header (session picker, New,
context meter, Compact, where the model runs), the input row (message box, Send, Stop) and the
one-line status; which of them a busy turn or a broken database disables; the meter's reading
of the conversation's budget.

`SessionPicker`: the header's list of sessions, titles newest first, the current one selected;
choosing another one switches the chat to it. Both the worker and the kernel thread refresh it,
hence the lock; a refresh does not count as the user choosing. Reads the store's session list
only.

`ChatInput`: the message box — Enter sends, Shift+Enter adds a newline. ipywidgets' `Textarea`
has no key events, so this is a tiny anywidget (an ES module shipped as a string: no JavaScript
build step). The browser sends the text with the submit message itself, so a send never races
the `value` sync. JupyterLab's own shortcuts are suppressed while typing. Python code (tests,
`ChatUI.send`) submits with `submit()`, exactly like pressing Enter.

`ServerStartup`: a `ChatUI`'s link to its model server: connecting (starting the embedded server
when asked), checking that the server serves the configured model, and offering a "Start local
model" button when the embedded server is not running. The work runs on the chat's worker;
failures go to the widget and to the cell's report.

No SQL, HTTP or prompt text: what a click does is the `ChatUI`'s (the callbacks it passes in),
and the conversation connects (`Conversation.connect`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from nbchat.config import Settings
from nbchat.conversation.events import Event, Failed
from nbchat.conversation.loop import Conversation
from nbchat.errors import NbchatError, ServerUnavailableError
from nbchat.llm.endpoint import Connection
from nbchat.store.store import Store
from nbchat.ui.messages import MessageList
from nbchat.ui.render import render_notice
from nbchat.ui.view import ContextMeter, EventView
from nbchat.ui.worker import CellReport, Worker

__all__ = ["ChatInput", "Controls", "ServerStartup", "SessionPicker", "ready_status"]


class SessionPicker:
    """The dropdown (`widget`); `switch(session_id)` runs when the user picks a session."""

    def __init__(
        self, store: Store, conversation: Conversation, *, switch: Callable[[str | None], None]
    ) -> None:
        self.store = store
        self.conversation = conversation
        self.switch = switch
        self._lock = threading.Lock()
        self._updating = False
        self.widget = widgets.Dropdown(options=[], layout=widgets.Layout(width="260px"))
        self.widget.observe(self._on_widget_change, names="value")

    @property
    def choices(self) -> list[tuple[str, str | None]]:
        """(label, session id) of each entry, the current session included."""
        return list(self.widget.options)

    def choose(self, session_id: str) -> None:
        """Pick a session, as the user does."""
        self.widget.value = session_id

    def refresh(self) -> None:
        """Fill the list (titles, newest first) and select the current session."""
        with self._lock:
            current = self.conversation.session_id
            sessions = self.store.list_sessions()
            options: list[tuple[str, str | None]] = [
                (f"{s.title} · {s.updated[:16].replace('T', ' ')}", s.id) for s in sessions
            ]
            if current not in [value for _, value in options]:
                options.insert(0, ("New chat", current))
            self._updating = True
            try:
                self.widget.options = options
                self.widget.value = current
            finally:
                self._updating = False

    def _on_widget_change(self, change: dict[str, Any]) -> None:
        if not self._updating and change["new"] != self.conversation.session_id:
            self.switch(change["new"])


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


METER_NOTES = {"": "", "preparing": "preparing…", "ready": "checkpoint ready"}
Click = Callable[[widgets.Button], None]


class Controls:
    """The widgets around the message list; each button calls its `on_*` callback."""

    def __init__(
        self,
        picker: SessionPicker,
        *,
        badge: str,
        on_new: Click,
        on_compact: Click,
        on_send: Click,
        on_stop: Click,
    ) -> None:
        self.picker = picker
        self.new_button = _button(on_new, description="New", tooltip="Start a new session")
        self.meter = ContextMeter()
        self.compact_button = _button(
            on_compact, description="Compact", tooltip="Compact the history now"
        )
        self.header = widgets.HBox(
            [picker.widget, self.new_button, self.meter, self.compact_button]
            + [widgets.HTML(value=badge)]
        )
        self.input = ChatInput(layout=widgets.Layout(flex="1"))
        self.send_button = _button(on_send, description="Send", button_style="primary")
        self.stop_button = _button(on_stop, description="Stop", disabled=True)
        buttons = widgets.VBox([self.send_button, self.stop_button])
        self.input_row = widgets.HBox([self.input, buttons], layout=widgets.Layout(width="100%"))
        self.status_line = widgets.HTML(value="")

    def set_busy(self, busy: bool) -> None:
        """While a turn runs: Send and Compact off, Stop on (and red)."""
        self.send_button.disabled = busy
        self.compact_button.disabled = busy
        self.stop_button.disabled = not busy
        self.stop_button.button_style = "danger" if busy else ""

    def disable(self) -> None:
        """Nothing can be used (the session database cannot be opened)."""
        for control in (self.input, self.send_button, self.compact_button, self.new_button):
            control.disabled = True
        self.picker.widget.disabled = True

    def show_budget(self, conversation: Conversation) -> None:
        """The meter: the next request's tokens against the budget and the trigger."""
        threshold = conversation.budget.threshold_if_known()
        trigger = int(threshold * conversation.settings.trigger_factor)
        tokens = conversation.context_tokens()
        self.meter.show(
            tokens,
            threshold,
            trigger,
            reported=conversation.history.reported_tokens is not None,
            note=METER_NOTES[conversation.preparer.state(conversation.session_id)],
        )


def _button(on_click: Click, **traits: object) -> widgets.Button:
    button = widgets.Button(**traits)
    button.on_click(on_click)
    return button


class ServerStartup:
    """Connects `conversation` to its server on `worker`, showing progress in `view`."""

    def __init__(
        self,
        conversation: Conversation,
        *,
        worker: Worker,
        view: EventView,
        messages: MessageList,
        report: CellReport,
        changed: Callable[[], None],
    ) -> None:
        self.conversation = conversation
        self.worker = worker
        self.view = view
        self.messages = messages
        self.report = report
        self.changed = changed  # the context meter's refresh, once the budget is known

    def connect_job(self, *, start: bool | None) -> Callable[[], None]:
        """A worker job connecting to the server (`start`: whether to start the embedded one;
        None: as the settings say)."""

        def job() -> None:
            self.view.set_status("connecting to the model server…")
            try:
                connection = self.conversation.connect(start=start, progress=self.view.set_status)
                self.view.set_status(ready_status(self.conversation.settings))
                self.check_model(connection)
            except NbchatError as exc:
                self.report.add(str(exc))
                self.offer_local_model(str(exc))
            self.changed()

        return job

    def model_check_job(self) -> None:
        """A configured server: is the model name one it serves? (Unreachable: the first
        message says so, as before.)"""
        try:
            self.check_model(self.conversation.connect(start=False))
        except NbchatError:
            return

    def check_model(self, connection: Connection) -> None:
        """A notice when the server does not serve the model name; on llama.cpp, which answers
        under any name, the chat records the name it really serves."""
        # The conversation checked the configured name on connecting (and may use the served
        # one since); its verdict is the one to show.
        check = self.conversation.budget.model_check or connection.check_model(
            self.conversation.settings
        )
        if check.message:
            self.messages.add(widgets.HTML(value=render_notice(check.message)))
        if check.model != self.conversation.settings.model:
            self.conversation.set_model(check.model)

    def is_embedded_server_missing(self, event: Event) -> bool:
        """Whether `event` is a turn failing because the embedded server is not running."""
        return (
            isinstance(event, Failed)
            and isinstance(event.error, ServerUnavailableError)
            and self.conversation.settings.is_embedded
        )

    def offer_local_model(self, message: str | None) -> None:
        """A Start button for the embedded model (under `message`, when there is one)."""
        start = widgets.Button(description="Start local model", button_style="info")
        start.on_click(lambda _b: self.worker.submit(self.connect_job(start=True)))
        notice = [widgets.HTML(value=render_notice(message))] if message else []
        self.messages.add(widgets.VBox([*notice, start]))
        self.view.set_status("no model server", error=True)


def ready_status(settings: Settings) -> str:
    """The status once the embedded server answers, with how long it will stay."""
    idle = settings.local_idle_timeout
    if idle <= 0:
        return "ready (the embedded model server keeps running until `nbchat stop-model`)"
    minutes = f"{idle / 60:g} minutes" if idle >= 120 else f"{idle:g} seconds"
    return f"ready (the embedded model server stops itself after {minutes} without a request)"

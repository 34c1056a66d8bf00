"""`ChatUI`: the notebook widget people chat in.

Layout: a header (session picker, New, context meter, Compact), the message list, the input
(Enter sends, Shift+Enter newline) with Send and Stop, and a one-line status. One worker thread
runs every turn, switch and compaction; the kernel thread only handles clicks, so Stop works at
once. Switching session, New and close stop the running turn first, then act on the worker, in
order. Every failure ends as a visible bubble and the input is usable again.

Driving it from cells: `ui.send(text)`, `ui.wait()`, `ui.conversation`, `ui.close()`. What a
user does and sees has a public name too (tests use only these): `press_send()`, `press_stop()`,
`press_new()`, `press_compact()` then `preview_card()`, `press_undo()`, `choose_session(id)`,
`can_send`, `can_stop`, `status`, `session_choices`, and for a tool waiting on the user
`wait_for_approval()`, `approve()`, `deny()`. A failure also reaches the cell: `wait()` prints
it on stderr and returns False (`nbchat.ui.failures`). A session database that cannot be opened
gives one message in the widget and the cell, never a traceback, and the file is left as it is.
Displayed, the chat also leaves a static transcript beside the widget for where no kernel runs
(`nbchat.ui.transcript`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as widgets
import openai

from nbchat.config import Settings
from nbchat.conversation.events import CompactionFinished, Event, Failed
from nbchat.conversation.loop import Conversation
from nbchat.errors import NbchatError, ServerUnavailableError, StoreError
from nbchat.history import Row
from nbchat.llm.endpoint import Connection, destination_of
from nbchat.stopping import StopSignal
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolRegistry
from nbchat.tools.notebook import current_shell, notebook_tools
from nbchat.ui.actions import run_command
from nbchat.ui.attach import Attachment, with_attachments
from nbchat.ui.background import IdleWork
from nbchat.ui.cards import ApprovalCard, row_widget
from nbchat.ui.commands import Command, parse_command
from nbchat.ui.compactcard import PreviewCard
from nbchat.ui.compactflow import CompactionFlow
from nbchat.ui.failures import CellReport, database_message
from nbchat.ui.input import ChatInput
from nbchat.ui.inspector import RequestLink, latest_request_link, reply_links
from nbchat.ui.messages import MessageList
from nbchat.ui.render import STYLE, destination_badge, render_notice
from nbchat.ui.transcript import TranscriptDisplay, transcript_entries
from nbchat.ui.view import ContextMeter, EventView
from nbchat.ui.worker import Worker

__all__ = ["ChatUI"]

METER_NOTES = {"": "", "preparing": "preparing…", "ready": "checkpoint ready"}
Card = Callable[[Row, dict[str, Any] | None], widgets.Widget]


class ChatUI(widgets.VBox):
    """A chat in a notebook cell. `ChatUI()` uses `Settings.load(**overrides)`."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        store: Store | None = None,
        session_id: str | None = None,
        client: openai.OpenAI | None = None,
        tools: ToolRegistry | None = None,
        live_limit: int = 200,
        max_rate: float = 15.0,
        **overrides: Any,
    ) -> None:
        if settings is None:
            settings = Settings.load(**overrides)
        elif overrides:
            settings = settings.replace(**overrides)
        self.store = store or Store(settings.database_path)
        self.conversation = Conversation(
            settings, self.store, None, client, tools, approver=self._approve
        )
        shell = current_shell() if settings.notebook_tools else None
        for notebook_tool in notebook_tools(shell) if shell is not None else ():
            self.conversation.tools.register(notebook_tool)
        self._report = CellReport()
        self.unavailable = ""  # why this chat cannot be used at all, when it cannot
        self._destination = destination_of(
            str(client.base_url) if client is not None else settings.base_url
        )
        self._worker = Worker()
        self.background = IdleWork(
            self._worker,
            self.conversation,
            changed=self._update_meter,
            applied=lambda result: self.view.handle(CompactionFinished(result)),
        )
        self._stop = StopSignal()
        self._picker_lock = threading.Lock()
        self._turn_queued = threading.Event()
        self._approval_shown = threading.Event()
        self._pending_approval: ApprovalCard | None = None
        self.attachments: list[Attachment] = []
        self.transcript = TranscriptDisplay(self.store, lambda: self.conversation.session_id)
        self._build_widgets(live_limit, max_rate)
        self.compaction = CompactionFlow(self)  # preview, accept, undo (`ui/compactflow.py`)
        self.view.compaction_widget = self.compaction.live_card
        super().__init__(
            [
                widgets.HTML(value=STYLE),
                self._header,
                self.messages.box,
                self._input_row,
                self._status_line,
            ]
        )
        self.add_class("nbchat")
        try:
            if session_id is not None:
                self.conversation.resume(session_id)
            self.refresh_sessions()
            self.show_session()
        except StoreError as exc:  # corrupt or locked: say so once, leave the file alone
            self._database_failed(exc)
            return
        if settings.is_embedded and client is None:
            self._worker.submit(self._connect_job(start=None))
        elif client is None:
            self._worker.submit(self._model_check_job)

    def _ipython_display_(self, **_kwargs: Any) -> None:
        """The live widget, then its static transcript for where no kernel runs."""
        self.transcript.show(self._repr_mimebundle_())

    def __repr__(self) -> str:
        if self.unavailable:
            return f"ChatUI(unavailable: {self.unavailable})"
        return f"ChatUI(model={self.conversation.settings.model!r})"

    # Public API for cells and tests

    def send(self, text: str) -> None:
        """Send `text` as if typed and Enter pressed (returns at once; see `wait`)."""
        if self.unavailable:
            self._report.add(self.unavailable)
            return
        self.input.submit(text)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current reply (and anything queued) is done. False on timeout, or
        when something failed since the last `wait()`: each failure is then printed, with what
        to do, on stderr (the cell's output), not only in the widget."""
        if self.unavailable:
            self._report.add(self.unavailable)
        finished = self._worker.wait(timeout)
        return self._report.report() and finished

    def stop(self) -> None:
        """Stop the running turn (the Stop button) and any idle work."""
        self._stop.set()
        self.background.cancel()

    @property
    def busy(self) -> bool:
        return self._worker.busy

    def close(self) -> None:
        """Stop the turn, end the worker thread, release the session, close the widgets."""
        self.stop()
        self._worker.close()
        self.conversation.close()
        self.transcript.close()
        super().close()

    # What a user does and sees, for cells and tests: the same handlers the clicks run

    def press_send(self) -> None:
        """Click Send: send what is in the input."""
        self._send_button.click()

    def press_stop(self) -> None:
        """Click Stop."""
        self._stop_button.click()

    def press_new(self) -> None:
        """Click New: start a new session (the current one is kept)."""
        self._new_button.click()

    def press_compact(self) -> None:
        """Click Compact: propose a compaction (see `preview_card`)."""
        self._compact_button.click()

    def preview_card(self) -> PreviewCard | None:
        """The newest proposed compaction (`accept()`, `edit(text)`, `discard()`)."""
        return self.compaction.preview_card

    def press_undo(self) -> None:
        """Click Undo on the latest compaction's card."""
        self.compaction.press_undo()

    def choose_session(self, session_id: str) -> None:
        """Pick a session in the header's list."""
        self._picker.value = session_id

    @property
    def session_choices(self) -> list[tuple[str, str | None]]:
        """The header's session list as (label, session id), the current one included."""
        return list(self._picker.options)

    @property
    def can_send(self) -> bool:
        """Whether the Send button is enabled."""
        return not self._send_button.disabled

    @property
    def can_stop(self) -> bool:
        """Whether the Stop button is enabled."""
        return not self._stop_button.disabled

    @property
    def status(self) -> str:
        """The status line's text."""
        return self.view.status_text

    def last_request_link(self) -> RequestLink | None:
        """The "request" link under the newest reply: `press()` it to see what was sent."""
        return self.view.last_request_link

    def wait_for_approval(self, timeout: float | None = None) -> ApprovalCard | None:
        """The approval card waiting for a decision, once there is one; None on timeout."""
        if not self._approval_shown.wait(timeout):
            return None
        return self._pending_approval

    def approve(self) -> None:
        """Press Approve on the card that is waiting."""
        self._waiting_card().approve()

    def deny(self) -> None:
        """Press Deny on the card that is waiting."""
        self._waiting_card().deny()

    def _waiting_card(self) -> ApprovalCard:
        card = self._pending_approval
        if card is None:
            raise NbchatError("Nothing is waiting for approval: wait_for_approval() first.")
        return card

    # Layout

    def _build_widgets(self, live_limit: int, max_rate: float) -> None:
        self._picker = widgets.Dropdown(options=[], layout=widgets.Layout(width="260px"))
        self._picker.observe(self._on_picker_change, names="value")
        self._new_button = widgets.Button(description="New", tooltip="Start a new session")
        self._new_button.on_click(self._on_new_click)
        self._meter = ContextMeter()
        self._compact_button = widgets.Button(
            description="Compact", tooltip="Compact the history now"
        )
        self._compact_button.on_click(self._on_compact_click)
        self._badge = widgets.HTML(value=destination_badge(self._destination))
        self._header = widgets.HBox(
            [self._picker, self._new_button, self._meter, self._compact_button, self._badge]
        )
        self.messages = MessageList(live_limit=live_limit)
        self.input = ChatInput(layout=widgets.Layout(flex="1"))
        self.input.on_submit(self._on_input_submit)
        self._send_button = widgets.Button(description="Send", button_style="primary")
        self._send_button.on_click(self._on_send_click)
        self._stop_button = widgets.Button(description="Stop", disabled=True)
        self._stop_button.on_click(self._on_stop_click)
        buttons = widgets.VBox([self._send_button, self._stop_button])
        self._input_row = widgets.HBox([self.input, buttons], layout=widgets.Layout(width="100%"))
        self._status_line = widgets.HTML(value="")
        self.view = EventView(
            self.messages, self._status_line, self._update_meter, max_rate=max_rate
        )
        self.view.restore_input = self._restore_input
        self.view.request_link = lambda: latest_request_link(
            self.store, self.conversation.session_id
        )
        self.view.set_status("ready")

    # Clicks (kernel thread): enqueue work, never do it here

    def _on_input_submit(self, text: str) -> None:
        command = parse_command(text)
        if command is not None:
            self.input.value = ""
            self._run_command(command)
        elif text.strip():
            self.input.value = ""
            message = with_attachments(text, self.attachments)
            self.attachments = []
            self.run_turn(lambda stop: self.conversation.send(message, stop))

    def _on_send_click(self, _button: widgets.Button) -> None:
        self.input.submit()

    def _on_stop_click(self, _button: widgets.Button) -> None:
        self.stop()

    def _on_new_click(self, _button: widgets.Button) -> None:
        self.switch_session(None)

    def _on_compact_click(self, _button: widgets.Button) -> None:
        self.compaction.preview()

    def _on_picker_change(self, change: dict[str, Any]) -> None:
        if not self._updating_picker and change["new"] != self.conversation.session_id:
            self.switch_session(change["new"])

    # Work on the worker thread

    def run_turn(self, start: Callable[[threading.Event], Iterator[Event]]) -> None:
        """Queue a turn; the stop signal is fresh for each one."""
        # A turn waits behind a connection or a switch, but not behind another turn.
        if self._turn_queued.is_set():
            self.notice("A reply is still running; press Stop or wait for it.")
            return
        self._turn_queued.set()
        self.background.cancel()  # the user comes first
        stop = self._stop = StopSignal()

        def job() -> None:
            self._set_busy(True)
            try:
                for event in start(stop):
                    self.view.handle(event)
                    if isinstance(event, Failed):
                        self._report.add(event.message)
                    if self._embedded_server_missing(event):
                        self._offer_local_model(None)
            except Exception as exc:  # Conversation reports its own; this is the last resort
                self._report.add(f"Unexpected error: {exc!r}")
                self.view.handle(Failed(exc, f"Unexpected error: {exc!r}"))
            finally:
                self._turn_queued.clear()
                self._set_busy(False)
                self.refresh_sessions()
                self.transcript.update()
                self.background.schedule()

        self._worker.submit(job)

    def switch_session(self, session_id: str | None) -> None:
        """Stop the running turn, then switch (None = a new session) on the worker."""
        self.stop()

        def job() -> None:
            try:
                if session_id is None:
                    self.conversation.new_session()
                else:
                    self.conversation.resume(session_id)
                self.show_session()
            except NbchatError as exc:
                self._report.add(str(exc))
                self.view.handle(Failed(exc, str(exc)))
            self.refresh_sessions()

        self._worker.submit(job)

    def _connect_job(self, *, start: bool | None) -> Callable[[], None]:
        def job() -> None:
            self.view.set_status("connecting to the model server…")
            try:
                connection = self.conversation.connect(start=start, progress=self.view.set_status)
                self.view.set_status(ready_status(self.conversation.settings))
                self._check_model(connection)
            except NbchatError as exc:
                self._report.add(str(exc))
                self._offer_local_model(str(exc))
            self._update_meter()

        return job

    def _model_check_job(self) -> None:
        """A configured server: is the model name one it serves? (Unreachable: the first
        message says so, as before.)"""
        try:
            self._check_model(self.conversation.connect(start=False))
        except NbchatError:
            return

    def _check_model(self, connection: Connection) -> None:
        """A notice when the server does not serve the model name; on llama.cpp, which answers
        under any name, the chat records the name it really serves."""
        # The conversation checked the configured name on connecting (and may use the served
        # one since); its verdict is the one to show.
        check = self.conversation.budget.model_check or connection.check_model(
            self.conversation.settings
        )
        if check.message:
            self.notice(check.message)
        if check.model != self.conversation.settings.model:
            self.conversation.set_model(check.model)

    def _database_failed(self, error: StoreError) -> None:
        """The store cannot be opened: one message, in the widget and for the cell; nothing
        else runs (no session is read or written, the file is not touched again)."""
        self.unavailable = database_message(error, self.store.path)
        self.messages.add(widgets.HTML(value=render_notice(self.unavailable, error=True)))
        self.view.set_status("the session database cannot be opened", error=True)
        for control in (self.input, self._send_button, self._compact_button, self._new_button):
            control.disabled = True
        self._picker.disabled = True

    def _embedded_server_missing(self, event: Event) -> bool:
        return (
            isinstance(event, Failed)
            and isinstance(event.error, ServerUnavailableError)
            and self.conversation.settings.is_embedded
        )

    def _offer_local_model(self, message: str | None) -> None:
        """A Start button for the embedded model (under `message`, when there is one)."""
        start = widgets.Button(description="Start local model", button_style="info")
        start.on_click(lambda _b: self._worker.submit(self._connect_job(start=True)))
        notice = [widgets.HTML(value=render_notice(message))] if message else []
        self.messages.add(widgets.VBox([*notice, start]))
        self.view.set_status("no model server", error=True)

    def _approve(self, request: ApprovalRequest) -> bool:
        card = ApprovalCard(request.name, request.arguments, reason=request.reason)
        self.messages.add(card.widget)
        self.view.set_status(f"waiting for your approval to run {request.name}…")
        self._pending_approval = card
        self._approval_shown.set()
        try:
            return card.wait(self._stop)
        finally:
            self._approval_shown.clear()
            self._pending_approval = None

    # Display helpers

    def show_session(self) -> None:
        """Rebuild the message list from the store: the full transcript, archived rows too."""
        self.messages.clear()
        session_id = self.conversation.session_id
        if session_id is None:
            self._update_meter()
            return
        cards = self.compaction.stored_card
        self.messages.extend(transcript_factories(self.store, session_id, card=cards))
        for problem in self.conversation.problems:
            self.notice(str(problem))
        if self.conversation.read_only:
            self.notice(self.conversation.session.read_only_reason)
        self._update_meter()
        self.transcript.update()

    def refresh_sessions(self) -> None:
        """Fill the session picker (titles, newest first) and select the current session."""
        with self._picker_lock:  # the worker and the kernel thread both refresh it
            current = self.conversation.session_id
            sessions = self.store.list_sessions()
            options: list[tuple[str, str | None]] = [
                (f"{s.title} · {s.updated[:16].replace('T', ' ')}", s.id) for s in sessions
            ]
            if current not in [value for _, value in options]:
                options.insert(0, ("New chat", current))
            self._updating_picker = True
            try:
                self._picker.options = options
                self._picker.value = current
            finally:
                self._updating_picker = False

    def _update_meter(self) -> None:
        conversation = self.conversation
        threshold = conversation.budget.threshold_if_known()
        trigger = int(threshold * conversation.settings.trigger_factor)
        tokens = conversation.context_tokens()
        self._meter.show(
            tokens,
            threshold,
            trigger,
            reported=conversation.history.reported_tokens is not None,
            note=METER_NOTES[conversation.preparer.state(conversation.session_id)],
        )

    def _set_busy(self, busy: bool) -> None:
        self._send_button.disabled = busy
        self._compact_button.disabled = busy
        self._stop_button.disabled = not busy
        self._stop_button.button_style = "danger" if busy else ""

    def _restore_input(self, text: str) -> None:
        if not self.input.value:
            self.input.value = text

    def notice(self, text: str) -> None:
        self.messages.add(widgets.HTML(value=render_notice(text)))

    _updating_picker = False

    def _run_command(self, command: Command) -> None:
        self.background.cancel()  # a command is the user acting: /edit must not wait on it
        run_command(self, command)


def ready_status(settings: Settings) -> str:
    """The status once the embedded server answers, with how long it will stay."""
    idle = settings.local_idle_timeout
    if idle <= 0:
        return "ready (the embedded model server keeps running until `nbchat stop-model`)"
    minutes = f"{idle / 60:g} minutes" if idle >= 120 else f"{idle:g} seconds"
    return f"ready (the embedded model server stops itself after {minutes} without a request)"


def transcript_factories(
    store: Store, session_id: str, *, card: Card | None = None
) -> list[Callable[[], widgets.Widget]]:
    """Widget factories for the full transcript (`transcript_entries`), each reply followed by
    its request link; `card` makes the compaction cards (Undo, what was replaced)."""
    entries = transcript_entries(store, session_id)
    links = reply_links(store, session_id, [stored for stored, _ in entries])
    factories: list[Callable[[], widgets.Widget]] = []
    for stored, info in entries:
        factories.append(_row_factory(stored.row, info, card))
        factories.extend([links[stored.id]] if stored.id in links else [])
    return factories


def _row_factory(
    row: Row, info: dict[str, Any] | None, card: Card | None
) -> Callable[[], widgets.Widget]:
    if card is not None and row.role == "compacted":  # the card with Undo and what it replaced
        return lambda: card(row, info)
    return lambda: row_widget(row, compaction=info)

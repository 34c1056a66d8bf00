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
it on stderr and returns False (`nbchat.ui.worker`). A session database that cannot be opened
gives one message in the widget and the cell, never a traceback, and the file is left as it is.
Displayed, the chat also leaves a static transcript beside the widget for where no kernel runs
(`nbchat.ui.transcript`).

This module owns the layout, the clicks and the turns on the worker; its parts do the rest:
the header, session list and input (`controls`), the model server link (`controls`), tool
approvals (`view`), the message list rebuilt from the store (`cards`), slash commands
(`actions`) and compaction you steer (`compactflow`).
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
from nbchat.errors import NbchatError, StoreError
from nbchat.llm.endpoint import destination_of
from nbchat.stopping import StopSignal
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolRegistry
from nbchat.tools.notebook import current_shell, notebook_tools
from nbchat.ui.acting import NotebookActing, can_act, route_off_main_thread
from nbchat.ui.actions import stale_notes, start_rewind, submit_text, user_widget
from nbchat.ui.attach import Attachment
from nbchat.ui.cards import ApprovalCard, RequestLink, latest_request_link, transcript_factories
from nbchat.ui.compactflow import CompactionFlow, PreviewCard
from nbchat.ui.controls import Controls, ServerStartup, SessionPicker, ready_status
from nbchat.ui.messages import MessageList
from nbchat.ui.render import STYLE, destination_badge, render_notice
from nbchat.ui.transcript import TranscriptDisplay
from nbchat.ui.view import ApprovalDesk, EventView
from nbchat.ui.worker import CellReport, IdleWork, Worker, database_message

# `ready_status` and `transcript_factories` are imported from here by tests and notebooks.
__all__ = ["ChatUI", "ready_status", "transcript_factories"]


class ChatUI(widgets.VBox):
    """A chat in a notebook cell. `ChatUI()` uses `Settings.load(**overrides)`."""

    # Closed until the parts `close` ends exist: a constructor that failed (bad settings, say)
    # leaves nothing to end when ipywidgets calls `close` from `__del__`.
    _closed = True

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
        if shell is not None:
            for notebook_tool in notebook_tools(shell, notes=self._stale):
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
        self._turn_queued = threading.Event()
        self.attachments: list[Attachment] = []
        self.transcript = TranscriptDisplay(self.store, lambda: self.conversation.session_id)
        # The tools that act on the notebook, in a kernel.
        self.acting = self._notebook_acting(shell) if settings.notebook_acting else None
        self._closed = False
        self._build_widgets(live_limit, max_rate)
        self.compaction = CompactionFlow(self)  # preview, accept, undo (`ui/compactflow.py`)
        self.view.compaction_widget = self.compaction.live_card
        self.approvals = ApprovalDesk(self.messages, self.view, stop=lambda: self._stop)
        if self.acting is not None:  # Stop must reach the model's code on the main thread
            route_off_main_thread(self.controls.stop_button, getattr(shell, "kernel", None))
        self.startup = ServerStartup(
            self.conversation,
            worker=self._worker,
            view=self.view,
            messages=self.messages,
            report=self._report,
            changed=self._update_meter,
        )
        super().__init__(
            [
                widgets.HTML(value=STYLE),
                self.controls.header,
                self.messages.box,
                self.controls.input_row,
                self.controls.status_line,
            ]
        )
        self.add_class("nbchat")
        if self._open_session(session_id) and client is None:
            # The embedded model is started (or found); another server is checked.
            embedded = settings.is_embedded
            self._worker.submit(
                self.startup.connect_job(start=None) if embedded else self.startup.model_check_job
            )

    def _notebook_acting(self, shell: Any) -> NotebookActing | None:
        """The tools that insert, edit and run cells and code, when `shell` is a kernel's."""
        if not can_act(shell):
            return None
        acting = NotebookActing(
            shell,
            key=self.transcript.display_id,
            conversation=self.conversation,
            store=self.store,
            notice=lambda text: self.notice(text),
        )
        self._worker.on_idle(acting.queue.wake)
        return acting

    def _open_session(self, session_id: str | None) -> bool:
        """Resume `session_id` (else the conversation's own) and show it; False, with the
        database's failure shown once and the file left alone, when it cannot be read."""
        try:
            if session_id is not None:
                self.conversation.resume(session_id)
            self.refresh_sessions()
            self.show_session()
        except StoreError as exc:  # corrupt or locked
            self._database_failed(exc)
            return False
        return True

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
        to do, on stderr (the cell's output), not only in the widget. Code the model runs in
        the kernel meanwhile runs here, on the kernel's main thread (`KernelQueue.serve`)."""
        if self.unavailable:
            self._report.add(self.unavailable)
        if self.acting is not None:  # the model's code runs here meanwhile (`KernelQueue`)
            finished = self.acting.queue.serve(lambda: not self._worker.busy, timeout)
        else:
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
        """Stop the turn, end the worker thread, release the session, close the widgets. Once:
        ipywidgets calls `close` again when the widget is garbage-collected, which at the
        interpreter's exit may come after the store's connections were closed."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        self._worker.close()
        self.conversation.close()
        self.transcript.close()
        if self.acting is not None:
            self.acting.close()
        super().close()

    # What a user does and sees, for cells and tests: the same handlers the clicks run

    def press_send(self) -> None:
        """Click Send: send what is in the input."""
        self.controls.send_button.click()

    def press_stop(self) -> None:
        """Click Stop."""
        self.controls.stop_button.click()

    def press_new(self) -> None:
        """Click New: start a new session (the current one is kept)."""
        self.controls.new_button.click()

    def press_compact(self) -> None:
        """Click Compact: propose a compaction (see `preview_card`)."""
        self.controls.compact_button.click()

    def preview_card(self) -> PreviewCard | None:
        """The newest proposed compaction (`accept()`, `edit(text)`, `discard()`)."""
        return self.compaction.preview_card

    def press_undo(self) -> None:
        """Click Undo on the latest compaction's card."""
        self.compaction.press_undo()

    def choose_session(self, session_id: str) -> None:
        """Pick a session in the header's list."""
        self.picker.choose(session_id)

    @property
    def session_choices(self) -> list[tuple[str, str | None]]:
        """The header's session list as (label, session id), the current one included."""
        return self.picker.choices

    @property
    def can_send(self) -> bool:
        """Whether the Send button is enabled."""
        return not self.controls.send_button.disabled

    @property
    def can_stop(self) -> bool:
        """Whether the Stop button is enabled."""
        return not self.controls.stop_button.disabled

    @property
    def status(self) -> str:
        """The status line's text."""
        return self.view.status_text

    def last_request_link(self) -> RequestLink | None:
        """The "request" link under the newest reply: `press()` it to see what was sent."""
        return self.view.last_request_link

    def rewind(self, back: int = 1) -> None:
        """Rewind to your message `back` messages ago (1: the last one), as its "rewind to
        here" button does: the chat and the notebook go back to before it (returns at once;
        see `wait`)."""
        start_rewind(self, back=back)

    def wait_for_approval(self, timeout: float | None = None) -> ApprovalCard | None:
        """The approval card waiting for a decision, once there is one; None on timeout."""
        return self.approvals.wait_for(timeout)

    def approve(self) -> None:
        """Press Approve on the card that is waiting."""
        self.approvals.waiting_card().approve()

    def deny(self) -> None:
        """Press Deny on the card that is waiting."""
        self.approvals.waiting_card().deny()

    # Layout

    def _build_widgets(self, live_limit: int, max_rate: float) -> None:
        self.picker = SessionPicker(self.store, self.conversation, switch=self.switch_session)
        self.controls = Controls(
            self.picker,
            badge=destination_badge(self._destination),
            on_new=self._on_new_click,
            on_compact=self._on_compact_click,
            on_send=self._on_send_click,
            on_stop=self._on_stop_click,
        )
        self.messages = MessageList(live_limit=live_limit)
        self.input = self.controls.input
        self.input.on_submit(self._on_input_submit)
        self.view = EventView(
            self.messages, self.controls.status_line, self._update_meter, max_rate=max_rate
        )
        self.view.restore_input = self._restore_input
        self.view.user_widget = lambda row, row_id: user_widget(self, row, row_id)
        self.view.user_row_id = self._last_user_row_id
        self.view.request_link = lambda: latest_request_link(
            self.store, self.conversation.session_id
        )
        self.view.set_status("ready")

    # Clicks (kernel thread): enqueue work, never do it here

    def _on_input_submit(self, text: str) -> None:
        submit_text(self, text)

    def _on_send_click(self, _button: widgets.Button) -> None:
        self.input.submit()

    def _on_stop_click(self, _button: widgets.Button) -> None:
        self.stop()

    def _on_new_click(self, _button: widgets.Button) -> None:
        self.switch_session(None)

    def _on_compact_click(self, _button: widgets.Button) -> None:
        self.compaction.preview()

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
            self.controls.set_busy(True)
            try:
                for event in start(stop):
                    self.view.handle(event)
                    if isinstance(event, Failed):
                        self._report.add(event.message)
                    if self.startup.is_embedded_server_missing(event):
                        self.startup.offer_local_model(None)
            except Exception as exc:  # Conversation reports its own; this is the last resort
                self._report.add(f"Unexpected error: {exc!r}")
                self.view.handle(Failed(exc, f"Unexpected error: {exc!r}"))
            finally:
                self._turn_queued.clear()
                self.controls.set_busy(False)
                self.refresh_sessions()
                self.transcript.update()
                self.background.schedule()

        self._worker.submit(job)

    def submit_job(self, job: Callable[[], None]) -> None:
        """Run `job` on the chat's worker, after what is queued there."""
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

    def _database_failed(self, error: StoreError) -> None:
        """The store cannot be opened: one message, in the widget and for the cell; nothing
        else runs (no session is read or written, the file is not touched again)."""
        self.unavailable = database_message(error)
        self.messages.add(widgets.HTML(value=render_notice(self.unavailable, error=True)))
        self.view.set_status("the session database cannot be opened", error=True)
        self.controls.disable()

    def _approve(self, request: ApprovalRequest) -> bool:
        return self.approvals.ask(request)

    # Display helpers

    def show_session(self) -> None:
        """Rebuild the message list from the store: the full transcript, archived rows too."""
        self.messages.clear()
        session_id = self.conversation.session_id
        if session_id is None:
            self._update_meter()
            return
        cards = self.compaction.stored_card
        self.messages.extend(
            transcript_factories(
                self.store,
                session_id,
                card=cards,
                user=lambda row, row_id: user_widget(self, row, row_id),
            )
        )
        for problem in self.conversation.problems:
            self.notice(str(problem))
        if self.conversation.read_only:
            self.notice(self.conversation.session.read_only_reason)
        self._update_meter()
        self.transcript.update()

    def refresh_sessions(self) -> None:
        """Fill the session picker (titles, newest first) and select the current session."""
        self.picker.refresh()

    def _update_meter(self) -> None:
        self.controls.show_budget(self.conversation)

    def _last_user_row_id(self) -> int | None:
        session_id = self.conversation.session_id
        return None if session_id is None else self.store.last_active_id(session_id, "user")

    def _restore_input(self, text: str) -> None:
        if not self.input.value:
            self.input.value = text

    def notice(self, text: str) -> None:
        self.messages.add(widgets.HTML(value=render_notice(text)))

    def _stale(self) -> list[str]:
        """The variables whose cell changed or went, for the variables' listing."""
        return stale_notes(self.acting)

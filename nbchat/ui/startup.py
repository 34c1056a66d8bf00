"""`ServerStartup`: a `ChatUI`'s link to its model server: connecting (starting the embedded
server when asked), checking that the server serves the configured model, and offering a
"Start local model" button when the embedded server is not running.

The work runs on the chat's worker; failures go to the widget and to the cell's report.
No SQL, HTTP or prompt text: the conversation connects (`Conversation.connect`).
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from nbchat.config import Settings
from nbchat.conversation.events import Event, Failed
from nbchat.conversation.loop import Conversation
from nbchat.errors import NbchatError, ServerUnavailableError
from nbchat.llm.endpoint import Connection
from nbchat.ui.messages import MessageList
from nbchat.ui.render import render_notice
from nbchat.ui.view import EventView
from nbchat.ui.worker import CellReport, Worker

__all__ = ["ServerStartup", "ready_status"]


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

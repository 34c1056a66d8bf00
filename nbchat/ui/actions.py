"""Carrying out slash commands for a `ChatUI`: each command one small function; and what Enter
does with the text typed (`submit_text`: a command runs, anything else is sent).

Work that touches the model or a session switch goes through the UI's worker; quick store
reads and writes (list, rename, export) happen here. No SQL, HTTP or prompt text.

The commands act on a `CommandTarget`: what they need of the widget, as a protocol that
`ChatUI` meets, so this module does not import `chatui` (which imports this one).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from nbchat.conversation.events import Event
from nbchat.conversation.loop import Conversation
from nbchat.errors import NbchatError
from nbchat.store.store import Store
from nbchat.ui.attach import Attachment, Shell, attachment_from, with_attachments
from nbchat.ui.background import IdleWork
from nbchat.ui.commands import Command, help_text, parse_command, tools_text
from nbchat.ui.compactflow import CompactionFlow
from nbchat.ui.input import ChatInput

__all__ = ["CommandTarget", "run_command", "submit_text"]


class CommandTarget(Protocol):
    """What the commands use of the chat widget (`CommandTarget` has all of it)."""

    store: Store
    conversation: Conversation
    attachments: list[Attachment]
    input: ChatInput
    compaction: CompactionFlow
    background: IdleWork

    @property
    def busy(self) -> bool: ...

    def notice(self, text: str) -> None: ...

    def switch_session(self, session_id: str | None) -> None: ...

    def refresh_sessions(self) -> None: ...

    def show_session(self) -> None: ...

    def run_turn(self, start: Callable[[threading.Event], Iterator[Event]]) -> None: ...

    def rewind(self, back: int = 1) -> None: ...


def submit_text(ui: CommandTarget, text: str) -> None:
    """Enter pressed on `text`: a slash command runs; other text (not blank) is sent, with the
    attachments waiting for it."""
    command = parse_command(text)
    if command is not None:
        ui.input.value = ""
        ui.background.cancel()  # a command is the user acting: /edit must not wait on it
        run_command(ui, command)
    elif text.strip():
        ui.input.value = ""
        message = with_attachments(text, ui.attachments)
        ui.attachments = []
        ui.run_turn(lambda stop: ui.conversation.send(message, stop))


def run_command(ui: CommandTarget, command: Command) -> None:
    """Carry out `command`; problems are shown as notices, never raised."""
    action = ACTIONS.get(command.name, _unknown)
    try:
        action(ui, command.argument)
    except NbchatError as exc:
        ui.notice(str(exc))


def _new(ui: CommandTarget, _argument: str) -> None:
    ui.switch_session(None)


def _sessions(ui: CommandTarget, _argument: str) -> None:
    sessions = ui.store.list_sessions()
    if not sessions:
        ui.notice("No saved sessions yet.")
        return
    lines = [
        f"{s.title} — {s.id} — {s.active_rows}/{s.total_rows} rows — {s.updated[:16]}"
        for s in sessions[:30]
    ]
    ui.notice("Sessions (newest first; /resume <title or id>):\n" + "\n".join(lines))


def _resume(ui: CommandTarget, argument: str) -> None:
    wanted = argument.lower()
    sessions = ui.store.list_sessions()
    found = (
        next((s for s in sessions if s.id == argument), None)
        or next(
            (s for s in sessions if s.id.startswith(argument) or s.title.lower() == wanted), None
        )
        or next((s for s in sessions if wanted in s.title.lower()), None)
    )
    if found is None:
        ui.notice(f"No session matches {argument!r}; /sessions lists them.")
        return
    ui.switch_session(found.id)


def _rename(ui: CommandTarget, argument: str) -> None:
    session_id = ui.conversation.session_id
    if session_id is None:
        ui.notice("Send a message first: this session is not saved yet.")
        return
    ui.store.rename_session(session_id, argument)
    ui.refresh_sessions()
    ui.notice(f"Renamed to {argument!r}.")


def _compact(ui: CommandTarget, argument: str) -> None:
    ui.compaction.preview(argument or None)


def _undo_compact(ui: CommandTarget, _argument: str) -> None:
    ui.compaction.undo()


def _model(ui: CommandTarget, argument: str) -> None:
    ui.conversation.set_model(argument)
    ui.notice(f"Model switched to {argument!r}.")


def _export(ui: CommandTarget, argument: str) -> None:
    session_id = ui.conversation.session_id
    if session_id is None:
        ui.notice("Nothing to export yet: send a message first.")
        return
    kind = argument or "md"
    info = ui.store.get_session(session_id)
    slug = re.sub(r"[^a-z0-9]+", "-", info.title.lower()).strip("-") or "chat"
    path = ui.conversation.settings.workspace / f"nbchat-{slug}-{session_id}.{kind}"
    text = (
        ui.store.export_json(session_id) if kind == "json" else ui.store.export_markdown(session_id)
    )
    path.write_text(text, encoding="utf-8")
    ui.notice(f"Exported to {path}")


def _retry(ui: CommandTarget, _argument: str) -> None:
    ui.run_turn(lambda stop: ui.conversation.retry(stop))


def _edit(ui: CommandTarget, _argument: str) -> None:
    if ui.busy:
        ui.notice("A reply is still running; press Stop first.")
        return
    text = ui.conversation.take_back_last_message()
    ui.show_session()
    ui.input.value = text


def _rewind(ui: CommandTarget, argument: str) -> None:
    ui.rewind(int(argument or "1"))


def _attach(ui: CommandTarget, argument: str) -> None:
    if argument.strip() == "clear":
        ui.attachments.clear()
        ui.notice("Attachments dropped.")
        return
    try:
        attachment = attachment_from(argument, _ipython())
    except ValueError as exc:
        ui.notice(str(exc))
        return
    ui.attachments.append(attachment)
    ui.notice(
        f"Attached {attachment.label.lower()} ({len(attachment.text):,} characters); "
        "it goes with your next message."
    )


def _ipython() -> Shell | None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipywidgets depends on IPython
        return None
    shell: Shell | None = get_ipython()
    return shell


def _help(ui: CommandTarget, _argument: str) -> None:
    conversation = ui.conversation
    tools = tools_text(conversation.tools, conversation.mcp.status())
    ui.notice(f"{help_text()}\n\n{tools}")


def _invalid(ui: CommandTarget, argument: str) -> None:
    ui.notice(f"{argument}. /help lists the commands.")


def _unknown(ui: CommandTarget, argument: str) -> None:
    ui.notice(f"Unknown command /{argument}. The commands are:\n{help_text()}")


ACTIONS: dict[str, Callable[[CommandTarget, str], None]] = {
    "new": _new,
    "clear": _new,
    "sessions": _sessions,
    "resume": _resume,
    "rename": _rename,
    "compact": _compact,
    "undo-compact": _undo_compact,
    "model": _model,
    "export": _export,
    "attach": _attach,
    "retry": _retry,
    "edit": _edit,
    "rewind": _rewind,
    "help": _help,
    "invalid": _invalid,
    "unknown": _unknown,
}

"""What the user asks for besides a message: what Enter does, slash commands, and rewinding the
chat and the notebook to an earlier message.

Slash commands typed in the chat input: what exists, how each parses, and the help text (with
the tools the model may call and the MCP servers they come from). Carrying them out for a
`ChatUI`: each command one small function; and what Enter does with the text typed
(`submit_text`: a command runs, anything else is sent, after the text `/attach` took from the
kernel: `nbchat.ui.attach`). Work that touches the model or a session switch goes through the
UI's worker; quick store reads and writes (list, rename, export) happen here. The commands act
on a `CommandTarget`: what they need of the widget, as a protocol that `ChatUI` meets, so this
module does not import `chatui` (which imports this one).

Rewinding from the chat: the "rewind to here" button under each of the user's messages,
`ui.rewind(back)` and `/rewind [n]`, all running the same flow on the chat's worker. The
conversation takes the chat and the notebook back together (`nbchat.conversation.session`), the
message list is rebuilt from the store (the archived rows stay in it, marked, as after an edit),
the message's text goes back in the input, and a notice says what happened to each cell
(restored, removed, or left alone because the user edited it by hand). A chat without a notebook
(a script, no kernel) rewinds the chat alone. The work runs on the worker because the page's
answers to the notebook changes arrive on the kernel's main thread, which a click handler would
block. Also here: the variables' note about cells that changed or went, for the variables'
listing.

No SQL, HTTP or prompt text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import ipywidgets as widgets

from nbchat.conversation.events import Event
from nbchat.conversation.loop import Conversation
from nbchat.errors import NbchatError
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.tools.cells import NoDocument, stale_variables
from nbchat.tools.notebook import current_shell
from nbchat.tools.registry import ToolRegistry
from nbchat.ui.acting import NotebookActing, rewind_button
from nbchat.ui.attach import Attachment, attachment_from, with_attachments
from nbchat.ui.cards import row_widget
from nbchat.ui.compactflow import CompactionFlow
from nbchat.ui.controls import ChatInput
from nbchat.ui.worker import IdleWork

__all__ = [
    "COMMANDS",
    "Command",
    "CommandTarget",
    "RewindTarget",
    "help_text",
    "parse_command",
    "run_command",
    "stale_notes",
    "start_rewind",
    "submit_text",
    "tools_text",
    "user_widget",
]


COMMANDS: dict[str, tuple[str, str]] = {
    "new": ("", "start a new session (the current one is kept)"),
    "sessions": ("", "list the saved sessions"),
    "resume": ("<title or id>", "continue a saved session"),
    "rename": ("<title>", "rename this session"),
    "compact": (
        "[focus]",
        "propose a compaction (optionally telling the summary what to keep): accept, edit or "
        "discard it",
    ),
    "undo-compact": ("", "undo the latest compaction: the rows it replaced come back"),
    "clear": ("", "start a new empty session (the old one is kept)"),
    "model": ("<name>", "switch the chat model"),
    "export": ("[md|json]", "save this session to a file in the workspace"),
    "attach": (
        "cell N | output N | error | var NAME",
        "send a cell's source or output, the last error or a variable with your next "
        "message (/attach clear drops them)",
    ),
    "retry": ("", "ask for the last reply again"),
    "edit": ("", "put your last message back in the input to edit and resend it"),
    "rewind": (
        "[n]",
        "take the chat and the notebook back to before your message n messages ago (1: the "
        "last); cells you edited by hand are left alone",
    ),
    "help": ("", "show this list"),
}
NEEDS_ARGUMENT = frozenset({"resume", "rename", "model", "attach"})


@dataclass(frozen=True)
class Command:
    """A parsed command. `name` is "unknown" (with the typed name as `argument`) or "invalid"."""

    name: str
    argument: str = ""


def parse_command(text: str) -> Command | None:
    """The command in `text`, or None when it is an ordinary message.

    A message starting with "//" or with "/" followed by a space is ordinary text.
    """
    stripped = text.strip()
    if not stripped.startswith("/") or stripped.startswith("//") or stripped[1:2].isspace():
        return None
    name, _, argument = stripped[1:].partition(" ")
    name, argument = name.lower(), argument.strip()
    if name not in COMMANDS:
        return Command("unknown", name)
    if name in NEEDS_ARGUMENT and not argument:
        return Command("invalid", f"/{name} needs {COMMANDS[name][0]}")
    if name == "export" and argument not in ("", "md", "json"):
        return Command("invalid", "/export takes md or json")
    if name == "rewind" and argument and not (argument.isdigit() and int(argument) > 0):
        return Command("invalid", "/rewind takes how many of your messages back (1, 2, …)")
    return Command(name, argument)


def help_text() -> str:
    """One line per command."""
    lines = []
    for name, (usage, description) in COMMANDS.items():
        lines.append(f"/{name}{' ' + usage if usage else ''} — {description}")
    return "\n".join(lines)


def tools_text(tools: ToolRegistry, servers: Sequence[str] = ()) -> str:
    """The tools the model may call, one a line, with where each comes from and whether it
    needs approval under the 'ask' policy; then one line per MCP server (`McpTools.status`)."""
    lines = ["Tools the model may call:"]
    for name in tools.names():
        found = tools.get(name)
        if found is None:  # removed meanwhile
            continue
        notes = [f"from {found.origin}"] if found.origin else []
        if found.dangerous:
            notes.append("asks first under the 'ask' policy")
        lines.append(f"{name}{' — ' + ', '.join(notes) if notes else ''}")
    if servers:
        lines += ["MCP servers:", *servers]
    return "\n".join(lines)


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
        attachment = attachment_from(argument, current_shell())
    except ValueError as exc:
        ui.notice(str(exc))
        return
    ui.attachments.append(attachment)
    ui.notice(
        f"Attached {attachment.label.lower()} ({len(attachment.text):,} characters); "
        "it goes with your next message."
    )


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


NOTHING_TO_REWIND = "There is no earlier message of yours to rewind to (back={back})."


class RewindTarget(Protocol):
    """What the rewind uses of the chat widget (`ChatUI` has all of it)."""

    store: Store
    conversation: Conversation
    input: ChatInput
    acting: NotebookActing | None

    @property
    def busy(self) -> bool: ...

    def notice(self, text: str) -> None: ...

    def show_session(self) -> None: ...

    def submit_job(self, job: Callable[[], None]) -> None: ...


def user_widget(ui: RewindTarget, row: Row, row_id: int | None) -> widgets.Widget:
    """A user's message, with its "rewind to here" button when it is in the active history."""
    bubble = row_widget(row)
    if row_id is None:
        return bubble
    return rewind_button(bubble, lambda: start_rewind(ui, row_id=row_id))


def start_rewind(ui: RewindTarget, *, back: int = 1, row_id: int | None = None) -> None:
    """Rewind to the message `row_id`, or `back` of the user's messages ago, on the worker."""
    if ui.busy:
        ui.notice("A reply is still running; press Stop first, then rewind.")
        return
    if row_id is None:
        row_id = _message_back(ui, back)
        if row_id is None:
            ui.notice(NOTHING_TO_REWIND.format(back=back))
            return
    target = row_id

    def job() -> None:
        try:
            if ui.acting is not None:
                done = ui.acting.rewind(target)
            else:
                done = ui.conversation.rewind(target, _NO_NOTEBOOK)
        except NbchatError as exc:
            ui.notice(str(exc))
            return
        ui.show_session()
        ui.input.value = done.text
        for line in done.summary().splitlines():  # a notice is one line: one per change
            ui.notice(line)

    ui.submit_job(job)


def _message_back(ui: RewindTarget, back: int) -> int | None:
    session_id = ui.conversation.session_id
    if session_id is None or back < 1:
        return None
    users = [
        s.id
        for s in ui.store.load_full(session_id, problems=[])
        if not s.archived and s.row.role == "user"
    ]
    return users[-back] if back <= len(users) else None


def stale_notes(acting: NotebookActing | None) -> list[str]:
    """`name: set by In [N], whose cell …` for the variables whose cell changed or went (none
    without an open notebook)."""
    if acting is None or acting.document.why_absent():
        return []
    state = acting.state
    return stale_variables(state.origins(), acting.document.cells(), state.executions())


_NO_NOTEBOOK = NoDocument("this chat does not run in a notebook's kernel.")

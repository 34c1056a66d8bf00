"""Slash commands typed in the chat input: what exists, how it parses, and the help text (with
the tools the model may call and the MCP servers they come from).

Pure: parsing and wording only. `ChatUI` carries each command out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nbchat.tools.registry import ToolRegistry

__all__ = ["COMMANDS", "Command", "help_text", "parse_command", "tools_text"]

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

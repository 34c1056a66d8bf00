"""Slash commands typed in the chat input: what exists, how it parses, and the help text.

Pure: parsing only. `ChatUI` carries each command out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COMMANDS", "Command", "help_text", "parse_command"]

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
    return Command(name, argument)


def help_text() -> str:
    """One line per command."""
    lines = []
    for name, (usage, description) in COMMANDS.items():
        lines.append(f"/{name}{' ' + usage if usage else ''} — {description}")
    return "\n".join(lines)

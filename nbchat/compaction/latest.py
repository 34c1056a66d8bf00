"""The user's latest message, carried whole through a compaction that cuts inside its turn.

A long turn (one instruction, many tool rounds) can only shrink by a cut inside the turn, which
would summarise the instruction the model is still working on. `latest_instruction` finds it
when a cut would take it; the engine then appends it, whole, to the `compacted` row under its
own heading (`render_latest`), and a later compaction carries it on (`parse_latest`) until a
newer user message takes its place.

Each line is quoted (`> `), so the block ends unambiguously however the message reads, and
`without_latest` gives back the summary and facts before it.

Pure: text in, text out.
"""

from __future__ import annotations

from collections.abc import Sequence

from nbchat.history import Row

__all__ = [
    "LATEST_HEADING",
    "latest_instruction",
    "parse_latest",
    "render_latest",
    "without_latest",
]

LATEST_HEADING = "# The user's latest message (verbatim; the current turn works on it)"
_MARKER = "\n" + LATEST_HEADING + "\n"


def latest_instruction(rows: Sequence[Row], start: int) -> str:
    """The user's latest message when keeping only `rows[start:]` would lose it, else "".

    That is the last `user` row when it lies before `start`, or, when no `user` row is left at
    all, the message an earlier compaction carried in its `compacted` row.
    """
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        if row.role == "user":
            return row.content if index < start else ""
        if row.role == "compacted" and (carried := parse_latest(row.content)):
            return carried if index < start else ""
    return ""


def render_latest(message: str) -> str:
    """The block appended to a `compacted` row ("" for no message)."""
    if not message:
        return ""
    quoted = "\n".join(f"> {line}" for line in message.split("\n"))
    return f"{LATEST_HEADING}\n{quoted}"


def parse_latest(summary: str) -> str:
    """The message a `compacted` row carries verbatim ("" when it carries none)."""
    index = _block_start(summary)
    if index < 0:
        return ""
    lines = summary[index:].split("\n")[1:]
    return "\n".join(line[2:] for line in lines)


def without_latest(summary: str) -> str:
    """A `compacted` row's text without the carried message (the summary and its facts)."""
    index = _block_start(summary)
    return summary if index < 0 else summary[:index].rstrip()


def _block_start(summary: str) -> int:
    if summary.startswith(LATEST_HEADING + "\n"):
        return 0
    index = summary.rfind(_MARKER)
    if index < 0:
        return -1
    # Ours is the last block: every line after the heading is quoted.
    tail = summary[index + len(_MARKER) :].split("\n")
    return index + 1 if all(line.startswith("> ") for line in tail) else -1

"""`/attach`: context from the notebook itself. `/attach cell 3`, `/attach output 3`,
`/attach error`, `/attach var df` turn what the kernel already holds (IPython's `In`, `Out`, the
last exception, the user namespace) into text that goes with the next message, each under a
heading and capped, so "why does this fail?" needs no copying. Attaching reads the shell it is
given and runs no code; without IPython (a plain script) it says so instead of failing.

No widgets, SQL, HTTP or prompt text; finding the kernel's shell is the command's job
(`nbchat.ui.actions`).
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

from nbchat.tools.notebook import Shell

__all__ = [
    "ATTACH_USAGE",
    "Attachment",
    "attachment_from",
    "with_attachments",
]


ATTACH_USAGE = "/attach cell N | output N | error | var NAME"
ATTACHMENT_LIMIT = 6000  # characters per attachment: enough for a cell, not a whole dataset


class Attachment:
    """A labelled piece of text to send with the next message."""

    def __init__(self, label: str, text: str, *, fence: str = "") -> None:
        self.label = label
        self.text = _cap(text)
        self.fence = fence

    def to_markdown(self) -> str:
        longest = max((len(run) for run in self.text.split("\n") if set(run) == {"`"}), default=0)
        ticks = "`" * max(3, longest + 1)
        return f"{self.label}:\n{ticks}{self.fence}\n{self.text}\n{ticks}"


def attachment_from(argument: str, shell: Shell | None) -> Attachment:
    """The attachment `argument` names; ValueError saying what is wrong otherwise."""
    if shell is None:
        raise ValueError("Attaching needs a notebook (IPython) kernel.")
    kind, _, rest = argument.strip().partition(" ")
    rest = rest.strip()
    if kind == "cell":
        return Attachment(f"Source of cell {rest}", _history(shell, "In", rest), fence="python")
    if kind == "output":
        return Attachment(f"Output of cell {rest}", repr(_history(shell, "Out", rest)))
    if kind == "error":
        return Attachment("The last error", _last_traceback())
    if kind == "var":
        if rest not in shell.user_ns:
            raise ValueError(f"No variable named {rest!r} in the notebook.")
        value = shell.user_ns[rest]
        return Attachment(f"The variable {rest} ({type(value).__name__})", repr(value))
    raise ValueError(f"Attach what? {ATTACH_USAGE}")


def with_attachments(text: str, attachments: list[Attachment]) -> str:
    """The message with its attachments before it."""
    if not attachments:
        return text
    return "\n\n".join([*(a.to_markdown() for a in attachments), text])


def _history(shell: Shell, name: str, number: str) -> Any:
    if not number.isdigit():
        raise ValueError(f"Give a cell number: {ATTACH_USAGE}")
    entries = shell.user_ns.get(name)
    index = int(number)
    try:
        found = entries[index] if entries is not None else None
    except (IndexError, KeyError):
        found = None
    if found is None or found == "":
        what = "output" if name == "Out" else "cell"
        raise ValueError(f"There is no {what} [{index}] in this kernel's history.")
    return found


def _last_traceback() -> str:
    error = getattr(sys, "last_value", None)
    if error is None:
        raise ValueError("No error has been raised in this kernel yet.")
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    return "".join(lines)


def _cap(text: str) -> str:
    if len(text) <= ATTACHMENT_LIMIT:
        return text
    half = ATTACHMENT_LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters cut ...]\n{text[-half:]}"

"""`ToolContext`: what a running tool may know about where and how it runs.

Owns the per-call context (workspace root, time limit, output limit, the filtered environment for
child processes, the Stop event), the workspace confinement rule (`resolve`), the rule for
which environment variables a tool's child process inherits (`safe_environment`) and how long
output is cut (`cap_output`).

A tool asks for it by declaring a parameter annotated `ToolContext`; the executor fills it in and
the schema never shows it to the model. Must not: run tools, read files or start processes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nbchat.errors import ToolError

__all__ = ["SECRET_MARKERS", "ToolContext", "cap_output", "cut_marker", "safe_environment"]

# Names containing these (any case) look like credentials, so child processes don't get them.
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class ToolContext:
    """The workspace and limits of one tool call. `workspace` is absolute and resolved."""

    workspace: Path
    timeout: float = 60.0
    output_limit: int = 20_000
    env: Mapping[str, str] | None = field(default=None, repr=False)  # None: safe_environment()
    stop: threading.Event | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "workspace", Path(self.workspace).expanduser().resolve())

    def resolve(self, path: str) -> Path:
        """`path` (relative to the workspace, or absolute) resolved; refused when it leaves it.

        Symlinks are followed before the check, so a link that points outside is refused too.
        """
        target = (self.workspace / Path(path).expanduser()).resolve()
        if not target.is_relative_to(self.workspace):
            raise ToolError(
                f"Refused: {path!r} is outside the workspace {self.workspace}. "
                "Use a path inside it."
            )
        return target

    def relative(self, path: Path) -> str:
        """How a path inside the workspace is shown to the model."""
        shown = path.relative_to(self.workspace).as_posix()
        return shown if shown else "."

    def child_environment(self) -> dict[str, str]:
        """The environment a child process gets: `env`, or this process's without secrets."""
        return dict(self.env) if self.env is not None else safe_environment()


def safe_environment(
    environ: Mapping[str, str] | None = None, *, allow: Sequence[str] = ()
) -> dict[str, str]:
    """`environ` (default: this process's) without credential-like names, except those allowed."""
    source = os.environ if environ is None else environ
    allowed = {name.upper() for name in allow}
    return {
        name: value
        for name, value in source.items()
        if name.upper() in allowed or not any(mark in name.upper() for mark in SECRET_MARKERS)
    }


def cut_marker(count: int) -> str:
    """What stands where `count` characters of output were left out."""
    return f"\n[... {count:,} characters cut ...]\n"


def cap_output(text: str, limit: int) -> str:
    """`text` as it is when it fits in `limit` characters, else its head and tail around a marker.

    Both ends are kept because the start says what ran and the end how it finished (the error,
    the summary line).
    """
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return text[:head] + cut_marker(len(text) - limit) + (text[-tail:] if tail else "")

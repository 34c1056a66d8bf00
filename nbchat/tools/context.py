"""The per-call context a running tool may know, and how long output is cut.

`ToolContext` is the per-call context (workspace root, time limit and the deadline it sets, output
limit, the environment for child processes, the Stop event), the limit a model may ask for within it
(`time_limit`) and the lexical workspace rule (`resolve`; opening files race-free is
`nbchat.tools.fileaccess`). A tool asks for it by declaring a parameter annotated `ToolContext`; the
executor fills it in, and `nbchat.tools.schema` never shows it to the model.

`safe_environment` is the allow-list of environment variables a tool's child process inherits,
with secret-looking names withheld unless named exactly; `cap_output` is how long output is cut,
and `cut_marker` what stands where it was.

Must not: call tools (the executor does), describe them to the model (`nbchat.tools.schema`
does), open files or start processes.
"""

from __future__ import annotations

import fnmatch
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nbchat.errors import ToolError

__all__ = [
    "BASE_ENVIRONMENT",
    "SECRET_WORDS",
    "ToolContext",
    "cap_output",
    "cut_marker",
    "safe_environment",
]


# What a command needs to behave as in a terminal, and nothing that could hold a credential:
# secrets hide under any name (DATABASE_URL, GH_PAT, MYSQL_PWD), so names are allowed, not
# blocked. Shell-style patterns; the user adds more with `tool_env_allow`.
BASE_ENVIRONMENT: tuple[str, ...] = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ")
BASE_ENVIRONMENT += ("LANG", "LANGUAGE", "LC_*", "TMPDIR")
# The second line of defence: a name holding one of these words is withheld even when an allow
# pattern matches it (`AWS_*` must not pass AWS_SECRET_ACCESS_KEY), unless it is allowed by its
# exact name.
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class ToolContext:
    """The workspace and limits of one tool call. `workspace` is absolute and resolved."""

    workspace: Path
    timeout: float = 60.0
    output_limit: int = 20_000
    env: Mapping[str, str] | None = field(default=None, repr=False)  # None: safe_environment()
    stop: threading.Event | None = None
    deadline: float | None = None  # time.monotonic() by which the tool must give up
    call_id: str = ""  # the model's id for this call (what a review made before it is kept by)

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

    def is_stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def remaining(self) -> float:
        """Seconds left before the deadline (the whole `timeout` when there is none)."""
        if self.deadline is None:
            return self.timeout
        return self.deadline - time.monotonic()

    def time_limit(self, requested: float | None) -> float:
        """The seconds a tool may take when the model asks for `requested`: the one place a
        time limit from the model is read. A shorter limit is kept; anything else (none, 0,
        negative, NaN, infinite or longer) gets the call's own `timeout`. `min` alone would
        keep a NaN, a deadline that never comes."""
        if requested is None or not 0 < requested < self.timeout:
            return self.timeout
        return requested

    def check(self, doing: str) -> None:
        """Raise a `ToolError` saying so once Stop was pressed or the deadline has passed.

        Long-running built-in tools call this between steps, so the time limit holds inside
        the tool and not only in the executor's wait (which cannot end a thread).
        """
        if self.is_stopped():
            raise ToolError(f"Stopped by the user while {doing}.")
        if self.remaining() <= 0:
            raise ToolError(
                f"Timed out after {self.timeout:g} s while {doing}. Ask for less at once (a "
                "narrower path, glob or line range), or raise NBCHAT_TOOL_TIMEOUT."
            )

    def child_environment(self) -> dict[str, str]:
        """The environment a child process gets: `env`, or the allow-listed part of this
        process's; PWD is the workspace either way."""
        env = dict(self.env) if self.env is not None else safe_environment()
        env["PWD"] = str(self.workspace)
        return env


def safe_environment(
    environ: Mapping[str, str] | None = None, *, allow: Sequence[str] = ()
) -> dict[str, str]:
    """The variables of `environ` (default: this process's) named in `BASE_ENVIRONMENT` or
    `allow` (names or shell-style patterns such as `AWS_*`, any case); nothing else. A name
    with a `SECRET_WORDS` word in it passes only when named exactly."""
    source = os.environ if environ is None else environ
    patterns = tuple(pattern.upper() for pattern in (*BASE_ENVIRONMENT, *allow))
    exact = {pattern for pattern in patterns if not any(c in pattern for c in "*?[")}
    return {name: value for name, value in source.items() if _passes(name.upper(), patterns, exact)}


def _passes(name: str, patterns: Sequence[str], exact: set[str]) -> bool:
    if name in exact:
        return True
    if any(word in name for word in SECRET_WORDS):
        return False
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def cut_marker(count: int) -> str:
    """What stands where `count` characters of output were left out."""
    return f"\n[... {count:,} characters cut ...]\n"


def cap_output(text: str, limit: int, *, advice: str = "") -> str:
    """`text` as it is when it fits in `limit` characters, else its head and tail around a marker
    (saying how much was cut, and `advice`: how to get the rest), all within `limit` (unless the
    marker alone is longer).

    Both ends are kept because the start says what ran and the end how it finished (the error,
    the summary line).
    """
    if len(text) <= limit:
        return text

    def marker(count: int) -> str:
        return cut_marker(count) if not advice else f"\n[... {count:,} characters cut: {advice}]\n"

    room = max(limit - len(marker(len(text))), 0)  # the widest marker this text can need
    head = room // 2
    tail = room - head
    return text[:head] + marker(len(text) - room) + (text[-tail:] if tail else "")

"""What a conversation turn reports, as it happens: the events `Conversation.send` yields.

A UI renders them; a script can print or ignore them. Each is a small frozen value. Deltas are
the client's own `ReasoningDelta` and `TextDelta` (and `TextWithdrawn`: the text so far was a
call that did not validate, or an answer naming nothing the tool results show, asked again);
everything that was persisted arrives as a `RowSaved`, so a consumer that only wants the
transcript can listen to that alone.

Pure values: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from nbchat.compaction.result import CompactionResult
from nbchat.history import Row, ToolCall
from nbchat.llm.reader import ReasoningDelta, TextDelta, TextWithdrawn
from nbchat.tools.executor import ToolOutcome

__all__ = [
    "CompactionFinished",
    "CompactionStarted",
    "Done",
    "Event",
    "Failed",
    "Notice",
    "ReasoningDelta",
    "RequestStarted",
    "RowSaved",
    "TextDelta",
    "TextWithdrawn",
    "ToolFinished",
    "ToolStarted",
    "UsageReported",
]


@dataclass(frozen=True)
class RowSaved:
    """A row was written to the store and appended to the active history."""

    row: Row


@dataclass(frozen=True)
class RequestStarted:
    """A chat request is about to be sent (`attempt` 2 is the retry after an overflow)."""

    round: int
    attempt: int = 1


@dataclass(frozen=True)
class UsageReported:
    """The server's usage for one request, with how long it took."""

    prompt_tokens: int | None
    completion_tokens: int | None
    duration: float


@dataclass(frozen=True)
class ToolStarted:
    call: ToolCall


@dataclass(frozen=True)
class ToolFinished:
    call: ToolCall
    outcome: ToolOutcome


@dataclass(frozen=True)
class CompactionStarted:
    """Compaction began: `reason` is "budget", "overflow" or "manual"."""

    reason: str


@dataclass(frozen=True)
class CompactionFinished:
    result: CompactionResult


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is not a failure (also saved as a `system` row)."""

    text: str


@dataclass(frozen=True)
class Failed:
    """The turn could not go on. `message` says what to do; `unsent_text` is a message that
    was not saved (give it back to the user); `traceback` is set for unexpected errors."""

    error: BaseException
    message: str
    traceback: str = ""
    unsent_text: str = ""


@dataclass(frozen=True)
class Done:
    """The turn ended; `stopped` when the user pressed Stop."""

    stopped: bool = False


Event: TypeAlias = (
    RowSaved
    | RequestStarted
    | ReasoningDelta
    | TextDelta
    | TextWithdrawn
    | UsageReported
    | ToolStarted
    | ToolFinished
    | CompactionStarted
    | CompactionFinished
    | Notice
    | Failed
    | Done
)

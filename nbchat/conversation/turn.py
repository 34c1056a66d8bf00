"""The small pieces of state one turn keeps: the round, the reply being streamed and the
failure guard.

`StreamedReply` collects stream events and turns them into the rows that will be stored, exactly as
they will be sent again. `FailureGuard` ends a turn when the same tool call fails three times in
a row instead of burning `max_tool_turns`. Pure.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from nbchat.history import Row, ToolCall
from nbchat.llm.stream import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    TextWithdrawn,
    ToolCallsReady,
    Usage,
)

__all__ = ["FailureGuard", "Round", "StreamedReply"]

REPEATS_TO_GIVE_UP = 3


@dataclass
class Round:
    """One request/reply/tools round: at most one automatic compaction, one overflow retry."""

    number: int
    compacted: bool = False
    overflow_retried: bool = False
    tool_choice: str | None = None

    def may_compact(self) -> bool:
        return not self.compacted


@dataclass
class StreamedReply:
    """One streamed reply as it arrives; `rows()` is what gets stored."""

    request_rows: int
    calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish: str | None = None
    request_id: int | None = None  # its request record (`Store.record_sent`)
    started: float = field(default_factory=time.monotonic)
    # Deltas are kept as parts and joined on demand: `+=` on a long string copies it each time.
    _reasoning: list[str] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    @property
    def text(self) -> str:
        return "".join(self._text)

    def take(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
        elif isinstance(event, TextWithdrawn):
            self._text.clear()
        elif isinstance(event, ToolCallsReady):
            if event.from_content:  # the text streamed so far was this call, written as JSON
                self._text.clear()
            self.calls = event.calls
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finish):
            self.finish = event.reason

    @property
    def stopped(self) -> bool:
        return self.finish == "stopped"

    @property
    def is_empty(self) -> bool:
        return not (self._text or self._reasoning or self.calls)

    def rows(self) -> list[Row]:
        """`analysis` (when the model reasoned), then `assistant_full` or `assistant`."""
        rows = [Row("analysis", self.reasoning)] if self.reasoning else []
        if self.calls:
            wire = json.dumps([call.to_wire() for call in self.calls], ensure_ascii=False)
            rows.append(Row("assistant_full", self.text, "", "", wire))
        elif self.text:
            rows.append(Row("assistant", self.text))
        return rows


class FailureGuard:
    """Counts consecutive failures of the very same call (name and arguments)."""

    def __init__(self) -> None:
        self._last: tuple[str, str] | None = None
        self._count = 0

    def record(self, call: ToolCall, *, ok: bool) -> bool:
        """Record an outcome; True when the same call has now failed three times in a row."""
        key = (call.name, _canonical(call.arguments))
        if ok:
            self._last, self._count = None, 0
            return False
        self._count = self._count + 1 if key == self._last else 1
        self._last = key
        return self._count >= REPEATS_TO_GIVE_UP


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments

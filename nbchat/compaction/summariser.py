"""The summariser seam: what compaction asks a model for, and what it gets back.

`Summariser` is the one-method protocol the engine talks to; `OpenAISummariser`
(`nbchat.compaction.modelsummariser`) is the real one, tests pass fakes. Pure values and
protocols: no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from nbchat.history import Message

__all__ = ["SizedSummariser", "Summariser", "SummaryReply"]


@dataclass(frozen=True)
class SummaryReply:
    """One summariser answer: its text, usage, and why it ended ("stop", "length", "stopped")."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"


class Summariser(Protocol):
    """Anything that answers one summary request; raises `CompactionError` when it cannot."""

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply: ...


@runtime_checkable
class SizedSummariser(Summariser, Protocol):
    """A summariser that can also say how big its context window is (None: it cannot tell)."""

    def context_size(self) -> int | None: ...

"""The summariser seam: what compaction asks a model for, and what it gets back.

`Summariser` is the one-method protocol the engine talks to; `OpenAISummariser`
(`nbchat.compaction.modelsummariser`) is the real one, tests and scripts pass their own. Only the
engine's own `OpenAISummariser` is asked the extras a server can do (its window, the cache form
with the chat's tool schemas; `nbchat.compaction.writer`): a summariser handed in is asked
transcripts, in chunks that fit `summariser_context`. Pure values and a protocol: no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from nbchat.history import Message

__all__ = ["Summariser", "SummaryReply"]


@dataclass(frozen=True)
class SummaryReply:
    """One summariser answer: its text, usage, and why it ended ("stop", "length", "stopped").

    `cached_tokens`: of `prompt_tokens`, how many the server served from its prompt cache (None:
    it did not say)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    cached_tokens: int | None = None


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

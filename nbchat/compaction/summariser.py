"""The summariser seam: what compaction asks a model for, and what it gets back.

`Summariser` is the one-method protocol the engine talks to; `OpenAISummariser`
(`nbchat.compaction.modelsummariser`) is the real one, tests pass fakes. A `PrefixSummariser` can
also send the chat's own tool schemas, so a summary is asked as a continuation of the chat's
last request (the cache form, `nbchat.compaction.cacheform`). Pure values and protocols: no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from nbchat.history import Message

__all__ = ["PrefixSummariser", "SizedSummariser", "Summariser", "SummaryReply"]


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


@runtime_checkable
class SizedSummariser(Summariser, Protocol):
    """A summariser that can also say how big its context window is (None: it cannot tell)."""

    def context_size(self) -> int | None: ...


@runtime_checkable
class PrefixSummariser(Summariser, Protocol):
    """A summariser that can send `messages` with the tool schemas the chat sent, so the server
    finds the chat's last request as the prompt's prefix in its cache."""

    def summarise_prefix(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply: ...

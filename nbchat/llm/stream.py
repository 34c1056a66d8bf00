"""What one streamed chat reply is made of: reasoning and text deltas as they arrive; the
assembled tool calls, the usage and the finish reason at the end.

Pure values: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from nbchat.history import ToolCall

__all__ = [
    "Finish",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "TextWithdrawn",
    "ToolCallsReady",
    "Usage",
]


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class TextWithdrawn:
    """The text streamed so far was a call that did not validate, written as JSON; the reply is
    asked again (`nbchat.llm.reader.second_chance`) and that text is no part of it."""


@dataclass(frozen=True)
class ToolCallsReady:
    """Every tool call of the reply, in index order; `from_content`: found by the JSON fallback."""

    calls: tuple[ToolCall, ...]
    from_content: bool = False


@dataclass(frozen=True)
class Usage:
    """The server's counts; `cached_tokens`: prompt tokens it served from its prompt cache
    (llama.cpp's `timings.cache_n`, OpenAI's `prompt_tokens_details.cached_tokens`), None when
    it did not say."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None = None


@dataclass(frozen=True)
class Finish:
    """Why the reply ended: "stop", "length", "tool_calls", "stopped" (our Stop); None: unsaid."""

    reason: str | None


StreamEvent: TypeAlias = (
    ReasoningDelta | TextDelta | TextWithdrawn | ToolCallsReady | Usage | Finish
)

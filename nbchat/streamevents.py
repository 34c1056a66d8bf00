"""What one streamed chat reply is made of: reasoning and text deltas as they arrive; the
assembled tool calls, the usage and the finish reason at the end.

Pure values: no I/O.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "Finish",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallsReady",
    "Usage",
    "new_call_id",
]


@dataclass(frozen=True)
class ToolCall:
    """One assembled tool call; `arguments` is the raw JSON text exactly as the model wrote it."""

    id: str
    name: str
    arguments: str

    def to_wire(self) -> dict[str, Any]:
        """The call as an assistant message's `tool_calls` entry."""
        function = {"name": self.name, "arguments": self.arguments}
        return {"id": self.id, "type": "function", "function": function}

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ValueError with a readable message when they are not one."""
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError as exc:
            raise ValueError(
                f"the arguments of the call to {self.name!r} are not valid JSON ({exc})"
            ) from exc
        if not isinstance(value, dict):
            raise ValueError(
                f"the arguments of the call to {self.name!r} must be a JSON object, "
                f"got {type(value).__name__}"
            )
        return value


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallsReady:
    """Every tool call of the reply, in index order; `from_content`: found by the JSON fallback."""

    calls: tuple[ToolCall, ...]
    from_content: bool = False


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass(frozen=True)
class Finish:
    """Why the reply ended: "stop", "length", "tool_calls", "stopped" (our Stop); None: unsaid."""

    reason: str | None


StreamEvent: TypeAlias = ReasoningDelta | TextDelta | ToolCallsReady | Usage | Finish


def new_call_id() -> str:
    """A fresh tool-call id, for servers (and the JSON fallback) that give none."""
    return "call_" + secrets.token_hex(6)

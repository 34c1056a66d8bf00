"""Tool calls: `ToolCall` (one call as the model made it), fresh call ids, and reading the
`tool_calls` JSON an `assistant_full` row stores, strictly (`parse_tool_calls`, for what is
sent) or leniently (`stored_calls`, for code that only looks).

Pure: no I/O, no threads, no widgets.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nbchat.history.rows import Row

__all__ = ["ToolCall", "new_call_id", "parse_tool_calls", "stored_calls"]


def stored_calls(row: Row) -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """(id, name, arguments) of each call an `assistant_full` row holds, read leniently for
    code that only looks (the compaction facts): a malformed call is skipped, the id is "" when
    missing, and the arguments None when they are not a JSON object."""
    if row.role != "assistant_full":
        return
    try:
        calls = json.loads(row.tool_args)
    except ValueError:
        return
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = None
        call_id = call.get("id")
        yield (
            call_id if isinstance(call_id, str) else "",
            function["name"],
            arguments if isinstance(arguments, dict) else None,
        )


def parse_tool_calls(tool_args: str) -> list[dict[str, Any]]:
    """The stored `tool_calls` list of an `assistant_full` row; ValueError when malformed."""
    try:
        calls = json.loads(tool_args)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"tool_args is not valid JSON: {exc}") from None
    if not isinstance(calls, list) or not calls:
        raise ValueError("tool_args must be a non-empty JSON list of tool calls")
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(call, dict)
            and isinstance(call.get("id"), str)
            and call["id"]
            and isinstance(function, dict)
            and isinstance(function.get("name"), str)
        ):
            raise ValueError("each tool call needs an id and a function name")
    return calls


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


def new_call_id() -> str:
    """A fresh tool-call id, for servers (and the JSON fallback) that give none."""
    return "call_" + secrets.token_hex(6)

"""Recognising a tool call that a small model wrote as plain text instead of `tool_calls`.

Owns the rule: the whole reply (stripped; optionally inside a ```json fence or `<tool_call>`
tags) is exactly `{"name": <an offered tool>, "arguments": {...}}` (or `"parameters"`), and the
arguments pass the check the caller hands in (the tool registry's validation). Anything else is
ordinary text. Also owns `looks_like_call_start`, which tells the reader when streamed text may
become a call (it is shown as it streams all the same, and replaced by the call only once it
validates), and `forced_call_format`, the `response_format` that makes a model write such a call:
llama.cpp's server ignores a `tool_choice` that names a function (it accepts only strings), and with
"required" it lets small models pad a call with whitespace up to `max_tokens`, but it does apply a
JSON schema to the content, so a forced call is asked for that way and read back by this fallback.

Must not: assemble streams or call tools; it only reads text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

__all__ = [
    "ArgumentCheck",
    "CALL_OPENINGS",
    "call_from_text",
    "forced_call_format",
    "looks_like_call_start",
    "schemas_by_name",
]

CALL_OPENINGS = ("{", "```", "<tool_call>")
FENCED = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
TAGGED = re.compile(r"^<tool_call>\s*(.*?)\s*</tool_call>$", re.DOTALL)
CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"})

# Whether `arguments` are valid for the tool `name`; the conversation passes the tool registry's
# own check down, so this edge never imports the tools.
ArgumentCheck: TypeAlias = Callable[[str, Mapping[str, Any]], bool]


def schemas_by_name(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each offered function tool's parameter schema, by name (from the OpenAI `tools` list)."""
    return {
        tool["function"]["name"]: dict(tool["function"].get("parameters") or {})
        for tool in tools
        if tool.get("type", "function") == "function" and "function" in tool
    }


def forced_call_format(
    tools: Sequence[Mapping[str, Any]], choice: str | None
) -> dict[str, Any] | None:
    """A JSON-schema `response_format` whose only valid content is a call of the tool named by
    `choice` (or, for "required", of any offered tool); None when `choice` forces nothing."""
    schemas = schemas_by_name(tools)
    if choice == "required":
        names = list(schemas)
    elif choice in schemas:
        names = [choice]
    else:
        return None  # None, "auto", "none", or a name nobody offered: nothing to force
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": schemas[name]},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for name in names
    ]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    return {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}}


def looks_like_call_start(head: str) -> bool | None:
    """True when `head` (stripped text so far) opens like a call, False when it cannot be one,
    None while it is too short to tell (`""`, `"`"`, `"<tool"`)."""
    if any(head.startswith(opening) for opening in CALL_OPENINGS):
        return True
    if any(opening.startswith(head) for opening in CALL_OPENINGS):
        return None
    return False


def call_from_text(
    text: str, schemas: Mapping[str, dict[str, Any]], check: ArgumentCheck | None = None
) -> tuple[str, dict[str, Any]] | None:
    """`(tool name, arguments)` when the whole `text` is a call of an offered tool whose
    arguments pass `check` (without one, any JSON object passes)."""
    body = text.strip()
    for wrapper in (FENCED, TAGGED):
        match = wrapper.match(body)
        if match:
            body = match.group(1)
            break
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) not in CALL_KEYS:
        return None
    name, arguments = value["name"], value.get("arguments", value.get("parameters"))
    if not isinstance(name, str) or name not in schemas or not isinstance(arguments, dict):
        return None
    if check is not None and not check(name, arguments):
        return None
    return name, arguments

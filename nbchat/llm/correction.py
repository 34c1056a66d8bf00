"""The corrections of a model's call written as text.

Owns `ChatRequest` (one chat request's parameters besides the messages), `has_whole_call` (the
streamed text has become one complete call-shaped JSON object, so the client closes the stream:
the model cannot append junk, and the reply is the call) and `second_chance` (a call-shaped reply
that does not validate is asked again once, with that reply and a note saying what was wrong:
arguments a tool refuses, or a missing tool whose arguments fit one that exists, get the call
forced to that tool, so the model cannot name a missing tool twice; a missing tool that fits
none, `multiply` for "17 × 23", gets the answer asked in words, so a plain question never ends
as call JSON). A 0.5B model otherwise answers "delete old.log" with
`{"name": "delete_file", ...}`, which would be shown as a JSON blob (issue 12).

Pure: no I/O; `nbchat.llm.client` sends the requests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nbchat.llm.fallback import (
    ArgumentCheck,
    answer_instead,
    call_problem,
    call_shape,
    fitting_tool,
)
from nbchat.llm.reader import ReplyReader
from nbchat.llm.stream import StreamEvent, ToolCallsReady

__all__ = ["ChatRequest", "has_whole_call", "second_chance"]


@dataclass(frozen=True)
class ChatRequest:
    """One chat request's parameters besides the messages."""

    model: str
    tools: Sequence[dict[str, Any]]
    max_tokens: int | None
    temperature: float | None
    extra_body: dict[str, Any] | None
    response_format: dict[str, Any] | None
    fallback: bool
    check: ArgumentCheck | None
    tool_choice: str | None
    on_request: Callable[[dict[str, Any]], None] | None = None  # given each body before it goes
    # The tools are described in the system prompt (`nbchat.tools.offer`), not sent: they are
    # still what a forced call may name and what a call written as text is checked against.
    tools_in_prompt: bool = False


def has_whole_call(reader: ReplyReader) -> bool:
    """With the JSON fallback on: the text so far is one complete call-shaped JSON object.
    Parsed only when the latest piece could have closed it."""
    if not reader.may_be_call or not reader.candidate or "}" not in reader.candidate[-1]:
        return False
    return call_shape("".join(reader.candidate)) is not None


def second_chance(
    messages: list[dict[str, Any]],
    request: ChatRequest,
    reader: ReplyReader,
    ending: Sequence[StreamEvent],
) -> tuple[list[dict[str, Any]], ChatRequest] | None:
    """The retry for a reply that is a call-shaped JSON object but not a valid call of an
    offered tool: the messages with that reply and what was wrong, and the call forced to one
    of the offered tools. None when the reply was fine, not call-shaped, or already forced."""
    if not reader.schemas or any(isinstance(event, ToolCallsReady) for event in ending):
        return None
    if request.tool_choice not in (None, "auto") or request.response_format is not None:
        return None
    text = "".join(reader.candidate)
    shape = call_shape(text) if reader.may_be_call else None
    if shape is None:
        return None
    meant = fitting_tool(shape[0], shape[1], request.tools)
    if meant is None:  # "multiply" for 17 × 23: no tool was wanted, an answer was
        note, choice = answer_instead(shape[0]), "none"
    else:
        note, choice = call_problem(shape[0], shape[1], request.tools), meant
    retry = [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": note}]
    return retry, dataclasses.replace(request, tool_choice=choice)

"""A streamed chat reply: what it is made of (the events), and reading it as its chunks arrive, with
the tool call a small model wrote as plain JSON text (recognised by `nbchat.llm.textcalls`) and
that call's corrections.

The events: reasoning and text deltas as they arrive; the assembled tool calls, the usage and
the finish reason at the end.

`ReplyReader`: the state of one streamed reply while its chunks arrive. It turns each chunk into
events (reasoning and text deltas, valid Unicode even when a server splits a character across
chunks), assembles tool-call fragments by index, keeps the usage and the finish reason, counts
the characters against the reply's bound (what passes it is dropped and `cut` is set), and —
with the JSON fallback on — keeps a copy of text that opens like a tool call written as JSON.
That text is never held back: it streams as `TextDelta`s like any other, so every reply shows
its first token as soon as it arrives. When the whole reply turns out to be a valid call,
`finish` hands it over as `ToolCallsReady(from_content=True)`, which tells the consumer to drop
the text it showed and show the call instead; otherwise it stays plain text. The usage carries
how many prompt tokens the server served from its prompt cache, when it says.

The corrections: `ChatRequest` (one chat request's parameters besides the messages),
`has_whole_call` (the streamed text has become one complete call-shaped JSON object, so the
client closes the stream: the model cannot append junk, and the reply is the call) and
`second_chance` (a call-shaped reply that does not validate is asked again once, with that reply
and a note saying what was wrong: arguments a tool refuses, or a missing tool whose arguments
fit one that exists, get the call forced to that tool, so the model cannot name a missing tool
twice; a missing tool that fits none, `multiply` for "17 × 23", gets the answer asked in words,
so a plain question never ends as call JSON). A 0.5B model otherwise answers "delete old.log"
with `{"name": "delete_file", ...}`, which would be shown as a JSON blob (issue 12).

Pure: no I/O; `nbchat.llm.client` reads the HTTP stream and sends the requests. Must not call
tools.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from openai.types.chat import ChatCompletionChunk

from nbchat.history import ToolCall, new_call_id, to_valid_text
from nbchat.llm.textcalls import (
    ArgumentCheck,
    answer_instead,
    call_from_text,
    call_problem,
    call_shape,
    fitting_tool,
    looks_like_call_start,
    schemas_by_name,
)

__all__ = [
    "ChatRequest",
    "Finish",
    "ReasoningDelta",
    "ReplyReader",
    "StreamEvent",
    "TextDelta",
    "TextWithdrawn",
    "ToolCallsReady",
    "Usage",
    "cached_tokens_of",
    "has_whole_call",
    "second_chance",
]


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class TextWithdrawn:
    """The text streamed so far is no part of the reply, which is asked again: a call that did
    not validate, written as JSON (`nbchat.llm.reader.second_chance`), or an answer after a
    tool round that named nothing the results show, or a file that is not here, or an answer
    given without looking that spoke of a file here (`nbchat.conversation.grounding`).
    `reason` says which, in words for the status line."""

    reason: str = ""


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


@dataclass
class ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def cached_tokens_of(chunk: ChatCompletionChunk) -> int | None:
    """Prompt tokens the server took from its cache, as it reported them in the usage chunk:
    llama.cpp's `timings.cache_n` (its own count, beside `prompt_n` computed), else OpenAI's
    `usage.prompt_tokens_details.cached_tokens`; None when the server does not say."""
    timings = (chunk.model_extra or {}).get("timings")
    if isinstance(timings, dict):
        cache_n = timings.get("cache_n")
        if isinstance(cache_n, int) and not isinstance(cache_n, bool):
            return cache_n
    details = chunk.usage.prompt_tokens_details if chunk.usage is not None else None
    cached = details.cached_tokens if details is not None else None
    return cached if isinstance(cached, int) else None


class ReplyReader:
    """The state of one streamed reply: tool-call fragments, usage, finish, text that may be a
    call."""

    def __init__(
        self,
        fallback_tools: Sequence[dict[str, Any]],
        check: ArgumentCheck | None = None,
        *,
        char_limit: int | None = None,
    ) -> None:
        self.char_limit = char_limit
        self.chars = 0  # reasoning, text and tool arguments received so far
        self.cut = False  # the reply reached `char_limit`: what came after was dropped
        self.schemas = schemas_by_name(fallback_tools)
        self.check = check
        self.calls: dict[int, ToolCallParts] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.received = False
        self.candidate: list[str] = []  # the text so far, while it may still be a call
        self.may_be_call: bool | None = None if self.schemas else False
        self.halves = {"reasoning": "", "text": ""}  # a high surrogate awaiting its low half

    def feed(self, chunk: ChatCompletionChunk) -> Iterator[StreamEvent]:
        if chunk.usage is not None:
            usage = chunk.usage
            cached = cached_tokens_of(chunk)
            self.usage = Usage(usage.prompt_tokens, usage.completion_tokens, cached)
        for choice in chunk.choices[:1]:  # n=1: one choice
            delta = choice.delta
            # Reasoning is an extra field; reading it from the extras dict avoids pydantic's
            # slow missing-attribute path on every chunk.
            extra = delta.model_extra or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.received = True
                if reasoning := self._valid("reasoning", self._bounded(reasoning)):
                    yield ReasoningDelta(reasoning)
            if delta.content:
                self.received = True
                content = self._valid("text", self._bounded(delta.content))
                if content:
                    if self.may_be_call is not False:
                        self._watch(content)
                    yield TextDelta(content)
            for fragment in delta.tool_calls or ():
                self.received = True
                self._add_fragment(fragment)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason

    def _bounded(self, piece: str) -> str:
        """`piece`, cut to what is left of `char_limit` (then `cut` is set)."""
        self.chars += len(piece)
        if self.char_limit is None or self.chars <= self.char_limit:
            return piece
        self.cut = True
        return piece[: max(0, len(piece) - (self.chars - self.char_limit))]

    def _valid(self, kind: str, piece: str) -> str:
        """`piece` as valid Unicode. A server that JSON-escapes text can split a character into
        UTF-16 halves across deltas: a trailing high half waits to be joined with the next one."""
        if piece.isascii() and not self.halves[kind]:
            return piece  # the common case, on every chunk: nothing to repair
        piece, self.halves[kind] = self.halves[kind] + piece, ""
        if "\ud800" <= piece[-1] <= "\udbff":
            self.halves[kind], piece = piece[-1], piece[:-1]
        return to_valid_text(piece)

    def _watch(self, piece: str) -> None:
        """Keep the text while it may be a call; None: too short to tell yet."""
        self.candidate.append(piece)
        if self.may_be_call is None:
            self.may_be_call = looks_like_call_start("".join(self.candidate).lstrip())
            if self.may_be_call is False:
                self.candidate = []

    def _add_fragment(self, fragment: Any) -> None:
        index = fragment.index
        if index is None:  # servers that omit it: a fragment with a new id starts a new call
            last = max(self.calls, default=-1)
            is_new = fragment.id and (last < 0 or self.calls[last].id not in ("", fragment.id))
            index = last + 1 if is_new or last < 0 else last
        parts = self.calls.setdefault(index, ToolCallParts())
        # id and name arrive once (some servers repeat them); the arguments arrive in pieces.
        parts.id = parts.id or (fragment.id or "")
        if fragment.function is not None:
            parts.name = parts.name or (fragment.function.name or "")
            if fragment.function.arguments:
                parts.arguments.append(self._bounded(fragment.function.arguments))

    def flush_text(self) -> Iterator[StreamEvent]:
        """Text not yet delivered, before a cut or stopped stream ends: none, since nothing is
        held back any more (kept so that every way a stream ends reads the same)."""
        yield from ()

    def finish(self) -> Iterator[StreamEvent]:
        calls = tuple(
            ToolCall(parts.id or new_call_id(), parts.name, "".join(parts.arguments))
            for _, parts in sorted(self.calls.items())
        )
        if self.halves["reasoning"]:  # a half never joined: shown as U+FFFD, like any lone half
            yield ReasoningDelta(to_valid_text(self.halves["reasoning"]))
        if self.halves["text"]:
            tail = to_valid_text(self.halves["text"])
            self.candidate.append(tail)
            yield TextDelta(tail)
        found = None
        if not calls and self.may_be_call:
            found = call_from_text("".join(self.candidate), self.schemas, self.check)
        if found is not None:
            arguments = json.dumps(found[1], ensure_ascii=False)
            yield ToolCallsReady((ToolCall(new_call_id(), found[0], arguments),), from_content=True)
        if calls:
            yield ToolCallsReady(calls)
        if self.usage is not None:
            yield self.usage
        yield Finish(self.finish_reason)


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

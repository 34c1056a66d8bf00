"""The HTTP edge: one streamed chat request turned into typed events, and its errors classified.

Owns building the `openai.OpenAI` client from `Settings`, reading one streamed chat completion
as a sequence of `StreamEvent`s (reasoning and text deltas as they arrive; assembled tool calls,
usage and the finish reason at the end), Stop (checked at every chunk; a `StopSignal` also
releases a read blocked on a stalled server), the plain-JSON tool-call fallback for small local
models, asking a llama.cpp server for its context size, and translating every openai/httpx error
into an `NbchatError` whose message says what to do. The API key never appears in a message.

Must not: know about rows, sessions, compaction or widgets.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar, cast

import openai
from openai.types.chat import ChatCompletionChunk

from nbchat.config import Settings
from nbchat.errors import ServerError, ServerUnavailableError
from nbchat.history import to_valid_text
from nbchat.servererrors import midstream_error, partial_note, public_url, translate_error
from nbchat.stopping import StopSignal
from nbchat.tools.fallback import (
    call_from_text,
    forced_call_format,
    looks_like_call_start,
    schemas_by_name,
)

__all__ = [
    "Finish",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallsReady",
    "Usage",
    "build_client",
    "complete_chat",
    "server_context_size",
    "stream_chat",
    "translate_error",
]

log = logging.getLogger(__name__)

# openai retries connection errors, 408, 409, 429 and 5xx, and only before the response
# starts, so a retry never repeats tokens the caller already has.
MAX_RETRIES = 2
PROPS_TIMEOUT = 3.0

T = TypeVar("T")


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


def build_client(settings: Settings, *, base_url: str | None = None) -> openai.OpenAI:
    """An `openai.OpenAI` for the configured server (or `base_url`, found at run time)."""
    url = base_url if base_url is not None else settings.base_url
    if url is None:
        raise ServerUnavailableError(
            "No model server URL is known yet: start the embedded one with `nbchat serve-model` "
            "or set NBCHAT_BASE_URL."
        )
    timeout = openai.Timeout(settings.request_timeout, connect=settings.connect_timeout)
    return openai.OpenAI(
        base_url=url,
        api_key=settings.resolve_api_key(),
        timeout=timeout,
        max_retries=MAX_RETRIES,
    )


def new_call_id() -> str:
    """A fresh tool-call id, for servers (and the JSON fallback) that give none."""
    return "call_" + secrets.token_hex(6)


def stream_chat(
    client: openai.OpenAI,
    messages: list[dict[str, Any]],
    *,
    model: str,
    tools: Sequence[dict[str, Any]] = (),
    max_tokens: int | None = None,
    temperature: float | None = None,
    extra_body: dict[str, Any] | None = None,
    response_format: dict[str, Any] | None = None,
    stop: threading.Event | None = None,
    json_tool_fallback: bool = False,
    tool_choice: str | None = None,
) -> Iterator[StreamEvent]:
    """Stream one chat completion as events; the last one is always a `Finish`.

    `tool_choice` is "auto", "required", "none" or the name of one tool the model must call.
    With the JSON fallback on, a forced call is asked for as JSON content (`forced_call_format`)
    instead, because llama.cpp's server ignores a named `tool_choice`.

    Deltas are yielded as they arrive; then `ToolCallsReady` (if any), `Usage` (if the server
    reported it) and `Finish`. Stop ends the reply with `Finish("stopped")`, never an exception.
    A failed request, or a stream that breaks or ends early, raises an `NbchatError` (after the
    deltas that did arrive were yielded).
    """
    url = public_url(str(client.base_url))
    if stop is not None and stop.is_set():
        yield Finish("stopped")
        return
    forced = None
    if json_tool_fallback and response_format is None:
        forced = forced_call_format(tools, tool_choice)
    try:
        stream = client.chat.completions.create(
            model=model,
            messages=cast(Any, messages),
            stream=True,
            stream_options={"include_usage": True},
            tools=cast(Any, list(tools)) if tools else openai.omit,
            tool_choice=cast(Any, _tool_choice(tool_choice))
            if tools and not forced
            else openai.omit,
            max_tokens=_given(max_tokens),
            temperature=_given(temperature),
            response_format=cast(Any, _given(forced or response_format)),
            extra_body=extra_body,
        )
    except openai.OpenAIError as exc:
        raise translate_error(exc, base_url=url) from exc
    reader = _Reader(tools if json_tool_fallback else ())
    try:
        with _released_on_stop(stream, stop):
            yield from _read(stream, reader, stop, url)
    finally:
        stream.close()
    if stop is not None and stop.is_set():
        yield from reader.flush_text()
        yield Finish("stopped")
        return
    if reader.finish_reason is None:
        yield from reader.flush_text()
        raise ServerError(
            f"The model server at {url} ended the stream before the reply was "
            f"complete. {partial_note(reader.received)}"
        )
    yield from reader.finish()


def _tool_choice(choice: str | None) -> str | dict[str, Any] | openai.Omit:
    if choice is None:
        return openai.omit
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _given(value: T | None) -> T | openai.Omit:
    return openai.omit if value is None else value


def _read(
    stream: openai.Stream[ChatCompletionChunk],
    reader: _Reader,
    stop: threading.Event | None,
    url: str,
) -> Iterator[StreamEvent]:
    try:
        for chunk in stream:
            if stop is not None and stop.is_set():
                return
            yield from reader.feed(chunk)
    except Exception as exc:
        if stop is not None and stop.is_set():
            return  # Stop released the read (or raced it); what arrived is kept, no error.
        if not isinstance(exc, (openai.OpenAIError, json.JSONDecodeError)):
            raise  # not the server's doing: a bug here should surface as itself
        yield from reader.flush_text()
        raise midstream_error(exc, url, reader.received) from exc


@contextlib.contextmanager
def _released_on_stop(
    stream: openai.Stream[ChatCompletionChunk], stop: threading.Event | None
) -> Iterator[None]:
    """While the body is read, let a `StopSignal` release a read blocked on a stalled server."""
    if not isinstance(stop, StopSignal):
        yield
        return
    guard = threading.Lock()
    reading = [True]

    def release() -> None:
        # Under the guard, so the connection is never touched once it went back to the pool.
        with guard:
            if reading[0]:
                _shut_down(stream.response)

    remove = stop.add_callback(release)
    try:
        yield
    finally:
        remove()
        with guard:
            reading[0] = False


def _shut_down(response: Any) -> None:
    # Closing the response from another thread does not wake a recv() blocked on the socket;
    # shutting the socket down does (the reader sees EOF), and the reading thread then closes
    # the response itself.
    network = response.extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if not isinstance(sock, socket.socket):
        response.close()
        return
    with contextlib.suppress(OSError):  # already closed: the read it would release is over
        sock.shutdown(socket.SHUT_RDWR)


@dataclass
class _ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _Reader:
    """The state of one streamed reply: tool-call fragments, usage, finish, held-back text."""

    def __init__(self, fallback_tools: Sequence[dict[str, Any]]) -> None:
        self.schemas = schemas_by_name(fallback_tools)
        self.calls: dict[int, _ToolCallParts] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.received = False
        self.held: list[str] = []
        self.holding: bool | None = None if self.schemas else False
        self.halves = {"reasoning": "", "text": ""}  # a high surrogate awaiting its low half

    def feed(self, chunk: ChatCompletionChunk) -> Iterator[StreamEvent]:
        if chunk.usage is not None:
            usage = chunk.usage
            self.usage = Usage(usage.prompt_tokens, usage.completion_tokens)
        for choice in chunk.choices[:1]:  # n=1: one choice
            delta = choice.delta
            # Reasoning is an extra field; reading it from the extras dict avoids pydantic's
            # slow missing-attribute path on every chunk.
            extra = delta.model_extra or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.received = True
                if reasoning := self._valid("reasoning", reasoning):
                    yield ReasoningDelta(reasoning)
            if delta.content:
                self.received = True
                content = self._valid("text", delta.content)
                if content and self.holding is False:
                    yield TextDelta(content)  # the common case without a generator per chunk
                elif content:
                    yield from self._text(content)
            for fragment in delta.tool_calls or ():
                self.received = True
                self._add_fragment(fragment)
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason

    def _valid(self, kind: str, piece: str) -> str:
        """`piece` as valid Unicode. A server that JSON-escapes text can split a character into
        UTF-16 halves across deltas: a trailing high half waits to be joined with the next one."""
        if piece.isascii() and not self.halves[kind]:
            return piece  # the common case, on every chunk: nothing to repair
        piece, self.halves[kind] = self.halves[kind] + piece, ""
        if "\ud800" <= piece[-1] <= "\udbff":
            self.halves[kind], piece = piece[-1], piece[:-1]
        return to_valid_text(piece)

    def _text(self, piece: str) -> Iterator[StreamEvent]:
        if self.holding is False:
            yield TextDelta(piece)
            return
        self.held.append(piece)
        if self.holding:
            return
        # Once it opens like a call, hold the rest until the end; None: too short to tell yet.
        self.holding = looks_like_call_start("".join(self.held).lstrip())
        if self.holding is False:
            yield from self.flush_text()

    def _add_fragment(self, fragment: Any) -> None:
        index = fragment.index
        if index is None:  # servers that omit it: a fragment with a new id starts a new call
            last = max(self.calls, default=-1)
            is_new = fragment.id and (last < 0 or self.calls[last].id not in ("", fragment.id))
            index = last + 1 if is_new or last < 0 else last
        parts = self.calls.setdefault(index, _ToolCallParts())
        # id and name arrive once (some servers repeat them); the arguments arrive in pieces.
        parts.id = parts.id or (fragment.id or "")
        if fragment.function is not None:
            parts.name = parts.name or (fragment.function.name or "")
            if fragment.function.arguments:
                parts.arguments.append(fragment.function.arguments)

    def flush_text(self) -> Iterator[StreamEvent]:
        """The held-back text as one delta (when there is any)."""
        text, self.held = "".join(self.held), []
        if text:
            yield TextDelta(text)

    def finish(self) -> Iterator[StreamEvent]:
        calls = tuple(
            ToolCall(parts.id or new_call_id(), parts.name, "".join(parts.arguments))
            for _, parts in sorted(self.calls.items())
        )
        found = None if calls or not self.held else call_from_text("".join(self.held), self.schemas)
        if found is not None:
            self.held = []
            arguments = json.dumps(found[1], ensure_ascii=False)
            yield ToolCallsReady((ToolCall(new_call_id(), found[0], arguments),), from_content=True)
        if self.halves["reasoning"]:  # a half never joined: shown as U+FFFD, like any lone half
            yield ReasoningDelta(to_valid_text(self.halves["reasoning"]))
        if self.halves["text"]:
            yield from self._text(to_valid_text(self.halves["text"]))
        yield from self.flush_text()
        if calls:
            yield ToolCallsReady(calls)
        if self.usage is not None:
            yield self.usage
        yield Finish(self.finish_reason)


def complete_chat(
    client: openai.OpenAI,
    messages: list[dict[str, Any]],
    *,
    model: str,
    max_tokens: int | None = None,
    temperature: float | None = None,
    extra_body: dict[str, Any] | None = None,
    response_format: dict[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> tuple[str, Usage]:
    """The whole reply text and its usage (Nones when unreported), for callers that don't stream.

    On Stop it returns what arrived; the caller knows from its own event that it was stopped.
    """
    parts: list[str] = []
    usage = Usage(None, None)
    events = stream_chat(
        client,
        messages,
        model=model,
        max_tokens=max_tokens,
        temperature=temperature,
        extra_body=extra_body,
        response_format=response_format,
        stop=stop,
    )
    for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, Usage):
            usage = event
    return "".join(parts), usage


def server_context_size(client: openai.OpenAI) -> int | None:
    """The server's context window from llama.cpp's `GET /props`; None when it doesn't say."""
    base = str(client.base_url).rstrip("/")
    root = base.removesuffix("/v1")
    for url in dict.fromkeys((root + "/props", base + "/props")):
        try:
            props = client.get(
                url, cast_to=object, options={"timeout": PROPS_TIMEOUT, "max_retries": 0}
            )
        except openai.OpenAIError as exc:
            # Most servers have no /props; that is an answer ("unknown"), not a failure.
            log.debug("no context size from %s: %s", url, type(exc).__name__)
            continue
        size = _context_size_of(props)
        if size is not None:
            return size
    return None


def _context_size_of(props: object) -> int | None:
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    for source in (settings if isinstance(settings, dict) else {}, props):
        value = source.get("n_ctx")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None

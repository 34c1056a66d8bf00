"""The HTTP edge: one streamed chat request turned into typed events, and its errors classified.

Owns building the `openai.OpenAI` client from `Settings`, reading one streamed chat completion
as a sequence of `StreamEvent`s (reasoning and text deltas as they arrive; assembled tool calls,
usage and the finish reason at the end), Stop (checked at every chunk; a `StopSignal` also
releases a read blocked on a stalled server), the reply's bounds (a server that ignores
`max_tokens` is cut at `reply_char_limit`; one that sends only keep-alive comments is given up
after the read timeout; one event without an end is refused at its byte bound: see
`nbchat.llm.transport`), the plain-JSON tool-call fallback for small local
models (the stream closed once a call is whole, one second chance for a call that does not
validate: `nbchat.llm.reader`), asking a llama.cpp server for its context size, and
translating every openai/httpx error into an `NbchatError` whose message says what to do. The
API key never appears in a message.

Must not: know about rows, sessions, compaction or widgets.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletionChunk

from nbchat.config import Settings, public_url
from nbchat.errors import ServerError, ServerUnavailableError
from nbchat.history import ToolCall
from nbchat.llm.reader import (
    ChatRequest,
    Finish,
    ReasoningDelta,
    ReplyReader,
    StreamEvent,
    TextDelta,
    TextWithdrawn,
    ToolCallsReady,
    Usage,
    has_whole_call,
    second_chance,
)
from nbchat.llm.servererrors import midstream_error, partial_note, translate_error
from nbchat.llm.textcalls import ArgumentCheck, forced_call_format, text_only_grammar
from nbchat.llm.transport import (
    IDENTITY,
    IdleWatch,
    Release,
    RequestCancelledError,
    bound_events,
    event_byte_limit,
    http_client,
    releasing,
)
from nbchat.stopping import StopSignal

__all__ = [  # the stream's events are re-exported: callers import them from here
    "Finish",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallsReady",
    "Usage",
    "build_client",
    "reply_char_limit",
    "server_context_size",
    "stream_chat",
    "translate_error",
]

log = logging.getLogger(__name__)

# openai retries connection errors, 408, 409, 429 and 5xx, and only before the response
# starts, so a retry never repeats tokens the caller already has.
MAX_RETRIES = 2
PROPS_TIMEOUT = 3.0
# A token is 3-4 characters on average and rarely over 16: a reply longer than max_tokens × 16
# characters comes from a server that ignores max_tokens, and is cut there.
CHARS_PER_TOKEN_BOUND = 16
MIN_REPLY_CHARS = 16_384
DEFAULT_REPLY_TOKENS = 32_768  # the bound's basis when a request sets no max_tokens
IDLE_GRACE = 1.0  # seconds past the read timeout before a stream of keep-alives is given up
# What a stream raises when its socket is shut under it (by Stop or the idle watch): ours say
# so; a caller's own client sees a broken connection.
STREAM_CLOSED_ERRORS = (RequestCancelledError, openai.APIConnectionError)
# What a misbehaving server causes while the body is read: a broken stream, a chunk that is not
# JSON, bytes that are not UTF-8.
SERVER_FAULTS = (openai.OpenAIError, json.JSONDecodeError, UnicodeDecodeError)


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
        http_client=http_client(url),
    )


def stream_chat(
    client: openai.OpenAI,
    messages: list[dict[str, Any]],
    *,
    model: str,
    tools: Sequence[dict[str, Any]] = (),
    tools_in_prompt: bool = False,
    max_tokens: int | None = None,
    temperature: float | None = None,
    extra_body: dict[str, Any] | None = None,
    response_format: dict[str, Any] | None = None,
    stop: threading.Event | None = None,
    json_tool_fallback: bool = False,
    check_arguments: ArgumentCheck | None = None,
    tool_choice: str | None = None,
    on_request: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[StreamEvent]:
    """Stream one chat completion as events; the last one is always a `Finish`.

    `tool_choice` is "auto", "required", "none" or the name of one tool the model must call.
    With the JSON fallback on (a llama.cpp server), a forced call is asked for as JSON content
    (`forced_call_format`) instead, because llama.cpp's server ignores a named `tool_choice`,
    and "none" sends llama.cpp a grammar (`text_only_grammar`): the reply cannot be a call
    written as JSON text. On any server: a reply that is one complete call-shaped JSON object
    of an offered tool is read as that call (the stream closed as soon as it is whole: the
    model cannot append more), and a call-shaped reply that does not validate gets one second
    chance (`second_chance`: the call forced to the tool it meant, or words when it meant none).
    Its events follow the first attempt's text, after a `TextWithdrawn`. With
    `tools_in_prompt` the request carries no `tools` list (a small model's first step chose:
    `nbchat.tools.offer`); they still bound what a forced or written call may name.

    Deltas are yielded as they arrive; then `ToolCallsReady` (if any), `Usage` (if the server
    reported it) and `Finish`. Stop ends the reply with `Finish("stopped")`, never an exception.
    A failed request, a stream that breaks, ends early, sends bytes that are not UTF-8, goes
    idle (no data for the read timeout) or runs past `reply_char_limit(max_tokens)` raises an
    `NbchatError` (after the deltas that did arrive were yielded).

    `on_request` is given the request's JSON body (never the key: that is a header) just before
    it is sent, for the request records (`nbchat.conversation.requestview`).
    """
    request = ChatRequest(
        model=model,
        tools=tools,
        tools_in_prompt=tools_in_prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        extra_body=extra_body,
        response_format=response_format,
        fallback=json_tool_fallback,
        check=check_arguments,
        tool_choice=tool_choice,
        on_request=on_request,
    )
    if stop is not None and stop.is_set():
        yield Finish("stopped")
        return
    reader = yield from _stream_once(client, messages, request, stop)
    if reader is None:
        return
    ending = list(reader.finish())
    retry = second_chance(messages, request, reader, ending)
    if retry is None:
        yield from ending
        return
    yield from (event for event in ending if not isinstance(event, Finish | Usage))
    yield TextWithdrawn("the tool call came out as text")
    reader = yield from _stream_once(client, retry[0], retry[1], stop)
    if reader is not None:
        yield from reader.finish()


def _create(
    client: openai.OpenAI, messages: list[dict[str, Any]], request: ChatRequest
) -> openai.Stream[ChatCompletionChunk]:
    forced = None
    if request.fallback and request.response_format is None:
        forced = forced_call_format(request.tools, request.tool_choice)
    arguments = _create_arguments(
        model=request.model,
        messages=messages,
        tools=() if request.tools_in_prompt else request.tools,
        tool_choice=None if forced else request.tool_choice,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        response_format=forced or request.response_format,
    )
    extra_body = request.extra_body
    if request.fallback and (text_only := text_only_grammar(request.tool_choice)):
        extra_body = {**(extra_body or {}), **text_only}
    if request.on_request is not None:
        request.on_request({**arguments, **(extra_body or {})})  # the SDK merges extra_body so
    try:
        stream: openai.Stream[ChatCompletionChunk] = client.chat.completions.create(
            **arguments, extra_body=extra_body, extra_headers=IDENTITY
        )
    except openai.OpenAIError as exc:
        raise translate_error(exc, base_url=public_url(str(client.base_url))) from exc
    return stream


def _stream_once(
    client: openai.OpenAI,
    messages: list[dict[str, Any]],
    request: ChatRequest,
    stop: threading.Event | None,
) -> Generator[StreamEvent, None, ReplyReader | None]:
    """Stream one request's deltas; returns its reader, ready to `finish()`, or None when the
    reply already ended (Stop).

    Stop may come in any phase: connecting, sending, waiting for the headers (llama.cpp sends
    none before it has read the whole prompt) or streaming. Its callback is registered before
    the request is made, and releases the request's sockets (`nbchat.llm.transport`), so the
    server is told at once."""
    release = Release()
    remove = stop.add_callback(release.release) if isinstance(stop, StopSignal) else None
    try:
        try:
            with releasing(release):
                stream = _create(client, messages, request)
        except RequestCancelledError:
            yield Finish("stopped")
            return None
        return (yield from _read_stream(client, stream, request, release, stop))
    finally:
        release.close()  # before the connection may go back to the pool for another request
        if remove is not None:
            remove()


def _read_stream(
    client: openai.OpenAI,
    stream: openai.Stream[ChatCompletionChunk],
    request: ChatRequest,
    release: Release,
    stop: threading.Event | None,
) -> Generator[StreamEvent, None, ReplyReader | None]:
    url = public_url(str(client.base_url))
    limit = reply_char_limit(request.max_tokens)
    # A call written as text is read as the call on any server (`nbchat.llm.textcalls`' rule:
    # the whole reply, a tool that exists, arguments it accepts).
    reader = ReplyReader(request.tools, request.check, char_limit=limit)
    bound_events(
        stream.response,
        limit=event_byte_limit(limit),
        url=url,
        note=lambda: partial_note(reader.received),
    )
    release.hold_response(stream.response)
    try:
        # Stop and the idle watch may each release a read blocked on the server.
        with IdleWatch(_idle_seconds(client), release.release) as idle:
            yield from _read(stream, reader, _Watch(stop, idle, limit, url))
    finally:
        release.close()
        stream.close()  # also how a server still writing after a whole call learns to stop
    if stop is not None and stop.is_set():
        yield from reader.flush_text()
        yield Finish("stopped")
        return None
    if reader.finish_reason is None:
        yield from reader.flush_text()
        raise ServerError(
            f"The model server at {url} ended the stream before the reply was "
            f"complete. {partial_note(reader.received)}"
        )
    return reader


def reply_char_limit(max_tokens: int | None) -> int:
    """The most characters a reply may bring (reasoning, text and tool arguments together):
    generous for any tokenizer, but a bound against a server that ignores `max_tokens`."""
    tokens = DEFAULT_REPLY_TOKENS if max_tokens is None else max_tokens
    return max(tokens * CHARS_PER_TOKEN_BOUND, MIN_REPLY_CHARS)


def _create_arguments(
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    tool_choice: str | None,
    max_tokens: int | None,
    temperature: float | None,
    response_format: dict[str, Any] | None,
) -> dict[str, Any]:
    """The keyword arguments of one streamed `create` call; what is not given is left out, as
    the SDK leaves it out of the body. In the order the openai SDK writes them into the body,
    so that the recorded body serialises to the very bytes sent (`InspectedRequest.to_bytes`)."""
    arguments: dict[str, Any] = {
        "model": model,
        "stream": True,
        "messages": messages,
        "max_tokens": max_tokens,
        "response_format": response_format,
        "stream_options": {"include_usage": True},
        "temperature": temperature,
        "tool_choice": _tool_choice(tool_choice) if tools else None,
        "tools": list(tools) if tools else None,
    }
    return {key: value for key, value in arguments.items() if value is not None}


def _tool_choice(choice: str | None) -> str | dict[str, Any] | None:
    if choice is None:
        return None
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


@dataclass(frozen=True)
class _Watch:
    """What may end a read early: the user's Stop, the idle watch, the reply's character bound
    (and the server's URL, for the errors)."""

    stop: threading.Event | None
    idle: IdleWatch
    limit: int
    url: str

    @property
    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()


def _read(
    stream: openai.Stream[ChatCompletionChunk], reader: ReplyReader, watch: _Watch
) -> Iterator[StreamEvent]:
    try:
        for chunk in stream:
            watch.idle.touch()
            if watch.stopped:
                return
            yield from reader.feed(chunk)
            if has_whole_call(reader):
                reader.finish_reason = reader.finish_reason or "stop"
                return  # the reply is the call: closing the stream stops the model's junk
            if reader.cut:
                yield from reader.flush_text()
                raise _too_long(watch.url, watch.limit)
    except Exception as exc:
        closed = isinstance(exc, STREAM_CLOSED_ERRORS)
        if closed and watch.stopped:
            return  # Stop released the read (or raced it); what arrived is kept, no error.
        if not closed and not isinstance(exc, SERVER_FAULTS):
            raise  # not the server's doing: a bug here should surface as itself
        yield from reader.flush_text()
        if closed and watch.idle.fired:
            raise _idle_error(watch, reader.received) from exc
        raise midstream_error(exc, watch.url, reader.received) from exc


def _too_long(url: str, limit: int) -> ServerError:
    return ServerError(
        f"The model server at {url} sent more than {limit:,} characters for one reply, far "
        "more than its max_tokens allows, so the reply was cut there. The partial reply was "
        "kept; check that the server honours max_tokens, or raise NBCHAT_MAX_TOKENS."
    )


def _idle_error(watch: _Watch, received: bool) -> ServerError:
    return ServerError(
        f"The model server at {watch.url} sent no data for {watch.idle.timeout:g} s (only "
        f"keep-alive comments), so the reply was given up. {partial_note(received)} If the "
        "model is just slow, raise NBCHAT_REQUEST_TIMEOUT."
    )


def _idle_seconds(client: openai.OpenAI) -> float | None:
    """How long a stream may go without data: the client's read timeout plus a grace second,
    so a server that sends nothing at all is reported by the read timeout itself."""
    timeout = client.timeout
    read = timeout.read if isinstance(timeout, openai.Timeout) else timeout
    return float(read) + IDLE_GRACE if isinstance(read, int | float) else None


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
            log.debug("no context size from %s: %s", public_url(url), type(exc).__name__)
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

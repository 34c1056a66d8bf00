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
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, cast

import openai
from openai.types.chat import ChatCompletionChunk

from nbchat.config import Settings
from nbchat.errors import ServerError, ServerUnavailableError
from nbchat.history import ToolCall
from nbchat.llm.fallback import (
    ArgumentCheck,
    forced_call_format,
)
from nbchat.llm.reader import ReplyReader
from nbchat.llm.servererrors import midstream_error, partial_note, public_url, translate_error
from nbchat.llm.stream import Finish, ReasoningDelta, StreamEvent, TextDelta, ToolCallsReady, Usage
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
    check_arguments: ArgumentCheck | None = None,
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
    reader = ReplyReader(tools if json_tool_fallback else (), check_arguments)
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
    reader: ReplyReader,
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

"""`OpenAISummariser`: the one place compaction calls a model.

It sends one summary request through `nbchat.llm.client.stream_chat` (so Stop closes the HTTP
stream), gathers the text and usage, and turns every client error into a `CompactionError` that
says what happened and what to do, with the cause kept. When the server rejects
`response_format` (no JSON-schema support) the request is sent again without it, and later
requests skip it. The client is built from `Settings.load()` at the first call when none was
given, never at construction; with no base URL that is the embedded server, found like a
conversation finds it. `summarise_prefix` sends the chat's tool schemas too (the cache form).

Stable summaries with the prompt cache on: at temperature 0 llama.cpp answers a prompt it finds
whole in its cache (it evaluates only the last token again) differently from one whose end it
had to compute in a batch, so the same history compacted twice gave two checkpoints. On the
embedded model each summary request is therefore *primed*: sent first with `max_tokens=1`, so
the server holds the whole prompt, then again for the answer, which always starts from a full
cache hit. The priming costs one token; the prompt is read once either way.

Must not: know about rows, the store or the engine's decisions.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import openai

from nbchat.compaction.result import SummaryReply
from nbchat.config import Settings
from nbchat.errors import (
    CompactionError,
    ContextOverflowError,
    NbchatError,
    ServerError,
    ServerUnavailableError,
)
from nbchat.history import Message
from nbchat.llm.client import build_client, server_context_size, stream_chat
from nbchat.llm.endpoint import connect
from nbchat.llm.reader import Finish, TextDelta, Usage

__all__ = ["OpenAISummariser", "to_compaction_error"]

log = logging.getLogger(__name__)

UNCHANGED = "The history was left as it was"


class _Request(NamedTuple):
    """One summary request: what is sent, the reply's cap, and the Stop signal."""

    messages: Sequence[Message]
    tools: tuple[Mapping[str, Any], ...]
    max_tokens: int
    stop: threading.Event | None


class OpenAISummariser:
    """Summary requests to an OpenAI-compatible server (the chat server unless told otherwise)."""

    def __init__(
        self,
        client: openai.OpenAI | None = None,
        *,
        model: str | None = None,
        settings: Settings | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._client = client
        self._model = model
        self._settings = settings
        self._extra_body = dict(extra_body) if extra_body else None
        self._json_schema_supported = True
        self._has_prompt_cache: bool | None = None  # asked once, at the first summary

    def __repr__(self) -> str:
        return f"OpenAISummariser(model={self._model!r})"

    @property
    def model(self) -> str:
        """The summary model: as given, else the settings' `summary_model` (the chat model)."""
        if not self._model:
            self._model = self._get_settings().summary_model
        return self._model

    def context_size(self) -> int | None:
        """The server's context window when it reports one (llama.cpp's /props), else None."""
        try:
            return server_context_size(self._get_client())
        except NbchatError as exc:
            log.warning("could not ask the summariser's context size: %s", exc)
            return None

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply:
        """One summary; raises `CompactionError` (cause kept) when the request fails."""
        request = _Request(messages, (), max_tokens, stop)
        return self._ask(request, response_format)

    def summarise_prefix(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply:
        """One summary asked with the chat's own tool schemas (the cache form)."""
        request = _Request(messages, tuple(tools), max_tokens, stop)
        return self._ask(request, response_format)

    def _ask(self, request: _Request, response_format: Mapping[str, Any] | None) -> SummaryReply:
        schema = response_format if self._json_schema_supported else None
        try:
            try:
                return self._primed(request, schema)
            except ServerError as exc:
                if schema is None or exc.status != 400:
                    raise
                log.warning("the server rejected response_format (%s); asking without it", exc)
                self._json_schema_supported = False
                return self._primed(request, None)
        except NbchatError as exc:
            raise to_compaction_error(exc) from exc

    def _primed(self, request: _Request, schema: Mapping[str, Any] | None) -> SummaryReply:
        """The answer; first the priming request when the answer must be stable (see above)."""
        if not self._primes():
            return self._request(request, schema)
        prime = self._request(request._replace(max_tokens=1), schema)
        if prime.finish_reason == "stopped":
            return prime
        reply = self._request(request, schema)
        return replace(
            reply,
            prompt_tokens=reply.prompt_tokens + prime.prompt_tokens,
            completion_tokens=reply.completion_tokens + prime.completion_tokens,
            cached_tokens=_sum_known(reply.cached_tokens, prime.cached_tokens),
        )

    def _request(self, request: _Request, schema: Mapping[str, Any] | None) -> SummaryReply:
        parts: list[str] = []
        usage = Usage(None, None)
        reason = "stop"
        for event in stream_chat(
            self._get_client(),
            list(request.messages),
            model=self.model,
            tools=[dict(tool) for tool in request.tools],
            max_tokens=request.max_tokens,
            temperature=self._temperature(),
            extra_body=self._extra_body,
            response_format=dict(schema) if schema is not None else None,
            stop=request.stop,
        ):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Finish):
                reason = event.reason or "stop"
        return SummaryReply(
            "".join(parts),
            prompt_tokens=usage.prompt_tokens or 0,
            completion_tokens=usage.completion_tokens or 0,
            finish_reason=reason,
            cached_tokens=usage.cached_tokens,
        )

    def _temperature(self) -> float | None:
        """The settings' temperature; else 0 on the embedded model, so summaries are stable."""
        settings = self._get_settings()
        if settings.temperature is not None:
            return settings.temperature
        return 0.0 if settings.is_embedded else None

    def _primes(self) -> bool:
        """Prime each request: on the embedded llama.cpp server (it answers `/props`) at
        temperature 0, unless the caller's extra body says how to use the cache."""
        if self._has_prompt_cache is None:
            settings = self._get_settings()
            self._has_prompt_cache = (
                settings.is_embedded
                and self._temperature() == 0.0
                and self._extra_body is None
                and self.context_size() is not None
            )
        return self._has_prompt_cache

    def _get_settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings.load()
        return self._settings

    def _get_client(self) -> openai.OpenAI:
        if self._client is None:
            settings = self._get_settings()
            # The embedded server's URL is known only once it runs (its runtime file), so it is
            # found (or started, with autostart) the way a conversation finds it.
            if settings.is_embedded:
                self._client = connect(settings).client
            else:
                self._client = build_client(settings)
        return self._client


def to_compaction_error(exc: NbchatError) -> CompactionError:
    """A `CompactionError` that says what went wrong with the summary and what to do."""
    if isinstance(exc, CompactionError):
        return exc
    if isinstance(exc, ContextOverflowError):
        sizes = ""
        if exc.prompt_tokens and exc.context_size:
            sizes = f" ({exc.prompt_tokens:,} tokens; its window holds {exc.context_size:,})"
        return CompactionError(
            f"The summary request was too big for the summariser's context window{sizes}. "
            f"{UNCHANGED}. Set summariser_context (NBCHAT_SUMMARISER_CONTEXT) to the "
            "summariser's real window so the input is summarised in chunks, then compact again."
        )
    if isinstance(exc, ServerUnavailableError):
        return CompactionError(
            f"The summariser could not be reached: {exc} {UNCHANGED}; compact again once the "
            "server answers."
        )
    return CompactionError(
        f"The summariser failed: {exc} {UNCHANGED}; compact again, or set another "
        "summary_model if it keeps failing."
    )


def _sum_known(*counts: int | None) -> int | None:
    """The sum of the counts the server reported; None when it reported none."""
    known = [count for count in counts if count is not None]
    return sum(known) if known else None

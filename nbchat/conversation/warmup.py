"""`PromptWarmer`: which prompts a conversation has had a local server read into its cache.

The first reply on the embedded model used to pay for reading the system prompt and the tool
schemas (about 1,000 tokens, up to a minute on two busy cores), and the first reply after a
compaction for reading the new prefix (system prompt, `compacted` row, tail). The warmer sends
each prompt a request may start with once, generating one token, so the server keeps it in its
prompt cache. With a `client` and a `cancel` signal (the widget's idle moment after a
compaction) the request is streamed, so setting `cancel` closes it at once and the server stops.
Must not: touch rows or the store; it only sends what it is handed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import openai

from nbchat.config import Settings
from nbchat.embedded.server import warm_prompt_cache
from nbchat.errors import NbchatError
from nbchat.llm.client import stream_chat
from nbchat.llm.stream import Finish

__all__ = ["WARM_TIMEOUT", "PromptWarmer"]

log = logging.getLogger(__name__)

WARM_TIMEOUT = 600.0  # reading ~1,000 tokens took up to 66 s on two busy cores


class PromptWarmer:
    """Sends each distinct prompt once per conversation."""

    def __init__(self) -> None:
        self._warmed: set[str] = set()

    def warm(
        self,
        base_url: str,
        settings: Settings,
        messages: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
        schemas: list[dict[str, Any]],
        *,
        client: openai.OpenAI | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """Warm the prompt with the tools and, when tools are offered on request, without;
        `messages(tools)` is what a request offering `tools` sends (its system prompt may
        depend on them)."""
        # The plain prompt last: a first message more often needs no tool, and the server keeps
        # the last prompt in its slot (the other one in its RAM cache).
        variants = [schemas, []] if settings.offers_tools_on_request() else [schemas]
        for tools in variants:
            if cancel is not None and cancel.is_set():
                return
            request = {"model": settings.model, "messages": messages(tools)}
            request |= {"tools": tools} if tools else {}
            key = json.dumps(request, sort_keys=True)
            if key in self._warmed:
                continue
            if client is None:
                self._warmed.add(key)
                warm_prompt_cache(base_url, request, timeout=WARM_TIMEOUT)
            elif _warm_streamed(client, request, cancel):
                self._warmed.add(key)


def _warm_streamed(
    client: openai.OpenAI, request: dict[str, Any], cancel: threading.Event | None
) -> bool:
    """One streamed one-token request; False when cancelled or failed (only logged: the cache
    is an optimisation)."""
    try:
        for event in stream_chat(
            client,
            request["messages"],
            model=request["model"],
            tools=request.get("tools", ()),
            max_tokens=1,
            stop=cancel,
        ):
            if isinstance(event, Finish):
                return event.reason != "stopped"
    except NbchatError as exc:
        log.info("the new prefix was not warmed: %s", exc)
    return False

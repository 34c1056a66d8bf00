"""`PromptWarmer`: which prompts a conversation has had the embedded server read into its cache.

The first reply on the embedded model used to pay for reading the system prompt and the tool
schemas (about 1,000 tokens, up to a minute on two busy cores). The warmer sends each prompt a
request may start with once, generating one token, so the server keeps it in its prompt cache.
Must not: touch rows or the store; it only sends what it is handed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nbchat.config import Settings
from nbchat.embedded.server import warm_prompt_cache

__all__ = ["WARM_TIMEOUT", "PromptWarmer"]

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
    ) -> None:
        """Warm the prompt with the tools and, when tools are offered on request, without;
        `messages(tools)` is what a request offering `tools` sends (its system prompt may
        depend on them)."""
        # The plain prompt last: a first message more often needs no tool, and the server keeps
        # the last prompt in its slot (the other one in its RAM cache).
        variants = [schemas, []] if settings.offers_tools_on_request() else [schemas]
        for tools in variants:
            request = {"model": settings.model, "messages": messages(tools)}
            request |= {"tools": tools} if tools else {}
            key = json.dumps(request, sort_keys=True)
            if key not in self._warmed:
                self._warmed.add(key)
                warm_prompt_cache(base_url, request, timeout=WARM_TIMEOUT)

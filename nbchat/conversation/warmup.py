"""`PromptWarmer`: which prompts a conversation has had a local server read into its cache, and
the warm-up that runs in the background after connecting, second to the user.

The first reply on the embedded model used to pay for reading the system prompt and the tool
schemas (about 1,000 tokens, up to a minute on two busy cores), and the first reply after a
compaction for reading the new prefix (system prompt, `compacted` row, tail). The warmer sends
each prompt a request may start with once, streamed and generating one token, so the server
keeps it in its prompt cache; its `cancel` signal closes the request at once, in any phase
(`nbchat.llm.transport`).

The warm-up after connecting (`start`) never makes a message wait: a turn, a session change or
closing the chat cancels it (`cancel`). It starts after `WARM_GRACE`, because llama.cpp reads a
prompt batch (up to 2,048 tokens: all of these prompts) to its end before it notices the request
was closed, so a warm-up already sent would hold the server for its whole prompt; a message
sent at once (a script, a notebook run top to bottom, one typed while the model loaded) cancels
it before it is sent and reads its own prompt. A person takes longer than that to type. Once
sent, a cancel still frees the server at the end of the batch, and llama.cpp keeps what it read
in the slot: a message with the same prefix goes on from there.

Must not: touch rows or the store; it only sends what it is handed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import openai

from nbchat.errors import NbchatError
from nbchat.llm.client import stream_chat
from nbchat.llm.stream import Finish
from nbchat.stopping import StopSignal

__all__ = ["WARM_GRACE", "PromptWarmer"]

log = logging.getLogger(__name__)

# Seconds between connecting and the warm-up's request: far longer than a turn already queued
# takes to start, far shorter than a person takes to type a first message.
WARM_GRACE = 2.0


class PromptWarmer:
    """Sends each distinct prompt once per conversation; runs the background warm-up."""

    def __init__(self) -> None:
        self._warmed: set[str] = set()
        self._cancel = StopSignal()
        self._finished = threading.Event()
        self._finished.set()

    def start(self, warm: Callable[[StopSignal], None], *, grace: float = WARM_GRACE) -> None:
        """Run `warm(cancel)` on its own thread after `grace` seconds, unless `cancel()` comes
        first; a warm-up still running is cancelled."""
        self.cancel()
        cancel = self._cancel = StopSignal()
        finished = self._finished = threading.Event()

        def run() -> None:
            try:
                if not cancel.wait(grace):
                    warm(cancel)
            except Exception:  # the cache is an optimisation: a bug is logged, never shown
                log.exception("the warm-up failed")
            finally:
                finished.set()

        threading.Thread(target=run, name="nbchat-warm-up", daemon=True).start()

    def cancel(self) -> None:
        """Stop the background warm-up now: before its request, or closing it at once."""
        self._cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background warm-up has ended; False on timeout."""
        return self._finished.wait(timeout)

    def warm(
        self,
        client: openai.OpenAI,
        model: str,
        messages: list[dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
        *,
        cancel: threading.Event | None = None,
    ) -> None:
        """Have the server read the prompt of `messages` (with `tools` in the request, when a
        request sends them) unless this conversation warmed that very prompt already. The
        server keeps the last prompt in its slot and earlier ones in its RAM cache, from which
        a request restores its prefix in a moment."""
        if cancel is not None and cancel.is_set():
            return
        request: dict[str, Any] = {"model": model, "messages": messages}
        request |= {"tools": list(tools)} if tools else {}
        key = json.dumps(request, sort_keys=True)
        if key not in self._warmed and _warm_streamed(client, request, cancel):
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
        log.info("the prompt was not warmed: %s", exc)
    return False

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

On the embedded server what the warm-up read also survives a restart: each prompt's slot is
saved under the part of the prompt that is the same in every turn (`Prompt.prefix`;
`nbchat.embedded.slots`), once per prefix and model. When a chat connects to that server and
it has read nothing yet, the saved slots are restored before the first request (`restore`), the
one the turn sends first last, so it is the one left in the slot. A message sent at once then
reads only its own tokens. When that message came before the warm-up could save anything, the
warm-up runs again after the turn (`pending`).

Must not: change rows or the store; it reads the history only to build the prompts.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from nbchat.conversation.reply import plan_request
from nbchat.conversation.routing import first_step_messages
from nbchat.conversation.turn import TurnParts
from nbchat.embedded.slots import SavedSlots
from nbchat.errors import NbchatError
from nbchat.history import Row, build_messages
from nbchat.llm.client import stream_chat
from nbchat.llm.endpoint import Connection
from nbchat.llm.reader import Finish, Usage
from nbchat.stopping import StopSignal

__all__ = ["WARM_GRACE", "Prompt", "PromptWarmer", "opening_prompts"]

log = logging.getLogger(__name__)

# Seconds between connecting and the warm-up's request: far longer than a turn already queued
# takes to start, far shorter than a person takes to type a first message.
WARM_GRACE = 2.0


@dataclass(frozen=True)
class Prompt:
    """A prompt a turn's requests start with: its messages (ending with a stand-in for the
    user's message), the tools the request carries, and `prefix`: the part of it that is the
    same in every turn, which names its saved slot ("" keeps none)."""

    messages: list[dict[str, Any]]
    tools: Sequence[dict[str, Any]] = field(default=())
    prefix: str = ""


def opening_prompts(parts: TurnParts, rows: Sequence[Row] | None = None) -> list[Prompt]:
    """The prompts the next turn starts with, in the order it sends them: on a small model, its
    first step's (the fixed prompt and examples, then the workspace: `nbchat.tools.offer`),
    then the chat's (system prompt, tools, history). Every request of a turn starts with one
    of them (a small model's tools are in the system prompt). `rows`: the history a compaction
    prepared in the background would leave, instead of today's (the first step's prompt holds
    only the last exchange, the same either way)."""
    plan = plan_request(parts)
    hello = Row("user", "Hi")
    prompts = []
    if plan.in_prompt:  # a small model's first step is asked on a prompt of its own
        first = first_step_messages(parts, plan.schemas, [*parts.history.rows, hello])
        fixed = first_step_messages(parts, plan.schemas, [])[:-1]  # all but the message
        prompts.append(Prompt(first, prefix=json.dumps(fixed, sort_keys=True)))
    messages = plan.messages if rows is None else build_messages(rows, plan.system_prompt)
    opening = [*messages, {"role": "user", "content": hello.content}]
    system = {"system": plan.system_prompt, "tools": plan.body_tools}
    prompts.append(Prompt(opening, plan.body_tools, json.dumps(system, sort_keys=True)))
    return prompts


class PromptWarmer:
    """Sends each distinct prompt once per conversation; runs the background warm-up; saves
    and restores the embedded server's slots."""

    def __init__(self) -> None:
        # Each prompt warmed, by its request, with the server's count of its tokens (None when
        # it did not say).
        self._warmed: dict[str, int | None] = {}
        self._cancel = StopSignal()
        self._finished = threading.Event()
        self._finished.set()
        self._server: Connection | None = None  # the connection `restore` looked at last
        self._slots: SavedSlots | None = None  # its saved slots (the embedded server only)
        self.pending = False  # a prompt of this connection has no saved slot yet

    def start(self, warm: Callable[[StopSignal], object], *, grace: float = WARM_GRACE) -> None:
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

    def restore(
        self, connection: Connection, home: Path, prompts: Callable[[], Sequence[Prompt]]
    ) -> None:
        """Once per connection, on the embedded server (whose files live under `home`): when
        it has read nothing yet, restore the slots saved for `prompts` (in the order a turn
        sends them), so that its first request reads only its own tokens."""
        if connection is self._server:
            return
        self._server, self._slots = connection, None
        if not connection.embedded:
            return
        slots = SavedSlots.of(home, connection.base_url.removesuffix("/v1"))
        if slots is None:
            return
        try:
            wanted = [prompt.prefix for prompt in prompts() if prompt.prefix]
            slots.restore(wanted[::-1])  # the first one wanted last: it stays in the slot
        except Exception:  # like the warm-up, an optimisation: a bug is logged, never shown
            log.exception("the saved prompts were not restored")
            return
        self.pending = not all(map(slots.has, wanted))
        self._slots = slots

    def warm_all(
        self,
        connection: Connection,
        model: str,
        prompts: Sequence[Prompt],
        *,
        cancel: threading.Event | None = None,
    ) -> int | None:
        """`warm` each of `prompts` in turn, until one is cancelled or fails; on the embedded
        server, keep each one's slot unless one is kept already. Returns the server's count of
        the last prompt's tokens (the chat's, in `opening_prompts`), None when it was not read
        or the server did not say."""
        slots = self._slots if connection is self._server else None
        for prompt in prompts:
            if not self.warm(connection, model, prompt, cancel=cancel, slots=slots):
                return None
        if slots is not None:
            self.pending = False
        return self.counted(model, prompts)

    def counted(self, model: str, prompts: Sequence[Prompt]) -> int | None:
        """The server's count of the last of `prompts` when this conversation warmed it, else
        None (nothing is sent)."""
        return self._warmed.get(_request_key(_request(model, prompts[-1]))) if prompts else None

    def warm(
        self,
        connection: Connection,
        model: str,
        prompt: Prompt,
        *,
        cancel: threading.Event | None = None,
        slots: SavedSlots | None = None,
    ) -> bool:
        """Have the server read `prompt` unless this conversation warmed that very prompt
        already; with `slots`, save what it read under the prompt's prefix when nothing is
        kept for it. The server keeps the last prompt in its slot and earlier ones in its RAM
        cache, from which a request restores its prefix in a moment. False when cancelled or
        failed."""
        if cancel is not None and cancel.is_set():
            return False
        request = _request(model, prompt)
        key = _request_key(request)
        if key in self._warmed:
            return True
        usage = _warm_streamed(connection.client, request, cancel)
        if usage is None:
            return False
        self._warmed[key] = usage.prompt_tokens
        if slots is not None and prompt.prefix and not (cancel is not None and cancel.is_set()):
            self._keep(slots, prompt.prefix, usage)  # (a cancel: a turn is on its way)
        return True

    @staticmethod
    def _keep(slots: SavedSlots, prefix: str, usage: Usage) -> None:
        """Save the slot the warm-up's request left, unless one is kept for `prefix` already."""
        if not slots.has(prefix):
            slots.save(prefix, tokens=_held(usage))


def _request(model: str, prompt: Prompt) -> dict[str, Any]:
    """The request that warms `prompt` (before its one-token cap)."""
    request: dict[str, Any] = {"model": model, "messages": prompt.messages}
    return request | ({"tools": list(prompt.tools)} if prompt.tools else {})


def _request_key(request: Mapping[str, Any]) -> str:
    """What a warmed request is known by (its text, keys sorted)."""
    return json.dumps(request, sort_keys=True)


def _held(usage: Usage) -> range | None:
    """How many tokens the slot holds after a warm-up's request: its prompt, and at most the
    tokens it generated."""
    if usage.prompt_tokens is None:
        return None
    return range(usage.prompt_tokens, usage.prompt_tokens + (usage.completion_tokens or 0) + 1)


def _warm_streamed(
    client: openai.OpenAI, request: dict[str, Any], cancel: threading.Event | None
) -> Usage | None:
    """One streamed one-token request: the server's counts when it read the prompt (empty when
    it did not say), None when cancelled or failed (only logged: the cache is an optimisation)."""
    usage = Usage(None, None)
    try:
        for event in stream_chat(
            client,
            request["messages"],
            model=request["model"],
            tools=request.get("tools", ()),
            max_tokens=1,
            stop=cancel,
        ):
            if isinstance(event, Usage):
                usage = event
            if isinstance(event, Finish):
                return usage if event.reason != "stopped" else None
    except NbchatError as exc:
        log.info("the prompt was not warmed: %s", exc)
    return None

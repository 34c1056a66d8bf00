"""One reply of the chat model: the request built (the tools offered, the system prompt, the
messages), streamed, recorded as sent, and the reply saved with its usage; after a context
overflow, one forced compaction and one more try (`request_reply`).

A stream that fails keeps what arrived as complete rows and then raises.
Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Sized
from typing import Any

from nbchat.compaction.cacheform import RequestShape
from nbchat.conversation.archivetool import offerable
from nbchat.conversation.autocompact import compact_after_overflow, warn_over_budget
from nbchat.conversation.events import Event, Notice, RequestStarted, UsageReported
from nbchat.conversation.steps import Steps, TurnParts, post_notice, save_rows
from nbchat.conversation.turn import Round, StreamedReply
from nbchat.errors import ContextOverflowError, NbchatError, ServerUnavailableError
from nbchat.history import build_messages
from nbchat.llm.client import stream_chat
from nbchat.llm.stream import ReasoningDelta, TextDelta
from nbchat.tools.offer import offered_tools

__all__ = [
    "EMPTY_REPLY_NOTICE",
    "STOPPED_NOTICE",
    "request_reply",
    "save_reply",
    "stream_reply",
    "system_prompt_for",
    "tools_for",
]

STOPPED_NOTICE = "Stopped by you; the reply so far was kept."
EMPTY_REPLY_NOTICE = "The model sent an empty reply. Try rephrasing, or /retry."


def request_reply(
    parts: TurnParts, state: Round, stop: threading.Event
) -> Generator[Event, None, StreamedReply]:
    """One streamed request; after an overflow, one forced compaction and one retry."""
    while True:
        yield from warn_over_budget(parts)
        yield RequestStarted(state.number, 2 if state.overflow_retried else 1)
        try:
            reply = yield from stream_reply(parts, stop, state.tool_choice)
            break
        except ContextOverflowError as exc:
            if state.overflow_retried:
                raise ContextOverflowError(
                    f"The request is still too big for the model after compacting: {exc} "
                    "Start a new session (/new), or give the server a larger context.",
                    prompt_tokens=exc.prompt_tokens,
                    context_size=exc.context_size,
                ) from exc
            state.overflow_retried = True
            yield Notice(f"The server said the request was too big; compacting. ({exc})")
            yield from compact_after_overflow(parts, exc, stop)
    yield from save_reply(parts, reply)
    return reply


def stream_reply(
    parts: TurnParts, stop: threading.Event, tool_choice: str | None
) -> Generator[Event, None, StreamedReply]:
    """Stream one reply; a failure keeps what arrived (as complete rows), then raises."""
    settings = parts.settings
    reply = StreamedReply(request_rows=len(parts.history))
    tools = tools_for(parts, tool_choice)
    system_prompt = system_prompt_for(parts, tools)
    messages = build_messages(parts.history.rows, system_prompt)
    # A summary is then asked as this request's continuation, in the server's cache.
    shape = RequestShape(system_prompt, tuple(tools), settings.model, tuple(messages))
    parts.engine.request_shape = shape
    try:
        for event in stream_chat(
            parts.budget.connect().client,
            messages,
            model=settings.model,
            tools=tools,
            max_tokens=settings.max_tokens,
            temperature=settings.reply_temperature(),
            stop=stop,
            json_tool_fallback=settings.uses_json_tool_fallback(),
            check_arguments=parts.tools.accepts,
            tool_choice=tool_choice,
            on_request=lambda body: _record_sent(parts, reply, body, system_prompt),
        ):
            reply.take(event)
            if isinstance(event, ReasoningDelta | TextDelta):
                yield event
    except ContextOverflowError:
        raise
    except ServerUnavailableError as exc:
        raise parts.budget.lost(exc) from exc
    except NbchatError as exc:
        if reply.is_empty:
            raise
        reply.calls = ()  # calls never complete in a cut stream; the text is kept
        yield from save_reply(parts, reply)
        yield from post_notice(parts.session, f"The reply was cut off: {exc}")
        raise  # the client's message already says the partial reply was kept
    return reply


def _record_sent(
    parts: TurnParts, reply: StreamedReply, body: dict[str, Any], system_prompt: str
) -> None:
    session_id = parts.session.ensure_writable()  # the user's row was written: it is
    reply.request_id = parts.store.record_sent(session_id, body, system_prompt=system_prompt)


def tools_for(parts: TurnParts, tool_choice: str | None) -> list[dict[str, Any]]:
    """Every tool, or on a small model none unless the user's message asks for them."""
    return offered_tools(
        offerable(parts.tools.schemas(), parts.history.rows),
        parts.history.rows,
        on_request=parts.settings.offers_tools_on_request(),
        tool_choice=tool_choice,
    )


def system_prompt_for(parts: TurnParts, tools: Sized) -> str:
    """The settings' prompt, naming the workspace's top level when `tools` (the ones offered,
    or for the budget's estimate all the chat has) are not empty."""
    return parts.overview.system_prompt(parts.settings.system_prompt, tools_offered=len(tools) > 0)


def save_reply(parts: TurnParts, reply: StreamedReply) -> Steps:
    """Record the request's usage, then store the reply's rows (and say why it ended early)."""
    duration = time.monotonic() - reply.started
    usage = reply.usage
    prompt = usage.prompt_tokens if usage else None
    completion = usage.completion_tokens if usage else None
    if prompt is not None:
        parts.history.record_usage(prompt)  # measured on the rows before this reply
    parts.session.record_request(
        prompt_tokens=prompt,
        completion_tokens=completion,
        duration=duration,
        active_rows=reply.request_rows,
        request_id=reply.request_id,
    )
    yield UsageReported(prompt, completion, duration)
    reply.calls = tuple(parts.session.unique(call) for call in reply.calls)
    yield from save_rows(parts.session, *reply.rows())
    if reply.stopped:
        yield from post_notice(parts.session, STOPPED_NOTICE)
    elif reply.is_empty:
        yield from post_notice(parts.session, EMPTY_REPLY_NOTICE)
    elif reply.finish == "length":
        yield from post_notice(
            parts.session,
            f"The reply hit the max_tokens limit ({parts.settings.max_tokens}); ask the model "
            "to continue, or raise NBCHAT_MAX_TOKENS.",
        )

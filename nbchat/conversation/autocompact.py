"""The compactions a turn makes on its own: the budget check before each request, after each
reply and after each tool round (at most one a round); the forced one after a context overflow;
and the notice when a request still goes out over the budget.

A compaction that fails or cannot shrink the history is reported and the turn goes on with the
history as it was: a reply is never lost to it. Every notice says what the compaction did: what
was summarised, what was archived, what was kept; and what it says was kept stays kept while
the model is given nothing new: a compaction that changed nothing is not tried again until a
row the model reads comes (the notice row itself would otherwise be a new place to cut, and the
next round would archive every row the notice had just said were kept, the tool results the
model had not read yet among them). Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator

from nbchat.compaction.result import CompactionResult
from nbchat.conversation.events import CompactionFinished, CompactionStarted, Event
from nbchat.conversation.steps import Steps, TurnParts, post_notice
from nbchat.conversation.turn import Round
from nbchat.errors import CompactionError, ContextOverflowError, NbchatError
from nbchat.history import UNSENT_ROLES, History

__all__ = ["compact", "compact_after_overflow", "compact_if_needed", "warn_over_budget"]

log = logging.getLogger(__name__)

NOTHING_CHANGED = "Compaction changed nothing"


def compact(
    parts: TurnParts,
    reason: str,
    stop: threading.Event,
    *,
    focus: str | None = None,
    force: bool = False,
) -> Generator[Event, None, CompactionResult]:
    """One compaction (`reason`: "budget", "overflow", "manual"), applied when it changed the
    history."""
    yield CompactionStarted(reason)
    result = parts.preparer.compact(
        parts.history, parts.engine, parts.situation(), force=force, focus=focus, cancel=stop
    )
    if result.changed:
        parts.session.apply(result)
    yield CompactionFinished(result)
    return result


def compact_if_needed(parts: TurnParts, state: Round, stop: threading.Event) -> Steps:
    """The budget check. A compaction that fails or cannot shrink the history is reported
    and the turn goes on with the history as it was: a reply is never lost to it."""
    if not state.may_compact() or not parts.engine.should_compact(parts.history):
        return
    if _judged_already(parts.history):
        return  # the same rows as the model will read them: the notice's answer still holds
    state.compacted = True
    try:
        result = yield from compact(parts, "budget", stop)
    except CompactionError as exc:
        text = f"Compaction failed; the history was kept as it was. {exc}"
        yield from post_notice(parts.session, text)
    except Exception as exc:  # a bug: logged with its traceback, the reply still comes
        log.exception("automatic compaction failed")
        yield from post_notice(
            parts.session,
            f"Compaction failed unexpectedly ({type(exc).__name__}: {exc}); the history was "
            "kept as it was. Compact with the button or /compact to retry; if it fails "
            "again, start a new session (/new).",
        )
    else:
        if not result.changed and not result.cancelled:
            yield from post_notice(
                parts.session,
                f"{NOTHING_CHANGED}: {result.reason}. Nothing was summarised or archived; all "
                f"{len(result.rows)} rows were kept as they were (about "
                f"{result.tokens_before:,} tokens; compaction starts at {parts.engine.trigger:,}).",
            )


def _judged_already(history: History) -> bool:
    """Whether the last compaction changed nothing and only rows the model does not read
    (notices, reasoning) came after it: it would judge the same rows again."""
    for index in range(len(history) - 1, -1, -1):
        row = history[index]
        if row.role not in UNSENT_ROLES:
            return False
        if row.role == "system" and row.content.startswith(NOTHING_CHANGED):
            return True
    return False


def compact_after_overflow(
    parts: TurnParts, overflow: ContextOverflowError, stop: threading.Event
) -> Steps:
    """The forced compaction after an overflow. When it fails the turn ends saying what to
    do, in a notice row too, so the user's message is not left without an answer."""
    try:
        yield from compact(parts, "overflow", stop, force=True)
    except Exception as exc:
        if isinstance(exc, NbchatError) and not isinstance(exc, CompactionError):
            raise  # the store's own errors say what to do already
        if not isinstance(exc, CompactionError):
            log.exception("compaction after an overflow failed")
        text = (
            "The request was too big for the model, and compacting it failed: "
            f"{exc} Start a new session (/new), or compact (/compact) and resend."
        )
        yield from post_notice(parts.session, text)
        raise ContextOverflowError(
            text, prompt_tokens=overflow.prompt_tokens, context_size=overflow.context_size
        ) from exc


def warn_over_budget(parts: TurnParts) -> Steps:
    """A request over the budget never goes out unannounced."""
    tokens, threshold = parts.context_tokens(), parts.threshold
    if tokens > threshold:
        yield from post_notice(
            parts.session,
            f"This request is about {tokens:,} tokens, over the budget of {threshold:,}: "
            "compaction could not bring the history under it. The server may refuse it or "
            "drop the start of the conversation; start a new session (/new), or raise "
            "context_token_threshold if the model's window is larger.",
        )

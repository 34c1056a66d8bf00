"""The parts of a turn besides the reply: the state one turn keeps, the steps every part takes,
the tool round, and the compactions a turn makes on its own. The loop
(`nbchat.conversation.loop`) strings them together with the reply (`nbchat.conversation.reply`).

State: `StreamedReply` collects stream events and turns them into the rows that will be stored,
exactly as they will be sent again; `FailureGuard` ends a turn when the same tool call fails
three times in a row instead of burning `max_tool_turns`.

Shared steps: `TurnParts` (what the parts use of a `Conversation`), and the two steps every part
takes: saving rows (each reported as `RowSaved`) and posting a notice (a `system` row in the
transcript, and a `Notice` event).

The tool round: each call the reply made run through the `ToolExecutor` (policy, approval,
limits: one result holds at most the budget's `tool_output_limit`) and its result stored, every
call answered even when Stop was pressed; the turn ends when the same call keeps failing
(`FailureGuard`). Before each round, the MCP servers not started yet are started and their tools
registered, and each that failed or stopped is said once (`start_servers`).

The compactions a turn makes on its own: the budget check before each request, after each reply
and after each tool round (at most one a round); the forced one after a context overflow; and the
notice when a request still goes out over the budget. A compaction that fails or cannot shrink
the history is reported and the turn goes on with the history as it was: a reply is never lost
to it. Every notice says what the compaction did: what was summarised, what was archived, what
was kept; and what it says was kept stays kept while the model is given nothing new: a
compaction that changed nothing is not tried again until a row the model reads comes (the notice
row itself would otherwise be a new place to cut, and the next round would archive every row the
notice had just said were kept, the tool results the model had not read yet among them).

Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Protocol

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import CompactionResult
from nbchat.config import Settings
from nbchat.conversation.budget import Budget
from nbchat.conversation.events import (
    CompactionFinished,
    CompactionStarted,
    Done,
    Event,
    Notice,
    RowSaved,
    ToolFinished,
    ToolStarted,
)
from nbchat.conversation.prepare import CheckpointPreparer, Situation
from nbchat.conversation.session import Session
from nbchat.errors import CompactionError, ContextOverflowError, NbchatError
from nbchat.history import UNSENT_ROLES, History, Row, ToolCall
from nbchat.llm.reader import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    TextWithdrawn,
    ToolCallsReady,
    Usage,
)
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolExecutor, ToolRegistry
from nbchat.tools.executor import Approver
from nbchat.tools.mcp import McpTools
from nbchat.tools.overview import WorkspaceOverview

__all__ = [
    "FailureGuard",
    "NOT_RUN",
    "Round",
    "Steps",
    "StreamedReply",
    "TurnParts",
    "Unlooked",
    "compact",
    "compact_after_overflow",
    "compact_if_needed",
    "post_notice",
    "run_tools",
    "save_rows",
    "start_servers",
    "warn_over_budget",
]


REPEATS_TO_GIVE_UP = 3


@dataclass
class Round:
    """One request/reply/tools round: at most one automatic compaction, one overflow retry."""

    number: int
    compacted: bool = False
    overflow_retried: bool = False
    tool_choice: str | None = None

    def may_compact(self) -> bool:
        return not self.compacted


@dataclass(frozen=True)
class Unlooked:
    """What the message of words chosen before any tool ran says of what is here: it names
    (`named`, by name) or points at something of the user's (`pointed`), and does not ask how
    to do something; of those, whether it asks about the user's own things (`owned`: it names
    one, says my, our or we, or asks about a state) and whether it asks if something here is
    on, installed or running (`about_state`)."""

    pointed: bool = False
    named: tuple[str, ...] = ()
    owned: bool = False
    about_state: bool = False


@dataclass
class StreamedReply:
    """One streamed reply as it arrives; `rows()` is what gets stored."""

    request_rows: int
    calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish: str | None = None
    request_id: int | None = None  # its request record (`Store.record_sent`)
    # Set when a small model's first step chose words before any tool ran in the turn
    # (`nbchat.conversation.routing.FirstStep`): the reply has read nothing.
    unlooked: Unlooked | None = None
    started: float = field(default_factory=time.monotonic)
    # Deltas are kept as parts and joined on demand: `+=` on a long string copies it each time.
    _reasoning: list[str] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    @property
    def text(self) -> str:
        return "".join(self._text)

    def take(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
        elif isinstance(event, TextWithdrawn):
            self._text.clear()
        elif isinstance(event, ToolCallsReady):
            if event.from_content:  # the text streamed so far was this call, written as JSON
                self._text.clear()
            self.calls = event.calls
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finish):
            self.finish = event.reason

    @property
    def stopped(self) -> bool:
        return self.finish == "stopped"

    @property
    def is_empty(self) -> bool:
        return not (self._text or self._reasoning or self.calls)

    def rows(self) -> list[Row]:
        """`analysis` (when the model reasoned), then `assistant_full` or `assistant`."""
        rows = [Row("analysis", self.reasoning)] if self.reasoning else []
        if self.calls:
            wire = json.dumps([call.to_wire() for call in self.calls], ensure_ascii=False)
            rows.append(Row("assistant_full", self.text, "", "", wire))
        elif self.text:
            rows.append(Row("assistant", self.text))
        return rows


class FailureGuard:
    """Counts consecutive failures of the very same call (name and arguments)."""

    def __init__(self) -> None:
        self._last: tuple[str, str] | None = None
        self._count = 0

    def record(self, call: ToolCall, *, ok: bool) -> bool:
        """Record an outcome; True when the same call has now failed three times in a row."""
        key = (call.name, _canonical(call.arguments))
        if ok:
            self._last, self._count = None, 0
            return False
        self._count = self._count + 1 if key == self._last else 1
        self._last = key
        return self._count >= REPEATS_TO_GIVE_UP


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments


Steps = Generator[Event, None, None]


class TurnParts(Protocol):
    """What a turn's parts use of the conversation (`Conversation` has all of it)."""

    settings: Settings
    store: Store
    session: Session
    tools: ToolRegistry
    mcp: McpTools
    budget: Budget
    overview: WorkspaceOverview
    preparer: CheckpointPreparer
    approver: Approver | None

    @property
    def history(self) -> History: ...

    @property
    def engine(self) -> CompactionEngine: ...

    @property
    def threshold(self) -> int: ...

    def context_tokens(self) -> int: ...

    def situation(self) -> Situation: ...


def save_rows(session: Session, *rows: Row) -> Steps:
    """Store `rows` (complete rows only), reporting each."""
    for row in session.save(rows):
        yield RowSaved(row)


def post_notice(session: Session, text: str) -> Steps:
    """A notice that belongs in the transcript: stored as a `system` row, then shown."""
    yield from save_rows(session, Row("system", text))
    yield Notice(text)


NOT_RUN = "Not run: stopped by the user."


def start_servers(parts: TurnParts, stop: threading.Event) -> Steps:
    """Start the chat's MCP servers when their tools are first needed (a no-op once they run),
    posting each notice of one that failed or stopped."""
    for text in parts.mcp.start(parts.tools, stop):
        yield from post_notice(parts.session, text)


def run_tools(
    parts: TurnParts, calls: tuple[ToolCall, ...], stop: threading.Event, guard: FailureGuard
) -> Generator[Event, None, bool]:
    """Run each call and store its result; returns True when the turn has ended: a call
    failed three times alike, or every call was refused before it ran (declined by the user,
    or not allowed by the policy), which ends the turn with the refusals in the user's terms
    as the reply. The model is not asked to go on: asked, a 1.5B model answered a declined
    call with "The tool call failed because the user did not approve it. They can ask the
    user how to proceed", and a declined call is the user's to follow up, as in other agents."""

    def approve(request: ApprovalRequest) -> bool:
        # Read at call time, so a UI can attach its approver after the conversation exists.
        return parts.approver is not None and parts.approver(request)

    # Without an approver the executor's own "ask with no approver means deny" applies.
    approver = approve if parts.approver else None
    limited = parts.settings.replace(tool_output_limit=parts.budget.tool_output_limit())
    executor = ToolExecutor.from_settings(limited, parts.tools, approver=approver)
    gave_up = False
    refusals: list[str | None] = []
    for index, call in enumerate(calls):
        if stop.is_set():  # every call still needs a result row
            skipped = [Row("tool", NOT_RUN, c.id, c.name) for c in calls[index:]]
            yield from save_rows(parts.session, *skipped)
            yield Done(stopped=True)
            return True
        yield ToolStarted(call)
        outcome = executor.execute(call, stop=stop)
        yield from save_rows(parts.session, Row("tool", outcome.content, call.id, call.name))
        yield ToolFinished(call, outcome)
        refusals.append(outcome.refused)
        gave_up = guard.record(call, ok=outcome.ok) or gave_up
    if refusals and all(refusals):
        yield from save_rows(parts.session, Row("assistant", "\n".join(filter(None, refusals))))
        yield Done()
        return True
    if gave_up:
        yield from post_notice(
            parts.session,
            "The same tool call failed three times in a row, so the turn was ended. "
            "Tell the model what to do differently.",
        )
        yield Done()
    return gave_up


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

"""`CheckpointPreparer`: a session's next compaction, summarised while the user reads.

At an idle moment (a widget calls `Conversation.use_idle_moment` when a turn has ended), once
the next request is past a soft mark below the trigger (`Settings.prepare_mark` of it),
`prepare` runs the compaction the trigger would run, with the same `CompactionEngine`, forced,
and keeps the `CompactionResult` in memory with the rows it covers and a key of the model, the
system prompt and the tool schemas. Nothing is written. While the cut it made still serves (the
history it leaves lands under the trigger) it is kept as it is; only then does a later idle
moment bring it up to date (only the rows added since are summarised). When the budget check
reaches the trigger, `compact` hands it to `CompactionEngine.compact_prepared`: when the
compaction would replace exactly the covered rows it is rebuilt at once, with no model call;
when it would replace more, only those are summarised. A change of key, of a covered row or of
session drops it.

No reply waits for the new prefix either. A reading pause on two cores holds a few hundred
prompt tokens of the 1.5B, the new prefix (checkpoint, facts, tail) over a thousand, so it is
read ahead, pause by pause: each idle moment with a compaction prepared has the server read the
history that compaction would leave now (`Conversation.warm_up(rows)`; the server keeps it in
its prompt cache while the turns go on with the old one, and each pause reads only what is new
in it). When one more turn like the last would reach the trigger, the idle moment applies that
very history, with no model call, then has the server read what is new in it (most of it was
read in the pauses before): written first, so that a message sent meanwhile finds it made.
Sizes are compared in one unit: the server's count of a prompt where it read it, else a
result's own size, scaled to the measured one; never the bare estimate against a report.

This module decides when a checkpoint is prepared and whether it still fits; how it serves a
compaction is the pure step `nbchat.compaction.steps.reuse`.

A preparation that fails (server down, overflow, a bad reply) leaves a log line and is tried
again at the next idle moment, at most `MAX_FAILURES` times between two compactions, so it
never loops; the foreground compaction then runs as before. Never on a read-only session or one
whose lease another kernel took. One at a time: the caller holds the conversation's lock.

Must not: write to the store, start threads, or know about widgets.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import CompactionResult
from nbchat.config import Settings
from nbchat.conversation.session import Session
from nbchat.errors import CompactionError, NbchatError
from nbchat.history import History, Row, last_user_index

__all__ = [
    "MAX_FAILURES",
    "CheckpointPreparer",
    "Prepared",
    "Situation",
    "last_turn_tokens",
    "next_turn_reaches",
    "situation_of",
]

log = logging.getLogger(__name__)

MAX_FAILURES = 3  # failed preparations between two compactions before it waits for the trigger
State = Literal["", "preparing", "ready"]


@dataclass(frozen=True)
class Situation:
    """What a preparation depends on, read from the conversation at one moment."""

    session_id: str | None
    writable: bool
    key: str
    tokens: int


@dataclass(frozen=True)
class Prepared:
    """A compaction computed ahead of time and not written: the rows it covers, as they were."""

    session_id: str
    key: str
    covered: tuple[Row, ...]
    result: CompactionResult


def situation_of(
    session: Session,
    settings: Settings,
    schemas: Sequence[Mapping[str, Any]],
    tokens: int,
    *,
    system_prompt: str,
) -> Situation:
    """The conversation's situation now; writable only while this store holds the lease.
    `system_prompt` is the prompt as requests send it (the workspace overview included), so a
    change of either drops what was prepared."""
    session_id = session.id
    writable = (
        session_id is not None and not session.read_only and session.store.holds_lease(session_id)
    )
    text = json.dumps(
        [settings.model, settings.summary_model, system_prompt, list(schemas)],
        sort_keys=True,
        default=str,
    )
    key = hashlib.sha256(text.encode()).hexdigest()
    return Situation(session_id, writable, key, tokens)


def last_turn_tokens(history: History) -> int | None:
    """The estimate of the last turn (its user row and all after), None without a user row."""
    last = last_user_index(history)
    if last is None:
        return None
    return sum(history.estimate_of(i) for i in range(last, len(history)))


def next_turn_reaches(history: History, tokens: int, trigger: int) -> bool:
    """Whether one more turn as big as the last (its user row and all after) would reach the
    trigger: the compaction is then only a reply away, and better made while the user reads."""
    turn = last_turn_tokens(history)
    return turn is not None and tokens + turn >= trigger


def _size(result: CompactionResult, counted: int | None, today: int) -> int:
    """The size of the request `result`'s history makes: `today` when it changed nothing, the
    server's count of it when it read it (`counted`), else the result's own, in the units of the
    size it was measured at (never the bare estimate, a third over on English prose: against a
    reported size, a compaction sized by it looked as if it grew the history, 1,042 tokens
    before and 1,436 after)."""
    if not result.changed:
        return today
    return counted if counted is not None else result.tokens_after


class CheckpointPreparer:
    """Holds at most one prepared compaction (see the module docstring)."""

    def __init__(self, mark: float) -> None:
        self.mark = mark
        self.warm_due = False  # a compaction was applied: the new prefix is worth warming
        self._prepared: Prepared | None = None
        self._failures: dict[tuple[str, Row | None], int] = {}
        self._running = False

    def state(self, session_id: str | None) -> State:
        """What the meter shows: "preparing", "ready" (one for this session is prepared), or ""."""
        if self._running:
            return "preparing"
        prepared = self._prepared
        return "ready" if prepared is not None and prepared.session_id == session_id else ""

    def take_warm(self, cancel: threading.Event) -> bool:
        """Whether a compaction was applied since the last idle moment (asked once)."""
        due, self.warm_due = self.warm_due and not cancel.is_set(), False
        return due

    def use_idle_moment(
        self,
        history: History,
        engine: CompactionEngine,
        situation: Callable[[], Situation],
        *,
        cancel: threading.Event,
        notify: Callable[[], None],
        apply: Callable[[CompactionResult], None],
        warm: Callable[[Sequence[Row] | None], int | None],
        counted: Callable[[Sequence[Row]], int | None] = lambda rows: None,
    ) -> CompactionResult | None:
        """One idle moment: warm the prefix a compaction made; prepare the next compaction. When
        the next turn is not expected to reach the trigger: have the server read today's prompt
        again when preparing asked the model (`warm(None)`), then the history the compaction
        would leave (`warm(rows)`). When one more turn like the last would reach it: apply the
        compaction now (`apply` writes it), sized by the server's count of its prompt where
        one was read before (`counted(rows)`), else by its own measure, and warm its prefix,
        so the next reply starts like any other. Returns what was applied. Never right after a
        compaction: there is a turn between two, so no loop. With the mark at 0 it does
        nothing at all (compaction as before: at the trigger)."""
        if self.mark <= 0:
            return None
        just_compacted = self.take_warm(cancel)
        if just_compacted:
            warm(None)
        before = self._prepared
        if not self.prepare(history, engine, situation, cancel=cancel, notify=notify):
            return None
        now = situation()
        coming = self.coming(history, engine, now)
        if just_compacted or not next_turn_reaches(history, now.tokens, engine.trigger):
            if self._prepared is not before and not cancel.is_set():
                # The summary was asked on the chat's own prefix (the cache form) and the
                # server kept only the part the two share: the next turn would read the rest
                # again (~370 tokens, 6 s of a 1.5B on two cores). Read it now, before reading
                # ahead, so that the server keeps it in its RAM cache while it reads the new
                # prefix.
                warm(None)
            if coming is not None and not cancel.is_set():
                warm(coming.rows)  # read ahead: the prefix the next compaction leaves
            return None
        if cancel.is_set():
            return None
        # Applied now, so today's prompt is not read again, and the new prefix is read after
        # the write: a message sent meanwhile finds the compaction made. (Preparing it may have
        # taken most of the pause: on a 1,600-token budget the summary took 12 s of 20, and the
        # reads before the write were cut short by the next message, which then compacted.)
        after = _size(coming, counted(coming.rows), now.tokens) if coming is not None else 0
        if coming is None or next_turn_reaches(history, after, engine.trigger):
            # Its cut would leave no room for the next turn: a deeper one, updated. (Asked to
            # leave room for a turn like the last too, it made things worse on a 1,600-token
            # budget: the checkpoint and facts outgrew the rows they replaced, and the next
            # turn compacted for 25 s.)
            coming = self.compact(history, engine, now, force=True, focus=None, cancel=cancel)
            after = _size(coming, counted(coming.rows), now.tokens)
        sizes = (now.tokens, after, last_turn_tokens(history) or 0, engine.trigger)
        if after >= now.tokens:
            # Nothing gained, and the server would read a new prefix: the next turn compacts
            # at the trigger if it must (with what was made here, when it still serves).
            self.warm_due = False
            self._keep(history, now, coming)
            log.info(
                "a compaction in a pause would not shrink the history: %d tokens now, "
                "%d after, next turn ~%d, trigger %d",
                *sizes,
            )
            return None
        log.info(
            "applying the prepared compaction in a pause: %d tokens now, %d after, next "
            "turn ~%d, trigger %d",
            *sizes,
        )
        return self._apply(coming, apply, warm, cancel)

    def _apply(
        self,
        result: CompactionResult,
        apply: Callable[[CompactionResult], None],
        warm: Callable[[Sequence[Row] | None], int | None],
        cancel: threading.Event,
    ) -> CompactionResult | None:
        """Write `result` (a quick write: a send waits for it on the worker), then warm the rest
        of its prefix; None when nothing was applied."""
        self._prepared = None
        if not result.changed:
            return None
        try:
            apply(result)
        except NbchatError as exc:
            log.warning("the prepared compaction was not applied: %s", exc)
            return None
        self.warm_due = False
        if not cancel.is_set():
            warm(None)
        return result

    def coming(
        self, history: History, engine: CompactionEngine, now: Situation
    ) -> CompactionResult | None:
        """The compaction the prepared one gives now with the cut it made and no model call, or
        None (none prepared, or that cut would no longer land under the trigger)."""
        prepared = self._valid(history, now)
        if prepared is None:
            return None
        return engine.compact_prepared(history, prepared.result, force=True, at_once=True)

    def prepare(
        self,
        history: History,
        engine: CompactionEngine,
        situation: Callable[[], Situation],
        *,
        cancel: threading.Event,
        notify: Callable[[], None] = lambda: None,
    ) -> bool:
        """Prepare (or bring up to date) the next compaction when it is due; True when one is
        ready. A failure is logged and counted, never raised. `situation` is read before and
        after: a lease another kernel took meanwhile drops the result."""
        now = situation()
        prepared = self._valid(history, now)
        if not self._is_due(history, engine, now) or cancel.is_set():
            return prepared is not None
        if prepared is not None and self.coming(history, engine, now) is not None:
            return True  # it still serves as it is: no model call, and its prefix stays put
        assert now.session_id is not None
        epoch = (now.session_id, history[0] if len(history) else None)
        self._running = True
        notify()
        try:
            # In the estimate's units, which the history's size is counted in once compacted
            # (until the server reports it).
            grows = engine.trigger - engine.context_tokens(list(history.rows))
            result = self._run(history, engine, prepared, cancel, room=grows)
        except CompactionError as exc:
            self._failures[epoch] = self._failures.get(epoch, 0) + 1
            log.warning("preparing the next compaction failed (will retry when idle): %s", exc)
            result = None
        finally:
            self._running = False
        if result is not None:
            log.info("preparing the next compaction: %s (%.1f s)", result.reason, result.duration)
        if result is not None and self._keep(history, now, result):
            self._failures.pop(epoch, None)
        ready = self._valid(history, situation()) is not None
        notify()
        return ready

    def _keep(self, history: History, now: Situation, result: CompactionResult) -> bool:
        """Hold `result` as the prepared compaction when it made a summary; whether it did."""
        if now.session_id is None or not result.changed or result.edit.summary_row is None:
            return False
        covered = tuple(history.rows[: result.edit.rows_summarised])
        self._prepared = Prepared(now.session_id, now.key, covered, result)
        return True

    def compact(
        self,
        history: History,
        engine: CompactionEngine,
        now: Situation,
        *,
        force: bool,
        focus: str | None,
        cancel: threading.Event,
    ) -> CompactionResult:
        """The compaction the loop asked for: from the prepared one when one still fits (and
        no focus was given), else `engine.compact` as usual. A prepared one is used once,
        unless cancelled."""
        prepared = self._valid(history, now)
        self._prepared = None
        result = None
        if prepared is not None and focus is None:
            result = engine.compact_prepared(history, prepared.result, force=force, cancel=cancel)
            if result is not None and result.cancelled:
                self._prepared = prepared  # still good for the next attempt
        if result is None:
            result = engine.compact(history, force=force, focus=focus, cancel=cancel)
        if result.changed:
            self.warm_due = True
        return result

    def _is_due(self, history: History, engine: CompactionEngine, now: Situation) -> bool:
        if self.mark <= 0 or not now.writable or now.session_id is None or not len(history):
            return False
        if self._failures.get((now.session_id, history[0]), 0) >= MAX_FAILURES:
            return False
        return now.tokens >= self.mark * engine.trigger

    def _run(
        self,
        history: History,
        engine: CompactionEngine,
        prepared: Prepared | None,
        cancel: threading.Event,
        *,
        room: int,
    ) -> CompactionResult | None:
        """The compaction prepared ahead: its cut leaves `room` (what the history may grow
        before the trigger), so that when it is applied its cut still serves, with no model
        call, and the prefix read ahead is the one applied."""
        room = max(0, room)
        if prepared is not None:
            updated = engine.compact_prepared(
                history, prepared.result, force=True, cancel=cancel, room=room
            )
            if updated is not None:
                return updated
        return engine.compact(history, force=True, cancel=cancel, room=room)

    def _valid(self, history: History, now: Situation) -> Prepared | None:
        """The prepared compaction if it still fits `history` and `now`, else None (dropped)."""
        prepared = self._prepared
        if prepared is None:
            return None
        covered = len(prepared.covered)
        if (
            prepared.session_id != now.session_id
            or prepared.key != now.key
            or not now.writable
            or tuple(history.rows[:covered]) != prepared.covered
        ):
            log.info(
                "a prepared compaction was dropped: the session, model, prompt or rows changed"
            )
            self._prepared = None
            return None
        return prepared

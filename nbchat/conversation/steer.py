"""Compaction the user steers: preview it, accept it (with their own summary text if they edit
it) or drop it, and undo the latest one.

`Steering.preview` asks the engine for the compaction the Compact button would make and keeps
it, with the rows it was computed from; nothing is written. `accept` applies that proposal only
while the history is still exactly what the preview covered; `text` replaces the model-written
part of the summary, and the code-kept part (the recorded facts, the carried latest message)
stays as the code wrote it; an edit that would put the history over the compaction trigger is
refused unless forced, as an undo is (`edit_warning`, in the same words). `undo` takes the
latest compaction back (`nbchat.store.undo`), first checking the lease (refused, naming the
holder, when another kernel writes the session) and the size the history would have: over the
point where compaction triggers it is not undone unless forced, and the outcome says so.
Automatic compaction and `compact_now` are untouched.

Must not: import widgets, contain SQL, or hold the turn lock longer than one call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from nbchat.compaction.facts import FACTS_HEADING, LATEST_HEADING
from nbchat.compaction.result import CompactionResult
from nbchat.config import Settings
from nbchat.conversation.session import Session
from nbchat.errors import LeaseLostError, NbchatError, SessionLockedError
from nbchat.history import Row, context_tokens, estimate_tokens
from nbchat.store.undo import UndoPlan, held_message

if TYPE_CHECKING:  # a type only: `budget` imports openai (~1 s), which `nbchat undo-compact` skips
    from nbchat.conversation.budget import Budget

__all__ = ["Steering", "UndoOutcome", "over_trigger_warning", "split_summary", "undo_outcome"]

BUSY = "A reply is still running; wait for it or press Stop, then try again."
# Where the code-kept part of a summary starts: the facts block, else the carried message.
CODE_KEPT_HEADINGS = (FACTS_HEADING, LATEST_HEADING)


@dataclass(frozen=True)
class UndoOutcome:
    """What an undo did, or would do: `done` is False when it waits for a confirmation
    (`warning` says why: the history would be over the compaction trigger again)."""

    done: bool
    record_id: int
    rows_restored: int
    tokens_after: int
    trigger: int
    threshold: int
    warning: str = ""

    @property
    def message(self) -> str:
        if not self.done:
            return f"{self.warning} Undo anyway with undo_compaction(force=True)."
        return (
            f"Compaction {self.record_id} undone: {self.rows_restored} row(s) are back; the "
            f"history is ~{self.tokens_after:,} tokens (budget {self.threshold:,})."
        )


def split_summary(text: str) -> tuple[str, str]:
    """A `compacted` row's text as (model-written part, code-kept part)."""
    padded = "\n" + text
    starts = [padded.find(f"\n{heading}\n") for heading in CODE_KEPT_HEADINGS]
    found = [start for start in starts if start >= 0]
    if not found:
        return text, ""
    start = min(found)
    return text[:start].rstrip(), text[start:]


def over_trigger_warning(what: str, *, tokens: int, trigger: int, threshold: int) -> str:
    """The one wording for a change that would put the history over the compaction trigger
    (an undo, an edited summary): `what` the change does, then the size it leaves."""
    return (
        f"{what}: the history would be ~{tokens:,} tokens, over the compaction trigger "
        f"({trigger:,} of the {threshold:,} budget), so the next message compacts it again."
    )


def undo_outcome(
    undo: UndoPlan, settings: Settings, *, overhead: int, threshold: int, done: bool = False
) -> UndoOutcome:
    """The size check before an undo: the history after it against the trigger."""
    tokens = context_tokens(list(undo.rows_after), overhead)
    trigger = int(threshold * settings.trigger_factor)
    warning = ""
    if tokens >= trigger:
        what = f"Undoing compaction {undo.record_id} brings back {len(undo.restored_ids)} row(s)"
        warning = over_trigger_warning(what, tokens=tokens, trigger=trigger, threshold=threshold)
    return UndoOutcome(
        done=done,
        record_id=undo.record_id,
        rows_restored=len(undo.restored_ids),
        tokens_after=tokens,
        trigger=trigger,
        threshold=threshold,
        warning=warning,
    )


@dataclass(frozen=True)
class _Proposal:
    result: CompactionResult
    session_id: str | None
    rows: tuple[Row, ...]


class Steering:
    """Preview, accept and undo for one conversation (it shares the conversation's turn lock)."""

    def __init__(self, session: Session, budget: Budget, lock: threading.Lock) -> None:
        self.session = session
        self.budget = budget
        self._lock = lock
        self._proposal: _Proposal | None = None

    def preview(
        self, focus: str | None = None, stop: threading.Event | None = None
    ) -> CompactionResult:
        """The compaction `compact_now` would make; kept for `accept`, nothing written."""
        with self._turn():
            rows = tuple(self.session.history.rows)
            result = self.budget.engine.preview(self.session.history, focus=focus, cancel=stop)
            self._proposal = _Proposal(result, self.session.id, rows)
            return result

    def accept(
        self, result: CompactionResult, text: str | None = None, *, force: bool = False
    ) -> CompactionResult:
        """Apply the previewed `result` (its summary's model-written part replaced by `text`);
        returns what was applied. Refused when the history changed since the preview, and,
        unless `force`, when `text` would put the history over the trigger (`edit_warning`)."""
        with self._turn():
            proposal = self._proposal
            if proposal is None or proposal.result != result:
                raise NbchatError(
                    "This is not the compaction previewed last; preview it again "
                    "(preview_compaction(), or /compact) and accept that one."
                )
            self._check_unchanged(proposal)
            applied = result if text is None else with_summary_text(result, text)
            warning = self._edited_warning(result, applied)
            if warning and not force:
                raise NbchatError(
                    f"{warning} Nothing was changed. Shorten the summary, or accept anyway with "
                    "accept_compaction(result, text, force=True)."
                )
            if applied.changed:
                self.session.apply(applied)
            self._proposal = None
            return applied

    def edit_warning(self, result: CompactionResult, text: str | None) -> str:
        """Why accepting `result` with `text` needs a confirmation (the history would be over
        the compaction trigger, and bigger than without the edit), or ""."""
        if text is None or result.edit.summary_row is None or not text.strip():
            return ""  # nothing edited, or refused by `accept` with its own reason
        return self._edited_warning(result, with_summary_text(result, text))

    def _edited_warning(self, result: CompactionResult, applied: CompactionResult) -> str:
        engine = self.budget.engine
        tokens = applied.tokens_after
        if applied is result or tokens < engine.trigger or tokens <= result.tokens_after:
            return ""
        assert applied.edit.summary_row is not None  # an edit replaced the summary
        what = f"The edited summary is ~{estimate_tokens(applied.edit.summary_row):,} tokens"
        return over_trigger_warning(
            what, tokens=tokens, trigger=engine.trigger, threshold=engine.threshold
        )

    def discard(self) -> None:
        """Forget the preview (nothing was written, so there is nothing else to do)."""
        self._proposal = None

    def undo(self, *, force: bool = False, record_id: int | None = None) -> UndoOutcome:
        """Undo the latest compaction (`record_id`, when given, must be it). Over the trigger
        afterwards, nothing is done unless `force`: the outcome's `warning` says how big the
        history would be."""
        with self._turn():
            session_id = self._writable_id()
            store = self.session.store
            undo = store.plan_undo(session_id, record_id)
            outcome = self._outcome(undo)
            if outcome.warning and not force:
                return outcome
            try:
                store.undo_compaction(
                    session_id, undo.record_id, expected_active=len(self.session.history)
                )
            except LeaseLostError:
                self.session.read_only = True
                raise
            self.session.history.replace(store.load_active(session_id, problems=[]))
            self._proposal = None
            return replace(outcome, done=True)

    def _outcome(self, undo: UndoPlan) -> UndoOutcome:
        return undo_outcome(
            undo,
            self.budget.settings,
            overhead=self.budget.overhead_tokens(),
            threshold=self.budget.threshold_if_known(),
        )

    def _writable_id(self) -> str:
        """The session to undo in; refused, naming the holder, when another kernel writes it."""
        session = self.session
        if session.id is None:
            raise NbchatError("There is no session yet, so no compaction to undo.")
        if session.read_only:
            try:
                session.take_over()
            except SessionLockedError as exc:
                holder = session.store.lease_holder(session.id)
                raise SessionLockedError(held_message(session.id, holder)) from exc
        return session.id

    def _check_unchanged(self, proposal: _Proposal) -> None:
        rows = self.session.history.rows
        if proposal.session_id != self.session.id or tuple(rows) != proposal.rows:
            self._proposal = None
            raise NbchatError(
                f"The history changed since the preview ({len(proposal.rows)} rows then, "
                f"{len(rows)} now), so nothing was compacted. Preview again (/compact)."
            )

    @contextmanager
    def _turn(self) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise NbchatError(BUSY)
        try:
            yield
        finally:
            self._lock.release()


def with_summary_text(result: CompactionResult, text: str) -> CompactionResult:
    """`result` with its summary's model-written part replaced by `text` (the code-kept part
    stays); the token figures follow."""
    old = result.edit.summary_row
    if old is None:
        raise NbchatError(
            "This compaction only moves old tool output behind placeholders; it has no summary "
            "to edit. Accept it without text."
        )
    if not text.strip():
        raise NbchatError("The summary text is empty; write what the model should remember.")
    kept = split_summary(old.content)[1]
    new = Row("compacted", "\n\n".join(part for part in (text.strip(), kept) if part))
    change = estimate_tokens(new) - estimate_tokens(old)
    rows: Sequence[Row] = (new, *result.rows[1:])
    return replace(
        result,
        rows=tuple(rows),
        edit=replace(result.edit, summary_row=new),
        tokens_after=result.tokens_after + change,
    )

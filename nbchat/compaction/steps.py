"""Compaction as steps around one value: `prepare` → `Preparation` → `compact` → result.

    prepare(history, settings)    the estimate, the decision, the prune layer, the cut, the facts
    prepare_baseline(...)         the same for the original API (`compact_history`): no prune
    reuse(preparation, earlier)   the preparation served by a summary made earlier, in the
                                  background (`nbchat.conversation.prepare` keeps it); at once,
                                  with no model call, when its cut still serves
    summary_result(prep, said)    the `CompactionResult` of a preparation and its summary
    without_summary(prep, why)    the one when no summary is made (the prune layer's, if any)

Every step but one: `compact(preparation, writer)`, the one that calls the summariser, is
`nbchat.compaction.summarystep`'s, and it builds its result with `summary_result` here.

A `Preparation` holds everything a compaction decided before the summary is asked: the rows,
their estimates and the request's size; the rows after the prune layer (old tool outputs behind
placeholders, `nbchat.compaction.prune`); where the cut falls (`nbchat.compaction.cacheform`), with
the tail given the budget left beside the recorded facts (`nbchat.compaction.facts`) and the
user's latest message when the cut takes it (`nbchat.compaction.facts`); or why nothing is
summarised. The store write is the caller's (`nbchat.conversation.session`).

Pure: no I/O, no model call; must not import `nbchat.compaction.summarystep`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from nbchat.compaction.cacheform import RequestShape, Split, TailBudget, choose_split
from nbchat.compaction.facts import (
    facts_of,
    latest_instruction,
    render_facts,
    render_latest,
    strip_facts,
)
from nbchat.compaction.prompts import SMALL_CHECKPOINT_TOKENS, SummaryFormat
from nbchat.compaction.prune import (
    apply_replacements,
    find_prunable,
    key_lines_of,
    protected_start,
    render_key_lines,
)
from nbchat.compaction.result import (
    CompactionResult,
    Edit,
    SummaryUsage,
    in_units_of,
    summarised,
    unchanged,
    with_placeholders_kept,
)
from nbchat.compaction.writer import Digest
from nbchat.config import DEFAULT_SUMMARY_MAX_TOKENS, DEFAULT_TRIGGER_FACTOR
from nbchat.history import History, Row, context_tokens, estimate_tokens, to_row

__all__ = [
    "CHECKPOINT_TOKENS",
    "PRUNE_ALONE",
    "CompactionSettings",
    "Earlier",
    "HistoryLike",
    "Preparation",
    "is_settled",
    "needs_summariser",
    "prepare",
    "prepare_baseline",
    "reuse",
    "rows_and_estimates",
    "summary_result",
    "trigger_tokens",
    "without_summary",
]

HistoryLike = History | Sequence[Sequence[str]]

# Whether the prune layer may compact alone, with no summary. Off: every server nbchat talks to
# keeps a prompt cache (llama.cpp, vLLM, OpenAI), and a prune rewrites old tool outputs in the
# middle of the history, so the server reads everything after the first of them again, and the
# trigger comes back a few turns later for a summary that breaks the prefix once more. Pruning
# only when a summary is made breaks the cached prefix once per compaction (the replay of
# `bench/replay_savings.py`: 5 prune-only compactions of 7 made the prefix-cache cost higher
# than with no compaction at all). On: the cheapest compaction when no cache is kept.
PRUNE_ALONE = False
# A checkpoint's usual size under its section budgets (the code-computed facts come on top).
CHECKPOINT_TOKENS = 400
# On a small trigger the checkpoint is at most this share of it, in the small schema
# (`prompts.SMALL_RESPONSE_FORMAT`), but never under MIN_CHECKPOINT_TOKENS: with no idle time to
# prepare it in, the user waits for every token of it (~50 ms each on the embedded model).
CHECKPOINT_SHARE = 10
MIN_CHECKPOINT_TOKENS = 96
# The embedded model (`brief_cap` set) gets the small checkpoint up to this trigger (a window of
# ~5k tokens): the 1.5B writes ~10 tokens a second on two idle cores, so the full checkpoint
# (up to ~850 tokens) is not ready within a reading pause, and beside a budget this small it
# would leave the tail next to no room.
SLOW_SMALL_TRIGGER = 4_000
# The key lines (`nbchat.compaction.prune`) go beside the facts only when the rows replaced
# are at least this many times their size.
KEY_LINES_SHARE = 10
# Why nothing is summarised, when nothing is.
SETTLED = "already compacted: a summary and the recent rows"
NO_CUT = "fewer than two rows before the kept tail"
NO_SHRINK = "a summary would not shrink the history"


def trigger_tokens(threshold: int, factor: float) -> int:
    """Compaction triggers at this many tokens and aims to land under it."""
    return int(threshold * factor)


def is_settled(rows: HistoryLike, tail_messages: int) -> bool:
    """The loop guard: `[compacted, <= tail rows]` is never compacted again."""
    return 0 < len(rows) <= tail_messages + 1 and rows[0][0] == "compacted"


@dataclass(frozen=True)
class CompactionSettings:
    """What a compaction is sized and asked by (`CompactionEngine` makes one from its options):
    the budget and trigger, the rows a tail keeps at least, the system prompt's and tool
    schemas' share, the summary's reply cap, form and instruction, and whether a prune alone
    may compact."""

    threshold: int
    tail_messages: int
    overhead_tokens: int = 0
    trigger_factor: float = DEFAULT_TRIGGER_FACTOR
    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    summary_format: SummaryFormat = "json"
    summary_prompt: str | None = None
    prune_alone: bool = PRUNE_ALONE
    # A small, slow summariser (the embedded model): what it is sent as a transcript is the
    # brief transcript within this many tokens (`nbchat.compaction.prune`); None: every row,
    # in chunks that fit its window.
    brief_cap: int | None = None

    @property
    def trigger(self) -> int:
        return trigger_tokens(self.threshold, self.trigger_factor)

    @property
    def small_checkpoint(self) -> bool:
        """Whether the trigger is small enough for the small checkpoint: under ~2,000 tokens,
        or under SLOW_SMALL_TRIGGER for a small, slow summariser (`brief_cap` set)."""
        if self.brief_cap is not None and self.trigger < SLOW_SMALL_TRIGGER:
            return True
        return self.trigger // CHECKPOINT_SHARE < SMALL_CHECKPOINT_TOKENS

    @property
    def checkpoint_tokens(self) -> int:
        """The summary's reply cap: `summary_max_tokens`, or on a small trigger a tenth of it
        (at least MIN_CHECKPOINT_TOKENS): the summary is written while the user waits."""
        if not self.small_checkpoint:
            return self.summary_max_tokens
        share = max(MIN_CHECKPOINT_TOKENS, self.trigger // CHECKPOINT_SHARE)
        return min(self.summary_max_tokens, share)

    def keep_budget(self) -> TailBudget:
        """How many tokens a tail may keep when over the trigger, a checkpoint of the usual size,
        the system prompt and the tool schemas beside it (the cut then takes the facts and the
        carried message off too). The aim: the request after a compaction stands at about half
        the trigger (so at most half the threshold), so that the next compaction is many turns
        away. The fit: the result is under the trigger, which is enough to keep the user-row
        tail (`nbchat.compaction.cacheform`)."""
        beside = self.overhead_tokens + min(self.checkpoint_tokens, CHECKPOINT_TOKENS)
        return TailBudget(
            aim=max(0, self.trigger // 2 - beside), fit=max(0, self.trigger - 1 - beside)
        )


@dataclass(frozen=True)
class Earlier:
    """A summary made before of the first `covered` rows: the summariser's own text (its facts
    are made anew) and what asking for it cost."""

    text: str
    covered: int
    paid: SummaryUsage


@dataclass(frozen=True)
class Preparation:
    """One compaction worked out up to the summary (see the module docstring).

    `pruned` is `rows` after the prune layer (`replacements`: index → placeholder); the summary
    replaces `pruned[:split.start]`. `reason` says why no summary is asked ("" when one is).
    With `earlier` (`reuse`), only the rows after the ones it covers are sent, to update it."""

    settings: CompactionSettings
    rows: tuple[Row, ...]
    estimates: tuple[int, ...]
    tokens_before: int
    pruned: tuple[Row, ...]
    pruned_estimates: tuple[int, ...]
    replacements: Mapping[int, Row] = field(default_factory=lambda: MappingProxyType({}))
    split: Split | None = None
    reason: str = ""
    facts: str = ""
    carried: str = ""
    focus: str | None = None
    shape: RequestShape | None = None
    earlier: Earlier | None = None

    @property
    def beside_tokens(self) -> int:
        """What the summary row carries beside the summary: the facts and the carried message."""
        return estimate_tokens(self.facts) + (estimate_tokens(self.carried) if self.carried else 0)

    @property
    def tokens_after_pruning(self) -> int:
        """The request's size with the placeholders in (in the units of `tokens_before`)."""
        saved = sum(self.estimates) - sum(self.pruned_estimates)
        estimated = sum(self.estimates) + self.settings.overhead_tokens
        return self.tokens_before - in_units_of(
            saved, measured=self.tokens_before, estimated=estimated
        )


def rows_and_estimates(history: HistoryLike) -> tuple[tuple[Row, ...], tuple[int, ...]]:
    """The rows and their estimates: kept by a `History`, computed for a list."""
    if isinstance(history, History):
        return tuple(history.rows), tuple(history.estimate_of(i) for i in range(len(history)))
    rows = tuple(to_row(row) for row in history)
    return rows, tuple(estimate_tokens(row) for row in rows)


def prepare(
    history: HistoryLike,
    settings: CompactionSettings,
    *,
    force: bool = False,
    focus: str | None = None,
    shape: RequestShape | None = None,
    room: int = 0,
) -> Preparation:
    """The layered path: under the trigger (unless `force`) or already compacted, nothing;
    else old tool outputs behind placeholders and, unless that alone is enough (only with
    `prune_alone`), the cut for a summary (over the trigger's budgets even when forced).
    `shape`: the chat's last request, for the cache form. `room`: tokens the tail leaves free
    besides (a compaction prepared ahead leaves room for the turns until it is applied)."""
    base = _unpruned(history, settings, focus=focus, shape=shape)
    before = base.tokens_before
    if not force and before < settings.trigger:
        return replace(base, reason=f"under the trigger ({before:,} of {settings.trigger:,})")
    if not base.rows or is_settled(base.rows, settings.tail_messages):
        return replace(base, reason=SETTLED)
    pruned = _pruned(base)
    under = bool(pruned.replacements) and pruned.tokens_after_pruning < settings.trigger
    if settings.prune_alone and under and not force:
        return replace(pruned, reason=_prune_reason(pruned))  # the cheap layer was enough
    return _cut(pruned, over=True, room=room)


def prepare_baseline(history: HistoryLike, settings: CompactionSettings) -> Preparation:
    """The original API's path (`compact_history`): no prune; the cut over the trigger's
    budgets only when the history is over the trigger."""
    base = _unpruned(history, settings)
    if is_settled(base.rows, settings.tail_messages):
        return replace(base, reason=SETTLED)
    return _cut(base, over=base.tokens_before >= settings.trigger)


def _unpruned(
    history: HistoryLike,
    settings: CompactionSettings,
    *,
    focus: str | None = None,
    shape: RequestShape | None = None,
) -> Preparation:
    """The rows as they are, their estimates and the request's size (the server's count when
    it reported one), nothing decided yet."""
    rows, estimates = rows_and_estimates(history)
    return Preparation(
        settings=settings,
        rows=rows,
        estimates=estimates,
        tokens_before=context_tokens(history, settings.overhead_tokens),
        pruned=rows,
        pruned_estimates=estimates,
        focus=focus,
        shape=shape,
    )


def _pruned(preparation: Preparation) -> Preparation:
    """The cheap layer: tool outputs outside the protected recent window (the tail's rows and
    a quarter of the trigger's worth of tool outputs) behind placeholders."""
    rows, estimates = preparation.rows, preparation.estimates
    settings = preparation.settings
    start = protected_start(
        rows, estimates, keep_rows=settings.tail_messages, keep_tokens=settings.trigger // 4
    )
    replacements = find_prunable(rows, estimates, protect_from=start)
    new_estimates = [
        estimate_tokens(replacements[i]) if i in replacements else e
        for i, e in enumerate(estimates)
    ]
    return replace(
        preparation,
        pruned=tuple(apply_replacements(rows, replacements)),
        pruned_estimates=tuple(new_estimates),
        replacements=MappingProxyType(replacements),
    )


def _prune_reason(preparation: Preparation) -> str:
    return f"{len(preparation.replacements)} old tool output(s) archived behind placeholders"


def _without(preparation: Preparation, why: str) -> str:
    """Why no summary is made; with the prune layer's work when it did some."""
    if not preparation.replacements:
        return why
    return f"{_prune_reason(preparation)}; no summary: {why}"


def _cut(preparation: Preparation, *, over: bool, room: int = 0) -> Preparation:
    """Where to cut, with the facts and the carried message of that cut; checked before any
    tokens are spent: even a summary of nothing must save something."""
    split = _split(preparation, over=over, room=room)
    if split is None:
        return replace(preparation, reason=_without(preparation, NO_CUT))
    served = _at(preparation, split)
    estimates = preparation.pruned_estimates
    if served.beside_tokens + sum(estimates[split.start :]) >= sum(estimates):
        return replace(served, reason=_without(preparation, NO_SHRINK))
    return served


def _at(preparation: Preparation, split: Split) -> Preparation:
    """`preparation` cut at `split`: the facts of the original rows the summary replaces (the
    small checkpoint's on a small trigger) with their key lines (not on a small trigger, nor
    for a short history), and the user's latest message when the cut takes it."""
    small = preparation.settings.small_checkpoint
    replaced = preparation.rows[: split.start]
    keys = "" if small else render_key_lines(key_lines_of(replaced))
    if estimate_tokens(keys) * KEY_LINES_SHARE > sum(preparation.estimates[: split.start]):
        keys = ""  # a short history: its summary says as much, and they would not pay for it
    blocks = (render_facts(facts_of(replaced), small=small), keys)
    return replace(
        preparation,
        split=split,
        reason="",
        facts="\n\n".join(block for block in blocks if block),
        carried=render_latest(latest_instruction(preparation.pruned, split.start)),
    )


def _split(preparation: Preparation, *, over: bool, room: int = 0) -> Split | None:
    """Where to cut the pruned rows. The summary row also carries the recorded facts and, when
    the cut takes the user's latest message, that message whole, so over the trigger the tail
    gets the budget that is left beside them, less `room`."""
    settings, rows = preparation.settings, preparation.pruned
    estimates = preparation.pruned_estimates
    kept = settings.keep_budget()
    budget = TailBudget(aim=max(0, kept.aim - room), fit=max(0, kept.fit - room))
    tail = settings.tail_messages
    split = choose_split(rows, estimates, tail_messages=tail, budget=budget, over_trigger=over)
    if split is None or not over:
        return split
    beside = _at(preparation, split).beside_tokens
    budget = TailBudget(aim=max(0, budget.aim - beside), fit=max(0, budget.fit - beside))
    narrower = choose_split(rows, estimates, tail_messages=tail, budget=budget, over_trigger=over)
    return narrower or split


def reuse(
    preparation: Preparation,
    earlier: CompactionResult,
    *,
    force: bool = False,
    prefer_made: bool | None = None,
) -> Preparation | None:
    """`preparation` served by `earlier`: a forced compaction, made before, of this history's
    first `earlier.edit.rows_summarised` rows (the caller checks they are unchanged).

    When the summary would now replace exactly those rows, it is rebuilt with no model call;
    when it would replace more, only the rows added since are sent, to update it. With
    `prefer_made` (by default when unforced: the user is waiting at the trigger), the cut
    `earlier` made wins over a deeper one when it lands under the trigger. None when `earlier`
    cannot serve: no summary in it, nothing to summarise now, or a cut before what it covers
    (unless a deeper cut at a user row, see `_serving`)."""
    covered = earlier.edit.rows_summarised
    split = _serving(preparation, covered)
    if earlier.edit.summary_row is None or split is None:
        return None
    made = Earlier(strip_facts(earlier.summary), covered, earlier.usage)
    from_earlier = replace(preparation, earlier=made)
    if split.start > covered and (not force if prefer_made is None else prefer_made):
        at_once = _at(from_earlier, Split(covered, split.rule))
        result = summary_result(at_once, Digest(text=made.text))
        if result.changed and result.tokens_after < preparation.settings.trigger:
            return at_once
    return _at(from_earlier, split)


def needs_summariser(preparation: Preparation) -> bool:
    """Whether `compact(preparation)` would ask the summariser (a summary to write or update)."""
    if preparation.reason or preparation.split is None:
        return False
    earlier = preparation.earlier
    return earlier is None or preparation.split.start != earlier.covered


def _serving(preparation: Preparation, covered: int) -> Split | None:
    """The cut a summary of `rows[:covered]` can serve, or None. A cut before what it covers is
    served by it only when the user-row tail is kept and `covered` starts a turn: a deeper cut
    at a user row is what the split would make itself when that fits its aim
    (`nbchat.compaction.cacheform`)."""
    split, rows = preparation.split, preparation.rows
    if split is None or split.start >= covered:
        return split
    deeper_at_user = covered < len(rows) and rows[covered].role == "user"
    return Split(covered, "user") if split.rule == "user" and deeper_at_user else None


def without_summary(preparation: Preparation, reason: str) -> CompactionResult:
    """No summary: the prune layer's placeholders when it made any, else the rows as they were."""
    if not preparation.replacements:
        return unchanged(preparation.rows, preparation.tokens_before, reason)
    saved = sum(preparation.estimates) - sum(preparation.pruned_estimates)
    return CompactionResult(
        rows=preparation.pruned,
        layer="prune",
        reason=reason,
        tokens_before=preparation.tokens_before,
        tokens_after=preparation.tokens_after_pruning,
        edit=Edit(replacements=preparation.replacements, pruned_tokens=saved),
    )


def summary_result(preparation: Preparation, said: Digest) -> CompactionResult:
    """The compaction with the summary `said`: `[compacted, *tail]` with the placeholders that
    stay in the tail, or, when that would not shrink the history, none."""
    split = preparation.split
    assert split is not None  # `compact` and `reuse` ask only for a cut preparation
    blocks = (said.text, preparation.facts, preparation.carried)
    row = Row("compacted", "\n\n".join(block for block in blocks if block))
    overhead = preparation.settings.overhead_tokens
    result = summarised(
        preparation.pruned,
        preparation.pruned_estimates,
        row,
        start=split.start,
        rule=split.rule,
        measured=preparation.tokens_after_pruning,
        estimated=sum(preparation.pruned_estimates) + overhead,
    )
    paid = preparation.earlier.paid if preparation.earlier else SummaryUsage()
    usage = paid.plus(said.usage)
    if not result.changed:
        result = without_summary(preparation, _without(preparation, result.reason))
        return replace(result, usage=usage, warnings=said.warnings)
    result = with_placeholders_kept(
        result,
        preparation.replacements,
        estimates=preparation.estimates,
        pruned_estimates=preparation.pruned_estimates,
    )
    return replace(
        result,
        layer="chunked" if said.chunks > 1 else "summary",
        tokens_before=preparation.tokens_before,
        usage=usage,
        warnings=said.warnings,
    )

"""Where a compaction cuts a history: the rows to summarise and the tail kept verbatim.

Two rules, tried in order:

1. The baseline's user-row rule: the tail starts `tail_messages` rows from the end and moves
   back to the nearest `user` row, so a tool result is never separated from its call. Under
   the trigger its tail is kept exactly. Over the trigger a tail has two budgets (`TailBudget`):
   the `aim` (the request after a compaction at about half the trigger, so the next one is
   many turns away) and the `fit` (the result just under the trigger). A deeper cut is made
   only at a later `user` row, the first whose tail fits the aim; else the user-row tail is
   kept when it fits; else the first later user row that fits.
2. Only when no user row at or after rule 1's leaves the result under the trigger (or rule 1
   compacts nothing: a single long turn), a safe cut inside the turn: the earliest cut point
   whose tail fits the aim, else the last cut point. A cut point is a `user`, `assistant`,
   `assistant_full` or `system` row that is not inside a call's block of results, so the tail
   never starts on a `tool` or `analysis` row nor between an `assistant_full` and its results.

Fewer than two rows to summarise (a leading `compacted` row does not count) is no cut at all.
Both rules are fixed points: cutting `[compacted, *tail]` again finds nothing to summarise, so
compacting twice in a row changes nothing the second time.

Pure: indexes in, indexes out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

from nbchat.history import UNSENT_ROLES, Row

__all__ = [
    "Split",
    "TailBudget",
    "choose_split",
    "compactable_before",
    "find_user_tail",
    "is_cut_point",
]

CUT_ROLES = frozenset({"user", "assistant", "assistant_full", "system"})
MIN_COMPACTABLE = 2


@dataclass(frozen=True)
class Split:
    """Summarise `rows[:start]`, keep `rows[start:]`; `rule` says which rule found it."""

    start: int
    rule: Literal["user", "turn"]


@dataclass(frozen=True)
class TailBudget:
    """How many tokens a kept tail may hold over the trigger: `aim` for a deeper cut at a user
    row or inside a turn, `fit` for the user-row tail to be kept (the result under the
    trigger)."""

    aim: int
    fit: int


def find_user_tail(rows: Sequence[Row], tail_messages: int) -> int:
    """The baseline rule: `tail_messages` from the end, back to the nearest user row (0: none)."""
    start = len(rows) - tail_messages
    while start > 0 and rows[start].role != "user":
        start -= 1
    return max(start, 0)


def compactable_before(rows: Sequence[Row], end: int) -> int:
    """How many rows before `end` a summary would replace, not counting earlier summaries."""
    return sum(1 for row in rows[:end] if row.role != "compacted")


def is_cut_point(rows: Sequence[Row], index: int) -> bool:
    """May a tail start at `rows[index]`? Never on a tool result, reasoning or a summary, and
    never on a notice that sits between a call and its results."""
    if rows[index].role not in CUT_ROLES:
        return False
    for row in rows[index:]:
        if row.role not in UNSENT_ROLES:  # these sit inside a call's block without ending it
            return row.role != "tool"
    return True


def choose_split(
    rows: Sequence[Row],
    estimates: Sequence[int],
    *,
    tail_messages: int,
    budget: TailBudget,
    over_trigger: bool,
) -> Split | None:
    """Where to cut, or None when nothing should be compacted.

    Under the trigger only the user-row rule applies (the baseline); over it, `budget` says how
    much a tail may keep (see the module docstring for the order the rules are tried in).
    """
    user = find_user_tail(rows, tail_messages)
    works = user > 0 and compactable_before(rows, user) >= MIN_COMPACTABLE
    if not over_trigger:
        return Split(user, "user") if works else None
    suffix = _suffix_sums(estimates)
    starts = [index for index in range(max(user, 1), len(rows)) if rows[index].role == "user"]
    for allowance in (budget.aim, budget.fit):
        fits = next((index for index in starts if suffix[index] <= allowance), None)
        if fits is not None:
            # The earliest user row whose tail fits: with too little before it, nothing needs
            # compacting (and a cut inside a turn is only for a tail that fits nowhere else).
            enough = compactable_before(rows, fits) >= MIN_COMPACTABLE
            return Split(fits, "user") if enough else None
    start = _turn_cut(rows, suffix, budget.aim)
    if start is None or compactable_before(rows, start) < MIN_COMPACTABLE:
        return None
    return Split(start, "turn")


def _turn_cut(rows: Sequence[Row], suffix: Sequence[int], budget: int) -> int | None:
    """The earliest cut point whose tail fits `budget`, else the last cut point."""
    cuts = [index for index in range(1, len(rows)) if is_cut_point(rows, index)]
    fitting = (index for index in cuts if suffix[index] <= budget)
    return next(fitting, cuts[-1] if cuts else None)


def _suffix_sums(estimates: Sequence[int]) -> list[int]:
    """suffix[i] = sum(estimates[i:]), with suffix[len] = 0."""
    totals = list(accumulate(reversed(estimates), initial=0))
    return totals[::-1]

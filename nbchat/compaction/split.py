"""Where a compaction cuts a history: the rows to summarise and the tail kept verbatim.

Two rules, tried in order:

1. The baseline's user-row rule: the tail starts `tail_messages` rows from the end and moves
   back to the nearest `user` row, so a tool result is never separated from its call. When it
   works its tail is kept exactly.
2. When the history is over the trigger and rule 1 compacts nothing (a single long turn) or
   keeps a tail too big for the budget, a safe cut inside the turn: the earliest cut point whose
   tail fits the budget, else the last cut point. A cut point is a `user`, `assistant`,
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

from nbchat.history import Row

__all__ = ["Split", "choose_split", "compactable_before", "find_user_tail", "is_cut_point"]

CUT_ROLES = frozenset({"user", "assistant", "assistant_full", "system"})
# Rows that sit inside a call's block of results without ending it (see history.repair_rows).
UNSENT_ROLES = frozenset({"analysis", "system", "compacted"})
MIN_COMPACTABLE = 2


@dataclass(frozen=True)
class Split:
    """Summarise `rows[:start]`, keep `rows[start:]`; `rule` says which rule found it."""

    start: int
    rule: Literal["user", "turn"]


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
        if row.role not in UNSENT_ROLES:
            return row.role != "tool"
    return True


def choose_split(
    rows: Sequence[Row],
    estimates: Sequence[int],
    *,
    tail_messages: int,
    budget: int,
    over_trigger: bool,
) -> Split | None:
    """Where to cut, or None when nothing should be compacted.

    `budget` is how many tokens the kept tail may hold when the history is over the trigger;
    under the trigger only the user-row rule applies (the baseline).
    """
    user = find_user_tail(rows, tail_messages)
    works = user > 0 and compactable_before(rows, user) >= MIN_COMPACTABLE
    suffix = _suffix_sums(estimates)
    if works and (not over_trigger or suffix[user] <= budget):
        return Split(user, "user")
    if not over_trigger:
        return None
    start = _turn_cut(rows, suffix, budget)
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

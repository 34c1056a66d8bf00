"""`EngineSizing`: the numbers a compaction is sized by: trigger, overhead, checkpoint, tail.

The first layer of `CompactionEngine` (`nbchat.compaction.engine`), read by every other: the
trigger (`threshold * trigger_factor`), the system prompt's and tool schemas' share, the
summary's reply cap (smaller on a small trigger: the small checkpoint), and how much a kept tail
may hold: aiming at a request after a compaction at about half the trigger, and fitting under
the trigger (`nbchat.compaction.split.TailBudget`). Pure: no model
call, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nbchat.compaction.prompts import SMALL_CHECKPOINT_TOKENS
from nbchat.compaction.split import TailBudget
from nbchat.history import (
    History,
    Row,
    context_tokens,
    estimate_tokens,
    request_overhead_tokens,
    to_row,
)

__all__ = [
    "CHECKPOINT_SHARE",
    "CHECKPOINT_TOKENS",
    "MIN_CHECKPOINT_TOKENS",
    "EngineSizing",
    "HistoryLike",
    "rows_and_estimates",
]

# A checkpoint's usual size under its section budgets (the code-computed facts come on top).
CHECKPOINT_TOKENS = 400
# On a small trigger the checkpoint is at most this share of it, in the small schema
# (`prompts.SMALL_RESPONSE_FORMAT`), but never under MIN_CHECKPOINT_TOKENS: with no idle time to
# prepare it in, the user waits for every token of it (~50 ms each on the embedded model).
CHECKPOINT_SHARE = 10
MIN_CHECKPOINT_TOKENS = 96

HistoryLike = History | Sequence[Sequence[str]]


class EngineSizing:
    """The engine's sizes, from its settings (set by `CompactionEngine.__init__`)."""

    threshold: int
    tail_messages: int
    trigger_factor: float
    system_prompt: str
    tool_schemas: tuple[Mapping[str, Any], ...]
    summary_max_tokens: int
    _overhead: tuple[str, tuple[Mapping[str, Any], ...], int] | None

    @property
    def overhead_tokens(self) -> int:
        """The system prompt's and the tool schemas' estimate, counted again only when changed."""
        cached = self._overhead
        if (
            cached is None
            or cached[0] is not self.system_prompt
            or cached[1] is not self.tool_schemas
        ):
            tokens = request_overhead_tokens(self.system_prompt, self.tool_schemas)
            self._overhead = cached = (self.system_prompt, self.tool_schemas, tokens)
        return cached[2]

    @property
    def trigger(self) -> int:
        """Compaction triggers at this many tokens and aims to land under it."""
        return int(self.threshold * self.trigger_factor)

    @property
    def small_checkpoint(self) -> bool:
        """Whether the trigger is small enough (under ~2,000 tokens) for the small checkpoint."""
        return self.trigger // CHECKPOINT_SHARE < SMALL_CHECKPOINT_TOKENS

    @property
    def checkpoint_tokens(self) -> int:
        """The summary's reply cap: `summary_max_tokens`, or on a small trigger a tenth of it
        (at least MIN_CHECKPOINT_TOKENS): the summary is written while the user waits."""
        if not self.small_checkpoint:
            return self.summary_max_tokens
        share = max(MIN_CHECKPOINT_TOKENS, self.trigger // CHECKPOINT_SHARE)
        return min(self.summary_max_tokens, share)

    def total_tokens(self, history: HistoryLike) -> int:
        """Rows only, the baseline rule; O(1) on a `History`, a rescan on a list."""
        if isinstance(history, History):
            return history.total_tokens
        return sum(estimate_tokens(row) for row in history)

    def context_tokens(self, history: HistoryLike) -> int:
        """The size of the next request (`nbchat.history.context_tokens` with this engine's
        system prompt and tool schemas)."""
        return context_tokens(history, self.overhead_tokens)

    def _is_settled(self, rows: HistoryLike) -> bool:
        """The loop guard: `[compacted, <= tail rows]` is never compacted again."""
        return 0 < len(rows) <= self.tail_messages + 1 and rows[0][0] == "compacted"

    def _keep_budget(self) -> TailBudget:
        """How many tokens a tail may keep when over the trigger, a checkpoint of the usual size,
        the system prompt and the tool schemas beside it (`_split` then takes the facts and the
        carried message off too). The aim: the request after a compaction stands at about half
        the trigger (so at most half the threshold), so that the next compaction is many turns
        away. The fit: the result is under the trigger, which is enough to keep the user-row
        tail (`nbchat.compaction.split`)."""
        beside = self.overhead_tokens + min(self.checkpoint_tokens, CHECKPOINT_TOKENS)
        return TailBudget(
            aim=max(0, self.trigger // 2 - beside), fit=max(0, self.trigger - 1 - beside)
        )


def rows_and_estimates(history: HistoryLike) -> tuple[list[Row], list[int]]:
    if isinstance(history, History):
        return history.rows, [history.estimate_of(i) for i in range(len(history))]
    rows = [to_row(row) for row in history]
    return rows, [estimate_tokens(row) for row in rows]

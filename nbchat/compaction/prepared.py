"""`PreparedCompaction`: a compaction made from a checkpoint prepared earlier in the background.

The third layer of `CompactionEngine` (`nbchat.compaction.engine`): `compact_prepared` does what
`compact` would do now, from a forced compaction prepared while the user read
(`nbchat.conversation.prepare`). When the summary would replace exactly the rows it covers, it
is rebuilt at once with no model call; when it would replace more, only the rows added since
are sent, as an update of the prepared summary (`nbchat.compaction.reuse`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from nbchat.compaction.layers import LayeredCompaction
from nbchat.compaction.prompts import to_blocks
from nbchat.compaction.result import CompactionResult
from nbchat.compaction.reuse import (
    model_text,
    summary_row_for,
    with_kept_placeholders,
    with_prepared_cost,
)
from nbchat.compaction.sizing import HistoryLike, rows_and_estimates
from nbchat.compaction.split import Split
from nbchat.compaction.writer import Digest
from nbchat.history import Row

__all__ = ["PreparedCompaction"]


class PreparedCompaction(LayeredCompaction):
    """`compact_prepared` and its helpers, on top of the two layers."""

    def compact_prepared(
        self,
        history: HistoryLike,
        prepared: CompactionResult,
        *,
        force: bool = False,
        cancel: threading.Event | None = None,
    ) -> CompactionResult | None:
        """`compact(history)` reusing `prepared`: a forced compaction, made earlier, of this
        history's first `prepared.rows_summarised` rows (the caller checks they are unchanged).

        When the summary would now replace exactly those rows, it is rebuilt at once, with no
        model call; when it would replace more, only the rows added since are sent, to update
        the prepared summary. None when `prepared` cannot serve (unforced: under the trigger,
        or the prune layer is enough; or the cut now falls before what it covers, unless that
        is a deeper cut at a user row, see `_serving`): compact as usual then.
        """
        started = time.monotonic()
        rows, estimates = rows_and_estimates(history)
        before = self.context_tokens(history)
        under = not force and before < self.trigger
        if under or prepared.summary_row is None or self._is_settled(rows):
            return None
        pruned, pruned_estimates = self._prune(rows, estimates, before)
        split = self._split(list(pruned.rows), pruned_estimates, original=rows, over=True)
        covered = prepared.rows_summarised
        split = _serving(rows, split, covered)
        if self._prune_is_enough(pruned, force=force) or split is None:
            return None
        if split.start > covered and not force:
            # At the trigger the user is waiting: the prepared cut, if it lands under the
            # trigger, beats a deeper one that needs a model call now. (Forced, from an idle
            # moment or the button, the deeper cut is worth the call.)
            at_once = self._reused(
                rows, estimates, pruned, pruned_estimates, Split(covered, split.rule), prepared
            )
            if at_once is not None and at_once.tokens_after < self.trigger:
                return replace(at_once, duration=time.monotonic() - started)
        said = self._update_prepared(rows, prepared, split.start, cancel)
        if said.cancelled:
            return self._with_usage(CompactionResult.unchanged(rows, before, "cancelled"), said)
        result = self._reused(rows, estimates, pruned, pruned_estimates, split, prepared, said=said)
        return None if result is None else replace(result, duration=time.monotonic() - started)

    def _reused(
        self,
        rows: list[Row],
        estimates: list[int],
        pruned: CompactionResult,
        pruned_estimates: list[int],
        split: Split,
        prepared: CompactionResult,
        *,
        said: Digest | None = None,
    ) -> CompactionResult | None:
        """The compaction at `split` with the prepared summary (updated: `said`), or None when it
        would not shrink the history."""
        said = said or Digest(text=model_text(prepared))
        row = summary_row_for(
            said.text, rows, list(pruned.rows), split, small=self.small_checkpoint
        )
        result = CompactionResult.summarised(
            pruned.rows,
            pruned_estimates,
            row,
            start=split.start,
            rule=split.rule,
            measured=pruned.tokens_after,
            estimated=sum(pruned_estimates) + self.overhead_tokens,
        )
        if not result.changed:
            return None
        result = with_kept_placeholders(
            result, pruned, estimates=estimates, pruned_estimates=pruned_estimates
        )
        return with_prepared_cost(self._with_usage(result, said), prepared)

    def _update_prepared(
        self,
        rows: list[Row],
        prepared: CompactionResult,
        start: int,
        cancel: threading.Event | None,
    ) -> Digest:
        """The prepared summary's text, updated with `rows[covered:start]` when there are any."""
        said = Digest(text=model_text(prepared))
        if start == prepared.rows_summarised:
            return said
        return self._writer().write(
            to_blocks(rows[prepared.rows_summarised : start]),
            previous=said.text,
            max_tokens=self.summary_max_tokens,
            fmt=self.summary_format,
            instruction=self.summary_prompt,
            cancel=cancel,
        )


def _serving(rows: list[Row], split: Split | None, covered: int) -> Split | None:
    """The cut a summary of `rows[:covered]` can serve, or None. A cut before what it covers is
    served by it only when the user-row tail is kept and `covered` starts a turn: a deeper cut
    at a user row is what the split would make itself when that fits its aim
    (`nbchat.compaction.split`)."""
    if split is None or split.start >= covered:
        return split
    deeper_at_user = covered < len(rows) and rows[covered].role == "user"
    return Split(covered, "user") if split.rule == "user" and deeper_at_user else None

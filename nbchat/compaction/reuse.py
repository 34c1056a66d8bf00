"""Reusing a summary made earlier: the pieces `CompactionEngine.compact_prepared` builds from.

A background preparer (`nbchat.conversation.prepare`) compacts a session's first rows ahead of
time, with `force=True`, and keeps the `CompactionResult` without writing it. When the budget
check later reaches the trigger, the engine rebuilds what `compact` would produce now from that
summary's model-written text: the code-computed facts and the carried latest message are
computed again from the rows as they are now, the kept tail keeps its placeholders.

Pure: rows and results in, rows and results out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from nbchat.compaction.facts import facts_of, render_facts, strip_facts
from nbchat.compaction.latest import latest_instruction, render_latest
from nbchat.compaction.result import CompactionResult
from nbchat.compaction.split import Split
from nbchat.history import Row

__all__ = ["model_text", "summary_row_for", "with_kept_placeholders", "with_prepared_cost"]


def model_text(prepared: CompactionResult) -> str:
    """The summariser's own text in a prepared result (its facts and carried message left out)."""
    return strip_facts(prepared.summary)


def summary_row_for(
    text: str, original: Sequence[Row], pruned: Sequence[Row], split: Split, *, small: bool
) -> Row:
    """The `compacted` row `compact` writes for `text`: the summary, the facts of the original
    rows it replaces (`small`: the small checkpoint's), and the user's latest message when the
    cut takes it."""
    facts = render_facts(facts_of(original[: split.start]), small=small)
    carried = render_latest(latest_instruction(pruned, split.start))
    return Row("compacted", "\n\n".join(block for block in (text, facts, carried) if block))


def with_kept_placeholders(
    result: CompactionResult,
    pruned: CompactionResult,
    *,
    estimates: Sequence[int],
    pruned_estimates: Sequence[int],
) -> CompactionResult:
    """`result` (a summary over the pruned rows) with the prune layer's placeholders that stay
    in the kept tail, as `compact` records them."""
    first_kept = len(estimates) - result.keep_tail
    replacements: Mapping[int, Row] = pruned.replacements
    kept = {i: row for i, row in replacements.items() if i >= first_kept}
    return replace(
        result,
        tokens_before=pruned.tokens_before,
        replacements=MappingProxyType(kept),
        pruned_tokens=sum(estimates[i] - pruned_estimates[i] for i in kept),
    )


def with_prepared_cost(result: CompactionResult, prepared: CompactionResult) -> CompactionResult:
    """`result` counting the summariser's work spent on `prepared` too: the summary cost that,
    even if it was paid ahead of time."""
    return replace(
        result,
        model=result.model or prepared.model,
        prompt_tokens=prepared.prompt_tokens + result.prompt_tokens,
        completion_tokens=prepared.completion_tokens + result.completion_tokens,
        requests=prepared.requests + result.requests,
    )

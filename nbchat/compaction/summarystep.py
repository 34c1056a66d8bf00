"""The one compaction step that calls the summariser: `compact(preparation, writer)` → result.

`compact` takes a `Preparation` (`nbchat.compaction.steps`) and, only when it holds a cut, asks
for the summary of the rows before it: a summary made earlier (`steps.reuse`), as it is when it
covers them all, else updated with the rows added since; else in the cache form when it applies
(the chat's own prefix plus one instruction, `nbchat.compaction.cacheform`), with what does not
fit the window as a transcript update; else as a transcript, chunked when the input exceeds the
summariser's window (`nbchat.compaction.writer`). The `CompactionResult` is built by
`steps.summary_result`. The store write is the caller's (`nbchat.conversation.session`).

Its only I/O is through the writer it is handed; it builds no client and never writes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from nbchat.compaction.facts import previous_summary
from nbchat.compaction.prompts import to_blocks
from nbchat.compaction.prune import brief_blocks
from nbchat.compaction.result import CompactionResult, unchanged
from nbchat.compaction.steps import (
    CompactionSettings,
    Preparation,
    summary_result,
    without_summary,
)
from nbchat.compaction.writer import Digest, SummaryWriter, joined
from nbchat.history import Row

__all__ = ["compact"]


def compact(
    preparation: Preparation, writer: SummaryWriter, *, cancel: threading.Event | None = None
) -> CompactionResult:
    """The compaction `preparation` describes: the one step that calls the summariser (through
    `writer`), and only when a summary is to be made. A set `cancel` (checked between chunks,
    and closing the summariser's stream) gives an unchanged result that says so. Raises
    `CompactionError` when the summariser fails; nothing is changed then."""
    if preparation.reason or preparation.split is None:
        return without_summary(preparation, preparation.reason)
    said = _ask(preparation, writer, cancel)
    if said.cancelled:
        result = unchanged(preparation.rows, preparation.tokens_before, "cancelled")
        return replace(result, usage=said.usage, cancelled=True, warnings=said.warnings)
    return summary_result(preparation, said)


def _ask(preparation: Preparation, writer: SummaryWriter, cancel: threading.Event | None) -> Digest:
    """The summary of `rows[:split.start]`: an update of the earlier summary with the rows
    after it; else in the cache form when it applies (the rows exactly as the chat sent them),
    with what does not fit the window as a transcript update; else as a transcript (chunked
    when needed)."""
    settings, rows, earlier = preparation.settings, preparation.rows, preparation.earlier
    assert preparation.split is not None
    start = preparation.split.start
    if earlier is not None:
        if start == earlier.covered:
            return Digest(text=earlier.text)
        return writer.write(
            _transcript(settings, rows[earlier.covered : start]),
            previous=earlier.text,
            max_tokens=settings.summary_max_tokens,
            fmt=settings.summary_format,
            instruction=settings.summary_prompt,
            cancel=cancel,
            brief=settings.brief_cap is not None,
        )
    end, said = _ask_cached(preparation, writer, cancel)
    if end == start or said.cancelled:
        return said
    rest = writer.write(
        _transcript(settings, rows[end:start]),
        previous=said.text or previous_summary(preparation.pruned[:start]),
        max_tokens=settings.summary_max_tokens,
        fmt=settings.summary_format,
        instruction=settings.summary_prompt,
        focus=preparation.focus,
        cancel=cancel,
        brief=settings.brief_cap is not None,
    )
    return joined(said, rest)


def _transcript(settings: CompactionSettings, rows: Sequence[Row]) -> list[str]:
    """The rows as the summariser reads them: the brief transcript within `brief_cap`, else
    every row (`to_blocks`, chunked by the writer)."""
    if settings.brief_cap is None:
        return to_blocks(rows)
    return brief_blocks(rows, settings.brief_cap)


def _ask_cached(
    preparation: Preparation, writer: SummaryWriter, cancel: threading.Event | None
) -> tuple[int, Digest]:
    """How many rows went in the cache form (0: none) and what was said for them: only for the
    JSON checkpoint, with the writer's own summariser, when the chat's last request is known."""
    settings, shape, split = preparation.settings, preparation.shape, preparation.split
    if settings.summary_format != "json" or not writer.sends_prefix or shape is None:
        return 0, Digest()
    assert split is not None
    return writer.write_cached(
        preparation.rows[: split.start],
        shape,
        threshold=settings.threshold,
        reply_cap=settings.checkpoint_tokens,
        small=settings.small_checkpoint,
        instruction=settings.summary_prompt,
        focus=preparation.focus,
        cancel=cancel,
    )

"""The values at compaction's edges: what a summariser is asked and gives back (the `Summariser`
seam) and what a compaction did (`CompactionResult`).

The summariser seam: `Summariser` is the one-method protocol the engine talks to; `OpenAISummariser`
(`nbchat.compaction.modelsummariser`) is the real one, tests and scripts pass their own. Only the
engine's own `OpenAISummariser` is asked the extras a server can do (its window, the cache form
with the chat's tool schemas; `nbchat.compaction.writer`): a summariser handed in is asked
transcripts, in chunks that fit `summariser_context`; `SummaryReply` is what it gives back.

`CompactionResult`: what one compaction did, as a value, and how the steps build one. A result is
the new active rows, the sizes before and after, which layer did the work and why, and two small
values: the `Edit` the store applies (placeholders at their positions, then one summary row over the
rows it replaces) and the `SummaryUsage` of the summariser (model, tokens, requests, the prompt
cache, how it was asked). The store write itself belongs to the caller
(`nbchat.conversation.session.apply_compaction`).

Pure: values, a protocol and the functions that build the values; no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, Protocol

from nbchat.history import Message, Row, estimate_tokens

__all__ = [
    "CompactionResult",
    "Edit",
    "Layer",
    "NO_EDIT",
    "Summariser",
    "SummaryReply",
    "SummaryUsage",
    "in_units_of",
    "summarised",
    "unchanged",
    "with_placeholders_kept",
]


@dataclass(frozen=True)
class SummaryReply:
    """One summariser answer: its text, usage, and why it ended ("stop", "length", "stopped").

    `cached_tokens`: of `prompt_tokens`, how many the server served from its prompt cache (None:
    it did not say)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    cached_tokens: int | None = None


class Summariser(Protocol):
    """Anything that answers one summary request; raises `CompactionError` when it cannot."""

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply: ...


Layer = Literal["none", "prune", "summary", "chunked"]


@dataclass(frozen=True)
class SummaryUsage:
    """The summariser's side of a compaction: who answered, what it cost, how it was asked.

    `cached_tokens`: of `prompt_tokens`, how many the server served from its prompt cache (None:
    it did not say). `form`: "cache" (continuing the chat's request), "transcript", or both
    joined with "+" ("" when nothing was asked)."""

    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    cached_tokens: int | None = None
    form: str = ""

    @property
    def computed_tokens(self) -> int | None:
        """Prompt tokens the server had to compute (not served from its cache); None when it
        did not report its cache."""
        if self.cached_tokens is None:
            return None
        return max(0, self.prompt_tokens - self.cached_tokens)

    def plus(self, other: SummaryUsage) -> SummaryUsage:
        """Both counted: the tokens and requests added, the later one's model when it asked
        anything, the forms joined ("cache+transcript")."""
        cached = [c for c in (self.cached_tokens, other.cached_tokens) if c is not None]
        forms = dict.fromkeys(f for usage in (self, other) for f in usage.form.split("+") if f)
        return SummaryUsage(
            model=other.model or self.model,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            requests=self.requests + other.requests,
            cached_tokens=sum(cached) if cached else None,
            form="+".join(forms),
        )


@dataclass(frozen=True)
class Edit:
    """What the store applies, in this order: `replacements` (index in the input history →
    the placeholder put there, the prune layer), then `summary_row` in place of the first
    `rows_summarised` rows, the last `keep_tail` kept (the summary layer).

    `pruned_tokens`: what the kept placeholders saved (len/3), for the prune layer's record."""

    replacements: Mapping[int, Row] = field(default_factory=lambda: MappingProxyType({}))
    pruned_tokens: int = 0
    summary_row: Row | None = None
    rows_summarised: int = 0
    keep_tail: int = 0

    @property
    def rows_pruned(self) -> int:
        return len(self.replacements)


NO_EDIT = Edit()


@dataclass(frozen=True)
class CompactionResult:
    """What one compaction did (or why it did nothing), and what the store needs to apply it.

    Token figures count the whole request: rows + system prompt + tool schemas, or the
    server's report. `changed` is `layer != "none"`."""

    rows: tuple[Row, ...]
    layer: Layer
    reason: str
    tokens_before: int
    tokens_after: int
    edit: Edit = NO_EDIT
    usage: SummaryUsage = SummaryUsage()
    duration: float = 0.0
    cancelled: bool = False
    warnings: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.layer != "none"

    @property
    def summary(self) -> str:
        """The summary row's text ("" when no summary was made)."""
        row = self.edit.summary_row
        return row.content if row is not None else ""


def unchanged(rows: Sequence[Row], tokens: int, reason: str) -> CompactionResult:
    """A no-op: the rows as they were, and why nothing was done."""
    return CompactionResult(
        rows=tuple(rows), layer="none", reason=reason, tokens_before=tokens, tokens_after=tokens
    )


def summarised(
    rows: Sequence[Row],
    estimates: Sequence[int],
    summary_row: Row,
    *,
    start: int,
    rule: str,
    measured: int,
    estimated: int | None = None,
) -> CompactionResult:
    """`[summary_row, *rows[start:]]`, or a no-op when that would not shrink the rows.
    `estimated`: the estimate of the request `measured` counts (see `in_units_of`)."""
    rows_tokens = sum(estimates)
    after = estimate_tokens(summary_row) + sum(estimates[start:])
    if after >= rows_tokens:
        return unchanged(rows, measured, "the summary would not shrink it")
    saved = in_units_of(rows_tokens - after, measured=measured, estimated=estimated)
    edit = Edit(summary_row=summary_row, rows_summarised=start, keep_tail=len(rows) - start)
    return CompactionResult(
        rows=(summary_row, *rows[start:]),
        layer="summary",
        reason=f"{start} rows summarised ({rule} split)",
        tokens_before=measured,
        tokens_after=measured - saved,
        edit=edit,
    )


def with_placeholders_kept(
    result: CompactionResult,
    replacements: Mapping[int, Row],
    *,
    estimates: Sequence[int],
    pruned_estimates: Sequence[int],
) -> CompactionResult:
    """`result` (a summary over the pruned rows) with the prune layer's placeholders that stay
    in the kept tail: the ones before it went into the summary with the rows they stood for."""
    first_kept = len(estimates) - result.edit.keep_tail
    kept = {i: row for i, row in replacements.items() if i >= first_kept}
    edit = replace(
        result.edit,
        replacements=MappingProxyType(kept),
        pruned_tokens=sum(estimates[i] - pruned_estimates[i] for i in kept),
    )
    return replace(result, edit=edit)


def in_units_of(saved: int, *, measured: int, estimated: int | None) -> int:
    """A saving counted in len/3 estimates, in the units of `measured` (the server's count when
    it reported one), scaled as the two compare for the same request: `measured - saving` then
    never mixes the two, nor goes below zero."""
    if not estimated or estimated == measured:
        return saved
    return round(saved * measured / estimated)

"""`CompactionResult`: what one compaction did, and `apply_compaction`, which stores it.

A result is a value: the new active rows plus every figure worth showing or plotting (tokens
before and after, rows summarised and pruned, duration, summariser usage, which layer did the
work, the prompt tokens the server served from its cache) and exactly what the store needs to
apply it: `replacements` (index → placeholder, the prune layer) and `summary_row` + `keep_tail`
(the summary layer).

`apply_compaction` writes a result in one store transaction: the pruned originals are archived
and their placeholders put at the same positions (`Store.replace_rows`, kind "prune"), then the
summarised rows are archived behind one `compacted` row (`Store.replace_with_compacted`, kind
"summary" or "chunked"). Nothing is deleted. The store is reached through the small
`CompactionStore` protocol; of the store's modules only its values (`nbchat.store.records`,
pure) are imported, so compaction never needs the database to be tested.

Pure apart from the calls it makes on the store it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from nbchat.history import Row, estimate_tokens
from nbchat.store.records import CompactionRecord

__all__ = ["CompactionResult", "CompactionStore", "Layer", "apply_compaction", "in_units_of"]

Layer = Literal["none", "prune", "summary", "chunked"]


@dataclass(frozen=True)
class CompactionResult:
    """What one compaction did (or why it did nothing), and what the store needs to apply it.

    `replacements` maps an index in the input history to the placeholder that replaces it;
    `summary_row` (with `keep_tail`) replaces every row but the last `keep_tail`. Token figures
    count the whole request: rows + system prompt + tool schemas, or the server's report.
    """

    rows: tuple[Row, ...]
    changed: bool
    layer: Layer
    reason: str
    tokens_before: int
    tokens_after: int
    rows_summarised: int = 0
    duration: float = 0.0
    summary: str = ""
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    replacements: Mapping[int, Row] = field(default_factory=lambda: MappingProxyType({}))
    pruned_tokens: int = 0
    keep_tail: int = 0
    summary_row: Row | None = None
    cancelled: bool = False
    warnings: tuple[str, ...] = ()
    # Of `prompt_tokens`, how many the server served from its prompt cache (None: it did not
    # say), and how the summary was asked: "cache" (continuing the chat's request) or
    # "transcript" ("" when no summary was asked).
    cached_tokens: int | None = None
    summary_form: str = ""

    @property
    def rows_pruned(self) -> int:
        return len(self.replacements)

    @property
    def computed_tokens(self) -> int | None:
        """Prompt tokens the summariser's server had to compute (not served from its cache);
        None when it did not report its cache."""
        if self.cached_tokens is None:
            return None
        return max(0, self.prompt_tokens - self.cached_tokens)

    @classmethod
    def summarised(
        cls,
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
            return cls.unchanged(rows, measured, "the summary would not shrink it")
        saved = in_units_of(rows_tokens - after, measured=measured, estimated=estimated)
        return cls(
            rows=(summary_row, *rows[start:]),
            changed=True,
            layer="summary",
            reason=f"{start} rows summarised ({rule} split)",
            tokens_before=measured,
            tokens_after=measured - saved,
            rows_summarised=start,
            summary=summary_row.content,
            keep_tail=len(rows) - start,
            summary_row=summary_row,
        )

    @classmethod
    def unchanged(cls, rows: Sequence[Row], tokens: int, reason: str) -> CompactionResult:
        """A no-op: the rows as they were, and why nothing was done."""
        return cls(
            rows=tuple(rows),
            changed=False,
            layer="none",
            reason=reason,
            tokens_before=tokens,
            tokens_after=tokens,
        )


def in_units_of(saved: int, *, measured: int, estimated: int | None) -> int:
    """A saving counted in len/3 estimates, in the units of `measured` (the server's count when
    it reported one), scaled as the two compare for the same request: `measured - saving` then
    never mixes the two, nor goes below zero."""
    if not estimated or estimated == measured:
        return saved
    return round(saved * measured / estimated)


class CompactionStore(Protocol):
    """What `apply_compaction` needs from `nbchat.store.store.Store` (a protocol, so tests and
    the engine need no database)."""

    def transaction(self, action: str) -> AbstractContextManager[Any]: ...

    def replace_rows(
        self,
        session_id: str,
        replacements: Mapping[int, Sequence[str]],
        *,
        expected_active: int,
        record: CompactionRecord,
    ) -> int: ...

    def replace_with_compacted(
        self,
        session_id: str,
        compacted: Sequence[str],
        *,
        keep_tail: int,
        expected_active: int,
        record: CompactionRecord,
    ) -> int: ...


def apply_compaction(
    store: CompactionStore, session_id: str, result: CompactionResult, *, expected_active: int
) -> list[int]:
    """Write `result` to the session in one transaction; returns the compaction record ids.

    `expected_active` is the number of active rows the result was computed from; the store
    refuses (and writes nothing) when the session changed meanwhile.
    """
    if not result.changed:
        return []
    ids: list[int] = []
    pruned_to = result.tokens_before - result.pruned_tokens
    with store.transaction("save the compaction"):
        if result.replacements:
            record = _record(result, "prune", before=result.tokens_before, after=pruned_to)
            ids.append(
                store.replace_rows(
                    session_id, result.replacements, expected_active=expected_active, record=record
                )
            )
        if result.summary_row is not None:
            record = _record(result, result.layer, before=pruned_to, after=result.tokens_after)
            ids.append(
                store.replace_with_compacted(
                    session_id,
                    result.summary_row,
                    keep_tail=result.keep_tail,
                    expected_active=expected_active,
                    record=record,
                )
            )
    return ids


def _record(result: CompactionResult, kind: str, *, before: int, after: int) -> CompactionRecord:
    """The store's record of one layer; the summariser's figures belong to the summary only."""
    summary = kind != "prune"
    return CompactionRecord(
        kind=kind,
        summary=result.summary if summary else "",
        tokens_before=before,
        tokens_after=after,
        model=result.model if summary else "",
        prompt_tokens=result.prompt_tokens if summary else 0,
        completion_tokens=result.completion_tokens if summary else 0,
        duration=result.duration,
    )

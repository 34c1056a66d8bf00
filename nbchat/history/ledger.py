"""`History`: rows with their token estimates and a running total, so budget checks are
O(1); and `context_tokens`, the one rule for the size of the next request.

Pure: no I/O, no threads, no widgets.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from nbchat.history.rows import Row, RowLike, estimate_tokens, to_row

__all__ = ["History", "context_tokens"]


class History:
    """Rows with their token estimates and a running total: `total_tokens` is O(1).

    Each estimate is computed once, when the row arrives. The last server-reported prompt size
    is remembered with the row count it was measured on, so a budget check can use it plus the
    estimate of the rows added since; `replace` (a compaction) forgets it.
    """

    def __init__(self, rows: Iterable[RowLike] = ()) -> None:
        self._rows: list[Row] = []
        self._estimates: list[int] = []
        self._total = 0
        self._usage: tuple[int, int] | None = None  # (row count, estimate total) at measurement
        self._reported = 0
        self.extend(rows)

    def append(self, row: RowLike) -> Row:
        checked = to_row(row)
        estimate = estimate_tokens(checked)
        self._rows.append(checked)
        self._estimates.append(estimate)
        self._total += estimate
        return checked

    def extend(self, rows: Iterable[RowLike]) -> None:
        for row in rows:
            self.append(row)

    def replace(self, rows: Iterable[RowLike]) -> None:
        """Swap in a new list of rows (after a compaction); reported usage becomes stale."""
        self._rows, self._estimates, self._total = [], [], 0
        self._usage = None
        self.extend(rows)

    def record_usage(self, prompt_tokens: int) -> None:
        """The server counted `prompt_tokens` for a request built from the current rows."""
        self._usage = (len(self._rows), self._total)
        self._reported = prompt_tokens

    def forget_usage(self) -> None:
        """Drop the reported figure (e.g. after a model switch)."""
        self._usage = None

    @property
    def total_tokens(self) -> int:
        """Sum of the rows' estimates (rows only, the baseline rule)."""
        return self._total

    @property
    def reported_tokens(self) -> int | None:
        """Last reported prompt size plus the estimate of rows added since, or None."""
        if self._usage is None or self._usage[0] > len(self._rows):
            return None
        return self._reported + (self._total - self._usage[1])

    @property
    def rows(self) -> list[Row]:
        """A snapshot copy of the rows."""
        return list(self._rows)

    def estimate_of(self, index: int) -> int:
        return self._estimates[index]

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(list(self._rows))

    def __getitem__(self, index: int) -> Row:
        return self._rows[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            return self._rows == other._rows
        if isinstance(other, list):
            return self._rows == [tuple(r) for r in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History({len(self._rows)} rows, ~{self._total} tokens)"


def context_tokens(history: History | Sequence[Sequence[str]], overhead: int) -> int:
    """The size of the next request, the one rule for it: the server's last report plus the
    rows added since, else every row's estimate plus `overhead` (system prompt, tool schemas)."""
    if isinstance(history, History):
        reported = history.reported_tokens
        return reported if reported is not None else history.total_tokens + overhead
    return sum(estimate_tokens(row) for row in history) + overhead

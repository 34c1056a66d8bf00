"""The cheap layer of compaction: old tool outputs become short placeholders.

Before any model is asked to summarise, tool outputs outside a protected recent window are
replaced, in place, by a placeholder that names the tool, says how big the output was, and how
to read it back: the model has a `read_archived_output(tool_id=...)` tool that returns the
archived original by its call id (the store keeps every original). The placeholder keeps the
row's `tool_id` and `tool_name`, so the call/result pairing is untouched, and it lists the
output's newest error headlines, so the code-computed facts of a later summary still see them.

Pure: decides and builds rows; the store archives the originals (`Store.replace_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nbchat.compaction.facts import is_view_tool
from nbchat.compaction.headlines import error_headlines
from nbchat.history import Row, estimate_tokens

__all__ = [
    "PLACEHOLDER_PREFIX",
    "apply_replacements",
    "find_prunable",
    "is_placeholder",
    "protected_start",
    "to_placeholder",
]

PLACEHOLDER_PREFIX = "[Archived output of "
PLACEHOLDER_TEMPLATE = (
    "[Archived output of {tool}: {chars:,} characters, ~{tokens:,} tokens. "
    'Read it back with read_archived_output(tool_id="{tool_id}").]'
)
ERRORS_LINE = "Error lines in it:"
PLACEHOLDER_HEADLINES = 3
# An output is only worth pruning when the placeholder saves this many tokens or more.
MIN_SAVING_TOKENS = 50


def is_placeholder(row: Row) -> bool:
    """True for a tool row that already stands for an archived output."""
    return row.role == "tool" and row.content.startswith(PLACEHOLDER_PREFIX)


def to_placeholder(row: Row) -> Row:
    """The placeholder for one tool row: same ids, a short text, its newest error headlines."""
    text = PLACEHOLDER_TEMPLATE.format(
        tool=row.tool_name or "a tool",
        chars=len(row.content),
        tokens=estimate_tokens(row),
        tool_id=row.tool_id,
    )
    headlines = [] if is_view_tool(row.tool_name) else error_headlines(row.content)
    if headlines:
        # Newest last in the output; the last few say how the run ended.
        newest = headlines[-PLACEHOLDER_HEADLINES:]
        text = "\n".join([text, ERRORS_LINE, *newest])
    return row._replace(content=text)


def protected_start(
    rows: Sequence[Row], estimates: Sequence[int], *, keep_rows: int, keep_tokens: int
) -> int:
    """Where the protected recent window starts: the last `keep_rows` rows at least, and back
    until the tool outputs in it add up to `keep_tokens`."""
    start = max(0, len(rows) - keep_rows)
    protected = sum(estimates[i] for i in range(start, len(rows)) if rows[i].role == "tool")
    while start > 0 and protected < keep_tokens:
        start -= 1
        if rows[start].role == "tool":
            protected += estimates[start]
    return start


def find_prunable(
    rows: Sequence[Row], estimates: Sequence[int], *, protect_from: int
) -> dict[int, Row]:
    """Index → placeholder for every tool output before `protect_from` worth replacing."""
    replacements: dict[int, Row] = {}
    for index in range(min(protect_from, len(rows))):
        row = rows[index]
        if row.role != "tool" or not row.tool_id or is_placeholder(row):
            continue  # a result without an id is never sent, so it costs nothing
        placeholder = to_placeholder(row)
        if estimates[index] - estimate_tokens(placeholder) >= MIN_SAVING_TOKENS:
            replacements[index] = placeholder
    return replacements


def apply_replacements(rows: Sequence[Row], replacements: Mapping[int, Row]) -> list[Row]:
    """`rows` with the replaced positions swapped for their placeholders."""
    return [replacements.get(index, row) for index, row in enumerate(rows)]

"""The cheap layers of compaction, done by code: old tool outputs become placeholders, and the brief
transcript a small, slow summariser reads.

The cheap layer of compaction: old tool outputs become short placeholders.

Before any model is asked to summarise, tool outputs outside a protected recent window are
replaced, in place, by a placeholder that names the tool, says how big the output was, and how
to read it back: the model has a `read_archived_output(tool_id=...)` tool that returns the
archived original by its call id (the store keeps every original). The placeholder keeps the
row's `tool_id` and `tool_name`, so the call/result pairing is untouched, and it lists the
output's newest error headlines, so the code-computed facts of a later summary still see them.

Pure: decides and builds rows; the store archives the originals (`Store.replace_rows`).

The brief transcript a small, slow summariser reads: each message as one short line, capped.

On the embedded model a summary costs about a second for every 17-35 prompt tokens read (two
cores), so a 34k-token history read whole, in five chunks, took 24.6 minutes, and the 0.5B's
checkpoint named no file and no error anyway. The names are kept by code (the facts and the key
lines, `nbchat.compaction.facts`, `nbchat.compaction.keylines`), so the model reads the story
instead: the user's messages, the assistant's statements and calls, and each tool result as its
error headlines or its first words, one line each. The lines are cut shorter, all of them alike,
until the whole fits `cap` tokens; when even the shortest do not fit, the first user message
(the task) and the newest lines that fit are kept, with a line that says how many were left out.

Pure: no I/O. Linear in the rows' length (each text is cut before it is split).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nbchat.compaction.facts import is_view_tool
from nbchat.compaction.headlines import error_headlines
from nbchat.history import Row, estimate_tokens, stored_calls

__all__ = [
    "BRIEF_CAP",
    "PLACEHOLDER_PREFIX",
    "apply_replacements",
    "brief_blocks",
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


# The embedded model's cap: on two busy cores the 1.5B reads ~17 prompt tokens a second and
# writes ~6 (twice that idle), so 2,400 tokens of transcript, ~400 of prompts and a ~300-token
# checkpoint take about 3.5 minutes under load and under 2 idle.
BRIEF_CAP = 2_400

FIRST_CHARS = 900  # the task (its head is a recorded fact too)
REPEAT_CHARS = 60  # a user message said before (a harness's complaint, a retry)
HEADLINES = 2
LEFT_OUT = "[... {count} earlier messages left out: their files and errors are recorded ...]"
# Lines at the end of a tool's output looked at for its last words.
LAST_LINES = 40


@dataclass(frozen=True)
class Level:
    """How short the lines are: a statement's characters, a call's (0: calls left out), and a
    result's when it holds no error (0: only results with errors are shown)."""

    statement: int
    call: int
    result: int


# Widest first: the first level at which everything fits is used.
LEVELS = (
    Level(480, 140, 140),
    Level(320, 100, 100),
    Level(200, 80, 0),
    Level(140, 60, 0),
    Level(100, 0, 0),
    Level(70, 0, 0),
)


def brief_blocks(rows: Sequence[Row], cap: int) -> list[str]:
    """One block per message of `rows` that matters to a summary, within `cap` tokens."""
    blocks: list[str] = []
    for level in LEVELS:
        blocks = _blocks(rows, level)
        if _tokens(blocks) <= cap:
            return blocks
    return _newest_within(blocks, cap)


def _tokens(blocks: Sequence[str]) -> int:
    return sum(estimate_tokens(block) + 1 for block in blocks)


def _newest_within(blocks: Sequence[str], cap: int) -> list[str]:
    """The first block and the newest ones that fit beside it and the omission line."""
    if not blocks:
        return []
    room = cap - _tokens(blocks[:1]) - estimate_tokens(LEFT_OUT) - 2
    kept: list[str] = []
    for block in reversed(blocks[1:]):
        room -= estimate_tokens(block) + 1
        if room < 0:
            break
        kept.append(block)
    left_out = len(blocks) - 1 - len(kept)
    middle = [LEFT_OUT.format(count=left_out)] if left_out else []
    return [blocks[0], *middle, *reversed(kept)]


def _blocks(rows: Sequence[Row], level: Level) -> list[str]:
    blocks: list[str] = []
    asked: set[str] = set()
    for row in rows:
        if row.role == "user" and row.content.strip():
            start = _line(row.content, REPEAT_CHARS)
            limit = 2 * level.statement if asked else FIRST_CHARS
            blocks.append(
                f"[User]: {_line(row.content, REPEAT_CHARS if start in asked else limit)}"
            )
            asked.add(start)
        elif row.role in ("assistant", "assistant_full"):
            block = _assistant_block(row, level)
            if block:
                blocks.append(block)
        elif row.role == "tool":
            result = _result_line(row, level.result)
            if result:
                blocks.append(f"[Result]: {result}")
    return blocks


def _assistant_block(row: Row, level: Level) -> str:
    said = _line(row.content, level.statement)
    calls = [_call_line(name, arguments) for _, name, arguments in stored_calls(row)]
    ran = _line("; ".join(calls), level.call) if level.call else ""
    parts = ([f"[Assistant]: {said}"] if said else []) + (
        [f"[Assistant ran]: {ran}"] if ran else []
    )
    return "\n".join(parts)


def _line(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters (cut before it is split: linear)."""
    line = " ".join(text[: limit * 2].split())
    return line if len(line) <= limit else line[: limit - 2].rstrip() + " …"


def _call_line(name: str, arguments: dict[str, object] | None) -> str:
    command = (arguments or {}).get("command")
    if isinstance(command, str):
        return command
    shown = ", ".join(f"{key}={value!r}" for key, value in (arguments or {}).items())
    return f"{name}({shown})"


def _result_line(row: Row, limit: int) -> str:
    """A tool result in one line: its error headlines, else (unless `limit` is 0) its last line
    of words (a test run's summary, a script's last print), else "" (nothing to say)."""
    headlines = [] if is_view_tool(row.tool_name) else error_headlines(row.content)
    if headlines:
        return _line("; ".join(headlines[:HEADLINES]), 2 * LEVELS[0].result)
    if not limit:
        return ""
    return _line(_last_words(row.content), limit)


def _last_words(text: str) -> str:
    """The last line of `text` with words in it (markup such as `</output>` skipped)."""
    for line in reversed(text[-LAST_LINES * 200 :].splitlines()[-LAST_LINES:]):
        stripped = line.strip().strip("=-").strip()
        if stripped.startswith("<") and stripped.endswith(">"):
            continue
        if sum(1 for word in stripped.split() if word.isalpha()) >= 2:
            return stripped
    return ""

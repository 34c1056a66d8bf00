"""What compaction does by code, with no model: old tool outputs become placeholders, the brief
transcript a small summariser reads, and the key lines kept word for word beside its summary.

Placeholders, the cheap layer: before any model is asked to summarise, tool outputs outside a
protected recent window are replaced, in place, by a placeholder that names the tool, says how
big the output was, and how to read it back: the model has a `read_archived_output(tool_id=...)`
tool that returns the archived original by its call id (the store keeps every original). The
placeholder keeps the row's `tool_id` and `tool_name`, so the call/result pairing is untouched,
and it lists the output's newest error headlines, so the code-computed facts of a later summary
still see them. The store archives the originals (`Store.replace_rows`).

The brief transcript a small, slow summariser reads: each message as one short line, capped. On
the embedded model a summary costs about a second for every 17-35 prompt tokens read (two
cores), so a 34k-token history read whole, in five chunks, took 24.6 minutes, and the 0.5B's
checkpoint named no file and no error anyway. The names are kept by code (the facts,
`nbchat.compaction.facts`, and the key lines below), so the model reads the story instead: the
user's messages, the assistant's statements and calls, and each tool result as its error
headlines or its first words, one line each. The lines are cut shorter, all of them alike, until
the whole fits `cap` tokens; when even the shortest do not fit, the first user message (the
task) and the newest lines that fit are kept, with a line that says how many were left out.

Key lines: what a small summariser most often loses, picked from the summarised rows. The facts
keep names: files, error headlines, the user's words. A model continuing the work also needs
where the work stood, which a 0.5B or 1.5B summariser tends to drop or blur: the assistant's
latest statements of substance (what it found, decided and meant to do next: short ones such as
"Run it." are skipped), the last changes it made (a diff a tool showed, else the editing call),
the last test run's result line with its command, and the names it wrote in backticks
(functions, classes, options, settings), most mentioned first: the symbols a summary of a long
history drops first, and a later question names. They are rendered after the facts under their
own heading (`KEY_LINES_HEADING`), each line quoted or listed so the block reads back
unambiguously (`parse_key_lines`), and a later compaction carries them on, newer ones first
(`merge_key_lines`). Each part has a budget. Not on a small trigger (the small checkpoint,
`nbchat.compaction.steps`): there the compacted row is read again before every reply, and the
model's own short checkpoint says where the work stands.

Pure: decides and builds rows and text, no I/O. Plain string operations, linear in the rows'
length (each text is cut before it is split).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from nbchat.compaction.facts import is_modify_tool, is_view_tool, without_latest
from nbchat.compaction.findings import error_headlines
from nbchat.history import Row, estimate_tokens, stored_calls

__all__ = [
    "BRIEF_CAP",
    "KEY_LINES_HEADING",
    "KeyLines",
    "PLACEHOLDER_PREFIX",
    "apply_replacements",
    "brief_blocks",
    "find_prunable",
    "is_placeholder",
    "key_lines",
    "key_lines_of",
    "merge_key_lines",
    "parse_key_lines",
    "protected_start",
    "render_key_lines",
    "to_placeholder",
]


KEY_LINES_HEADING = "# Key lines"
KEY_LINES_NOTE = "(Picked by code from the summarised messages: where the work stood.)"
STATEMENTS_HEADING = "## The assistant's latest statements (newest first)"
CHANGES_HEADING = "## Last changes (newest first)"
RESULT_HEADING = "## Last test result"
NAMES_HEADING = "## Names the assistant used (most mentioned first)"
# A statement shorter than this says little on its own ("Run it.", "Let's verify the change.").
STATEMENT_MIN_CHARS = 80
STATEMENTS = 3
STATEMENT_CHARS = 360
CHANGES = 2
CHANGE_CHARS = 420
COMMAND_CHARS = 120
RESULT_CHARS = 160
# A test run's summary: pytest's "==== 3 passed, 1 failed in 0.2s ====", unittest's "Ran 5 tests".
RESULT_WORDS = (" passed", " failed", " error", " skipped", " deselected")
DIFF_STARTS = ("diff --git ", "--- a/", "@@ ")
# Inline code the assistant wrote: at most this many names, each 3 to NAME_CHARS characters
# and one word (paths are recorded facts already).
NAMES = 40
NAME_CHARS = 60
FENCE = "```"


@dataclass(frozen=True)
class KeyLines:
    """The assistant's latest statements and last changes (newest first), the last test result."""

    statements: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()
    result: str = ""
    names: tuple[str, ...] = ()  # most mentioned first


def key_lines(rows: Sequence[Row]) -> KeyLines:
    """The key lines of `rows` alone (a previous summary's are read by `parse_key_lines`)."""
    commands = dict(_commands(rows))
    statements: list[str] = []
    changes: list[str] = []
    result = ""
    for row in reversed(rows):
        if row.role in ("assistant", "assistant_full") and len(statements) < STATEMENTS:
            text = " ".join(row.content.split())
            if len(text) >= STATEMENT_MIN_CHARS and text not in statements:
                statements.append(_cut(text, STATEMENT_CHARS))
        if len(changes) < CHANGES:
            change = _change_in(row)
            if change and change not in changes:
                changes.append(change)
        if not result and row.role == "tool" and not is_view_tool(row.tool_name):
            result = _result_in(row.content, commands.get(row.tool_id, ""))
        if result and len(statements) == STATEMENTS and len(changes) == CHANGES:
            break
    return KeyLines(tuple(statements), tuple(changes), result, _names(rows))


def _names(rows: Sequence[Row]) -> tuple[str, ...]:
    """The names the assistant wrote as inline code, by the number of its messages that
    mention each (most first; the later of two as often mentioned first)."""
    mentions: dict[str, int] = {}
    latest: dict[str, int] = {}
    for index, row in enumerate(rows):
        if row.role not in ("assistant", "assistant_full"):
            continue
        for name in _inline_code(row.content):
            mentions[name] = mentions.get(name, 0) + 1
            latest[name] = index
    ranked = sorted(mentions, key=lambda name: (-mentions[name], -latest[name]))
    return tuple(ranked[:NAMES])


def _inline_code(text: str) -> set[str]:
    """The one-word spans in single backticks outside code fences (no paths)."""
    found: set[str] = set()
    for outside in text.split(FENCE)[::2]:
        for span in outside.split("`")[1::2]:
            name = span.strip()
            one_word = not any(char.isspace() for char in name)
            if 3 <= len(name) <= NAME_CHARS and one_word and "/" not in name:
                found.add(name)
    return found


def key_lines_of(rows: Sequence[Row]) -> KeyLines:
    """The key lines of `rows`: earlier summaries' key lines, updated with the other rows."""
    carried = KeyLines()
    for row in rows:
        if row.role == "compacted":
            carried = merge_key_lines(parse_key_lines(row.content), carried)
    return merge_key_lines(key_lines(rows), carried)


def merge_key_lines(newer: KeyLines, older: KeyLines) -> KeyLines:
    """The newer rows' key lines first, the older ones after them, each part to its count."""
    statements = tuple(dict.fromkeys((*newer.statements, *older.statements)))[:STATEMENTS]
    changes = tuple(dict.fromkeys((*newer.changes, *older.changes)))[:CHANGES]
    names = tuple(dict.fromkeys((*newer.names, *older.names)))[:NAMES]
    return KeyLines(statements, changes, newer.result or older.result, names)


def _commands(rows: Sequence[Row]) -> Iterator[tuple[str, str]]:
    """(call id, the call in one short line) of every tool call in `rows`."""
    for row in rows:
        for call_id, name, arguments in stored_calls(row):
            command = (arguments or {}).get("command")
            shown = command if isinstance(command, str) else f"{name}({_arguments(arguments)})"
            yield call_id, _cut(" ".join(shown.split()), COMMAND_CHARS)


def _arguments(arguments: dict[str, object] | None) -> str:
    if not arguments:
        return ""
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())


def _change_in(row: Row) -> str:
    """A diff a tool printed, or an editing call, as one short block ("" when neither)."""
    if row.role == "tool" and not is_view_tool(row.tool_name):
        start = _diff_start(row.content)
        return "" if start < 0 else _cut(row.content[start:].strip(), CHANGE_CHARS)
    for _, name, arguments in stored_calls(row):
        if is_modify_tool(name):
            command = (arguments or {}).get("command")
            shown = command if isinstance(command, str) else f"{name}({_arguments(arguments)})"
            return _cut(shown.strip(), CHANGE_CHARS)
    return ""


def _diff_start(text: str) -> int:
    """Where a unified diff starts in `text` (-1: none), found by its header lines."""
    for marker in DIFF_STARTS[:2]:
        at = text.find(marker)
        if at >= 0 and (at == 0 or text[at - 1] == "\n") and "\n@@ " in text[at:]:
            return at
    return -1


def _result_in(output: str, command: str) -> str:
    """The last test-run summary line of `output`, with the command that printed it."""
    lines = output.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index].strip()
        summary = _pytest_summary(line) or _unittest_summary(line, lines[index + 1 : index + 3])
        if summary:
            shown = f"`{command}` → {summary}" if command else summary
            return _cut(shown, RESULT_CHARS + COMMAND_CHARS)
    return ""


def _pytest_summary(line: str) -> str:
    if not (line.startswith("=") and line.endswith("=")):
        return ""
    inner = line.strip("= ")
    return inner if " in " in inner and any(word in inner for word in RESULT_WORDS) else ""


def _unittest_summary(line: str, after: Sequence[str]) -> str:
    if not (line.startswith("Ran ") and " test" in line):
        return ""
    status = next((a.strip() for a in after if a.strip()), "")
    return f"{line}, {status}" if status.startswith(("OK", "FAILED")) else line


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 2].rstrip() + " …"


def render_key_lines(lines: KeyLines) -> str:
    """The `# Key lines` block ("" when there are none)."""
    sections = [
        (STATEMENTS_HEADING, "\n\n".join(_quote(text) for text in lines.statements)),
        (CHANGES_HEADING, "\n\n".join(_quote(text) for text in lines.changes)),
        (RESULT_HEADING, f"- {lines.result}" if lines.result else ""),
        (NAMES_HEADING, " ".join(f"`{name}`" for name in lines.names)),
    ]
    parts = [f"{heading}\n{body}" for heading, body in sections if body]
    return "\n\n".join([KEY_LINES_HEADING, KEY_LINES_NOTE, *parts]) if parts else ""


def _quote(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in text.splitlines())


def parse_key_lines(summary: str) -> KeyLines:
    """The key lines a previous compacted row carries (empty when it has none)."""
    text = without_latest(summary)
    start = text.rfind("\n" + KEY_LINES_HEADING + "\n")
    if start < 0:
        return KeyLines()
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text[start:].splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line.rstrip(), [])
        elif line.startswith("# "):
            current = None
        elif current is not None:
            current.append(line)
    results = [line[2:] for line in sections.get(RESULT_HEADING, []) if line.startswith("- ")]
    names = " ".join(sections.get(NAMES_HEADING, [])).split("`")[1::2]
    return KeyLines(
        tuple(_quoted_blocks(sections.get(STATEMENTS_HEADING, []))),
        tuple(_quoted_blocks(sections.get(CHANGES_HEADING, []))),
        results[0] if results else "",
        tuple(name for name in names if name.strip()),
    )


def _quoted_blocks(lines: list[str]) -> list[str]:
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.startswith(">"):
            blocks[-1].append(line[2:] if line.startswith("> ") else "")
        elif blocks[-1]:
            blocks.append([])
    return [text for block in blocks if (text := "\n".join(block).strip())]


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

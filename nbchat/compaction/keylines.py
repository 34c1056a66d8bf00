"""Key lines: what a small summariser most often loses, picked from the summarised rows by code.

The facts (`nbchat.compaction.facts`) keep names: files, error headlines, the user's words. A
model continuing the work also needs where the work stood, which a 0.5B or 1.5B summariser tends
to drop or blur: the assistant's latest statements of substance (what it found, decided and
meant to do next: short ones such as "Run it." are skipped), the last changes it made (a diff a
tool showed, else the editing call), the last test run's result line with its command, and the
names it wrote in backticks (functions, classes, options, settings), most mentioned first: the
symbols a summary of a long history drops first, and a later question names.

They are rendered after the facts under their own heading (`KEY_LINES_HEADING`), each line
quoted or listed so the block reads back unambiguously (`parse_key_lines`), and a later
compaction carries them on, newer ones first (`merge_key_lines`). Each part has a budget. Not
on a small trigger (the small checkpoint, `nbchat.compaction.steps`): there the compacted row is
read again before every reply, and the model's own short checkpoint says where the work stands.

Plain string operations, linear in the rows' length. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from nbchat.compaction.facts import is_modify_tool, is_view_tool, without_latest
from nbchat.history import Row, stored_calls

__all__ = [
    "KEY_LINES_HEADING",
    "KeyLines",
    "key_lines",
    "key_lines_of",
    "merge_key_lines",
    "parse_key_lines",
    "render_key_lines",
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

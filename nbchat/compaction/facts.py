"""What code keeps through a compaction, beside the summary: the facts, and the user's latest
message carried whole through a cut inside its turn.

The latest message: a long turn (one instruction, many tool rounds) can only shrink by a cut inside
the turn, which would summarise the instruction the model is still working on. `latest_instruction`
finds it when a cut would take it; the engine then appends it, whole, to the `compacted` row under
its own heading (`render_latest`), and a later compaction carries it on (`parse_latest`) until a
newer user message takes its place.

Each line is quoted (`> `), so the block ends unambiguously however the message reads, and
`without_latest` gives back the summary and facts before it.

The facts: a small model can drop a file path or an error line from its summary; these cannot be
dropped, because they are read from the rows by code and appended to the summary under their own
headings: files read and files modified (from the tool calls' arguments), tool failures (every
distinct error headline: newest first, the oldest kept whatever came after them, many per-test lines
of one file folded into one), the user's own words verbatim (the head of the first message always,
then the newest) and the notebook's variables and cells the conversation referred to (both found by
`nbchat.compaction.findings`). Each list has a token budget, applied when rendered, so the block
stays small however long the session was.

Facts carry forward: `parse_facts` reads them back from a previous summary's `# Recorded facts`
block, and `merge_facts` folds the new rows' facts into them.

Pure: no I/O, no model calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from nbchat.compaction.findings import (
    CELLS_HEADING,
    VARIABLES_HEADING,
    error_headlines,
    fold_headlines,
    merge_notes,
    notebook_references,
    parse_cells,
    parse_variables,
    render_cells,
    render_variables,
)
from nbchat.history import CHARS_PER_TOKEN, Row, estimate_tokens, stored_calls

__all__ = [
    "FACTS_HEADING",
    "Facts",
    "LATEST_HEADING",
    "collect_facts",
    "facts_of",
    "file_operations",
    "is_modify_tool",
    "is_view_tool",
    "latest_instruction",
    "merge_facts",
    "parse_facts",
    "parse_latest",
    "previous_summary",
    "render_facts",
    "render_latest",
    "strip_facts",
    "without_latest",
]


LATEST_HEADING = "# The user's latest message (verbatim; the current turn works on it)"
_MARKER = "\n" + LATEST_HEADING + "\n"


def latest_instruction(rows: Sequence[Row], start: int) -> str:
    """The user's latest message when keeping only `rows[start:]` would lose it, else "".

    That is the last `user` row when it lies before `start`, or, when no `user` row is left at
    all, the message an earlier compaction carried in its `compacted` row.
    """
    for index in range(len(rows) - 1, -1, -1):
        row = rows[index]
        if row.role == "user":
            return row.content if index < start else ""
        if row.role == "compacted" and (carried := parse_latest(row.content)):
            return carried if index < start else ""
    return ""


def render_latest(message: str) -> str:
    """The block appended to a `compacted` row ("" for no message)."""
    if not message:
        return ""
    quoted = "\n".join(f"> {line}" for line in message.split("\n"))
    return f"{LATEST_HEADING}\n{quoted}"


def parse_latest(summary: str) -> str:
    """The message a `compacted` row carries verbatim ("" when it carries none)."""
    index = _block_start(summary)
    if index < 0:
        return ""
    lines = summary[index:].split("\n")[1:]
    return "\n".join(line[2:] for line in lines)


def without_latest(summary: str) -> str:
    """A `compacted` row's text without the carried message (the summary and its facts)."""
    index = _block_start(summary)
    return summary if index < 0 else summary[:index].rstrip()


def _block_start(summary: str) -> int:
    if summary.startswith(LATEST_HEADING + "\n"):
        return 0
    index = summary.rfind(_MARKER)
    if index < 0:
        return -1
    # Ours is the last block: every line after the heading is quoted.
    tail = summary[index + len(_MARKER) :].split("\n")
    return index + 1 if all(line.startswith("> ") for line in tail) else -1


FACTS_HEADING = "# Recorded facts"
FACTS_NOTE = "(Kept by code from the tool calls and messages, not by the summariser.)"
FILES_READ_HEADING = "## Files read"
FILES_MODIFIED_HEADING = "## Files modified"
FAILURES_HEADING = "## Tool failures (newest first)"
FIRST_MESSAGE_HEADING = "## First user message (start)"
USER_MESSAGES_HEADING = "## Recent user messages (newest first)"

# Budgets in estimated tokens (`estimate_tokens`), applied when rendering.
FILES_TOKENS = 400
FAILURES_TOKENS = 700
# The oldest failures (the task's own, often) keep this share of it: the newest cannot push
# them out.
OLDEST_SHARE = 4
FIRST_MESSAGE_TOKENS = 300
USER_MESSAGES_TOKENS = 600
# On a small trigger (the small checkpoint) the facts are read again before every reply too:
# the user's newest words and the first message get this much instead (the newest message or
# two whole; older ones are in the checkpoint's goal and progress, not word for word).
SMALL_USER_MESSAGES_TOKENS = 100
SMALL_FIRST_MESSAGE_TOKENS = 60
NOTEBOOK_TOKENS = 300  # for the variables, and again for the cells
PATH_CHARS = 300

# Tools whose output is a view of files: their text is source, not an error report.
VIEW_TOOLS = frozenset(
    {"read_file", "search_files", "list_files", "grep", "glob", "view", "read_archived_output"}
)
MODIFY_TOOLS = frozenset(
    {"write_file", "edit_file", "create_file", "apply_patch", "delete_file", "str_replace"}
)
READ_WORDS = ("read", "search", "list", "grep", "glob", "find", "view", "open")
MODIFY_WORDS = ("write", "edit", "create", "patch", "delete", "replace", "append", "move")
PATH_KEYS = frozenset({"path", "paths", "file", "files", "filename", "filenames", "filepath"})
# Paths that name the workspace itself (listing its root): no file to remember.
WORKSPACE_PATHS = frozenset({"", ".", "./"})

FAILURE_LINE = re.compile(r"^- (?P<headline>.*) \(in (?P<tool>[^()\s]*)\)$")


@dataclass(frozen=True)
class Facts:
    """What code recorded: paths in order of first use, failures and messages newest first."""

    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()  # (tool name, error headline)
    first_message: str = ""
    user_messages: tuple[str, ...] = ()
    variables: tuple[tuple[str, str], ...] = ()  # (name, what is known), oldest first
    cells: tuple[tuple[str, str], ...] = ()  # (execution number, first source line)


def is_view_tool(tool_name: str) -> bool:
    """True for tools whose output shows files (read/search/list), not the result of a run."""
    return tool_name in VIEW_TOOLS or (
        tool_name not in MODIFY_TOOLS and _has_word(tool_name, READ_WORDS)
    )


def is_modify_tool(tool_name: str) -> bool:
    """True for tools that change files (write/edit/patch), by name; a shell is neither."""
    return tool_name in MODIFY_TOOLS or (
        tool_name not in VIEW_TOOLS and _has_word(tool_name, MODIFY_WORDS)
    )


def _has_word(name: str, words: Iterable[str]) -> bool:
    parts = re.split(r"[^a-z]+", name.lower())
    return any(word in parts for word in words)


def file_operations(row: Row) -> tuple[list[str], list[str]]:
    """(paths read, paths modified) named by an `assistant_full` row's tool calls.

    The tool's name says which: read/search/list tools read, write/edit tools modify; a tool
    that could do either (a shell) is not guessed at.
    """
    read: list[str] = []
    modified: list[str] = []
    for name, arguments in _tool_calls(row):
        paths = list(_paths_in(arguments))
        if is_modify_tool(name):
            modified.extend(paths)
        elif is_view_tool(name):
            read.extend(paths)
    return read, modified


def _tool_calls(row: Row) -> Iterator[tuple[str, dict[str, Any]]]:
    for _, name, arguments in stored_calls(row):
        if arguments is not None:
            yield name, arguments


def _paths_in(arguments: dict[str, Any]) -> Iterator[str]:
    for key, value in arguments.items():
        if key.lower() not in PATH_KEYS and not key.lower().endswith(("_path", "_file")):
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str) or item.strip() in WORKSPACE_PATHS:
                continue
            if len(item.strip().splitlines()) == 1:
                yield item.strip()[:PATH_CHARS]


def collect_facts(rows: Sequence[Row]) -> Facts:
    """The facts in `rows` alone (a previous summary's facts are read by `parse_facts`)."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    failures: list[tuple[str, str]] = []
    messages: list[str] = []
    for row in rows:
        if row.role == "assistant_full":
            paths_read, paths_modified = file_operations(row)
            read.update(dict.fromkeys(paths_read))
            modified.update(dict.fromkeys(paths_modified))
        elif row.role == "tool" and not is_view_tool(row.tool_name):
            failures.extend((row.tool_name, line) for line in error_headlines(row.content))
        elif row.role == "user" and row.content.strip():
            messages.append(row.content.strip())
    variables, cells = notebook_references(rows)
    return Facts(
        files_read=tuple(read),
        files_modified=tuple(modified),
        failures=_distinct_failures(reversed(failures)),
        first_message=messages[0] if messages else "",
        user_messages=tuple(reversed(messages[1:])),
        variables=tuple(variables.items()),
        cells=tuple(cells.items()),
    )


def _distinct_failures(failures: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    seen: dict[str, tuple[str, str]] = {}
    for tool, headline in failures:
        seen.setdefault(headline, (tool, headline))
    return tuple(seen.values())


def facts_of(rows: Sequence[Row]) -> Facts:
    """The facts of `rows`: earlier summaries' recorded facts, updated with the other rows."""
    carried = Facts()
    for row in rows:
        if row.role == "compacted":
            carried = merge_facts(parse_facts(row.content), carried)
    return merge_facts(collect_facts(rows), carried)


def previous_summary(rows: Sequence[Row]) -> str:
    """The summariser's text of the `compacted` rows in `rows`, without their recorded facts."""
    return "\n\n".join(strip_facts(row.content) for row in rows if row.role == "compacted")


def merge_facts(newer: Facts, older: Facts) -> Facts:
    """`older` (a previous summary's facts) updated with the facts of the rows after it."""
    first = older.first_message or newer.first_message
    messages = [m for m in (*newer.user_messages, *older.user_messages) if m != first]
    if older.first_message and newer.first_message:
        messages.insert(0, newer.first_message)  # the new rows' first message is a recent one
    return Facts(
        files_read=tuple(dict.fromkeys((*older.files_read, *newer.files_read))),
        files_modified=tuple(dict.fromkeys((*older.files_modified, *newer.files_modified))),
        failures=_distinct_failures((*newer.failures, *older.failures)),
        first_message=first,
        user_messages=tuple(dict.fromkeys(messages)),
        variables=tuple(merge_notes(newer.variables, older.variables).items()),
        cells=tuple(merge_notes(newer.cells, older.cells).items()),
    )


def render_facts(facts: Facts, *, small: bool = False) -> str:
    """The `# Recorded facts` block, each list cut to its budget (empty lists left out; the
    user's messages to the smaller budgets when `small`)."""
    first_budget = SMALL_FIRST_MESSAGE_TOKENS if small else FIRST_MESSAGE_TOKENS
    messages_budget = SMALL_USER_MESSAGES_TOKENS if small else USER_MESSAGES_TOKENS
    parts = [FACTS_HEADING, FACTS_NOTE]
    files_read = _newest_within(facts.files_read, FILES_TOKENS)
    files_modified = _newest_within(facts.files_modified, FILES_TOKENS)
    sections = [
        (FILES_READ_HEADING, [f"- {path}" for path in files_read]),
        (FILES_MODIFIED_HEADING, [f"- {path}" for path in files_modified]),
        (FAILURES_HEADING, _failure_lines(facts.failures)),
        (
            FIRST_MESSAGE_HEADING,
            [_quote(_head(facts.first_message, first_budget))] if facts.first_message else [],
        ),
        (
            USER_MESSAGES_HEADING,
            _recent_messages(facts.user_messages, facts.first_message, messages_budget),
        ),
        (VARIABLES_HEADING, _newest_within(render_variables(facts.variables), NOTEBOOK_TOKENS)),
        (CELLS_HEADING, _newest_within(render_cells(facts.cells), NOTEBOOK_TOKENS)),
    ]
    for heading, lines in sections:
        if lines:
            parts.append(f"{heading}\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _tool(name: str) -> str:
    # The tool name closes the line in parentheses, so it must not hold any.
    return re.sub(r"[()\s]+", "_", name) or "a_tool"


def _failure_lines(failures: Sequence[tuple[str, str]]) -> list[str]:
    """The failures' lines, newest first, per-test lines folded (`headlines.fold_headlines`):
    the oldest (the task's first errors) within a share of the budget, whatever came after
    them, and the newest within the rest."""
    folded = fold_headlines([headline for _, headline in failures])
    lines = [f"- {line} (in {_tool(failures[index][0])})" for index, line in folded]
    oldest = _budgeted(lines[::-1], FAILURES_TOKENS // OLDEST_SHARE)
    newer = lines[: len(lines) - len(oldest)]
    room = FAILURES_TOKENS - sum(estimate_tokens(line) for line in oldest)
    return _budgeted(newer, room) + oldest[::-1]


def _budgeted(lines: Sequence[str], budget: int) -> list[str]:
    """The leading lines (the newest) that fit `budget` tokens."""
    kept: list[str] = []
    used = 0
    for line in lines:
        used += estimate_tokens(line)
        if used > budget:
            break
        kept.append(line)
    return kept


def _newest_within(paths: Sequence[str], budget: int) -> list[str]:
    """The most recently first-used paths that fit, kept in their original order."""
    kept = len(_budgeted([f"- {p}" for p in reversed(paths)], budget))
    return list(paths[len(paths) - kept :])


def _head(text: str, budget: int = FIRST_MESSAGE_TOKENS) -> str:
    """At most `budget` tokens of `text`, marked when cut (cutting it again changes nothing)."""
    limit = budget * CHARS_PER_TOKEN
    return text if len(text) <= limit else text[: limit - 2].rstrip() + " …"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in text.splitlines())


def _recent_messages(messages: Sequence[str], first: str, budget: int) -> list[str]:
    """Newest first, without repeats, whole while they fit; the next one cut to what is left."""
    blocks: list[str] = []
    left = budget
    for message in dict.fromkeys(m for m in messages if m != first):
        if estimate_tokens(message) > left:
            if left >= 20:
                blocks.append(_quote(_head(message, left)))
            break
        blocks.append(_quote(message))
        left -= estimate_tokens(message)
    return ["\n\n".join(blocks)] if blocks else []


def strip_facts(summary: str) -> str:
    """The summariser's part of a compacted row: everything before the last facts block."""
    index = _facts_start(summary)
    return summary if index < 0 else summary[:index].rstrip()


def _facts_start(summary: str) -> int:
    if summary.startswith(FACTS_HEADING + "\n"):
        return 0
    return summary.rfind("\n" + FACTS_HEADING + "\n")


def parse_facts(summary: str) -> Facts:
    """The facts recorded in a previous compacted row (empty when it has none)."""
    summary = without_latest(summary)  # the carried message is not one of the facts
    index = _facts_start(summary)
    if index < 0:
        return Facts()
    sections = _sections(summary[index:])
    failures = [FAILURE_LINE.match(line) for line in sections.get(FAILURES_HEADING, [])]
    return Facts(
        files_read=tuple(_items(sections.get(FILES_READ_HEADING, []))),
        files_modified=tuple(_items(sections.get(FILES_MODIFIED_HEADING, []))),
        failures=tuple((m["tool"], m["headline"]) for m in failures if m),
        first_message="\n".join(_unquote(sections.get(FIRST_MESSAGE_HEADING, []))).strip(),
        user_messages=tuple(_quoted_blocks(sections.get(USER_MESSAGES_HEADING, []))),
        variables=tuple(parse_variables(sections.get(VARIABLES_HEADING, []))),
        cells=tuple(parse_cells(sections.get(CELLS_HEADING, []))),
    )


def _sections(block: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in block.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line.rstrip(), [])
        elif current is not None:
            current.append(line)
    return sections


def _items(lines: list[str]) -> list[str]:
    return [line[2:].strip() for line in lines if line.startswith("- ") and line[2:].strip()]


def _unquote(lines: list[str]) -> list[str]:
    return [line[2:] if line.startswith("> ") else "" for line in lines if line.startswith(">")]


def _quoted_blocks(lines: list[str]) -> list[str]:
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.startswith(">"):
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [text for b in blocks if (text := "\n".join(_unquote(b)).strip())]

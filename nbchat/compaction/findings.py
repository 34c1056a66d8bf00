"""What code finds in the rows for the recorded facts, in linear time: a tool output's error
headlines, and the notebook variables and cells a conversation referred to.

Error headlines: the one line of a tool's output that says what went wrong. A headline is a
Traceback's last line; a line naming an exception (`KeyError: 'x'`, `Error: …`), also behind a
prefix (pytest's `E       X: …`, pytest-xdist's `INTERNALERROR> X: …`); a test runner's summary line
(`FAILED …`, `ERROR …`, unittest's `FAIL: …`); a command-line tool's `prog: error: …` (argparse) or
`error: …` (git, pip); and a shell's own errors (`command not found`, `No such file or directory`,
`syntax error near unexpected token`, `fatal: …`, `Segmentation fault`). Each is kept as the whole
stripped line (at most HEADLINE_CHARS), so the words the run printed are the words kept.

`fold_headlines` turns many per-test lines of one file with one message (sixty
`ERROR tests/test_x.py::test_…` lines from one missing module, say) into one counted line
(`ERROR tests/test_x.py::… ×60: ModuleNotFoundError: …`), so they cannot push the task's own
errors out of the facts' budget.

Plain string operations, line by line: linear in the output's length (outputs can be
megabytes), no regular expression.

Notebook facts: the variables and cells a conversation referred to. The chat lives in a kernel;
after a compaction the model should still know which of the user's variables and cells it was
working with, even when a small summariser forgot them. They come from:
- the notebook tools' calls and results (`nbchat.tools.notebook`): `describe_variable(name)`
  and the first line of its answer (`name: DataFrame, shape 3×2, …`); `read_cell(number)` and
  the first line of the source it returned; `last_error`'s traceback, for the cells it names
  (`Cell In[5]`, `<ipython-input-5-…>`); `list_notebook_variables` only refreshes the summary
  of variables already referred to (a listing is a directory view, like `list_files`, whose
  entries are not recorded either);
- `/attach` blocks in the user's messages (`nbchat.ui.attach`: "Source of cell 3:",
  "Output of cell 3:", "The variable df (DataFrame):", "The last error:", each followed by a
  code fence);
- what the assistant did to the notebook (`nbchat.tools.acting`), read from the first line of
  each result, which says how it ended: the cells it inserted and edited (`cell 3f2a1b2c:
  inserted by the assistant (code): df.plot()`), the cells it ran and the code it ran
  (`run 2: failed: KeyError: 'profit' — df['profit'].sum()`). A cell's notes accumulate
  (inserted; edited; ran as In [7]: finished), the newest kept when they grow too long.

Rendered under their own headings in the recorded facts and read back from a previous summary,
so they carry through every compaction. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from nbchat.history import Row, stored_calls

__all__ = [
    "ACTING_TOOLS",
    "CELLS_HEADING",
    "FOLD_AT",
    "HEADLINE_CHARS",
    "NOTEBOOK_TOOLS",
    "VARIABLES_HEADING",
    "attachments_in",
    "error_headlines",
    "fold_headlines",
    "is_headline",
    "merge_notes",
    "notebook_references",
    "parse_cells",
    "parse_variables",
    "render_cells",
    "render_variables",
    "typed_text",
]


HEADLINE_CHARS = 200
# Lines searched after a "Traceback" for the exception that ended it.
TRACEBACK_SEARCH_LINES = 400
# Per-test lines of one file with one message are folded from this many on.
FOLD_AT = 3
TRACEBACK = "Traceback (most recent call last)"
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# Prefixes a runner puts before a line of its own: the line behind it is read as any other.
INTERNAL_PREFIX = "INTERNALERROR>"  # pytest's internal errors, pytest-xdist's workers
PYTEST_PREFIX = "E "  # pytest's assertion and exception lines: `E       NameError: …`
EXCEPTION_ENDINGS = ("Error", "Exception")
PYTEST_OUTCOMES = frozenset({"Failed", "Exit"})  # pytest.fail(), pytest.exit()
SUMMARY_WORDS = ("FAILED", "ERROR")
SHELL_PHRASES = (
    "No such file or directory",
    "syntax error near unexpected token",
    "syntax error: unexpected end of file",
)
SHELL_STARTS = ("fatal: ", "Segmentation fault")
IDENTIFIER_CHARACTERS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."
)
FOLD_MARK = "…"


def error_headlines(text: str) -> list[str]:
    """Distinct error headlines in `text`, in order of appearance (each at most
    HEADLINE_CHARS characters): see the module docstring for what counts."""
    lines = text.splitlines()
    found: dict[str, None] = {}
    for index, line in enumerate(lines):
        stripped = line.strip()
        if _unprefixed(stripped).startswith(TRACEBACK):
            headline = _traceback_headline(lines, index + 1)
            if headline:
                found.setdefault(headline[:HEADLINE_CHARS], None)
        elif is_headline(stripped):
            found.setdefault(stripped[:HEADLINE_CHARS], None)
    return list(found)


def is_headline(stripped: str) -> bool:
    """Whether one stripped line is an error headline (a Traceback's last line aside)."""
    body = _unprefixed(stripped)
    if _names_exception(body, endings=EXCEPTION_ENDINGS) or _is_summary(body):
        return True
    if stripped.startswith(PYTEST_PREFIX) and _is_pytest_exception(body):
        return True
    if body.startswith(SHELL_STARTS) or body.endswith(": command not found"):
        return True
    if any(phrase in body for phrase in SHELL_PHRASES):
        return True
    return _is_tool_error(body)


def _unprefixed(stripped: str) -> str:
    """The line behind a runner's prefix (the line itself when it has none)."""
    if stripped.startswith(INTERNAL_PREFIX):
        return stripped[len(INTERNAL_PREFIX) :].strip()
    if stripped.startswith(PYTEST_PREFIX):
        return stripped[len(PYTEST_PREFIX) :].strip()
    return stripped


def _names_exception(text: str, *, endings: tuple[str, ...] | None) -> bool:
    """`Name` or `Name: message`, Name a dotted identifier (ending in one of `endings`,
    unless None)."""
    name, colon, rest = text.partition(":")
    if colon and rest and not rest[0].isspace():
        return False
    if not name or not (name[0].isalpha() or name[0] == "_"):
        return False
    if not set(name) <= IDENTIFIER_CHARACTERS:
        return False
    return endings is None or name.endswith(endings)


def _is_pytest_exception(body: str) -> bool:
    """pytest's `E` line naming the exception a test raised: a qualified name
    (`requests.exceptions.InvalidURL: …`) or pytest's own `Failed: …`."""
    name = body.partition(":")[0]
    return ("." in name or name in PYTEST_OUTCOMES) and _names_exception(body, endings=None)


def _is_summary(body: str) -> bool:
    """A test runner's summary line: `FAILED …`, `ERROR …` (a whole word), `FAIL: …`."""
    if body.startswith("FAIL: "):
        return True
    for word in SUMMARY_WORDS:
        if body.startswith(word):
            after = body[len(word) : len(word) + 1]
            return not after or not (after.isalnum() or after == "_")
    return False


def _is_tool_error(body: str) -> bool:
    """`error: …` (git, pip) or `prog: error: …` (argparse), `prog` one word."""
    if body.startswith("error: "):
        return True
    prog, colon, rest = body.partition(": ")
    return bool(colon) and bool(prog) and " " not in prog and rest.startswith("error: ")


def _traceback_headline(lines: Sequence[str], start: int) -> str:
    """The first unindented line after a traceback's frames (behind the runner's prefix, if
    the traceback had one): the exception it ended with."""
    for line in lines[start : start + TRACEBACK_SEARCH_LINES]:
        body = line[len(INTERNAL_PREFIX) + 1 :] if line.startswith(INTERNAL_PREFIX) else line
        if body.startswith((TRACEBACK, *CHAINED)):
            return ""  # a chained traceback: its own headline comes later
        if body[:1].isspace() or not body:
            continue  # a frame or its source line
        if _names_exception(body.rstrip(), endings=None):
            return line.strip()
        # Whatever a harness inserted (elision markers) is skipped.
    return ""


def _per_test(headline: str) -> tuple[str, str, str] | None:
    """(kind, file, message) of a per-test summary line `KIND file::test[ - message]`."""
    kind, space, rest = headline.partition(" ")
    if kind not in SUMMARY_WORDS or not space:
        return None
    node, _, message = rest.partition(" - ")
    path, colons, test = node.partition("::")
    if not colons or not test or " " in path or FOLD_MARK in test:
        return None
    return kind, path, message.strip()


def fold_headlines(headlines: Sequence[str]) -> list[tuple[int, str]]:
    """`headlines` with each group of at least FOLD_AT per-test lines of one file and one
    message (`ERROR a.py::test_x - E: m`) folded into one counted line where its first member
    stood (`ERROR a.py::… ×60: E: m`); every other line as it was, in its place. Each line comes
    with the index of the headline it stands for (a group's first member)."""
    keys = [_per_test(headline) for headline in headlines]
    groups: dict[tuple[str, str, str], int] = {}
    for key in keys:
        if key is not None:
            groups[key] = groups.get(key, 0) + 1
    folded: list[tuple[int, str]] = []
    written: set[tuple[str, str, str]] = set()
    for index, (headline, key) in enumerate(zip(headlines, keys, strict=True)):
        if key is None or groups[key] < FOLD_AT:
            folded.append((index, headline))
        elif key not in written:
            written.add(key)
            kind, path, message = key
            line = f"{kind} {path}::{FOLD_MARK} ×{groups[key]}"
            folded.append((index, f"{line}: {message}" if message else line))
    return folded


VARIABLES_HEADING = "## Notebook variables"
CELLS_HEADING = "## Notebook cells"
# The notebook tools' names (`nbchat.tools.notebook.notebook_tools`; a test keeps them equal).
LIST_TOOL, DESCRIBE_TOOL, CELL_TOOL, ERROR_TOOL = (
    "list_notebook_variables",
    "describe_variable",
    "read_cell",
    "last_error",
)
NOTEBOOK_TOOLS = frozenset({LIST_TOOL, DESCRIBE_TOOL, CELL_TOOL, ERROR_TOOL})
# The tools that act (`nbchat.tools.acting.ACTING_TOOLS`; a test keeps them equal).
INSERT_TOOL, EDIT_TOOL, RUN_CODE_TOOL, RUN_CELL_TOOL = (
    "insert_cell",
    "edit_cell",
    "run_code",
    "run_cell",
)
ACTING_TOOLS = frozenset({INSERT_TOOL, EDIT_TOOL, RUN_CODE_TOOL, RUN_CELL_TOOL})
# The first line of an acting tool's result (`nbchat.tools.acting`, `nbchat.tools.kernelrun`).
INSERTED = re.compile(r"^Inserted an? (?P<kind>\w+) cell at position \d+ \(id (?P<id>[\w-]+)\)")
EDITED = re.compile(r"^Edited cell \d+ \(id (?P<id>[\w-]+)\)")
RAN = re.compile(
    r"^(?P<ending>Finished|Error in|Timed out|Error: stopped by the user;|Not run|Error)"
    r":? (?:(?P<run>run \d+)|cell (?P<id>[\w-]+) \(In \[(?P<number>\d+)\]\))"
)
ENDINGS = {
    "Finished": "finished",
    "Error in": "failed",
    "Timed out": "interrupted at its time limit",
    "Error: stopped by the user;": "stopped by the user",
    "Not run": "not run",
    "Error": "did not stop when interrupted",
}
NOTE_CHARS = 160
# An `/attach` block: its label line, then a code fence (`Attachment.to_markdown`).
ATTACHMENT = re.compile(
    r"^(?P<label>(?P<kind>Source|Output) of cell (?P<number>\d+)"
    r"|The variable (?P<name>[^\s()]+) \((?P<type>[^()\n]*)\)"
    r"|The last error):\n(?P<fence>`{3,})(?P<info>\w*)\n",
    re.MULTILINE,
)
TRACEBACK_CELL = re.compile(r"Cell In\s?\[(\d+)\]|<ipython-input-(\d+)-")
VARIABLE_LINE = re.compile(r"^- (?P<name>[^:\s]+)(?:: (?P<note>.*))?$")
CELL_LINE = re.compile(
    r"^- (?:In \[(?P<number>\d+)\]|(?P<key>(?:cell|run) [\w-]+))(?:: (?P<note>.*))?$"
)

Notes = dict[str, str]  # a variable's name, or a cell's execution number → what is known


def attachments_in(text: str) -> list[str]:
    """The labels of the `/attach` blocks in a user's message, in order."""
    return [match["label"] for match in ATTACHMENT.finditer(text)]


def typed_text(text: str) -> str:
    """A user's message without the `/attach` blocks that come first: the words they typed.
    Each block ends with its fence alone on a line, which no line inside it repeats
    (`Attachment.to_markdown` makes the fence longer than any run of backticks inside)."""
    blocks = list(ATTACHMENT.finditer(text))
    if not blocks:
        return text
    last = blocks[-1]
    closing = f"\n{last['fence']}"
    end = text.find(closing + "\n", last.end() - 1)
    if end < 0:
        return ""  # the block runs to the end: nothing was typed after it
    return text[end + len(closing) + 1 :].removeprefix("\n")  # blocks and text: "\n\n" apart


def notebook_references(rows: Sequence[Row]) -> tuple[Notes, Notes]:
    """(variables, cells) referred to in `rows`, in order of first reference."""
    variables: Notes = {}
    cells: Notes = {}
    calls: dict[str, tuple[str, str]] = {}  # call id → (tool, its argument)
    for row in rows:
        if row.role == "assistant_full":
            calls.update(_notebook_calls(row))
        elif row.role == "tool" and row.tool_id in calls:
            tool, argument = calls.pop(row.tool_id)
            if tool in ACTING_TOOLS:
                _read_act(tool, argument, row.content, cells)
            else:
                _read_result(tool, argument, row.content, variables, cells)
        elif row.role == "user":
            _read_attachments(row.content, variables, cells)
    return variables, cells


ARGUMENT = {DESCRIBE_TOOL: "name", INSERT_TOOL: "source", RUN_CODE_TOOL: "code"}


def _notebook_calls(row: Row) -> Iterator[tuple[str, tuple[str, str]]]:
    for call_id, name, arguments in stored_calls(row):
        if not call_id or name not in NOTEBOOK_TOOLS | ACTING_TOOLS:
            continue
        argument = (arguments or {}).get(ARGUMENT.get(name, "number"))
        yield call_id, (name, "" if argument is None else str(argument).strip())


def _read_act(tool: str, argument: str, result: str, cells: Notes) -> None:
    """What an acting tool's result says it did, as a note on its cell or its run."""
    first = result.split("\n", 1)[0]
    code = _first_line(argument)
    if (inserted := INSERTED.match(first)) is not None:
        note = f"inserted by the assistant ({inserted['kind']})" + (f": {code}" if code else "")
        _add(cells, f"cell {inserted['id']}", note)
    elif (edited := EDITED.match(first)) is not None:
        _add(cells, f"cell {edited['id']}", "edited by the assistant")
    elif (ran := RAN.match(first)) is not None:
        ending = ENDINGS[ran["ending"]]
        if ending == "failed":
            ending = "failed: " + first.split(": ", 1)[1] if ": " in first else ending
        if ran["run"]:
            _add(cells, ran["run"], f"{ending} — {code}" if code else ending)
        else:
            _add(
                cells,
                f"cell {ran['id']}",
                f"run by the assistant as In [{ran['number']}]: {ending}",
            )


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _add(cells: Notes, key: str, note: str) -> None:
    cells[key] = _joined(cells.get(key, ""), _note(note))


def _read_result(tool: str, argument: str, result: str, variables: Notes, cells: Notes) -> None:
    first = result.split("\n", 1)[0]
    if tool == DESCRIBE_TOOL and argument and first.startswith(f"{argument}: "):
        variables[argument] = _note(first[len(argument) + 2 :])
    elif tool == CELL_TOOL and argument.isdigit() and first.startswith(f"In [{argument}]:"):
        source = result.split("\n", 2)[1] if "\n" in result else ""
        cells[argument] = _note(source) or cells.get(argument, "")
    elif tool == ERROR_TOOL:
        for match in TRACEBACK_CELL.finditer(result):
            cells.setdefault(match[1] or match[2], "")
    elif tool == LIST_TOOL:
        for line in result.splitlines():
            name, colon, summary = line.partition(": ")
            if colon and name in variables:
                variables[name] = _note(summary)


def _read_attachments(text: str, variables: Notes, cells: Notes) -> None:
    for match in ATTACHMENT.finditer(text):
        if match["name"]:
            variables[match["name"]] = variables.get(match["name"]) or _note(match["type"])
        elif match["number"]:
            body = text[match.end() :].split("\n", 1)[0] if match["kind"] == "Source" else ""
            cells[match["number"]] = _note(body) or cells.get(match["number"], "")
        else:
            body = text[match.end() :]
            for found in TRACEBACK_CELL.finditer(body[: body.find("\n```")]):
                cells.setdefault(found[1] or found[2], "")


def _note(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= NOTE_CHARS else text[: NOTE_CHARS - 2].rstrip() + " …"


def merge_notes(newer: Sequence[tuple[str, str]], older: Sequence[tuple[str, str]]) -> Notes:
    """`older` updated with `newer` (a newer note wins; an empty one keeps the older; the
    notes of what the assistant did to a cell add up)."""
    merged = dict(older)
    for key, note in newer:
        if key.startswith("cell "):
            merged[key] = _joined(merged.get(key, ""), note)
        else:
            merged[key] = note or merged.get(key, "")
    return merged


def _joined(older: str, newer: str) -> str:
    """Both notes' phrases ("; " apart), each once, the oldest dropped while they are too long."""
    phrases = list(dict.fromkeys(p for p in (*older.split("; "), *newer.split("; ")) if p))
    while len(phrases) > 1 and len("; ".join(phrases)) > NOTE_CHARS:
        phrases.pop(0)
    return _note("; ".join(phrases))


def render_variables(variables: Sequence[tuple[str, str]]) -> list[str]:
    return [f"- {name}: {note}" if note else f"- {name}" for name, note in variables]


def render_cells(cells: Sequence[tuple[str, str]]) -> list[str]:
    """`- In [5]: …` for a cell by execution number, `- cell 3f2a…: …` and `- run 2: …` for
    what the assistant did."""
    lines = []
    for key, note in cells:
        label = f"In [{key}]" if key.isdigit() else key
        lines.append(f"- {label}: {note}" if note else f"- {label}")
    return lines


def parse_variables(lines: Sequence[str]) -> list[tuple[str, str]]:
    found = (VARIABLE_LINE.match(line.rstrip()) for line in lines)
    return [(m["name"], m["note"] or "") for m in found if m]


def parse_cells(lines: Sequence[str]) -> list[tuple[str, str]]:
    found = (CELL_LINE.match(line.rstrip()) for line in lines)
    return [(m["number"] or m["key"], m["note"] or "") for m in found if m]

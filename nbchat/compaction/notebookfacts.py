"""Notebook facts: the variables and cells a conversation referred to, read from its rows by code.

The chat lives in a kernel; after a compaction the model should still know which of the user's
variables and cells it was working with, even when a small summariser forgot them. They come
from:
- the notebook tools' calls and results (`nbchat.tools.notebook`): `describe_variable(name)`
  and the first line of its answer (`name: DataFrame, shape 3×2, …`); `read_cell(number)` and
  the first line of the source it returned; `last_error`'s traceback, for the cells it names
  (`Cell In[5]`, `<ipython-input-5-…>`); `list_notebook_variables` only refreshes the summary
  of variables already referred to (a listing is a directory view, like `list_files`, whose
  entries are not recorded either);
- `/attach` blocks in the user's messages (`nbchat.ui.attach`: "Source of cell 3:",
  "Output of cell 3:", "The variable df (DataFrame):", "The last error:", each followed by a
  code fence).

Rendered under their own headings in the recorded facts and read back from a previous summary,
so they carry through every compaction. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from nbchat.history import Row, stored_calls

__all__ = [
    "CELLS_HEADING",
    "NOTEBOOK_TOOLS",
    "VARIABLES_HEADING",
    "attachments_in",
    "merge_notes",
    "notebook_references",
    "parse_cells",
    "parse_variables",
    "render_cells",
    "render_variables",
    "typed_text",
]

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
CELL_LINE = re.compile(r"^- In \[(?P<number>\d+)\](?:: (?P<note>.*))?$")

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
            _read_result(tool, argument, row.content, variables, cells)
        elif row.role == "user":
            _read_attachments(row.content, variables, cells)
    return variables, cells


def _notebook_calls(row: Row) -> Iterator[tuple[str, tuple[str, str]]]:
    for call_id, name, arguments in stored_calls(row):
        if not call_id or name not in NOTEBOOK_TOOLS:
            continue
        argument = (arguments or {}).get("name" if name == DESCRIBE_TOOL else "number")
        yield call_id, (name, "" if argument is None else str(argument).strip())


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
    """`older` updated with `newer` (a newer note wins; an empty one keeps the older)."""
    merged = dict(older)
    for key, note in newer:
        merged[key] = note or merged.get(key, "")
    return merged


def render_variables(variables: Sequence[tuple[str, str]]) -> list[str]:
    return [f"- {name}: {note}" if note else f"- {name}" for name, note in variables]


def render_cells(cells: Sequence[tuple[str, str]]) -> list[str]:
    return [f"- In [{number}]: {note}" if note else f"- In [{number}]" for number, note in cells]


def parse_variables(lines: Sequence[str]) -> list[tuple[str, str]]:
    found = (VARIABLE_LINE.match(line.rstrip()) for line in lines)
    return [(m["name"], m["note"] or "") for m in found if m]


def parse_cells(lines: Sequence[str]) -> list[tuple[str, str]]:
    found = (CELL_LINE.match(line.rstrip()) for line in lines)
    return [(m["number"], m["note"] or "") for m in found if m]

"""The notebook's cells as the model sees them: the `Document` a front end holds, how a cell is
named (its id, an id's first characters, or its position), what each cell's state is against
what the kernel ran, and the diff of an edit.

A cell's state compares the document with `KernelState`: a code cell that never ran; one that
ran as In [N] and still holds that source; one *edited since it ran* (its source differs from
what ran as N); one that ran *out of order* (a cell above it ran after it); and for the user's
variables, the ones whose cell has *changed since* or is *no longer in the notebook*.

The `Document` is a seam: the widget's front-end link (`nbchat.ui.document`) in JupyterLab and
Notebook 7; nothing where no front end holds a notebook (`why_absent` says why, in one sentence).
`take_back` undoes one change the assistant made (for a rewind), never over the user's own edit.
Must not: talk to a front end, or run code.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from nbchat.errors import CellChangedError, ToolError
from nbchat.tools.kernelstate import Execution, Origin

__all__ = [
    "Cell",
    "Document",
    "NoDocument",
    "cell_states",
    "find_cell",
    "line_diff",
    "stale_variables",
    "take_back",
]

FIRST_LINE = 80  # characters of a cell's first line in a listing
ID_SHOWN = 8  # characters of a cell id shown (any unique start of an id names the cell)
TAKE_BACK_TIMEOUT = 10.0  # seconds the front end gets to answer one change taken back


@dataclass(frozen=True)
class Cell:
    """One cell of the document: its id, kind ("code", "markdown", "raw"), source, and
    execution count (None when it has none)."""

    id: str
    kind: str
    source: str
    number: int | None = None

    @property
    def short_id(self) -> str:
        return self.id[:ID_SHOWN]


class Document(Protocol):
    """The notebook a front end holds, as the acting tools use it. Writes wait for the front
    end's answer (at most `timeout` seconds) and raise `ToolError` saying why they failed;
    `expected` is the source the caller last saw: a cell whose source differs is left as it is
    (`CellChangedError`)."""

    def why_absent(self) -> str:
        """ "" when a notebook document is there, else one sentence saying why it is not."""
        ...

    def cells(self) -> tuple[Cell, ...]: ...

    def own_cell(self) -> str:
        """The id of the cell the chat is shown in ("" when it is not found)."""
        ...

    def insert(self, index: int, kind: str, source: str, *, timeout: float) -> Cell: ...

    def set_source(self, cell_id: str, source: str, *, expected: str, timeout: float) -> None: ...

    def delete(self, cell_id: str, *, expected: str, timeout: float) -> None: ...

    def set_outputs(
        self, cell_id: str, outputs: list[dict[str, Any]], *, number: int, timeout: float
    ) -> None:
        """Put a run's outputs (nbformat dicts) and execution count into the cell."""
        ...


class NoDocument:
    """The `Document` where no front end holds a notebook: `why` says why, every write fails."""

    def __init__(self, why: str) -> None:
        self.why = why

    def why_absent(self) -> str:
        return self.why

    def cells(self) -> tuple[Cell, ...]:
        return ()

    def own_cell(self) -> str:
        return ""

    def insert(self, index: int, kind: str, source: str, *, timeout: float) -> Cell:
        raise ToolError(f"No notebook document: {self.why}")

    def set_source(self, cell_id: str, source: str, *, expected: str, timeout: float) -> None:
        raise ToolError(f"No notebook document: {self.why}")

    def delete(self, cell_id: str, *, expected: str, timeout: float) -> None:
        raise ToolError(f"No notebook document: {self.why}")

    def set_outputs(
        self, cell_id: str, outputs: list[dict[str, Any]], *, number: int, timeout: float
    ) -> None:
        raise ToolError(f"No notebook document: {self.why}")


def find_cell(cells: Sequence[Cell], reference: str) -> tuple[int, Cell]:
    """(index, cell) for `reference`: a cell id, the first characters of one, or a position
    ("3" or "#3": 1 is the first cell). A `ToolError` says what exists otherwise."""
    wanted = reference.strip().removeprefix("#").strip()
    for index, cell in enumerate(cells):
        if cell.id == wanted:
            return index, cell
    if wanted.isdigit():
        position = int(wanted)
        if 1 <= position <= len(cells):
            return position - 1, cells[position - 1]
        raise ToolError(
            f"There is no cell at position {position}: the notebook has {len(cells)} cells "
            "(1 is the first). list_cells shows them."
        )
    found = [(i, c) for i, c in enumerate(cells) if wanted and c.id.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    if found:
        raise ToolError(f"{len(found)} cells have ids starting {wanted!r}; give more of the id.")
    raise ToolError(
        f"No cell has the id {wanted!r}. Name a cell by its id or its position (1 is the first "
        "cell); list_cells shows them."
    )


def cell_states(
    cells: Sequence[Cell], executions: Mapping[int, Execution], history: Sequence[str]
) -> list[str]:
    """One note per cell ("" for nothing to say): never ran, edited since it ran as In [N],
    ran out of order. `history` is the kernel's raw input history (In), `executions` what
    `KernelState` saw."""
    notes = []
    highest = 0
    for cell in cells:
        if cell.kind != "code":
            notes.append("")
            continue
        if cell.number is None:
            notes.append("never ran" if cell.source.strip() else "")
            continue
        said = []
        ran = _ran_as(cell, executions, history)
        if ran is None:
            said.append(
                f"shows In [{cell.number}], which this kernel has not run (it ran before a restart)"
            )
        elif ran.rstrip() != cell.source.rstrip():
            said.append(f"edited since it ran as In [{cell.number}]")
        if cell.number < highest:
            said.append("ran out of order (a cell above it ran later)")
        highest = max(highest, cell.number)
        notes.append("; ".join(said))
    return notes


def _ran_as(cell: Cell, executions: Mapping[int, Execution], history: Sequence[str]) -> str | None:
    """The source the kernel ran as the cell's number, or None when this kernel never ran it."""
    number = cell.number or 0
    execution = executions.get(number)
    if execution is not None:
        return execution.source
    if 0 < number < len(history):
        return history[number]
    return None


def stale_variables(
    origins: Mapping[str, Origin], cells: Sequence[Cell], executions: Mapping[int, Execution]
) -> list[str]:
    """`name: from In [N], whose cell …` for each variable whose cell has changed since it ran
    or is no longer in the notebook (sorted by name)."""
    by_id = {cell.id: cell for cell in cells}
    by_number = {cell.number: cell for cell in cells if cell.number is not None}
    lines = []
    for name in sorted(origins):
        origin = origins[name]
        if origin.run:
            continue  # the assistant's runs have no cell
        execution = executions.get(origin.number)
        cell = by_id.get(origin.cell_id) if origin.cell_id else by_number.get(origin.number)
        if cell is None:
            lines.append(
                f"{name}: set by In [{origin.number}], whose cell is no longer in the notebook"
            )
        elif execution is not None and execution.source.rstrip() != cell.source.rstrip():
            lines.append(
                f"{name}: set by In [{origin.number}] (cell {cell.short_id}), which has been "
                "edited since it ran"
            )
    return lines


def line_diff(before: str, after: str, *, name: str = "cell") -> str:
    """A unified diff of two sources ("" when they are the same)."""
    lines = difflib.unified_diff(
        before.splitlines(),
        after.splitlines(),
        fromfile=f"{name} (before)",
        tofile=f"{name} (after)",
        lineterm="",
    )
    return "\n".join(lines)


def first_line(source: str) -> str:
    line = source.strip().split("\n", 1)[0]
    return line if len(line) <= FIRST_LINE else line[: FIRST_LINE - 1] + "…"


def take_back(document: Document, *, kind: str, cell_id: str, before: str, after: str) -> str:
    """Undo one change the assistant made, if the cell still holds what the assistant left
    in it: an inserted cell is deleted, an edited one gets its `before` source back. What was
    done, or why the cell was left alone, in a few words."""
    why = document.why_absent()
    if why:
        return f"left alone: {why}"
    found = next((cell for cell in document.cells() if cell.id == cell_id), None)
    if found is None:
        return "already gone from the notebook"
    if found.source != after:
        return "left alone: edited by hand since the assistant changed it"
    try:
        if kind == "insert":
            document.delete(cell_id, expected=after, timeout=TAKE_BACK_TIMEOUT)
            return "removed"
        document.set_source(cell_id, before, expected=after, timeout=TAKE_BACK_TIMEOUT)
        return "restored"
    except CellChangedError:
        return "left alone: edited by hand since the assistant changed it"
    except ToolError as exc:
        return f"left alone: {exc}"

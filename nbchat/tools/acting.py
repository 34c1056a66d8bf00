"""The tools that act on the notebook: list its cells, insert a cell, edit one, run code, run a
cell.

- `list_cells`: the document's cells with their ids and positions, each marked when it never
  ran, was edited since it ran, or ran out of order, then the variables whose cell changed or
  went (`nbchat.tools.cells`); with no document, the kernel's own history instead.
- `insert_cell` (not dangerous: it runs nothing, shows in the notebook at once, and a rewind
  takes it back): below the chat's own cell unless told where.
- `edit_cell` (dangerous): the approval card shows the diff (`Tool.review`); the change is
  written only if the cell still holds what the card showed, so a cell the user edited meanwhile
  is never overwritten (`CellChangedError`).
- `run_code`, `run_cell` (dangerous): the card shows exactly the code; they run through
  `KernelRunner` (the kernel's main thread, between executions, bounded).

Every insert and edit is handed to `journal` (the chat stores it, for the rewind). Where no front
end holds a notebook document (VS Code's renderer, Voilà, nbclient, a script), insert and edit
say why in one sentence and give the code in a fence, which the chat shows with a copy button;
running still works. Must not: talk to a front end or a store directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nbchat.errors import CellChangedError, ToolError
from nbchat.tools.cells import (
    Cell,
    Document,
    cell_states,
    find_cell,
    first_line,
    line_diff,
    stale_variables,
)
from nbchat.tools.context import ToolContext
from nbchat.tools.execution import fenced, to_outputs
from nbchat.tools.kernelrun import KernelRunner, Run
from nbchat.tools.preview import mask_secrets
from nbchat.tools.registry import Review, Tool

__all__ = ["ACTING_TOOLS", "CellChange", "acting_tools"]

ACTING_TOOLS = ("list_cells", "insert_cell", "edit_cell", "run_code", "run_cell")
DOCUMENT_TIMEOUT = 10.0  # seconds the front end gets to answer a change
LISTING_LIMIT = 4000  # characters of a listing
HISTORY_SHOWN = 30  # the kernel's newest inputs listed when there is no document
NO_DOCUMENT = "Not {done}: {why} The code is shown to the user in the chat, to copy:\n{code}"


@dataclass(frozen=True)
class CellChange:
    """One change the assistant made to the document, for the rewind: `before` is "" for an
    inserted cell."""

    call_id: str
    kind: Literal["insert", "edit"]
    cell_id: str
    cell_kind: str
    before: str
    after: str


def acting_tools(
    document: Document,
    runner: KernelRunner,
    *,
    journal: Callable[[CellChange], None],
) -> tuple[Tool, ...]:
    """The five acting tools over `document` and `runner`'s kernel (`_Acting`'s methods of the
    same names, described to the model by their docstrings)."""
    act = _Acting(document, runner, journal)
    reviewers = {"edit_cell": act.review_edit, "run_code": _review_code, "run_cell": act.review_run}
    tools = []
    for name in ACTING_TOOLS:
        tool = Tool.from_function(getattr(act, name), dangerous=name in reviewers)
        tools.append(dataclasses.replace(tool, review=reviewers.get(name)))
    return tuple(tools)


def _review_code(_call_id: str, arguments: Mapping[str, Any]) -> Review:
    return Review("code", str(arguments.get("code", "")), "runs in the notebook's kernel")


class _Acting:
    """The tools (its methods named as them) and what they share: the document, the runner,
    the journal, and the sources the approval cards showed (by call id), which an edit must
    still find in its cell."""

    def __init__(
        self, document: Document, runner: KernelRunner, journal: Callable[[CellChange], None]
    ) -> None:
        self.document = document
        self.runner = runner
        self.journal = journal
        self.shown: dict[str, tuple[str, str]] = {}  # call id → (cell id, source on the card)

    def list_cells(self, ctx: ToolContext, cell: str | int = "") -> str:
        """List the notebook's cells: position, id, kind, first line, and whether each never
        ran, was edited since it ran, or ran out of order; with `cell`, its whole source.

        Args:
            cell: a cell's id or position (1 is the first cell), to see all of its source.
        """
        reference = str(cell)
        why = self.document.why_absent()
        if why:
            return self._history_listing(why, reference)
        cells = self.document.cells()
        if reference.strip():
            index, found = find_cell(cells, reference)
            head = f"Cell {index + 1} (id {found.id}, {found.kind}{_count(found)}):\n"
            return mask_secrets(head + fenced(found.source))
        return mask_secrets(_cut(self._cells_listing(cells)))

    def _cells_listing(self, cells: tuple[Cell, ...]) -> str:
        state = self.runner.state
        executions = state.executions()
        notes = cell_states(cells, executions, _history(self.runner.shell))
        own = self.document.own_cell()
        lines = [f"The notebook has {len(cells)} cells (position, id, kind, first line):"]
        for index, (cell, note) in enumerate(zip(cells, notes, strict=True)):
            mark = " (this chat)" if cell.id == own else ""
            said = f" — {note}" if note else ""
            line = f"{index + 1}. {cell.short_id} {cell.kind}{_count(cell)}{mark}: "
            lines.append(line + first_line(cell.source) + said)
        stale = stale_variables(state.origins(), cells, executions)
        if stale:
            lines += ["Variables whose cell changed or is gone:", *(f"- {s}" for s in stale)]
        return "\n".join(lines)

    def _history_listing(self, why: str, reference: str) -> str:
        history = _history(self.runner.shell)
        if reference.strip().isdigit() and 0 < int(reference) < len(history):
            return mask_secrets(f"In [{reference}]:\n" + fenced(history[int(reference)]))
        shown = [
            f"In [{number}]: {first_line(history[number])}"
            for number in range(max(1, len(history) - HISTORY_SHOWN), len(history))
        ]
        intro = f"No notebook document: {why} The kernel's newest inputs instead:"
        return mask_secrets(_cut("\n".join([intro, *shown] if shown else [intro, "(none)"])))

    def insert_cell(
        self,
        ctx: ToolContext,
        source: str,
        kind: Literal["code", "markdown"] = "code",
        after: str | int = "",
    ) -> str:
        """Insert a new cell into the user's notebook (it does not run it).

        Args:
            source: the new cell's code (or markdown text).
            kind: "code" or "markdown".
            after: the cell to put it below (id or position); default: below the chat.
        """
        why = self.document.why_absent()
        if why:
            return NO_DOCUMENT.format(done="inserted", why=why, code=fenced(source, _info(kind)))
        cells = self.document.cells()
        if str(after).strip():
            index, _ = find_cell(cells, str(after))
            where = f"below cell {index + 1}"
        else:
            own = self.document.own_cell()
            index = next((i for i, c in enumerate(cells) if c.id == own), len(cells) - 1)
            where = "below the chat" if own else "at the end of the notebook"
        cell = self.document.insert(index + 1, kind, source, timeout=DOCUMENT_TIMEOUT)
        self.journal(CellChange(ctx.call_id, "insert", cell.id, kind, "", source))
        return (
            f"Inserted a {kind} cell at position {index + 2} (id {cell.short_id}), {where}. "
            "It has not run" + (" (run_cell runs it)." if kind == "code" else ".")
        )

    def review_edit(self, call_id: str, arguments: Mapping[str, Any]) -> Review | None:
        if self.document.why_absent():
            return None
        index, cell = find_cell(self.document.cells(), str(arguments.get("cell", "")))
        after = _edited(cell.source, str(arguments.get("new", "")), str(arguments.get("old", "")))
        self.shown[call_id] = (cell.id, cell.source)
        note = f"cell {index + 1} (id {cell.short_id})"
        return Review("diff", line_diff(cell.source, after, name=note) or "(no change)", note)

    def edit_cell(self, ctx: ToolContext, cell: str | int, new: str, old: str = "") -> str:
        """Change a cell of the user's notebook: replace the exact text `old` (found once in
        the cell) with `new`; without `old`, `new` becomes the whole cell. The user sees a diff.

        Args:
            cell: the cell's id or position (1 is the first cell).
            new: the replacement text (or the cell's whole new source).
            old: the exact text to replace; leave out to replace the whole cell.
        """
        why = self.document.why_absent()
        if why:
            shown = new if not old else f"Replace:\n{fenced(old)}\nwith:\n{fenced(new)}"
            code = fenced(new) if not old else shown
            return NO_DOCUMENT.format(done="edited", why=why, code=code)
        index, found = find_cell(self.document.cells(), str(cell))
        name = f"cell {index + 1} (id {found.short_id})"
        if self.shown.pop(ctx.call_id, (found.id, found.source)) != (found.id, found.source):
            raise CellChangedError(
                f"Not edited: {name} changed while the edit waited for approval (the user "
                "edited it). Read it again with list_cells."
            )
        after = _edited(found.source, new, old)
        if after == found.source:
            return f"{name[0].upper()}{name[1:]} already holds that; nothing changed."
        self.document.set_source(found.id, after, expected=found.source, timeout=DOCUMENT_TIMEOUT)
        self.journal(CellChange(ctx.call_id, "edit", found.id, found.kind, found.source, after))
        return f"Edited {name}:\n" + fenced(line_diff(found.source, after, name=name), "diff")

    def review_run(self, _call_id: str, arguments: Mapping[str, Any]) -> Review:
        index, cell, source = self._cell_to_run(str(arguments.get("cell", "")))
        where = f"cell {index + 1} (id {cell.short_id})" if cell else f"In [{index}]"
        return Review("code", source, f"{where}, run in the notebook's kernel")

    def run_code(self, ctx: ToolContext, code: str, timeout: float | None = None) -> str:
        """Run Python code in the notebook's kernel, where the user's variables are, and get
        what it printed, its result, what it displayed and any error.

        Args:
            code: the code to run, as in a cell.
            timeout: seconds before it is interrupted.
        """
        return self.runner.run(ctx, code, timeout=timeout).result()

    def run_cell(self, ctx: ToolContext, cell: str | int, timeout: float | None = None) -> str:
        """Run one of the notebook's cells in the kernel and get its output.

        Args:
            cell: the cell's id or position (1 is the first cell).
            timeout: seconds before it is interrupted.
        """
        _, found, source = self._cell_to_run(str(cell))
        if found is None:  # no document: the kernel's own history entry runs as the model's code
            return self.runner.run(ctx, source, timeout=timeout).result()
        if found.kind != "code":
            raise ToolError(f"Cell {found.short_id} is a {found.kind} cell: only code cells run.")
        run = self.runner.run(ctx, source, timeout=timeout, cell_id=found.id)
        if run.number:
            try:
                outputs = to_outputs(run.ran, run.number)
                self.document.set_outputs(
                    found.id, outputs, number=run.number, timeout=DOCUMENT_TIMEOUT
                )
            except ToolError as exc:  # the run happened; only its outputs are not in the cell
                return _with_note(run, f"(Its outputs could not be put in the cell: {exc})")
        return run.result()

    def _cell_to_run(self, reference: str) -> tuple[int, Cell | None, str]:
        if not self.document.why_absent():
            index, cell = find_cell(self.document.cells(), reference)
            return index, cell, cell.source
        history = _history(self.runner.shell)
        wanted = reference.strip().removeprefix("In").strip(" []#")
        if wanted.isdigit() and 0 < int(wanted) < len(history):
            return int(wanted), None, history[int(wanted)]
        raise ToolError(
            f"No notebook document here ({self.document.why_absent()}), so a cell is named by "
            f"its execution number (In [N]), and there is no In [{wanted}]."
        )


def _with_note(run: Run, note: str) -> str:
    text = f"{run.text}\n{note}"
    if not run.ok:
        raise ToolError(text)
    return text


def _edited(source: str, new: str, old: str) -> str:
    if not old:
        return new
    count = source.count(old)
    if count != 1:
        found = "was not found" if count == 0 else f"occurs {count} times"
        raise ToolError(
            f"The text to replace {found} in the cell; copy it exactly from list_cells (with "
            "more of the lines around it when it occurs more than once), or leave out `old` to "
            "replace the whole cell."
        )
    return source.replace(old, new, 1)


def _history(shell: Any) -> list[str]:
    manager = getattr(shell, "history_manager", None)
    raw = getattr(manager, "input_hist_raw", None)
    return [str(line) for line in raw] if isinstance(raw, list) else []


def _count(cell: Cell) -> str:
    return f", In [{cell.number}]" if cell.number is not None else ""


def _info(kind: str) -> str:
    return "python" if kind == "code" else "markdown"


def _cut(text: str) -> str:
    if len(text) <= LISTING_LIMIT:
        return text
    kept = text[:LISTING_LIMIT].rsplit("\n", 1)[0]
    rest = text[len(kept) :].count("\n")
    return f"{kept}\n… and {rest:,} more lines (list_cells with a cell shows one whole)."

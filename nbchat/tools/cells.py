"""What the kernel ran and what the notebook holds: `KernelState` from IPython's events, and the
cells as the model sees them against it.

The model reasons about the notebook from what it reads, and a notebook's cells are not what the
kernel ran: a cell edited since it ran, cells run out of order, a variable whose cell was deleted.
So the chat follows the kernel's executions from the moment it starts (IPython's `pre_run_cell`
and `post_run_cell` events, on the kernel's main thread): for each execution its number, the
front end's cell id (ipykernel passes it) and the source it ran, and which of the user's names it
bound or rebound (compared by identity before and after, so no user code runs). The assistant's
own runs (`nbchat.tools.kernelrun`) are recorded here too, by `note_run`: that is
`KernelState`, what this kernel actually ran, as seen from IPython's own events.

It also says whether a user's cell is executing now (`executing`), and calls its listeners when
one starts and when one ends (`on_change`), which is how model code queued behind a cell learns
that the kernel is free (`nbchat.tools.kernelrun`).

One `KernelState` per shell (`kernel_state`), shared by every chat in the kernel.

The notebook's cells as the model sees them: the `Document` a front end holds, how a cell is
named (its id, an id's first characters, or its position), what each cell's state is against
what the kernel ran, and the diff of an edit.

A cell's state compares the document with `KernelState`: a code cell that never ran; one that
ran as In [N] and still holds that source; one *edited since it ran* (its source differs from
what ran as N); one that ran *out of order* (a cell above it ran after it); and for the user's
variables, the ones whose cell has *changed since* or is *no longer in the notebook*.

The `Document` is a seam: the widget's front-end link (`nbchat.ui.acting`) in JupyterLab and
Notebook 7; nothing where no front end holds a notebook (`why_absent` says why, in one sentence).
`take_back` undoes one change the assistant made (for a rewind), never over the user's own edit.

Must not: talk to a front end, run user code, read values (only their `id`), or change the
namespace.
"""

from __future__ import annotations

import contextlib
import difflib
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from nbchat.errors import CellChangedError, ToolError

__all__ = [
    "Cell",
    "Document",
    "Execution",
    "KernelState",
    "NoDocument",
    "Origin",
    "cell_states",
    "find_cell",
    "kernel_state",
    "line_diff",
    "stale_variables",
    "take_back",
]


RUNS_KEPT = 2000  # executions remembered; older ones are forgotten (their numbers stay in In)


class EventShell(Protocol):
    """What is read of IPython's shell: its namespace, its counter and its events."""

    user_ns: dict[str, Any]
    execution_count: int
    events: Any


@dataclass(frozen=True)
class Execution:
    """One execution: `number` as in In [number] (0 for an assistant's run, which is kept out
    of the user's history), the front end's `cell_id` ("" when none was sent), the `source` as
    typed, and `run` the assistant's run number (0 for the user's cells)."""

    number: int
    cell_id: str
    source: str
    run: int = 0


@dataclass(frozen=True)
class Origin:
    """The execution that last bound a name (`number` or an assistant's `run`)."""

    number: int
    cell_id: str
    run: int = 0

    def describe(self) -> str:
        if self.run:
            return f"the assistant's run {self.run}"
        return f"In [{self.number}]"


_states: weakref.WeakKeyDictionary[Any, KernelState] = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def kernel_state(shell: EventShell) -> KernelState:
    """The one `KernelState` of `shell`, made (and hooked into its events) on first use."""
    with _states_lock:
        state = _states.get(shell)
        if state is None:
            state = _states[shell] = KernelState(shell)
            state.attach()
        return state


class KernelState:
    """Executions, the origins of the user's names, and whether a cell is executing now."""

    def __init__(self, shell: EventShell) -> None:
        self._shell = shell
        self._lock = threading.Lock()
        self._depth = 0  # user cells executing (a cell may run another with run_cell)
        self._before: list[tuple[dict[str, int], int, str, str]] = []
        self._executions: dict[int, Execution] = {}
        self._origins: dict[str, Origin] = {}
        self._listeners: list[Callable[[bool], None]] = []
        self._runs = 0

    def attach(self) -> None:
        self._shell.events.register("pre_run_cell", self._on_pre_run_cell)
        self._shell.events.register("post_run_cell", self._on_post_run_cell)

    def detach(self) -> None:
        for name, hook in (
            ("pre_run_cell", self._on_pre_run_cell),
            ("post_run_cell", self._on_post_run_cell),
        ):
            with contextlib.suppress(ValueError):  # already gone: nothing to take back
                self._shell.events.unregister(name, hook)

    @property
    def executing(self) -> bool:
        """Whether a user's cell is executing now."""
        return self._depth > 0

    def on_change(self, listener: Callable[[bool], None]) -> None:
        """Call `listener(executing)` on the main thread when a cell starts and when it ends."""
        with self._lock:
            self._listeners.append(listener)

    def off_change(self, listener: Callable[[bool], None]) -> None:
        """Stop calling `listener` (a chat that closed)."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def executions(self) -> dict[int, Execution]:
        """The user's executions this state saw, by number (a copy)."""
        with self._lock:
            return dict(self._executions)

    def origins(self) -> dict[str, Origin]:
        """The user's names with the execution that last bound them (a copy)."""
        with self._lock:
            return dict(self._origins)

    def next_run(self) -> int:
        """The number of the assistant's next run."""
        with self._lock:
            self._runs += 1
            return self._runs

    def snapshot(self) -> dict[str, int]:
        """The user's names with the `id` of what each holds (no user code runs)."""
        return {
            name: id(value)
            for name, value in list(self._shell.user_ns.items())
            if type(name) is str and not name.startswith("_")
        }

    def note_run(
        self, before: dict[str, int], *, number: int, cell_id: str, source: str, run: int
    ) -> None:
        """The assistant's run `run` ended: a cell's source under execution `number`, or (0)
        its own code. The names it bound come from it."""
        if number:
            with self._lock:
                self._executions[number] = Execution(number, cell_id, source, run)
            self._bind(before, Origin(number, cell_id))
        else:
            self._bind(before, Origin(0, "", run))

    def _on_pre_run_cell(self, info: Any) -> None:
        stored = bool(getattr(info, "store_history", False))
        # IPython counts the cell before this event: it runs as the number before the counter.
        number = self._shell.execution_count - 1 if stored else 0
        cell_id = getattr(info, "cell_id", None)
        source = getattr(info, "raw_cell", "")
        with self._lock:
            self._depth += 1
            self._before.append(
                (
                    self.snapshot(),
                    number,
                    cell_id if isinstance(cell_id, str) else "",
                    source if isinstance(source, str) else "",
                )
            )
        self._tell(True)

    def _on_post_run_cell(self, _result: Any) -> None:
        with self._lock:
            if not self._before:  # hooked in while this cell ran: its start was not seen
                return
            before, number, cell_id, source = self._before.pop()
            self._depth -= 1
            if number:
                self._executions[number] = Execution(number, cell_id, source)
                if len(self._executions) > RUNS_KEPT:
                    del self._executions[min(self._executions)]
        if number:
            self._bind(before, Origin(number, cell_id))
        self._tell(False)

    def _bind(self, before: dict[str, int], origin: Origin) -> None:
        after = self.snapshot()
        with self._lock:
            for name, identity in after.items():
                if before.get(name) != identity:
                    self._origins[name] = origin
            for name in before.keys() - after.keys():
                self._origins.pop(name, None)

    def _tell(self, executing: bool) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(executing)


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

"""`KernelState`: what this kernel actually ran, as seen from IPython's own events.

The model reasons about the notebook from what it reads, and a notebook's cells are not what the
kernel ran: a cell edited since it ran, cells run out of order, a variable whose cell was deleted.
So the chat follows the kernel's executions from the moment it starts (IPython's `pre_run_cell`
and `post_run_cell` events, on the kernel's main thread): for each execution its number, the
front end's cell id (ipykernel passes it) and the source it ran, and which of the user's names it
bound or rebound (compared by identity before and after, so no user code runs). The assistant's
own runs (`nbchat.tools.kernelrun`) are recorded here too, by `note_run`.

It also says whether a user's cell is executing now (`executing`), and calls its listeners when
one starts and when one ends (`on_change`), which is how model code queued behind a cell learns
that the kernel is free (`nbchat.tools.kernelqueue`).

One `KernelState` per shell (`kernel_state`), shared by every chat in the kernel. Must not run
user code, read values (only their `id`), or change the namespace.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Execution", "KernelState", "Origin", "kernel_state"]

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

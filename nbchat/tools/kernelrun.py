"""Running code for the model: `run_code` (code the model wrote) and a cell's source (`run_cell`),
each on the kernel's main thread between executions (`KernelQueue`), bounded in time and output.

A run has a time limit (the tool call's, or less when the model asks): past it, or when Stop is
pressed, KeyboardInterrupt is raised in the running code; code that was still queued behind a
user's cell is not run at all. Its text starts with how it ended, in words the transcript and the
compaction facts read back (`nbchat.compaction.notebookfacts`):

    Finished: run 3 ran in 0.12 s.
    Error in run 3: ZeroDivisionError: division by zero
    Timed out: run 3 was interrupted after 5 s (KeyboardInterrupt).
    Error: stopped by the user; run 3 was interrupted (KeyboardInterrupt).
    Not run: run 3 …

A run of the model's own code is "run N" and stays out of the user's history; a cell's run takes
the next execution number, as if the user had run it ("cell 3f2a1b2c (In [7])"), so In [7] and
the cell's prompt agree. A run that did not finish is raised as a `ToolError` by the tool
(`Run.result`), so the call's result is marked failed. Must not: know about the document beyond
the cell's id, or about widgets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext
from nbchat.tools.execution import Ran, describe, run_source
from nbchat.tools.kernelqueue import KernelQueue, Waited, run_job
from nbchat.tools.kernelstate import KernelState

__all__ = ["KernelRunner", "Run"]

NOT_SERVED = (
    "the kernel's main thread did not become free within {limit:g} s (a cell ran all that "
    "time; or, in a terminal IPython, nothing ran the queue: call ui.wait())"
)


@dataclass(frozen=True)
class Run:
    """A run as it ended: its text for the model, whether it finished (`ok`), what it
    produced, and its execution number (0 for the model's own code, or when it never ran)."""

    text: str
    ok: bool
    ran: Ran
    number: int

    def result(self) -> str:
        """The text, raised as a `ToolError` when the run did not finish."""
        if not self.ok:
            raise ToolError(self.text)
        return self.text


class KernelRunner:
    """Runs sources in `shell`'s namespace through `queue`; `on_queued(subject)` is called when
    a run has to wait for a user's cell (the chat says so)."""

    def __init__(
        self,
        shell: Any,
        state: KernelState,
        queue: KernelQueue,
        *,
        on_queued: Callable[[str], None] = lambda _subject: None,
    ) -> None:
        self.shell = shell
        self.state = state
        self.queue = queue
        self.on_queued = on_queued

    def run(
        self, ctx: ToolContext, source: str, *, timeout: float | None, cell_id: str = ""
    ) -> Run:
        """Run `source` (a cell's, when `cell_id` is given)."""
        limit = ctx.time_limit(timeout)
        deadline = min(ctx.deadline or float("inf"), time.monotonic() + limit)
        run = self.state.next_run()
        numbers: list[int] = []

        def job() -> Ran:
            before = self.state.snapshot()
            number = self._take_number(source) if cell_id else 0
            numbers.append(number)
            label = f"In [{number}]" if number else f"run {run}"
            try:
                return run_source(self.shell, source, limit=ctx.output_limit, label=label)
            finally:
                self.state.note_run(before, number=number, cell_id=cell_id, source=source, run=run)

        subject = "the cell" if cell_id else f"run {run}"
        waited = run_job(
            self.queue,
            job,
            deadline=deadline,
            stop=ctx.stop,
            on_queued=lambda: self.on_queued(subject),
        )
        number = numbers[0] if numbers else 0
        if number:
            subject = f"cell {cell_id[:8]} (In [{number}])"
        text, ok = _text(waited, subject, limit)
        return Run(text, ok, _ran(waited), number)

    def _take_number(self, source: str) -> int:
        """The next execution number, with `source` in the history as In [number]."""
        shell = self.shell
        number = int(shell.execution_count)
        shell.execution_count = number + 1
        history = getattr(shell, "history_manager", None)
        if history is not None:
            history.store_inputs(number, shell.transform_cell(source), source)
        return number


def _ran(waited: Waited) -> Ran:
    value = waited.ticket.value
    return value if isinstance(value, Ran) else Ran("error", 0.0)


def _text(waited: Waited, subject: str, limit: float) -> tuple[str, bool]:
    """The run's text, and whether it finished."""
    queued = (
        f" It waited {waited.waited:.1f} s for a running cell to finish first."
        if waited.ticket.said_queued and waited.ended != "not started"
        else ""
    )
    if waited.ended == "not started":
        why = "Stop was pressed" if waited.reason == "stopped" else NOT_SERVED.format(limit=limit)
        return f"Not run: {subject} did not start: {why}. Nothing was changed.", False
    if waited.ended == "still running":
        return (
            f"Error: {subject} is still running: it did not stop on KeyboardInterrupt. Ask the "
            "user to interrupt the kernel (Kernel > Interrupt) or restart it."
        ), False
    error = waited.ticket.error
    if error is not None:  # the job itself failed (not the code: run_source catches that)
        return f"Error in {subject}: {type(error).__name__}: {error}", False
    ran = _ran(waited)
    if ran.ending == "ok":
        return describe(ran, f"Finished: {subject} ran in {ran.duration:.2g} s.{queued}"), True
    if ran.ending == "error":
        return describe(ran, f"Error in {subject}: {ran.headline}{queued}"), False
    if waited.reason == "stopped":
        heading = f"Error: stopped by the user; {subject} was interrupted (KeyboardInterrupt)."
    elif waited.reason == "time limit":
        heading = (
            f"Timed out: {subject} was interrupted after {limit:g} s (KeyboardInterrupt). Ask "
            "for less at once, or pass a longer timeout."
        )
    else:
        heading = (
            f"Error: {subject} was interrupted (KeyboardInterrupt: the kernel was interrupted)."
        )
    return describe(ran, heading + queued), False

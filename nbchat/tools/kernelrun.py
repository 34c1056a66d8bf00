"""Running code for the model on the kernel's main thread: the queue between executions
(`KernelQueue`) and the runs it carries (`run_code`, `run_cell`).

`KernelQueue`: the user's namespace belongs to the kernel's main thread: code run from another
thread would race the user's own cells (and SIGINT, the only way to interrupt Python code, reaches
the main thread alone). So a tool that runs code hands a job to this queue and waits; the job runs
on the main thread at one of two moments, whichever comes first:

- the kernel's event loop, between executions: ipykernel's `io_loop.add_callback` is safe from
  any thread. In ipykernel 7 the job then takes the kernel's own lock over shell messages
  (`_main_asyncio_lock`, held while a cell executes), so it waits its turn behind a running cell
  and the next cell waits behind it; in ipykernel 6, which has no such lock, a job that finds a
  user's cell executing (an async cell awaiting lets the loop run) waits for the cell to end
  (`KernelState`'s listeners schedule it again);
- a cell that waits on the chat (`ChatUI.wait()`, `serve`): the cell is paused at a known point,
  so the job runs there, on the main thread, before `wait` returns.

A job still waiting `QUEUED_AFTER` seconds after it was queued, while a user's cell executes,
is *queued* behind it, and the caller is told (`on_queued`), so the chat can say so.
`Ticket.interrupt()` raises KeyboardInterrupt in the running job (SIGINT sent to the main
thread while the job's own handler is installed, so the signal never lands anywhere else);
`Ticket.cancel()` drops a job that has not started. The queue never decides what a job does.

The runs: `run_code` (code the model wrote) and a cell's source (`run_cell`), each through the
queue, bounded in time and output. A run has a time limit (the tool call's, or less when the model
asks): past it, or when Stop is pressed, KeyboardInterrupt is raised in the running code; code that
was still queued behind a user's cell is not run at all. Its text starts with how it ended, in words
the transcript and the compaction facts read back (`nbchat.compaction.findings`):

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

import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from nbchat.errors import ToolError
from nbchat.stopping import Deadline, StopSignal, wait_slice
from nbchat.tools.cells import KernelState
from nbchat.tools.context import ToolContext
from nbchat.tools.execution import Ran, describe, run_source

__all__ = ["KernelQueue", "KernelRunner", "Run", "Ticket", "Waited", "run_job"]


SETTLE_STEPS = 100  # at most 0.1 s for a signal in flight when a job ends
SETTLE_SECONDS = 0.001
INTERRUPTS = 3  # KeyboardInterrupts sent to code that does not stop, before giving up on it
INTERRUPT_WAIT = 0.5  # seconds code gets to stop after each
POLL_SECONDS = 0.1  # how often a plain Event (not a StopSignal) is looked at
# A job not started this long after it was queued while a user's cell executes is said to wait
# for it (sooner, and a cell about to wait on the chat, which runs it at once, would be named).
QUEUED_AFTER = 0.5


@dataclass
class Ticket:
    """One job: `wake` is set when it starts, ends or is cancelled (`started`, `done`)."""

    job: Callable[[], Any]
    on_queued: Callable[[], None] = lambda: None
    wake: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    done: bool = False
    cancelled: bool = False
    value: Any = None
    error: BaseException | None = None
    interrupts: int = 0  # SIGINTs sent to the job
    said_queued: bool = False
    _in_job: bool = False
    _received: int = 0  # SIGINTs its handler has seen
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> bool:
        """Drop the job if it has not started; True when dropped."""
        with self._lock:
            if self.started:
                return False
            self.cancelled = True
        self.wake.set()
        return True

    def interrupt(self) -> bool:
        """Raise KeyboardInterrupt in the job if it is running now; True when sent."""
        with self._lock:
            if not self._in_job:
                return False
            self.interrupts += 1
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        return True

    def queued(self) -> None:
        """Say once that the job waits behind a user's cell."""
        with self._lock:
            if self.said_queued or self.started or self.cancelled:
                return
            self.said_queued = True
        self.on_queued()

    def run(self) -> None:
        """Run the job here (the main thread) unless it was cancelled."""
        with self._lock:
            if self.cancelled or self.started:
                return
            self.started = True
        self.wake.set()
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            self._in_job = True
            try:
                self.value = self.job()
            finally:
                with self._lock:
                    self._in_job = False
                self._settle()
        except BaseException as exc:  # the job's own failure (or a late interrupt) is its result
            self.error = exc
        finally:
            signal.signal(signal.SIGINT, previous)
            self.done = True
            self.wake.set()

    def _on_sigint(self, _signum: int, _frame: Any) -> None:
        self._received += 1
        if self._in_job:
            raise KeyboardInterrupt

    def _settle(self) -> None:
        """Let a SIGINT sent just as the job ended reach this job's handler (which now ignores
        it) rather than the handler restored after it: a sleep is cut short by a signal."""
        for _ in range(SETTLE_STEPS):
            if self._received >= self.interrupts:
                return
            time.sleep(SETTLE_SECONDS)


class KernelQueue:
    """Jobs for the kernel's main thread (see the module's docstring)."""

    def __init__(self, state: KernelState, *, kernel: Any = None) -> None:
        self._state = state
        self._jobs: deque[Ticket] = deque()
        self._changed = threading.Condition()
        self._serving = 0  # cells on the main thread inside `serve`
        self._loop = getattr(kernel, "io_loop", None)
        self._kernel_lock = getattr(kernel, "_main_asyncio_lock", None)
        state.on_change(self._on_kernel_change)

    @property
    def has_loop(self) -> bool:
        """Whether jobs can run on the kernel's loop (else only in `serve`)."""
        return self._loop is not None

    def submit(self, job: Callable[[], Any], *, on_queued: Callable[[], None]) -> Ticket:
        """Queue `job` for the main thread; `on_queued` is called (once) if it has to wait for
        a user's cell."""
        ticket = Ticket(job, on_queued)
        with self._changed:
            self._jobs.append(ticket)
            self._changed.notify_all()
        self._schedule()
        return ticket

    @property
    def kernel_busy(self) -> bool:
        """Whether a user's cell is executing and not waiting on the chat (where jobs run)."""
        with self._changed:
            return self._state.executing and not self._serving

    def serve(self, until: Callable[[], bool], timeout: float | None = None) -> bool:
        """Run jobs as they come, on this (the main) thread, until `until()` is true or
        `timeout` passes (`wake` makes it look again); what `until()` says last. Elsewhere than
        the main thread, only waits: a job must never run beside the user's code."""
        on_main = threading.current_thread() is threading.main_thread()
        remaining = Deadline(timeout)
        with self._changed:
            self._serving += on_main
        try:
            while not until():
                ticket = self._take() if on_main else None
                if ticket is not None:
                    ticket.run()
                    continue
                with self._changed:
                    if until() or (on_main and self._jobs):
                        continue
                    if remaining.over():
                        return until()
                    self._changed.wait(wait_slice(remaining.left()))
            return True
        finally:
            with self._changed:
                self._serving -= on_main

    def close(self) -> None:
        """Drop the jobs that have not started and stop listening to the kernel."""
        self._state.off_change(self._on_kernel_change)
        with self._changed:
            jobs, self._jobs = list(self._jobs), deque()
            self._changed.notify_all()
        for ticket in jobs:
            ticket.cancel()

    def wake(self) -> None:
        """Make `serve` look at `until()` again (the chat's work ended, say)."""
        with self._changed:
            self._changed.notify_all()

    def _take(self) -> Ticket | None:
        with self._changed:
            while self._jobs:
                ticket = self._jobs.popleft()
                if not ticket.cancelled:
                    return ticket
        return None

    def _schedule(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.add_callback(self._drain)

    async def _drain(self) -> None:
        """On the kernel's loop: one job, under the kernel's lock where it has one."""
        if not self._jobs:
            return
        if self._kernel_lock is None:
            if not self._state.executing:  # ipykernel 6: else the cell's end schedules it
                self._run_one()
            return
        async with self._kernel_lock:
            self._run_one()

    def _run_one(self) -> None:
        ticket = self._take()
        if ticket is not None:
            ticket.run()
        if self._jobs:
            self._schedule()

    def _on_kernel_change(self, executing: bool) -> None:
        if not executing and self._jobs:
            self._schedule()


@dataclass(frozen=True)
class Waited:
    """How a job's wait ended: `ended` is "done", "not started" (dropped before it ran) or
    "still running" (it ignored every interrupt); `reason` "time limit" or "stopped" when the
    caller gave up on it; `waited` the seconds before it started."""

    ticket: Ticket
    ended: Literal["done", "not started", "still running"]
    reason: Literal["", "time limit", "stopped"] = ""
    waited: float = 0.0


def run_job(
    queue: KernelQueue,
    job: Callable[[], Any],
    *,
    deadline: float,
    stop: threading.Event | None,
    on_queued: Callable[[], None],
) -> Waited:
    """Queue `job`, wait for it until `deadline` (time.monotonic()) or Stop; then drop it if it
    has not started, else interrupt it (KeyboardInterrupt) until it ends or `INTERRUPTS` were
    sent."""
    submitted = time.monotonic()
    ticket = queue.submit(job, on_queued=on_queued)
    started_at: list[float] = []
    forget = stop.add_callback(ticket.wake.set) if isinstance(stop, StopSignal) else None
    try:
        reason = _wait(ticket, min(deadline, submitted + QUEUED_AFTER), stop, started_at)
        if reason == "time limit" and time.monotonic() < deadline:
            if queue.kernel_busy and not ticket.started:
                ticket.queued()
            reason = _wait(ticket, deadline, stop, started_at)
    finally:
        if forget is not None:
            forget()
    waited = (started_at[0] if started_at else time.monotonic()) - submitted
    if not reason:
        return Waited(ticket, "done", waited=waited)
    if ticket.cancel():
        return Waited(ticket, "not started", reason, waited)
    for _ in range(INTERRUPTS):
        if ticket.done:
            break
        ticket.interrupt()
        _wait(ticket, time.monotonic() + INTERRUPT_WAIT, None, started_at)
    return Waited(ticket, "done" if ticket.done else "still running", reason, waited)


def _wait(
    ticket: Ticket, deadline: float, stop: threading.Event | None, started_at: list[float]
) -> Literal["", "time limit", "stopped"]:
    """Until the job is done (""), the deadline passes or Stop is pressed."""
    while True:
        ticket.wake.clear()
        if ticket.started and not started_at:
            started_at.append(time.monotonic())
        if ticket.done or ticket.cancelled:
            return ""
        if stop is not None and stop.is_set():
            return "stopped"
        left = deadline - time.monotonic()
        if left <= 0:
            return "time limit"
        step = left if isinstance(stop, StopSignal) or stop is None else min(left, POLL_SECONDS)
        ticket.wake.wait(step)


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
                return run_source(
                    self.shell,
                    source,
                    limit=ctx.output_limit,
                    label=label,
                    last_assignment=not cell_id,  # a cell shows what it shows in a notebook
                )
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

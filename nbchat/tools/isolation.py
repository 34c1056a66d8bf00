"""Running a call into the user's objects under a deadline, in a forked child where possible.

A `repr`, a DataFrame's `head()`, a property, `str()` of an exception: user code, which may be
slow, loop forever, allocate gigabytes, or hold the GIL (a C loop such as `sum(range(10**10))`
or a backtracking `re` match never lets another thread run), so a helper thread in the kernel
cannot bound it: the kernel's own threads (its heartbeat, the chat) stop with it. On Linux the
call therefore runs in a child forked from the kernel (a copy-on-write snapshot: ~2 ms, ~20 ms
for a 4 GB kernel), which sends back what it produces piece by piece through a pipe while the
kernel waits without holding the GIL. At the deadline, on Stop, or when it is done, the child
is killed (SIGKILL) and reaped: nothing is left running, nothing it allocated stays in the
kernel, and the next call starts afresh. The child runs with the garbage collector off (so no
finalizer of the kernel's objects runs there), its output sent to /dev/null, and an
address-space limit `CHILD_MEMORY` above the kernel's size.

Elsewhere (no `fork`, or it failed) the call runs on a helper thread: the deadline bounds the
wait, not the work. A thread cannot be killed: one still running past its deadline is counted,
and while `STUCK_LIMIT` are, new calls are refused; each is forgotten once it ends. A call that
holds the GIL freezes the kernel there; docs/security.md says so.

Must not: decide what is produced (the caller's `produce` does) or read the namespace itself.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import struct
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

try:  # Unix only; the child that uses it exists only where fork does
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = [
    "CAN_FORK",
    "CHILD_MEMORY",
    "STUCK_LIMIT",
    "Outcome",
    "Output",
    "call_bounded",
]

# fork() is safe enough on Linux (multiprocessing's default there until 3.14); macOS system
# libraries may crash in a forked child of a threaded process, and Windows has no fork.
CAN_FORK = sys.platform.startswith("linux") and hasattr(os, "fork")
CHILD_MEMORY = 512 << 20  # bytes a child may allocate beyond the kernel's own address space
STUCK_LIMIT = 2  # helper threads still running past their deadline before calls are refused
WAIT_STEP = 0.05  # seconds between looks at Stop while waiting for a child
# A frame: its kind (b"P" a piece, b"W" what it works on, b"E" an error, b"D" done), its size.
FRAME = struct.Struct("!cI")

Ending = Literal["done", "timed out", "failed", "stopped", "refused"]

_stuck = threading.BoundedSemaphore(STUCK_LIMIT)


class _CancelledError(BaseException):
    """Raised inside a helper thread's `produce` once nobody waits for it any more (a
    BaseException, so the producer's own `except Exception` does not swallow it)."""


@dataclass(frozen=True)
class Outcome:
    """What a bounded call produced: its pieces in order, and how it ended. `working_on` is
    what it said it was doing last (the variable whose summary it was making, say); `error`
    is `"ValueError: …"` when it failed."""

    pieces: tuple[str, ...]
    ending: Ending
    working_on: str = ""
    error: str = ""


class Output:
    """What `produce` writes to: finished pieces (`add`) and what it works on next (`doing`).
    In a child each goes down the pipe at once, so pieces made before a deadline are kept."""

    def __init__(self, send: Callable[[bytes, str], None]) -> None:
        self._send = send

    def add(self, piece: str) -> None:
        self._send(b"P", piece)

    def doing(self, label: str) -> None:
        self._send(b"W", label)


Produce = Callable[[Output], None]


def call_bounded(
    produce: Produce,
    *,
    deadline: float,
    stop: threading.Event | None = None,
    fork: bool | None = None,
) -> Outcome:
    """`produce(output)` until it returns, raises, `deadline` (time.monotonic()) passes or
    `stop` is set; in a forked child when `fork` (default: `CAN_FORK`, read at each call) and
    fork works, else on a helper thread."""
    if CAN_FORK if fork is None else fork:
        try:
            return _in_child(produce, deadline, stop)
        except (OSError, RuntimeError):  # no memory or processes left, a subinterpreter
            pass
    return _in_thread(produce, deadline, stop)


def _in_child(produce: Produce, deadline: float, stop: threading.Event | None) -> Outcome:
    read_end, write_end = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns that a forked child of a threaded process may deadlock: the
            # child here is killed at the deadline whatever it does, so that cannot hang us.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except BaseException:
        os.close(read_end)
        os.close(write_end)
        raise
    if pid == 0:  # pragma: no cover - the child; its results are what the tests check
        os.close(read_end)
        _run_child(produce, write_end)
    os.close(write_end)
    try:
        return _collect(read_end, deadline, stop)
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _run_child(produce: Produce, pipe: int) -> None:  # pragma: no cover - runs in the child
    """The child's whole life: set up, produce, report, and leave by os._exit whatever
    happens (never return into the kernel's code, never run its atexit handlers)."""
    try:
        gc.disable()  # a collection would run finalizers of the kernel's own objects
        _quiet_child()

        def send(kind: bytes, text: str) -> None:
            data = text.encode("utf-8", "replace")
            _write_all(pipe, FRAME.pack(kind, len(data)) + data)

        try:
            produce(Output(send))
            send(b"D", "")
        except BaseException as exc:  # user code may raise anything: it is reported
            send(b"E", _describe(exc))
    finally:
        os._exit(0)


def _quiet_child() -> None:  # pragma: no cover - runs in the child
    """No output of the child reaches the notebook, no signal of its reaches the kernel's
    event loop, and it cannot take the machine's memory."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(null, fd)
    sys.stdout = sys.stderr = open(null, "w", closefd=False)  # noqa: SIM115 - dies with the child
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    with contextlib.suppress(ValueError, OSError, AttributeError):
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + CHILD_MEMORY
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _write_all(fd: int, data: bytes) -> None:  # pragma: no cover - runs in the child
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _collect(pipe: int, deadline: float, stop: threading.Event | None) -> Outcome:
    """Read the child's frames until it is done, the deadline passes or Stop; the kernel's
    other threads run meanwhile (poll and read release the GIL)."""
    waiting = select.poll()  # not select(): a kernel's descriptors can be numbered past 1024
    waiting.register(pipe, select.POLLIN)
    buffer = bytearray()
    pieces: list[str] = []
    working_on = ""
    while True:
        if stop is not None and stop.is_set():
            return Outcome(tuple(pieces), "stopped", working_on)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Outcome(tuple(pieces), "timed out", working_on)
        if not waiting.poll(int(min(remaining, WAIT_STEP) * 1000) + 1):
            continue
        chunk = os.read(pipe, 1 << 16)
        if not chunk:  # the child died without saying it was done (killed, out of memory)
            return Outcome(tuple(pieces), "failed", working_on, "the preview process died")
        buffer += chunk
        while len(buffer) >= FRAME.size:
            kind, size = FRAME.unpack_from(buffer)
            if len(buffer) < FRAME.size + size:
                break
            text = bytes(buffer[FRAME.size : FRAME.size + size]).decode("utf-8", "replace")
            del buffer[: FRAME.size + size]
            if kind == b"D":
                return Outcome(tuple(pieces), "done", working_on)
            if kind == b"E":
                return Outcome(tuple(pieces), "failed", working_on, text)
            if kind == b"W":
                working_on = text
            else:
                pieces.append(text)


@dataclass
class _Shared:
    """What a helper thread and its waiter share (list appends are atomic)."""

    pieces: list[str] = field(default_factory=list)
    working_on: str = ""
    error: str = ""
    cancelled: bool = False
    done: threading.Event = field(default_factory=threading.Event)


def _in_thread(produce: Produce, deadline: float, stop: threading.Event | None) -> Outcome:
    if not _stuck.acquire(blocking=False):
        return Outcome((), "refused")
    shared = _Shared()

    def send(kind: bytes, text: str) -> None:
        if shared.cancelled:
            raise _CancelledError
        if kind == b"W":
            shared.working_on = text
        else:
            shared.pieces.append(text)

    def run() -> None:
        try:
            produce(Output(send))
        except _CancelledError:
            pass
        except BaseException as exc:  # user code may raise anything: it is reported
            shared.error = _describe(exc)
        finally:
            shared.done.set()
            _stuck.release()

    threading.Thread(target=run, name="nbchat-preview", daemon=True).start()
    ending = _wait_thread(shared, deadline, stop)
    shared.cancelled = ending != "done"
    pieces = tuple(shared.pieces)
    if ending == "done" and shared.error:
        return Outcome(pieces, "failed", shared.working_on, shared.error)
    return Outcome(pieces, ending, shared.working_on)


def _wait_thread(shared: _Shared, deadline: float, stop: threading.Event | None) -> Ending:
    while not shared.done.is_set():
        if stop is not None and stop.is_set():
            return "stopped"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timed out"
        shared.done.wait(min(remaining, WAIT_STEP))
    return "done"


def _describe(exc: BaseException) -> str:
    """`ValueError: the message`, cut; `str()` of the exception is user code too, so it runs
    where the call runs and may itself fail."""
    try:
        message = str(exc)
    except BaseException:  # a __str__ that raises: the type still says something
        message = "(its message could not be read)"
    if len(message) > 300:
        message = message[:300] + " …"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__

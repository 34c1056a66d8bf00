"""Running one shell command for a tool, so that nothing it starts outlives the call.

Owns the child process: `/bin/sh -c` in a new session (its own process group) in the workspace,
with the filtered environment; its combined stdout and stderr read by a thread into a bounded
head-and-tail buffer (no deadlock, no unbounded memory); the real timeout; Stop; and the end of
every call, when the whole process group is sent SIGTERM and, after a short grace, SIGKILL, so
background children and grandchildren go too.

Must not: decide whether a command may run (the executor's policy does) or format what the
model reads beyond the command's own output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from nbchat.stopping import StopSignal
from nbchat.tools.context import cut_marker

__all__ = ["KILL_GRACE", "ShellResult", "run_command"]

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
POLL_SECONDS = 0.1  # how often a plain Event is checked; a StopSignal acts at once
READ_SIZE = 65536

Ending = Literal["exited", "timed out", "stopped"]


@dataclass(frozen=True)
class ShellResult:
    """How a command ended, its exit code (None if it never exited by itself) and its output."""

    ending: Ending
    exit_code: int | None
    output: str


def run_command(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    output_limit: int,
    stop: threading.Event | None = None,
) -> ShellResult:
    """Run `command`; keep at most about `output_limit` characters of its output."""
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None  # stdout=PIPE
    buffer = _HeadTail(output_limit)
    reader = threading.Thread(target=buffer.drain, args=(process.stdout,), daemon=True)
    reader.start()
    remove = (
        stop.add_callback(lambda: _signal_group(process.pid, signal.SIGTERM))
        if isinstance(stop, StopSignal)
        else None
    )
    try:
        ending = _wait(process, reader, time.monotonic() + timeout, stop)
    finally:
        if remove is not None:
            remove()
        _end_group(process, reader)
    exit_code = process.returncode if ending == "exited" else None
    return ShellResult(ending, exit_code, buffer.text())


def _wait(
    process: subprocess.Popen[bytes],
    reader: threading.Thread,
    deadline: float,
    stop: threading.Event | None,
) -> Ending:
    """Until the command exited and its output ended (EOF: no child holds the pipe any more)."""
    while reader.is_alive() or process.poll() is None:
        if stop is not None and stop.is_set():
            return "stopped"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timed out"
        if reader.is_alive():
            reader.join(min(remaining, POLL_SECONDS))
        else:
            with contextlib.suppress(subprocess.TimeoutExpired):  # checked again at the top
                process.wait(min(remaining, POLL_SECONDS))
    # A StopSignal kills the group itself, which can end the loop before the check above.
    return "stopped" if stop is not None and stop.is_set() else "exited"


def _end_group(process: subprocess.Popen[bytes], reader: threading.Thread) -> None:
    """SIGTERM the whole group, give it `KILL_GRACE` to let go of the pipe, then SIGKILL it.

    Also after a normal exit: anything the command left running in the background goes too.
    """
    if _signal_group(process.pid, signal.SIGTERM):
        reader.join(KILL_GRACE)
        _signal_group(process.pid, signal.SIGKILL)
    process.wait()
    reader.join(KILL_GRACE)


def _signal_group(group: int, signum: signal.Signals) -> bool:
    """Signal every process in the group; False when none is left."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True


class _HeadTail:
    """The first and last `limit // 2` bytes of a stream, and how many bytes came in between."""

    def __init__(self, limit: int) -> None:
        # Leave room for the marker, so the executor's own cap does not cut a second time.
        self.half = max(limit - 100, 0) // 2
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def drain(self, stream: IO[bytes]) -> None:
        """Read to EOF, then close. The reader closes the pipe, not the caller: a process that
        escaped the group may still hold it, and closing an fd under a blocked read is unsafe."""
        with stream:
            for block in iter(lambda: os.read(stream.fileno(), READ_SIZE), b""):
                self._add(block)

    def _add(self, block: bytes) -> None:
        self.total += len(block)
        room = self.half - len(self.head)
        if room > 0:
            self.head += block[:room]
            block = block[room:]
        if block:
            self.tail.append(block)
            self.tail_size += len(block)
        while self.tail and self.tail_size - len(self.tail[0]) >= self.half:
            self.tail_size -= len(self.tail.popleft())

    def text(self) -> str:
        # The marker counts bytes as characters: exact for ASCII output, close for the rest.
        tail = b"".join(self.tail)
        tail = tail[len(tail) - self.half :] if len(tail) > self.half else tail
        cut = self.total - len(self.head) - len(tail)
        head_text = self.head.decode("utf-8", errors="replace")
        tail_text = tail.decode("utf-8", errors="replace")
        return head_text + (cut_marker(cut) if cut > 0 else "") + tail_text

"""Running one shell command for a tool, so that nothing it starts outlives the call.

Owns the child process: `/bin/sh -c` under the reaper (nbchat/tools/reaper.py, a child
subreaper on Linux: whatever the command starts, even with `setsid` or `nohup`, is killed and
reaped once sh exits), in a new session, in the workspace, with the filtered environment; its
combined stdout and stderr read by a thread into a bounded head-and-tail buffer (no deadlock, no
unbounded memory); the real timeout; Stop; and the truth about how the call ended: sh's exit
code, how many background processes were stopped after it, and "timed out" only when sh was
still running at the deadline.

Must not: decide whether a command may run (the executor's policy does) or format what the
model reads beyond the command's own output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from nbchat.stopping import StopSignal
from nbchat.tools.context import cut_marker

__all__ = ["KILL_GRACE", "REAPER", "ShellResult", "run_command"]

KILL_GRACE = 2.0  # seconds the reaper gets to clean up after SIGTERM before SIGKILL
POLL_SECONDS = 0.1  # how often a plain Event is checked; a StopSignal acts at once
READ_SIZE = 65536
REAPER = Path(__file__).with_name("reaper.py")

Ending = Literal["exited", "timed out", "stopped"]


@dataclass(frozen=True)
class ShellResult:
    """How a command ended, sh's exit code (None if it never exited by itself), its output,
    and how many processes it left running were stopped when it ended."""

    ending: Ending
    exit_code: int | None
    output: str
    background_stopped: int = 0


def run_command(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    output_limit: int,
    stop: threading.Event | None = None,
) -> ShellResult:
    """Run `command`; keep at most about `output_limit` characters of its output.

    `timeout` must be positive (infinite waits for the command): a NaN would never arrive, so it
    is refused before anything starts (a model's request goes through `ToolContext.time_limit`).
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    status_read, status_write = os.pipe()
    try:
        process = _start(command, cwd=cwd, env=env, status_fd=status_write)
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
    assert process.stdout is not None  # stdout=PIPE
    buffer = _HeadTail(output_limit)
    reader = threading.Thread(target=buffer.drain, args=(process.stdout,), daemon=True)
    reader.start()
    remove = (
        stop.add_callback(lambda: _terminate(process)) if isinstance(stop, StopSignal) else None
    )
    try:
        ending = _wait(process, time.monotonic() + timeout, stop)
    finally:
        if remove is not None:
            remove()
        _finish(process, reader)
    code, stopped = _read_status(status_read, process)
    return ShellResult(ending, code if ending == "exited" else None, buffer.text(), stopped)


def _start(
    command: str, *, cwd: Path, env: Mapping[str, str], status_fd: int
) -> subprocess.Popen[bytes]:
    # -I -S: the reaper needs the standard library only, and no user site or PYTHON* variable.
    return subprocess.Popen(
        [sys.executable or "python3", "-I", "-S", str(REAPER), str(status_fd), command],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        pass_fds=(status_fd,),
    )


def _wait(
    process: subprocess.Popen[bytes], deadline: float, stop: threading.Event | None
) -> Ending:
    """Until the reaper exited (sh ended and nothing it started is left), the time is up, or
    Stop. The output pipe is not waited for: a process holding it is stopped by the reaper."""
    while process.poll() is None:
        if stop is not None and stop.is_set():
            return "stopped"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timed out"
        with contextlib.suppress(subprocess.TimeoutExpired):  # checked again at the top
            process.wait(min(remaining, POLL_SECONDS))
    # A StopSignal ends the reaper itself, which can end the loop before the check above.
    return "stopped" if stop is not None and stop.is_set() else "exited"


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """Ask the reaper to kill sh and everything below it (it reports and exits)."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)


def _finish(process: subprocess.Popen[bytes], reader: threading.Thread) -> None:
    """End the reaper if it still runs (SIGTERM, then SIGKILL for its whole group after
    `KILL_GRACE`), then the group's leftovers (where no subreaper exists), then the reader."""
    if process.poll() is None:
        _terminate(process)
        try:
            process.wait(KILL_GRACE)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
    _signal_group(process.pid, signal.SIGKILL)
    reader.join(KILL_GRACE)


def _read_status(fd: int, process: subprocess.Popen[bytes]) -> tuple[int | None, int]:
    """sh's exit code and the count of processes stopped after it, from the reaper."""
    with os.fdopen(fd, "rb") as status:
        words = status.read().split()
    if len(words) != 2:  # the reaper was killed before it could say
        return process.returncode, 0
    return int(words[0]), int(words[1])


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

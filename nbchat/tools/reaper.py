"""The small process between nbchat and a tool's shell: nothing the command starts outlives it.

Run as a script (`python -I -S reaper.py STATUS_FD COMMAND`), never imported by nbchat: it uses
the standard library only and starts in a few milliseconds. On Linux it makes itself a *child
subreaper* (prctl PR_SET_CHILD_SUBREAPER), so every process the command starts that loses its
parent (`cmd &` after sh exits, `setsid`, `nohup`, double forks) is re-parented to it instead
of to init, whatever it did with sessions and process groups. It runs `/bin/sh -c COMMAND`,
waits for sh alone (not for the output pipe), then kills and reaps every process left below it,
until none is. On SIGTERM (the timeout, Stop) it kills sh first and does the same.

It writes one line to STATUS_FD: `<sh's exit status> <processes stopped afterwards>` (a status
of -N means sh ended by signal N). Elsewhere than Linux it only runs sh; the caller's
process-group kill is all there is.

Must not: write to its stdout or stderr (they are the command's output).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from types import FrameType

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def children(parent: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose parent is `parent`, from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == parent:
            found.append((int(name), fields[0].decode()))
    return found


def stop_descendants() -> int:
    """Kill and reap every process below this one; how many were still running."""
    me, stopped = os.getpid(), set[int]()
    while True:
        left = children(me)
        if not left:
            return len(stopped)
        for pid, state in left:
            if state != "Z":  # a zombie has already ended: reaping it is all it needs
                stopped.add(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for pid, _ in left:  # its own children are re-parented to us before it can be reaped
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def main() -> int:
    status_fd, command = int(sys.argv[1]), sys.argv[2]
    os.set_inheritable(status_fd, False)
    shells: list[subprocess.Popen[bytes]] = []
    ended: list[int] = []

    def end_shell(signum: int, frame: FrameType | None) -> None:
        ended.append(signum)  # before sh exists too: it is then killed as soon as it does
        for shell in shells:
            shell.kill()

    signal.signal(signal.SIGTERM, end_shell)
    signal.signal(signal.SIGINT, end_shell)
    subreaper = become_subreaper()
    shells.append(subprocess.Popen(["/bin/sh", "-c", command]))
    if ended:
        shells[0].kill()
    code = shells[0].wait()
    stopped = stop_descendants() if subreaper else 0
    os.write(status_fd, f"{code} {stopped}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

# Only what starts fast: `subprocess` and `signal` (enum) would double the start-up time.
import _signal  # type: ignore[import-not-found]  # no stub; `signal` imports enum
import ctypes
import os
import sys

PR_SET_CHILD_SUBREAPER = 36
SIGKILL = 9


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
                try:  # noqa: SIM105 (contextlib costs start-up time)
                    os.kill(pid, SIGKILL)
                except ProcessLookupError:
                    pass
        for pid, _ in left:  # its own children are re-parented to us before it can be reaped
            try:  # noqa: SIM105
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def start_shell(command: str) -> int:
    pid = os.fork()  # this process has one thread: fork is safe here
    if pid == 0:
        try:
            _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
            os.execv("/bin/sh", ["/bin/sh", "-c", command])
        finally:
            os._exit(127)
    return pid


def main() -> int:
    status_fd, command = int(sys.argv[1]), sys.argv[2]
    os.set_inheritable(status_fd, False)
    shells: list[int] = []
    ended: list[int] = []

    def end_shell(signum: int, frame: object) -> None:
        ended.append(signum)  # before sh exists too: it is then killed as soon as it does
        for pid in shells:
            try:  # noqa: SIM105
                os.kill(pid, SIGKILL)
            except ProcessLookupError:
                pass

    _signal.signal(_signal.SIGTERM, end_shell)
    _signal.signal(_signal.SIGINT, end_shell)
    subreaper = become_subreaper()
    shells.append(start_shell(command))
    if ended:
        end_shell(0, None)
    _, status = os.waitpid(shells[0], 0)
    code = os.waitstatus_to_exitcode(status)
    shells.clear()  # reaped: its pid may be reused, so it is never signalled again
    stopped = stop_descendants() if subreaper else 0
    os.write(status_fd, f"{code} {stopped}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())

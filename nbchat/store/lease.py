"""The writer lease, whole: one process writes a session and the others open it read-only; the
leases one `Store` took (`Claims`), renewed by a `Heartbeat` thread and confirmed by every write.

The lease lives in the session's row: the owner (one `Store` object), the holder's host, PID and
process identity (its start time, so a reused PID is not mistaken for the holder), and an
expiry. The holder renews the expiry on every write and from a heartbeat thread while the
session is open, so a live writer never loses it by age alone. A lease is stale, and may be
taken over, when its expiry has passed (the holder stopped renewing: it hangs, or sits on
another host that went away) or when its holder on this host is no longer running (no such PID,
a zombie, or another process under the same PID). Every write confirms, inside its own
transaction, that the writer still holds the lease, so a writer that lost it can never
interleave its rows with the new holder's. The lease functions run inside the caller's
transaction.

`Claims`: the store's side, the writer leases one `Store` took: which sessions it took (and as
which owner), the heartbeat that renews them, and the check a write makes inside its own
transaction, so a session another kernel took over is never written. It uses the store's
`Connections`.

`Heartbeat`: calls a function every few seconds on a daemon thread, until stopped. A `Store`
runs one while it holds writer leases, to renew them before they expire even when the kernel
sends nothing for a while. It holds only a weak reference to the function's object, so a store
nobody uses any more is not kept alive by its heartbeat (its leases then expire, and another
kernel may take the sessions over). It does not know what the beat does; it only logs a beat
that failed and goes on.

Must not: open connections or transactions of its own, or know rows.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlite_utils import Database

from nbchat.errors import LeaseLostError, StoreError
from nbchat.store.sqlite import Connections

__all__ = [
    "Claims",
    "Heartbeat",
    "Holder",
    "confirm",
    "give_back",
    "holder",
    "is_live",
    "is_running",
    "new_owner",
    "process_identity",
    "renew",
    "take",
    "taken_over_message",
]


log = logging.getLogger(__name__)


class Heartbeat:
    """Calls `beat` every `interval` seconds on a thread named `name` (started by `start`)."""

    def __init__(self, beat: Callable[[], None], *, interval: float, name: str) -> None:
        self._beat = weakref.WeakMethod(beat)
        self.interval = interval
        self.name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start beating (a no-op while it runs)."""
        with self._lock:
            if self.running:
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name=self.name, daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop beating and wait for a beat in progress to end."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            beat = self._beat()
            if beat is None:  # its object is gone
                return
            try:
                beat()
            except Exception:  # retried at the next beat; a write meanwhile reports for itself
                log.warning("%s failed; retrying in %gs", self.name, self.interval, exc_info=True)
            del beat


PROC = Path("/proc")
NOT_SAVED = {"save the message": "your message was not"}


@dataclass(frozen=True)
class Holder:
    """Who holds a session's lease, as recorded in its row (all None when nobody does)."""

    owner: str | None
    pid: int | None
    host: str | None
    process: str | None
    until: float | None


def new_owner() -> str:
    """A lease owner name unique to this process and object."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder(db: Database, session_id: str) -> Holder | None:
    """The session's recorded lease holder; None when there is no such session."""
    found = db.execute(
        "SELECT lease_owner, lease_pid, lease_host, lease_process, lease_until FROM sessions "
        "WHERE id = ?",
        [session_id],
    ).fetchone()
    return None if found is None else Holder(*found)


def take(db: Database, session_id: str, *, owner: str, seconds: float) -> bool | None:
    """Take or renew the lease: True, False (held by another live owner), None (no session)."""
    current = holder(db, session_id)
    if current is None:
        return None
    if current.owner and current.owner != owner and is_live(current):
        return False
    db.execute(
        "UPDATE sessions SET lease_owner = ?, lease_pid = ?, lease_host = ?, lease_process = ?, "
        "lease_until = ? WHERE id = ?",
        [
            owner,
            os.getpid(),
            socket.gethostname(),
            process_identity(os.getpid()),
            time.time() + seconds,
            session_id,
        ],
    )
    return True


def confirm(db: Database, session_id: str, *, owner: str, seconds: float) -> Holder | None:
    """Renew `owner`'s lease before a write; the holder that took it over when it is lost.

    Lost means: another owner holds it now, or nobody does (it was taken and given back since),
    or this is a forked child of the process that took it.
    """
    if renew(db, session_id, owner=owner, seconds=seconds):
        return None
    return holder(db, session_id) or Holder(None, None, None, None, None)


def renew(db: Database, session_id: str, *, owner: str, seconds: float) -> bool:
    """Push the expiry of `owner`'s lease forward; False when `owner` no longer holds it."""
    moment = time.time()
    cursor = db.execute(
        "UPDATE sessions SET lease_until = ? WHERE id = ? AND lease_owner = ? AND lease_pid = ?",
        [moment + seconds, session_id, owner, os.getpid()],
    )
    renewed = cursor.rowcount == 1
    log.debug("lease on session %s renewed=%s at %.6f", session_id, renewed, moment)
    return renewed


def give_back(db: Database, session_id: str, *, owner: str) -> None:
    """Release the lease if `owner` holds it."""
    db.execute(
        "UPDATE sessions SET lease_owner = NULL, lease_pid = NULL, lease_host = NULL, "
        "lease_process = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?",
        [session_id, owner],
    )


def is_live(current: Holder) -> bool:
    """Whether a recorded holder still counts: not expired, and running if on this host."""
    if current.until is not None and current.until < time.time():
        return False
    if current.host == socket.gethostname() and current.pid:
        return is_running(int(current.pid), current.process)
    return True


def is_running(pid: int, identity: str | None) -> bool:
    """Whether process `pid` is running and, when `identity` is known, is that same process."""
    if identity is not None and (PROC / "self" / "stat").exists():
        return process_identity(pid) == identity
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_identity(pid: int) -> str | None:
    """`<boot id>:<start time in clock ticks>` of a running process; None when it is not
    running (or a zombie), or when this system has no /proc to ask.

    Two processes alive at different times may share a PID, never a boot and a start time.
    """
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        boot = (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields after it are counted
    # from the last ")". Field 3 is the state, field 22 the start time.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return f"{boot}:{fields[19]}"


def taken_over_message(taker: Holder, action: str) -> str:
    """What a writer that lost its lease to `taker` (trying to `action`) tells the user."""
    if taker.pid is None:
        who = "another kernel (which has closed it since)"
    elif taker.host and taker.host != socket.gethostname():
        who = f"another kernel (pid {taker.pid} on {taker.host})"
    else:
        who = f"another kernel (pid {taker.pid})"
    lost = NOT_SAVED.get(action, "nothing more was")
    return (
        f"This session was taken over by {who}; {lost} saved here. Close the session there "
        "and send again (this kernel first loads what was written there), or start a new "
        "session with /new."
    )


class Claims:
    """The leases taken through `connections`, each living `seconds` past its last renewal."""

    def __init__(self, connections: Connections, *, seconds: float) -> None:
        self.connections = connections
        self.seconds = seconds
        self.owner = new_owner()
        self._leases: dict[str, str] = {}  # session id -> owner, for the sessions we took
        self._lock = threading.Lock()
        # Four beats a lease: only a kernel that stopped running Python lets one expire.
        self._heartbeat = Heartbeat(self.renew, interval=seconds / 4, name="nbchat-lease-heartbeat")

    def owner_of(self, session_id: str) -> str | None:
        """The owner we took `session_id` as (None: we never took it)."""
        return self._leases.get(session_id)

    def confirm(self, db: Database, session_id: str, action: str) -> None:
        """Inside a write's transaction: renew our lease on `session_id` if we took one, and
        raise `LeaseLostError` when another kernel took the session over."""
        owner = self._leases.get(session_id)
        if owner is not None:
            taker = confirm(db, session_id, owner=owner, seconds=self.seconds)
            if taker is not None:
                raise LeaseLostError(taken_over_message(taker, action))

    def acquire(self, session_id: str, *, owner: str | None, path: Path) -> bool:
        """Take or renew the lease; False when another live process holds it."""
        owner = owner or self.owner
        with self.connections.transaction("take the session lease") as db:
            taken = take(db, session_id, owner=owner, seconds=self.seconds)
        if taken is None:
            raise StoreError(f"No session {session_id!r} in {path}.")
        if taken:
            with self._lock:
                self._leases[session_id] = owner
            self._heartbeat.start()
        return taken

    def release(self, session_id: str, *, owner: str | None = None) -> None:
        """Give the lease back if we hold it (a no-op for a session we never took)."""
        with self._lock:
            held = self._leases.get(session_id)
            if owner in (None, held):  # another chat's lease on this store stays renewed
                held = self._leases.pop(session_id, None)
            idle = not self._leases
        if idle:
            self._heartbeat.stop()
            self.connections.sweep()  # the heartbeat thread's connection
        if held or owner:
            with self.connections.transaction("release the session lease") as db:
                give_back(db, session_id, owner=owner or held or self.owner)

    def holder(self, session_id: str) -> Holder | None:
        """Who holds `session_id`'s lease, as recorded (None when there is no such session)."""
        with self.connections.errors("read the session lease"):
            return holder(self.connections.db, session_id)

    def holds(self, session_id: str) -> bool:
        """Whether we still hold `session_id`'s writer lease, as recorded now."""
        with self._lock:
            owner = self._leases.get(session_id)
        current = self.holder(session_id) if owner else None
        return current is not None and current.owner == owner

    def renew(self) -> None:
        """Push the expiry of every lease we hold forward (the heartbeat's beat)."""
        with self._lock:
            held = dict(self._leases)
        for session_id, owner in held.items():
            with self.connections.transaction("renew the session lease") as db:
                renew(db, session_id, owner=owner, seconds=self.seconds)

    def stop(self) -> None:
        """Stop renewing (the leases stay recorded until they expire or are given back)."""
        self._heartbeat.stop()

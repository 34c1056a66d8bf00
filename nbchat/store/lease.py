"""The writer lease: one process writes a session, the others open it read-only.

The lease lives in the session's row: the owner (one `Store` object), the holder's host, PID and
process identity (its start time, so a reused PID is not mistaken for the holder), and an
expiry. The holder renews the expiry on every write and from a heartbeat thread while the
session is open (`nbchat.store.heartbeat`), so a live writer never loses it by age alone.

A lease is stale, and may be taken over, when its expiry has passed (the holder stopped
renewing: it hangs, or sits on another host that went away) or when its holder on this host is
no longer running (no such PID, a zombie, or another process under the same PID). Every write
confirms, inside its own transaction, that the writer still holds the lease, so a writer that
lost it can never interleave its rows with the new holder's. These functions run inside the
caller's transaction.

Must not: open connections or transactions of its own.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlite_utils import Database

__all__ = [
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

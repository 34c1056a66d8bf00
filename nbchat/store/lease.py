"""The writer lease: one process writes a session, the others open it read-only.

The lease lives in the session's row (owner, pid, host, expiry). A holder on this host whose
process has died, or a lease past its expiry (a holder on another host sharing the file), is
stale and may be taken over. These functions run inside the caller's transaction.

Must not: open connections or transactions of its own.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from sqlite_utils import Database

__all__ = ["give_back", "is_live", "new_owner", "take"]


def new_owner() -> str:
    """A lease owner name unique to this process and object."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def take(db: Database, session_id: str, *, owner: str, seconds: float) -> bool | None:
    """Take or renew the lease: True, False (held by another live owner), None (no session)."""
    found = db.execute(
        "SELECT lease_owner, lease_pid, lease_host, lease_until FROM sessions WHERE id = ?",
        [session_id],
    ).fetchone()
    if found is None:
        return None
    holder, holder_pid, holder_host, until = found
    if holder and holder != owner and is_live(holder_pid, holder_host, until):
        return False
    db.execute(
        "UPDATE sessions SET lease_owner = ?, lease_pid = ?, lease_host = ?, lease_until = ? "
        "WHERE id = ?",
        [owner, os.getpid(), socket.gethostname(), time.time() + seconds, session_id],
    )
    return True


def give_back(db: Database, session_id: str, *, owner: str) -> None:
    """Release the lease if `owner` holds it."""
    db.execute(
        "UPDATE sessions SET lease_owner = NULL, lease_pid = NULL, lease_host = NULL, "
        "lease_until = NULL WHERE id = ? AND lease_owner = ?",
        [session_id, owner],
    )


def is_live(pid: int | None, host: str | None, until: float | None) -> bool:
    """Whether a recorded holder still counts: not expired, and alive if on this host."""
    if until is not None and until < time.time():
        return False
    if host == socket.gethostname() and pid:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return True

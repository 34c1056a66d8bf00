"""`Claims`: the writer leases one `Store` took, kept alive by a heartbeat and confirmed by
every write to their sessions.

The lease rows and their SQL live in `nbchat.store.lease`; this module keeps the store's side:
which sessions it took (and as which owner), the heartbeat that renews them, and the check a
write makes inside its own transaction, so a session another kernel took over is never
written.

Must not: open connections of its own (it uses the store's `Connections`), or know rows.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlite_utils import Database

from nbchat.errors import LeaseLostError, StoreError
from nbchat.store import lease
from nbchat.store.heartbeat import Heartbeat
from nbchat.store.sqlite import Connections

__all__ = ["Claims"]


class Claims:
    """The leases taken through `connections`, each living `seconds` past its last renewal."""

    def __init__(self, connections: Connections, *, seconds: float) -> None:
        self.connections = connections
        self.seconds = seconds
        self.owner = lease.new_owner()
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
            taker = lease.confirm(db, session_id, owner=owner, seconds=self.seconds)
            if taker is not None:
                raise LeaseLostError(lease.taken_over_message(taker, action))

    def acquire(self, session_id: str, *, owner: str | None, path: Path) -> bool:
        """Take or renew the lease; False when another live process holds it."""
        owner = owner or self.owner
        with self.connections.transaction("take the session lease") as db:
            taken = lease.take(db, session_id, owner=owner, seconds=self.seconds)
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
                lease.give_back(db, session_id, owner=owner or held or self.owner)

    def holder(self, session_id: str) -> lease.Holder | None:
        """Who holds `session_id`'s lease, as recorded (None when there is no such session)."""
        with self.connections.errors("read the session lease"):
            return lease.holder(self.connections.db, session_id)

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
                lease.renew(db, session_id, owner=owner, seconds=self.seconds)

    def stop(self) -> None:
        """Stop renewing (the leases stay recorded until they expire or are given back)."""
        self._heartbeat.stop()

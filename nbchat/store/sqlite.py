"""`Connections`: the store's SQLite file, one connection per thread, migrated on first use.

SQLite connections must not cross threads, so each thread gets its own (closed when the thread
has ended, or by `close()`). Every connection runs WAL with `synchronous=NORMAL` and a busy
timeout; a migration runs once, under a file lock so two kernels opening a new file don't race,
and only after checking that the file was not written by a newer nbchat. `transaction()` is
one `BEGIN IMMEDIATE`: concurrent writers queue instead of failing, and a failure half-way leaves
nothing behind. sqlite3 errors stop here and become `StoreError`s that say what to do.

Must not: know the tables' meaning (that is `Store`'s).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from nbchat.errors import StoreError
from nbchat.store.migrations import KNOWN, MIGRATIONS

__all__ = ["Connections"]


class Connections:
    """Per-thread sqlite-utils `Database`s on one file, with transactions and error translation."""

    def __init__(self, path: Path, *, busy_timeout: float) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._migrated = False

    @property
    def db(self) -> Database:
        """This thread's sqlite-utils `Database` (opened and migrated on first use)."""
        db: Database | None = getattr(self._local, "db", None)
        if db is None:
            db = self._connect()
            self._local.db = db
        return db

    def close(self) -> None:
        """Close every thread's connection; the store reopens on next use."""
        with self._lock:
            for _, conn in self._connections:
                conn.close()
            self._connections.clear()
            self._local = threading.local()

    def _adopt(self, conn: sqlite3.Connection) -> None:
        """Track this thread's connection; close those of threads that have ended."""
        with self._lock:
            alive = []
            for thread, other in self._connections:
                if thread.is_alive():
                    alive.append((thread, other))
                else:
                    other.close()
            alive.append((threading.current_thread(), conn))
            self._connections = alive

    def _connect(self) -> Database:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Each connection is used by its own thread only; check_same_thread=False lets
            # close() and the dead-thread sweep close it from another thread.
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"Cannot open the session database {self.path}: {exc}. "
                "Check that the directory is writable or set NBCHAT_HOME."
            ) from exc
        conn.text_factory = lambda data: data.decode("utf-8", "replace")
        self._adopt(conn)
        db = Database(conn, execute_plugins=False)
        with self.errors("open"):
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            if not self._migrated:
                self._migrate(db)
        return db

    def _migrate(self, db: Database) -> None:
        with self._lock:  # threads of this process; other processes wait on the write lock
            applied = {m.name for m in MIGRATIONS.applied(db)}
            newer = sorted(applied - KNOWN)
            if newer:
                raise StoreError(
                    f"{self.path} was written by a newer version of nbchat (schema "
                    f"{', '.join(newer)}). Upgrade nbchat, or point NBCHAT_HOME elsewhere; "
                    "the file was not changed."
                )
            if applied != KNOWN:
                self._apply_migrations(db)
            self._migrated = True

    def _apply_migrations(self, db: Database) -> None:
        lock_path = self.path.with_name(self.path.name + ".migrate-lock")
        with open(lock_path, "a+b") as lock_file:
            _lock_file(lock_file)
            MIGRATIONS.apply(db)

    @contextlib.contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """Translate sqlite3 errors into `StoreError`s that say what to do."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self._translate(exc, action) from exc

    def _translate(self, exc: sqlite3.Error, action: str) -> StoreError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StoreError(
                f"Could not {action}: the session database {self.path} stayed locked by another "
                f"process for more than {self.busy_timeout:g}s. Close other kernels or programs "
                "using it and try again; nothing was written."
            )
        if "full" in text:
            return StoreError(
                f"Could not {action}: the disk holding {self.path} is full. Free some space and "
                "try again; nothing was written."
            )
        return StoreError(f"Could not {action} in {self.path}: {text}.")

    @contextlib.contextmanager
    def transaction(self, action: str) -> Iterator[Database]:
        """One `BEGIN IMMEDIATE` transaction: all of it is written, or none of it.

        Nested uses join the outer transaction, so several store calls can be made atomic
        together (`with store.transaction("..."): store.replace_rows(...); ...`).
        """
        db = self.db
        if db.conn.in_transaction:
            yield db
            return
        with self.errors(action):
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.conn.rollback()
                raise
            db.conn.commit()


def _lock_file(lock_file: Any) -> None:
    """Hold an exclusive lock on `lock_file` until it is closed (POSIX; no-op elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: migrations race only on first creation
        return
    fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)

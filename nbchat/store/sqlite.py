"""The store's SQLite file: `Connections`, one per thread, migrated on first use (with the
schema in `nbchat.store.migrations`), errors classified into `StoreError`s.

`Connections`: one connection per thread, migrated on first use. SQLite connections must not cross
threads, so each thread gets its own (closed when the thread has ended, or by `close()`). Every
connection runs WAL with `synchronous=NORMAL` and a busy timeout; a migration runs once, under a
file lock so two kernels opening a new file don't race, and only after checking that the file was
not written by a newer nbchat. `transaction()` is one `BEGIN IMMEDIATE`: concurrent writers queue
instead of failing, and a failure half-way leaves nothing behind. sqlite3 errors stop here and
become `StoreError`s that say what to do, chosen by SQLite's result code (never by the wording of
its message).

A file this process may not write (a read-only file or folder, a read-only mount) opens
read-only: `mode=ro`, or `immutable=1` when SQLite cannot create the WAL's `-shm` file beside
it, and `query_only` on top. Sessions can then be listed, shown and exported; every write
fails with one message saying why. Opening never changes a file it refuses (not a database, a
newer schema, locked): the error says so, and what to do.

Must not: define the schema (that is `nbchat.store.migrations`), nor know what the tables mean
beyond their schema (that is `Store`'s).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from nbchat.errors import StoreError
from nbchat.store.migrations import KNOWN, MIGRATIONS

__all__ = ["Connections"]


# SQLite's primary result codes (https://sqlite.org/rescode.html): the low byte of
# `sqlite3.Error.sqlite_errorcode` (Python 3.11+).
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_CORRUPT = 5, 6, 8, 11
SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 13, 14, 26
OPEN = "open the session database"
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
ERRSTR_CODES = {
    "database is locked": SQLITE_BUSY,
    "database table is locked": SQLITE_LOCKED,
    "attempt to write a readonly database": SQLITE_READONLY,
    "database disk image is malformed": SQLITE_CORRUPT,
    "database or disk is full": SQLITE_FULL,
    "unable to open database file": SQLITE_CANTOPEN,
    "file is not a database": SQLITE_NOTADB,
}


class Connections:
    """Per-thread sqlite-utils `Database`s on one file, with transactions and error translation."""

    def __init__(self, path: Path, *, busy_timeout: float) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.read_only_reason = ""  # why the file opened read-only ("" when writable)
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

    @property
    def read_only(self) -> bool:
        """Whether the file opened read-only (opens it if no thread has yet)."""
        self.db  # noqa: B018 - opening decides it
        return bool(self.read_only_reason)

    def close(self) -> None:
        """Close every thread's connection; the store reopens on next use."""
        with self._lock:
            for _, conn in self._connections:
                conn.close()
            self._connections.clear()
            self._local = threading.local()

    def sweep(self) -> None:
        """Close the connections of threads that have ended."""
        with self._lock:
            self._sweep()

    def _sweep(self) -> None:
        alive = []
        for thread, conn in self._connections:
            if thread.is_alive():
                alive.append((thread, conn))
            else:
                conn.close()
        self._connections = alive

    def _connect(self) -> Database:
        conn = self._open()
        try:
            conn.text_factory = lambda data: data.decode("utf-8", "replace")
            db = Database(conn, execute_plugins=False)
            with self.errors(OPEN):
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=ON")
                if not self._migrated:
                    self._migrate(db)
        except BaseException:
            conn.close()  # a refused file keeps no connection (and is not touched)
            raise
        with self._lock:
            self._sweep()
            self._connections.append((threading.current_thread(), conn))
        return db

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            reason = self._why_read_only()
            if not reason:
                # Each connection is used by its own thread only; check_same_thread=False lets
                # close() and the dead-thread sweep close it from another thread.
                return sqlite3.connect(
                    self.path, timeout=self.busy_timeout, check_same_thread=False
                )
            conn = self._open_read_only()
            self.read_only_reason = reason
            return conn
        except sqlite3.Error as exc:
            raise self._translate(exc, OPEN) from exc
        except OSError as exc:
            raise StoreError(
                f"Could not {OPEN}: its folder {self.path.parent} cannot be made "
                f"({exc.strerror or exc}). Point NBCHAT_DB_PATH (or NBCHAT_HOME) at a folder "
                "you can write."
            ) from exc

    def _why_read_only(self) -> str:
        """Why this process may not write the file ("" when it may, or it does not exist yet)."""
        if not self.path.exists():
            return ""
        if hasattr(os, "statvfs") and os.statvfs(self.path).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
        if not os.access(self.path, os.W_OK):
            return "the file is read-only"
        if not os.access(self.path.parent, os.W_OK):
            # WAL needs to create `-wal` and `-shm` files beside the database.
            return "its folder is read-only"
        return ""

    def _open_read_only(self) -> sqlite3.Connection:
        uri = self.path.resolve().as_uri()
        for options in ("mode=ro", "mode=ro&immutable=1"):
            conn = sqlite3.connect(
                f"{uri}?{options}", uri=True, timeout=self.busy_timeout, check_same_thread=False
            )
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                conn.execute("PRAGMA query_only=ON")
                return conn
            except sqlite3.Error as exc:
                conn.close()
                # mode=ro still needs the WAL's -shm file; `immutable` reads without it (a
                # snapshot: nobody can write beside it either, as the folder is read-only).
                if _code(exc) not in (SQLITE_CANTOPEN, SQLITE_READONLY) or "immutable" in options:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

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
            # A read-only file is read as it is: reads use no column a later migration added.
            if applied != KNOWN and not self.read_only_reason:
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
        """The one message for each way SQLite refuses: what happened to which file, and what
        the user can do about it (never "run nbchat doctor": doctor shows these very words)."""
        code = _code(exc)
        if code in (SQLITE_BUSY, SQLITE_LOCKED):
            return StoreError(
                f"Could not {action}: the session database {self.path} stayed locked by another "
                f"process for more than {self.busy_timeout:g}s. Close other kernels or programs "
                "using it and try again; nothing was written."
            )
        if code == SQLITE_FULL:
            return StoreError(
                f"Could not {action}: the disk holding {self.path} is full. Free some space and "
                "try again; nothing was written."
            )
        if code in (SQLITE_NOTADB, SQLITE_CORRUPT):
            return StoreError(f"Could not {action}: {self._unreadable(exc)}")
        if code == SQLITE_READONLY:
            return StoreError(self.read_only_message(action))
        if code == SQLITE_CANTOPEN:
            return StoreError(f"Could not {action}: {self._unopenable()}")
        return StoreError(
            f"Could not {action} in {self.path}: {exc}. Check that the file and its folder can "
            "be read and written, or point NBCHAT_DB_PATH at another file."
        )

    def _unreadable(self, exc: sqlite3.Error) -> str:
        """A file SQLite cannot read: someone else's file (leave it be) or a damaged database."""
        if not _is_sqlite_file(self.path):
            return (
                f"{self.path} is not a SQLite database, so it is not nbchat's; it was left as it "
                "is. Point NBCHAT_DB_PATH at nbchat's database or at a file that does not exist "
                "yet (nbchat creates it)."
            )
        return (
            f"{self.path} is a damaged SQLite database ({exc}); it was left as it is. Move it "
            f"aside (`mv {self.path} {self.path}.broken`) and nbchat starts a new one there, or "
            "point NBCHAT_DB_PATH at another file."
        )

    def _unopenable(self) -> str:
        """Why SQLite could not open or create the file at all."""
        if self.path.is_dir():
            return (
                f"{self.path} is a folder. Point NBCHAT_DB_PATH at a file, such as "
                f"{self.path / 'nbchat.db'}."
            )
        folder = self.path.parent
        if not self.path.exists() and not _is_writable_folder(folder):
            return (
                f"{self.path} does not exist and cannot be created: its folder {folder} is "
                "read-only here. Point NBCHAT_DB_PATH (or NBCHAT_HOME) at a folder you can write."
            )
        return (
            f"SQLite cannot open {self.path}. Check that it and its folder can be read and "
            "written, or point NBCHAT_DB_PATH at another file."
        )

    def read_only_message(self, action: str) -> str:
        why = self.read_only_reason or "SQLite refused to write it"
        return (
            f"Could not {action}: the session database {self.path} is read-only here ({why}). "
            "Sessions can be listed, shown and exported, not changed. Make it writable, or "
            "copy it somewhere writable and set NBCHAT_DB_PATH to the copy."
        )

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
        if self.read_only_reason:
            raise StoreError(self.read_only_message(action))
        with self.errors(action):
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.conn.rollback()
                raise
            db.conn.commit()


def _is_sqlite_file(path: Path) -> bool:
    """Whether `path` starts with SQLite's header (so it is a database, if a damaged one)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _is_writable_folder(folder: Path) -> bool:
    """Whether new files can be made in `folder` (a read-only mount, or no permission)."""
    try:
        read_only_mount = hasattr(os, "statvfs") and os.statvfs(folder).f_flag & os.ST_RDONLY
    except OSError:  # it cannot even be looked at
        return False
    return not read_only_mount and os.access(folder, os.W_OK | os.X_OK)


def _code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code for `exc`, None when it cannot be known exactly."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF
    # Python 3.10 has no error codes: SQLite's own text for a result code (sqlite3_errstr),
    # compared whole, is the next exact thing. Any other message stays unclassified.
    return ERRSTR_CODES.get(str(exc))


def _lock_file(lock_file: Any) -> None:
    """Hold an exclusive lock on `lock_file` until it is closed (POSIX; no-op elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: migrations race only on first creation
        return
    fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)

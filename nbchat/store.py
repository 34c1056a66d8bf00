"""`Store`: every session, row, compaction and request record, in one SQLite file.

The storage model is drawn in `nbchat.migrations`. Here: one connection per thread (SQLite
connections must not cross threads), WAL with `synchronous=NORMAL`, a busy timeout, and every
write in one `BEGIN IMMEDIATE` transaction, so concurrent writers (threads or kernels) queue
instead of failing and a failure half-way leaves nothing behind. sqlite3 errors stop here and
become `StoreError`s that say what to do.

Compaction never deletes: `replace_with_compacted` and `replace_rows` archive the replaced rows
and link them to a compaction record. The active history (what the model sees) and the full
transcript (everything, in order) are both one query away.

Must not: hold UI state, call the model, or build prompts.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from nbchat.errors import StoreError
from nbchat.export import to_markdown
from nbchat.history import ROLES, Row, estimate_tokens, parse_tool_calls, to_row
from nbchat.migrations import KNOWN, MIGRATIONS

__all__ = ["CompactionRecord", "SessionInfo", "Store", "StoredRow"]

LEASE_SECONDS = 3600.0
ROW_COLUMNS = (
    "id, position, role, content, tool_id, tool_name, tool_args, created, archived, compaction_id"
)


@dataclass(frozen=True)
class SessionInfo:
    """A session as listed: title, model, times and row counts."""

    id: str
    title: str
    model: str
    created: str
    updated: str
    active_rows: int
    total_rows: int


@dataclass(frozen=True)
class StoredRow:
    """A row as stored, with its place in the transcript and its archive link."""

    id: int
    position: int
    row: Row
    created: str
    archived: bool
    compaction_id: int | None


@dataclass(frozen=True)
class CompactionRecord:
    """What a compaction did, recorded beside the rows it archived."""

    kind: str
    summary: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration: float = 0.0


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Store:
    """The SQLite store at `path`; created and migrated on first use by any thread."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._migrated = False
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

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
        with self._errors("open"):
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
    def _errors(self, action: str) -> Iterator[None]:
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
        with self._errors(action):
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.conn.rollback()
                raise
            db.conn.commit()

    # Sessions

    def create_session(
        self, title: str = "", *, model: str = "", settings: Mapping[str, Any] | None = None
    ) -> str:
        """A new empty session; returns its id. `settings` must hold no secrets."""
        session_id = uuid.uuid4().hex[:12]
        stamp = now()
        record = {
            "id": session_id,
            "title": title or "New chat",
            "model": model,
            "created": stamp,
            "updated": stamp,
            "settings": json.dumps(dict(settings or {}), default=str),
        }
        with self.transaction("create a session") as db:
            db.table("sessions").insert(record)
        return session_id

    def get_session(self, session_id: str) -> SessionInfo:
        found = self._session_infos("WHERE s.id = ?", [session_id])
        if not found:
            raise StoreError(
                f"No session {session_id!r} in {self.path}. List them with `nbchat sessions`."
            )
        return found[0]

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, most recently updated first."""
        return self._session_infos("", [])

    def _session_infos(self, where: str, params: list[Any]) -> list[SessionInfo]:
        sql = (
            "SELECT s.id, s.title, s.model, s.created, s.updated, "
            "COALESCE(SUM(r.archived = 0), 0), COUNT(r.id) FROM sessions s "
            f"LEFT JOIN rows r ON r.session_id = s.id {where} "
            "GROUP BY s.id ORDER BY s.updated DESC, s.created DESC"
        )
        with self._errors("list sessions"):
            return [SessionInfo(*record) for record in self.db.execute(sql, params).fetchall()]

    def rename_session(self, session_id: str, title: str) -> None:
        if not title.strip():
            raise StoreError("A session title cannot be empty.")
        self.get_session(session_id)
        with self.transaction("rename the session") as db:
            db.table("sessions").update(session_id, {"title": title.strip(), "updated": now()})

    def delete_session(self, session_id: str) -> None:
        """Delete a session with its rows, compactions and request records."""
        self.get_session(session_id)
        with self.transaction("delete the session") as db:
            for table in ("rows", "requests", "compactions"):
                db.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
            db.execute("DELETE FROM sessions WHERE id = ?", [session_id])

    def session_settings(self, session_id: str) -> dict[str, Any]:
        with self._errors("read the session settings"):
            found = self.db.execute(
                "SELECT settings FROM sessions WHERE id = ?", [session_id]
            ).fetchone()
        return dict(json.loads(found[0] or "{}")) if found else {}

    # Rows

    def append_rows(self, session_id: str, rows: Iterable[Sequence[str]]) -> list[int]:
        """Append rows at the end of the session, all in one transaction; returns their ids."""
        checked = [to_row(row) for row in rows]
        if not checked:
            return []
        with self.transaction("save the message") as db:
            self._require_session(db, session_id)
            position = self._next_position(db, session_id)
            stamp = now()
            ids = []
            for offset, row in enumerate(checked):
                cursor = db.execute(
                    "INSERT INTO rows (session_id, position, role, content, tool_id, tool_name, "
                    "tool_args, tokens, created, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                    [session_id, position + offset, *row, estimate_tokens(row), stamp],
                )
                ids.append(int(cursor.lastrowid or 0))
            self._touch(db, session_id, stamp)
        return ids

    def load_active(
        self, session_id: str, *, problems: list[StoreError] | None = None
    ) -> list[Row]:
        """What the model sees: the `compacted` row (if any) and every row after it.

        A corrupt row raises a `StoreError` naming it; pass a `problems` list to skip corrupt
        rows instead (their errors are appended) and load the rest.
        """
        return [s.row for s in self._load(session_id, "AND archived = 0", problems)]

    def load_active_ids(self, session_id: str) -> list[int]:
        """The ids of the active rows, in order (corrupt ones included)."""
        with self._errors("load the session"):
            return [
                r[0]
                for r in self.db.execute(
                    "SELECT id FROM rows WHERE session_id = ? AND archived = 0 "
                    "ORDER BY position, id",
                    [session_id],
                ).fetchall()
            ]

    def load_full(
        self, session_id: str, *, problems: list[StoreError] | None = None
    ) -> list[StoredRow]:
        """The full transcript: every row ever written, archived ones included, in order."""
        return self._load(session_id, "", problems)

    def _load(
        self, session_id: str, where: str, problems: list[StoreError] | None
    ) -> list[StoredRow]:
        self.get_session(session_id)
        with self._errors("load the session"):
            records = self.db.execute(
                f"SELECT {ROW_COLUMNS} FROM rows WHERE session_id = ? {where} "
                "ORDER BY position, id",
                [session_id],
            ).fetchall()
        loaded = []
        for record in records:
            try:
                loaded.append(_to_stored_row(record))
            except ValueError as exc:
                error = StoreError(
                    f"Session {session_id}: row {record[0]} (position {record[1]}) is corrupt: "
                    f"{exc}. It was skipped; the rest of the session loads. Export the session "
                    "to keep a copy, then delete or fix that row."
                )
                if problems is None:
                    raise error from exc
                problems.append(error)
        return loaded

    def find_tool_result(self, session_id: str, tool_id: str) -> StoredRow | None:
        """The newest `tool` row answering `tool_id`, archived or not (original first)."""
        with self._errors("read an archived row"):
            record = self.db.execute(
                f"SELECT {ROW_COLUMNS} FROM rows WHERE session_id = ? AND tool_id = ? "
                "AND role = 'tool' ORDER BY archived DESC, id DESC LIMIT 1",
                [session_id, tool_id],
            ).fetchone()
        return _to_stored_row(record) if record else None

    # Compaction

    def replace_with_compacted(
        self,
        session_id: str,
        compacted: Sequence[str],
        *,
        keep_tail: int,
        expected_active: int,
        record: CompactionRecord,
    ) -> int:
        """Archive all active rows but the last `keep_tail`, put `compacted` before the tail.

        One transaction; returns the compaction record's id. `expected_active` is the length of
        the history the compaction was computed from: a mismatch means the session changed
        meanwhile and nothing is written.
        """
        with self.transaction("save the compaction") as db:
            active = self._active_ids_positions(db, session_id, expected_active)
            replaced = active[: len(active) - keep_tail] if keep_tail else active
            if not replaced:
                raise StoreError("A compaction must replace at least one row.")
            compaction_id = self._record_compaction(db, session_id, record, len(replaced))
            self._archive(db, [row_id for row_id, _ in replaced], compaction_id)
            self._insert_at(db, session_id, to_row(compacted), replaced[-1][1])
        return compaction_id

    def replace_rows(
        self,
        session_id: str,
        replacements: Mapping[int, Sequence[str]],
        *,
        expected_active: int,
        record: CompactionRecord,
    ) -> int:
        """Archive the active rows at the given indexes and put the new rows in their places."""
        with self.transaction("save the pruned rows") as db:
            active = self._active_ids_positions(db, session_id, expected_active)
            compaction_id = self._record_compaction(db, session_id, record, len(replacements))
            for index, new_row in sorted(replacements.items()):
                row_id, position = active[index]
                self._archive(db, [row_id], compaction_id)
                self._insert_at(db, session_id, to_row(new_row), position)
        return compaction_id

    def archive_last(self, session_id: str, count: int, *, expected_active: int, kind: str) -> int:
        """Archive the last `count` active rows (a retried reply, an edited message).

        Nothing is deleted: the rows stay in the full transcript, linked to a record of `kind`.
        """
        with self.transaction("archive the last rows") as db:
            active = self._active_ids_positions(db, session_id, expected_active)
            if not 0 < count <= len(active):
                raise StoreError(f"Cannot archive {count} of {len(active)} active rows.")
            record = CompactionRecord(kind=kind)
            record_id = self._record_compaction(db, session_id, record, count)
            self._archive(db, [row_id for row_id, _ in active[-count:]], record_id)
        return record_id

    def list_compactions(self, session_id: str) -> list[dict[str, Any]]:
        with self._errors("list compactions"):
            return list(
                self.db.table("compactions").rows_where(
                    "session_id = ?", [session_id], order_by="id"
                )
            )

    def _active_ids_positions(
        self, db: Database, session_id: str, expected: int
    ) -> list[tuple[int, int]]:
        self._require_session(db, session_id)
        active = [
            (int(i), int(p))
            for i, p in db.execute(
                "SELECT id, position FROM rows WHERE session_id = ? AND archived = 0 "
                "ORDER BY position, id",
                [session_id],
            ).fetchall()
        ]
        if len(active) != expected:
            raise StoreError(
                f"Session {session_id} changed while compacting ({len(active)} active rows, "
                f"expected {expected}); nothing was written. Reload the session and retry."
            )
        return active

    def _record_compaction(
        self, db: Database, session_id: str, record: CompactionRecord, rows_replaced: int
    ) -> int:
        cursor = db.execute(
            "INSERT INTO compactions (session_id, kind, summary, rows_replaced, tokens_before, "
            "tokens_after, model, prompt_tokens, completion_tokens, duration, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                session_id,
                record.kind,
                record.summary,
                rows_replaced,
                record.tokens_before,
                record.tokens_after,
                record.model,
                record.prompt_tokens,
                record.completion_tokens,
                record.duration,
                now(),
            ],
        )
        return int(cursor.lastrowid or 0)

    def _archive(self, db: Database, row_ids: list[int], compaction_id: int) -> None:
        db.conn.executemany(
            "UPDATE rows SET archived = 1, compaction_id = ? WHERE id = ?",
            [(compaction_id, row_id) for row_id in row_ids],
        )

    def _insert_at(self, db: Database, session_id: str, row: Row, position: int) -> None:
        # Same position as the last row replaced, higher id: it sorts right after it.
        stamp = now()
        db.execute(
            "INSERT INTO rows (session_id, position, role, content, tool_id, tool_name, "
            "tool_args, tokens, created, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
            [session_id, position, *row, estimate_tokens(row), stamp],
        )
        self._touch(db, session_id, stamp)

    # Requests (usage)

    def record_request(
        self,
        session_id: str,
        *,
        kind: str = "chat",
        model: str = "",
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        duration: float = 0.0,
        active_rows: int = 0,
    ) -> None:
        """One request's reported usage (None where the server did not say)."""
        with self.transaction("record usage") as db:
            db.execute(
                "INSERT INTO requests (session_id, kind, model, prompt_tokens, "
                "completion_tokens, duration, active_rows, created) VALUES (?,?,?,?,?,?,?,?)",
                [
                    session_id,
                    kind,
                    model,
                    prompt_tokens,
                    completion_tokens,
                    duration,
                    active_rows,
                    now(),
                ],
            )

    def list_requests(self, session_id: str) -> list[dict[str, Any]]:
        with self._errors("list requests"):
            return list(
                self.db.table("requests").rows_where("session_id = ?", [session_id], order_by="id")
            )

    # Writer lease: one kernel writes a session, others read it.

    def acquire_lease(
        self, session_id: str, *, owner: str | None = None, seconds: float = LEASE_SECONDS
    ) -> bool:
        """Take or renew the writer lease; False when another live process holds it."""
        owner = owner or self._owner
        host, pid = socket.gethostname(), os.getpid()
        with self.transaction("take the session lease") as db:
            found = db.execute(
                "SELECT lease_owner, lease_pid, lease_host, lease_until FROM sessions WHERE id = ?",
                [session_id],
            ).fetchone()
            if found is None:
                raise StoreError(f"No session {session_id!r} in {self.path}.")
            holder, holder_pid, holder_host, until = found
            if holder and holder != owner and _lease_is_live(holder_pid, holder_host, until):
                return False
            db.execute(
                "UPDATE sessions SET lease_owner = ?, lease_pid = ?, lease_host = ?, "
                "lease_until = ? WHERE id = ?",
                [owner, pid, host, time.time() + seconds, session_id],
            )
        return True

    def release_lease(self, session_id: str, *, owner: str | None = None) -> None:
        with self.transaction("release the session lease") as db:
            db.execute(
                "UPDATE sessions SET lease_owner = NULL, lease_pid = NULL, "
                "lease_host = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?",
                [session_id, owner or self._owner],
            )

    # Export

    def export_json(self, session_id: str) -> str:
        """The whole session as JSON: metadata, full transcript, compactions, requests."""
        info = self.get_session(session_id)
        document = {
            "session": asdict(info),
            "rows": [_stored_to_dict(stored) for stored in self.load_full(session_id, problems=[])],
            "compactions": self.list_compactions(session_id),
            "requests": self.list_requests(session_id),
        }
        return json.dumps(document, indent=2, ensure_ascii=False)

    def export_markdown(self, session_id: str) -> str:
        """The full transcript as Markdown, archived rows marked."""
        info = self.get_session(session_id)
        rows = [_stored_to_dict(s) for s in self.load_full(session_id, problems=[])]
        return to_markdown(asdict(info), rows)

    # Helpers

    def _require_session(self, db: Database, session_id: str) -> None:
        if db.execute("SELECT 1 FROM sessions WHERE id = ?", [session_id]).fetchone() is None:
            raise StoreError(f"No session {session_id!r} in {self.path}.")

    def _next_position(self, db: Database, session_id: str) -> int:
        found = db.execute(
            "SELECT MAX(position) FROM rows WHERE session_id = ?", [session_id]
        ).fetchone()
        return 0 if found[0] is None else int(found[0]) + 1

    def _touch(self, db: Database, session_id: str, stamp: str) -> None:
        db.execute("UPDATE sessions SET updated = ? WHERE id = ?", [stamp, session_id])


def _to_stored_row(record: Sequence[Any]) -> StoredRow:
    row_id, position, role, content, tool_id, tool_name, tool_args, created, archived, cid = record
    fields = (role, content, tool_id, tool_name, tool_args)
    if not all(isinstance(value, str) or value is None for value in fields):
        raise ValueError("a text field holds a non-text value")
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    row = to_row(fields)
    if role == "assistant_full":
        parse_tool_calls(row.tool_args)
    if role == "tool" and not row.tool_id:
        raise ValueError("a tool result without the id of its call")
    return StoredRow(int(row_id), int(position), row, created, bool(archived), cid)


def _stored_to_dict(stored: StoredRow) -> dict[str, Any]:
    return {
        "id": stored.id,
        "position": stored.position,
        **stored.row._asdict(),
        "created": stored.created,
        "archived": stored.archived,
        "compaction_id": stored.compaction_id,
    }


def _lease_is_live(pid: int | None, host: str | None, until: float | None) -> bool:
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


def _lock_file(lock_file: Any) -> None:
    """Hold an exclusive lock on `lock_file` until it is closed (POSIX; no-op elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: migrations race only on first creation
        return
    fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)

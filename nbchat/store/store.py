"""`Store`: every session, row, compaction and request record, in one SQLite file.

The storage model is drawn in `nbchat.store.migrations`, with the schema; connections,
transactions, sqlite3 error translation and read-only files live in `nbchat.store.sqlite`; the
writer lease in `nbchat.store.lease`. Every write here is one transaction, so a failure half-way
leaves nothing behind.

A store that took a session's writer lease renews it from a heartbeat thread while it holds it,
and every write to that session confirms the lease inside the write's own transaction: once
another kernel has taken the session over, the write raises `LeaseLostError` and nothing of it
is stored (`nbchat.store.lease`). The sessions table's SQL lives in `nbchat.store.catalog`, the
row SQL in `nbchat.store.rowsql`, the exports in `nbchat.store.catalog`.

Compaction never deletes: `replace_with_compacted` and `replace_rows` archive the replaced rows
and link them to a compaction record. The active history (what the model sees) and the full
transcript (everything, in order) are both one query away. `undo_compaction` takes the latest
compaction back (`nbchat.store.undo`).

Must not: hold UI state, call the model, or build prompts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from nbchat.config import Settings
from nbchat.errors import StoreError
from nbchat.history import Row, to_row
from nbchat.store import catalog, lease, requests, rowsql, undo
from nbchat.store.catalog import to_json, to_markdown
from nbchat.store.lease import Claims
from nbchat.store.rowsql import (
    CompactionRecord,
    SessionInfo,
    StoredRow,
    check_row,
    now,
    stored_to_dict,
    to_stored_row,
)
from nbchat.store.sqlite import Connections

__all__ = ["CompactionRecord", "SessionInfo", "Store", "StoredRow"]

# A lease lives this long past its last renewal; the heartbeat renews it four times as often,
# so only a kernel that stopped running Python (hung, suspended, gone) lets it expire.
LEASE_SECONDS = 60.0


class Store:
    """The SQLite store at `path` (default: the settings' `db_path`, as the CLI uses);
    created and migrated on first use by any thread."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        busy_timeout: float = 10.0,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.path = Path(path) if path is not None else Settings.load().database_path
        self.busy_timeout = busy_timeout
        self.lease_seconds = lease_seconds
        self.connections = Connections(self.path, busy_timeout=busy_timeout)
        self.claims = Claims(self.connections, seconds=lease_seconds)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    @property
    def db(self) -> Database:
        """This thread's sqlite-utils `Database` (opened and migrated on first use)."""
        return self.connections.db

    @property
    def read_only(self) -> bool:
        """Whether the file opened read-only (a read-only file, folder or mount)."""
        return self.connections.read_only

    def read_only_message(self, action: str = "save") -> str:
        """Why nothing can be written, and what to do (for a read-only store)."""
        return self.connections.read_only_message(action)

    def close(self) -> None:
        """Stop renewing leases and close every thread's connection; reopens on next use."""
        self.claims.stop()
        self.connections.close()

    def transaction(self, action: str) -> contextlib.AbstractContextManager[Database]:
        """One `BEGIN IMMEDIATE` transaction; nested uses join the outer one."""
        return self.connections.transaction(action)

    def _errors(self, action: str) -> contextlib.AbstractContextManager[None]:
        return self.connections.errors(action)

    @contextlib.contextmanager
    def _write(self, session_id: str, action: str) -> Iterator[Database]:
        """A transaction writing to `session_id`, which first confirms (and renews) our lease
        on it if we took one: a session another kernel took over is never written."""
        with self.transaction(action) as db:
            self.claims.confirm(db, session_id, action)
            yield db

    # Sessions

    def create_session(
        self, title: str = "", *, model: str = "", settings: Mapping[str, Any] | None = None
    ) -> str:
        """A new empty session; returns its id. `settings` must hold no secrets."""
        with self.transaction("create a session") as db:
            return catalog.insert_session(db, title, model=model, settings=settings or {})

    def get_session(self, session_id: str) -> SessionInfo:
        found = self._session_infos("WHERE s.id = ?", [session_id])
        if not found:
            raise StoreError(
                f"No session {session_id!r} in {self.path}. List them with `nbchat sessions`."
            )
        return found[0]

    def has_session(self, session_id: str) -> bool:
        """Whether `session_id` is in this database (a deleted one is not)."""
        return bool(self._session_infos("WHERE s.id = ?", [session_id]))

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, most recently updated first."""
        return self._session_infos("", [])

    def _session_infos(self, where: str, params: list[Any]) -> list[SessionInfo]:
        with self._errors("list sessions"):
            return catalog.session_infos(self.db, where, params)

    def rename_session(self, session_id: str, title: str) -> None:
        if not title.strip():
            raise StoreError("A session title cannot be empty.")
        self.get_session(session_id)
        with self._write(session_id, "rename the session") as db:
            db.table("sessions").update(session_id, {"title": title.strip(), "updated": now()})

    def name_untitled(self, session_id: str, title: str) -> bool:
        """Title a session still called "New chat" (one the user renamed keeps its name)."""
        with self._write(session_id, "title the session") as db:
            return catalog.name_untitled(db, session_id, title)

    def set_session_model(self, session_id: str, model: str) -> None:
        """Record the model a session talks to (the name the server really serves)."""
        with self._write(session_id, "record the model") as db:
            db.table("sessions").update(session_id, {"model": model})

    def delete_session(self, session_id: str) -> None:
        """Delete a session with its rows, compactions and request records."""
        self.get_session(session_id)
        with self._write(session_id, "delete the session") as db:
            catalog.delete_session(db, session_id)

    # Rows

    def append_rows(self, session_id: str, rows: Iterable[Sequence[str]]) -> list[int]:
        """Append rows at the end of the session, all in one transaction; returns their ids."""
        checked = [check_row(to_row(row)) for row in rows]  # refused before anything is written
        if not checked:
            return []
        with self._write(session_id, "save the message") as db:
            rowsql.require_session(db, session_id)
            position = rowsql.next_position(db, session_id)
            placed = [(row, position + offset) for offset, row in enumerate(checked)]
            return rowsql.insert_rows(db, session_id, placed)

    def load_active(
        self, session_id: str, *, problems: list[StoreError] | None = None
    ) -> list[Row]:
        """What the model sees: the `compacted` row (if any) and every row after it.

        A corrupt row raises a `StoreError` naming it; pass a `problems` list to skip corrupt
        rows instead (their errors are appended) and load the rest.
        """
        return [s.row for s in self._load(session_id, "AND archived = 0", problems)]

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
            return catalog.read_rows(self.db, session_id, where, problems)

    def last_active_id(self, session_id: str, role: str) -> int | None:
        """The id of the newest active row of `role` (None when there is none)."""
        with self._errors("read the session"):
            found = self.db.execute(
                "SELECT id FROM rows WHERE session_id = ? AND role = ? AND archived = 0 "
                "ORDER BY position DESC, id DESC LIMIT 1",
                [session_id, role],
            ).fetchone()
        return int(found[0]) if found else None

    def find_tool_result(self, session_id: str, tool_id: str) -> StoredRow | None:
        """The original result of the newest call `tool_id` names, archived or not. A pruned
        placeholder sits at its original's position with a higher id, whether it is active, or
        archived by a later compaction or by an undo."""
        with self._errors("read an archived row"):
            record = self.db.execute(
                f"SELECT {rowsql.ROW_COLUMNS} FROM rows WHERE session_id = ? AND tool_id = ? "
                "AND role = 'tool' ORDER BY position DESC, id ASC LIMIT 1",
                [session_id, tool_id],
            ).fetchone()
        return to_stored_row(record) if record else None

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
        with self._write(session_id, "save the compaction") as db:
            active = rowsql.active_positions(db, session_id, expected_active)
            summary = to_row(compacted)
            return rowsql.compact_rows(
                db, session_id, active, compacted=summary, keep_tail=keep_tail, record=record
            )

    def replace_rows(
        self,
        session_id: str,
        replacements: Mapping[int, Sequence[str]],
        *,
        expected_active: int,
        record: CompactionRecord,
    ) -> int:
        """Archive the active rows at the given indexes and put the new rows in their places."""
        with self._write(session_id, "save the pruned rows") as db:
            active, _ = rowsql.active_positions(db, session_id, expected_active)
            checked = {index: to_row(row) for index, row in replacements.items()}
            return rowsql.replace_at(db, session_id, active, checked, record=record)

    def archive_last(self, session_id: str, count: int, *, expected_active: int, kind: str) -> int:
        """Archive the last `count` active rows (a retried reply, an edited message).

        Nothing is deleted: the rows stay in the full transcript, linked to a record of `kind`.
        """
        with self._write(session_id, "archive the last rows") as db:
            active = rowsql.active_positions(db, session_id, expected_active)
            return rowsql.archive_last(db, session_id, active, count=count, kind=kind)

    # The assistant's changes to notebook cells (`nbchat.store.rowsql`)

    def record_notebook_change(
        self,
        session_id: str,
        *,
        call_id: str,
        kind: str,
        cell_id: str,
        cell_kind: str,
        before: str,
        after: str,
    ) -> int:
        """Keep one insert or edit of a cell, by the tool call that made it; its id."""
        with self._write(session_id, "record the notebook change") as db:
            return rowsql.record(
                db,
                session_id,
                call_id=call_id,
                kind=kind,
                cell_id=cell_id,
                cell_kind=cell_kind,
                before=before,
                after=after,
            )

    def notebook_changes(self, session_id: str) -> list[rowsql.NotebookChange]:
        """Every change the assistant made to the notebook in `session_id`, oldest first."""
        with self._errors("read the notebook changes"):
            return rowsql.load(self.db, session_id)

    def rewind(
        self,
        session_id: str,
        count: int,
        *,
        expected_active: int,
        outcomes: Mapping[int, str],
    ) -> int:
        """Archive the last `count` active rows (a rewind: they stay in the transcript) and
        settle the notebook changes taken back with them, in one transaction; the record id."""
        with self._write(session_id, "rewind the session") as db:
            active = rowsql.active_positions(db, session_id, expected_active)
            record_id = rowsql.archive_last(db, session_id, active, count=count, kind="rewind")
            rowsql.settle(db, outcomes)
            return record_id

    def list_compactions(self, session_id: str) -> list[dict[str, Any]]:
        with self._errors("list compactions"):
            return list(
                self.db.table("compactions").rows_where(
                    "session_id = ?", [session_id], order_by="id"
                )
            )

    def plan_undo(self, session_id: str, record_id: int | None = None) -> undo.UndoPlan:
        """What undoing the latest compaction would do (`nbchat.store.undo`); writes nothing."""
        self.get_session(session_id)
        with self._errors("read the compactions"):
            return undo.plan(self.db, session_id, record_id)

    def undo_compaction(
        self, session_id: str, record_id: int | None = None, *, expected_active: int | None = None
    ) -> undo.UndoPlan:
        """Undo the latest compaction in one transaction (`nbchat.store.undo`). Refused, naming
        the holder, when another kernel writes the session."""
        self.get_session(session_id)
        with self._write(session_id, "undo the compaction") as db:
            undo.refuse_if_held(db, session_id, ours=self.claims.owner_of(session_id))
            done = undo.plan(db, session_id, record_id)
            undo.apply(db, done, expected_active=expected_active)
        return done

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
        request_id: int | None = None,
    ) -> None:
        """One request's reported usage (None where the server did not say); with
        `request_id`, added to that request's record (`record_sent`) instead of a new row."""
        if request_id is not None:
            with self._write(session_id, "record usage") as db:
                requests.add_usage(db, request_id, prompt_tokens, completion_tokens, duration)
            return
        record = {
            "session_id": session_id,
            "kind": kind,
            "model": model,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "duration": duration,
            "active_rows": active_rows,
            "created": now(),
        }
        with self._write(session_id, "record usage") as db:
            db.table("requests").insert(record)

    def list_requests(self, session_id: str) -> list[dict[str, Any]]:
        with self._errors("list requests"):
            return list(
                self.db.table("requests").rows_where("session_id = ?", [session_id], order_by="id")
            )

    def record_sent(self, session_id: str, body: Mapping[str, Any], *, system_prompt: str) -> int:
        """Record a chat request about to be sent (see `nbchat.store.requests`); its id."""
        with self._write(session_id, "record the request") as db:
            return requests.record_sent(db, session_id, body, system_prompt=system_prompt)

    def sent_request(self, request_id: int) -> requests.SentRequest | None:
        """A recorded request with its rows, to rebuild exactly (None: nothing recorded)."""
        with self._errors("read a request record"):
            return requests.load_sent(self.db, request_id)

    def sent_requests(self, session_id: str) -> list[tuple[int, str]]:
        """(id, time recorded) of `session_id`'s recorded requests, oldest first."""
        with self._errors("list request records"):
            return requests.list_sent(self.db, session_id)

    # Writer lease: one kernel writes a session, others read it (see `nbchat.store.lease`).

    def acquire_lease(self, session_id: str, *, owner: str | None = None) -> bool:
        """Take or renew the writer lease; False when another live process holds it.

        Once taken, the heartbeat renews it and every write to the session confirms it.
        """
        return self.claims.acquire(session_id, owner=owner, path=self.path)

    def release_lease(self, session_id: str, *, owner: str | None = None) -> None:
        """Give the lease back if we hold it (a no-op for a session we never took)."""
        self.claims.release(session_id, owner=owner)

    def lease_holder(self, session_id: str) -> lease.Holder | None:
        """Who holds `session_id`'s lease, as recorded (None when there is no such session)."""
        return self.claims.holder(session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store still holds `session_id`'s writer lease, as recorded now."""
        return self.claims.holds(session_id)

    # Export

    def export_json(self, session_id: str) -> str:
        """The whole session as JSON: metadata, full transcript, compactions, requests."""
        info = self.get_session(session_id)
        return to_json(
            asdict(info),
            [stored_to_dict(stored) for stored in self.load_full(session_id, problems=[])],
            compactions=self.list_compactions(session_id),
            requests=self.list_requests(session_id),
            notebook_changes=[asdict(c) for c in self.notebook_changes(session_id)],
        )

    def export_markdown(self, session_id: str) -> str:
        """The full transcript as Markdown, archived rows marked."""
        info = self.get_session(session_id)
        rows = [stored_to_dict(s) for s in self.load_full(session_id, problems=[])]
        return to_markdown(asdict(info), rows)

"""The sessions table: create a session, read sessions with their row counts, delete one with
everything it owns, and read a session's rows back (skipping or naming corrupt ones).

Every function runs on the caller's `Database`, inside the caller's transaction for writes
(`Store.transaction`), so a delete is all done or not at all.

Must not: open connections or transactions of its own, or check leases (the store does).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from sqlite_utils import Database

from nbchat.errors import StoreError
from nbchat.store import requests, rowsql
from nbchat.store.records import SessionInfo, StoredRow, now, to_stored_row

__all__ = [
    "DEFAULT_TITLE",
    "delete_session",
    "insert_session",
    "name_untitled",
    "read_rows",
    "session_infos",
]

DEFAULT_TITLE = "New chat"  # until the first message names the session


def insert_session(db: Database, title: str, *, model: str, settings: Mapping[str, Any]) -> str:
    """A new empty session; its id."""
    session_id = uuid.uuid4().hex[:12]
    stamp = now()
    record = {
        "id": session_id,
        "title": title or DEFAULT_TITLE,
        "model": model,
        "created": stamp,
        "updated": stamp,
        "settings": json.dumps(dict(settings), default=str),
    }
    db.table("sessions").insert(record)
    return session_id


def name_untitled(db: Database, session_id: str, title: str) -> bool:
    """Give a session still called `DEFAULT_TITLE` the title `title` (a name the user chose is
    kept); whether it was renamed."""
    cursor = db.execute(
        "UPDATE sessions SET title = ? WHERE id = ? AND title = ?",
        [title, session_id, DEFAULT_TITLE],
    )
    return cursor.rowcount == 1


def session_infos(db: Database, where: str, params: list[Any]) -> list[SessionInfo]:
    """The sessions `where` selects (on `s.`, the sessions table), most recently updated
    first, with their active and total row counts."""
    sql = (
        "SELECT s.id, s.title, s.model, s.created, s.updated, "
        "COALESCE(SUM(r.archived = 0), 0), COUNT(r.id) FROM sessions s "
        f"LEFT JOIN rows r ON r.session_id = s.id {where} "
        "GROUP BY s.id ORDER BY s.updated DESC, s.created DESC"
    )
    return [SessionInfo(*record) for record in db.execute(sql, params).fetchall()]


def delete_session(db: Database, session_id: str) -> None:
    """Delete a session with its rows, compactions, request records and notebook changes."""
    for table in ("rows", "requests", "compactions", "notebook_changes"):
        db.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
    db.execute("DELETE FROM sessions WHERE id = ?", [session_id])
    requests.drop_unused_parts(db)


def read_rows(
    db: Database, session_id: str, where: str, problems: list[StoreError] | None
) -> list[StoredRow]:
    """`session_id`'s rows that `where` selects, in order. A corrupt row raises a
    `StoreError` naming it, or with a `problems` list is skipped and its error appended."""
    records = db.execute(
        f"SELECT {rowsql.ROW_COLUMNS} FROM rows WHERE session_id = ? {where} ORDER BY position, id",
        [session_id],
    ).fetchall()
    loaded = []
    for record in records:
        try:
            loaded.append(to_stored_row(record))
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

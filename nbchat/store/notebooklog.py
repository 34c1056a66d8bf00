"""The assistant's changes to notebook cells, as the store keeps them (table `notebook_changes`).

Each insert or edit the assistant made is one record, tied to its session and to the tool call
that made it: the cell's id and kind, its source before ("" for an inserted cell) and after.
A rewind settles the records it took back, in the same transaction that archives the chat's
rows: `reverted_at` and an `outcome` ("reverted", "removed", or why the cell was left alone).
Nothing is deleted, so the export still shows every change and what became of it.

Runs inside the caller's transaction. Must not: open connections, or know about documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlite_utils import Database

from nbchat.store.records import now

__all__ = ["NotebookChange", "load", "record", "settle"]

COLUMNS = "id, call_id, kind, cell_id, cell_kind, before, after, created, reverted_at, outcome"


@dataclass(frozen=True)
class NotebookChange:
    """One stored change; `reverted_at` is "" until a rewind settled it."""

    id: int
    call_id: str
    kind: str
    cell_id: str
    cell_kind: str
    before: str
    after: str
    created: str
    reverted_at: str = ""
    outcome: str = ""


def record(
    db: Database,
    session_id: str,
    *,
    call_id: str,
    kind: str,
    cell_id: str,
    cell_kind: str,
    before: str,
    after: str,
) -> int:
    """Store one change; its id."""
    cursor = db.conn.execute(
        "INSERT INTO notebook_changes (session_id, call_id, kind, cell_id, cell_kind, before, "
        "after, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [session_id, call_id, kind, cell_id, cell_kind, before, after, now()],
    )
    return int(cursor.lastrowid or 0)


def load(db: Database, session_id: str) -> list[NotebookChange]:
    """Every change of `session_id`, oldest first."""
    found = db.execute(
        f"SELECT {COLUMNS} FROM notebook_changes WHERE session_id = ? ORDER BY id",
        [session_id],
    ).fetchall()
    return [
        NotebookChange(
            id=row[0],
            call_id=row[1],
            kind=row[2],
            cell_id=row[3],
            cell_kind=row[4] or "",
            before=row[5],
            after=row[6],
            created=row[7],
            reverted_at=row[8] or "",
            outcome=row[9] or "",
        )
        for row in found
    ]


def settle(db: Database, outcomes: Mapping[int, str]) -> None:
    """Stamp each change id with what the rewind did to it."""
    stamp = now()
    db.conn.executemany(
        "UPDATE notebook_changes SET reverted_at = ?, outcome = ? WHERE id = ?",
        [(stamp, outcome, change_id) for change_id, outcome in outcomes.items()],
    )

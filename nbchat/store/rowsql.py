"""The store's rows: the values it hands out (a session as listed, a row as stored, a compaction
record, and a raw SQL row converted into a checked `StoredRow`: a corrupt one raises
ValueError), and its row-level SQL over the history rows (inserted at positions, archived, the
active ones found, a compaction recorded and written: a summary, pruned rows, archived last
rows) and the assistant's changes to notebook cells (table `notebook_changes`).

Every SQL function runs inside the caller's transaction (`Store.transaction`), so a compaction,
a prune or a retry is all written or not at all. Nothing here deletes a row: replaced rows are
archived and linked to their compaction record.

Notebook changes: each insert or edit the assistant made is one record, tied to its session and
to the tool call that made it: the cell's id and kind, its source before ("" for an inserted
cell) and after. A rewind settles the records it took back, in the same transaction that
archives the chat's rows: `reverted_at` and an `outcome` ("reverted", "removed", or why the cell
was left alone). Nothing is deleted, so the export still shows every change and what became of
it.

Must not: open connections or transactions of its own, or know about documents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, TypeAlias

from sqlite_utils import Database

from nbchat.errors import StoreError
from nbchat.history import ROLES, Row, parse_tool_calls, to_row

__all__ = [
    "CompactionRecord",
    "NotebookChange",
    "SessionInfo",
    "StoredRow",
    "active_positions",
    "archive",
    "archive_last",
    "check_row",
    "compact_rows",
    "insert_rows",
    "load",
    "next_position",
    "now",
    "record",
    "record_compaction",
    "replace_at",
    "require_session",
    "settle",
    "stored_to_dict",
    "to_stored_row",
    "touch",
]


def now() -> str:
    """The current UTC time as stored (ISO 8601, microseconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


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
    undone_at: str | None = None  # when the compaction was undone (`nbchat.store.undo`)


def to_stored_row(record: Sequence[Any]) -> StoredRow:
    row_id, position, role, content, tool_id, tool_name, tool_args, created, archived, cid = record
    fields = (role, content, tool_id, tool_name, tool_args)
    if not all(isinstance(value, str) or value is None for value in fields):
        raise ValueError("a text field holds a non-text value")
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    row = check_row(to_row(fields))
    return StoredRow(int(row_id), int(position), row, created, bool(archived), cid)


def check_row(row: Row) -> Row:
    """`row` if the store can read it back; ValueError saying what is wrong otherwise."""
    if row.role == "assistant_full":
        parse_tool_calls(row.tool_args)
    if row.role == "tool" and not row.tool_id:
        raise ValueError("a tool result without the id of its call")
    return row


def stored_to_dict(stored: StoredRow) -> dict[str, Any]:
    return {
        "id": stored.id,
        "position": stored.position,
        **stored.row._asdict(),
        "created": stored.created,
        "archived": stored.archived,
        "compaction_id": stored.compaction_id,
    }


ROW_COLUMNS = (
    "id, position, role, content, tool_id, tool_name, tool_args, created, archived, compaction_id"
)
# ROW_COLUMNS for telling corrupt rows apart without reading every content: text stands as ''.
CHECK_COLUMNS = ROW_COLUMNS.replace(
    "content", "CASE WHEN typeof(content) = 'text' THEN '' ELSE content END"
)


# (id, position) of the readable active rows, and of the corrupt ones (`active_positions`)
Positions: TypeAlias = tuple[list[tuple[int, int]], list[tuple[int, int]]]


def active_positions(db: Database, session_id: str, expected: int) -> Positions:
    """The active rows' (id, position): the readable ones, which line up with the history
    loaded from them (`load_active` skips corrupt rows too), and the corrupt ones."""
    require_session(db, session_id)
    readable: list[tuple[int, int]] = []
    corrupt: list[tuple[int, int]] = []
    for record in db.execute(
        f"SELECT {CHECK_COLUMNS} FROM rows WHERE session_id = ? AND archived = 0 "
        "ORDER BY position, id",
        [session_id],
    ).fetchall():
        (readable if _is_readable(record) else corrupt).append((record[0], record[1]))
    if len(readable) != expected:
        raise StoreError(
            f"Session {session_id} changed while compacting ({len(readable)} active rows, "
            f"expected {expected}); nothing was written. Reload the session and retry."
        )
    return readable, corrupt


def record_compaction(
    db: Database, session_id: str, record: CompactionRecord, rows_replaced: int
) -> int:
    table = db.table("compactions").insert(
        {
            **asdict(record),
            "session_id": session_id,
            "rows_replaced": rows_replaced,
            "created": now(),
        }
    )
    return _last_id(table.last_pk)


def archive(db: Database, row_ids: list[int], compaction_id: int) -> None:
    db.conn.executemany(
        "UPDATE rows SET archived = 1, compaction_id = ? WHERE id = ?",
        [(compaction_id, row_id) for row_id in row_ids],
    )


def compact_rows(
    db: Database,
    session_id: str,
    active: Positions,
    *,
    compacted: Row,
    keep_tail: int,
    record: CompactionRecord,
) -> int:
    """Archive all `active` rows but the last `keep_tail`, put `compacted` before the tail;
    the compaction record's id."""
    readable, corrupt = active
    replaced = readable[: len(readable) - keep_tail] if keep_tail else readable
    if not replaced:
        raise StoreError("A compaction must replace at least one row.")
    last = replaced[-1][1]
    # A corrupt row among the replaced ones (never loaded, never sent) goes with them.
    ids = [row_id for row_id, _ in replaced] + [i for i, p in corrupt if p <= last]
    compaction_id = record_compaction(db, session_id, record, len(ids))
    archive(db, ids, compaction_id)
    insert_rows(db, session_id, [(compacted, last)])
    return compaction_id


def replace_at(
    db: Database,
    session_id: str,
    readable: list[tuple[int, int]],
    replacements: Mapping[int, Row],
    *,
    record: CompactionRecord,
) -> int:
    """Archive the readable active rows at the given indexes and put the new rows in their
    places; the record's id."""
    compaction_id = record_compaction(db, session_id, record, len(replacements))
    for index, new_row in sorted(replacements.items()):
        row_id, position = readable[index]
        archive(db, [row_id], compaction_id)
        insert_rows(db, session_id, [(new_row, position)])
    return compaction_id


def archive_last(db: Database, session_id: str, active: Positions, *, count: int, kind: str) -> int:
    """Archive the last `count` active rows (and corrupt ones after the first of them) under a
    record of `kind`; the record's id."""
    readable, corrupt = active
    if not 0 < count <= len(readable):
        raise StoreError(f"Cannot archive {count} of {len(readable)} active rows.")
    first_id, first_position = readable[-count]
    ids = [row_id for row_id, _ in readable[-count:]]
    ids += [i for i, p in corrupt if (p, i) > (first_position, first_id)]
    record_id = record_compaction(db, session_id, CompactionRecord(kind), len(ids))
    archive(db, ids, record_id)
    return record_id


def insert_rows(db: Database, session_id: str, rows: Sequence[tuple[Row, int]]) -> list[int]:
    """Insert (row, position) pairs; returns their ids.

    Appended rows take the next positions; a row standing in for replaced ones takes the
    position of the last of them and, with its higher id, sorts right after it. Plain SQL:
    sqlite-utils' insert re-reads the table's shape on every call (3x slower per row).
    """
    stamp = now()
    ids = []
    for row, position in rows:
        cursor = db.conn.execute(
            "INSERT INTO rows (session_id, position, role, content, tool_id, tool_name, "
            "tool_args, created, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
            [session_id, position, *row, stamp],
        )
        ids.append(_last_id(cursor.lastrowid))
    touch(db, session_id, stamp)
    return ids


def require_session(db: Database, session_id: str) -> None:
    if db.execute("SELECT 1 FROM sessions WHERE id = ?", [session_id]).fetchone() is None:
        path = db.execute("PRAGMA database_list").fetchone()[2]  # (seq, name, file)
        raise StoreError(f"No session {session_id!r} in {path}.")


def next_position(db: Database, session_id: str) -> int:
    found = db.execute(
        "SELECT MAX(position) FROM rows WHERE session_id = ?", [session_id]
    ).fetchone()
    return 0 if found[0] is None else int(found[0]) + 1


def touch(db: Database, session_id: str, stamp: str) -> None:
    db.execute("UPDATE sessions SET updated = ? WHERE id = ?", [stamp, session_id])


def _last_id(pk: object) -> int:
    """The id SQLite gave the row just inserted (always set for an INTEGER PRIMARY KEY)."""
    assert isinstance(pk, int)
    return pk


def _is_readable(record: Sequence[Any]) -> bool:
    """Whether `load_active` reads this row, or skips it as corrupt."""
    try:
        to_stored_row(record)
    except ValueError:
        return False
    return True


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

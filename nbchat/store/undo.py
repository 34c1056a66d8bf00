"""Undoing a compaction: the rows it archived come back active exactly as they were (same ids,
positions and content), the rows it put in their place are archived, and its record is stamped
`undone_at`. Nothing is deleted, so the full transcript still shows the compaction and its undo.

Only the latest compaction of a session that is not undone yet can be undone (`latest`); undoing
it makes the one before it the latest, so compactions come off one at a time, newest first.
"Compaction" means the records `apply_compaction` writes: kinds "prune", "summary" and
"chunked" (a retry's or an edit's "retry"/"edit" records are not compactions). A compaction that
pruned and then summarised wrote two records in one transaction, the prune record right before
the summary record, with the same duration, the prune's `tokens_after` being the summary's
`tokens_before`: both are undone together, as they were done.

What a record put in place is found from what it archived, as `replace_rows` and
`replace_with_compacted` placed it: the `compacted` row at the position of the last row a summary
archived, and a prune's placeholder at its original's position with the same tool call id; each
with a higher id than what it replaced. A stand-in that is no longer active (a retry archived
it since) means the compaction cannot be taken back exactly, and it is refused.

Everything here runs inside the caller's transaction. Must not: open connections or
transactions, or know about conversations.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlite_utils import Database

from nbchat.errors import SessionLockedError, StoreError
from nbchat.history import Row
from nbchat.store import lease, rowsql
from nbchat.store.rowsql import now, to_stored_row

__all__ = ["UndoPlan", "apply", "held_message", "plan", "refuse_if_held"]

KINDS = ("prune", "summary", "chunked")


@dataclass(frozen=True)
class UndoPlan:
    """What undoing the latest compaction does: which records, which rows come back, which
    stand-ins go, and the active rows afterwards (for the size check before undoing)."""

    session_id: str
    record_ids: tuple[int, ...]
    restored_ids: tuple[int, ...]
    archived_ids: tuple[int, ...]
    rows_after: tuple[Row, ...]
    active_before: int

    @property
    def record_id(self) -> int:
        """The record the user sees: the summary's when a prune came with it."""
        return self.record_ids[-1]


def plan(db: Database, session_id: str, record_id: int | None = None) -> UndoPlan:
    """What undoing `record_id` (default: the latest compaction) would do; raises `StoreError`
    saying why when it cannot be undone."""
    rowsql.require_session(db, session_id)
    records = _latest(db, session_id)
    if record_id is not None and record_id != records[-1]["id"]:
        _refuse_other(db, session_id, record_id, latest=records[-1]["id"])
    restored: list[int] = []
    archived: list[int] = []
    for record in records:
        rows = _archived_by(db, record["id"])
        restored += [row[0] for row in rows]
        archived += _stand_ins(db, session_id, record, rows)
    rows_after, active_before = _rows_after(db, session_id, restored, archived)
    return UndoPlan(
        session_id=session_id,
        record_ids=tuple(record["id"] for record in records),
        restored_ids=tuple(restored),
        archived_ids=tuple(archived),
        rows_after=tuple(rows_after),
        active_before=active_before,
    )


def apply(db: Database, undo: UndoPlan, *, expected_active: int | None = None) -> None:
    """Carry out `undo` (made by `plan` in this same transaction)."""
    if expected_active is not None and undo.active_before != expected_active:
        raise StoreError(
            f"Session {undo.session_id} changed meanwhile ({undo.active_before} active rows, "
            f"expected {expected_active}); nothing was undone. Reload the session and retry."
        )
    db.conn.executemany(
        "UPDATE rows SET archived = 0, compaction_id = NULL WHERE id = ?",
        [(row_id,) for row_id in undo.restored_ids],
    )
    # The stand-ins stay in the transcript, linked to the compaction that made them.
    rowsql.archive(db, list(undo.archived_ids), undo.record_id)
    stamp = now()
    db.conn.executemany(
        "UPDATE compactions SET undone_at = ? WHERE id = ?",
        [(stamp, record_id) for record_id in undo.record_ids],
    )
    rowsql.touch(db, undo.session_id, stamp)


def refuse_if_held(db: Database, session_id: str, *, ours: str | None) -> None:
    """Raise `SessionLockedError` naming the holder when another live process writes the
    session (`ours`: the lease owner this store holds it under, if it does)."""
    current = lease.holder(db, session_id)
    if current is None or not current.owner or current.owner == ours:
        return
    if lease.is_live(current):
        raise SessionLockedError(held_message(session_id, current))


def held_message(session_id: str, current: lease.Holder | None) -> str:
    """Why an undo is refused on a session another kernel writes, naming that kernel."""
    if current is None or current.pid is None:
        who = "another kernel"
    else:
        on = f" on {current.host}" if current.host and current.host != socket.gethostname() else ""
        here = ", another chat in this same process" if current.pid == os.getpid() else ""
        who = f"another kernel (pid {current.pid}{on}{here})"
    return (
        f"Session {session_id} is open for writing in {who}, so the compaction was not undone. "
        "Close the session there (or undo it from that kernel's chat), then retry."
    )


def _latest(db: Database, session_id: str) -> list[dict[str, Any]]:
    """The latest compaction's records (two when a prune came with its summary)."""
    marks = ", ".join("?" for _ in KINDS)
    found = [
        dict(zip(("id", "kind", "duration", "tokens_before", "tokens_after"), record, strict=True))
        for record in db.execute(
            "SELECT id, kind, duration, tokens_before, tokens_after FROM compactions "
            f"WHERE session_id = ? AND undone_at IS NULL AND kind IN ({marks}) "
            "ORDER BY id DESC LIMIT 2",
            [session_id, *KINDS],
        ).fetchall()
    ]
    if not found:
        raise StoreError(f"Session {session_id} has no compaction to undo.")
    latest = found[0]
    if len(found) == 2 and _done_together(found[1], latest):
        return [found[1], latest]
    return [latest]


def _done_together(prune: dict[str, Any], summary: dict[str, Any]) -> bool:
    return bool(
        prune["kind"] == "prune"
        and summary["kind"] != "prune"
        and prune["id"] == summary["id"] - 1
        and prune["duration"] == summary["duration"]
        and prune["tokens_after"] == summary["tokens_before"]
    )


def _refuse_other(db: Database, session_id: str, record_id: int, *, latest: int) -> None:
    found = db.execute(
        "SELECT kind, undone_at FROM compactions WHERE id = ? AND session_id = ?",
        [record_id, session_id],
    ).fetchone()
    if found is None or found[0] not in KINDS:
        raise StoreError(
            f"Session {session_id} has no compaction {record_id}; its latest is {latest}."
        )
    if found[1] is not None:
        raise StoreError(f"Compaction {record_id} was undone already (at {found[1][:19]}).")
    raise StoreError(
        f"Compaction {record_id} is not the latest on session {session_id}: compaction "
        f"{latest} is. Undo {latest} first (compactions are undone newest first)."
    )


def _archived_by(db: Database, record_id: int) -> list[tuple[Any, ...]]:
    """(id, position, role, tool_id) of the rows a record archived."""
    return [
        tuple(row)
        for row in db.execute(
            "SELECT id, position, role, tool_id FROM rows WHERE compaction_id = ? AND archived = 1 "
            "ORDER BY position, id",
            [record_id],
        ).fetchall()
    ]


def _stand_ins(
    db: Database, session_id: str, record: dict[str, Any], archived: Sequence[tuple[Any, ...]]
) -> list[int]:
    """The active rows the record put in place of what it archived."""
    if not archived:
        raise StoreError(f"Compaction {record['id']} archived no rows; there is nothing to undo.")
    if record["kind"] == "prune":
        wanted = [(position, "tool", tool_id, row_id) for row_id, position, _, tool_id in archived]
    else:
        last = max(archived, key=lambda row: (row[1], row[0]))
        wanted = [(last[1], "compacted", None, last[0])]
    found = []
    for position, role, tool_id, after in wanted:
        ids = [
            row_id
            for row_id, row_tool_id in db.execute(
                "SELECT id, tool_id FROM rows WHERE session_id = ? AND archived = 0 "
                "AND position = ? AND role = ? AND id > ?",
                [session_id, position, role, after],
            ).fetchall()
            if tool_id is None or row_tool_id == tool_id
        ]
        if len(ids) != 1:
            raise StoreError(
                f"Compaction {record['id']} cannot be undone exactly: a row it put in place "
                "was archived since (by a retry or an edit). Nothing was changed."
            )
        found.append(ids[0])
    return found


def _rows_after(
    db: Database, session_id: str, restored: Sequence[int], archived: Sequence[int]
) -> tuple[list[Row], int]:
    """The active rows once undone, in order, and how many are active now (corrupt rows are
    skipped in both, as `load_active` skips them)."""
    leaving, coming = set(archived), set(restored)
    rows, active_now = [], 0
    for record in db.execute(
        f"SELECT {rowsql.ROW_COLUMNS} FROM rows WHERE session_id = ? ORDER BY position, id",
        [session_id],
    ).fetchall():
        try:
            row = to_stored_row(record).row
        except ValueError:
            continue
        active_now += not record[8]
        if (not record[8] and record[0] not in leaving) or record[0] in coming:
            rows.append(row)
    return rows, active_now

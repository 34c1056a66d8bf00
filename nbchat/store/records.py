"""The store's values: a session as listed, a row as stored, a compaction record — and the
conversion of a raw SQL row into a checked `StoredRow` (a corrupt one raises ValueError).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nbchat.history import ROLES, Row, parse_tool_calls, to_row

__all__ = [
    "CompactionRecord",
    "check_row",
    "SessionInfo",
    "StoredRow",
    "now",
    "stored_to_dict",
    "to_stored_row",
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

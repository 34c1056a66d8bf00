"""Request records: what each chat request sent, kept so that it can be rebuilt exactly.

A record is a `requests` row (the same row that later gets the reply's usage). It holds:
- `row_ids`: the ids of the active rows the request was built from, in order, written as runs
  ("1-50,73,51-60"): rows are never deleted, only archived, so a request whose rows were since
  compacted is rebuilt as it was sent;
- `system_hash` and `tools_hash`: the content hashes of the system prompt and of the offered
  tool schemas, whose text is kept once in `request_parts` however many requests used it;
- `body`: the rest of the JSON body (model, stream options, max_tokens, temperature,
  tool_choice, response_format, extra body fields), with `messages` and `tools` standing as
  placeholders, so the body's keys keep their order.

Rebuilding (`SentRequest.to_body`) runs the rows through `build_messages` with that system
prompt and puts the messages and tools back in their places. No second copy of any row's text
is kept. The record is checked when it is written, so that every request rebuilds to the very
bytes sent, whatever built it: the `messages` placeholder is null when the rows rebuild them
exactly, `{"after_rows": [...]}` when messages that are no rows followed them (the JSON
fallback's corrected retry sends the bad reply and a note), and the messages whole otherwise.
The API key is a header, never part of the body, so it is never stored.

Every function runs inside the caller's transaction or connection. Must not: open connections,
call the model, or know about widgets.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlite_utils import Database

from nbchat.history import Message, build_messages
from nbchat.store import rowsql
from nbchat.store.rowsql import StoredRow, now, to_stored_row

__all__ = [
    "SentRequest",
    "add_usage",
    "drop_unused_parts",
    "from_runs",
    "is_recorded",
    "list_sent",
    "load_sent",
    "record_sent",
    "to_runs",
]

PLACED = ("messages", "tools")  # body keys rebuilt from the rows and the parts table
AFTER_ROWS = "after_rows"  # messages sent after the rows' own (a corrected retry's)


@dataclass(frozen=True)
class SentRequest:
    """One recorded request, with its rows loaded (archived ones too)."""

    id: int
    session_id: str
    created: str
    system_prompt: str
    tools: list[dict[str, Any]] | None
    body: dict[str, Any]  # as stored: `messages` and `tools` are placeholders
    rows: list[StoredRow]  # in the order sent; a row unreadable now is left out, as at load
    prompt_tokens: int | None
    completion_tokens: int | None

    def messages(self) -> list[Message]:
        """The messages as sent: rebuilt from the rows, with what followed them (see the
        module docstring), or as stored whole."""
        stored = self.body.get("messages")
        if isinstance(stored, list):
            return list(stored)
        built = build_messages([row.row for row in self.rows], self.system_prompt)
        after: list[Message] = (stored or {}).get(AFTER_ROWS, [])
        return built + after

    def to_body(self) -> dict[str, Any]:
        """The JSON body exactly as it was sent."""
        placed = {"messages": self.messages(), "tools": self.tools}
        return {key: placed[key] if key in PLACED else value for key, value in self.body.items()}


def to_runs(ids: Sequence[int]) -> str:
    """`[1, 2, 3, 7, 5, 6]` → `"1-3,7,5-6"` (order kept: a compacted row's id is out of order)."""
    runs: list[list[int]] = []
    for row_id in ids:
        if runs and row_id == runs[-1][1] + 1:
            runs[-1][1] = row_id
        else:
            runs.append([row_id, row_id])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def from_runs(text: str) -> list[int]:
    ids: list[int] = []
    for run in filter(None, text.split(",")):
        first, _, last = run.partition("-")
        ids.extend(range(int(first), int(last or first) + 1))
    return ids


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record_sent(
    db: Database, session_id: str, body: Mapping[str, Any], *, system_prompt: str
) -> int:
    """Record a request about to be sent from `session_id`'s active rows; returns its id."""
    rowsql.require_session(db, session_id)
    ids = [
        record[0]
        for record in db.execute(
            "SELECT id FROM rows WHERE session_id = ? AND archived = 0 ORDER BY position, id",
            [session_id],
        ).fetchall()
    ]
    built = build_messages([row.row for row in _rows(db, session_id, ids)], system_prompt)
    placeholders = {"messages": _messages_placeholder(body.get("messages"), built), "tools": None}
    tools = body.get("tools")
    record = {
        "session_id": session_id,
        "kind": "chat",
        "model": str(body.get("model") or ""),
        "active_rows": len(ids),
        "created": now(),
        "row_ids": to_runs(ids),
        "system_hash": _put_part(db, system_prompt),
        "tools_hash": None if tools is None else _put_part(db, json.dumps(tools)),
        "body": json.dumps({k: placeholders[k] if k in PLACED else v for k, v in body.items()}),
    }
    cursor = db.conn.execute(
        f"INSERT INTO requests ({', '.join(record)}) VALUES ({', '.join('?' * len(record))})",
        list(record.values()),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _messages_placeholder(sent: Any, built: list[Message]) -> Any:
    """What stands for the messages sent: None when the rows rebuild them to the same bytes,
    `{AFTER_ROWS: [...]}` when they rebuild a beginning of them, else the messages whole."""

    def wire(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    if not isinstance(sent, list) or wire(sent[: len(built)]) != wire(built):
        return sent
    after = sent[len(built) :]
    return {AFTER_ROWS: after} if after else None


def add_usage(
    db: Database, request_id: int, prompt: int | None, completion: int | None, duration: float
) -> None:
    """The reply's usage, on the record of the request that produced it."""
    sql = "UPDATE requests SET prompt_tokens = ?, completion_tokens = ?, duration = ? WHERE id = ?"
    db.execute(sql, [prompt, completion, duration, request_id])


def _put_part(db: Database, text: str) -> str:
    digest = content_hash(text)
    db.execute("INSERT OR IGNORE INTO request_parts (hash, text) VALUES (?, ?)", [digest, text])
    return digest


def is_recorded(db: Database) -> bool:
    """Whether the file has request records: a read-only file is read as it is, and one
    written before m007 has neither the columns nor the parts table."""
    return "body" in db.table("requests").columns_dict


def list_sent(db: Database, session_id: str) -> list[tuple[int, str]]:
    """(id, time recorded) of the session's recorded requests, oldest first."""
    if not is_recorded(db):
        return []
    sql = "SELECT id, created FROM requests WHERE session_id = ? AND body IS NOT NULL ORDER BY id"
    return [(int(i), str(created)) for i, created in db.execute(sql, [session_id]).fetchall()]


def drop_unused_parts(db: Database) -> None:
    """Forget system prompts and tool lists no request refers to any more (a deleted session's)."""
    if is_recorded(db):
        db.execute(
            "DELETE FROM request_parts WHERE hash NOT IN (SELECT system_hash FROM requests "
            "WHERE system_hash IS NOT NULL UNION SELECT tools_hash FROM requests "
            "WHERE tools_hash IS NOT NULL)"
        )


def load_sent(db: Database, request_id: int) -> SentRequest | None:
    """The recorded request `request_id` with its rows; None when it has no record of what was
    sent (a usage-only row, or none at all)."""
    if not is_recorded(db):
        return None
    found = db.execute(
        "SELECT id, session_id, created, row_ids, system_hash, tools_hash, body, prompt_tokens, "
        "completion_tokens FROM requests WHERE id = ? AND body IS NOT NULL",
        [request_id],
    ).fetchone()
    if found is None:
        return None
    _, session_id, created, runs, system_hash, tools_hash, body, prompt, completion = found
    tools = json.loads(_part(db, tools_hash)) if tools_hash else None
    return SentRequest(
        id=request_id,
        session_id=session_id,
        created=created,
        system_prompt=_part(db, system_hash),
        tools=tools,
        body=json.loads(body),
        rows=_rows(db, session_id, from_runs(runs or "")),
        prompt_tokens=prompt,
        completion_tokens=completion,
    )


def _part(db: Database, digest: str) -> str:
    found = db.execute("SELECT text FROM request_parts WHERE hash = ?", [digest]).fetchone()
    return "" if found is None else str(found[0])


def _rows(db: Database, session_id: str, ids: list[int]) -> list[StoredRow]:
    records = db.execute(
        f"SELECT {rowsql.ROW_COLUMNS} FROM rows WHERE session_id = ? "
        "AND id IN (SELECT value FROM json_each(?))",
        [session_id, json.dumps(ids)],
    ).fetchall()
    by_id: dict[int, StoredRow] = {}
    for record in records:
        try:
            by_id[record[0]] = to_stored_row(record)
        except ValueError:
            continue  # corrupt: skipped when the history was loaded, so never sent either
    return [by_id[row_id] for row_id in ids if row_id in by_id]

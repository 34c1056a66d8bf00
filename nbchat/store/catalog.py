"""A session as a whole: created, listed with its row counts, deleted with everything it owns, read
back row by row (skipping or naming corrupt rows), and exported as Markdown or JSON with the
requests it sent (`nbchat export ID --requests`).

The sessions table's SQL runs on the caller's `Database`, inside the caller's transaction for
writes (`Store.transaction`), so a delete is all done or not at all.

The export is pure: it takes the session's metadata and its rows as dicts and returns text.
Archived rows are kept and marked, so an export always holds every original row even after
compaction. Each request is given as `InspectedRequest.to_dict()`
(`nbchat.conversation.requestview`): its parts with their token counts and marks, and the body
exactly as sent.

Must not: open connections or transactions of its own, or check leases (the store does).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlite_utils import Database

from nbchat.errors import StoreError
from nbchat.store import requests, rowsql
from nbchat.store.rowsql import SessionInfo, StoredRow, now, to_stored_row

__all__ = [
    "DEFAULT_TITLE",
    "delete_session",
    "insert_session",
    "name_untitled",
    "read_rows",
    "requests_to_markdown",
    "session_infos",
    "to_json",
    "to_markdown",
]


HEADINGS = {
    "user": "User",
    "assistant": "Assistant",
    "assistant_full": "Assistant (tool calls)",
    "analysis": "Reasoning",
    "tool": "Tool result",
    "system": "Notice",
    "compacted": "Compacted summary",
}


def to_json(
    session: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    *,
    compactions: Sequence[Mapping[str, Any]],
    requests: Sequence[Mapping[str, Any]],
    notebook_changes: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The whole session as JSON: metadata, full transcript, compactions, requests, and the
    assistant's changes to notebook cells (with what each rewind did to them)."""
    document = {
        "session": dict(session),
        "rows": list(rows),
        "compactions": list(compactions),
        "requests": list(requests),
        "notebook_changes": list(notebook_changes),
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def to_markdown(session: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown for one session: a title, then each row under a heading saying whose it is."""
    lines = [
        f"# {session.get('title') or 'Chat'}",
        "",
        f"Session `{session.get('id', '')}` · model `{session.get('model') or '-'}` · "
        f"created {session.get('created', '')}",
        "",
    ]
    for row in rows:
        lines.extend(_row_lines(row))
    return "\n".join(lines).rstrip() + "\n"


def _row_lines(row: Mapping[str, Any]) -> list[str]:
    role = str(row.get("role", ""))
    heading = HEADINGS.get(role, role)
    if role == "tool":
        heading = f"{heading}: {row.get('tool_name') or '?'} (`{row.get('tool_id', '')}`)"
    if row.get("archived"):
        heading += f" · archived by compaction {row.get('compaction_id')}"
    lines = [f"## {heading}", ""]
    content = str(row.get("content") or "")
    if role in ("tool", "analysis"):
        lines.extend(_fenced(content))
    elif content:
        lines.append(content)
    if role == "assistant_full":
        lines.extend(["", *_tool_call_lines(str(row.get("tool_args") or ""))])
    lines.append("")
    return lines


def _tool_call_lines(tool_args: str) -> list[str]:
    try:
        calls = json.loads(tool_args)
        pretty = json.dumps(calls, indent=2, ensure_ascii=False)
    except ValueError:
        pretty = tool_args
    return _fenced(pretty, info="json")


def _fenced(text: str, info: str = "") -> list[str]:
    # A fence longer than any backtick run inside, so tool output cannot close it early.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", text, fence]


def requests_to_markdown(requests: Sequence[Mapping[str, Any]]) -> str:
    """A `# Requests` section: per request, its parts (tokens, marks) and its body as JSON."""
    lines = ["# Requests", ""]
    for request in requests:
        server = request.get("prompt_tokens")
        counted = f", {server:,} counted by the server" if isinstance(server, int) else ""
        lines += [
            f"## Request {request.get('id')} · {request.get('created', '')}",
            "",
            f"~{request.get('estimated_tokens', 0):,} tokens estimated{counted}.",
            "",
        ]
        for part in request.get("parts", []):
            marks = "".join(f" **{mark}**" for mark in part.get("marks", []))
            lines.append(f"- {part.get('label')} · ~{part.get('tokens', 0):,} tokens{marks}")
        body = json.dumps(request.get("body", {}), indent=2, ensure_ascii=False)
        lines += ["", *_fenced(body, info="json"), ""]
    return "\n".join(lines).rstrip() + "\n"


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

"""The store's schema: an ordered list of named migrations (sqlite-utils `Migrations`), and
`KNOWN`, their names.

Storage model: a `sessions` row per chat; a `rows` row per history row, ordered by
`(position, id)`. Nothing is ever deleted by compaction: replaced rows get `archived = 1` and the
`compaction_id` of the `compactions` record that replaced them; the row standing in for them (the
`compacted` summary, or a pruned placeholder) is inserted with the position of the last row it
replaced, so the full transcript reads in order and the active view (`archived = 0`) is what the
model sees. `requests` keeps per-request usage for the context meter and the plots, and (from
m007) what each chat request sent: its rows by id, its settings, and references to its system
prompt and tool schemas, which live once each in `request_parts` (see `nbchat.store.requests`).
`notebook_changes` (m008) holds the cells the assistant inserted or edited, by the tool call that
did it, for the rewind (`nbchat.store.rowsql`).

Migrations are never edited once released; a change is a new function at the end, with a
comment saying why. `KNOWN` lists every name (kept here, as sqlite-utils has no public list of
a set's names) so a DB written by a newer nbchat is recognised before anything is applied to it.

Must not: open, lock or apply migrations to a file (that is `Connections`', in
`nbchat.store.sqlite`), nor know what the tables mean beyond their schema (that is `Store`'s).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

__all__ = ["KNOWN", "MIGRATIONS"]


MIGRATIONS = Migrations("nbchat")
_NAMES: list[str] = []

Migration = Callable[[Database], None]


def migration(name: str, *, transactional: bool = True) -> Callable[[Migration], Migration]:
    """Register `name` with `MIGRATIONS` (in order) and remember it for `KNOWN`."""

    def register(function: Migration) -> Migration:
        _NAMES.append(name)
        return MIGRATIONS(name=name, transactional=transactional)(function)

    return register


@migration("m001_enable_wal", transactional=False)
def m001_enable_wal(db: Database) -> None:
    # WAL lets one kernel read while another writes; it cannot change inside a transaction.
    db.enable_wal()


@migration("m002_sessions_rows_compactions")
def m002_sessions_rows_compactions(db: Database) -> None:
    # The first schema: sessions, their rows (with archive links) and compaction records.
    db.table("sessions").create(
        {
            "id": str,
            "title": str,
            "model": str,
            "created": str,
            "updated": str,
            "settings": str,
            "lease_owner": str,
            "lease_pid": int,
            "lease_host": str,
            "lease_until": float,
        },
        pk="id",
        not_null={"title", "created", "updated"},
    )
    db.table("compactions").create(
        {
            "id": int,
            "session_id": str,
            "kind": str,
            "summary": str,
            "rows_replaced": int,
            "tokens_before": int,
            "tokens_after": int,
            "model": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "duration": float,
            "created": str,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "kind", "created"},
    )
    db.table("rows").create(
        {
            "id": int,
            "session_id": str,
            "position": int,
            "role": str,
            "content": str,
            "tool_id": str,
            "tool_name": str,
            "tool_args": str,
            "tokens": int,
            "created": str,
            "archived": int,
            "compaction_id": int,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id"), ("compaction_id", "compactions", "id")],
        not_null={"session_id", "position", "role", "created", "archived"},
        defaults={"archived": 0, "content": "", "tool_id": "", "tool_name": "", "tool_args": ""},
    )
    db.table("rows").create_index(["session_id", "archived", "position"])
    db.table("rows").create_index(["session_id", "tool_id"])
    db.table("compactions").create_index(["session_id"])


@migration("m003_requests")
def m003_requests(db: Database) -> None:
    # Per-request usage (reported prompt/completion tokens, duration) for the context meter.
    db.table("requests").create(
        {
            "id": int,
            "session_id": str,
            "kind": str,
            "model": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "duration": float,
            "active_rows": int,
            "created": str,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "kind", "created"},
    )
    db.table("requests").create_index(["session_id"])


@migration("m004_lease_process")
def m004_lease_process(db: Database) -> None:
    # A lease names its holder's process by PID *and* start time (`nbchat.store.lease`): a PID alone
    # is reused by the system, and a dead kernel's reused PID blocked its session for an hour.
    db.table("sessions").add_column("lease_process", str)


@migration("m005_drop_rows_tokens")
def m005_drop_rows_tokens(db: Database) -> None:
    # `rows.tokens` (a len//3 estimate) was written for every row and never read: every size
    # is computed from the rows themselves. transform() copies the table without it (and keeps
    # its indexes), which works on SQLite versions without ALTER TABLE DROP COLUMN.
    db.table("rows").transform(drop={"tokens"})


@migration("m006_compaction_undone_at")
def m006_compaction_undone_at(db: Database) -> None:
    # A compaction can be undone (`nbchat.store.undo`): its rows come back, its record stays,
    # stamped with when it was undone, so nothing is deleted and the transcript says what happened.
    db.table("compactions").add_column("undone_at", str)


@migration("m007_request_records")
def m007_request_records(db: Database) -> None:
    # The request inspector rebuilds each chat request exactly as sent, from the rows (never
    # deleted, only archived) and these columns: no second copy of the rows' text. The system
    # prompt and the tool schemas repeat in every request, so they are kept once each, by
    # content hash, in `request_parts`. (m006 is another change's; names, not numbers, order
    # what is applied, and this one depends on no other after m005.)
    for column in ("row_ids", "system_hash", "tools_hash", "body"):
        db.table("requests").add_column(column, str)
    db.table("request_parts").create({"hash": str, "text": str}, pk="hash", not_null={"text"})


@migration("m008_notebook_changes")
def m008_notebook_changes(db: Database) -> None:
    # The assistant's inserts and edits of notebook cells, each tied to the tool call that made
    # it, so a rewind takes the notebook back with the chat (`nbchat.store.rowsql`): the
    # source before and after, and when (and by which rewind) it was taken back or left alone.
    db.table("notebook_changes").create(
        {
            "id": int,
            "session_id": str,
            "call_id": str,
            "kind": str,
            "cell_id": str,
            "cell_kind": str,
            "before": str,
            "after": str,
            "created": str,
            "reverted_at": str,
            "outcome": str,
        },
        pk="id",
        not_null={"session_id", "call_id", "kind", "cell_id", "before", "after", "created"},
    )
    db.table("notebook_changes").create_index(["session_id"])


KNOWN = frozenset(_NAMES)

"""The SQLite store: schema, migrations, sessions, rows, compaction, leases, export, faults."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest
from factories import assistant, tool_call, tool_result, user
from helpers import is_loadable
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from sqlite_utils import Database
from strategies import histories

import nbchat
from nbchat.errors import StoreError
from nbchat.history import Row, build_messages
from nbchat.store import rowsql
from nbchat.store.migrations import KNOWN, MIGRATIONS
from nbchat.store.rowsql import CompactionRecord
from nbchat.store.store import Store

EXPECTED_TABLES = {
    "_sqlite_migrations",
    "sessions",
    "compactions",
    "rows",
    "notebook_changes",
    "requests",
    "request_parts",
}


def new_session(store: Store, *rows: Row) -> str:
    session_id = store.create_session("test", model="m")
    store.append_rows(session_id, rows)
    return session_id


def test_schema_snapshot(store: Store) -> None:
    tables = set(store.db.table_names())
    assert tables == EXPECTED_TABLES
    assert store.db["rows"].columns_dict == {
        "id": int,
        "session_id": str,
        "position": int,
        "role": str,
        "content": str,
        "tool_id": str,
        "tool_name": str,
        "tool_args": str,
        "created": str,
        "archived": int,
        "compaction_id": int,
    }
    assert set(store.db["sessions"].columns_dict) == {
        "id",
        "title",
        "model",
        "created",
        "updated",
        "settings",
        "lease_owner",
        "lease_pid",
        "lease_host",
        "lease_until",
        "lease_process",
    }
    assert set(store.db["compactions"].columns_dict) == {
        "id",
        "session_id",
        "kind",
        "summary",
        "rows_replaced",
        "tokens_before",
        "tokens_after",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "duration",
        "created",
        "undone_at",
    }
    assert set(store.db["notebook_changes"].columns_dict) == {
        "id",
        "session_id",
        "call_id",
        "kind",
        "cell_id",
        "cell_kind",
        "before",
        "after",
        "created",
        "reverted_at",
        "outcome",
    }
    assert store.db.journal_mode == "wal"
    assert [m.name for m in MIGRATIONS.applied(store.db)] == [
        "m001_enable_wal",
        "m002_sessions_rows_compactions",
        "m003_requests",
        "m004_lease_process",
        "m005_drop_rows_tokens",
        "m006_compaction_undone_at",
        "m007_request_records",
        "m008_notebook_changes",
    ]


def test_migrations_applied_twice_are_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "twice.db"
    first = Store(path)
    session_id = new_session(first, user("hi"))
    schema = first.db.schema
    first.close()
    second = Store(path)
    assert second.db.schema == schema
    MIGRATIONS.apply(second.db)
    assert second.db.schema == schema
    assert second.load_active(session_id) == [user("hi")]
    assert len(MIGRATIONS.applied(second.db)) == len(KNOWN)
    second.close()


def test_a_database_from_before_the_lease_identity_is_upgraded_with_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    old = Database(path)
    MIGRATIONS.apply(old, stop_before="m004_lease_process")
    old["sessions"].insert({"id": "s1", "title": "old", "created": "t", "updated": "t"})
    old["rows"].insert(
        {"session_id": "s1", "position": 0, "role": "user", "content": "kept", "tokens": 9}
        | {"created": "t", "archived": 0}
    )
    old.close()
    store = Store(path)
    assert store.load_active("s1") == [user("kept")]
    assert "tokens" not in store.db["rows"].columns_dict
    assert "lease_process" in store.db["sessions"].columns_dict
    assert {tuple(index.columns) for index in store.db["rows"].indexes} == {
        ("session_id", "archived", "position"),
        ("session_id", "tool_id"),
    }
    assert store.acquire_lease("s1")
    store.close()


def test_known_names_every_migration_through_public_sqlite_utils_api() -> None:
    assert {m.name for m in MIGRATIONS.pending(Database(memory=True))} == KNOWN
    for module in Path(nbchat.__file__).parent.rglob("*.py"):
        assert "._migrations" not in module.read_text(), module  # sqlite-utils' private list


def test_a_database_from_a_newer_nbchat_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    Store(path).create_session("x")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('nbchat', 'm999_future', '2030-01-01')"
        )
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        Store(path).list_sessions()
    assert str(caught.value) == (
        f"{path} was written by a newer version of nbchat (schema m999_future). Upgrade "
        "nbchat, or point NBCHAT_HOME elsewhere; the file was not changed."
    )
    assert path.read_bytes() == before


def test_sessions_list_newest_first_with_counts(store: Store) -> None:
    first = new_session(store, user("a"), assistant("b"))
    second = new_session(store, user("c"))
    store.rename_session(first, "  Renamed  ")
    listed = store.list_sessions()
    assert [s.id for s in listed] == [first, second]
    assert listed[0].title == "Renamed"
    assert (listed[0].active_rows, listed[0].total_rows) == (2, 2)
    store.delete_session(first)
    assert [s.id for s in store.list_sessions()] == [second]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            lambda s: s.get_session("nope"),
            "No session 'nope' in {path}. List them with `nbchat sessions`.",
        ),
        (lambda s: s.append_rows("nope", [user("x")]), "No session 'nope' in {path}."),
        (
            lambda s: s.rename_session("nope", "t"),
            "No session 'nope' in {path}. List them with `nbchat sessions`.",
        ),
        (
            lambda s: s.load_active("nope"),
            "No session 'nope' in {path}. List them with `nbchat sessions`.",
        ),
    ],
)
def test_missing_sessions_are_named(store: Store, action, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StoreError) as caught:
        action(store)
    assert str(caught.value) == message.format(path=store.path)


def test_an_empty_title_is_refused(store: Store) -> None:
    session_id = new_session(store)
    with pytest.raises(StoreError, match="^A session title cannot be empty.$"):
        store.rename_session(session_id, "   ")


def test_a_bad_row_is_refused_before_anything_is_written(store: Store) -> None:
    session_id = new_session(store, user("kept"))
    with pytest.raises(ValueError, match="unknown role 'bot'"):
        store.append_rows(session_id, [user("a"), ("bot", "x", "", "", "")])
    assert store.load_active(session_id) == [user("kept")]


def test_rows_round_trip_in_order(store: Store) -> None:
    rows = [
        user("read"),
        tool_call(("c1", "read_file", {"path": "a.py"})),
        tool_result("c1", "text"),
        assistant("done"),
    ]
    session_id = new_session(store, *rows)
    assert store.load_active(session_id) == rows
    assert [s.row for s in store.load_full(session_id)] == rows


@hypothesis_settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=histories)
def test_rows_read_back_build_the_same_messages(store: Store, rows: list[Row]) -> None:
    session_id = store.create_session()
    readable = [r for r in rows if is_loadable(r)]
    if len(readable) < len(rows):
        with pytest.raises(ValueError):
            store.append_rows(session_id, rows)
        assert store.load_active(session_id) == []
    store.append_rows(session_id, readable)
    loaded = store.load_active(session_id)
    assert loaded == readable
    assert build_messages(loaded, "s") == build_messages(readable, "s")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (Row("assistant_full", "", "", "", "{oops"), "tool_args is not valid JSON"),
        (Row("assistant_full", "", "", "", "[]"), "tool_args must be a non-empty JSON list"),
        (Row("tool", "result", "", "read_file", ""), "a tool result without the id of its call"),
    ],
)
def test_rows_the_store_could_not_read_back_are_refused(
    store: Store, row: Row, message: str
) -> None:
    session_id = new_session(store, user("kept"))
    with pytest.raises(ValueError, match=message):
        store.append_rows(session_id, [user("a"), row])
    assert store.load_active(session_id) == [user("kept")]


def test_nul_bytes_and_non_bmp_text_survive(store: Store) -> None:
    text = "a\x00b 🧪 \U0010fffd end"
    session_id = new_session(store, user(text))
    assert store.load_active(session_id) == [user(text)]


def test_a_corrupt_row_is_named_and_the_rest_still_loads(store: Store) -> None:
    session_id = new_session(store, user("one"), assistant("two"), user("three"))
    bad_id = store.load_full(session_id)[1].id
    store.db.execute(
        "UPDATE rows SET role = 'assistant_full', tool_args = '{broken' WHERE id = ?", [bad_id]
    )
    store.db.conn.commit()
    with pytest.raises(StoreError) as caught:
        store.load_active(session_id)
    assert str(caught.value).startswith(
        f"Session {session_id}: row {bad_id} (position 1) is corrupt: tool_args is not valid JSON"
    )
    problems: list[StoreError] = []
    assert store.load_active(session_id, problems=problems) == [user("one"), user("three")]
    assert len(problems) == 1 and f"row {bad_id}" in str(problems[0])


def compact(store: Store, session_id: str, keep_tail: int, expected: int) -> int:
    record = CompactionRecord(
        kind="summary",
        summary="S",
        tokens_before=100,
        tokens_after=10,
        model="m",
        prompt_tokens=50,
        completion_tokens=5,
        duration=1.5,
    )
    return store.replace_with_compacted(
        session_id,
        Row("compacted", "S"),
        keep_tail=keep_tail,
        expected_active=expected,
        record=record,
    )


def test_replace_with_compacted_archives_and_keeps_every_row(store: Store) -> None:
    rows = [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(8)]
    session_id = new_session(store, *rows)
    compaction_id = compact(store, session_id, keep_tail=2, expected=8)
    assert store.load_active(session_id) == [Row("compacted", "S"), *rows[-2:]]
    full = store.load_full(session_id)
    assert [s.row for s in full if s.row.role != "compacted"] == rows
    assert [s.row.role for s in full].index("compacted") == 6
    assert all(s.archived and s.compaction_id == compaction_id for s in full[:6])
    record = store.list_compactions(session_id)[0]
    assert (record["rows_replaced"], record["tokens_before"], record["tokens_after"]) == (
        6,
        100,
        10,
    )
    # A second compaction archives the first summary too; still nothing is lost.
    store.append_rows(session_id, [user("u8"), assistant("a9")])
    compact(store, session_id, keep_tail=1, expected=5)
    assert store.load_active(session_id) == [Row("compacted", "S"), assistant("a9")]
    originals = [s.row for s in store.load_full(session_id) if s.row.role != "compacted"]
    assert originals == [*rows, user("u8"), assistant("a9")]


def test_replace_with_compacted_is_atomic(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [user("a"), assistant("b"), user("c"), assistant("d")]
    session_id = new_session(store, *rows)
    before_full = store.load_full(session_id)

    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("power cut")

    monkeypatch.setattr(rowsql, "insert_rows", explode)  # after the archive, before the insert
    with pytest.raises(RuntimeError, match="power cut"):
        compact(store, session_id, keep_tail=2, expected=4)
    assert store.load_active(session_id) == rows
    assert store.load_full(session_id) == before_full
    assert store.list_compactions(session_id) == []


def test_a_compaction_computed_on_a_stale_history_writes_nothing(store: Store) -> None:
    session_id = new_session(store, user("a"), assistant("b"), user("c"))
    with pytest.raises(StoreError, match=r"changed while compacting \(3 active rows, expected 2\)"):
        compact(store, session_id, keep_tail=1, expected=2)
    assert len(store.load_active(session_id)) == 3


def test_replace_rows_puts_placeholders_in_place(store: Store) -> None:
    rows = [
        user("a"),
        tool_call(("c1", "read_file", {})),
        tool_result("c1", "BIG" * 100),
        assistant("b"),
    ]
    session_id = new_session(store, *rows)
    placeholder = tool_result("c1", "[pruned]")
    store.replace_rows(
        session_id, {2: placeholder}, expected_active=4, record=CompactionRecord(kind="prune")
    )
    assert store.load_active(session_id) == [*rows[:2], placeholder, rows[3]]
    archived = store.find_tool_result(session_id, "c1")
    assert archived is not None and archived.row == rows[2] and archived.archived


def test_two_threads_append_concurrently_and_lose_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "threads.db", busy_timeout=30)
    session_id = store.create_session()

    def writer(name: str) -> None:
        for i in range(100):
            store.append_rows(session_id, [user(f"{name}-{i}"), assistant(f"{name}-{i}")])

    threads = [threading.Thread(target=writer, args=(n,)) for n in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = store.load_active(session_id)
    assert len(rows) == 400
    for name in "ab":
        mine = [r.content for r in rows if r.content.startswith(f"{name}-")]
        assert mine == [f"{name}-{i}" for i in range(100) for _ in range(2)]
    positions = [s.position for s in store.load_full(session_id)]
    assert positions == list(range(400))
    store.close()


def _append_from_process(path: str, session_id: str, name: str) -> None:
    store = Store(path, busy_timeout=30)
    for i in range(60):
        store.append_rows(session_id, [user(f"{name}-{i}")])
    store.close()


def test_two_processes_append_concurrently_and_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "procs.db"
    store = Store(path)
    session_id = store.create_session()
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_append_from_process, args=(str(path), session_id, n)) for n in "xy"
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    rows = store.load_active(session_id)
    assert sorted(r.content for r in rows) == sorted(f"{n}-{i}" for n in "xy" for i in range(60))
    assert [s.position for s in store.load_full(session_id)] == list(range(120))
    store.close()


def test_a_database_locked_longer_than_the_busy_timeout_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = Store(path, busy_timeout=0.2)
    session_id = store.create_session()
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError) as caught:
            store.append_rows(session_id, [user("hello")])
    finally:
        blocker.rollback()
        blocker.close()
    assert str(caught.value) == (
        f"Could not save the message: the session database {path} stayed locked by another "
        "process for more than 0.2s. Close other kernels or programs using it and try again; "
        "nothing was written."
    )
    store.append_rows(session_id, [user("hello")])
    assert store.load_active(session_id) == [user("hello")]


def test_a_full_disk_fails_the_write_and_the_session_still_loads(store: Store) -> None:
    session_id = new_session(store, user("before"))
    page_count = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {page_count}")
    with pytest.raises(StoreError) as caught:
        store.append_rows(session_id, [user("x" * 200_000)])
    assert str(caught.value) == (
        f"Could not save the message: the disk holding {store.path} is full. Free some space "
        "and try again; nothing was written."
    )
    assert store.load_active(session_id) == [user("before")]


def test_the_writer_lease_lets_one_owner_write(store: Store) -> None:
    session_id = new_session(store)
    assert store.acquire_lease(session_id, owner="kernel-1")
    assert store.acquire_lease(session_id, owner="kernel-1")
    assert not store.acquire_lease(session_id, owner="kernel-2")
    store.release_lease(session_id, owner="kernel-1")
    assert store.acquire_lease(session_id, owner="kernel-2")


def test_a_lease_held_by_a_dead_process_is_taken_over(store: Store) -> None:
    session_id = new_session(store)
    process = multiprocessing.get_context("spawn").Process(target=int)
    process.start()
    process.join()
    store.acquire_lease(session_id, owner="dead")
    store.db.execute("UPDATE sessions SET lease_pid = ? WHERE id = ?", [process.pid, session_id])
    store.db.conn.commit()
    assert store.acquire_lease(session_id, owner="alive")


def test_export_has_every_original_row_after_compaction(store: Store) -> None:
    rows = [
        user("find `bugs`"),
        tool_call(("c1", "read_file", {"path": "a.py"})),
        tool_result("c1", "```\ncode\n```"),
        assistant("found"),
        user("fix"),
        assistant("fixed"),
    ]
    session_id = new_session(store, *rows)
    compact(store, session_id, keep_tail=2, expected=6)
    document = json.loads(store.export_json(session_id))
    exported = [
        Row(r["role"], r["content"], r["tool_id"], r["tool_name"], r["tool_args"])
        for r in document["rows"]
    ]
    assert [r for r in exported if r.role != "compacted"] == rows
    assert document["compactions"][0]["rows_replaced"] == 4
    markdown = store.export_markdown(session_id)
    assert markdown.startswith("# test\n")
    for row in rows:
        assert row.content in markdown
    assert "archived by compaction 1" in markdown
    assert "````\n```\ncode\n```\n````" in markdown


def test_requests_are_recorded_for_the_meter(store: Store) -> None:
    session_id = new_session(store)
    store.record_request(
        session_id, prompt_tokens=120, completion_tokens=30, duration=0.5, model="m", active_rows=3
    )
    store.record_request(session_id, prompt_tokens=None)
    recorded = store.list_requests(session_id)
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in recorded] == [
        (120, 30),
        (None, None),
    ]


def test_settings_snapshot_is_stored_without_secrets(store: Store) -> None:
    session_id = store.create_session("t", settings={"model": "m", "tail_messages": 4})
    found = store.db.execute("SELECT settings FROM sessions WHERE id = ?", [session_id]).fetchone()
    assert json.loads(found[0]) == {"model": "m", "tail_messages": 4}


def test_nested_transactions_commit_or_roll_back_together(store: Store) -> None:
    rows = [
        user("a"),
        tool_call(("c1", "read_file", {})),
        tool_result("c1", "BIG"),
        assistant("b"),
        user("c"),
    ]
    session_id = new_session(store, *rows)
    with pytest.raises(RuntimeError, match="boom"), store.transaction("test"):
        store.replace_rows(
            session_id,
            {2: tool_result("c1", "[pruned]")},
            expected_active=5,
            record=CompactionRecord(kind="prune"),
        )
        raise RuntimeError("boom")
    assert store.load_active(session_id) == rows
    assert store.list_compactions(session_id) == []
    with store.transaction("test"):
        store.replace_rows(
            session_id,
            {2: tool_result("c1", "[pruned]")},
            expected_active=5,
            record=CompactionRecord(kind="prune"),
        )
        compact(store, session_id, keep_tail=1, expected=5)
    assert store.load_active(session_id) == [Row("compacted", "S"), user("c")]
    assert len(store.list_compactions(session_id)) == 2


def test_archive_last_keeps_the_rows_in_the_transcript(store: Store) -> None:
    rows = [user("a"), assistant("b"), user("c"), assistant("d")]
    session_id = new_session(store, *rows)
    store.archive_last(session_id, 1, expected_active=4, kind="retry")
    assert store.load_active(session_id) == rows[:3]
    assert [s.row for s in store.load_full(session_id)] == rows
    assert store.list_compactions(session_id)[0]["kind"] == "retry"
    with pytest.raises(StoreError, match=r"^Cannot archive 5 of 3 active rows\.$"):
        store.archive_last(session_id, 5, expected_active=3, kind="retry")


def test_every_public_store_method_has_a_caller_outside_the_store() -> None:
    # No dead API that reads as if it were used (a `renew_leases` once said it was the
    # heartbeat's beat; the heartbeat calls the claims' own).
    repo = Path(__file__).resolve().parent.parent
    sources = [p for p in (repo / "nbchat").rglob("*.py") if p.name != "store.py"]
    sources += [*(repo / "notebooks").glob("*.ipynb"), *(repo / "bench").rglob("*.py")]
    text = "\n".join(path.read_text(encoding="utf-8") for path in sources)
    text += (repo / "README.md").read_text(encoding="utf-8")
    public = [
        name
        for name, member in vars(Store).items()
        if callable(member) and not name.startswith("_")
    ]
    assert [name for name in public if f".{name}(" not in text] == []


def test_has_session_says_whether_a_session_is_there(store: Store) -> None:
    session_id = store.create_session("here")
    assert store.has_session(session_id)
    store.delete_session(session_id)
    assert not store.has_session(session_id)

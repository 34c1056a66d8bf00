"""What `Store` costs over plain sqlite3 on the same file and schema.

For sessions of 10k and 100k rows (a mix of user, tool-call, tool-result and assistant rows):
append them all (`Store.append_rows`, one call and one transaction), load the active history
(`load_active`) and the full transcript (`load_full`); at 10k, append row by row, one
transaction each (what the conversation loop does); at 100k, `replace_with_compacted` (archive
every row but a tail of 4 behind one summary row). The baseline is plain `sqlite3` on a database
migrated by the same `Store` (same schema, same pragmas: WAL, synchronous=NORMAL): executemany
of the same INSERT, fetchall of the same SELECT, executemany of the same UPDATE, in the same
process. Median of a few runs; each write starts from a fresh file. `main()` returns the table
rows as dicts for `bench/run_all.py`. Figures only, never an assertion.

    python bench/store_bench.py
"""

from __future__ import annotations

import itertools
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from compaction_overhead import sample_rows
from harness import Figure, temporary_directory

from nbchat.history import Row
from nbchat.store.rowsql import ROW_COLUMNS, CompactionRecord, now
from nbchat.store.store import Store

SIZES = (10_000, 100_000)
PER_ROW_SIZE = 10_000
REPEATS = 3
KEEP_TAIL = 4
INSERT = (
    "INSERT INTO rows (session_id, position, role, content, tool_id, tool_name, tool_args, "
    "created, archived) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
SUMMARY = Row("compacted", "## Goal\nFix the loader.\n\n## Progress\n- [x] read the readers")


class Fixture:
    """Fresh database files, each migrated by `Store`, under one temporary directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.count = itertools.count()

    def new_store(self) -> tuple[Store, str]:
        store = Store(self.directory / f"store-{next(self.count)}.db")
        return store, store.create_session("bench")

    def new_plain(self) -> tuple[sqlite3.Connection, str]:
        store, session_id = self.new_store()
        store.close()
        connection = sqlite3.connect(store.path, isolation_level=None)
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA foreign_keys=ON")
        return connection, session_id


def rows_of(size: int) -> list[Row]:
    return list(itertools.islice(sample_rows(), size))


def plain_records(session_id: str, rows: list[Row], start: int = 0) -> list[tuple[Any, ...]]:
    stamp = now()
    return [(session_id, start + i, *row, stamp) for i, row in enumerate(rows)]


def plain_append(connection: sqlite3.Connection, session_id: str, rows: list[Row]) -> None:
    connection.execute("BEGIN IMMEDIATE")
    connection.executemany(INSERT, plain_records(session_id, rows))
    connection.execute("COMMIT")


def plain_append_each(connection: sqlite3.Connection, session_id: str, rows: list[Row]) -> None:
    for index, row in enumerate(rows):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(INSERT, plain_records(session_id, [row], index)[0])
        connection.execute("COMMIT")


def plain_load(connection: sqlite3.Connection, session_id: str, where: str) -> list[Any]:
    return connection.execute(
        f"SELECT {ROW_COLUMNS} FROM rows WHERE session_id = ? {where} ORDER BY position, id",
        [session_id],
    ).fetchall()


def plain_compact(connection: sqlite3.Connection, session_id: str) -> None:
    """Archive all active rows but the tail behind one summary row, as one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    active = plain_load(connection, session_id, "AND archived = 0")
    replaced = active[: len(active) - KEEP_TAIL]
    cursor = connection.execute(
        "INSERT INTO compactions (session_id, kind, rows_replaced, created) VALUES (?, ?, ?, ?)",
        [session_id, "summary", len(replaced), now()],
    )
    connection.executemany(
        "UPDATE rows SET archived = 1, compaction_id = ? WHERE id = ?",
        [(cursor.lastrowid, record[0]) for record in replaced],
    )
    connection.execute(INSERT, plain_records(session_id, [SUMMARY], replaced[-1][1])[0])
    connection.execute("COMMIT")


def median_of(prepare: Callable[[], Callable[[], object]]) -> float:
    """Median seconds of REPEATS runs; `prepare` (untimed) returns the run to time."""
    times = []
    for _ in range(REPEATS):
        run = prepare()
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def figure(name: str, store_seconds: float, plain_seconds: float) -> Figure:
    return Figure(
        name,
        f"{store_seconds * 1000:,.1f} ms",
        f"{plain_seconds * 1000:,.1f} ms plain sqlite3",
        f"{store_seconds / plain_seconds:.2f}",
    )


def measure_appends(fixture: Fixture, size: int) -> Figure:
    rows = rows_of(size)

    def with_store() -> Callable[[], object]:
        store, session_id = fixture.new_store()
        return lambda: store.append_rows(session_id, rows)

    def with_plain() -> Callable[[], object]:
        connection, session_id = fixture.new_plain()
        return lambda: plain_append(connection, session_id, rows)

    return figure(
        f"store: append {size:,} rows (one call)", median_of(with_store), median_of(with_plain)
    )


def measure_appends_each(fixture: Fixture, size: int) -> Figure:
    rows = rows_of(size)

    def with_store() -> Callable[[], object]:
        store, session_id = fixture.new_store()
        return lambda: [store.append_rows(session_id, [row]) for row in rows]

    def with_plain() -> Callable[[], object]:
        connection, session_id = fixture.new_plain()
        return lambda: plain_append_each(connection, session_id, rows)

    return figure(
        f"store: append {size:,} rows one by one (a transaction each)",
        median_of(with_store),
        median_of(with_plain),
    )


def measure_loads(fixture: Fixture, size: int) -> list[Figure]:
    store, session_id = fixture.new_store()
    store.append_rows(session_id, rows_of(size))
    connection = sqlite3.connect(store.path, isolation_level=None)
    active = median_of(lambda: lambda: store.load_active(session_id))
    full = median_of(lambda: lambda: store.load_full(session_id))
    plain_active = median_of(lambda: lambda: plain_load(connection, session_id, "AND archived = 0"))
    plain_full = median_of(lambda: lambda: plain_load(connection, session_id, ""))
    connection.close()
    store.close()
    return [
        figure(f"store: load_active, {size:,} rows", active, plain_active),
        figure(f"store: load_full, {size:,} rows", full, plain_full),
    ]


def measure_compaction(fixture: Fixture, size: int) -> Figure:
    rows = rows_of(size)

    def with_store() -> Callable[[], object]:
        store, session_id = fixture.new_store()
        store.close()
        connection = sqlite3.connect(store.path, isolation_level=None)
        plain_append(connection, session_id, rows)  # the same rows, written fast
        connection.close()
        record = CompactionRecord(kind="summary", summary=SUMMARY.content)
        return lambda: store.replace_with_compacted(
            session_id, SUMMARY, keep_tail=KEEP_TAIL, expected_active=size, record=record
        )

    def with_plain() -> Callable[[], object]:
        connection, session_id = fixture.new_plain()
        plain_append(connection, session_id, rows)
        return lambda: plain_compact(connection, session_id)

    return figure(
        f"store: replace_with_compacted, {size:,}-row session",
        median_of(with_store),
        median_of(with_plain),
    )


def main() -> list[dict[str, Any]]:
    """Every store figure; the table rows as dicts."""
    figures: list[Figure] = []
    with temporary_directory("nbchat-store-") as directory:
        fixture = Fixture(directory)
        for size in SIZES:
            figures.append(measure_appends(fixture, size))
            figures.extend(measure_loads(fixture, size))
        figures.append(measure_appends_each(fixture, PER_ROW_SIZE))
        figures.append(measure_compaction(fixture, SIZES[-1]))
    return [item.as_dict() for item in figures]


if __name__ == "__main__":
    harness.print_figures("Store against plain sqlite3", main())

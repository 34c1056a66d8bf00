"""What the writer lease costs a write: appending rows one by one (a transaction each, as the
conversation loop does) with the session's lease held, so that every write confirms and renews
it inside its transaction, against the same appends on a session whose lease nobody holds.

Both run in this process on fresh files under one temporary directory; median of a few runs.
`main()` returns the table rows as dicts. Figures only, never an assertion.

    python bench/lease_bench.py
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from compaction_overhead import sample_rows
from harness import Figure, temporary_directory

from nbchat.history import Row
from nbchat.store.store import Store

ROWS = 2_000
REPEATS = 3


def appending(directory: Path, rows: list[Row], *, leased: bool) -> Callable[[], object]:
    """A fresh store and session; the returned call appends `rows` one transaction each."""
    store = Store(directory / f"{'leased' if leased else 'free'}-{time.monotonic_ns()}.db")
    session_id = store.create_session("bench")
    if leased:
        store.acquire_lease(session_id)

    def run() -> None:
        for row in rows:
            store.append_rows(session_id, [row])
        store.close()

    return run


def main() -> list[dict[str, Any]]:
    rows = list(itertools.islice(sample_rows(), ROWS))
    timings: dict[bool, list[float]] = {True: [], False: []}
    with temporary_directory("nbchat-lease-bench-") as directory:
        for _ in range(REPEATS):
            for leased in (False, True):
                run = appending(directory, rows, leased=leased)
                started = time.perf_counter()
                run()
                timings[leased].append(time.perf_counter() - started)
    leased, free = statistics.median(timings[True]), statistics.median(timings[False])
    figure = Figure(
        figure=f"lease: append {ROWS:,} rows one by one, lease held (confirmed in each write)",
        value=f"{leased * 1e6 / ROWS:.0f} µs/row",
        baseline=f"{free * 1e6 / ROWS:.0f} µs/row without a lease",
        ratio=f"{leased / free:.2f}x",
    )
    return [figure.as_dict()]


if __name__ == "__main__":
    harness.print_figures("The writer lease's cost per write", main())

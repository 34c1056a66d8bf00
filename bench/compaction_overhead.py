"""What the budget check costs as a session grows: incremental `History` versus a full rescan.

For histories of 1k, 10k and 100k rows, time `CompactionEngine.should_compact` right after one
row is appended (the conversation loop's pattern: append, check), on a `History` (per-row
estimates and a running total) and, in the same process, a naive check that rescans a plain
list with the len//3 rule. Prints a table; `main()` returns its rows as dicts for
`bench/run_all.py`. Figures only, never an assertion.

    python bench/compaction_overhead.py
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

from nbchat.compaction.engine import CompactionEngine
from nbchat.history import History, Row

SIZES = (1_000, 10_000, 100_000)
REPEATS = 7
# Appends per timing: at most 2% of the history, so it stays the size it is labelled.
CHECKS_INCREMENTAL = {1_000: 20, 10_000: 200, 100_000: 2_000}
CHECKS_RESCAN = {1_000: 20, 10_000: 20, 100_000: 10}
SYSTEM_PROMPT = "You are a helpful assistant working inside a Jupyter notebook."
TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def sample_rows() -> itertools.cycle[Row]:
    """A repeating mix of user, assistant, tool-call and tool-result rows of varied sizes."""
    calls = (
        '[{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]'
    )
    return itertools.cycle(
        [
            Row("user", "please look at the failing test " * 3),
            Row("assistant_full", "", "", "", calls),
            Row("tool", "line of output\n" * 80, "c1", "read_file"),
            Row("assistant", "The test fails because the fixture is missing. " * 6),
        ]
    )


def naive_should_compact(rows: Sequence[Sequence[str]], trigger: int, overhead: int) -> bool:
    """The check without running sums: every row's len//3 estimate, every time."""
    total = overhead
    for row in rows:
        total += max(1, len(row[1]) // 3)
        if row[4]:
            total += max(1, len(row[4]) // 3)
    return total >= trigger


def time_per_check(
    start: Callable[[], tuple[Callable[[], object], Callable[[Row], object]]], count: int
) -> float:
    """Best of REPEATS, each on a fresh history: microseconds per (append one row, check)."""
    best = float("inf")
    for _ in range(REPEATS):
        check, append = start()
        new_rows = list(itertools.islice(sample_rows(), count))
        started = time.perf_counter_ns()
        for row in new_rows:
            append(row)
            check()
        best = min(best, (time.perf_counter_ns() - started) / count / 1000)
    return best


def measure(size: int) -> dict[str, float | int]:
    engine = CompactionEngine(10**12, system_prompt=SYSTEM_PROMPT, tool_schemas=TOOL_SCHEMAS)
    base = list(itertools.islice(sample_rows(), size))
    trigger, overhead = engine.trigger, engine.overhead_tokens

    def fresh_history() -> tuple[Callable[[], object], Callable[[Row], object]]:
        history = History(base)
        return (lambda: engine.should_compact(history)), history.append

    def fresh_list() -> tuple[Callable[[], object], Callable[[Row], object]]:
        plain = list(base)
        return (lambda: naive_should_compact(plain, trigger, overhead)), plain.append

    incremental = time_per_check(fresh_history, CHECKS_INCREMENTAL[size])
    rescan = time_per_check(fresh_list, CHECKS_RESCAN[size])
    return {
        "rows": size,
        "incremental_us": round(incremental, 3),
        "rescan_us": round(rescan, 1),
        "ratio": round(rescan / incremental, 1),
    }


def main() -> list[dict[str, float | int]]:
    """Measure every size; the table rows as dicts."""
    return [measure(size) for size in SIZES]


def print_table(rows: Sequence[dict[str, float | int]]) -> None:
    print(f"should_compact after appending one row (best of {REPEATS}, per check)")
    print(f"{'rows':>8}  {'History (µs)':>13}  {'list rescan (µs)':>17}  {'rescan / History':>16}")
    for row in rows:
        print(
            f"{row['rows']:>8,}  {row['incremental_us']:>13.3f}  {row['rescan_us']:>17,.1f}  "
            f"{row['ratio']:>15,.1f}x"
        )


if __name__ == "__main__":
    print_table(main())

"""Every benchmark, one table: `python bench/run_all.py` (the README shows its output).

Runs each benchmark's `main()` in this process, one after the other, and prints one markdown
table (figure, value, baseline, ratio, target, met?) under the date and the machine (CPU model,
cores, Python), then how long each benchmark took. Every ratio is the value over a baseline
measured in the same process. `--only NAME ...` or `--skip NAME ...` choose benchmarks by
module name; the Qwen one (`compaction_model`) takes several minutes; `compaction_stall` (two
chats on Qwen with reading pauses, ~15 minutes) runs only when named in `--only`.

    python bench/run_all.py [--only replay_savings ...] [--skip compaction_model ...]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import harness
from harness import Figure

# Cheapest first, so a broken setup shows early; the embedded-model ones last.
BENCHMARKS = (
    "compaction_overhead",
    "render_math",
    "replay_savings",
    "streaming_overhead",
    "store_bench",
    "lease_bench",
    "inspector_rebuild",
    "tool_costs",
    "tokenize_ratio",
    "schema_tokens",
    "notebook_tools",
    "compaction_model",
    "checkpoint_stability",
    "first_reply",
    "compaction_stall",
)
OPT_IN = ("compaction_stall",)  # long (two chats with reading pauses): only with --only
OVERHEAD_TARGET = 0.01  # issue 3: the incremental check at least 100x faster at 100k rows
FLAT_TARGET = 2.0  # ... and not growing with history length (100k vs 1k rows)


def overhead_figures(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`compaction_overhead` reports its own columns; as table rows (ratio = value / baseline)."""
    figures = []
    for row in rows:
        ratio = row["incremental_us"] / row["rescan_us"]
        at_largest = row is rows[-1]
        figures.append(
            Figure(
                f"should_compact after one append, {row['rows']:,} rows",
                f"{row['incremental_us']:.2f} µs",
                f"{row['rescan_us']:,.1f} µs full len/3 rescan",
                f"{ratio:.5f}",
                f"<= {OVERHEAD_TARGET}" if at_largest else "",
                ratio <= OVERHEAD_TARGET if at_largest else None,
            )
        )
    growth = rows[-1]["incremental_us"] / rows[0]["incremental_us"]
    figures.append(
        Figure(
            f"should_compact: {rows[-1]['rows']:,} rows against {rows[0]['rows']:,}",
            f"{rows[-1]['incremental_us']:.2f} µs",
            f"{rows[0]['incremental_us']:.2f} µs",
            f"{growth:.2f}",
            f"<= {FLAT_TARGET} (flat)",
            growth <= FLAT_TARGET,
        )
    )
    return [figure.as_dict() for figure in figures]


ADAPTERS: dict[str, Callable[[Sequence[dict[str, Any]]], list[dict[str, Any]]]] = {
    "compaction_overhead": overhead_figures,
}


def run(names: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Each benchmark's rows (in table form) and its wall time in seconds."""
    rows: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for name in names:
        started = time.monotonic()
        module = importlib.import_module(name)
        produced = module.main()
        rows.extend(ADAPTERS.get(name, list)(produced))
        seconds[name] = time.monotonic() - started
    return rows, seconds


def print_table(rows: Sequence[dict[str, Any]], seconds: dict[str, float]) -> None:
    today = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    print(f"nbchat benchmarks, {today}\n{harness.machine_line()}\n")
    print("| figure | value | baseline | ratio | target | met? |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {' | '.join(harness.to_cells(row))} |")
    took = ", ".join(f"{name} {value:.0f} s" for name, value in seconds.items())
    print(f"\nTook: {took} (total {sum(seconds.values()):.0f} s).")


def chosen(only: Sequence[str] | None, skip: Sequence[str]) -> list[str]:
    unknown = sorted((set(only or ()) | set(skip)) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {', '.join(unknown)}; known: {BENCHMARKS}")
    wanted = (
        [name for name in BENCHMARKS if name in only]
        if only
        else [name for name in BENCHMARKS if name not in OPT_IN]
    )
    return [name for name in wanted if name not in skip]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run every nbchat benchmark; print one table.")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run just these")
    parser.add_argument("--skip", nargs="+", metavar="NAME", default=[], help="leave these out")
    args = parser.parse_args(argv)
    rows, seconds = run(chosen(args.only, args.skip))
    print_table(rows, seconds)


if __name__ == "__main__":
    main()

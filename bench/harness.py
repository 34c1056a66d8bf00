"""What every benchmark shares: the paths, the machine's description, and the figure rows.

Importing this module puts `tests/` on `sys.path`, so a benchmark run as a script
(`python bench/<name>.py`, which puts only `bench/` there) can use the test server
(`tests/fakeserver.py`) the same way the tests do.

A `Figure` is one row of `bench/run_all.py`'s table: what was measured, its value, the
baseline it is compared with (run in the same process) and the ratio, and the target it is
held to. Figures only: nothing here asserts.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
BENCH = REPO / "bench"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

__all__ = [
    "BENCH",
    "REPO",
    "TESTS",
    "Figure",
    "cpu_model",
    "machine_line",
    "median_seconds",
    "print_figures",
    "temporary_directory",
]


@dataclass(frozen=True)
class Figure:
    """One measured figure; `met` is None when there is no target to meet."""

    figure: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (else what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    """CPU model, cores, Python and OS in one line, for the top of every table."""
    cores = os.cpu_count() or 0
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{cpu_model()}, {cores} cores, {python}, {platform.system()} {platform.release()}"


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    """The median wall time of `repeats` calls of `run`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@contextmanager
def temporary_directory(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        yield Path(name)


def print_figures(title: str, figures: list[dict[str, Any]]) -> None:
    """A benchmark's own table, when it runs alone."""
    print(f"{title}\n{machine_line()}\n")
    print("| figure | value | baseline | ratio | target | met? |")
    print("|---|---|---|---|---|---|")
    for row in figures:
        print(f"| {' | '.join(to_cells(row))} |")


def to_cells(row: dict[str, Any]) -> list[str]:
    met = row.get("met")
    mark = "" if met is None else ("yes" if met else "**no**")
    keys = ("figure", "value", "baseline", "ratio", "target")
    return [str(row.get(key, "")) for key in keys] + [mark]

"""What the notebook tools cost on a big namespace: 10,000 variables and a 1 GiB DataFrame.

`list_variables` over a namespace of 10,000 user variables, against the cheapest listing that
could be made in the same process (every name with its type's name, sorted); and
`describe_value` on a DataFrame of about 1 GiB (floats) and on a 1 GiB numpy array, against
pandas' and numpy's own `repr` of the same value (what printing it in a cell costs). Figures
only, never an assertion.

    python bench/notebook_tools.py
"""

from __future__ import annotations

from typing import Any

import harness
from harness import Figure, median_seconds

from nbchat.tools.notebook import describe_value, list_variables

VARIABLES = 10_000
FRAME_BYTES = 1 << 30
COLUMNS = 16
REPEATS = 5


def big_namespace(size: int) -> dict[str, Any]:
    """User-like variables: lists, dicts, strings, numbers, in turn."""
    kinds = (
        lambda i: list(range(i % 50)),
        lambda i: {"key": i, "values": [i] * 3},
        lambda i: f"text {i} " * 10,
        lambda i: i * 1.5,
    )
    return {f"var_{i:05d}": kinds[i % len(kinds)](i) for i in range(size)}


def cheapest_listing(namespace: dict[str, Any]) -> str:
    return "\n".join(sorted(f"{name}: {type(value).__name__}" for name, value in namespace.items()))


def measure_listing() -> Figure:
    namespace = big_namespace(VARIABLES)
    ours = median_seconds(lambda: list_variables(namespace), REPEATS)
    baseline = median_seconds(lambda: cheapest_listing(namespace), REPEATS)
    return Figure(
        f"list_notebook_variables, {VARIABLES:,} variables",
        f"{ours * 1000:,.1f} ms ({len(list_variables(namespace)):,} chars)",
        f"{baseline * 1000:,.1f} ms names + type names, sorted",
        f"{ours / baseline:.2f}",
    )


def measure_large_values() -> list[Figure]:
    try:
        import numpy as np
        import pandas as pd
    except ImportError:
        return [Figure("describe_variable, 1 GiB DataFrame", "not measured: pandas not installed")]
    rows = FRAME_BYTES // (8 * COLUMNS)
    frame = pd.DataFrame(np.random.default_rng(0).random((rows, COLUMNS)))
    array = np.random.default_rng(1).random(FRAME_BYTES // 8)
    figures = []
    for label, value in (("DataFrame", frame), ("numpy array", array)):
        nbytes = value.memory_usage(index=False).sum() if label == "DataFrame" else value.nbytes
        size = f"{nbytes / (1 << 30):.2f} GiB"
        ours = median_seconds(lambda v=value: describe_value("big", v, seconds=60), REPEATS)
        baseline = median_seconds(lambda v=value: repr(v), REPEATS)
        figures.append(
            Figure(
                f"describe_variable, {size} {label}",
                f"{ours * 1000:,.1f} ms ({len(describe_value('big', value)):,} chars)",
                f"{baseline * 1000:,.1f} ms its own repr",
                f"{ours / baseline:.2f}",
            )
        )
    return figures


def main() -> list[dict[str, Any]]:
    figures = [measure_listing(), *measure_large_values()]
    return [figure.as_dict() for figure in figures]


if __name__ == "__main__":
    harness.print_figures("Notebook tools on a big namespace", main())

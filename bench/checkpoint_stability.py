"""Checkpoint stability on the embedded Qwen model with the prompt cache on.

The same history (the 2k one of `compaction_model.py`) is compacted five times in a row, in the
cache form, at temperature 0, with llama.cpp's prompt cache on (nbchat no longer sends
`cache_prompt: false`; each summary request is primed instead, see
`nbchat.compaction.modelsummariser`). The chat's own request is sent once before the first
compaction, as in a real chat. Reported: how many of the five checkpoints equal the first, and
the first line that differs when one does not; the prompt tokens each run computed (the first
reads the instruction, the others find it all in the cache). Slow: minutes on two busy cores.
`main()` returns the table rows as dicts for `bench/run_all.py`. Figures only, never an
assertion.

    python bench/checkpoint_stability.py
"""

from __future__ import annotations

import time
from typing import Any

import harness
from compaction_model import MODEL, N_CTX, compact, history_of, send_chat_request, trace_rows
from harness import Figure, temporary_directory

from nbchat.compaction.result import CompactionResult
from nbchat.embedded.server import LocalServer, ensure_server

RUNS = 5
TOKENS = 2_000


def first_difference(first: str, other: str) -> str:
    """The first line where `other` differs from `first` (both shown, shortened)."""
    pairs = zip(first.splitlines(), other.splitlines(), strict=False)
    for number, (a, b) in enumerate(pairs, start=1):
        if a != b:
            return f"line {number}: {a[:60]!r} vs {b[:60]!r}"
    return "one is longer"


def measure(server: LocalServer) -> list[Figure]:
    runs = RUNS
    rows = history_of(trace_rows(), TOKENS)
    send_chat_request(server, rows)
    results: list[CompactionResult] = [compact(server, rows, "cache") for _ in range(runs)]
    first = results[0].summary
    same = sum(result.summary == first for result in results)
    differences = [first_difference(first, r.summary) for r in results if r.summary != first]
    computed = " / ".join(
        "?" if r.usage.computed_tokens is None else f"{r.usage.computed_tokens:,}" for r in results
    )
    return [
        Figure(
            f"Qwen, the 2k history compacted {runs} times (cache form, cache on, temperature 0)",
            f"{same} of {runs} checkpoints identical"
            + "".join(f"; differs at {text}" for text in differences[:2]),
            "",
            "",
            f"{runs} of {runs}",
            same == runs,
        ),
        Figure(
            "  prompt tokens computed per run",
            computed,
            f"{' / '.join(f'{r.duration:.0f}' for r in results)} s",
        ),
    ]


def main() -> list[dict[str, Any]]:
    """Start Qwen in a temporary home, compact the history five times, stop it."""
    with temporary_directory("nbchat-qwen-") as home:
        server = ensure_server(MODEL, home=home, n_ctx=N_CTX, timeout=600)
        try:
            figures = measure(server)
        finally:
            server.stop()
    return [figure.as_dict() for figure in figures]


if __name__ == "__main__":
    begun = time.monotonic()
    harness.print_figures("Checkpoint stability on the embedded Qwen model", main())
    print(f"\n(took {time.monotonic() - begun:.0f} s)")

"""Compaction on the embedded Qwen model: wall time, tokens a second, and what comes out.

The real `CompactionEngine` (JSON checkpoint under a schema, code-computed facts, chunking)
summarises three histories cut from a real agent run (`tests/data/traces/`, the matplotlib
trace, its task message cut to its first 1,500 characters so the smallest history holds more
than one turn) at about 2k, 8k and 32k estimated tokens, against Qwen2.5-Coder-0.5B served by
`nbchat.embedded.server.ensure_server` (llama.cpp in its own process) with a 16,384-token window.
Each compaction is the automatic one: the history is over the trigger because the threshold is a
quarter of its size, so the engine keeps a small tail (~10%) and summarises the rest, which is
what "compacting an N-token history" should time. The 32k history's transcript is bigger than
the summariser's window, so it is summarised in chunks.

Reported per history: the layer used, summariser requests, prompt and completion tokens (the
server's own counts), wall time, tokens processed a second, and the summary's size against the
history's. Slow: several minutes on two cores. `main()` returns the table rows as dicts for
`bench/run_all.py`. Figures only, never an assertion.

    python bench/compaction_model.py
"""

from __future__ import annotations

import json
import time
from typing import Any

import harness
import openai
from harness import Figure, temporary_directory

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import CompactionResult
from nbchat.embedded.server import LocalServer, ensure_server
from nbchat.errors import NbchatError
from nbchat.history import History, Row, estimate_tokens

TRACE = harness.REPO / "tests" / "data" / "traces" / "matplotlib__matplotlib-26208.json"
TASK_CHARS = 1_500
SIZES = (2_000, 8_000, 32_000)
N_CTX = 16_384
MODEL = "qwen"
THRESHOLD_DIVISOR = 4  # the threshold is a quarter of the history: ~90% of it is summarised


def trace_rows() -> list[Row]:
    """The trace's rows after its system prompt, the task cut to TASK_CHARS characters."""
    rows = [Row(*row) for row in json.loads(TRACE.read_text())][1:]
    rows[0] = rows[0]._replace(content=rows[0].content[:TASK_CHARS])
    return rows


def history_of(rows: list[Row], tokens: int) -> list[Row]:
    """The shortest prefix of `rows` with at least `tokens` (estimated), never split in a call."""
    total = 0
    for index, row in enumerate(rows):
        total += estimate_tokens(row)
        ends_a_call = index + 1 == len(rows) or rows[index + 1].role != "tool"
        if total >= tokens and ends_a_call:
            return rows[: index + 1]
    return rows


def compact(server: LocalServer, rows: list[Row]) -> CompactionResult:
    client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    threshold = sum(estimate_tokens(row) for row in rows) // THRESHOLD_DIVISOR
    engine = CompactionEngine(threshold, 4, None, MODEL, "", client)
    return engine.compact(History(rows))


def figure_for(tokens: int, rows: list[Row], result: CompactionResult) -> Figure:
    history_tokens = sum(estimate_tokens(row) for row in rows)
    summary_tokens = estimate_tokens(result.summary_row) if result.summary_row else 0
    processed = result.prompt_tokens + result.completion_tokens
    speed = processed / result.duration if result.duration else 0.0
    return Figure(
        f"Qwen compaction, {tokens // 1000}k history ({len(rows)} rows, ~{history_tokens:,} tok)",
        f"{result.duration:.1f} s, {outcome(result)}, {result.requests} request(s), "
        f"{result.prompt_tokens:,} + {result.completion_tokens:,} tok, {speed:,.0f} tok/s; "
        f"{result.rows_summarised} rows summarised, summary ~{summary_tokens:,} tok"
        + "".join(f"; warning: {short_warning(text)}" for text in result.warnings),
        f"~{result.tokens_before:,} tok before",
        f"{result.tokens_after / result.tokens_before:.3f} (~{result.tokens_after:,} after)",
    )


def outcome(result: CompactionResult) -> str:
    """The layer that did the work, or why nothing was applied."""
    return result.layer if result.changed else f"not applied ({result.reason})"


def short_warning(text: str) -> str:
    """The engine's warning without its explanation (the table cell stays readable)."""
    return text.split(";")[0].removeprefix("the summary ")


def failure_for(tokens: int, error: NbchatError, seconds: float) -> Figure:
    return Figure(
        f"Qwen compaction, {tokens // 1000}k history",
        f"failed after {seconds:.1f} s: {error}",
        met=False,
    )


def measure(server: LocalServer, tokens: int) -> Figure:
    rows = history_of(trace_rows(), tokens)
    started = time.monotonic()
    try:
        result = compact(server, rows)
    except NbchatError as error:
        return failure_for(tokens, error, time.monotonic() - started)
    return figure_for(tokens, rows, result)


def main() -> list[dict[str, Any]]:
    """Start Qwen in a temporary home, compact the three histories, stop it."""
    figures: list[Figure] = []
    with temporary_directory("nbchat-qwen-") as home:
        started = time.monotonic()
        server = ensure_server(MODEL, home=home, n_ctx=N_CTX, timeout=600)
        startup = time.monotonic() - started
        try:
            figures.append(
                Figure(
                    "Qwen server start (assemble + load the model)",
                    f"{startup:.1f} s, window {server.n_ctx:,} tokens",
                )
            )
            figures.extend(measure(server, tokens) for tokens in SIZES)
        finally:
            server.stop()
    return [figure.as_dict() for figure in figures]


if __name__ == "__main__":
    begun = time.monotonic()
    rows = main()
    harness.print_figures("Compaction on the embedded Qwen model", rows)
    print(f"\n(took {time.monotonic() - begun:.0f} s)")

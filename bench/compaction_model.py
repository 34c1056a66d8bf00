"""Compaction on the embedded Qwen model: the transcript form against the cache form.

The real `CompactionEngine` (JSON checkpoint under a schema, code-computed facts, chunking)
summarises histories cut from a real agent run (`tests/data/traces/`, the matplotlib trace, its
task message cut to its first 1,500 characters so the smallest history holds more than one
turn) at about 2k and 8k estimated tokens (and 32k, chunked, with `--all`), against
Qwen2.5-Coder-0.5B served by `nbchat.embedded.server.ensure_server` (llama.cpp in its own
process) with a 16,384-token window, the default system prompt and the default tool schemas.
Each compaction is the automatic one: the history is over the trigger because the threshold is a
quarter of its size.

Before each compaction the chat's own request for the history is sent (one generated token), so
the server's cache holds what it holds in a real chat when a compaction starts. Then the same
history is compacted twice: in the transcript form (the rows re-serialised into a new prompt,
what nbchat did until now) and in the cache form (the chat's prefix plus one instruction,
`nbchat.compaction.cacheform`). Reported per history and form, from the server's own counts
(`timings.cache_n`): prompt tokens computed (not served from the cache) and served from it,
completion tokens, wall time, and the summary's size; then the cache form's computed tokens as a
share of the transcript form's (goal: at most 10%). Slow: many minutes on two busy cores; each
history runs once. `main()` returns the table rows as dicts for `bench/run_all.py`. Figures
only, never an assertion.

    python bench/compaction_model.py [--all]
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import harness
import openai
from harness import Figure, temporary_directory

from nbchat.compaction.cacheform import RequestShape
from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import CompactionResult
from nbchat.config import DEFAULT_SYSTEM_PROMPT
from nbchat.embedded.server import LocalServer, ensure_server
from nbchat.errors import NbchatError
from nbchat.history import History, Row, build_messages, estimate_tokens
from nbchat.tools import default_registry

TRACE = harness.REPO / "tests" / "data" / "traces" / "matplotlib__matplotlib-26208.json"
TASK_CHARS = 1_500
SIZES = (2_000, 8_000)
ALL_SIZES = (2_000, 8_000, 32_000)
FORMS = ("transcript", "cache")
TARGET_SHARE = 0.10
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


def tools() -> tuple[dict[str, Any], ...]:
    return tuple(default_registry().schemas())


def send_chat_request(server: LocalServer, rows: list[Row]) -> None:
    """The chat's own request for `rows` (one token generated): what the server's cache holds
    when a compaction starts in a real chat."""
    client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    client.chat.completions.create(
        model=MODEL,
        messages=build_messages(rows, DEFAULT_SYSTEM_PROMPT),  # type: ignore[arg-type]
        tools=list(tools()),  # type: ignore[arg-type]
        max_tokens=1,
        temperature=0.0,
    )


def compact(server: LocalServer, rows: list[Row], form: str) -> CompactionResult:
    client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    threshold = sum(estimate_tokens(row) for row in rows) // THRESHOLD_DIVISOR
    engine = CompactionEngine(
        threshold, 4, None, MODEL, DEFAULT_SYSTEM_PROMPT, client, tool_schemas=tools()
    )
    if form == "cache":
        engine.request_shape = RequestShape(DEFAULT_SYSTEM_PROMPT, tools(), MODEL)
    return engine.compact(History(rows))


def figure_for(tokens: int, rows: list[Row], result: CompactionResult) -> Figure:
    history_tokens = sum(estimate_tokens(row) for row in rows)
    usage, edit = result.usage, result.edit
    summary_tokens = estimate_tokens(edit.summary_row) if edit.summary_row else 0
    computed = usage.computed_tokens
    cached = "?" if usage.cached_tokens is None else f"{usage.cached_tokens:,}"
    return Figure(
        f"Qwen compaction, {tokens // 1000}k history ({len(rows)} rows, ~{history_tokens:,} tok), "
        f"{usage.form or '-'} form",
        f"{'?' if computed is None else f'{computed:,}'} prompt tok computed, {cached} from the "
        f"cache; {usage.completion_tokens:,} completion tok; {result.duration:.1f} s; "
        f"{outcome(result)}, {usage.requests} request(s); {edit.rows_summarised} rows "
        f"summarised, summary ~{summary_tokens:,} tok"
        + "".join(f"; warning: {short_warning(text)}" for text in result.warnings),
        f"~{result.tokens_before:,} tok before",
        f"{result.tokens_after / result.tokens_before:.3f} (~{result.tokens_after:,} after)",
    )


def share_figure(tokens: int, results: dict[str, CompactionResult]) -> Figure:
    """The cache form's computed prompt tokens as a share of the transcript form's."""
    transcript, cache = results["transcript"], results["cache"]
    if transcript.usage.computed_tokens is None or cache.usage.computed_tokens is None:
        return Figure(f"{tokens // 1000}k: cache form / transcript form, computed", "unknown")
    share = cache.usage.computed_tokens / max(1, transcript.usage.computed_tokens)
    return Figure(
        f"{tokens // 1000}k: prompt tokens computed, cache form / transcript form",
        f"{cache.usage.computed_tokens:,} / {transcript.usage.computed_tokens:,}",
        f"{transcript.duration:.0f} s / {cache.duration:.0f} s wall",
        f"{share:.3f}",
        f"<= {TARGET_SHARE:.2f}",
        share <= TARGET_SHARE,
    )


def outcome(result: CompactionResult) -> str:
    """The layer that did the work, or why nothing was applied."""
    return result.layer if result.changed else f"not applied ({result.reason})"


def short_warning(text: str) -> str:
    """The engine's warning without its explanation (the table cell stays readable)."""
    return text.split(";")[0].removeprefix("the summary ")


def failure_for(tokens: int, error: Exception, seconds: float) -> Figure:
    return Figure(
        f"Qwen compaction, {tokens // 1000}k history",
        f"failed after {seconds:.1f} s: {error}",
        met=False,
    )


def measure(server: LocalServer, tokens: int) -> list[Figure]:
    rows = history_of(trace_rows(), tokens)
    figures: list[Figure] = []
    results: dict[str, CompactionResult] = {}
    for form in FORMS:
        started = time.monotonic()
        try:
            send_chat_request(server, rows)
            results[form] = compact(server, rows, form)
        except (NbchatError, openai.OpenAIError) as error:
            figures.append(failure_for(tokens, error, time.monotonic() - started))
            continue
        figures.append(figure_for(tokens, rows, results[form]))
    if len(results) == len(FORMS):
        figures.append(share_figure(tokens, results))
    return figures


def main(sizes: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    """Start Qwen in a temporary home, compact each history in both forms, stop it."""
    sizes = SIZES if sizes is None else sizes  # read at call time: a test narrows SIZES
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
            for tokens in sizes:
                figures.extend(measure(server, tokens))
        finally:
            server.stop()
    return [figure.as_dict() for figure in figures]


if __name__ == "__main__":
    begun = time.monotonic()
    rows = main(ALL_SIZES if "--all" in sys.argv[1:] else SIZES)
    harness.print_figures("Compaction on the embedded Qwen model", rows)
    print(f"\n(took {time.monotonic() - begun:.0f} s)")

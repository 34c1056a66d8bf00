"""What the request inspector costs: rebuilding the last request of a 10,000-row session.

A session of `ROWS` rows (the mix of user, tool-call, tool-result and assistant rows of
`compaction_overhead.sample_rows`), with every fourth tool output pruned to a placeholder (so
the request's row ids are not one run), and one chat request recorded from it as the
conversation records it (`Store.record_sent`, with the default tools' schemas). Measured, each
the median of `REPEATS` runs in this process:
- recording the request (on the send path, once per request), against serialising its JSON
  body (which the SDK does for every request anyway);
- `inspect_request` (the exact body and every part with its token estimate and marks), against
  `Store.load_active` of the same session (what opening the session reads anyway);
- the same after a compaction archived all but four rows (the request shows what was sent then);
- the link's panel HTML (`render_request`) on top of the rebuild.
Figures only, never an assertion. `main()` returns the table rows for `bench/run_all.py`.

    python bench/inspector_rebuild.py
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import harness
from compaction_overhead import sample_rows
from harness import Figure, median_seconds, temporary_directory

from nbchat.compaction.prune import to_placeholder
from nbchat.conversation.requestview import inspect_request
from nbchat.history import Row, build_messages
from nbchat.store.rowsql import CompactionRecord
from nbchat.store.store import Store
from nbchat.tools import default_registry
from nbchat.ui.cards import render_request

ROWS = 10_000
REPEATS = 5
PRUNE_EVERY = 4  # every fourth tool output becomes a placeholder
SYSTEM_PROMPT = "You are a helpful assistant in a Jupyter notebook."
SUMMARY = Row("compacted", "## Goal\nFix the failing test.\n\n## Progress\n- [x] read the fixture")


def build_session(store: Store) -> tuple[str, list[Row]]:
    session_id = store.create_session("inspector bench")
    rows = list(itertools.islice(sample_rows(), ROWS))
    store.append_rows(session_id, rows)
    tools = [i for i, row in enumerate(rows) if row.role == "tool"][::PRUNE_EVERY]
    replacements = {i: to_placeholder(rows[i]) for i in tools}
    store.replace_rows(
        session_id, replacements, expected_active=ROWS, record=CompactionRecord("prune")
    )
    return session_id, [replacements.get(i, row) for i, row in enumerate(rows)]


def body_for(rows: list[Row]) -> dict[str, Any]:
    """The body the conversation would send for `rows` (the on_request argument)."""
    return {
        "model": "bench-model",
        "messages": build_messages(rows, SYSTEM_PROMPT),
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": default_registry().schemas(),
        "max_tokens": 1024,
    }


def figure(name: str, value: float, baseline: float, baseline_name: str) -> Figure:
    return Figure(
        name,
        f"{value * 1000:,.1f} ms",
        f"{baseline * 1000:,.1f} ms {baseline_name}",
        f"{value / baseline:.2f}",
    )


def main() -> list[dict[str, Any]]:
    figures: list[Figure] = []
    with temporary_directory("nbchat-inspector-") as directory:
        store = Store(directory / "inspector.db")
        session_id, rows = build_session(store)
        body = body_for(rows)
        record = median_seconds(
            lambda: store.record_sent(session_id, body, system_prompt=SYSTEM_PROMPT), REPEATS
        )
        # What the SDK does anyway for every request: serialise its body.
        encode = median_seconds(lambda: json.dumps(body, ensure_ascii=False), REPEATS)
        label = f"record a request, {ROWS:,} rows"
        figures.append(figure(label, record, encode, "serialising its body"))
        request_id = store.record_sent(session_id, body, system_prompt=SYSTEM_PROMPT)
        load = median_seconds(lambda: store.load_active(session_id), REPEATS)
        rebuild = median_seconds(lambda: inspect_request(store, request_id), REPEATS)
        label = f"inspect the last request, {ROWS:,} rows"
        figures.append(figure(label, rebuild, load, "load_active"))
        inspected = inspect_request(store, request_id)
        assert inspected is not None and inspected.body["messages"][-1] == body["messages"][-1]
        html = median_seconds(lambda: render_request(inspected), REPEATS)
        figures.append(figure(f"render its panel, {ROWS:,} rows", html, load, "load_active"))
        active = len(store.load_active(session_id))
        store.replace_with_compacted(
            session_id,
            SUMMARY,
            keep_tail=4,
            expected_active=active,
            record=CompactionRecord("summary"),
        )
        after = median_seconds(lambda: inspect_request(store, request_id), REPEATS)
        label = "the same once its rows were compacted"
        figures.append(figure(label, after, load, f"load_active of {ROWS:,} rows"))
        store.close()
    return [item.as_dict() for item in figures]


if __name__ == "__main__":
    harness.print_figures("The request inspector's rebuild", main())

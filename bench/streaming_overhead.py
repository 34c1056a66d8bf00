"""What the chat loop and the widget cost on top of the HTTP stream (issue 5).

Time to consume a 20,000-token streamed reply (20,000 SSE events of 4 characters; markdown as a
model writes it: headings, paragraphs, lists, code blocks) from the test server in a child
process: with the raw `openai` client (iterate, join the text) and through `ChatUI.send` +
`ChatUI.wait` (headless: the worker thread, `Conversation`, the store, the throttled
rendering). Same process, same server, interleaved repetitions, medians; target
ratio <= 1.15. Widgets talk through a recording comm that serialises every message as a kernel
would (without a kernel ipywidgets' comm does nothing, which would flatter the widget path).

Also the widget traffic for a 15,000-character reply streamed as 3,000 chunks (1 ms apart):
messages sent, bytes, refreshes per second of stream time, against the naive figure of
re-sending the whole text on every chunk (~22 MB). `main()` returns the table rows as dicts
for `bench/run_all.py`. Figures only, never an assertion.

    python bench/streaming_overhead.py
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
import openai
from fakeserver import Reply, start_fakeserver_process
from fakeserver_remote import FakeServerProcess
from harness import Figure, temporary_directory
from helpers import RecordingComm, recording_comms

from nbchat.config import Settings
from nbchat.store.store import Store
from nbchat.ui import ChatUI

REPLY_TOKENS = 20_000
TOKEN_CHARS = 4
REPEATS = 11  # this VM's timings wander by ±10%: more runs, a steadier median
TARGET_RATIO = 1.15
TRAFFIC_CHARS = 15_000
TRAFFIC_CHUNKS = 3_000
REFRESH_GAP = 0.005  # messages closer together than this went out in one refresh
TARGET_REFRESH_RATE = 20.0


def reply_text(tokens: int) -> str:
    """A long markdown answer as models write them: headings, paragraphs, lists, code blocks."""
    blocks: list[str] = []
    for step in itertools.count(1):
        blocks += [
            f"### Step {step}: check the `reader_{step}` module",
            " ".join(
                f"The loader calls `parse_dates` with `dayfirst=True` in place {i}, which reads "
                f"13/04/2023 correctly but turns 04/05/2023 into the fifth of April."
                for i in range(4)
            ),
            "\n".join(f"- item {i}: `value_{step}_{i}` is kept as **UTC**" for i in range(5)),
            "```python\n"
            + "\n".join(f"frame_{i} = load_measurements(path_{i}, tz='UTC')" for i in range(12))
            + "\n```",
        ]
        text = "\n\n".join(blocks)
        if len(text) >= tokens * TOKEN_CHARS:
            return text[: tokens * TOKEN_CHARS]
    raise AssertionError("unreachable")


def consume_raw(client: openai.OpenAI) -> str:
    stream = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "write a lot"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    parts = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    return "".join(parts)


def new_ui(server: FakeServerProcess, workdir: Path, run: int) -> ChatUI:
    settings = Settings(
        base_url=server.url + "/v1",
        home=workdir / "home",
        workspace=workdir,
        context_token_threshold=10**9,  # measure streaming, not compaction
    )
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)
    return ChatUI(settings, store=Store(workdir / f"stream-{run}.db"), client=client)


def consume_through_ui(ui: ChatUI) -> None:
    ui.send("write a lot")
    if not ui.wait(300):
        raise RuntimeError("the widget did not finish the reply within 5 minutes")


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this whole process: the worker thread's included)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_both(server: FakeServerProcess, workdir: Path) -> dict[str, list[tuple[float, float]]]:
    """Interleaved: raw client, then the widget, REPEATS times (plus one warm-up of each).

    Each widget is new (an empty session) and has already answered one short message, so the
    timing is the steady state: the worker thread and its database connection exist.
    """
    text = reply_text(REPLY_TOKENS)
    reply = Reply(text=text, chunk_size=TOKEN_CHARS)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)
    times: dict[str, list[tuple[float, float]]] = {"raw": [], "ui": []}
    for run in range(REPEATS + 1):
        server.enqueue(reply)
        raw = timed(lambda: check(consume_raw(client), text, "raw client"))
        ui = new_ui(server, workdir, run)
        server.enqueue(Reply(text="ready"), reply)
        consume_through_ui(ui)
        through_ui = timed(lambda ui=ui: consume_through_ui(ui))
        check(ui.conversation.history.rows[-1].content, text, "widget")
        ui.close()
        if run:  # the first pair warms the connection pool and the imports
            times["raw"].append(raw)
            times["ui"].append(through_ui)
    return times


def check(received: str, sent: str, path: str) -> None:
    if received != sent:
        raise RuntimeError(f"the {path} did not receive the whole reply")


def measure_traffic(server: FakeServerProcess, workdir: Path) -> dict[str, float]:
    """Widget messages, bytes and refreshes for a 15,000-character reply in 3,000 chunks."""
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 10 for i in range(60)]
    text = "\n\n".join(paragraphs)[:TRAFFIC_CHARS]
    chunk = TRAFFIC_CHARS // TRAFFIC_CHUNKS
    ui = new_ui(server, workdir, -1)
    server.enqueue(Reply(text="ready"), Reply(text=text, chunk_size=chunk, delay=0.001))
    consume_through_ui(ui)
    RecordingComm.sent.clear()
    duration, _ = timed(lambda: consume_through_ui(ui))
    messages = list(RecordingComm.sent)
    ui.close()
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(messages)]
    refreshes = 1 + sum(1 for gap in gaps if gap > REFRESH_GAP)
    return {
        "duration": duration,
        "messages": len(messages),
        "bytes": sum(size for _, _, size in messages),
        "refreshes": refreshes,
        "naive_bytes": sum(len(text[: (i + 1) * chunk]) for i in range(TRAFFIC_CHUNKS)),
    }


def figures(times: dict[str, list[tuple[float, float]]], traffic: dict[str, float]) -> list[Figure]:
    raw_median, ui_median = (statistics.median(wall for wall, _ in times[k]) for k in ("raw", "ui"))
    raw_cpu, ui_cpu = (statistics.median(cpu for _, cpu in times[k]) for k in ("raw", "ui"))
    ratio = ui_median / raw_median
    rate = traffic["refreshes"] / traffic["duration"]
    saved = traffic["bytes"] / traffic["naive_bytes"]
    return [
        Figure(
            f"stream {REPLY_TOKENS:,} tokens: ChatUI + Conversation (median of {REPEATS})",
            f"{ui_median:.2f} s",
            f"{raw_median:.2f} s raw openai client",
            f"{ratio:.2f}",
            f"<= {TARGET_RATIO}",
            ratio <= TARGET_RATIO,
        ),
        Figure(
            "the same: CPU time of the client process (median)",
            f"{ui_cpu:.2f} s",
            f"{raw_cpu:.2f} s raw openai client",
            f"{ui_cpu / raw_cpu:.2f}",
        ),
        Figure(
            f"widget refreshes, {TRAFFIC_CHARS:,} chars in {TRAFFIC_CHUNKS:,} chunks",
            f"{traffic['refreshes']:.0f} in {traffic['duration']:.1f} s ({rate:.1f}/s; "
            f"{traffic['messages']:.0f} messages)",
            f"{TRAFFIC_CHUNKS:,} (one per chunk)",
            f"{traffic['refreshes'] / TRAFFIC_CHUNKS:.3f}",
            f"<= {TARGET_REFRESH_RATE:.0f}/s",
            rate <= TARGET_REFRESH_RATE,
        ),
        Figure(
            "widget bytes sent for that reply",
            f"{traffic['bytes']:,.0f}",
            f"{traffic['naive_bytes']:,.0f} naive per-chunk re-send",
            f"{saved:.4f}",
            "well under naive (<= 0.05)",
            saved <= 0.05,
        ),
    ]


def main() -> list[dict[str, Any]]:
    """Time both paths and count the widget traffic; the table rows as dicts."""
    with (
        temporary_directory("nbchat-stream-") as workdir,
        recording_comms(),
        start_fakeserver_process(record_requests=False) as server,
    ):
        times = time_both(server, workdir)
        traffic = measure_traffic(server, workdir)
    return [figure.as_dict() for figure in figures(times, traffic)]


if __name__ == "__main__":
    harness.print_figures("Streaming overhead (issue 5)", main())

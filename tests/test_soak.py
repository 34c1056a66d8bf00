"""The soak (issue 7): 2,000 round-trips through one `Conversation`, in one process.

Every turn asks the test server (in this process, over real HTTP) for a tool call, runs it
(every seventh one fails), and gets a reply; a low threshold makes the engine compact every few
turns, prune-only or summarised, the summary coming from the server's responder. Checked:
memory flat after a warm-up (RSS from /proc/self/statm, with a generous bound), the thread
count flat, every compaction recorded in the store, the full transcript intact (every user
message, in order), and every chat request the server received under the threshold: the
server's own count of its messages (what it reports as `prompt_tokens`, which the engine budgets
with) plus the len/3 estimate of the tool schemas it does not count. The request log is drained
after each turn, so it stays small. The len/3 estimate of each whole request is printed too: it
runs a quarter above the server's characters/4, so it may pass the threshold; a real server's
report moves the engine the same way. RSS figures are printed for the README; no timing is
asserted.

    .venv/bin/python -m pytest -q -s -p no:cacheprovider tests/test_soak.py
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from fakeserver_replies import count_prompt_tokens
from helpers import is_summary_request

from nbchat.config import Settings
from nbchat.conversation.events import CompactionFinished, Failed
from nbchat.conversation.loop import Conversation
from nbchat.history import estimate_tokens
from nbchat.store.store import Store
from nbchat.tools import ToolRegistry

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.timeout(1200)]

TURNS = 2_000
WARM_UP = 200
THRESHOLD = 6_000
# Generous: Python's allocator and SQLite's page cache settle late; a leak of one reply per
# turn would add ~1.2 MB a hundred turns, ~20 MB over the run, and a leaked history far more.
RSS_GROWTH_LIMIT = 48 * 1024 * 1024
LOG_SIZE = 64  # the server keeps at most this many requests; drained after every turn
FAILING_EVERY = 7
CHUNK = 64
SUMMARY = json.dumps(
    {
        "goal": "Keep the field notes in order and answer questions about them.",
        "constraints": ["Quote the notes exactly."],
        "done": ["Read the notes the user asked for and summarised each."],
        "in_progress": [],
        "blocked": [],
        "decisions": ["Summaries stay under five sentences."],
        "next_steps": ["Read the next day's notes when asked."],
        "critical_context": ["Notes live in notes/day_<n>.md."],
    }
)


def rss_bytes() -> int:
    """Resident set size of this process (the second field of /proc/self/statm, in pages)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def user_text(turn: int) -> str:
    return f"Turn {turn}: read notes/day_{turn}.md and tell me what changed. " + "Context. " * 20


def notes(day: int) -> str:
    return (
        f"# Day {day}\n" + f"Measured channel {day % 5} at {day % 24:02d}:00, all nominal.\n" * 30
    )


def respond(body: dict[str, Any]) -> Reply:
    """The scripted model: a tool call for each user message, a reply after each result."""
    if is_summary_request(body):
        return Reply(text=SUMMARY, chunk_size=CHUNK)
    newest = body["messages"][-1]
    if newest["role"] == "user":
        turn = int(re.match(r"Turn (\d+)", newest["content"]).group(1))  # type: ignore[union-attr]
        arguments = json.dumps({"path": f"notes/day_{turn}.md"})
        call = (f"call_soak_{turn}", "read_notes", arguments)
        return Reply(text="Reading them.", tool_calls=[call], chunk_size=CHUNK)
    return Reply(text="Day summary: nominal. " * 25, chunk_size=CHUNK)


def soak_tools() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.register
    def read_notes(path: str) -> str:
        """Read one day's field notes."""
        day = int(re.search(r"(\d+)", path).group(1))  # type: ignore[union-attr]
        if day % FAILING_EVERY == 0:
            raise FileNotFoundError(f"No such notes file: {path}")
        return notes(day)

    return registry


def schema_estimate(body: dict[str, Any]) -> int:
    return estimate_tokens(("", json.dumps(body.get("tools") or []), "", "", ""))


def budget_tokens(body: dict[str, Any]) -> int:
    """The request as the engine budgets it: the server's count, plus the schemas it skips."""
    return count_prompt_tokens(body) + schema_estimate(body)


def request_estimate(body: dict[str, Any]) -> int:
    """The len/3 estimate of a whole request: messages, tool calls, tool schemas."""
    tokens = schema_estimate(body)
    for message in body["messages"]:
        calls = message.get("tool_calls")
        row = ("", message.get("content") or "", "", "", json.dumps(calls) if calls else "")
        tokens += estimate_tokens(row)
    return tokens


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(responder=respond, max_recorded=LOG_SIZE) as running:
        yield running


@pytest.fixture
def conversation(server: FakeServer, store: Store, make_settings: Any) -> Conversation:
    settings: Settings = make_settings(
        base_url=server.url + "/v1", context_token_threshold=THRESHOLD, tool_policy="allow"
    )
    client = openai.OpenAI(base_url=settings.base_url, api_key="soak", max_retries=0)
    return Conversation(settings, store, client=client, tools=soak_tools())


class Soak:
    """What the run saw: compactions, records expected, the largest request, the samples."""

    def __init__(self) -> None:
        self.layers: Counter[str] = Counter()
        self.records_expected = 0
        self.largest_request = 0
        self.largest_estimate = 0
        self.chat_requests = 0
        self.summary_requests = 0
        self.samples: dict[str, tuple[int, int]] = {}  # name -> (RSS bytes, threads)

    def take_turn(self, conversation: Conversation, text: str) -> None:
        for event in conversation.send(text):
            assert not isinstance(event, Failed), f"{text[:12]}: {event.message}"
            if isinstance(event, CompactionFinished) and event.result.changed:
                result = event.result
                self.layers[result.layer] += 1
                self.records_expected += bool(result.edit.replacements) + (
                    result.edit.summary_row is not None
                )

    def drain(self, server: FakeServer) -> None:
        """Measure and forget the requests the server logged during the turn."""
        bodies = server.chat_requests()
        server.clear()
        assert len(bodies) < LOG_SIZE  # nothing fell out of the bounded log unmeasured
        for body in bodies:
            if is_summary_request(body):
                self.summary_requests += 1
                continue
            self.chat_requests += 1
            self.largest_request = max(self.largest_request, budget_tokens(body))
            self.largest_estimate = max(self.largest_estimate, request_estimate(body))

    def sample(self, name: str) -> None:
        self.samples[name] = (rss_bytes(), threading.active_count())

    def report(self, seconds: float) -> str:
        rss = ", ".join(
            f"{name} {value / 2**20:.1f} MiB" for name, (value, _) in self.samples.items()
        )
        threads = ", ".join(f"{name} {count}" for name, (_, count) in self.samples.items())
        layers = ", ".join(f"{count} {layer}" for layer, count in sorted(self.layers.items()))
        return (
            f"\nsoak: {TURNS:,} round-trips in {seconds:.0f} s; {self.chat_requests:,} chat + "
            f"{self.summary_requests:,} summary requests; compactions: {layers}\n"
            f"RSS: {rss}\nthreads: {threads}\n"
            f"largest request: {self.largest_request:,} of {THRESHOLD:,} (server count + "
            f"schemas); by len/3 throughout: {self.largest_estimate:,}"
        )


def test_two_thousand_round_trips_stay_flat_and_lose_nothing(
    conversation: Conversation, server: FakeServer, store: Store
) -> None:
    soak = Soak()
    sent: list[str] = []
    started = time.monotonic()
    soak.sample("start")
    for turn in range(1, TURNS + 1):
        sent.append(user_text(turn))
        soak.take_turn(conversation, sent[-1])
        soak.drain(server)
        if turn in (WARM_UP, TURNS // 2, TURNS):
            soak.sample({WARM_UP: "warm", TURNS // 2: "middle", TURNS: "end"}[turn])
    print(soak.report(time.monotonic() - started))

    session_id = conversation.session_id
    assert session_id is not None
    full = store.load_full(session_id)
    assert [s.row.content for s in full if s.row.role == "user"] == sent
    recorded = [c for c in store.list_compactions(session_id) if c["kind"] != "retry"]
    assert len(recorded) == soak.records_expected
    assert soak.layers["summary"] + soak.layers["chunked"] >= 50
    # No prune-only compaction: by default the prune layer runs only beside a summary (one break
    # of a server's cached prefix per compaction), and here every old output is summarised.
    assert soak.layers["prune"] == 0
    assert soak.largest_request <= THRESHOLD
    warm_rss, warm_threads = soak.samples["warm"]
    end_rss, end_threads = soak.samples["end"]
    assert end_rss - warm_rss < RSS_GROWTH_LIMIT
    assert end_threads <= warm_threads

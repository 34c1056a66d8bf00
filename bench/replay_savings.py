"""What compaction saves on a real-shaped session: the replay of `replay_scenario.py`, twice.

The 9-turn session is sent through the real `Conversation` loop (streaming, tool rounds, the
budget checks, the store) against the replay's model server in a child process
(`replay_server.py`), once with compaction off (a threshold no request reaches) and once with
`context_token_threshold=30_000`, every other setting at its default. The measure is the
server's own count (characters // 4) of every chat request it received, read from its request
log: the summariser's requests are counted in the compacted run.

Figures: total prompt tokens of each run and their ratio (target <= 0.30), the largest single
request (target: none above the threshold), the compactions by layer, the summariser's share,
and a check that the run without compaction reproduces the trace's first-request sizes.

The prefix-cache column (`replay_prefix.py`): the prompt tokens a prefix-caching server (llama.cpp)
would have to compute, each request's part beyond its longest common prefix with the request
before it, summariser requests included. The compacted run is made twice for it: with the
summary asked in the cache form (the default: the chat's prefix plus one instruction) and in the
transcript form (forced by naming a separate summary model). Goal: the cache form at most half.
`main()` returns the table rows as dicts for `bench/run_all.py`. Figures only, never an
assertion.

    python bench/replay_savings.py
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
import openai
from fakeserver_replies import count_prompt_tokens
from harness import Figure, temporary_directory
from replay_prefix import computed_tokens
from replay_scenario import (
    SYSTEM_PROMPT,
    TARGET_FIRST_REQUESTS,
    TOOL_OUTPUT_LIMIT,
    is_summary_request,
    replay_tools,
    user_texts,
)
from replay_server import start_replay_server

from nbchat.config import Settings
from nbchat.conversation.events import CompactionFinished, Failed
from nbchat.conversation.loop import Conversation
from nbchat.store.store import Store

THRESHOLD = 30_000
TRANSCRIPT_MODEL = "replay-summary-model"  # a separate summary model: the transcript form
TARGET_CACHE_SHARE = 0.5
NO_COMPACTION = 10**9  # a threshold no request of the replay comes near
TARGET_RATIO = 0.30


@dataclass
class ReplayRun:
    """One run of the replay, measured by the server's count of every request it received."""

    threshold: int
    chat_requests: list[int] = field(default_factory=list)
    summary_requests: list[int] = field(default_factory=list)
    first_of_turn: list[int] = field(default_factory=list)
    layers: Counter[str] = field(default_factory=Counter)
    stored_compactions: int = 0
    computed: int = 0  # tokens beyond each request's common prefix with the one before
    summary_computed: int = 0  # the same, of the summariser's requests only

    @property
    def total(self) -> int:
        return sum(self.chat_requests) + sum(self.summary_requests)

    @property
    def largest(self) -> int:
        return max(self.chat_requests + self.summary_requests)

    @property
    def compactions(self) -> int:
        return sum(self.layers.values())


def run_replay(threshold: int, workdir: Path, *, summary_model: str = "") -> ReplayRun:
    """Send every turn through a fresh `Conversation`; raise if any turn fails."""
    run = ReplayRun(threshold)
    with start_replay_server() as server:
        settings = Settings(
            base_url=server.url + "/v1",
            model="replay-model",
            home=workdir / "home",
            workspace=workdir,
            context_token_threshold=threshold,
            tool_policy="allow",
            tool_output_limit=TOOL_OUTPUT_LIMIT,
            system_prompt=SYSTEM_PROMPT,
            summary_model=summary_model,
            workspace_overview=False,  # the trace's requests were sent without one
        )
        store = Store(workdir / f"replay-{threshold}-{summary_model or 'chat'}.db")
        client = openai.OpenAI(base_url=settings.base_url, api_key="replay", max_retries=0)
        conversation = Conversation(settings, store, client=client, tools=replay_tools())
        for text in user_texts():
            for event in conversation.send(text):
                if isinstance(event, Failed):
                    raise RuntimeError(f"the replay failed: {event.message}\n{event.traceback}")
                if isinstance(event, CompactionFinished) and event.result.changed:
                    run.layers[event.result.layer] += 1
        measure_requests(run, server.chat_requests())
        assert conversation.session_id is not None  # the first turn created the session
        run.stored_compactions = len(store.list_compactions(conversation.session_id))
        store.close()
    return run


def measure_requests(run: ReplayRun, bodies: Sequence[dict[str, Any]]) -> None:
    counts = computed_tokens(bodies)
    run.computed = sum(counts)
    run.summary_computed = sum(
        n for n, b in zip(counts, bodies, strict=True) if is_summary_request(b)
    )
    for body in bodies:
        tokens = count_prompt_tokens(body)
        if is_summary_request(body):
            run.summary_requests.append(tokens)
            continue
        run.chat_requests.append(tokens)
        if body["messages"][-1]["role"] == "user":
            run.first_of_turn.append(tokens)


def figures(plain: ReplayRun, compacted: ReplayRun) -> list[Figure]:
    return savings_figures(plain, compacted) + count_figures(plain, compacted)


def savings_figures(plain: ReplayRun, compacted: ReplayRun) -> list[Figure]:
    """The replay matches the trace; what compaction saved; the largest request."""
    ratio = compacted.total / plain.total
    matches = plain.first_of_turn == list(TARGET_FIRST_REQUESTS)
    return [
        Figure(
            "replay: first request of each turn, no compaction",
            " / ".join(f"{t:,}" for t in plain.first_of_turn),
            "the trace's sizes",
            "",
            "equal to the trace",
            matches,
        ),
        Figure(
            f"replay: total prompt tokens, threshold {THRESHOLD:,} (summariser counted)",
            f"{compacted.total:,}",
            f"{plain.total:,} without compaction",
            f"{ratio:.3f}",
            f"<= {TARGET_RATIO:.2f}",
            ratio <= TARGET_RATIO,
        ),
        Figure(
            "replay: largest single request",
            f"{compacted.largest:,}",
            f"{plain.largest:,} without compaction",
            f"{compacted.largest / plain.largest:.3f}",
            f"<= {THRESHOLD:,}",
            compacted.largest <= THRESHOLD,
        ),
    ]


def count_figures(plain: ReplayRun, compacted: ReplayRun) -> list[Figure]:
    """How the compacted run got there: requests, compactions, the summariser's share."""
    summary_tokens = sum(compacted.summary_requests)
    layers = ", ".join(f"{count} {layer}" for layer, count in sorted(compacted.layers.items()))
    return [
        Figure(
            "replay: requests (chat + summariser)",
            f"{len(compacted.chat_requests)} + {len(compacted.summary_requests)}",
            f"{len(plain.chat_requests)} + 0",
        ),
        Figure(
            "replay: compactions (by layer; records in the store)",
            f"{compacted.compactions} ({layers}; {compacted.stored_compactions} records)",
        ),
        Figure(
            "replay: summariser's prompt tokens",
            f"{summary_tokens:,}",
            f"{compacted.total:,} compacted total",
            f"{summary_tokens / compacted.total:.3f}",
        ),
    ]


def cache_figures(plain: ReplayRun, cached: ReplayRun, transcript: ReplayRun) -> list[Figure]:
    """What a prefix-caching server computes: the cache form against the transcript form."""
    share = cached.computed / max(1, transcript.computed)
    summary_share = cached.summary_computed / max(1, transcript.summary_computed)
    return [
        Figure(
            "replay: of which the summariser's requests",
            f"{cached.summary_computed:,}",
            f"{transcript.summary_computed:,} transcript form",
            f"{summary_share:.3f}",
        ),
        Figure(
            "replay: prompt tokens a prefix cache computes, cache form (summariser counted)",
            f"{cached.computed:,}",
            f"{transcript.computed:,} transcript form; {plain.computed:,} without compaction",
            f"{share:.3f}",
            f"<= {TARGET_CACHE_SHARE:.2f}",
            share <= TARGET_CACHE_SHARE,
        ),
    ]


def run_all() -> tuple[ReplayRun, ReplayRun, ReplayRun]:
    with temporary_directory("nbchat-replay-") as workdir:
        plain = run_replay(NO_COMPACTION, workdir)
        compacted = run_replay(THRESHOLD, workdir)
        transcript = run_replay(THRESHOLD, workdir, summary_model=TRANSCRIPT_MODEL)
    return plain, compacted, transcript


def main() -> list[dict[str, Any]]:
    """The three runs; the table rows as dicts."""
    plain, compacted, transcript = run_all()
    rows = figures(plain, compacted) + cache_figures(plain, compacted, transcript)
    return [figure.as_dict() for figure in rows]


def print_turns(plain: ReplayRun, compacted: ReplayRun) -> None:
    print("\nfirst request of each turn (server tokens)")
    print("| turn | trace | no compaction | threshold 30,000 |")
    print("|---|---|---|---|")
    rows = zip(TARGET_FIRST_REQUESTS, plain.first_of_turn, compacted.first_of_turn, strict=True)
    for turn, (trace, first_plain, first_compacted) in enumerate(rows, start=1):
        print(f"| {turn} | {trace:,} | {first_plain:,} | {first_compacted:,} |")


if __name__ == "__main__":
    plain_run, compacted_run, transcript_run = run_all()
    table = figures(plain_run, compacted_run)
    table += cache_figures(plain_run, compacted_run, transcript_run)
    rows = [figure.as_dict() for figure in table]
    harness.print_figures("Replay savings (issue 3)", rows)
    print_turns(plain_run, compacted_run)

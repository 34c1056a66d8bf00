"""How good is the len/3 estimate? Against the model server's own `/tokenize` count.

nbchat estimates tokens as `len(text) // 3` (at least 1) per piece of text. This benchmark asks
the embedded llama.cpp server (`nbchat.embedded.server.ensure_server`, each model in its own
temporary
home and process) to tokenize a mixed corpus and compares, per kind and overall:

- prose: the user messages, reasoning and assistant text of the five real agent runs in
  `tests/data/traces/`;
- code: nbchat's own source (`nbchat/**/*.py`);
- tool output: the shell output those agent runs saw (`tool` rows);
- JSON: the tool-call arguments of those runs and their `*.truth.json` files.

Each kind is capped at 150,000 characters, in pieces of at most 20,000. The ratio is
estimate / real count: above 1 the estimate overcounts (compaction triggers early, safe), below
1 it undercounts (a request can be bigger than the engine thinks). For Qwen2.5-Coder (the
default model) and SmolLM2 (the small one). `main()` returns the table rows as dicts for
`bench/run_all.py`. Figures only, never an assertion.

    python bench/tokenize_ratio.py
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import harness
import httpx
from harness import Figure, temporary_directory

from nbchat.compaction.prompts import text_tokens
from nbchat.embedded.server import LocalServer, ensure_server

MODELS = ("qwen", "smollm")
KINDS = ("prose", "code", "tool output", "JSON")
MAX_CHARS_PER_KIND = 150_000
PIECE_CHARS = 20_000
N_CTX = 2_048  # tokenizing needs no context; the smallest window starts fastest
TRACES = harness.REPO / "tests" / "data" / "traces"


@dataclass
class Count:
    """Characters, the len/3 estimate and the server's count for one kind of text."""

    chars: int = 0
    estimate: int = 0
    tokens: int = 0

    def add(self, other: Count) -> None:
        self.chars += other.chars
        self.estimate += other.estimate
        self.tokens += other.tokens


def trace_rows() -> Iterator[list[str]]:
    for path in sorted(TRACES.glob("*.json")):
        if not path.name.endswith(".truth.json"):
            yield from json.loads(path.read_text())


def samples_of(kind: str) -> Iterator[str]:
    """Every sample of one kind, in a fixed order."""
    if kind == "code":
        for path in sorted((harness.REPO / "nbchat").rglob("*.py")):
            yield path.read_text()
    elif kind == "JSON":
        for row in trace_rows():
            if row[4]:
                yield row[4]
        for path in sorted(TRACES.glob("*.truth.json")):
            yield path.read_text()
    else:
        roles = ("tool",) if kind == "tool output" else ("user", "analysis", "assistant_full")
        for row in trace_rows():
            if row[0] in roles and row[1].strip():
                yield row[1]


def corpus(kind: str) -> list[str]:
    """The kind's samples cut into pieces, MAX_CHARS_PER_KIND characters in all."""
    pieces: list[str] = []
    left = MAX_CHARS_PER_KIND
    for sample in samples_of(kind):
        for start in range(0, len(sample), PIECE_CHARS):
            piece = sample[start : start + PIECE_CHARS][:left]
            pieces.append(piece)
            left -= len(piece)
            if left <= 0:
                return pieces
    return pieces


def server_tokens(client: httpx.Client, server: LocalServer, text: str) -> int:
    response = client.post(server.url + "/tokenize", json={"content": text}, timeout=60)
    response.raise_for_status()
    return len(response.json()["tokens"])


def count_kind(client: httpx.Client, server: LocalServer, kind: str) -> Count:
    count = Count()
    for piece in corpus(kind):
        count.add(Count(len(piece), text_tokens(piece), server_tokens(client, server, piece)))
    return count


def figure(model: str, kind: str, count: Count) -> Figure:
    return Figure(
        f"len/3 estimate vs {model} /tokenize: {kind}",
        f"{count.estimate:,} estimated",
        f"{count.tokens:,} counted ({count.chars / count.tokens:.2f} chars/token)",
        f"{count.estimate / count.tokens:.2f}",
    )


def measure(model: str) -> list[Figure]:
    """Start `model` in its own temporary home, count every kind, stop it."""
    figures: list[Figure] = []
    total = Count()
    with temporary_directory(f"nbchat-tok-{model}-") as home:
        server = ensure_server(model, home=home, n_ctx=N_CTX, timeout=600)
        try:
            with httpx.Client(trust_env=False) as client:
                for kind in KINDS:
                    count = count_kind(client, server, kind)
                    total.add(count)
                    figures.append(figure(model, kind, count))
        finally:
            server.stop()
    figures.append(figure(model, "overall", total))
    return figures


def main() -> list[dict[str, Any]]:
    """Both models, every kind; the table rows as dicts."""
    return [item.as_dict() for model in MODELS for item in measure(model)]


if __name__ == "__main__":
    harness.print_figures("The len/3 estimate against the server's tokenizer", main())

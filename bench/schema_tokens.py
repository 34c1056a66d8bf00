"""What the built-in tools' schemas cost in prompt tokens: as nbchat sends them, and as plain
pydantic would write them.

Every request that offers tools carries their schemas, and small models pay for each token of
them. nbchat builds the schemas with pydantic but leaves out titles and defaults and writes
`X | None` as a list of types (`nbchat.tools.schema`). This benchmark has the embedded llama.cpp
server (each model in its own temporary home and process) tokenize the built-in tools' `tools=`
list both ways, for Qwen2.5-Coder (the default model) and SmolLM2 (the small one). Figures only,
never an assertion; `main()` returns the table rows as dicts.

    python bench/schema_tokens.py
"""

from __future__ import annotations

import json
from typing import Any

import harness
import httpx
from harness import Figure, temporary_directory

from nbchat.embedded.server import ensure_server
from nbchat.tools import default_registry

MODELS = ("qwen", "smollm")
N_CTX = 2_048  # tokenizing needs no context; the smallest window starts fastest


def schema_texts() -> tuple[str, str]:
    """The built-in tools' `tools=` list as sent, and as pydantic's own JSON schema would be."""
    registry = default_registry()
    sent = registry.schemas()
    plain = []
    for entry in sent:
        tool = registry.get(entry["function"]["name"])
        assert tool is not None
        parameters = tool.signature.adapter.json_schema()
        plain.append({**entry, "function": {**entry["function"], "parameters": parameters}})
    return json.dumps(sent), json.dumps(plain)


def measure(model: str) -> Figure:
    """Start `model` in its own temporary home, tokenize both texts, stop it."""
    sent, plain = schema_texts()
    with temporary_directory(f"nbchat-schema-{model}-") as home:
        server = ensure_server(model, home=home, n_ctx=N_CTX, timeout=600)
        try:
            with httpx.Client(trust_env=False) as client:
                counts = [
                    len(
                        client.post(
                            server.url + "/tokenize", json={"content": text}, timeout=60
                        ).json()["tokens"]
                    )
                    for text in (sent, plain)
                ]
        finally:
            server.stop()
    return Figure(
        f"built-in tool schemas, {model} tokens: as sent vs plain pydantic",
        f"{counts[0]:,} tokens ({len(sent):,} chars)",
        f"{counts[1]:,} tokens ({len(plain):,} chars)",
        f"{counts[0] / counts[1]:.2f}",
    )


def main() -> list[dict[str, Any]]:
    """Both models; the table rows as dicts."""
    return [measure(model).as_dict() for model in MODELS]


if __name__ == "__main__":
    harness.print_figures("What the tool schemas cost in prompt tokens", main())

"""What a prefix-caching server computes for a sequence of chat requests.

A server such as llama.cpp keeps the last prompt it read; the next request costs only its part
beyond the longest common prefix with it. Here a request is flattened the way a chat template
lays it out (the tool schemas first, then each message's role, content and tool calls, in
order), the common prefix with the previous request is measured in characters, and the rest is
counted with the replay server's rule (characters // 4). An approximation of a real template,
but one that treats the transcript and the cache form of a summary alike.

Pure: no I/O.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import harness  # noqa: F401 - puts tests/ on sys.path for the test server's token rule
from fakeserver_replies import CHARS_PER_TOKEN

__all__ = ["computed_tokens", "flatten"]


def flatten(body: dict[str, Any]) -> str:
    """The request as one text, in the order a chat template renders it."""
    parts = [json.dumps(body.get("tools") or [], sort_keys=True)]
    for message in body.get("messages", []):
        parts.append(f"<{message.get('role')}>")
        content = message.get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
        for call in message.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function", {}), sort_keys=True))
    return "\n".join(parts)


def computed_tokens(bodies: Sequence[dict[str, Any]]) -> list[int]:
    """Each request's tokens beyond its common prefix with the request before it."""
    counts, previous = [], ""
    for body in bodies:
        text = flatten(body)
        shared = len(os.path.commonprefix([previous, text]))
        counts.append((len(text) - shared) // CHARS_PER_TOKEN)
        previous = text
    return counts

"""The cache form: a summary asked as a continuation of the chat's own last request.

The transcript form (`nbchat.compaction.prompts`) re-serialises the rows into a new prompt, so a
server with a prompt cache reads them all again: on the embedded model that was ~90% of a
compaction's cost. The cache form sends instead exactly what the chat sent for the rows being
replaced, byte for byte: the same system message (`build_messages` with the same system prompt,
earlier summaries folded in), the same messages, the same tool schemas. Those rows are the start
of the chat's last request, so a prefix-caching server (llama.cpp) finds them in its cache and
computes only the one user message added at the end, which asks for the checkpoint under the
JSON schema, so even a 0.5B model writes the checkpoint instead of continuing the chat.

`RequestShape` is what the conversation hands the engine about its last request (the system
prompt, the tools it offered, the model); the engine uses this form only when the summary model
is that model and the request fits the summariser's window, and the transcript form otherwise
(a separate summary model, input that needs chunks).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbchat.compaction.prompts import FOCUS_PROMPT, json_format
from nbchat.history import Message, Row, build_messages, estimate_tokens, request_overhead_tokens

__all__ = [
    "CACHE_INSTRUCTION",
    "RequestShape",
    "build_cache_request",
    "cache_request",
    "cache_request_tokens",
]

CACHE_INSTRUCTION = (
    "STOP. Do not answer, continue the conversation above, or call tools. This message is not "
    "from the user: it asks you for a checkpoint of the conversation above (and of the "
    "summary in the system message, if there is one) for an assistant who will continue the "
    "work. The goal is what the USER asked for in their messages above. Say what was done, "
    "what was decided and what comes next."
)
MARGIN = 20  # 1/MARGIN of the window: len//3 is a guess


@dataclass(frozen=True)
class RequestShape:
    """What the chat's last request carried besides its rows: the system prompt it was built
    with, the tool schemas it offered (maybe none) and the model it asked."""

    system_prompt: str
    tools: tuple[Mapping[str, Any], ...] = ()
    model: str = ""


def build_cache_request(
    rows: Sequence[Row],
    shape: RequestShape,
    *,
    instruction: str | None = None,
    focus: str | None = None,
) -> list[Message]:
    """The chat's messages for `rows` (its request's start, unchanged) plus the instruction."""
    messages = build_messages(rows, shape.system_prompt)
    parts = [instruction or CACHE_INSTRUCTION, json_format()]
    if focus:
        parts.append(FOCUS_PROMPT.format(focus=focus))
    messages.append({"role": "user", "content": "\n\n".join(parts)})
    return messages


def cache_request_tokens(rows_tokens: int, shape: RequestShape, *, reply_tokens: int) -> int:
    """The estimated window a cache-form request needs: prompt, instruction and reply."""
    overhead = request_overhead_tokens(shape.system_prompt, shape.tools)
    instruction = estimate_tokens(CACHE_INSTRUCTION) + estimate_tokens(json_format())
    return overhead + rows_tokens + instruction + reply_tokens


def fits_window(tokens: int, window: int) -> bool:
    """Whether a request of `tokens` (estimated) fits `window` with the estimate's margin."""
    return tokens <= window - window // MARGIN


def cache_request(
    rows: Sequence[Row],
    shape: RequestShape | None,
    *,
    model: str,
    window: int,
    reply_tokens: int,
    instruction: str | None = None,
    focus: str | None = None,
) -> list[Message] | None:
    """The cache-form request for summarising `rows`, or None when the transcript form must be
    used: no shape known, another summary model than the chat's, or too big for the window."""
    if shape is None or (shape.model and model and shape.model != model):
        return None
    rows_tokens = sum(estimate_tokens(row) for row in rows)
    if not fits_window(cache_request_tokens(rows_tokens, shape, reply_tokens=reply_tokens), window):
        return None
    return build_cache_request(rows, shape, instruction=instruction, focus=focus)

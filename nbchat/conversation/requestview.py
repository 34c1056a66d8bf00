"""The request inspector's value: one chat request exactly as it was sent, and its parts.

`inspect_request(store, id)` rebuilds a recorded request (`nbchat.store.requests`) from its
rows and settings: the JSON body as the server received it (system prompt, messages, tool
schemas, parameters; the API key is a header and never part of it), and the same request cut
into parts, each with its estimated token count (`estimate_tokens`) and marks saying which rows
were compaction summaries, placeholders for pruned output, or `/attach` attachments. The
server's own count, when it reported one, is for the whole request (`prompt_tokens`).

A request whose rows were compacted since is rebuilt as it was sent: compaction archives rows,
it never deletes them. Must not: write anything, or know about widgets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from nbchat.compaction.findings import attachments_in
from nbchat.compaction.prune import is_placeholder
from nbchat.history import Message, Row, estimate_tokens
from nbchat.store.requests import PLACED, SentRequest
from nbchat.store.rowsql import StoredRow
from nbchat.store.store import Store

__all__ = [
    "ATTACHMENT",
    "PLACEHOLDER",
    "SUMMARY",
    "InspectedRequest",
    "RequestPart",
    "export_requests",
    "inspect_request",
    "last_request",
]

SUMMARY = "summary"  # a `compacted` row, folded into the system message
PLACEHOLDER = "placeholder"  # a tool output pruned to a short placeholder
ATTACHMENT = "attachment"  # a user message carrying `/attach` blocks
ROLE_LABELS = {  # a sent row's role → its message's role
    "user": "user",
    "assistant": "assistant",
    "assistant_full": "assistant",
    "tool": "tool",
}


@dataclass(frozen=True)
class RequestPart:
    """One part of a request as sent, with its estimated tokens and its marks."""

    kind: str  # "system prompt", "summary", "message", "tool schema" or "parameters"
    label: str
    text: str  # as sent (tool calls, schemas and parameters as JSON)
    tokens: int
    marks: tuple[str, ...] = ()
    row_id: int | None = None


@dataclass(frozen=True)
class InspectedRequest:
    """A request exactly as sent (`body`), and the same request in parts."""

    id: int
    session_id: str
    created: str
    body: dict[str, Any] = field(repr=False)
    parts: tuple[RequestPart, ...] = field(repr=False)
    prompt_tokens: int | None  # the server's count for the whole request, when reported
    completion_tokens: int | None

    @property
    def estimated_tokens(self) -> int:
        return sum(part.tokens for part in self.parts)

    def marked(self, mark: str) -> list[RequestPart]:
        return [part for part in self.parts if mark in part.marks]

    def to_bytes(self) -> bytes:
        """The body as the openai SDK writes it on the wire (compact, UTF-8, keys in order)."""
        return json.dumps(
            self.body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()

    def to_json(self, *, indent: int | None = 2) -> str:
        """The body as JSON (what the server received, pretty-printed by default)."""
        return json.dumps(self.body, indent=indent, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        """Everything, for an export: the body and the parts with their counts and marks."""
        parts = [
            {
                "kind": p.kind,
                "label": p.label,
                "tokens": p.tokens,
                "marks": list(p.marks),
                "row_id": p.row_id,
            }
            for p in self.parts
        ]
        return {
            "id": self.id,
            "created": self.created,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated_tokens": self.estimated_tokens,
            "parts": parts,
            "body": self.body,
        }


def last_request(store: Store, session_id: str | None) -> InspectedRequest | None:
    """The newest recorded request of `session_id` (None when there is none)."""
    requests = store.sent_requests(session_id) if session_id is not None else []
    return inspect_request(store, requests[-1][0]) if requests else None


def export_requests(store: Store, session_id: str) -> list[dict[str, Any]]:
    """Every recorded request of `session_id` as `to_dict()`, oldest first (for an export)."""
    found = (
        inspect_request(store, request_id) for request_id, _ in store.sent_requests(session_id)
    )
    return [request.to_dict() for request in found if request is not None]


def inspect_request(store: Store, request_id: int) -> InspectedRequest | None:
    """Request `request_id` rebuilt as sent; None when nothing was recorded for it."""
    sent = store.sent_request(request_id)
    if sent is None:
        return None
    body = sent.to_body()
    return InspectedRequest(
        id=sent.id,
        session_id=sent.session_id,
        created=sent.created,
        body=body,
        parts=tuple(_parts(sent, body["messages"])),
        prompt_tokens=sent.prompt_tokens,
        completion_tokens=sent.completion_tokens,
    )


def _parts(sent: SentRequest, messages: list[Message]) -> list[RequestPart]:
    parts: list[RequestPart] = []
    if sent.system_prompt:
        prompt = sent.system_prompt
        parts.append(RequestPart("system prompt", "system prompt", prompt, estimate_tokens(prompt)))
    for stored in sent.rows:
        if stored.row.role == "compacted":
            text = stored.row.content
            parts.append(
                RequestPart(SUMMARY, "summary", text, estimate_tokens(text), (SUMMARY,), stored.id)
            )
    conversation = messages[1:] if messages and messages[0]["role"] == "system" else messages
    parts.extend(_message_parts(sent.rows, conversation))
    for schema in sent.tools or []:
        text = json.dumps(schema, ensure_ascii=False)
        name = str(schema.get("function", {}).get("name", "?"))
        parts.append(RequestPart("tool schema", f"tool: {name}", text, estimate_tokens(text)))
    parameters = {k: v for k, v in sent.body.items() if k not in PLACED}
    text = json.dumps(parameters, ensure_ascii=False)
    parts.append(RequestPart("parameters", "parameters", text, estimate_tokens(text)))
    return parts


def _message_parts(stored: list[StoredRow], messages: list[Message]) -> Iterator[RequestPart]:
    """Each message as sent, with the row it came from (a repair may have dropped rows)."""
    index = 0
    for message in messages:
        while index < len(stored) and not _is_source(stored[index].row, message):
            index += 1
        source = stored[index] if index < len(stored) else None
        index += 1
        yield _message_part(message, source)


def _is_source(row: Row, message: Message) -> bool:
    if ROLE_LABELS.get(row.role) != message["role"]:
        return False
    if row.role == "assistant_full":  # sent with no text as null (or, repaired, as a reply)
        return message.get("content") == (row.content or None)
    return message.get("content") == row.content and message.get("tool_call_id", "") == (
        row.tool_id if row.role == "tool" else ""
    )


def _message_part(message: Message, source: StoredRow | None) -> RequestPart:
    row = source.row if source is not None else Row(message["role"], message.get("content") or "")
    label = "assistant (tool calls)" if "tool_calls" in message else message["role"]
    marks: tuple[str, ...] = ()
    if row.role == "tool":
        label = f"tool result: {row.tool_name or '?'}"
        marks = (PLACEHOLDER,) if is_placeholder(row) else ()
    elif row.role == "user" and (attached := attachments_in(row.content)):
        label, marks = "user, with " + "; ".join(attached).lower(), (ATTACHMENT,)
    text = message.get("content") or ""
    if "tool_calls" in message:
        calls = json.dumps(message["tool_calls"], ensure_ascii=False)
        text = f"{text}\n{calls}" if text else calls
    row_id = source.id if source is not None else None
    return RequestPart("message", label, text, estimate_tokens(row), marks, row_id)

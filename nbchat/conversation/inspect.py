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
from dataclasses import dataclass, field
from typing import Any

from nbchat.compaction.notebookfacts import attachments_in
from nbchat.compaction.prune import is_placeholder
from nbchat.history import Row, estimate_tokens, repair_rows, to_message
from nbchat.store.records import StoredRow
from nbchat.store.requests import PLACED, SentRequest
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
ROLE_LABELS = {
    "user": "user",
    "assistant": "assistant",
    "assistant_full": "assistant (tool calls)",
    "tool": "tool result",
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
    return InspectedRequest(
        id=sent.id,
        session_id=sent.session_id,
        created=sent.created,
        body=sent.to_body(),
        parts=tuple(_parts(sent)),
        prompt_tokens=sent.prompt_tokens,
        completion_tokens=sent.completion_tokens,
    )


def _parts(sent: SentRequest) -> list[RequestPart]:
    parts: list[RequestPart] = []
    if sent.system_prompt:
        prompt = sent.system_prompt
        parts.append(RequestPart("system prompt", "system prompt", prompt, estimate_tokens(prompt)))
    sent_rows = _with_ids(sent.rows)
    for row, row_id in sent_rows:
        if row.role == "compacted":
            tokens = estimate_tokens(row.content)
            parts.append(RequestPart(SUMMARY, "summary", row.content, tokens, (SUMMARY,), row_id))
    parts.extend(_message_part(row, row_id) for row, row_id in sent_rows if row.role in ROLE_LABELS)
    for schema in sent.tools or []:
        text = json.dumps(schema, ensure_ascii=False)
        name = str(schema.get("function", {}).get("name", "?"))
        parts.append(RequestPart("tool schema", f"tool: {name}", text, estimate_tokens(text)))
    parameters = {k: v for k, v in sent.body.items() if k not in PLACED}
    text = json.dumps(parameters, ensure_ascii=False)
    parts.append(RequestPart("parameters", "parameters", text, estimate_tokens(text)))
    return parts


def _message_part(row: Row, row_id: int | None) -> RequestPart:
    label = ROLE_LABELS[row.role]
    marks: tuple[str, ...] = ()
    if row.role == "tool":
        label = f"tool result: {row.tool_name or '?'}"
        marks = (PLACEHOLDER,) if is_placeholder(row) else ()
    elif row.role == "user" and attachments_in(row.content):
        label = "user, with " + "; ".join(attachments_in(row.content)).lower()
        marks = (ATTACHMENT,)
    message = to_message(row)
    text = row.content
    if row.role == "assistant_full":
        calls = json.dumps(message["tool_calls"], ensure_ascii=False)
        text = f"{row.content}\n{calls}" if row.content else calls
    return RequestPart("message", label, text, estimate_tokens(row), marks, row_id)


def _with_ids(stored: list[StoredRow]) -> list[tuple[Row, int | None]]:
    """The rows as sent (repaired, as `build_messages` does) with the id each came from."""
    result: list[tuple[Row, int | None]] = []
    index = 0
    for row in repair_rows([s.row for s in stored]).rows:
        while index < len(stored) and not _same(stored[index].row, row):
            index += 1
        result.append((row, stored[index].id if index < len(stored) else None))
        index += 1
    return result


def _same(original: Row, sent: Row) -> bool:
    # A repair may drop a call from an `assistant_full` row, or turn it into a plain reply.
    return original == sent or (
        original.role == "assistant_full" and original.content == sent.content
    )

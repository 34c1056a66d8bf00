"""The row, the roles, and how rows become the messages the model is sent.

A row is `(role, content, tool_id, tool_name, tool_args)`: a `NamedTuple`, so a plain 5-tuple
such as `("user", "hi", "", "", "")` compares equal to it and works wherever a row is expected.
`to_row` checks one and makes its text valid Unicode (see `to_valid_text`), so every row that
is stored or sent can be encoded.

Roles and what the model sees (`build_messages`):
- `user`, `assistant`: plain turns, sent as they are.
- `analysis`: the model's reasoning; stored and shown, never sent back.
- `assistant_full`: an assistant message that carried tool calls; `tool_args` holds the
  `tool_calls` JSON list exactly as it will be sent again.
- `tool`: one tool result; `tool_id` is the call id it answers, `tool_name` the tool.
- `system`: a notice that belongs in the transcript (stopped, error); never sent.
- `compacted`: the summary of everything before it; folded into the system prompt, so chat
  templates never meet a system message in the middle of a conversation.

`repair_rows` drops tool results whose call is missing and tool calls whose result is missing,
and says what it dropped, so a request is never rejected for an orphan. `History` keeps rows
with their token estimates and a running total, so budget checks are O(1).

This package is the ground floor's row model; import its names from here. They live in one
module, `rows`: `Row`, the roles, `to_row`, `to_valid_text`, the len//3 estimate; `ToolCall`,
call ids, reading an `assistant_full` row's stored calls; `repair_rows`, `build_messages`,
`to_message` (rows as the messages sent); `History` (per-row estimates, running total, reported
usage) and `context_tokens`.

Pure: no I/O, no threads, no widgets.
"""

from nbchat.history.rows import (
    CHARS_PER_TOKEN,
    ROLES,
    SUMMARY_HEADING,
    UNSENT_ROLES,
    History,
    Message,
    Repair,
    Row,
    RowLike,
    ToolCall,
    build_messages,
    context_tokens,
    estimate_tokens,
    new_call_id,
    parse_tool_calls,
    repair_rows,
    request_overhead_tokens,
    stored_calls,
    to_message,
    to_row,
    to_valid_text,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "ROLES",
    "SUMMARY_HEADING",
    "UNSENT_ROLES",
    "History",
    "Message",
    "Repair",
    "Row",
    "RowLike",
    "ToolCall",
    "build_messages",
    "context_tokens",
    "estimate_tokens",
    "new_call_id",
    "parse_tool_calls",
    "repair_rows",
    "request_overhead_tokens",
    "stored_calls",
    "to_message",
    "to_row",
    "to_valid_text",
]

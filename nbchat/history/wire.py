"""How rows become the messages the model is sent: `repair_rows` drops tool results whose
call is missing and tool calls whose result is missing (and says what it dropped), so a request
is never rejected for an orphan; `build_messages` turns the repaired rows into OpenAI chat
messages, with every `compacted` summary folded into the system prompt.

Pure: no I/O, no threads, no widgets.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

from nbchat.history.calls import parse_tool_calls
from nbchat.history.rows import UNSENT_ROLES, Row, RowLike, to_row, to_valid_text

__all__ = ["SUMMARY_HEADING", "Message", "Repair", "build_messages", "repair_rows", "to_message"]

log = logging.getLogger(__name__)

SUMMARY_HEADING = "Summary of the earlier conversation"
NO_RESULT = " has no result"

Message: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class Repair:
    """What `repair_rows` kept and what it dropped (one sentence per drop)."""

    rows: list[Row]
    dropped: list[str]


def repair_rows(rows: Iterable[RowLike]) -> Repair:
    """Drop orphan tool results and unanswered tool calls; rows that are not sent pass through.

    A call's results are the `tool` rows that follow its `assistant_full` row before the next
    sent row of another role. A result for an unknown or already answered id is dropped; a call
    with no result is removed from the stored list (the row becomes a plain reply, or is dropped
    when it has no text either). A corrupt `tool_args` counts as a row without calls.
    """
    source = [to_row(r) for r in rows]
    kept: list[Row] = []
    dropped: list[str] = []
    index = 0
    while index < len(source):
        row = source[index]
        if row.role == "tool":
            dropped.append(f"row {index}: tool result {row.tool_id!r} has no matching call")
            index += 1
        elif row.role == "assistant_full":
            index = _repair_turn(source, index, kept, dropped)
        else:
            kept.append(row)
            index += 1
    pending = _pending_turn(source)
    for note in dropped:
        # A turn still running has calls with no result yet (the meter reads the history
        # while a tool runs, or waits for approval): that is no damage, so it is not logged.
        if not (note.startswith(f"row {pending}: tool call ") and note.endswith(NO_RESULT)):
            log.warning("history repaired: %s", note)
    return Repair(kept, dropped)


def _pending_turn(source: list[Row]) -> int:
    """The index of the last `assistant_full` row when only tool results and unsent rows
    follow it (a turn whose tools are still running), else -1."""
    for index in range(len(source) - 1, -1, -1):
        role = source[index].role
        if role == "assistant_full":
            return index
        if role not in UNSENT_ROLES and role != "tool":
            return -1
    return -1


def _repair_turn(source: list[Row], start: int, kept: list[Row], dropped: list[str]) -> int:
    """Repair one `assistant_full` row and its results; return the index after the block."""
    row = source[start]
    try:
        calls = parse_tool_calls(row.tool_args)
    except ValueError as exc:
        calls = []
        dropped.append(f"row {start}: tool calls dropped ({exc})")
    stored_count = len(calls)
    unique = {call["id"]: call for call in reversed(calls)}  # first call wins a repeated id
    if len(unique) < len(calls):
        dropped.append(f"row {start}: repeated tool call ids dropped")
        calls = [call for call in calls if unique.get(call["id"]) is call]
    call_ids = set(unique)
    block: list[Row] = []  # answered results and unsent rows, in their original order
    answered: set[str] = set()
    index = start + 1
    while index < len(source) and source[index].role in UNSENT_ROLES | {"tool"}:
        result = source[index]
        if result.role != "tool":
            block.append(result)
        elif result.tool_id in call_ids and result.tool_id not in answered:
            answered.add(result.tool_id)
            block.append(result)
        else:
            dropped.append(f"row {index}: tool result {result.tool_id!r} has no matching call")
        index += 1
    kept_calls = [call for call in calls if call["id"] in answered]
    for call in calls:
        if call["id"] not in answered:
            dropped.append(f"row {start}: tool call {call['id']!r}{NO_RESULT}")
    if kept_calls:
        tool_args = row.tool_args if len(kept_calls) == stored_count else json.dumps(kept_calls)
        kept.append(row._replace(tool_args=tool_args))
    elif row.content:
        kept.append(Row("assistant", row.content))
    kept.extend(r for r in block if r.role != "tool" or kept_calls)
    return index


def build_messages(rows: Iterable[RowLike], system_prompt: str = "") -> list[Message]:
    """OpenAI chat messages for `rows`: repaired, reasoning and notices left out.

    The system prompt comes first, with every `compacted` summary folded into it.
    """
    repaired = repair_rows(rows).rows
    summaries = [row.content for row in repaired if row.role == "compacted"]
    system = system_prompt
    for summary in summaries:
        block = f"## {SUMMARY_HEADING}\n\n{summary}"
        system = f"{system}\n\n{block}" if system else block
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.extend(to_message(row) for row in repaired if row.role not in UNSENT_ROLES)
    return messages


def _valid_strings(value: Any) -> Any:
    """`value` with every string in it made valid text (a `"\\ud800"` escape in stored JSON
    decodes to half a character, which no request can carry)."""
    if isinstance(value, str):
        return to_valid_text(value)
    if isinstance(value, list):
        return [_valid_strings(item) for item in value]
    if isinstance(value, dict):
        return {key: _valid_strings(item) for key, item in value.items()}
    return value


def to_message(row: Row) -> Message:
    """One sent row as an OpenAI message (assumes a repaired history)."""
    if row.role == "assistant_full":
        return {
            "role": "assistant",
            "content": row.content or None,
            "tool_calls": _valid_strings(json.loads(row.tool_args)),
        }
    if row.role == "tool":
        return {"role": "tool", "tool_call_id": row.tool_id, "content": row.content}
    return {"role": row.role, "content": row.content}

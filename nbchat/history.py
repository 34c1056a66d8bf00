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

Also here: `ToolCall` (one call as the model made it), fresh call ids, and reading the
`tool_calls` JSON an `assistant_full` row stores, strictly (`parse_tool_calls`, for what is sent)
or leniently (`stored_calls`, for code that only looks); `context_tokens`, the one rule for the
size of the next request, and `estimate_tokens`, the one place the baseline estimate's rule
(len // 3) is written.

This module is the ground floor's row model.

Pure: no I/O, no threads, no widgets.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

__all__ = [
    "CHARS_PER_TOKEN",
    "History",
    "Message",
    "ROLES",
    "Repair",
    "Row",
    "RowLike",
    "SUMMARY_HEADING",
    "ToolCall",
    "UNSENT_ROLES",
    "build_messages",
    "context_tokens",
    "estimate_tokens",
    "last_user_index",
    "last_user_text",
    "new_call_id",
    "parse_tool_calls",
    "repair_rows",
    "request_overhead_tokens",
    "stored_calls",
    "to_message",
    "to_row",
    "to_valid_text",
]


ROLES = ("user", "assistant", "analysis", "assistant_full", "tool", "system", "compacted")
# Roles that never reach the model as a conversation message.
UNSENT_ROLES = frozenset({"analysis", "system", "compacted"})
# The baseline estimate's rule: a token is about three characters (`estimate_tokens`).
CHARS_PER_TOKEN = 3
SURROGATE = re.compile("[\ud800-\udfff]")


class Row(NamedTuple):
    """One history row; equal to the plain 5-tuple with the same fields."""

    role: str
    content: str
    tool_id: str = ""
    tool_name: str = ""
    tool_args: str = ""


RowLike: TypeAlias = Row | tuple[str, str, str, str, str]


def to_row(value: Sequence[str]) -> Row:
    """A `Row` from any 5-sequence, its text valid Unicode; raises ValueError naming what is
    wrong."""
    if len(value) != 5:
        raise ValueError(
            f"a row has 5 fields (role, content, tool_id, tool_name, tool_args), got {len(value)}"
        )
    role, content, tool_id, tool_name, tool_args = value
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    fields = tuple(to_valid_text(text or "") for text in (content, tool_id, tool_name, tool_args))
    if isinstance(value, Row) and fields == tuple(value[1:]):
        return value
    return Row(role, *fields)


def to_valid_text(text: str) -> str:
    """`text` with its lone UTF-16 surrogate halves repaired: a split pair joined into its
    character, a half on its own turned into U+FFFD.

    JSON's `"\\ud83d"` escapes decode to such halves (a browser or a server can send them), and
    neither SQLite nor the HTTP request can encode them as UTF-8.
    """
    if text.isascii() or not SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def estimate_tokens(value: str | Sequence[str]) -> int:
    """The baseline estimate, the one place its rule is written: a text's length // 3 (at
    least 1); for a row, its content's plus (when set) its tool_args'."""
    if isinstance(value, str):
        return max(1, len(value) // CHARS_PER_TOKEN)
    content, tool_args = value[1], value[4]
    return estimate_tokens(content) + (estimate_tokens(tool_args) if tool_args else 0)


def request_overhead_tokens(system_prompt: str, tool_schemas: Sequence[Mapping[str, Any]]) -> int:
    """What a request spends besides its rows: the system prompt and the tool schemas (each
    estimated; nothing for what is absent)."""
    schemas = json.dumps(list(tool_schemas)) if tool_schemas else ""
    return sum(estimate_tokens(text) for text in (system_prompt, schemas) if text)


def last_user_index(rows: Sequence[Row] | History) -> int | None:
    """Where the last user row of `rows` is (the start of the last turn), None without one."""
    return next((i for i in range(len(rows) - 1, -1, -1) if rows[i].role == "user"), None)


def last_user_text(rows: Sequence[Row] | History) -> str:
    """What the user last wrote in `rows`, "" when they wrote nothing."""
    index = last_user_index(rows)
    return "" if index is None else rows[index].content


def stored_calls(row: Row) -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """(id, name, arguments) of each call an `assistant_full` row holds, read leniently for
    code that only looks (the compaction facts): a malformed call is skipped, the id is "" when
    missing, and the arguments None when they are not a JSON object."""
    if row.role != "assistant_full":
        return
    try:
        calls = json.loads(row.tool_args)
    except ValueError:
        return
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = None
        call_id = call.get("id")
        yield (
            call_id if isinstance(call_id, str) else "",
            function["name"],
            arguments if isinstance(arguments, dict) else None,
        )


def parse_tool_calls(tool_args: str) -> list[dict[str, Any]]:
    """The stored `tool_calls` list of an `assistant_full` row; ValueError when malformed."""
    try:
        calls = json.loads(tool_args)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"tool_args is not valid JSON: {exc}") from None
    if not isinstance(calls, list) or not calls:
        raise ValueError("tool_args must be a non-empty JSON list of tool calls")
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(call, dict)
            and isinstance(call.get("id"), str)
            and call["id"]
            and isinstance(function, dict)
            and isinstance(function.get("name"), str)
        ):
            raise ValueError("each tool call needs an id and a function name")
    return calls


@dataclass(frozen=True)
class ToolCall:
    """One assembled tool call; `arguments` is the raw JSON text exactly as the model wrote it."""

    id: str
    name: str
    arguments: str

    def to_wire(self) -> dict[str, Any]:
        """The call as an assistant message's `tool_calls` entry."""
        function = {"name": self.name, "arguments": self.arguments}
        return {"id": self.id, "type": "function", "function": function}

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ValueError with a readable message when they are not one."""
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError as exc:
            raise ValueError(
                f"the arguments of the call to {self.name!r} are not valid JSON ({exc})"
            ) from exc
        if not isinstance(value, dict):
            raise ValueError(
                f"the arguments of the call to {self.name!r} must be a JSON object, "
                f"got {type(value).__name__}"
            )
        return value


def new_call_id() -> str:
    """A fresh tool-call id, for servers (and the JSON fallback) that give none."""
    return "call_" + secrets.token_hex(6)


class History:
    """Rows with their token estimates and a running total: `total_tokens` is O(1).

    Each estimate is computed once, when the row arrives. The last server-reported prompt size
    is remembered with the row count it was measured on, so a budget check can use it plus the
    estimate of the rows added since; `replace` (a compaction) forgets it.
    """

    def __init__(self, rows: Iterable[RowLike] = ()) -> None:
        self._rows: list[Row] = []
        self._estimates: list[int] = []
        self._total = 0
        self._usage: tuple[int, int] | None = None  # (row count, estimate total) at measurement
        self._reported = 0
        self.extend(rows)

    def append(self, row: RowLike) -> Row:
        checked = to_row(row)
        estimate = estimate_tokens(checked)
        self._rows.append(checked)
        self._estimates.append(estimate)
        self._total += estimate
        return checked

    def extend(self, rows: Iterable[RowLike]) -> None:
        for row in rows:
            self.append(row)

    def replace(self, rows: Iterable[RowLike]) -> None:
        """Swap in a new list of rows (after a compaction); reported usage becomes stale."""
        self._rows, self._estimates, self._total = [], [], 0
        self._usage = None
        self.extend(rows)

    def record_usage(self, prompt_tokens: int, *, rows: int | None = None) -> None:
        """The server counted `prompt_tokens` for a request built from the current rows, or
        from the first `rows` of them (a count that arrived after more rows did)."""
        measured = len(self._rows) if rows is None else min(rows, len(self._rows))
        total = self._total if rows is None else sum(self._estimates[:measured])
        self._usage = (measured, total)
        self._reported = prompt_tokens

    def forget_usage(self) -> None:
        """Drop the reported figure (e.g. after a model switch)."""
        self._usage = None

    @property
    def total_tokens(self) -> int:
        """Sum of the rows' estimates (rows only, the baseline rule)."""
        return self._total

    @property
    def reported_tokens(self) -> int | None:
        """Last reported prompt size plus the estimate of rows added since, or None."""
        if self._usage is None or self._usage[0] > len(self._rows):
            return None
        return self._reported + (self._total - self._usage[1])

    @property
    def rows(self) -> list[Row]:
        """A snapshot copy of the rows."""
        return list(self._rows)

    def estimate_of(self, index: int) -> int:
        return self._estimates[index]

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[Row]:
        return iter(list(self._rows))

    def __getitem__(self, index: int) -> Row:
        return self._rows[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            return self._rows == other._rows
        if isinstance(other, list):
            return self._rows == [tuple(r) for r in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History({len(self._rows)} rows, ~{self._total} tokens)"


def context_tokens(history: History | Sequence[Sequence[str]], overhead: int) -> int:
    """The size of the next request, the one rule for it: the server's last report plus the
    rows added since, else every row's estimate plus `overhead` (system prompt, tool schemas)."""
    if isinstance(history, History):
        reported = history.reported_tokens
        return reported if reported is not None else history.total_tokens + overhead
    return sum(estimate_tokens(row) for row in history) + overhead


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

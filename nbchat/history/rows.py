"""The row and its roles: `Row`, `to_row` (a checked row, its text valid Unicode) and the
baseline token estimate, the one place its rule is written (`estimate_tokens`).

A row is `(role, content, tool_id, tool_name, tool_args)`: a `NamedTuple`, so a plain 5-tuple
such as `("user", "hi", "", "", "")` compares equal to it and works wherever a row is expected.

Pure: no I/O, no threads, no widgets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

__all__ = [
    "CHARS_PER_TOKEN",
    "ROLES",
    "UNSENT_ROLES",
    "Row",
    "RowLike",
    "estimate_tokens",
    "request_overhead_tokens",
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

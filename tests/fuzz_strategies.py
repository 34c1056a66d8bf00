"""Hypothesis strategies for hostile input: what a broken server, a confused model or a user's
own cell can hand nbchat.

Rows and histories (extending `strategies.py`): every role, tool results without a call, calls
without results, repeated tool ids, empty and huge contents, non-BMP text, NUL bytes, lone
UTF-16 surrogate halves (JSON's `"\\ud83d"` decodes to one), and `tool_args` that are not the
JSON list an `assistant_full` row needs. Tool arguments as a model writes them: wrong types,
extra fields, missing required fields, values that are not JSON objects, and text that is not
JSON at all.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from strategies import tool_ids

from nbchat.history import ROLES, Row

SURROGATE_HALVES = "\ud83d\ude00\udc00\ud800"
HUGE_SIZES = st.sampled_from([30_000, 120_000])

hostile_texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),  # NUL and non-BMP included
    st.text(alphabet=st.characters(categories=["Cs", "L", "So"]), max_size=20),  # surrogates
    st.text(alphabet=st.sampled_from(f"a\x00🧪\U0010fffd{SURROGATE_HALVES}"), max_size=12),
    st.builds(lambda n, c: c * n, HUGE_SIZES, st.sampled_from(["x", "é", "🧪", "\x00"])),
    st.just(""),
)
names = st.sampled_from(["read_file", "run_shell", "", "no_such_tool", "<b>x</b>"])


@st.composite
def call_lists(draw: st.DrawFn) -> str:
    """An `assistant_full` row's tool_args: valid call lists (ids often repeated) or garbage."""
    if draw(st.booleans()):
        calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": draw(names), "arguments": draw(hostile_texts)},
            }
            for call_id in draw(st.lists(tool_ids.filter(bool), min_size=1, max_size=3))
        ]
        return json.dumps(calls, ensure_ascii=draw(st.booleans()))
    return draw(
        st.sampled_from(
            [
                "",
                "not json",
                "[]",
                "null",
                '"text"',
                '{"x": 1}',
                "[1, 2]",
                '[{"id": 5}]',
                '[{"id": "a", "function": {}}]',
                '[{"id": "a", "function": {"name": 3}}]',
                '[{"id": "a"',
            ]
        )
    )


@st.composite
def hostile_rows(draw: st.DrawFn) -> Row:
    role = draw(st.sampled_from(ROLES))
    content = draw(hostile_texts)
    if role == "assistant_full":
        return Row(role, content, "", "", draw(call_lists()))
    if role == "tool":
        return Row(role, content, draw(tool_ids), draw(names), "")
    # Other roles with stray tool fields: they must not be taken for calls or results.
    stray = draw(st.sampled_from([("", "", ""), ("a", "read_file", "[]"), ("", "", "not json")]))
    return Row(role, content, *stray)


hostile_histories = st.lists(hostile_rows(), max_size=30)

# Tool arguments as the model writes them, for `read_file(path: str, start_line: int | None,
# end_line: int | None)`: each kind of mistake on its own, and mixtures of them.
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
wrong_types = st.fixed_dictionaries(
    {"path": json_values.filter(lambda v: not isinstance(v, str))},
    optional={"start_line": json_values, "end_line": json_values},
)
extra_fields = st.fixed_dictionaries(
    {"path": st.just("a.txt")}, optional={"colour": json_values, "": json_values}
)
missing_required = st.fixed_dictionaries({}, optional={"start_line": st.integers()})
read_file_arguments = st.one_of(
    wrong_types.map(json.dumps),
    extra_fields.map(json.dumps),
    missing_required.map(json.dumps),
    json_values.filter(lambda v: not isinstance(v, dict)).map(json.dumps),
    st.dictionaries(st.text(max_size=10), json_values, max_size=4).map(json.dumps),
    hostile_texts,
)

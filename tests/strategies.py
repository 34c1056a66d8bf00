"""Hypothesis strategies for rows and histories: every role, orphans, repeats, odd text."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from nbchat.compaction.cacheform import TailBudget
from nbchat.history import ROLES, Row

# Short ids so that collisions (duplicated tool ids, results for other calls) are common.
tool_ids = st.sampled_from(["a", "b", "c", "call_1", ""])
texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),  # NUL, non-BMP, surrogates out
    st.just(""),
)


@st.composite
def tool_args_values(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        ids = draw(st.lists(tool_ids.filter(bool), min_size=1, max_size=3))
        calls = [
            {
                "id": i,
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            }
            for i in ids
        ]
        return json.dumps(calls)
    return draw(st.sampled_from(["", "not json", "[]", '{"x": 1}', "[1, 2]"]))


@st.composite
def rows(draw: st.DrawFn) -> Row:
    role = draw(st.sampled_from(ROLES))
    content = draw(texts)
    if role == "assistant_full":
        return Row(role, content, "", "", draw(tool_args_values()))
    if role == "tool":
        return Row(role, content, draw(tool_ids), "read_file", "")
    return Row(role, content)


@st.composite
def tool_turns(draw: st.DrawFn) -> list[Row]:
    """A well-formed user turn: user, then assistant_full/tool blocks, then a reply."""
    turn = [Row("user", draw(texts))]
    for block in range(draw(st.integers(0, 3))):
        ids = [
            f"t{block}_{n}_{draw(st.integers(0, 10**6))}" for n in range(draw(st.integers(1, 2)))
        ]
        calls = [
            {
                "id": i,
                "type": "function",
                "function": {
                    "name": "run_shell",
                    "arguments": json.dumps({"command": draw(texts)}),
                },
            }
            for i in ids
        ]
        if draw(st.booleans()):
            turn.append(Row("analysis", draw(texts)))
        turn.append(Row("assistant_full", draw(texts), "", "", json.dumps(calls)))
        turn.extend(Row("tool", draw(texts), i, "run_shell", "") for i in ids)
    turn.append(Row("assistant", draw(texts)))
    return turn


histories = st.lists(rows(), max_size=25)
well_formed_histories = st.lists(tool_turns(), max_size=6).map(lambda turns: sum(turns, []))
# What a kept tail may hold over the trigger: an aim at or under the fit.
tail_budgets = st.tuples(st.integers(0, 50_000), st.integers(0, 50_000)).map(
    lambda pair: TailBudget(aim=min(pair), fit=max(pair))
)

"""Rows, build_messages, the repair pass and the History container."""

from __future__ import annotations

import json
import logging

import pytest
from factories import analysis, assistant, tool_call, tool_result, user
from hypothesis import given
from strategies import histories, well_formed_histories

from nbchat.history import (
    History,
    Row,
    build_messages,
    estimate_tokens,
    repair_rows,
    to_row,
)


def assert_no_orphans(messages: list[dict[str, object]]) -> None:
    """Every tool message answers a call of the assistant message just before its block,
    and every call is answered before the next non-tool message."""
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending
            pending.discard(str(message["tool_call_id"]))
            continue
        assert not pending, f"unanswered calls {pending}"
        if message["role"] == "assistant" and "tool_calls" in message:
            ids = [call["id"] for call in message["tool_calls"]]  # type: ignore[attr-defined]
            assert ids and len(set(ids)) == len(ids)
            pending = set(ids)
    assert not pending


def test_a_row_unpacks_and_compares_like_the_tuple() -> None:
    row = Row("user", "hi")
    role, content, tool_id, tool_name, tool_args = row
    assert (role, content, tool_id, tool_name, tool_args) == ("user", "hi", "", "", "")
    assert row == ("user", "hi", "", "", "")
    assert hash(row) == hash(("user", "hi", "", "", ""))
    assert to_row(("tool", "out", "c1", "read_file", "")) == tool_result("c1", "out")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            ("user", "hi"),
            "a row has 5 fields (role, content, tool_id, tool_name, tool_args), got 2",
        ),
        (
            ("bot", "hi", "", "", ""),
            "unknown role 'bot'; expected one of user, assistant, "
            "analysis, assistant_full, tool, system, compacted",
        ),
    ],
)
def test_bad_rows_are_refused_with_a_clear_message(value: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        to_row(value)
    assert str(caught.value) == message


def test_estimate_is_the_baseline_len_over_three() -> None:
    assert estimate_tokens(("user", "", "", "", "")) == 1
    assert estimate_tokens(("user", "x" * 30, "", "", "")) == 10
    assert estimate_tokens(("assistant_full", "", "", "", "y" * 9)) == 1 + 3
    assert estimate_tokens(("tool", "z" * 6, "id", "t", "")) == 2


def test_messages_for_a_tool_turn() -> None:
    rows = [
        user("read a.py"),
        analysis("I should read it"),
        tool_call(("c1", "read_file", {"path": "a.py"})),
        tool_result("c1", "print(1)"),
        assistant("It prints 1."),
        Row("system", "Reply stopped."),
    ]
    assert build_messages(rows, "Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "read a.py"},
        {"role": "assistant", "content": None, "tool_calls": json.loads(rows[2].tool_args)},
        {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
        {"role": "assistant", "content": "It prints 1."},
    ]


def test_assistant_full_is_sent_with_its_tool_calls_exactly_as_stored() -> None:
    stored = (
        '[{"id": "c9", "type": "function", '
        '"function": {"name": "f", "arguments": "{\\"a\\": 1}"}, "extra": true}]'
    )
    rows = [
        user("go"),
        Row("assistant_full", "thinking aloud", "", "", stored),
        tool_result("c9", "done", "f"),
    ]
    message = build_messages(rows)[1]
    assert message == {
        "role": "assistant",
        "content": "thinking aloud",
        "tool_calls": json.loads(stored),
    }


def test_compacted_is_folded_into_the_system_prompt_never_mid_conversation() -> None:
    rows = [Row("compacted", "Goal: fix the bug"), user("next"), assistant("ok")]
    messages = build_messages(rows, "Be brief.")
    assert messages[0] == {
        "role": "system",
        "content": "Be brief.\n\n## Summary of the earlier conversation\n\nGoal: fix the bug",
    }
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert build_messages(rows)[0]["content"].startswith("## Summary")


def test_no_system_message_without_a_prompt_or_summary() -> None:
    assert build_messages([user("hi")]) == [{"role": "user", "content": "hi"}]


def test_repair_drops_an_orphan_result_and_says_so() -> None:
    repair = repair_rows([user("hi"), tool_result("ghost", "boo"), assistant("hello")])
    assert repair.rows == [user("hi"), assistant("hello")]
    assert repair.dropped == ["row 1: tool result 'ghost' has no matching call"]


def test_repair_drops_an_unanswered_call_but_keeps_the_answered_one() -> None:
    rows = [
        user("go"),
        tool_call(("a", "read_file", {}), ("b", "read_file", {})),
        tool_result("a", "A"),
        assistant("done"),
    ]
    repair = repair_rows(rows)
    kept_calls = json.loads(repair.rows[1].tool_args)
    assert [call["id"] for call in kept_calls] == ["a"]
    assert repair.rows[2] == tool_result("a", "A")
    assert repair.dropped == ["row 1: tool call 'b' has no result"]


def test_a_turn_whose_tools_still_run_is_repaired_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The meter reads the history while a tool runs or waits for approval: the call has no
    # result yet. It was logged as a repair, which showed in the notebook as stderr.
    running = [
        user("go"),
        tool_call(("a", "run_code", {}), ("b", "read_file", {})),
        tool_result("a", "A"),
    ]
    with caplog.at_level(logging.WARNING, logger="nbchat.history"):
        repair = repair_rows(running)
        assert repair.dropped == ["row 1: tool call 'b' has no result"]
        assert caplog.records == []
        repair_rows([*running, user("next")])  # a call left unanswered is damage: said
    assert [r.getMessage() for r in caplog.records] == [
        "history repaired: row 1: tool call 'b' has no result"
    ]


def test_a_call_with_no_results_keeps_its_text_as_a_plain_reply() -> None:
    rows = [user("go"), tool_call(("a", "read_file", {}), content="Let me look."), user("?")]
    assert repair_rows(rows).rows == [user("go"), assistant("Let me look."), user("?")]


def test_corrupt_tool_args_count_as_no_calls() -> None:
    rows = [user("go"), Row("assistant_full", "", "", "", "{oops"), tool_result("a", "A")]
    repair = repair_rows(rows)
    assert repair.rows == [user("go")]
    assert repair.dropped[0].startswith("row 1: tool calls dropped (tool_args is not valid JSON")


@given(histories)
def test_build_messages_never_emits_an_orphan_for_any_rows(rows: list[Row]) -> None:
    messages = build_messages(rows, "sys")
    assert_no_orphans(messages)
    assert all(m["role"] != "system" for m in messages[1:])


@given(well_formed_histories)
def test_a_well_formed_history_needs_no_repair(rows: list[Row]) -> None:
    repair = repair_rows(rows)
    assert repair.dropped == []
    assert repair.rows == rows


@given(histories)
def test_repair_is_idempotent(rows: list[Row]) -> None:
    once = repair_rows(rows).rows
    assert repair_rows(once).rows == once


def test_history_keeps_a_running_total() -> None:
    history = History([user("x" * 30), assistant("y" * 3)])
    assert history.total_tokens == 11
    history.append(tool_result("c", "z" * 300))
    assert history.total_tokens == 111
    assert len(history) == 3 and history[2].role == "tool"
    history.replace([user("a")])
    assert history.total_tokens == 1
    assert history == [("user", "a", "", "", "")]


def test_reported_usage_plus_rows_added_since() -> None:
    history = History([user("x" * 300)])
    assert history.reported_tokens is None
    history.record_usage(5000)
    assert history.reported_tokens == 5000
    history.append(assistant("y" * 30))
    assert history.reported_tokens == 5010
    history.replace(history.rows[:1])
    assert history.reported_tokens is None


def test_a_count_that_arrives_after_more_rows_is_added_to_by_those_rows_only() -> None:
    history = History([user("x" * 300)])
    history.append(assistant("y" * 30))  # added while the first row's count was on its way
    history.record_usage(5000, rows=1)
    assert history.reported_tokens == 5010


@given(histories)
def test_history_total_equals_a_rescan(rows: list[Row]) -> None:
    history = History()
    for row in rows:
        history.append(row)
    assert history.total_tokens == sum(estimate_tokens(r) for r in rows)


def test_a_lone_surrogate_escaped_in_stored_tool_calls_is_sent_as_valid_text() -> None:
    calls = '[{"id": "a", "type": "function", "function": {"name": "f", "arguments": "\\ud800"}}]'
    messages = build_messages(
        [user("go"), Row("assistant_full", "", "", "", calls), tool_result("a", "ok", "f")]
    )
    arguments = messages[1]["tool_calls"][0]["function"]["arguments"]
    assert arguments == "\ufffd"
    json.dumps(messages, ensure_ascii=False).encode("utf-8")  # would raise on a lone half

"""What the summariser is sent (transcript, prompts, chunks) and how its reply is read."""

from __future__ import annotations

import json

import pytest
from factories import analysis, assistant, tool_call, tool_result, user
from hypothesis import given
from hypothesis import strategies as st

from nbchat.compaction.prompts import (
    RESPONSE_FORMAT,
    SECTION_TITLES,
    SUMMARY_PROMPT,
    UPDATE_PROMPT,
    build_request,
    chunk_blocks,
    parse_reply,
    to_blocks,
    trim_middle,
)
from nbchat.history import Row, estimate_tokens


def test_the_transcript_is_readable_text_without_reasoning_or_summaries() -> None:
    rows = [
        user("find the bug"),
        analysis("thinking hard"),
        tool_call(("c1", "read_file", {"path": "a.py", "lines": [1, 2]}), content="Looking."),
        tool_result("c1", "print(1)"),
        assistant("It prints 1."),
        Row("system", "Stopped by the user."),
        Row("compacted", "old summary"),
    ]
    assert to_blocks(rows) == [
        "[User]: find the bug",
        '[Assistant]: Looking.\n[Assistant tool calls]: read_file(path="a.py", lines=[1, 2])',
        "[Tool result of read_file]: print(1)",
        "[Assistant]: It prints 1.",
        "[Notice]: Stopped by the user.",
    ]


def test_long_tool_outputs_keep_their_head_and_tail() -> None:
    output = "HEAD" + "x" * 10_000 + "TAIL"
    [block] = to_blocks([tool_result("c", output, name="run_shell")])
    assert block.startswith("[Tool result of run_shell]: HEAD")
    assert block.endswith("TAIL")
    assert "[... 8,009 characters omitted ...]" in block
    assert len(block) < 2100


def test_trim_middle_leaves_short_text_alone() -> None:
    assert trim_middle("short", 10) == "short"
    assert (
        trim_middle("a" * 20 + "b" * 10, 15)
        == "a" * 10 + "\n[... 15 characters omitted ...]\n" + "b" * 5
    )


def test_unreadable_tool_calls_are_shown_as_they_are() -> None:
    assert to_blocks([Row("assistant_full", "", "", "", "[oops")]) == [
        "[Assistant tool calls]: [oops"
    ]


@given(st.lists(st.text(min_size=1, max_size=2000), max_size=30), st.integers(300, 3000))
def test_chunks_fit_the_budget_and_keep_every_block_in_order(
    blocks: list[str], budget: int
) -> None:
    chunks = chunk_blocks(blocks, budget=budget)
    assert all(estimate_tokens(chunk) <= budget for chunk in chunks)
    if all(estimate_tokens(block) < budget for block in blocks):
        assert "\n\n".join(chunks) == "\n\n".join(blocks)


def test_a_block_bigger_than_a_chunk_is_trimmed_to_fit() -> None:
    [chunk] = chunk_blocks(["start " + "x" * 9000 + " end"], budget=500)
    assert chunk.startswith("start ")
    assert chunk.endswith(" end")
    assert estimate_tokens(chunk) <= 500


def test_a_request_is_the_system_prompt_and_one_user_message() -> None:
    messages = build_request("[User]: hi", fmt="markdown", focus="tests")
    assert [m["role"] for m in messages] == ["system", "user"]
    content = messages[1]["content"]
    assert content.startswith("<conversation>\n[User]: hi\n</conversation>\n\n" + SUMMARY_PROMPT)
    assert "## Constraints & preferences" in content
    assert content.endswith("Pay particular attention to: tests")


def test_an_update_request_carries_the_previous_summary() -> None:
    content = build_request("[User]: more", previous="## Goal\nold", fmt="json")[1]["content"]
    assert "<previous-summary>\n## Goal\nold\n</previous-summary>\n\n" + UPDATE_PROMPT in content
    assert SUMMARY_PROMPT not in content
    assert '"goal" (a string: what the user wants)' in content


def test_a_custom_instruction_replaces_the_default_prompt() -> None:
    content = build_request("t", fmt="markdown", instruction="Summarise in French.")[1]["content"]
    assert "Summarise in French." in content
    assert SUMMARY_PROMPT not in content


def test_the_schema_asks_for_every_section() -> None:
    schema = RESPONSE_FORMAT["json_schema"]["schema"]
    assert set(schema["required"]) == {
        "goal",
        "constraints",
        "done",
        "in_progress",
        "blocked",
        "decisions",
        "next_steps",
        "critical_context",
    }
    assert schema["additionalProperties"] is False


def test_a_json_reply_is_rendered_as_markdown_sections() -> None:
    reply = {
        "goal": "Fix the parser",
        "constraints": ["no new dependencies"],
        "done": ["found the bug"],
        "in_progress": [],
        "blocked": [],
        "decisions": ["patch in place"],
        "next_steps": ["run tests"],
        "critical_context": ["parser.py line 40"],
    }
    checkpoint = parse_reply("```json\n" + json.dumps(reply) + "\n```")
    assert checkpoint.missing == ()
    assert checkpoint.text == (
        "## Goal\nFix the parser\n\n## Constraints & preferences\n- no new dependencies\n\n"
        "## Progress\n### Done\n- [x] found the bug\n\n### In progress\n(none)\n\n"
        "### Blocked\n(none)\n\n## Key decisions\n- patch in place\n\n## Next steps\n"
        "1. run tests\n\n## Critical context\n- parser.py line 40"
    )


def test_a_json_reply_without_some_keys_says_which_sections_are_missing() -> None:
    checkpoint = parse_reply('{"goal": "x", "next_steps": ["y"]}')
    assert checkpoint.missing == (
        "Constraints & preferences",
        "Progress",
        "Key decisions",
        "Critical context",
    )


@pytest.mark.parametrize("reply", ["", "   ", '{"goal": "", "done": []}', "```json\n{}\n```"])
def test_an_empty_reply_reads_as_empty(reply: str) -> None:
    assert parse_reply(reply).text == ""


def test_a_markdown_reply_is_kept_and_its_headings_checked() -> None:
    text = (
        "## GOAL:\nx\n## Constraints and Preferences\n- y\n# Progress\n"
        "## Key decisions\n## Next Steps\n"
    )
    checkpoint = parse_reply(text)
    assert checkpoint.text == text.strip()  # kept as written: not read as JSON
    assert checkpoint.missing == ("Critical context",)


def test_garbage_lacks_every_section() -> None:
    assert parse_reply("lorem ipsum").missing == SECTION_TITLES
    assert parse_reply("{not json").text == "{not json"


@pytest.mark.parametrize("cut", [40, 70, 100, 140, 180])
def test_a_json_summary_cut_at_its_token_limit_keeps_what_was_written(cut: int) -> None:
    whole = (
        '{"goal": "Fix the \\"parser\\", fast", "constraints": ["no new deps"], '
        '"done": ["read a.py", "ran tests, 3 failed"], "in_progress": ["edit b.py"], '
        '"blocked": [], "decisions": [], "next_steps": ["rerun"], "critical_context": []}'
    )
    checkpoint = parse_reply(whole[:cut])
    # Read as JSON (the object is rendered as sections), not kept as the raw text.
    assert checkpoint.text.startswith('## Goal\nFix the "parser", fast')
    assert parse_reply(whole).text.count("(none)") == 3

"""A summary that copies its instruction or repeats a line is detected and not kept
(`nbchat.compaction.echoes`, read by `prompts.parse_reply` and the writer)."""

from __future__ import annotations

import json

import pytest
from compaction_strategies import FakeSummariser
from factories import assistant, tool_call, tool_result, user

from nbchat.compaction.echoes import find_echoes
from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.facts import FACTS_HEADING
from nbchat.compaction.prompts import (
    SUMMARY_PROMPT,
    SUMMARY_SYSTEM_PROMPT,
    json_format,
    parse_reply,
)
from nbchat.history import Row

INSTRUCTION = "\n".join([SUMMARY_SYSTEM_PROMPT, SUMMARY_PROMPT, json_format()])


def reply(**sections: object) -> str:
    keys = ("goal", "constraints", "done", "in_progress", "blocked", "decisions")
    whole = {key: [] for key in (*keys, "next_steps", "critical_context")}
    return json.dumps(whole | {"goal": "Fix the parser crash in src/parse.py"} | sections)


def test_the_issues_checkpoint_is_not_kept() -> None:
    # What the 0.5B wrote for a 34k-token trace: its "done" items the instruction's own words,
    # its next steps one line three times.
    text = reply(
        done=["Read files and changed", "Run commands and showed"],
        next_steps=["Edit files with sed", "Edit files with sed", "Edit files with sed"],
    )
    checkpoint = parse_reply(text, instruction=INSTRUCTION)
    assert checkpoint.rejected
    assert checkpoint.text == ""
    assert checkpoint.echoes == 4


def test_a_repeated_item_is_dropped_and_the_rest_kept() -> None:
    text = reply(
        done=["Found the off-by-one in tokenize()", "Added a test in tests/test_parse.py"],
        next_steps=["Run pytest tests/test_parse.py", "Run pytest tests/test_parse.py"],
    )
    checkpoint = parse_reply(text, instruction=INSTRUCTION)
    assert not checkpoint.rejected
    assert checkpoint.echoes == 1
    assert checkpoint.text.count("Run pytest tests/test_parse.py") == 1
    assert "Found the off-by-one in tokenize()" in checkpoint.text


def test_a_goal_that_copies_the_instruction_rejects_the_summary() -> None:
    text = reply(goal="What the user wants", done=["Fixed tokenize() in src/parse.py"])
    assert parse_reply(text, instruction=INSTRUCTION).rejected


@pytest.mark.parametrize(
    "item",
    [
        "Read files src/parse.py and changed tokenize()",  # names a path and a call
        "Commands run: pytest showed 3 failures",  # a number
        "Changed the CompactionEngine default",  # an identifier
        "Replaced the recursive descent with a loop",  # words of its own
    ],
)
def test_an_item_that_names_something_is_no_echo(item: str) -> None:
    echoes = find_echoes({"done": [item]}, INSTRUCTION)
    assert echoes.dropped == frozenset()


def test_a_markdown_reply_of_one_line_again_and_again_is_not_kept() -> None:
    text = "## Goal\nFix it\n\n## Progress\n" + "- Checked the code in detail\n" * 15
    checkpoint = parse_reply(text, instruction=INSTRUCTION)
    assert checkpoint.rejected and checkpoint.text == ""


def test_a_markdown_reply_loses_its_repeated_lines_only() -> None:
    text = (
        "## Goal\nFix it\n\n## Done\n- patched a.py\n- patched a.py\n- ran the tests\n\n"
        "## Next\n- (none)\n- (none)"
    )
    checkpoint = parse_reply(text, instruction=INSTRUCTION)
    assert not checkpoint.rejected
    assert checkpoint.text.count("patched a.py") == 1
    assert checkpoint.text.count("(none)") == 2  # the template's, not the model's


def history() -> list[Row]:
    rows: list[Row] = [user("Fix the crash when parsing an empty file")]
    for n in range(12):
        rows += [
            tool_call((f"c{n}", "run_shell", {"command": f"python parse.py case{n}"})),
            tool_result(f"c{n}", f"ValueError: empty input {n}\n" + "x" * 400, name="run_shell"),
            assistant(f"Case {n} fails the same way; looking at tokenize next. " + "y" * 200),
        ]
    return rows + [user("go on"), assistant("ok")]


def test_a_compaction_whose_summary_is_not_kept_keeps_what_code_picked() -> None:
    echoing = reply(done=["Read files and changed", "Run commands and showed"])
    engine = CompactionEngine(1_000, summariser=FakeSummariser(echoing))
    result = engine.compact(history())
    assert result.changed and result.edit.summary_row is not None
    assert result.edit.summary_row.content.startswith(FACTS_HEADING)
    assert "ValueError: empty input 11" in result.edit.summary_row.content
    assert any("was not kept" in warning for warning in result.warnings)


def test_an_update_may_carry_the_previous_summarys_items_forward() -> None:
    # Items of the previous summary are no echo of the update's instruction.
    previous = reply(done=["Looked at the failing cases and the logs"])
    engine = CompactionEngine(1_000, summariser=FakeSummariser(previous))
    first = engine.compact(history())
    second = CompactionEngine(1_000, summariser=FakeSummariser(previous)).compact(
        [*first.rows, *history()[1:]]
    )
    assert second.edit.summary_row is not None
    assert "Looked at the failing cases and the logs" in second.edit.summary_row.content
    assert not any("was not kept" in warning for warning in second.warnings)

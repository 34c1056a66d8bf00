"""Key lines picked by code (`nbchat.compaction.prune`): the assistant's latest statements,
the last changes and the last test result, kept beside the facts and carried forward."""

from __future__ import annotations

from compaction_strategies import FakeSummariser
from factories import assistant, tool_call, tool_result, user

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.prune import (
    STATEMENTS,
    KeyLines,
    key_lines,
    key_lines_of,
    parse_key_lines,
    render_key_lines,
)
from nbchat.history import Row

DIFF = (
    "diff --git a/src/parse.py b/src/parse.py\n--- a/src/parse.py\n+++ b/src/parse.py\n"
    "@@ -10,3 +10,4 @@ def tokenize(text):\n"
    "-    return text.split()\n+    return text.split() or []\n"
)


def said(n: int) -> str:
    return f"Statement {n}: the tokenizer drops the last token when the input ends in a newline."


def test_the_latest_statements_of_substance_come_newest_first() -> None:
    rows = [assistant(said(n)) for n in range(5)] + [assistant("Run it."), assistant(said(1))]
    assert key_lines(rows).statements == tuple(said(n) for n in (1, 4, 3))[:STATEMENTS]


def test_a_diff_a_tool_showed_and_an_editing_call_are_changes() -> None:
    rows = [
        tool_call(("e", "edit_file", {"path": "a.py", "command": "sed -i 's/x/y/' a.py"})),
        tool_result("e", "", name="edit_file"),
        tool_call(("d", "run_shell", {"command": "git diff"})),
        tool_result("d", "On branch main\n" + DIFF, name="run_shell"),
    ]
    changes = key_lines(rows).changes
    assert changes[0].startswith("diff --git a/src/parse.py") and "or []" in changes[0]
    assert changes[1] == "sed -i 's/x/y/' a.py"


def test_a_file_shown_by_a_view_tool_is_no_change() -> None:
    rows = [tool_call(("r", "read_file", {"path": "x.patch"})), tool_result("r", DIFF)]
    assert key_lines(rows).changes == ()


def test_the_last_test_result_names_its_command() -> None:
    rows = [
        tool_call(("a", "run_shell", {"command": "pytest tests/test_parse.py"})),
        tool_result(
            "a", "collected 3 items\n\n======= 1 failed, 2 passed in 0.31s =======", "run_shell"
        ),
        tool_call(("b", "run_shell", {"command": "python -m unittest"})),
        tool_result("b", "...\n------\nRan 5 tests in 0.002s\n\nOK\n", name="run_shell"),
    ]
    assert key_lines(rows).result == "`python -m unittest` → Ran 5 tests in 0.002s, OK"
    assert (
        key_lines(rows[:2]).result == "`pytest tests/test_parse.py` → 1 failed, 2 passed in 0.31s"
    )


def test_names_in_backticks_come_most_mentioned_first_without_paths_or_code_blocks() -> None:
    rows = [
        assistant("`tokenize` drops it; see `src/parse.py` and `Lexer.next`."),
        assistant("So `tokenize` it is.\n```\n`inside_a_fence`\n```\nAlso `x` and `a b`."),
        assistant("`Lexer.next` calls `tokenize`."),
    ]
    assert key_lines(rows).names == ("tokenize", "Lexer.next")


def test_key_lines_read_back_and_carry_through_a_later_compaction() -> None:
    lines = KeyLines(
        (said(2), said(1)), (DIFF.strip(),), "`pytest` → 3 passed in 0.1s", ("tokenize", "Lexer")
    )
    block = render_key_lines(lines)
    assert parse_key_lines("## Goal\nx\n\n" + block) == lines
    earlier = Row("compacted", "## Goal\nx\n\n" + block)
    newer = [assistant(said(7))]
    carried = key_lines_of([earlier, *newer])
    assert carried.statements == (said(7), said(2), said(1))
    assert carried.changes == (DIFF.strip(),)
    assert carried.result == "`pytest` → 3 passed in 0.1s"
    assert carried.names == ("tokenize", "Lexer")


def long_history() -> list[Row]:
    rows: list[Row] = [user("Make the tokenizer keep the last token")]
    for n in range(15):
        rows += [
            tool_call((f"c{n}", "run_shell", {"command": f"pytest -k case{n}"})),
            tool_result(
                f"c{n}", "x" * 600 + f"\n==== 1 failed, {n} passed in 0.2s ====", "run_shell"
            ),
            assistant(said(n)),
        ]
    return rows + [user("and now?"), assistant("Looking.")]


def test_a_long_history_keeps_its_key_lines_beside_the_facts() -> None:
    engine = CompactionEngine(4_000, summariser=FakeSummariser("## Goal\nkeep the token"))
    result = engine.compact(long_history())
    assert result.edit.summary_row is not None
    content = result.edit.summary_row.content
    assert content.index("# Recorded facts") < content.index("# Key lines")
    assert said(14) in content
    assert "`pytest -k case14` → 1 failed, 14 passed in 0.2s" in content


def test_a_short_history_has_no_key_lines() -> None:
    # Key lines pay for themselves only beside many rows; a summary says as much of a few.
    rows = [user("hi"), assistant(said(1)), assistant("z" * 900), user("more"), assistant("ok")]
    engine = CompactionEngine(4_000, tail_messages=1, summariser=FakeSummariser("## Goal\nx"))
    result = engine.compact([*rows, user("x")], force=True)
    assert result.edit.summary_row is not None
    assert "# Key lines" not in result.edit.summary_row.content

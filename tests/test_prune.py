"""The prune layer: old tool outputs become placeholders that say how to get them back."""

from __future__ import annotations

from compaction_strategies import working_histories
from factories import assistant, tool_call, tool_result, user
from hypothesis import given
from hypothesis import strategies as st
from strategies import histories

from nbchat.compaction.prune import (
    apply_replacements,
    find_prunable,
    is_placeholder,
    protected_start,
    to_placeholder,
)
from nbchat.history import Row, build_messages, estimate_tokens

OUTPUT = "line of output\n" * 200  # 3,000 characters, 1,000 tokens


def estimates(rows: list[Row]) -> list[int]:
    return [estimate_tokens(row) for row in rows]


def test_a_placeholder_names_the_tool_its_size_and_how_to_read_it_back() -> None:
    placeholder = to_placeholder(tool_result("call_7", OUTPUT, name="run_shell"))
    assert placeholder.content == (
        "[Archived output of run_shell: 3,000 characters, ~1,000 tokens. "
        'Read it back with read_archived_output(tool_id="call_7").]'
    )
    assert (placeholder.role, placeholder.tool_id, placeholder.tool_name) == (
        "tool",
        "call_7",
        "run_shell",
    )
    assert is_placeholder(placeholder)
    assert not is_placeholder(tool_result("call_7", OUTPUT))


def test_a_placeholder_keeps_the_newest_error_lines_of_a_run() -> None:
    output = OUTPUT + "".join(f"ValueError: attempt {n}\n" for n in range(5))
    placeholder = to_placeholder(tool_result("c", output, name="run_shell"))
    assert placeholder.content.endswith(
        "\nError lines in it:\nValueError: attempt 2\nValueError: attempt 3\nValueError: attempt 4"
    )


def test_a_file_view_placeholder_lists_no_error_lines() -> None:
    placeholder = to_placeholder(tool_result("c", OUTPUT + "KeyError: x", name="read_file"))
    assert "Error lines" not in placeholder.content


def test_the_protected_window_holds_the_last_rows_and_enough_recent_output() -> None:
    rows = [user("go")]
    for n in range(6):
        rows += [tool_call((f"c{n}", "run_shell", {})), tool_result(f"c{n}", OUTPUT)]
    sizes = estimates(rows)
    assert protected_start(rows, sizes, keep_rows=2, keep_tokens=0) == len(rows) - 2
    assert protected_start(rows, sizes, keep_rows=2, keep_tokens=1500) == len(rows) - 3
    assert protected_start(rows, sizes, keep_rows=2, keep_tokens=10**6) == 0


def test_only_old_big_tool_outputs_with_an_id_are_pruned() -> None:
    rows = [
        user("go"),
        tool_call(("big", "run_shell", {}), ("small", "run_shell", {})),
        tool_result("big", OUTPUT),
        tool_result("small", "ok"),
        Row("tool", OUTPUT, "", "run_shell", ""),
        to_placeholder(tool_result("old", OUTPUT)),
        tool_call(("recent", "run_shell", {})),
        tool_result("recent", OUTPUT),
    ]
    replacements = find_prunable(rows, estimates(rows), protect_from=6)
    assert list(replacements) == [2]
    assert apply_replacements(rows, replacements)[2] == to_placeholder(rows[2])
    assert apply_replacements(rows, replacements)[3:] == rows[3:]


@given(st.one_of(histories, working_histories), st.integers(0, 40))
def test_pruning_keeps_every_call_paired_and_a_second_prune_finds_nothing(
    rows: list[Row], protect_from: int
) -> None:
    replacements = find_prunable(rows, estimates(rows), protect_from=protect_from)
    pruned = apply_replacements(rows, replacements)
    before, after = build_messages(rows), build_messages(pruned)
    assert [m["role"] for m in after] == [m["role"] for m in before]
    assert [m.get("tool_call_id") for m in after] == [m.get("tool_call_id") for m in before]
    assert all(index < protect_from for index in replacements)
    assert sum(estimates(pruned)) <= sum(estimates(rows))
    assert find_prunable(pruned, estimates(pruned), protect_from=protect_from) == {}


def test_plain_conversation_rows_are_never_pruned() -> None:
    rows = [user(OUTPUT), assistant(OUTPUT), Row("analysis", OUTPUT)]
    assert find_prunable(rows, estimates(rows), protect_from=3) == {}

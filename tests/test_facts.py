"""Facts kept by code: files, failures, the user's words and the notebook's variables and cells
survive any summariser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from compaction_strategies import FakeSummariser
from factories import tool_call, tool_result, user
from hypothesis import given
from hypothesis import strategies as st

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.facts import (
    FAILURES_TOKENS,
    FIRST_MESSAGE_TOKENS,
    Facts,
    collect_facts,
    facts_of,
    file_operations,
    parse_facts,
    render_facts,
    strip_facts,
)
from nbchat.compaction.findings import NOTEBOOK_TOOLS
from nbchat.history import Row, to_row
from nbchat.tools.context import ToolContext
from nbchat.tools.notebook import notebook_tools
from nbchat.ui.attach import attachment_from, with_attachments

TRACES = Path(__file__).resolve().parent / "data" / "traces"
TRACE_NAMES = sorted(p.name.removesuffix(".truth.json") for p in TRACES.glob("*.truth.json"))
assert len(TRACE_NAMES) == 5, f"the real traces are missing from {TRACES}"


def test_outputs_of_file_views_are_not_read_as_failures() -> None:
    rows = [
        tool_call(("a", "read_file", {"path": "a.py"})),
        tool_result("a", "ValueError: documented in a docstring", name="read_file"),
        tool_call(("b", "run_shell", {"command": "python a.py"})),
        tool_result("b", "ValueError: real", name="run_shell"),
    ]
    assert collect_facts(rows).failures == (("run_shell", "ValueError: real"),)


@pytest.mark.parametrize(
    ("name", "arguments", "read", "modified"),
    [
        ("read_file", {"path": "a.py"}, ["a.py"], []),
        ("search_files", {"pattern": "x", "paths": ["a.py", "b/"]}, ["a.py", "b/"], []),
        ("list_files", {"path": "src"}, ["src"], []),
        # The workspace root is no file to remember (it was listed as "." under Files read).
        ("list_files", {"path": "."}, [], []),
        ("list_files", {"paths": ["./", " . ", "docs"]}, ["docs"], []),
        ("write_file", {"path": "new.py", "content": "x"}, [], ["new.py"]),
        ("edit_file", {"file": "a.py"}, [], ["a.py"]),
        ("edit_file", {"file_path": "a.py", "filename": "b.py"}, [], ["a.py", "b.py"]),
        ("run_shell", {"path": "run.py", "command": "python run.py"}, [], []),
        ("read_file", {"path": 3, "paths": [None, "", "x\ny"]}, [], []),
    ],
)
def test_tool_names_say_whether_a_path_was_read_or_modified(
    name: str, arguments: dict[str, Any], read: list[str], modified: list[str]
) -> None:
    assert file_operations(tool_call(("c", name, arguments))) == (read, modified)


def test_malformed_tool_calls_name_no_files() -> None:
    assert file_operations(Row("assistant_full", "", "", "", "not json")) == ([], [])
    bad_arguments = [{"id": "c", "function": {"name": "read_file", "arguments": "{oops"}}]
    assert file_operations(Row("assistant_full", "", "", "", json.dumps(bad_arguments))) == ([], [])


def test_user_messages_keep_the_first_and_then_the_newest_without_repeats() -> None:
    facts = collect_facts([user("the task"), user("again"), user("later"), user("again")])
    assert facts.first_message == "the task"
    assert facts.user_messages == ("again", "later", "again")
    block = render_facts(facts)
    assert block.count("> again") == 1
    assert block.index("> again") < block.index("> later")


def test_the_first_message_keeps_its_head_when_it_is_long() -> None:
    task = "Title line\n" + "detail " * 1000
    block = render_facts(collect_facts([user(task)]))
    kept = parse_facts(block).first_message
    assert kept.startswith("Title line\ndetail")
    assert kept.endswith(" …")
    assert len(kept) <= FIRST_MESSAGE_TOKENS * 3


def test_failures_keep_the_newest_and_the_oldest_within_their_budget() -> None:
    rows = [
        tool_result(f"c{n}", f"ValueError: failure number {n} " + "x" * 100, name="run_shell")
        for n in range(100)
    ]
    kept = parse_facts(render_facts(collect_facts(rows))).failures
    numbers = [int(headline.split()[3]) for _, headline in kept]
    oldest_start = next(i for i, n in enumerate(numbers) if n < 50)
    newest, oldest = numbers[:oldest_start], numbers[oldest_start:]
    assert newest == list(range(99, 99 - len(newest), -1))
    assert oldest == list(range(len(oldest) - 1, -1, -1))  # the task's first errors, 0 last
    assert len(oldest) >= 1
    assert sum(len(f"- {h} (in run_shell)") // 3 for _, h in kept) <= FAILURES_TOKENS
    assert len(kept) < 100


@given(st.lists(st.sampled_from(["user", "tool", "assistant_full"]), max_size=8), st.data())
def test_rendered_facts_read_back_to_the_same_block(roles: list[str], data: st.DataObject) -> None:
    rows = []
    for n, role in enumerate(roles):
        text = data.draw(st.text(max_size=80))
        if role == "user":
            rows.append(user(text))
        elif role == "tool":
            rows.append(tool_result(f"c{n}", "KeyError: " + text, name=data.draw(st.text())))
        else:
            rows.append(tool_call((f"c{n}", "edit_file", {"path": text})))
    block = render_facts(collect_facts(rows))
    assert render_facts(parse_facts(block)) == block


def test_facts_carry_forward_through_a_previous_summary() -> None:
    first = [user("build the parser"), tool_call(("a", "read_file", {"path": "p.py"}))]
    earlier = Row("compacted", "## Goal\nparser\n\n" + render_facts(collect_facts(first)))
    later = [
        user("now the tests"),
        tool_call(("b", "edit_file", {"path": "t.py"})),
        tool_result("b", "FAILED t.py::x - AssertionError", name="edit_file"),
    ]
    facts = facts_of([earlier, *later])
    assert facts.first_message == "build the parser"
    assert facts.user_messages == ("now the tests",)
    assert (facts.files_read, facts.files_modified) == (("p.py",), ("t.py",))
    assert facts.failures == (("edit_file", "FAILED t.py::x - AssertionError"),)
    assert strip_facts(earlier.content) == "## Goal\nparser"


def test_a_model_summary_without_facts_has_none() -> None:
    assert parse_facts("## Goal\nsomething") == Facts()
    assert strip_facts("## Goal\nsomething") == "## Goal\nsomething"


def load_trace(name: str) -> tuple[list[Row], dict[str, Any]]:
    rows = [to_row(row) for row in json.loads((TRACES / f"{name}.json").read_text())]
    return rows, json.loads((TRACES / f"{name}.truth.json").read_text())


def evidence(rows: list[Row]) -> str:
    return "\n".join(row.content + "\n" + row.tool_args for row in rows)


@pytest.mark.parametrize("name", TRACE_NAMES)
def test_a_garbage_summary_still_keeps_every_path_instruction_and_error(name: str) -> None:
    rows, truth = load_trace(name)
    out = CompactionEngine(10_000, summariser=FakeSummariser("lorem ipsum")).compact_history(rows)
    compacted, tail = out[0].content, out[1:]
    summarised = rows[: len(rows) - len(tail)]
    assert out[0].role == "compacted"
    assert compacted.startswith("lorem ipsum\n\n# Recorded facts")
    for instruction in truth["user_instructions"]:
        assert instruction in compacted
    # What code can know from the summarised rows must be in the compacted row; the rest
    # appears only in the kept tail, verbatim (e.g. requests' final `git diff`, which lists
    # build/ files that no tool call named).
    known = facts_of(summarised)
    headlines = [headline for _, headline in known.failures]
    for path in [*truth["files_read"], *truth["files_modified"]]:
        if path in (*known.files_read, *known.files_modified):
            assert path in compacted, path
        else:
            assert path in evidence(tail), path
    for line in truth["error_lines_strict"]:
        assert line in compacted if line in headlines else line in evidence(tail), line


class Shell:
    """IPython's shell as the notebook tools and `/attach` read it: a user namespace."""

    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {
            "In": ["", "import math", "scores = [3, 1, 2]\nscores.sort()", "totals = {}"],
            "Out": {},
            "scores": [1, 2, 3],
            "totals": {"a": 1},
        }


def notebook_turn(shell: Shell, call_id: str, tool: str, **arguments: object) -> list[Row]:
    """A call to one of the real notebook tools and its real answer."""
    tools = {each.name: each for each in notebook_tools(shell)}
    answer = str(tools[tool].invoke(arguments, ToolContext(Path.cwd())))
    return [tool_call((call_id, tool, arguments)), tool_result(call_id, answer, name=tool)]


def padding(label: str) -> list[Row]:
    return [user(f"{label}: " + "more about it " * 150), Row("assistant", "noted " * 400)]


def test_the_notebook_tools_named_in_the_facts_are_the_real_ones() -> None:
    assert {tool.name for tool in notebook_tools(Shell())} == NOTEBOOK_TOOLS


def test_variables_and_cells_referred_to_are_facts() -> None:
    shell = Shell()
    attached = with_attachments("plot it", [attachment_from("var totals", shell)])
    rows = [
        user("look at my data"),
        *notebook_turn(shell, "nb1", "describe_variable", name="scores"),
        *notebook_turn(shell, "nb2", "read_cell", number=2),
        *notebook_turn(shell, "nb3", "describe_variable", name="missing"),
        user(attached),
        user(with_attachments("and this", [attachment_from("cell 1", shell)])),
    ]
    facts = collect_facts(rows)
    assert facts.variables == (("scores", "list, length 3"), ("totals", "dict"))
    assert facts.cells == (("2", "scores = [3, 1, 2]"), ("1", "import math"))
    block = render_facts(facts)
    assert "## Notebook variables\n- scores: list, length 3\n- totals: dict" in block
    assert "## Notebook cells\n- In [2]: scores = [3, 1, 2]\n- In [1]: import math" in block
    assert parse_facts(block) == facts


def test_a_listing_only_refreshes_variables_already_referred_to() -> None:
    shell = Shell()
    rows = [*notebook_turn(shell, "nb1", "describe_variable", name="scores")]
    shell.user_ns["scores"] = [1, 2, 3, 4]
    rows += notebook_turn(shell, "nb2", "list_notebook_variables")
    assert collect_facts(rows).variables == (("scores", "list, length 4"),)


def test_notebook_facts_survive_two_compactions() -> None:
    shell = Shell()
    engine = CompactionEngine(2_000, summariser=FakeSummariser("lorem ipsum"))
    history = [
        user("look at my data"),
        *notebook_turn(shell, "nb1", "describe_variable", name="scores"),
        *notebook_turn(shell, "nb2", "read_cell", number=2),
        *padding("first"),
        *padding("second"),
    ]
    once = engine.compact_history(history)
    assert once[0].role == "compacted" and "- scores: list, length 3" in once[0].content
    later = [
        user(with_attachments("and this?", [attachment_from("var totals", shell)])),
        *padding("third"),
        *padding("fourth"),
    ]
    twice = engine.compact_history([*once, *later])
    assert twice[0].role == "compacted" and twice[0] != once[0]
    summary = twice[0].content
    facts = parse_facts(summary)
    assert facts.variables == (("scores", "list, length 3"), ("totals", "dict"))
    assert facts.cells == (("2", "scores = [3, 1, 2]"),)
    assert summary.count("## Notebook variables") == 1


def test_the_workspace_root_is_not_a_file_read() -> None:
    rows = [tool_call(("a", "list_files", {"path": "."}), ("b", "read_file", {"path": "a.py"}))]
    assert collect_facts(rows).files_read == ("a.py",)
    assert "- .\n" not in render_facts(collect_facts(rows)) + "\n"

"""The eval's scoring (`bench/eval_scoring.py`) on hand-made outcomes: ungrounded claims, empty
answers after a tool round, and notebook tool calls, with no model and no server.

`bench/` modules import their siblings by name, as they do when run as scripts, so `bench/` is
put on `sys.path` first.
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nbchat.conversation.events import RowSaved
from nbchat.history import Row, ToolCall
from nbchat.tools import default_registry
from nbchat.tools.notebook import notebook_tools

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def scoring(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("eval_scoring")


@pytest.fixture
def cases(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("eval_cases")


def claims_of(
    scoring: ModuleType, case: Any, answer: str, *, read: tuple[str, ...] = ()
) -> list[str]:
    """The claims of `answer` to `case` in a workspace at /work/space, after tools that
    returned `read`."""
    outcome = scoring.Outcome(case, answer=answer, tool_results=list(read))
    return list(outcome.claims(scoring.ENTRIES, Path("/work/space")))


NOTES = "Project notes\nThe review meeting is on Thursday at 10:00 in room B12.\n"


def test_an_answer_from_what_the_tool_returned_is_grounded(
    scoring: ModuleType, cases: ModuleType
) -> None:
    case = cases.tool(
        "When is the meeting? It's in notes.txt.", {"read_file": {"path": "notes.txt"}}
    )
    answer = "According to `notes.txt`, the review meeting is on Thursday at 10:00 in room B12."
    assert claims_of(scoring, case, answer, read=(NOTES,)) == []


def test_an_invented_file_is_an_ungrounded_claim(scoring: ModuleType, cases: ModuleType) -> None:
    case = cases.tool("Where is greet defined?", {"search_files": {"pattern": "greet"}})
    found = "src/app.py:1: def greet(name):"
    assert claims_of(scoring, case, "It is defined in greet.py.", read=(found,)) == [
        "file 'greet.py'"
    ]
    assert claims_of(scoring, case, "It is defined in src/app.py.", read=(found,)) == []
    # An absolute path inside the workspace names the entry the tool result named.
    assert claims_of(scoring, case, "See /work/space/src/app.py.", read=(found,)) == []


def test_an_invented_version_is_an_ungrounded_claim(scoring: ModuleType, cases: ModuleType) -> None:
    case = cases.tool("Which Python do I have?", {"run_shell": {"command": "python"}})
    refused = "The user's policy refused running run_shell."
    assert claims_of(scoring, case, "You have Python 3.8.5 installed.", read=(refused,)) == [
        "version '3.8.5'"
    ]
    assert claims_of(scoring, case, "You have Python 3.11.7.", read=("Python 3.11.7",)) == []


def test_a_hidden_fact_quoted_without_a_read_is_ungrounded_in_any_case(
    scoring: ModuleType, cases: ModuleType
) -> None:
    plain = cases.plain("Where is the review meeting?")
    assert claims_of(scoring, plain, "It is in room B12.") == ["fact 'B12'"]
    read = cases.tool(
        "Where is the meeting? Check notes.txt.", {"read_file": {"path": "notes.txt"}}
    )
    assert claims_of(scoring, read, "It is in room B12.") == ["fact 'B12'"]


def test_the_same_fact_after_a_read_is_grounded(scoring: ModuleType, cases: ModuleType) -> None:
    read = cases.tool(
        "Where is the meeting? Check notes.txt.", {"read_file": {"path": "notes.txt"}}
    )
    assert claims_of(scoring, read, "It is in room B12.", read=(NOTES,)) == []
    # ... also when the read was in an earlier message of the same session.
    follow_up = cases.plain("And where?", before=("Read notes.txt.",))
    assert claims_of(scoring, follow_up, "In room B12.", read=(NOTES,)) == []


def test_what_the_user_said_grounds_a_claim(scoring: ModuleType, cases: ModuleType) -> None:
    case = cases.tool("Is pandas 2.1.4 pinned in requirements.txt?", {"read_file": {}})
    assert claims_of(scoring, case, "requirements.txt pins pandas 2.1.4.") == []
    # The user named app.py; the answer names the existing entry src/app.py: not invented.
    named = cases.tool("Show me app.py.", {"read_file": {"path": "src/app.py"}})
    assert claims_of(scoring, named, "Here is src/app.py.") == []
    assert claims_of(scoring, named, "Here is lib/app.py.") == ["file 'lib/app.py'"]


def test_file_names_leave_out_calls_urls_and_words(scoring: ModuleType) -> None:
    answer = (
        "Use `response.json()` or math.log(x); see https://docs.python.org/x.html, "
        "and/or read **data.csv**, ./src/ and ~/notes.md."
    )
    assert scoring.file_names(answer) == ["data.csv", "./src/", "~/notes.md"]


def test_version_numbers_start_only_at_a_digit_run(scoring: ModuleType) -> None:
    assert scoring.version_numbers("pandas==2.1.4, flask 3.0 and v1.22.333.4") == [
        "2.1.4",
        "3.0",
        "1.22.333",
    ]


def test_the_detectors_take_linear_time_on_hostile_text(scoring: ModuleType) -> None:
    # A backtracking pattern takes quadratic time on long runs of digits or name characters:
    # 8x the text would take 64x as long. The CPU time of 8x the text is compared with that of
    # 1x, in the same process (the best of three each).
    def took(size: int) -> float:
        text = ("1" * size + " ") + ("a" * size + " ") + ("1." * size) + ("a/" * size)
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            scoring.file_names(text)
            scoring.version_numbers(text)
            best = min(best, time.process_time() - started)
        return best

    assert took(400_000) / max(took(50_000), 1e-4) < 24


def saved(role: str, content: str, call: ToolCall | None = None) -> RowSaved:
    tool_args = json.dumps([call.to_wire()]) if call is not None else ""
    return RowSaved(Row(role, content, "c1" if role == "tool" else "", "", tool_args))


def test_empty_answers_after_a_tool_round_are_counted(
    scoring: ModuleType, cases: ModuleType
) -> None:
    record = importlib.import_module("default_model_eval").record
    outcome = scoring.Outcome(cases.tool("Read notes.txt.", {"read_file": {"path": "notes.txt"}}))
    assert not outcome.empty_after_tool  # no tool ran
    record(outcome, saved("assistant_full", "", ToolCall("c1", "read_file", "{}")))
    record(outcome, saved("tool", NOTES))
    assert outcome.empty_after_tool  # a tool ran; nothing after its result
    record(outcome, saved("assistant", '{"name": "read_file", "arguments": {}}'))
    assert outcome.empty_after_tool  # a call written as text is no answer
    record(outcome, saved("assistant", "The meeting is on Thursday."))
    assert not outcome.empty_after_tool
    assert outcome.tool_results == [NOTES]
    assert outcome.answer == "The meeting is on Thursday."


@pytest.mark.parametrize(
    ("arguments", "right"),
    [
        ({"number": 3}, True),
        ({"number": "3"}, False),  # the schema wants a number: the call would be refused
        ({"number": 13}, False),
        ({"number": 4}, False),
    ],
)
def test_a_read_cell_call_names_its_cell_exactly(
    scoring: ModuleType,
    cases: ModuleType,
    shell: object,
    arguments: dict[str, Any],
    right: bool,
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    registry = default_registry()
    for tool in notebook_tools(InteractiveShell.instance()):  # the `shell` fixture's shell
        registry.register(tool)
    case = cases.tool("What did cell 3 do?", {"read_cell": {"number": "3"}})
    outcome = scoring.Outcome(case, calls=[("read_cell", json.dumps(arguments))])
    assert outcome.is_right_call(registry, Path("/work/space")) is right


def test_a_describe_variable_call_holds_the_name(
    scoring: ModuleType, cases: ModuleType, shell: object
) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    registry = default_registry()
    for tool in notebook_tools(InteractiveShell.instance()):
        registry.register(tool)
    case = cases.tool("What is in sales?", {"describe_variable": {"name": "sales"}})

    def right(arguments: dict[str, Any]) -> bool:
        outcome = scoring.Outcome(case, calls=[("describe_variable", json.dumps(arguments))])
        return bool(outcome.is_right_call(registry, Path("/work/space")))

    assert right({"name": "sales"})
    assert not right({"name": "big"})
    assert not right({})  # the schema requires a name


def test_a_folder_tool_names_the_workspace_unless_the_case_takes_any_path(
    scoring: ModuleType, cases: ModuleType
) -> None:
    registry = default_registry()

    def right(calls: dict[str, Any], arguments: dict[str, Any]) -> bool:
        case = cases.tool("Where did the server log its errors?", calls)
        outcome = scoring.Outcome(case, calls=[("search_files", json.dumps(arguments))])
        return bool(outcome.is_right_call(registry, Path("/work/space")))

    workspace = {"search_files": {"pattern": "ERROR"}}
    assert right(workspace, {"pattern": "ERROR"})
    assert right(workspace, {"pattern": "ERROR", "path": "./"})
    assert not right(workspace, {"pattern": "ERROR", "path": "logs"})
    anywhere = {"search_files": {"pattern": "ERROR", "path": cases.ANY_PATH}}
    assert right(anywhere, {"pattern": "ERROR", "path": "logs"})
    assert right(anywhere, {"pattern": "ERROR"})
    assert not right(anywhere, {"pattern": "WARNING", "path": "logs"})


def test_reading_the_file_that_defines_the_searched_name_is_a_right_first_call(
    scoring: ModuleType, cases: ModuleType
) -> None:
    # Where a search for "slugify" leads: the file with `def slugify`, read at once. Another
    # file, a search for words that are no name, or a path outside the workspace is not.
    registry = default_registry()

    def counted(pattern: str, path: str) -> tuple[bool, bool]:
        case = cases.tool("where's slugify defined", {"search_files": {"pattern": pattern}})
        outcome = scoring.Outcome(case, calls=[("read_file", json.dumps({"path": path}))])
        workspace = Path("/work/space")
        return outcome.is_right_call(registry, workspace), outcome.reads_definition(
            registry, workspace
        )

    assert counted("slugify", "src/utils.py") == (True, True)
    assert counted("slugify", "/work/space/src/utils.py") == (True, True)
    assert counted("slugify", "src/app.py") == (False, False)
    assert counted("slugify", "/elsewhere/src/utils.py") == (False, False)
    assert counted("import math", "src/utils.py") == (False, False)
    unlooked = scoring.Outcome(cases.tool("where's slugify defined", {"search_files": {}}))
    assert not unlooked.is_right_call(registry, Path("/work/space"))
    assert not unlooked.reads_definition(registry, Path("/work/space"))  # no call at all
    # Counted apart only where the rule alone makes it right: not where the case lists the read.
    both = cases.tool(
        "where's slugify defined",
        {"search_files": {"pattern": "slugify"}, "read_file": {"path": "src/utils.py"}},
    )
    read = scoring.Outcome(both, calls=[("read_file", json.dumps({"path": "src/utils.py"}))])
    assert read.is_right_call(registry, Path("/work/space"))
    assert read.reads_definition(registry, Path("/work/space"))
    assert not read.right_by_definition(registry, Path("/work/space"))
    alone = scoring.Outcome(
        cases.tool("where's slugify defined", {"search_files": {"pattern": "slugify"}}),
        calls=[("read_file", json.dumps({"path": "src/utils.py"}))],
    )
    assert alone.right_by_definition(registry, Path("/work/space"))
    assert scoring.defines("async def fetch(url):\n", "fetch")
    assert not scoring.defines("x = slugify(y)\n# def slugify\n", "slugify")


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "read_file", "arguments": {"path": "a"}}',
        "{\"name': 'read_file', 'arguments': {'path': 'src/app.py'}}",
        "{'name': 'read_file', 'parameters': {}}",
        '{"name: "read_file", "arguments": {"path": "src/app.py"}}',
        '{"name**: "list_notebook_variables", "arguments": {}}',
        '{"name, arguments": {"path": "todo.md"}}',
        "<tool_call>",
    ],
)
def test_a_call_written_as_text_is_fake_call_json_in_any_quotes(
    scoring: ModuleType, cases: ModuleType, text: str
) -> None:
    outcome = scoring.Outcome(cases.plain("hi"), answer=text, texts=[text])
    assert outcome.fake_json


def test_json_that_is_no_call_is_not_fake_call_json(scoring: ModuleType, cases: ModuleType) -> None:
    text = "{'name': 'Ada', 'age': 36}"
    assert not scoring.Outcome(cases.plain("hi"), answer=text, texts=[text]).fake_json

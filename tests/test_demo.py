"""nbchat.notebook.demo: the notebooks' demo session is realistic, consistent and the same every
time."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from nbchat.history import Row, ToolCall, repair_rows
from nbchat.notebook import demo
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolContext, ToolExecutor, default_registry

# The project as it was when the demo session started: the files its first tool calls read.
PROJECT_BEFORE = {
    "README.md": demo.README_BEFORE,
    "dates/__init__.py": demo.PROJECT["dates/__init__.py"],
    "dates/parser.py": demo.PARSER_BUGGY,
    "tests/test_parser.py": demo.TESTS,
}


def all_rows() -> list[Row]:
    before, after = demo.demo_rows()
    return before + after


def comparable(store: Store, session_id: str) -> dict[str, Any]:
    """Everything stored for the session except what changes between runs (ids and times)."""
    varying = {"id", "session_id", "created"}
    return {
        "rows": [(s.row, s.archived) for s in store.load_full(session_id)],
        "requests": [
            {k: v for k, v in r.items() if k not in varying}
            for r in store.list_requests(session_id)
        ],
        "compactions": [
            {k: v for k, v in c.items() if k not in varying}
            for c in store.list_compactions(session_id)
        ],
    }


def test_the_demo_session_has_forty_rows_eleven_of_them_archived_by_one_summary(
    store: Store,
) -> None:
    session_id = demo.add_demo_session(store)
    info = store.get_session(session_id)
    assert (info.title, info.model) == (demo.DEMO_TITLE, demo.DEMO_MODEL)
    assert (info.total_rows, info.active_rows) == (40, 29)
    (record,) = store.list_compactions(session_id)
    assert record["kind"] == "summary"
    assert record["rows_replaced"] == 11
    assert record["tokens_after"] < record["tokens_before"]


def test_the_demo_records_no_timing_and_no_summariser_usage_it_did_not_measure(
    store: Store,
) -> None:
    # Nothing in the demo was timed and no server wrote its summary: a figure here would be
    # invented, and a notebook would show it as a measurement.
    session_id = demo.add_demo_session(store)
    (record,) = store.list_compactions(session_id)
    assert (record["duration"], record["prompt_tokens"], record["completion_tokens"]) == (0, 0, 0)
    assert {r["duration"] for r in store.list_requests(session_id)} == {0.0}


def test_the_demo_session_is_stored_the_same_way_every_time(tmp_path: Path) -> None:
    first, second = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    assert comparable(first, demo.add_demo_session(first)) == comparable(
        second, demo.add_demo_session(second)
    )


def test_the_active_rows_are_the_scripted_summary_then_the_tail_and_the_second_task(
    store: Store,
) -> None:
    session_id = demo.add_demo_session(store)
    before, after = demo.demo_rows()
    active = store.load_active(session_id)
    assert active[0].role == "compacted"
    assert active[0].content.startswith("## Goal\n" + demo.SUMMARY["goal"])
    assert "# Recorded facts" in active[0].content
    assert "- dates/parser.py" in active[0].content
    tail_start = before.index(Row("user", "Yes, go ahead, and keep the public API unchanged."))
    assert active[1:] == before[tail_start:] + after


def test_each_model_reply_is_recorded_as_one_request_with_usage(store: Store) -> None:
    session_id = demo.add_demo_session(store)
    requests = store.list_requests(session_id)
    replies = [r for r in all_rows() if r.role in ("assistant", "assistant_full")]
    assert len(requests) == len(replies) == 19
    assert all(r["model"] == demo.DEMO_MODEL and r["completion_tokens"] > 0 for r in requests)
    prompts = [r["prompt_tokens"] for r in requests]
    assert prompts[9] < prompts[8]  # the compaction came between the 9th and 10th request
    assert prompts[:9] == sorted(prompts[:9]) and prompts[9:] == sorted(prompts[9:])


def test_every_tool_call_in_the_demo_has_its_result_and_nothing_is_repaired() -> None:
    repair = repair_rows(all_rows())
    assert repair.dropped == []
    assert repair.rows == all_rows()


def test_the_recorded_tool_results_are_what_the_tools_really_return(tmp_path: Path) -> None:
    # Replaying every call except run_shell on the project as it was reproduces each result,
    # and leaves the project as the scratch workspace holds it.
    workspace = tmp_path / "project"
    for name, text in PROJECT_BEFORE.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text, encoding="utf-8")
    executor = ToolExecutor(default_registry(), workspace=workspace, policy="allow")
    calls = {}
    for row in all_rows():
        if row.role == "assistant_full":
            (wire,) = json.loads(row.tool_args)
            calls[wire["id"]] = ToolCall(wire["id"], **wire["function"])
        elif row.role == "tool" and row.tool_name != "run_shell":
            assert executor.execute(calls[row.tool_id]).content == row.content
    for name, text in demo.PROJECT.items():
        assert (workspace / name).read_text(encoding="utf-8") == text


def test_the_scratch_workspace_is_a_new_folder_holding_the_finished_project() -> None:
    first, second = demo.scratch_workspace(), demo.scratch_workspace()
    assert first != second
    found = {p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file()}
    assert found == set(demo.PROJECT)
    assert (first / "dates/parser.py").read_text(encoding="utf-8") == demo.PARSER


def test_demo_store_is_a_new_empty_store_each_time() -> None:
    first, second = demo.demo_store(), demo.demo_store()
    assert first.path != second.path
    assert first.list_sessions() == []


def test_count_files_counts_the_workspace_files_by_extension(tmp_path: Path) -> None:
    for name in ("a.py", "b/c.py", "README.md", "Makefile"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x", encoding="utf-8")
    assert demo.count_files(ToolContext(tmp_path)) == "(none): 1\n.md: 1\n.py: 2"


def test_count_files_is_a_tool_the_model_calls_without_arguments() -> None:
    registry = default_registry()
    tool = registry.register(demo.count_files)
    assert tool.parameters["properties"] == {}
    assert tool.dangerous is False


@pytest.mark.parametrize("answer", [True, False])
def test_the_scripted_approver_answers_every_request_and_remembers_them(answer: bool) -> None:
    approver = demo.ScriptedApprover(approve=answer)
    requests = [ApprovalRequest("run_shell", {"command": "ls"}), ApprovalRequest("write_file", {})]
    threads = [threading.Thread(target=lambda r=r: approver(r)) for r in requests]
    for thread in threads:
        thread.start()
        thread.join()
    assert approver(ApprovalRequest("edit_file", {})) is answer
    assert approver.asked == ["run_shell", "write_file", "edit_file"]
    assert repr(approver) == (
        f"ScriptedApprover(approve={answer}, asked=['run_shell', 'write_file', 'edit_file'])"
    )


def test_the_scripted_summariser_answers_its_text_and_reports_no_usage() -> None:
    summariser = demo.ScriptedSummariser("## Goal\nx")
    messages = [{"role": "user", "content": "a" * 30}]
    reply = summariser.summarise(messages, max_tokens=10, response_format=None, stop=None)
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("## Goal\nx", 0, 0)


def test_outline_shows_roles_and_tool_names_but_no_text() -> None:
    rows = all_rows()[:5] + [Row("system", "a notice"), Row("compacted", "summary")]
    assert demo.outline(rows) == [
        "user",
        "assistant_full: list_files",
        "tool: list_files",
        "assistant_full: run_shell",
        "tool: run_shell",
        "system",
        "compacted",
    ]


def test_outline_names_every_call_of_a_reply_with_several() -> None:
    calls = [
        {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        for n, name in enumerate(["read_file", "list_files"])
    ]
    assert demo.outline([("assistant_full", "", "", "", json.dumps(calls))]) == [
        "assistant_full: read_file, list_files"
    ]


def test_tool_results_lists_each_tool_result_with_its_tool() -> None:
    rows = all_rows()[:5]
    assert demo.tool_results(rows) == [
        ("list_files", "dates/__init__.py\ndates/parser.py\ntests/test_parser.py"),
        ("run_shell", demo.PYTEST_WEEK_53),
    ]


def test_the_demo_leaves_no_scratch_folders_behind(tmp_path: Path) -> None:
    script = (
        "from nbchat.notebook import demo\n"
        "print(demo.demo_store().path.parent)\n"
        "print(demo.scratch_workspace())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    folders = [Path(line) for line in done.stdout.split()]
    assert len(folders) == 2
    assert [folder for folder in folders if folder.exists()] == []

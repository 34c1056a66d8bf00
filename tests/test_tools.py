"""nbchat.tools: the registry and its decorators, the built-in tools, and the executor
(arguments, approval policy, workspace confinement, time limits, Stop, output cap, environment)."""

from __future__ import annotations

import json
import os
import select
import threading
from pathlib import Path
from typing import Any

import pytest

from nbchat.errors import ConfigError, ToolError
from nbchat.history import ToolCall
from nbchat.stopping import StopSignal
from nbchat.tools import (
    ApprovalRequest,
    Tool,
    ToolContext,
    ToolExecutor,
    ToolOutcome,
    ToolRegistry,
    default_registry,
    tool,
)
from nbchat.tools.builtins import SHELL_CUT
from nbchat.tools.context import cap_output, safe_environment
from nbchat.tools.executor import is_failed_result


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


def executor_for(workspace: Path, **options: Any) -> ToolExecutor:
    options.setdefault("policy", "allow")
    registry = options.pop("registry", None) or default_registry()
    return ToolExecutor(registry, workspace=workspace, **options)


def call(name: str, arguments: dict[str, Any] | str = "{}") -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall("call_1", name, raw)


def run(executor: ToolExecutor, name: str, **arguments: Any) -> ToolOutcome:
    return executor.execute(call(name, arguments))


def has_exited(pid: int) -> bool:
    """Wait (up to 5 s) for any process, not only a child, to exit: a pidfd turns readable."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([handle], [], [], 5)
        return bool(readable)
    finally:
        os.close(handle)


# The registry and its decorators


def test_register_works_as_a_bare_decorator_with_arguments_and_as_a_call() -> None:
    registry = ToolRegistry()

    @registry.register
    def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    @registry.register(name="erase", dangerous=True, description="Erase things.")
    def erase_everything() -> None: ...

    def add(a: int, b: int = 1) -> int:
        return a + b

    added = registry.register(add)
    assert registry.names() == ["shout", "erase", "add"]
    assert isinstance(shout, Tool)
    assert shout("hi") == "HI"
    assert added(2) == 3
    erase = registry.get("erase")
    assert erase is not None
    assert (erase.dangerous, erase.description) == (True, "Erase things.")
    assert registry.schemas()[0] == {
        "type": "function",
        "function": {
            "name": "shout",
            "description": "Say it louder.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
        },
    }


def test_the_tool_decorator_makes_standalone_tools_or_registers_them() -> None:
    registry = ToolRegistry()

    @tool
    def alone(x: int) -> int:
        return x

    @tool(registry=registry, dangerous=True)
    def registered(path: str) -> str:
        return path

    assert isinstance(alone, Tool)
    assert alone.name == "alone"
    assert "alone" not in registry
    assert registry.get("registered") is registered
    assert registered.dangerous is True
    registry.register(alone)
    assert registry.names() == ["registered", "alone"]


def test_registering_a_name_again_replaces_the_tool_and_copies_are_independent() -> None:
    registry = default_registry()
    copy = registry.copy()

    @registry.register(name="read_file")
    def my_reader(path: str) -> str:
        return "mine"

    registry.unregister("run_shell")
    assert registry.names() == [
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "search_files",
    ]
    assert len(copy) == 6
    assert copy.get("read_file") is not registry.get("read_file")


def test_unregistering_an_unknown_tool_names_the_registered_ones() -> None:
    registry = ToolRegistry()
    registry.register(lambda_free_tool)
    with pytest.raises(ToolError) as caught:
        registry.unregister("nope")
    assert str(caught.value) == "No tool named 'nope' to remove. Registered: lambda_free_tool."


def lambda_free_tool() -> str:
    return "ok"


def test_a_tool_name_the_api_would_reject_is_refused_at_registration() -> None:
    with pytest.raises(ToolError) as caught:
        Tool.from_function(lambda: None)
    assert str(caught.value) == (
        "Invalid tool name '<lambda>': use 1-64 letters, digits, '_' or '-' (pass name=... to "
        "choose one)."
    )


def test_the_default_registry_marks_writers_and_the_shell_dangerous() -> None:
    registry = default_registry()
    dangerous = {name for name in registry.names() if registry.get(name).dangerous}  # type: ignore[union-attr]
    assert dangerous == {"write_file", "edit_file", "run_shell"}


# Workspace confinement and the file tools


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "/etc/passwd"])
def test_paths_outside_the_workspace_are_refused(workspace: Path, path: str) -> None:
    (workspace.parent / "secret.txt").write_text("top secret")
    outcome = run(executor_for(workspace), "read_file", path=path)
    assert outcome.ok is False
    assert outcome.content == (
        f"Refused: {path!r} is outside the workspace {workspace}. Use a path inside it."
    )


def test_a_symlink_pointing_out_of_the_workspace_is_refused(workspace: Path) -> None:
    (workspace.parent / "secret.txt").write_text("top secret")
    (workspace / "link.txt").symlink_to(workspace.parent / "secret.txt")
    (workspace / "linkdir").symlink_to(workspace.parent)
    executor = executor_for(workspace)
    for name, arguments in [
        ("read_file", {"path": "link.txt"}),
        ("write_file", {"path": "linkdir/new.txt", "content": "x"}),
    ]:
        outcome = run(executor, name, **arguments)
        shown = arguments["path"]
        assert outcome.content == (
            f"Refused: {shown!r} is outside the workspace {workspace}. Use a path inside it."
        )
    assert not (workspace.parent / "new.txt").exists()
    assert run(executor, "list_files").content == (
        "link.txt (link to outside the workspace; not readable)\n"
        "linkdir (link to outside the workspace; not readable)"
    )
    assert run(executor, "list_files", pattern="**/*.txt").content == (
        "link.txt (link to outside the workspace; not readable)"
    )


def test_an_absolute_path_inside_the_workspace_is_allowed(workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\n")
    outcome = run(executor_for(workspace), "read_file", path=str(workspace / "a.txt"))
    assert (outcome.ok, outcome.content) == (True, "hello\n")


def test_read_file_returns_a_line_range(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    executor = executor_for(workspace)
    assert run(executor, "read_file", path="a.txt", start_line=2, end_line=3).content == (
        "two\nthree\n"
    )
    assert run(executor, "read_file", path="a.txt", start_line=4).content == "four\n"
    assert run(executor, "read_file", path="a.txt", start_line=9).content == (
        "'a.txt' has 4 lines, so lines 9-4 are empty. Ask for a range inside the file."
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "missing.txt",
            "No file 'missing.txt' in the workspace. Use list_files or search_files to find it.",
        ),
        ("sub", "'sub' is a folder; use list_files to see what is in it."),
        ("blob.bin", "'blob.bin' looks like a binary file (4 bytes); not shown."),
    ],
)
def test_read_file_says_why_it_cannot_read(workspace: Path, path: str, message: str) -> None:
    (workspace / "sub").mkdir()
    (workspace / "blob.bin").write_bytes(b"a\0bc")
    outcome = run(executor_for(workspace), "read_file", path=path)
    assert (outcome.ok, outcome.content, outcome.error) == (False, message, message)


def test_write_file_creates_parent_folders(workspace: Path) -> None:
    outcome = run(executor_for(workspace), "write_file", path="new/dir/a.txt", content="hé")
    assert (outcome.ok, outcome.content) == (True, "Wrote 2 characters to new/dir/a.txt.")
    assert (workspace / "new/dir/a.txt").read_text(encoding="utf-8") == "hé"


@pytest.mark.parametrize(
    ("text", "ok", "content", "after"),
    [
        ("alpha beta", True, "Replaced 1 occurrence in a.txt.", "alpha gamma"),
        (
            "alpha alpha",
            False,
            "The text to replace was not found in 'a.txt' (0 matches). Read the file and copy "
            "the exact text, including whitespace and indentation.",
            "alpha alpha",
        ),
        (
            "beta beta",
            False,
            "The text to replace occurs 2 times in 'a.txt'; include more of the surrounding "
            "lines so that it matches exactly once.",
            "beta beta",
        ),
    ],
)
def test_edit_file_replaces_exactly_one_match(
    workspace: Path, text: str, ok: bool, content: str, after: str
) -> None:
    (workspace / "a.txt").write_text(text)
    outcome = run(executor_for(workspace), "edit_file", path="a.txt", old="beta", new="gamma")
    assert (outcome.ok, outcome.content) == (ok, content)
    assert (workspace / "a.txt").read_text() == after


def test_list_files_lists_folders_with_a_slash_and_follows_patterns(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "m.py").write_text("")
    (workspace / "notes.md").write_text("")
    executor = executor_for(workspace)
    assert run(executor, "list_files").content == "notes.md\nsrc/"
    assert run(executor, "list_files", pattern="**/*.py").content == "src/m.py"
    assert run(executor, "list_files", path="src", pattern="*.txt").content == (
        "No entries match '*.txt' in 'src'."
    )


def test_search_files_finds_regex_and_plain_text_and_respects_the_glob(workspace: Path) -> None:
    (workspace / "a.py").write_text("def f():\n    return g(1)\n")
    (workspace / "b.txt").write_text("call g(1) here\n")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "c.py").write_text("def hidden(): ...\n")
    executor = executor_for(workspace)
    assert run(executor, "search_files", pattern=r"def \w+").content == "a.py:1: def f():"
    assert run(executor, "search_files", pattern="g(1").content == (
        "a.py:2:     return g(1)\nb.txt:1: call g(1) here"
    )
    assert run(executor, "search_files", pattern="g", glob="*.txt").content == (
        "b.txt:1: call g(1) here"
    )
    assert run(executor, "search_files", pattern="zzz").content == "No matches for 'zzz' in '.'."


@pytest.mark.parametrize("pattern", ["release_notes", "releaseNotes", "Release-Notes"])
def test_words_joined_one_way_find_a_line_that_joins_them_another_and_say_so(
    workspace: Path, pattern: str
) -> None:
    (workspace / "todo.md").write_text("- write the release notes\n- ReleaseNotes.md\n")
    (workspace / "x.txt").write_text("releases noted\n")
    assert run(executor_for(workspace), "search_files", pattern=pattern).content == (
        f"No line holds {pattern!r} as written; these hold its words apart or joined another "
        "way:\ntodo.md:1: - write the release notes\ntodo.md:2: - ReleaseNotes.md"
    )


def test_a_short_form_that_found_nothing_finds_its_long_form(workspace: Path) -> None:
    (workspace / "server.log").write_text("refused (database at 10.0.0.7:5432)\n")
    assert run(executor_for(workspace), "search_files", pattern="db").content == (
        "No line holds 'db' as written; these hold 'database' for 'db':\n"
        "server.log:1: refused (database at 10.0.0.7:5432)"
    )


@pytest.mark.parametrize(
    ("pattern", "words"),
    [("domain renewal", "domain, renew"), ("the Renewed_Domains", "renew, domain")],
)
def test_words_that_found_nothing_together_find_a_line_holding_one_of_them(
    workspace: Path, pattern: str, words: str
) -> None:
    (workspace / "todo.md").write_text("- buy milk\n- renew the domain name\n- domains: 2\n")
    (workspace / "notes.txt").write_text("The subdomain is ours; renewing costs 10.\n")
    assert run(executor_for(workspace), "search_files", pattern=pattern).content == (
        f"No line holds {pattern!r} as written; these hold one of its words ({words}):\n"
        "notes.txt:1: The subdomain is ours; renewing costs 10.\n"
        "todo.md:2: - renew the domain name\ntodo.md:3: - domains: 2"
    )
    # Only common words, or words found together: no such fallback.
    executor = executor_for(workspace)
    assert run(executor, "search_files", pattern="for the").content == (
        "No matches for 'for the' in '.'."
    )


def test_one_word_or_regex_syntax_is_not_loosened(workspace: Path) -> None:
    (workspace / "todo.md").write_text("release notes\n")
    executor = executor_for(workspace)
    for pattern in ("releasenotes", "release_(notes)", "release_notes$"):
        found = run(executor, "search_files", pattern=pattern).content
        assert found == f"No matches for {pattern!r} in '.'."


def test_search_files_caps_its_matches(workspace: Path) -> None:
    (workspace / "many.txt").write_text("hit\n" * 500)
    lines = run(executor_for(workspace), "search_files", pattern="hit").content.splitlines()
    assert len(lines) == 201
    assert lines[-1] == (
        "[... 200 of more than 200 matches shown; narrow the search: a more specific pattern, "
        "a path, or a glob such as '*.py']"
    )


# The shell


def test_run_shell_reports_the_exit_code_and_combined_output(workspace: Path) -> None:
    outcome = run(executor_for(workspace), "run_shell", command="pwd; echo oops >&2; exit 3")
    assert (outcome.ok, outcome.content) == (True, f"exit code: 3\n{workspace}\noops\n")


@pytest.mark.timeout(30)
def test_a_timeout_kills_the_command_and_its_grandchild(workspace: Path) -> None:
    executor = executor_for(workspace, timeout=0.5)
    outcome = run(executor, "run_shell", command="sleep 100 & echo $!; echo $$; wait")
    assert outcome.ok is False
    head, _, output = outcome.content.partition("\n")
    assert head == (
        "Timed out after 0.5 s: the command and everything it started were killed. Output so far:"
    )
    pids = [int(pid) for pid in output.split()]
    assert len(pids) == 2
    assert [has_exited(pid) for pid in pids] == [True, True]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("signal_kind", [StopSignal, threading.Event])
def test_stop_kills_a_running_command_and_its_children(
    workspace: Path, signal_kind: type[threading.Event]
) -> None:
    os.mkfifo(workspace / "started")
    stop = signal_kind()

    def stop_once_started() -> None:
        with open(workspace / "started") as fifo:  # blocks until the command opens it
            fifo.read()
        stop.set()

    stopper = threading.Thread(target=stop_once_started)
    stopper.start()
    command = "sleep 100 & echo $! > pids; echo $$ >> pids; echo go > started; wait"
    outcome = executor_for(workspace).execute(call("run_shell", {"command": command}), stop=stop)
    stopper.join()
    assert outcome.ok is False
    assert outcome.content == (
        "Stopped by the user: the command and everything it started were killed. "
        "Output so far:\n(no output)"
    )
    pids = [int(pid) for pid in (workspace / "pids").read_text().split()]
    assert [has_exited(pid) for pid in pids] == [True, True]


def test_a_model_timeout_above_the_configured_one_is_capped(workspace: Path) -> None:
    outcome = run(executor_for(workspace, timeout=0.3), "run_shell", command="sleep 5", timeout=99)
    assert outcome.content.startswith("Timed out after 0.3 s:")


def test_huge_shell_output_keeps_the_head_and_the_tail_and_says_how_to_see_the_rest(
    workspace: Path,
) -> None:
    executor = executor_for(workspace, output_limit=1000)
    outcome = run(executor, "run_shell", command="seq 1 200000")
    produced = "".join(f"{n}\n" for n in range(1, 200001))
    half = (1000 - len(SHELL_CUT) - 1 - 100) // 2  # shell.py keeps room for its marker
    cut = len(produced) - 2 * half
    assert outcome.content == (
        "exit code: 0\n"
        + produced[:half]
        + f"\n[... {cut:,} characters cut ...]\n"
        + produced[-half:]
        + "\n[the middle of the output was cut to fit the tool output limit: filter it (grep, "
        "head, tail) or redirect it to a file and read that with read_file]"
    )
    assert len(outcome.content) <= 1000


def test_the_shell_sees_only_allow_listed_variables_whatever_a_secret_is_called(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = ("DATABASE_URL", "GH_PAT", "MY_PASSWD", "DB_PASS", "MYSQL_PWD", "SOME_CREDENTIALS")
    for name in (*secrets, "MY_API_KEY", "PLAIN_SETTING", "ALLOWED_TOKEN", "AWS_REGION"):
        monkeypatch.setenv(name, "hidden-value")
    monkeypatch.setenv("LC_TIME", "C")
    executor = executor_for(workspace, env_allow=["allowed_token", "AWS_*"])
    shown = run(executor, "run_shell", command="env").content
    names = {line.split("=")[0] for line in shown.splitlines()[1:]}
    assert {"ALLOWED_TOKEN", "AWS_REGION", "PATH", "LC_TIME", "PWD"} <= names
    assert not names & {*secrets, "MY_API_KEY", "PLAIN_SETTING"}
    assert shown.count("hidden-value") == 2  # ALLOWED_TOKEN and AWS_REGION, nothing else


def test_safe_environment_keeps_only_the_base_names_and_the_allowed_ones() -> None:
    environ = {"A_KEY": "1", "DATABASE_URL": "2", "LC_ALL": "C", "HOME": "/h", "PATH": "/bin"}
    assert safe_environment(environ) == {"LC_ALL": "C", "HOME": "/h", "PATH": "/bin"}
    assert safe_environment(environ, allow=["a_key"]) == {
        "A_KEY": "1",
        "LC_ALL": "C",
        "HOME": "/h",
        "PATH": "/bin",
    }


@pytest.mark.parametrize(
    ("allow", "passed"),
    [
        (["AWS_*"], {"AWS_REGION"}),
        (["aws_*", "aws_secret_access_key"], {"AWS_REGION", "AWS_SECRET_ACCESS_KEY"}),
        (["*"], {"AWS_REGION", "PLAIN"}),
        (["*TOKEN*"], set()),
        (["github_token"], {"GITHUB_TOKEN"}),
    ],
    ids=["pattern", "exact name", "everything", "a pattern of the word", "named"],
)
def test_a_secret_looking_name_passes_only_when_allowed_by_its_exact_name(
    allow: list[str], passed: set[str]
) -> None:
    environ = {
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AKIA",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "AWS_SESSION_TOKEN": "t0k3n",
        "GITHUB_TOKEN": "ghp",
        "DB_PASSWORD": "pw",
        "PLAIN": "1",
    }
    assert set(safe_environment(environ, allow=allow)) == passed


def test_the_shell_gets_no_secret_through_an_allow_pattern(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hidden-value")
    executor = executor_for(workspace, env_allow=["AWS_*"])
    shown = run(executor, "run_shell", command="env").content
    assert "AWS_REGION=eu-west-1" in shown.splitlines()
    assert "hidden-value" not in shown


# The executor: bad calls become readable outcomes


READ_FILE_PARAMETERS = (
    "Parameters: path (string, required), start_line (integer or null), end_line (integer or null)."
)


@pytest.mark.parametrize(
    ("name", "arguments", "content"),
    [
        (
            "delete_all",
            "{}",
            "Unknown tool 'delete_all'. Known tools: read_file, write_file, edit_file, "
            "list_files, search_files, run_shell. Call one of these.",
        ),
        (
            "read_file",
            '{"path": ',
            "The arguments for 'read_file' are not valid JSON (Expecting value: line 1 column 9 "
            f"(char 8)). {READ_FILE_PARAMETERS}",
        ),
        (
            "read_file",
            '["a.txt"]',
            "The arguments for 'read_file' must be a JSON object, got list. "
            f"{READ_FILE_PARAMETERS}",
        ),
        (
            "read_file",
            '{"path": 3}',
            "Invalid arguments for 'read_file': path: expected a string, got 3. "
            f"{READ_FILE_PARAMETERS}",
        ),
        (
            "read_file",
            '{"start_line": 1}',
            "Invalid arguments for 'read_file': missing required argument 'path'. "
            f"{READ_FILE_PARAMETERS}",
        ),
        (
            "read_file",
            '{"path": "a.txt", "colour": "red"}',
            "Invalid arguments for 'read_file': unexpected argument 'colour'. "
            f"{READ_FILE_PARAMETERS}",
        ),
        (
            "read_file",
            "null",
            "The arguments for 'read_file' must be a JSON object, got null. "
            f"{READ_FILE_PARAMETERS}",
        ),
        (
            "read_file",
            '{"path": "a.txt", "start_line": "3"}',
            "Invalid arguments for 'read_file': start_line: expected an integer or null, got "
            f'"3". {READ_FILE_PARAMETERS}',
        ),
        (
            "read_file",
            '{"path": "a.txt", "end_line": true}',
            "Invalid arguments for 'read_file': end_line: expected an integer or null, got "
            f"true. {READ_FILE_PARAMETERS}",
        ),
        (
            "read_file",
            '{"start_line": 1.5, "colour": "red"}',
            "Invalid arguments for 'read_file': missing required argument 'path'; start_line: "
            "expected an integer or null, got 1.5; unexpected argument 'colour'. "
            f"{READ_FILE_PARAMETERS}",
        ),
    ],
)
def test_bad_calls_become_readable_outcomes(
    workspace: Path, name: str, arguments: str, content: str
) -> None:
    outcome = executor_for(workspace).execute(call(name, arguments))
    assert (outcome.ok, outcome.content, outcome.error) == (False, content, content[:200])
    assert is_failed_result(outcome.content)  # stored rows carry no flag: read back as failed


def test_empty_arguments_count_as_an_empty_object(workspace: Path) -> None:
    assert executor_for(workspace).execute(call("list_files", "")).ok is True


def test_a_ten_megabyte_argument_is_handled_without_trouble(workspace: Path) -> None:
    registry = ToolRegistry()

    @registry.register
    def measure(text: str) -> int:
        return len(text)

    executor = executor_for(workspace, registry=registry, output_limit=500)
    huge = "x" * 10_000_000
    assert run(executor, "measure", text=huge).content == "10000000"
    wrong = run(executor, "measure", text=[huge])
    assert wrong.content == (
        "Invalid arguments for 'measure': text: expected a string, got "
        f'["{"x" * 58}.... Parameters: text (string, required).'
    )
    garbage = executor.execute(call("measure", '{"text": "' + huge))
    assert garbage.ok is False
    assert len(garbage.content) < 600


def test_a_tool_that_raises_reports_the_exception_and_a_traceback_tail(workspace: Path) -> None:
    registry = ToolRegistry()

    @registry.register
    def divide(a: int, b: int) -> float:
        return a / b

    outcome = run(executor_for(workspace, registry=registry), "divide", a=1, b=0)
    first, second, *trace = outcome.content.splitlines()
    assert (outcome.ok, first) == (False, "'divide' failed: ZeroDivisionError: division by zero")
    assert is_failed_result(outcome.content)
    assert outcome.error == first
    assert second == "Traceback (last lines):"
    assert trace[-1].startswith("  test_tools.py:")
    assert trace[-1].endswith(" in divide: return a / b")


def test_a_python_tool_that_overruns_is_abandoned_with_a_message(workspace: Path) -> None:
    release = threading.Event()
    registry = ToolRegistry()

    @registry.register
    def hang() -> str:
        release.wait(30)
        return "late"

    executor = executor_for(workspace, registry=registry, timeout=0.1)
    executor.wait_grace = 0.05
    outcome = run(executor, "hang")
    release.set()
    assert (outcome.ok, outcome.content) == (
        False,
        "'hang' did not finish within 0.1 s and was abandoned (it may still be running). "
        "Ask for less at once, or raise NBCHAT_TOOL_TIMEOUT.",
    )
    assert is_failed_result(outcome.content)


@pytest.mark.parametrize(
    ("content", "failed"),
    [
        ("Not inserted: there is no notebook page. The code is shown to the user …", True),
        ("Not edited: cell 3 changed while the edit waited for approval", True),
        ("Not done: you declined run_shell. Say what to do instead.", True),
        ("Error in run 3: KeyError: 'x'", True),
        # A result that only says something failed, or starts like a failure, is a result.
        ("Not a failure: the notes say so.", False),
        ("'pandas' failed to import in the log:\nImportError", False),
        ("The arguments were fine.", False),
    ],
)
def test_a_stored_result_reads_back_as_failed_by_its_opening(content: str, failed: bool) -> None:
    assert is_failed_result(content) is failed


def test_tools_that_return_values_other_than_text_are_shown_as_json(workspace: Path) -> None:
    registry = ToolRegistry()
    registry.register(lambda_free_tool)

    @registry.register
    def numbers() -> dict[str, list[int]]:
        return {"n": [1, 2]}

    @registry.register
    def nothing() -> None:
        return None

    executor = executor_for(workspace, registry=registry)
    assert [run(executor, name).content for name in ("numbers", "nothing")] == [
        '{"n": [1, 2]}',
        "(no output)",
    ]


def test_a_tool_can_ask_for_its_context_and_optional_arguments_default_to_none(
    workspace: Path,
) -> None:
    registry = ToolRegistry()

    @registry.register
    def where(ctx: ToolContext, suffix: str | None) -> str:
        return f"{ctx.workspace}{suffix or ''}"

    assert "ctx" not in where.parameters["properties"]
    assert run(executor_for(workspace, registry=registry), "where").content == str(workspace)


def test_long_output_of_any_tool_keeps_head_and_tail(workspace: Path) -> None:
    registry = ToolRegistry()

    @registry.register
    def long() -> str:
        return "a" * 50 + "b" * 100_000 + "c" * 50

    outcome = run(executor_for(workspace, registry=registry, output_limit=300), "long")
    advice = "one tool result holds at most 300 characters; call it again asking for less"

    def marker(count: int) -> str:
        return f"\n[... {count:,} characters cut: {advice}]\n"

    text = "a" * 50 + "b" * 100_000 + "c" * 50
    room = 300 - len(marker(len(text)))  # the marker counts: the whole fits the limit
    head, tail = room // 2, room - room // 2
    assert outcome.content == text[:head] + marker(len(text) - room) + text[-tail:]
    assert len(outcome.content) <= 300
    assert outcome.ok is True


def test_cap_output_leaves_short_text_alone() -> None:
    assert cap_output("short", 5) == "short"
    assert (
        cap_output("a" * 30 + "b" * 30, 40) == "a" * 5 + "\n[... 49 characters cut ...]\n" + "b" * 6
    )


# Approval policy


DENIED = (
    "Refused: the user's tool policy denies 'write_file' (it changes files or runs commands). "
    "To allow it, set NBCHAT_TOOL_POLICY=allow, or NBCHAT_TOOL_POLICY=ask to approve each call "
    "in the widget."
)
NO_APPROVER = (
    "Refused: 'write_file' needs approval and nothing here can ask for it (policy 'ask' without "
    "an approver). Set NBCHAT_TOOL_POLICY=allow to let it run."
)
NOT_APPROVED = (
    "Refused: the user did not approve 'write_file'. Ask the user how to proceed or do without it."
)


@pytest.mark.parametrize(
    ("policy", "answer", "content"),
    [
        ("allow", None, "Wrote 1 character to a.txt."),
        ("deny", None, DENIED),
        ("ask", None, NO_APPROVER),
        ("ask", True, "Wrote 1 character to a.txt."),
        ("ask", False, NOT_APPROVED),
    ],
)
def test_the_policy_decides_whether_a_dangerous_tool_runs(
    workspace: Path, policy: Any, answer: bool | None, content: str
) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return bool(answer)

    executor = executor_for(workspace, policy=policy, approver=None if answer is None else approver)
    outcome = run(executor, "write_file", path="a.txt", content="x")
    assert (outcome.ok, outcome.content) == (content.startswith("Wrote"), content)
    assert (workspace / "a.txt").exists() is outcome.ok
    assert len(asked) == (policy == "ask" and answer is not None)


def test_the_approver_is_told_which_call_wants_to_run(workspace: Path) -> None:
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    executor = executor_for(workspace, policy="ask", approver=approver)
    run(executor, "run_shell", command="echo " + "x" * 100)
    (request,) = asked
    assert (request.call_id, request.name) == ("call_1", "run_shell")
    assert request.reason == (
        "run_shell can change files or run commands, and the tool policy is 'ask'."
    )
    assert request.arguments == {"command": "echo " + "x" * 100}
    assert request.summary() == "run_shell(command='echo " + "x" * 71 + "...)"
    assert request.description.startswith("Run a shell command in the workspace folder")


def test_safe_tools_run_even_when_the_policy_denies(workspace: Path) -> None:
    (workspace / "a.txt").write_text("fine")
    outcome = run(executor_for(workspace, policy="deny"), "read_file", path="a.txt")
    assert (outcome.ok, outcome.content) == (True, "fine")


def test_an_approver_that_fails_is_a_refusal(workspace: Path) -> None:
    def approver(request: ApprovalRequest) -> bool:
        raise RuntimeError("widget gone")

    outcome = run(
        executor_for(workspace, policy="ask", approver=approver), "write_file", path="a", content=""
    )
    assert outcome.content == (
        "Refused: asking for approval of 'write_file' failed (RuntimeError: widget gone)."
    )


@pytest.mark.timeout(30)
def test_stop_ends_the_wait_for_approval_as_a_refusal(workspace: Path) -> None:
    stop = StopSignal()
    never_answered = threading.Event()

    def approver(request: ApprovalRequest) -> bool:
        stop.set()  # the user presses Stop while the card is shown
        never_answered.wait(30)
        return True

    executor = executor_for(workspace, policy="ask", approver=approver)
    outcome = executor.execute(call("write_file", {"path": "a", "content": ""}), stop=stop)
    never_answered.set()
    assert outcome.content == "Refused: Stop was pressed while 'write_file' waited for approval."
    assert not (workspace / "a").exists()


def test_an_unknown_policy_is_a_config_error(workspace: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        ToolExecutor(ToolRegistry(), workspace=workspace, policy="maybe")  # type: ignore[arg-type]
    assert str(caught.value) == "Tool policy must be one of ask, allow, deny; got 'maybe'."


def test_the_executor_takes_its_limits_from_settings(make_settings: Any) -> None:
    settings = make_settings(tool_policy="deny", tool_timeout=5, tool_env_allow=("A_KEY",))
    executor = ToolExecutor.from_settings(settings, default_registry())
    assert (executor.policy, executor.timeout, executor.env_allow) == ("deny", 5, ("A_KEY",))
    assert executor.workspace == settings.workspace


def test_a_tool_context_refuses_paths_outside_its_workspace(workspace: Path) -> None:
    context = ToolContext(workspace)
    assert context.resolve("a/../b.txt") == workspace / "b.txt"
    with pytest.raises(ToolError) as caught:
        context.resolve("..")
    assert str(caught.value) == (
        f"Refused: '..' is outside the workspace {workspace}. Use a path inside it."
    )


def test_a_search_glob_selects_by_name_at_any_depth_or_by_path_with_double_stars(
    workspace: Path,
) -> None:
    # "src/**/*.py" found nothing: `PurePosixPath.match` reads `**` as one folder (issue 19).
    (workspace / "src" / "deep").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("# TODO: farewell\n")
    (workspace / "src" / "deep" / "b.py").write_text("# TODO: deeper\n")
    (workspace / "notes.md").write_text("# TODO: notes\n")
    executor = executor_for(workspace)

    def found(glob: str) -> str:
        return run(executor, "search_files", pattern="TODO", glob=glob).content

    both = "src/app.py:1: # TODO: farewell\nsrc/deep/b.py:1: # TODO: deeper"
    assert found("src/**/*.py") == both
    assert found("**/*.py") == both
    assert found("*.py") == both  # a name, at any depth
    assert found("src/*.py") == "src/app.py:1: # TODO: farewell"
    assert found("*.md") == "notes.md:1: # TODO: notes"

"""The built-in tools cannot be turned against the user (issue 11): slow patterns, symlink
swaps, globs out of the workspace, daemons that outlive run_shell, huge and sparse files,
secrets in the environment, named pipes. Real files, real child processes, no timing asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from test_tools import executor_for

from nbchat.errors import ToolError
from nbchat.history import ToolCall
from nbchat.stopping import StopSignal
from nbchat.tools import ToolContext, ToolExecutor, ToolOutcome
from nbchat.tools.builtins import list_files, read_file, search_files, write_file
from nbchat.tools.shell import run_command

GIB = 1024**3
MIB = 1024**2


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


def run(executor: ToolExecutor, name: str, *, stop: Any = None, **arguments: Any) -> ToolOutcome:

    return executor.execute(ToolCall("call_1", name, json.dumps(arguments)), stop=stop)


class Ticker:
    """A second Python thread counting while the main thread runs a tool."""

    def __init__(self, on_first_tick: Any = None) -> None:
        self.ticks = 0
        self.done = threading.Event()
        self.on_first_tick = on_first_tick
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.done.wait(0.001):
            self.ticks += 1
            if self.ticks == 1 and self.on_first_tick is not None:
                self.on_first_tick()

    def __enter__(self) -> Ticker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


# 1. A pattern cannot freeze the kernel, and every built-in tool keeps the time limit


CATASTROPHIC = "(a|aa)+$"  # exponential backtracking in `re` and in `regex` alike


def test_the_issues_pattern_over_27_x_answers_at_once(workspace: Path) -> None:
    (workspace / "x.txt").write_text("x" * 27 + "!\n")
    outcome = run(executor_for(workspace, timeout=30), "search_files", pattern="(x+x+)+y")
    assert (outcome.ok, outcome.content) == (True, "No matches for '(x+x+)+y' in '.'.")


@pytest.mark.timeout(60)
def test_a_catastrophic_pattern_is_given_up_while_other_threads_keep_running(
    workspace: Path,
) -> None:
    (workspace / "a.txt").write_text("a" * 60 + "b\n")
    with Ticker() as ticker:
        outcome = run(executor_for(workspace, timeout=30), "search_files", pattern=CATASTROPHIC)
    assert outcome.ok is False
    assert outcome.content == (
        f"The pattern {CATASTROPHIC!r} is too slow: matching it against one line took more than "
        "0.5 s and was given up. Nested repetition such as (a|aa)+ or (x+x+)+ backtracks "
        "exponentially; use a simpler pattern or plain text."
    )
    assert ticker.ticks > 0


@pytest.mark.timeout(60)
def test_the_time_limit_holds_inside_the_search_itself(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a" * 60 + "b\n")
    outcome = run(executor_for(workspace, timeout=0.2), "search_files", pattern=CATASTROPHIC)
    assert outcome.ok is False
    assert outcome.content == (
        "Timed out after 0.2 s while searching. Ask for less at once (a narrower path, glob or "
        "line range), or raise NBCHAT_TOOL_TIMEOUT."
    )


@pytest.mark.timeout(60)
def test_stop_ends_a_catastrophic_search(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a" * 60 + "b\n")
    stop = StopSignal()
    with Ticker(on_first_tick=stop.set) as ticker:  # Stop clicked from another thread
        outcome = run(executor_for(workspace), "search_files", pattern=CATASTROPHIC, stop=stop)
    assert outcome.ok is False
    # Where the search was when Stop came (walking, matching) does not matter; that it ended does.
    assert "stopped by the user" in outcome.content.lower()
    assert ticker.ticks > 0


def test_every_builtin_file_tool_gives_up_once_its_deadline_has_passed(workspace: Path) -> None:
    (workspace / "a.txt").write_text("line\n" * 1000)
    (workspace / "sub").mkdir()
    late = ToolContext(workspace, timeout=1, deadline=0.0)  # monotonic 0: long past
    for tool, arguments in [
        (read_file, {"path": "a.txt"}),
        (search_files, {"pattern": "line"}),
        (list_files, {"pattern": "**/*"}),
    ]:
        with pytest.raises(ToolError) as caught:
            tool(late, **arguments)
        assert str(caught.value).startswith("Timed out after 1 s while ")


# 2. A symlink swap cannot make a file tool read or write outside the workspace


SWAPPER = """
import os, shutil, sys
workspace, mode, outside = sys.argv[1:4]
path = os.path.join(workspace, "swap.txt" if mode == "file" else "d")
spare = os.path.join(workspace, ".spare")
link = os.path.join(workspace, ".link")

def dwell():  # keep each state about as long as the other, without sleeping
    for _ in range(30):
        os.stat(workspace)

def make_real():
    if mode == "file":
        with open(spare, "w") as handle:
            handle.write("inside\\n")
        os.replace(spare, path)
        return
    if os.path.islink(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)  # made by write_file's make_parents while the path was missing
    os.rename(spare, path)

def make_link():
    if mode == "file":
        os.symlink(outside, link)
        os.replace(link, path)
        return
    os.rename(path, spare)
    os.symlink(outside, path)

first = True
while True:
    for step in (make_real, make_link):
        try:
            step()
        except OSError:
            pass
        dwell()
    if first:
        print("ready", flush=True)
        first = False
"""


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("outside secret\n")
    (folder / "f.txt").write_text("outside secret\n")
    return folder


@pytest.fixture
def swapping(workspace: Path, outside: Path) -> Iterator[Any]:
    """Start a real process flipping a workspace path between its own and a link outside."""
    started: list[subprocess.Popen[str]] = []

    def start(mode: str) -> None:
        target = outside / "secret.txt" if mode == "file" else outside
        if mode == "folder":
            (workspace / ".spare").mkdir()
            (workspace / ".spare" / "f.txt").write_text("inside\n")
        process = subprocess.Popen(
            [sys.executable, "-c", SWAPPER, str(workspace), mode, str(target)],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"  # it has swapped at least once

    yield start
    for process in started:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


# Tried until both sides of the swap were met often enough, for at most this long each (the
# swapper, another process, can go unscheduled for a while on a busy two-core machine: 50,000
# attempts once met the inside file only once). The bound is on the loop, never asserted.
TRY_FOR = 45.0
ENOUGH = 30


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("mode", "path"), [("file", "swap.txt"), ("folder", "d/f.txt")])
def test_a_symlink_swap_never_lets_read_or_write_reach_outside(
    workspace: Path, outside: Path, swapping: Any, mode: str, path: str
) -> None:
    context = ToolContext(workspace)
    swapping(mode)
    # Until both sides of the swap were met often (bounded: the swapper may be slow to run).
    reads: Counter[str] = Counter()
    deadline = time.monotonic() + TRY_FOR
    while time.monotonic() < deadline:
        try:
            reads[read_file(context, path)] += 1
        except ToolError:
            reads["refused or missing"] += 1  # caught mid-swap: never the outside file
        if min(reads["inside\n"], reads["refused or missing"]) >= ENOUGH:
            break
    writes: Counter[bool] = Counter()
    deadline = time.monotonic() + TRY_FOR
    while time.monotonic() < deadline:
        try:
            write_file(context, path, "written by the tool\n")
            writes[True] += 1
        except ToolError:
            writes[False] += 1
        if min(writes[True], writes[False]) >= ENOUGH:
            break
    assert set(reads) == {"inside\n", "refused or missing"}
    assert min(reads.values()) >= ENOUGH
    assert sorted(item.name for item in outside.iterdir()) == ["f.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text() == "outside secret\n"
    assert (outside / "f.txt").read_text() == "outside secret\n"


def test_links_inside_the_workspace_are_still_followed(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "a.txt").write_text("hello\n")
    (workspace / "alias").symlink_to("real")
    (workspace / "abs.txt").symlink_to(workspace / "real" / "a.txt")
    context = ToolContext(workspace)
    assert read_file(context, "alias/a.txt") == "hello\n"
    assert read_file(context, "abs.txt") == "hello\n"
    assert write_file(context, "alias/b.txt", "new") == "Wrote 3 characters to alias/b.txt."
    assert (workspace / "real" / "b.txt").read_text() == "new"
    assert list_files(context) == "abs.txt\nalias/\nreal/"


def test_a_loop_of_links_is_refused_with_a_message(workspace: Path) -> None:
    (workspace / "a").symlink_to("b")
    (workspace / "b").symlink_to("a")
    with pytest.raises(ToolError) as caught:
        read_file(ToolContext(workspace), "a")
    assert str(caught.value) == (
        "'a' goes through more than 40 symbolic links; give the path of the file itself."
    )


# 4. list_files never returns a name outside the workspace


@pytest.mark.parametrize(
    "pattern",
    [
        "../../*",
        "../../../../../*",
        "sub/../../*",
        "**/../*",
        "../../../../../../../../proc/self/*",
        "/proc/self/*",
        "/etc/*",
        "/*",
        "linkdir/*",
        "**/*",
    ],
)
def test_list_files_never_names_anything_outside_the_workspace(
    workspace: Path, outside: Path, pattern: str
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "in.txt").write_text("")
    (workspace / "linkdir").symlink_to(outside)
    executor = executor_for(workspace, policy="deny")
    for folder in (".", "sub"):
        outcome = run(executor, "list_files", path=folder, pattern=pattern)
        assert "secret" not in outcome.content
        assert "environ" not in outcome.content
        if not outcome.ok or outcome.content.startswith("No entries match"):
            continue  # a refusal or nothing found: no names at all
        for line in outcome.content.splitlines():
            name = line.split(" (", 1)[0].rstrip("/")
            assert not PurePosixPath(name).is_absolute()
            assert ".." not in PurePosixPath(name).parts
            assert os.path.lexists(workspace / name)


@pytest.mark.parametrize("pattern", ["../../*", "sub/../../*", "/proc/self/*", "/etc/*"])
def test_a_pattern_that_leaves_the_folder_is_refused(workspace: Path, pattern: str) -> None:
    outcome = run(executor_for(workspace, policy="deny"), "list_files", pattern=pattern)
    assert (outcome.ok, outcome.content) == (
        False,
        f"The pattern {pattern!r} leaves the listed folder; patterns select names inside it. "
        "Give the folder as `path` and a pattern such as '*.py' or '**/*.py'.",
    )


# 6. Nothing a run_shell command starts outlives the call


def marked_processes(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (zombies have an empty one)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    """A `sleep` argument no other process has; whatever still carries it is killed after."""
    value = f"1001.{uuid.uuid4().int % 10**9}"
    yield value
    for pid in marked_processes(value):
        os.kill(pid, 9)


BACKGROUND_NOTE = (
    "[1 background process was still running when the command ended, and stopped: nothing a "
    "command starts outlives it]"
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("sleep {m} &", ""),
        ("setsid sleep {m} >/dev/null 2>&1 &", ""),
        ("nohup setsid sleep {m} >/dev/null 2>&1 &", ""),
        ("setsid sleep {m} &", ""),  # holds the output pipe
        ("(setsid sleep {m} &); echo started", "started\n"),  # a double fork
        ("sleep {m} & exit 7", ""),
    ],
)
def test_nothing_a_command_starts_outlives_it_and_the_result_says_so(
    workspace: Path, marker: str, command: str, output: str
) -> None:
    outcome = run(
        executor_for(workspace, timeout=20), "run_shell", command=command.format(m=marker)
    )
    code = 7 if "exit 7" in command else 0
    assert outcome.ok is True
    assert outcome.content == f"exit code: {code}\n{output or '(no output)'}\n{BACKGROUND_NOTE}"
    assert marked_processes(marker) == []


@pytest.mark.timeout(60)
def test_a_timed_out_command_takes_its_escaped_daemons_with_it(
    workspace: Path, marker: str
) -> None:
    command = f"setsid sleep {marker} >/dev/null 2>&1 & sleep {marker}"
    outcome = run(executor_for(workspace, timeout=0.5), "run_shell", command=command)
    assert outcome.content == (
        "Timed out after 0.5 s: the command and everything it started were killed. "
        "Output so far:\n(no output)"
    )
    assert marked_processes(marker) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout", ["NaN", "Infinity", "-Infinity", "1e999", "-1", "0", "99"])
def test_any_timeout_the_model_asks_for_ends_the_command_by_the_configured_limit(
    workspace: Path, marker: str, timeout: str
) -> None:
    # Python's json reads NaN and Infinity; min(nan, limit) is nan, a deadline that never came.
    arguments = f'{{"command": "sleep {marker}", "timeout": {timeout}}}'
    outcome = executor_for(workspace, timeout=0.5).execute(ToolCall("c1", "run_shell", arguments))
    assert outcome.content == (
        "Timed out after 0.5 s: the command and everything it started were killed. "
        "Output so far:\n(no output)"
    )
    assert marked_processes(marker) == []


@pytest.mark.parametrize("timeout", [float("nan"), 0.0, -1.0])
def test_a_command_is_never_started_with_a_deadline_that_cannot_come(
    workspace: Path, timeout: float
) -> None:
    touched = workspace / "ran"
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        run_command(f"touch {touched}", cwd=workspace, env={}, timeout=timeout, output_limit=100)
    assert not touched.exists()


def test_a_shorter_timeout_the_model_asks_for_is_kept(workspace: Path, marker: str) -> None:
    context = ToolContext(workspace, timeout=30)
    assert [context.time_limit(asked) for asked in (0.25, None, float("nan"), -1.0)] == [
        0.25,
        30,
        30,
        30,
    ]


def test_a_command_that_starts_nothing_says_nothing_about_background(workspace: Path) -> None:
    outcome = run(executor_for(workspace), "run_shell", command="echo hi")
    assert outcome.content == "exit code: 0\nhi\n"


# 7. Reads and searches are streamed and bounded by what they return


def sparse(path: Path, head: bytes, size: int) -> Path:
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)  # the rest is a hole of NUL bytes: no disk, no time
    return path


def peak_memory(function: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


TEXT_HEAD = b"first line\nsecond line\n" + b"filler text\n" * 1000  # past an 8 KB sniff


@pytest.mark.timeout(120)
def test_reading_two_lines_of_a_sparse_gigabyte_reads_little(workspace: Path) -> None:
    sparse(workspace / "huge.txt", TEXT_HEAD, GIB)
    sparse(workspace / "tight.txt", b"first line\nsecond line\n", GIB)  # NULs right after
    context = ToolContext(workspace)
    for name in ("huge.txt", "tight.txt"):
        text, peak = peak_memory(partial(read_file, context, name, start_line=1, end_line=2))
        assert text == "first line\nsecond line\n"
        assert peak < MIB


@pytest.mark.timeout(120)
def test_a_binary_tail_is_found_in_what_is_read_not_only_the_first_bytes(
    workspace: Path,
) -> None:
    sparse(workspace / "huge.txt", TEXT_HEAD, GIB)
    context = ToolContext(workspace, output_limit=200_000)

    def read_whole() -> str:
        with pytest.raises(ToolError) as caught:
            read_file(context, "huge.txt")
        return str(caught.value)

    message, peak = peak_memory(read_whole)
    assert message == "'huge.txt' looks like a binary file (1,073,741,824 bytes); not shown."
    assert peak < 4 * MIB


def test_a_long_file_is_cut_at_the_output_limit_with_where_to_read_on(workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 10001)))
    text = read_file(ToolContext(workspace, output_limit=1000), "long.txt")
    assert text.endswith(
        "\n[... cut at 800 characters (the tool output limit); read on with start_line=101]"
    )
    assert text.startswith("line 1\nline 2\n")


@pytest.mark.timeout(120)
def test_searching_a_file_with_a_256_mib_line_of_nul_bytes_stays_small(workspace: Path) -> None:
    sparse(workspace / "big.txt", b"a needle here\n", 256 * MIB)
    (workspace / "long.txt").write_bytes(b"a" * (8 * MIB) + b"\nneedle again\n")
    context = ToolContext(workspace)
    result, peak = peak_memory(lambda: search_files(context, "needle"))
    assert result == "big.txt:1: a needle here\nlong.txt:2: needle again"
    assert peak < 2 * MIB


# 13. Tools get an allow-listed environment (see also tests/test_tools.py)


def test_credentials_under_any_name_are_not_visible_to_env(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = ("DATABASE_URL", "GH_PAT", "MY_PASSWD", "DB_PASS", "MYSQL_PWD", "SOME_CREDENTIALS")
    for name in secrets:
        monkeypatch.setenv(name, "postgres://user:hunter2@db/x")
    content = run(executor_for(workspace), "run_shell", command="env").content
    assert "hunter2" not in content
    assert not {line.split("=")[0] for line in content.splitlines()} & set(secrets)


# 14. Only regular files are opened by the search and read tools


@pytest.mark.timeout(60)
def test_a_named_pipe_hangs_no_tool(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    (workspace / "pipe-link").symlink_to("pipe")
    (workspace / "a.txt").write_text("needle\n")
    executor = executor_for(workspace, timeout=5)
    assert run(executor, "search_files", pattern="needle").content == "a.txt:1: needle"
    assert run(executor, "search_files", pattern="needle", path="pipe").ok is False
    not_regular = (
        "is not a regular file (a pipe, socket or device); tools read and write regular files only."
    )
    for name, arguments in [
        ("read_file", {"path": "pipe"}),
        ("read_file", {"path": "pipe-link"}),
        ("edit_file", {"path": "pipe", "old": "a", "new": "b"}),
        ("write_file", {"path": "pipe", "content": "x"}),
    ]:
        outcome = run(executor, name, **arguments)
        assert (outcome.ok, outcome.content) == (False, f"{arguments['path']!r} {not_regular}")
    assert run(executor, "list_files").content == "a.txt\npipe\npipe-link"

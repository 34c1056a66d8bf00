"""A pattern in the wrong dialect gets results or an answer saying exactly what is expected.

`list_files` takes a glob: a regular expression whose meaning a glob can say is read as that
glob (and the result says so); one it cannot say is refused with what is expected.
`search_files` takes a regular expression over lines: a glob of names (`*.py`, invalid as a
regular expression) or a regular expression for names (`.*py`, issue 19's call, which matched
200+ lines) points to `list_files` and the `glob` argument. No pattern makes either tool run
long: they are bounded in length, `**/**` counts once, and lines are matched with `regex`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tools import executor_for, run

from nbchat.tools.listing import glob_for_regex, looks_like_regex


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "src").mkdir(parents=True)
    for name in ("test_a.py", "test_b.txt", "main.py", "main.pyc", "notes.md"):
        (root / name).write_text("print('py')\n")
    (root / "src" / "deep.py").write_text("x = 1\n")
    return root


@pytest.mark.parametrize(
    ("regex", "glob"),
    [
        (r".*\.py", "*.py"),
        (".*py", "*py"),
        (r".*\.py$", "*.py"),
        (r"^.*\.py$", "*.py"),
        (r"\.py$", "*.py"),
        ("^test", "test*"),
        (r"^test_.*\.py$", "test_*.py"),
        ("^main.py$", "main?py"),
        ("^[mn]", "[mn]*"),
        (".*", "*"),
        (r"^a\*b$", "a[*]b"),
    ],
)
def test_a_regex_a_glob_can_say_is_read_as_that_glob(regex: str, glob: str) -> None:
    assert looks_like_regex(regex)
    assert glob_for_regex(regex) == glob


@pytest.mark.parametrize("glob", ["*.py", "*.*", "test.*", "src/*.txt", "**/*.py", "[ab]?.md"])
def test_a_glob_is_never_taken_for_a_regex(glob: str) -> None:
    assert not looks_like_regex(glob)


@pytest.mark.parametrize("regex", [r"[0-9]+\.txt", r"(main|test)\.py", r"\d+", "^a|b$", "^ab?c"])
def test_a_regex_no_glob_can_say_is_not_translated(regex: str) -> None:
    assert glob_for_regex(regex) is None


def test_list_files_answers_a_regex_with_the_glob_it_means(workspace: Path) -> None:
    executor = executor_for(workspace)
    assert run(executor, "list_files", pattern=r".*\.py").content == (
        "(list_files takes a glob: the regular expression '.*\\\\.py' was read as the glob "
        "'*.py'; '**/*.py' looks in subfolders too.)\n"
        "main.py\n"
        "test_a.py"
    )
    assert run(executor, "list_files", pattern="^test").content.splitlines()[1:] == [
        "test_a.py",
        "test_b.txt",
    ]


def test_list_files_refuses_a_regex_no_glob_can_say_saying_what_it_takes(
    workspace: Path,
) -> None:
    outcome = run(executor_for(workspace), "list_files", pattern=r"(main|test_a)\.py")
    assert not outcome.ok
    assert outcome.content == (
        "list_files takes a glob such as '*.py' ('**/*.py' to look in subfolders too); "
        "'(main|test_a)\\\\.py' looks like a regular expression. Give a glob, or use "
        "search_files to search the text inside files."
    )


@pytest.mark.parametrize(
    ("pattern", "glob"),
    [(".*py", "*py"), (r".*\.py", "*.py"), (r"^.*\.py$", "*.py"), (".*", "*")],
)
def test_search_files_points_a_pattern_for_names_to_list_files(
    workspace: Path, pattern: str, glob: str
) -> None:
    outcome = run(executor_for(workspace), "search_files", pattern=pattern)
    assert not outcome.ok
    assert outcome.content == (
        f"search_files finds lines inside files; {pattern!r} looks like a pattern for file "
        f"names (a search never needs a leading '.*'). To list files by name, call list_files "
        f"with pattern={glob!r} ({'**/' + glob!r} looks in subfolders too); to search only "
        f"such files, give the text to find as pattern and glob={glob!r}."
    )


@pytest.mark.parametrize("pattern", ["*.py", "**/*.py", "?ain.py"])
def test_search_files_points_a_glob_to_list_files(workspace: Path, pattern: str) -> None:
    outcome = run(executor_for(workspace), "search_files", pattern=pattern)
    assert not outcome.ok
    assert outcome.content == (
        f"search_files looks for text inside files; {pattern!r} is a glob of file names. To "
        f"list files by name, call list_files with pattern={pattern!r}; to search only such "
        f"files, give the text to find as pattern and glob={pattern!r}."
    )


def test_search_files_still_searches_text_that_is_not_a_valid_regex(workspace: Path) -> None:
    (workspace / "notes.md").write_text("call f(1 here\n")
    outcome = run(executor_for(workspace), "search_files", pattern="f(1")
    assert outcome.content == "notes.md:1: call f(1 here"


def test_search_files_reads_a_regex_glob_argument_as_the_glob_it_means(workspace: Path) -> None:
    outcome = run(executor_for(workspace), "search_files", pattern="x =", glob=r".*\.py")
    assert outcome.content == (
        "(search_files' glob argument takes a glob: the regular expression '.*\\\\.py' was read "
        "as the glob '*.py'; '**/*.py' looks in subfolders too.)\n"
        "src/deep.py:1: x = 1"
    )


@pytest.mark.parametrize("tool", ["list_files", "search_files"])
def test_a_pattern_too_long_to_match_quickly_is_refused(workspace: Path, tool: str) -> None:
    outcome = run(executor_for(workspace), tool, pattern="a" * 1_001)
    assert not outcome.ok
    expected = (
        "The pattern is 1,001 characters long; a glob such as '*.py' or '**/*.py' of at most "
        "1,000 characters is expected."
        if tool == "list_files"
        else "The pattern is 1,001 characters long; give at most 1,000 (a distinctive part of "
        "the text is enough)."
    )
    assert outcome.content == expected


def test_a_glob_of_many_double_stars_matches_as_one(workspace: Path) -> None:
    deep = workspace.joinpath(*[f"d{n}" for n in range(30)])
    deep.mkdir(parents=True)
    (deep / "found.py").write_text("\n")
    outcome = run(executor_for(workspace), "list_files", pattern="**/" * 300 + "found.py")
    assert outcome.content == "/".join(f"d{n}" for n in range(30)) + "/found.py"

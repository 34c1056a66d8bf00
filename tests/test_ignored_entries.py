"""`list_files` and `search_files` leave out hidden entries and what `.gitignore` files ignore,
as ripgrep does, unless `include_hidden` asks for them; `.git` is never listed nor searched.

Issue 19: "List the files in this workspace" from the repo root returned 200+ matches, most from
`.hypothesis/` (hidden, and ignored). Real files in a temporary workspace, through the executor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tools import executor_for, run

from nbchat.tools import ToolExecutor

GITIGNORE = "build/\n*.log\n!keep.log\n/top.txt\ndocs/**/draft?.md\n"
LEFT_OUT = "[{n} hidden or .gitignore'd entries left out; include_hidden=true lists them]"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A repository-like workspace: hidden folders, a build, logs, nested rules."""
    root = tmp_path / "workspace"
    files = {
        ".gitignore": GITIGNORE,
        ".env": "needle=1\n",
        ".git/config": "needle\n",
        ".hypothesis/examples/x.py": "needle\n",
        "build/out.py": "needle\n",
        "src/build": "needle (a file named build: only folders match 'build/')\n",
        "app.log": "needle\n",
        "keep.log": "needle\n",
        "top.txt": "needle\n",
        "src/top.txt": "needle\n",
        "src/m.py": "needle\n",
        "src/.cache/z.py": "needle\n",
        "docs/a/b/draft1.md": "needle\n",
        "docs/a/b/draft10.md": "needle\n",
        "sub/.gitignore": "*.txt\n!keep.log\n",
        "sub/notes.txt": "needle\n",
        "sub/data.csv": "needle\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def lines(executor: ToolExecutor, tool: str, **arguments: object) -> list[str]:
    outcome = run(executor, tool, **arguments)
    assert outcome.ok, outcome.content
    return outcome.content.splitlines()


def test_list_files_leaves_out_hidden_and_ignored_entries_and_says_so(workspace: Path) -> None:
    listed = lines(executor_for(workspace), "list_files", pattern="**/*")
    assert listed == [
        "docs/",
        "docs/a/",
        "docs/a/b/",
        "docs/a/b/draft10.md",  # `?` is one character
        "keep.log",  # re-included by `!keep.log`
        "src/",
        "src/build",  # a file: `build/` takes folders only
        "src/m.py",
        "src/top.txt",  # `/top.txt` is anchored to the .gitignore's folder
        "sub/",
        "sub/data.csv",  # sub/.gitignore ignores *.txt there, nowhere else
        # .gitignore .env .hypothesis/ build/ app.log top.txt; src/.cache/; docs' draft1.md;
        # sub/.gitignore sub/notes.txt
        LEFT_OUT.format(n=10),
    ]


def test_search_files_searches_neither_hidden_nor_ignored_files(workspace: Path) -> None:
    found = lines(executor_for(workspace), "search_files", pattern="needle")
    assert [line.split(":")[0] for line in found] == [
        "keep.log",
        "docs/a/b/draft10.md",
        "src/build",
        "src/m.py",
        "src/top.txt",
        "sub/data.csv",
    ]


def test_include_hidden_lists_and_searches_everything_but_git(workspace: Path) -> None:
    executor = executor_for(workspace)
    listed = lines(executor, "list_files", pattern="**/*", include_hidden=True)
    assert ".hypothesis/examples/x.py" in listed and "build/out.py" in listed
    assert ".env" in listed and "sub/notes.txt" in listed and "app.log" in listed
    assert not any(line.startswith(".git/") or line == ".git/" for line in listed)
    assert not any("left out" in line for line in listed)
    found = lines(executor, "search_files", pattern="needle", include_hidden=True)
    shown = {line.split(":")[0] for line in found}
    assert {".env", ".hypothesis/examples/x.py", "build/out.py", "top.txt"} <= shown
    assert not any(name.startswith(".git/") for name in shown)


def test_a_search_that_finds_nothing_says_what_it_did_not_search(workspace: Path) -> None:
    found = lines(
        executor_for(workspace), "search_files", pattern="needle", path="sub", glob="*.txt"
    )
    assert found == [
        "No matches for 'needle' in 'sub'.",
        "[2 hidden or .gitignore'd entries were not searched; include_hidden=true searches them]",
    ]


def test_listing_a_subfolder_applies_the_rules_of_the_folders_above_it(workspace: Path) -> None:
    (workspace / "src" / "debug.log").write_text("x\n")
    executor = executor_for(workspace)
    assert lines(executor, "list_files", path="src") == [
        "src/build",
        "src/m.py",
        "src/top.txt",
        LEFT_OUT.format(n=2),  # .cache/ (hidden) and debug.log (the root's *.log)
    ]
    # A folder asked for by name is listed even though `build/` ignores it, as ripgrep does.
    assert lines(executor, "list_files", path="build") == ["build/out.py"]


def test_a_deeper_gitignore_overrides_its_parent(workspace: Path) -> None:
    (workspace / "sub" / "keep.log").write_text("x\n")
    (workspace / "sub" / "other.log").write_text("x\n")
    listed = lines(executor_for(workspace), "list_files", path="sub")
    assert "sub/keep.log" in listed and "sub/other.log" not in listed


def test_a_gitignore_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside-rules"
    outside.write_text("*.py\n")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "m.py").write_text("x\n")
    (workspace / ".gitignore").symlink_to(outside)
    assert lines(executor_for(workspace), "list_files") == ["m.py", LEFT_OUT.format(n=1)]


def test_a_gitignore_line_that_backtracks_for_ever_costs_nothing(tmp_path: Path) -> None:
    # Under Python's `re` (pathspec's own matcher) this line takes about a minute on the path
    # below; matched with `regex` it does not, and a line that did would be given up.
    workspace = tmp_path / "workspace"
    deep = workspace.joinpath(*["aaaa"] * 40)
    deep.mkdir(parents=True)
    (deep / "c.txt").write_text("x\n")
    (workspace / "debug.log").write_text("x\n")
    (workspace / ".gitignore").write_text("**/*a*/**/*a*/**/*a*/**/*a*/**/*a*/z\n*.log\n")
    listed = lines(executor_for(workspace, timeout=30), "list_files", pattern="**/*.txt")
    assert listed == ["/".join(["aaaa"] * 40) + "/c.txt", LEFT_OUT.format(n=2)]

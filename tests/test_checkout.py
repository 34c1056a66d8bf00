"""The session fails when its tests changed the checkout (`checkout`, registered by conftest.py).

Each case runs pytest with the plugin in a child process, in a scratch git repository that has
a developer's own uncommitted work in it before the session starts: an edited tracked file and
an untracked one. A session whose test writes nothing passes; one whose test changes a tracked
file, adds an untracked one, or adds an ignored folder the model's file tools would read (a
`.hypothesis/`) fails and names each, and never the developer's own work. Also: where
Hypothesis keeps its examples, and where the browser tests put their screenshots.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import storage_directory

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
QUIET_GIT = [
    "-c",
    "user.name=test",
    "-c",
    "user.email=test@example.org",
    "-c",
    "init.defaultBranch=main",
]


def git(root: Path, *arguments: str) -> None:
    subprocess.run(
        ["git", *QUIET_GIT, "-C", str(root), *arguments], check=True, capture_output=True
    )


def with_tests_on_path() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A git repository with a commit, then a developer's uncommitted edit and new file."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text(".hypothesis/\ntest-artifacts/\n")
    (root / "tracked.txt").write_text("as committed\n")
    (root / "mine.txt").write_text("as committed\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "start")
    (root / "mine.txt").write_text("my own edit, not committed yet\n")
    (root / "notes.txt").write_text("my own new file\n")
    return root


def run_session(
    root: Path, test_body: str, *, refresh_docs: bool = False
) -> subprocess.CompletedProcess[str]:
    """pytest with the plugin on one test whose body is `test_body`, in `root` (as
    `scripts/screenshots` runs it when `refresh_docs`)."""
    (root / "test_one.py").write_text(
        f"from pathlib import Path\n\n\ndef test_one():\n    {test_body}\n"
    )
    env = with_tests_on_path()
    env.pop("SCREENSHOTS_TO_DOCS", None)
    if refresh_docs:
        env["SCREENSHOTS_TO_DOCS"] = "1"
    command = [sys.executable, "-m", "pytest", "-p", "checkout", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*command, "-q", "test_one.py"], cwd=root, env=env, capture_output=True, text=True
    )


def test_a_session_whose_tests_write_nothing_passes(scratch: Path) -> None:
    done = run_session(scratch, "assert Path('tracked.txt').read_text()")
    assert done.returncode == 0, done.stdout
    assert "changed the checkout" not in done.stdout


@pytest.mark.parametrize(
    ("body", "reported"),
    [
        ("Path('tracked.txt').write_text('rewritten')", "now:  M tracked.txt"),
        ("Path('left-behind.txt').write_text('x')", "now: ?? left-behind.txt"),
        ("Path('.hypothesis').mkdir()", "new ignored: .hypothesis/"),
        ("Path('mine.txt').write_text('as committed\\n')", "was:  M mine.txt"),
    ],
)
def test_a_session_whose_tests_change_the_checkout_fails_and_names_the_change(
    scratch: Path, body: str, reported: str
) -> None:
    done = run_session(scratch, body)
    assert done.returncode == 1, done.stdout
    assert "the tests changed the checkout" in done.stdout
    assert f"  {reported}\n" in done.stdout
    assert "notes.txt" not in done.stdout  # the developer's own work is not the tests'
    assert "1 passed" in done.stdout  # the test itself passed: the session failed


def test_caches_and_test_artifacts_may_appear(scratch: Path) -> None:
    body = "Path('test-artifacts').mkdir(); Path('test-artifacts/shot.png').write_bytes(b'')"
    done = run_session(scratch, body)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("refresh_docs", [False, True])
def test_only_the_screenshots_command_may_rewrite_the_readmes_screenshots(
    scratch: Path, refresh_docs: bool
) -> None:
    (scratch / "docs").mkdir()
    (scratch / "docs" / "chat.png").write_bytes(b"old")
    git(scratch, "add", "docs")
    git(scratch, "commit", "-q", "-m", "a screenshot")
    done = run_session(
        scratch, "Path('docs/chat.png').write_bytes(b'new')", refresh_docs=refresh_docs
    )
    assert done.returncode == (0 if refresh_docs else 1), done.stdout


def test_hypothesis_keeps_its_examples_outside_the_checkout() -> None:
    storage = storage_directory("examples", intent_to_write=False).path.resolve()
    assert not storage.is_relative_to(REPO)
    assert storage.parent == Path(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"]).resolve()
    # Where a CI variable is set, Hypothesis keeps no example database at all (its own ci
    # defaults); elsewhere the database is that directory.
    database = settings().database
    if database is not None:
        assert Path(database.path).resolve() == storage  # type: ignore[attr-defined]


def test_the_browser_tests_put_screenshots_in_test_artifacts_unless_refreshing_docs() -> None:
    probe = "import browser; print(browser.SCREENSHOTS)"
    env = with_tests_on_path()
    env.pop("SCREENSHOTS_TO_DOCS", None)
    plain = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    env["SCREENSHOTS_TO_DOCS"] = "1"
    docs = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert (plain.stdout.strip(), docs.stdout.strip()) == (
        str(REPO / "test-artifacts"),
        str(REPO / "docs"),
    )

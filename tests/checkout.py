"""Tests leave the checkout as they found it: a pytest plugin that fails the session otherwise.

At the start of the session it records what git says about the checkout: changed tracked files
and untracked files (`git status --porcelain`), and ignored files and folders (`git ls-files
--others --ignored --directory`). At the end, once every test and fixture has finished, it
compares: any entry that appeared or went away fails the session (exit status 1) with a list of
them. Comparing with the start, not with a clean tree, leaves a developer's own uncommitted
work alone.

Ignored entries count too, because `.gitignore` hides from git what the model's own file tools
still read (a `.hypothesis/` folder in the workspace, say); only the caches Python and pytest
keep (`__pycache__`, `.pytest_cache`) and `test-artifacts/` (screenshots, failure pages) may
appear. `scripts/screenshots` (SCREENSHOTS_TO_DOCS=1) rewrites docs/*.png on purpose.

Registered by conftest.py; `-p checkout` loads it on its own (tests/test_checkout.py does so in a
scratch repository).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Checkout", "changes", "snapshot"]

# Folders any test run may leave: Python's and pytest's caches, and the tests' own artifacts.
ALLOWED = frozenset({"__pycache__", ".pytest_cache", "test-artifacts"})
KEY = pytest.StashKey["Checkout | None"]()


@dataclass(frozen=True)
class Checkout:
    """What git said about the checkout at one moment."""

    root: Path
    status: frozenset[str]  # "XY path" lines: changed tracked files, untracked files
    ignored: frozenset[str]  # ignored files, and folders ignored as a whole ("name/")


def git(root: Path, *arguments: str) -> list[str] | None:
    """git's NUL-separated output as entries, or None where git or a work tree is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=60
        )
    except OSError:
        return None
    if done.returncode != 0:
        return None
    return [entry for entry in done.stdout.split("\0") if entry]


def snapshot(where: Path) -> Checkout | None:
    """The checkout that holds `where`, as git sees it now (None outside a git work tree)."""
    top = git(where, "rev-parse", "--show-toplevel")
    if not top:
        return None
    root = Path(top[0].rstrip("\n"))
    status = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    ignored = git(
        root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
    )
    if status is None or ignored is None:
        return None
    return Checkout(root, frozenset(status), frozenset(ignored))


def is_allowed(path: str) -> bool:
    refreshing = os.environ.get("SCREENSHOTS_TO_DOCS") == "1"  # scripts/screenshots
    if refreshing and path.startswith("docs/") and path.endswith(".png"):
        return True
    return not ALLOWED.isdisjoint(path.rstrip("/").split("/"))


def changes(before: Checkout, after: Checkout) -> list[str]:
    """What changed between the two, one line each: "now: XY path" and "was: XY path" for
    git's status, "new ignored: path" for an ignored file or folder that appeared."""
    lines = [f"now: {e}" for e in sorted(after.status - before.status) if not is_allowed(e[3:])]
    lines += [f"was: {e}" for e in sorted(before.status - after.status) if not is_allowed(e[3:])]
    lines += [
        f"new ignored: {entry}"
        for entry in sorted(after.ignored - before.ignored)
        if not is_allowed(entry)
    ]
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[KEY] = snapshot(session.config.rootpath)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(KEY, None)
    if before is None or session.config.option.collectonly:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    after = snapshot(before.root)
    found = changes(before, after) if after is not None else ["git could not be asked again"]
    if not found:
        return
    if reporter is not None:
        reporter.write_sep("=", "the tests changed the checkout", red=True)
        reporter.write_line(
            f"In {before.root}, compared with the start of the session (tests must leave the "
            "checkout as they found it: write into tmp_path, or test-artifacts/):"
        )
        for line in found:
            reporter.write_line(f"  {line}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED

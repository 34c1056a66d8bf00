"""Which listed files hold a message's words (`nbchat.tools.filewords`): rarer words only, files
read once until they change, binary files and links left out, a huge message read only so far."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nbchat.tools.filewords import (
    FILES_PER_WORD,
    MAX_FOUND,
    MESSAGE_CHARS,
    FileWords,
    describe_found,
)
from nbchat.tools.overview import WorkspaceOverview


def workspace(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    return tmp_path


def test_a_message_is_told_which_files_hold_its_rarer_words(tmp_path: Path) -> None:
    root = workspace(
        tmp_path,
        {
            "notes.txt": "The review meeting is on Thursday. See the project plan.",
            "plan.md": "# Plan\nShip the project in March.",
            "todo.md": "- the project: book a room",
            "src/app.py": "def greet(name):\n    return 'Hello ' + name\n",
        },
    )
    overview = WorkspaceOverview(root)
    found = overview.files_holding("When's the Review meeting, and what's the project plan?")
    # "project" is in three of the four files: it points nowhere. "when", "what" are in none.
    assert found == {
        "review": ["notes.txt"],
        "meeting": ["notes.txt"],
        "plan": ["notes.txt", "plan.md"],
    }
    assert describe_found(found) == (
        "Words of the message found in the workspace's files: review (notes.txt); "
        "meeting (notes.txt); plan (notes.txt, plan.md)."
    )
    assert overview.files_holding("what is the capital of France?") == {}
    assert describe_found({}) == ""


def test_a_changed_file_is_read_again_and_a_binary_one_never_counts(tmp_path: Path) -> None:
    root = workspace(tmp_path, {"a.txt": "alpha", "b.bin": b"\x00secret words\x00", "c.txt": ""})
    words = FileWords(root)
    words.refresh(["a.txt", "b.bin", "c.txt"])
    assert words.holding("alpha secret words") == {"alpha": ["a.txt"]}
    (root / "c.txt").write_text("secret")
    stamp = time.time() + 5
    os.utime(root / "c.txt", (stamp, stamp))
    words.refresh(["a.txt", "b.bin", "c.txt"])
    assert words.holding("secret") == {"secret": ["c.txt"]}


def test_links_and_paths_outside_the_workspace_are_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("password hunter2")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "link.txt").symlink_to(outside)
    words = FileWords(root)
    words.refresh(["link.txt", "../outside.txt"])
    assert words.holding("password hunter2") == {}


def test_the_answer_is_bounded_whatever_the_message(tmp_path: Path) -> None:
    names = [f"word{i:03d}" for i in range(40)]
    root = workspace(tmp_path, {"one.txt": " ".join(names), "two.txt": "other", "three.txt": ""})
    words = FileWords(root)
    words.refresh(["one.txt", "two.txt", "three.txt"])
    found = words.holding(" ".join(names))
    assert len(found) == MAX_FOUND and all(len(paths) <= FILES_PER_WORD for paths in found.values())
    # Read only as far as the first step reads the message: a word past that is not looked for.
    assert words.holding("a " * (MESSAGE_CHARS // 2) + "word001") == {}
    assert words.holding("a " * (MESSAGE_CHARS // 2 - 10) + "word001") == {"word001": ["one.txt"]}

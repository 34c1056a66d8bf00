"""The names the workspace's source files define (`nbchat.tools.overview`), for a small model's
first step to know "where is greet defined?" is about the user's code: which files are read,
how much, and what is never followed or kept."""

from __future__ import annotations

import os
from pathlib import Path

from nbchat.tools.offer import named_in
from nbchat.tools.overview import MAX_BYTES, SymbolIndex


def test_definitions_in_listed_source_files_are_named_with_their_file(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def greet(name):\n    pass\n\nclass Store:\n    x = 1\n")
    (tmp_path / "ui.js").write_text("export async function render(x) {}\n")
    (tmp_path / "notes.txt").write_text("def not_code():\n")
    index = SymbolIndex(tmp_path)
    index.refresh(["app.py", "ui.js", "notes.txt"])
    assert index.names() == {"greet": "app.py", "Store": "app.py", "render": "ui.js"}
    assert named_in("where's greet defined?", [], [], index.names()) == [
        "greet (defined in the file app.py)"
    ]


def test_a_changed_file_is_read_again_and_a_gone_one_forgotten(tmp_path: Path) -> None:
    source = tmp_path / "app.py"
    source.write_text("def old():\n")
    index = SymbolIndex(tmp_path)
    index.refresh(["app.py"])
    source.write_text("def new_name():\n")
    os.utime(source, ns=(1, 10**18))  # a new stamp even within the same clock tick
    index.refresh(["app.py"])
    assert index.names() == {"new_name": "app.py"}
    source.unlink()
    index.refresh(["app.py"])
    assert index.names() == {}


def test_only_the_start_of_a_file_is_read_and_links_out_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("def secret_name():\n")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "link.py").symlink_to(outside / "secret.py")
    (workspace / "big.py").write_text("x = 1\n" * (MAX_BYTES // 6 + 10) + "def too_far():\n")
    index = SymbolIndex(workspace)
    index.refresh(["link.py", "big.py", "../outside/secret.py"])
    assert index.names() == {}

"""Which tools one request offers the model: all of them, or — on request — none.

A 0.5B model offered six tool schemas calls one for "Hi! What is 2 + 2?" (it read a made-up
`resources/file.txt`, issue 12). With `tools_on_request` (on by default for the embedded model)
a request offers the tools only when they can be wanted: the user's last message speaks of the
workspace (files, folders, a file name such as `notes.txt`, the shell, running something) or of
the notebook (variables, a DataFrame, cells, the last traceback), the turn is already in a tool
round, or the caller forces a tool. Otherwise it offers none, so the model can only answer, and
a JSON-looking answer stays text.

The workspace is named by vocabulary, not phrasing: files, folders, paths (`./build`, `src/`),
command names that are not everyday words (`git`, `pytest`, `curl`, but not `find` or `make`),
installing, the notebook's state. A general how-to or definition question ("In Python, how do I
read a file?") names nothing in this workspace and gets no tools, unless it says "this
folder", "my project" or "here". Otherwise the rule errs towards offering, and the system
prompt's "answer general questions directly" does the rest.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from nbchat.history import Row

__all__ = ["asks_for_tools", "offered_tools"]

WORKSPACE_WORDS = re.compile(
    r"\b(files?|folders?|director(?:y|ies)|workspace|repo(?:sitory)?|paths?|cwd|"
    r"shell|terminal|commands?|run|execute|script|install|"
    # command names that are not also everyday English words ("find", "make", "head" are)
    r"pytest|pip3?|git|ls|pwd|cat|grep|mkdir|rm|cp|mv|chmod|wc|curl|wget|npm|yarn|conda|"
    r"docker|tar|unzip|ruff|mypy|"
    r"variables?|data ?frames?|cells?|notebook|kernel|traceback|exception)\b",
    re.IGNORECASE,
)
FILE_NAME = re.compile(
    r"[\w./-]*\w\.(?:py|ipynb|txt|md|rst|csv|tsv|json|jsonl|ya?ml|toml|ini|cfg|log|sh|js|ts|"
    r"html|css|sql|xml|c|h|cpp|rs|go|java|r|lock|env|parquet|xlsx)\b",
    re.IGNORECASE,
)
# A path without an extension: `./build`, `~/data`, `../x`, or a folder written `src/`.
PATH_LIKE = re.compile(r"(?:^|[\s`'\"(])(?:\.{1,2}/|~/)\S|\b[a-z_][\w.-]*/(?=[\s`'\")?.,]|$)")
# A general how-to or definition question ("How do I read a file in Python?") is a coding
# question, not a request for this workspace's files, unless it names something concrete here.
GENERAL_QUESTION = re.compile(
    r"^\s*(?:(?:in \w+, )?how (?:do|can|should|would) (?:i|you|we|one)\b|how to\b|"
    r"what (?:is|are|does) (?:a|an)\b|explain\b|what(?:'s| is) the difference\b)",
    re.IGNORECASE,
)
CONCRETE = re.compile(
    r"\b(?:this|my|our|the current) (?:workspace|folder|director(?:y|ies)|repo(?:sitory)?|"
    r"project|notebook|kernel|session|files?)\b|\bhere\b",
    re.IGNORECASE,
)


def asks_for_tools(text: str) -> bool:
    """True when a user's message speaks of the workspace: files, folders, the shell, a file
    name or path, the notebook's state; False for a general how-to question about them that
    names nothing in this workspace."""
    named = FILE_NAME.search(text) or PATH_LIKE.search(text)
    if named:
        return True
    if not WORKSPACE_WORDS.search(text):
        return False
    return not GENERAL_QUESTION.search(text) or bool(CONCRETE.search(text))


def offered_tools(
    schemas: Sequence[dict[str, Any]],
    rows: Sequence[Row],
    *,
    on_request: bool,
    tool_choice: str | None = None,
) -> list[dict[str, Any]]:
    """The schemas to send with the next request, given the rows it carries ("none" on a small
    model: none at all, so a round meant for an answer cannot be written as a call)."""
    if on_request and tool_choice == "none":
        return []
    if not on_request or tool_choice not in (None, "auto") or not schemas:
        return list(schemas)
    if rows and rows[-1].role == "tool":
        return list(schemas)  # in a tool round: the model answers from the result or goes on
    last_user = next((row for row in reversed(rows) if row.role == "user"), None)
    if last_user is not None and asks_for_tools(last_user.content):
        return list(schemas)
    return []

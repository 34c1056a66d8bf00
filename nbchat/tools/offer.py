"""Which tools one request offers the model: all of them, or — on request — none.

A 0.5B model offered six tool schemas calls one for "Hi! What is 2 + 2?" (it read a made-up
`resources/file.txt`, issue 12). With `tools_on_request` (on by default for the embedded model)
a request offers the tools only when they can be wanted: the user's last message speaks of the
workspace (files, folders, a file name such as `notes.txt`, the shell, running something) or of
the notebook (variables, a DataFrame, cells, the last traceback), the turn is already in a tool
round, or the caller forces a tool. Otherwise it offers none, so the model can only answer, and
a JSON-looking answer stays text.

The rule errs towards offering: a message that mentions a file while asking a general question
gets the tools, and the system prompt's "answer general questions directly" does the rest.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from nbchat.history import Row

__all__ = ["asks_for_tools", "offered_tools"]

WORKSPACE_WORDS = re.compile(
    r"\b(files?|folders?|director(?:y|ies)|workspace|repo(?:sitory)?|paths?|"
    r"shell|terminal|commands?|run|execute|script|pytest|pip|git|ls|pwd|cat|grep|mkdir|rm|"
    r"variables?|data ?frames?|cells?|notebook|kernel|traceback|exception)\b",
    re.IGNORECASE,
)
FILE_NAME = re.compile(
    r"[\w./-]*\w\.(?:py|ipynb|txt|md|rst|csv|tsv|json|jsonl|ya?ml|toml|ini|cfg|log|sh|js|ts|"
    r"html|css|sql|xml|c|h|cpp|rs|go|java|r|toml|lock|env)\b",
    re.IGNORECASE,
)


def asks_for_tools(text: str) -> bool:
    """True when a user's message speaks of the workspace: files, the shell, a file name."""
    return bool(WORKSPACE_WORDS.search(text) or FILE_NAME.search(text))


def offered_tools(
    schemas: Sequence[dict[str, Any]],
    rows: Sequence[Row],
    *,
    on_request: bool,
    tool_choice: str | None = None,
) -> list[dict[str, Any]]:
    """The schemas to send with the next request, given the rows it carries."""
    if not on_request or tool_choice not in (None, "auto") or not schemas:
        return list(schemas)
    if rows and rows[-1].role == "tool":
        return list(schemas)  # in a tool round: the model answers from the result or goes on
    last_user = next((row for row in reversed(rows) if row.role == "user"), None)
    if last_user is not None and asks_for_tools(last_user.content):
        return list(schemas)
    return []

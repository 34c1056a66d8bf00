"""Which `tool_choice` each round of a turn sends on a small model (`tools_on_request`).

Offering the tools (`nbchat.tools.offer`) is not enough for a 0.5B model: asked "What files are
in this workspace?" it answered in prose from the system prompt's overview, asked to "Delete the
file old.log using the shell" it read `data.csv`, and after a correct call it called the same
tool again instead of answering, until the turn ran out of rounds with nothing to show (issue 12).
So, on a model that gets the tools on request:

- the first round sends "required" when the user's message is an explicit request for an action
  in this workspace (`requests_action`): an imperative such as read, open, show, list, search,
  run, create, delete or replace, or a question about what the workspace holds, and an anchor
  here: a file or path name, a backticked command, a shell command's name, "the shell", "this
  workspace", "the files". It names `run_shell` when the message names the shell or a command,
  so the model cannot pick a file tool for "Show the current directory with pwd", and
  `search_files` when it asks to search the files ("Which file defines greet? Search the
  workspace." had it read `README.md`). A general
  question ("Show me how to reverse a list", "Explain what a shell is", "Write a function that
  reads a file") never gets either: it stays free to answer;
- a later round sends "none" (no tools offered: the model answers from the results) when it is
  the turn's last round, or when the model's last calls only repeated calls already made in this
  turn, whose results it has.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from nbchat.history import Row, stored_calls
from nbchat.tools.offer import FILE_NAME, PATH_LIKE  # one vocabulary for offering and forcing

__all__ = ["SEARCH_TOOL", "SHELL_TOOL", "requests_action", "round_choice"]

SHELL_TOOL = "run_shell"
SEARCH_TOOL = "search_files"
# Starts a request, after an optional "please", "can you" or a leading "In src/app.py," clause.
POLITE = r"(?:please\s+|(?:can|could|would|will) you\s+(?:please\s+)?)?"
LEADING_CLAUSE = r"(?:in\s+\S+,\s*)?"
ACTION_VERBS = (
    r"read|open|show|display|print|view|list|search|grep|find|look\s+(?:for|in|at|through)|"
    r"run|execute|launch|create|write|save|make|delete|remove|erase|rename|move|copy|replace|"
    r"edit|change|update|append|add|insert|install|check|count|tell\s+me\s+what(?:'s| is) in"
)
IMPERATIVE = re.compile(
    rf"(?:^|[.!?;]\s+){POLITE}{LEADING_CLAUSE}{POLITE}(?:{ACTION_VERBS})\b", re.IGNORECASE
)
# A question about what the workspace holds: "What files are in ...", "Which file defines ...".
CONTENTS_QUESTION = re.compile(
    r"(?:^|[.!?;]\s+)(?:what|which)\s+(?:files?|folders?|director(?:y|ies))\b", re.IGNORECASE
)
# What makes a request general (code to write, something to explain) rather than an action here.
GENERAL = re.compile(
    r"\bhow\s+(?:to|do|does|can|could|should|would|is|are)\b|\bshow\s+me\s+(?:how|what|why)\b|"
    r"\bexplain\b|\bexamples?\b|\bwhat\s+(?:is|are)\s+(?:a|an)\b|"
    r"\b(?:a|an|the)\s+(?:python\s+|bash\s+|shell\s+|sql\s+)?(?:function|class|method|script|"
    r"program|query|snippet|regex|one-liner|loop)\s+(?:that|which|to)\b|"
    r"\b(?:in|using|with)\s+(?:python|javascript|js|typescript|java|bash|c\+\+|c#|rust|go|sql|"
    r"ruby|pandas|numpy)\s*(?:[.?!,]|$)",
    re.IGNORECASE,
)
PLACE = re.compile(
    r"\b(?:this|my|our|the(?:\s+current)?)\s+(?:workspace|folder|director(?:y|ies)|"
    r"repo(?:sitory)?|project)\b|\bthe\s+files\b|\bthe\s+[\w.-]+\s+(?:folder|directory)\b|"
    r"\b(?:the\s+)?(?:files?|folders?)\s+here\b",
    re.IGNORECASE,
)
# Naming the shell itself, a backticked command, or a command that is no everyday word.
SHELL = re.compile(
    r"\b(?:the\s+)?(?:shell|terminal|command\s+line)\b|`[^`\n]+`|"
    r"\b(?:with|using|via|by\s+running)\s+`?(?:pytest|pip3?|git|ls|pwd|cat|grep|rm|cp|mv|"
    r"mkdir|chmod|wc|curl|wget|npm|conda|docker|make|ruff|mypy|python3?)\b|"
    r"\b(?:pytest|pwd)\b",
    re.IGNORECASE,
)


# Looking for a text in the files: "Search the files for TODO", "Which file defines greet?".
SEARCH = re.compile(
    r"\b(?:search|grep)\b|\bwhich\s+files?\s+(?:defines?|contains?|mentions?|uses?|has|have)\b",
    re.IGNORECASE,
)


def requests_action(text: str) -> str | None:
    """`run_shell` when `text` asks for an action through the shell, `search_files` when it
    asks to search the files, "required" when it asks for another action in this workspace,
    None for anything else (a general question, a request without an anchor here)."""
    if GENERAL.search(text):
        return None
    shell = SHELL.search(text)
    anchored = shell or FILE_NAME.search(text) or PATH_LIKE.search(text) or PLACE.search(text)
    if not anchored or not (IMPERATIVE.search(text) or CONTENTS_QUESTION.search(text)):
        return None
    if shell:
        return SHELL_TOOL
    return SEARCH_TOOL if SEARCH.search(text) else "required"


def round_choice(
    rows: Sequence[Row], *, number: int, rounds: int, requested: str | None
) -> str | None:
    """The `tool_choice` of round `number` of `rounds` (1-based), given the rows it sends and
    what the caller asked for the turn (`requested`, for the first round)."""
    if number == 1:
        last_user = next((row.content for row in reversed(rows) if row.role == "user"), "")
        return requested or requests_action(last_user)
    if number >= rounds or only_repeats(rows):
        return "none"
    return None


def only_repeats(rows: Sequence[Row]) -> bool:
    """True when the turn's last assistant row only repeats calls (same tool, same arguments)
    that an earlier row of the same turn made."""
    start = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].role == "user"), -1)
    made = [row for row in rows[start + 1 :] if row.role == "assistant_full"]
    if len(made) < 2:
        return False
    earlier = {_key(name, args) for row in made[:-1] for _id, name, args in stored_calls(row)}
    last = [_key(name, args) for _id, name, args in stored_calls(made[-1])]
    return bool(last) and all(key in earlier for key in last)


def _key(name: str, arguments: object) -> str:
    return f"{name}:{json.dumps(arguments, sort_keys=True)}"

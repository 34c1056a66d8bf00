"""Which tools each round of a turn may use on a model that gets its tools described in the prompt
(the offer, `nbchat.tools.offer`), and how its first step is weighed:

- the caller's choice wins on the first round (`send(..., tool_choice=...)`);
- a later round answers in words ("none") when it is the turn's last round, or when the model's
  last calls only repeated calls already made in this turn, whose results it has (a 0.5B model
  called the same tool again instead of answering until the turn ran out, issue 12);
- otherwise the model's own first step decides (`nbchat.llm.firststep`): it answers in words
  when at least `ANSWER_SHARE` of its first token went to answering (after a tool result,
  `ANSWER_SHARE_AFTER_RESULT`: it looks again only when sure, unless the message asked for
  a change that nothing has made yet, `asks_for_a_change`; for a message naming a file,
  folder or variable that is here, `ANSWER_SHARE_NAMED`: it looks unless it leans to
  answering), and otherwise calls the tool it named, forced, so the call cannot come out as
  prose or as a tool that does not exist;
- a tool that runs or changes something (a "dangerous" one: the shell, writing, editing) is
  not allowed in a turn whose message tells the assistant not to run, delete or change things
  (`forbids_changes`), whatever the model would choose: "Please do NOT run `rm -rf build/`"
  never leads to `run_shell`. Reading stays allowed. Nor in a turn whose message asks whether
  acting is safe or wise, or what it would do (`weighs_acting`: "is it safe to run …",
  "should I delete …"): running the thing would answer by doing it;
- no tool at all is allowed in a turn whose message says not to look at anything ("don't check
  anything", "without opening any files", "no tools", `forbids_looking`);
- a message asking how to do something ("how do I …", "how to …", "what's the best way to …",
  `asks_how_to`) or about things in general ("in general", "generally", "typically",
  `asks_in_general`) asks for instructions or knowledge, not for the assistant to act: the
  dangerous tools are not allowed either, and it answers in words at `ANSWER_SHARE_HOW_TO`
  unless it names something that is here (a small model ran `run_code` for "how do I group
  by in pandas");
- a message that carries on ("and …", "what about …", `follows_on`) from a turn that called a
  tool (`looked_last_turn`) leans to looking as one naming something here does.

A first step's call aimed at the wrong kind of thing is turned to the tool that looks at it
(`aimed_call`): `list_files` on a path that is a file reads the file; `describe_variable` of a
name the notebook does not hold but the workspace's code defines reads the file defining it (a
1.5B model asked about a function of the user's code described a notebook variable);
`search_files` for exactly the name of a file here reads that file (asked what a log or a
config held, a 1.5B model searched the files' contents for the file's own name and found nothing),
and so does a search inside one small file (asked which city of a CSV was the biggest, it
searched it for "city", saw the header line alone and named a city the file does not hold);
`search_files` for exactly the name of a notebook variable that the code does not define
describes the variable (asked what a DataFrame held, it searched the files for its name);
`describe_variable` of a file's name reads the file; `describe_variable` of a name that is
neither but an installed package's asks pip about it, with the kernel's own interpreter
(asked which pandas version was installed, it described a variable `pandas` there was none
of); a tool on the notebook's cells, for a message that names one file here (by its path, or
by a name its code defines) and says nothing of the notebook, reads that file (asked to add a
function to a file, it inserted a notebook cell holding it); `run_cell` given code instead of
a cell runs it as `run_code`; a search under a folder that is not here searches the whole
workspace; a listing of a folder the message names in the singular only ("the log"), or asks to
have looked into by its own name ("go through the logs", `looked_into`), that holds one file only
reads that file.

`forbids_changes` reads the user's text with one bounded pattern: a negation followed, within
three words, by an action verb; `forbids_looking` one like it; `asks_how_to`, `asks_in_general`
and `follows_on` one more each over the message's start. Linear time, whatever the text.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbchat.history import Row, last_user_index, stored_calls
from nbchat.tools.offer import points_at_something

__all__ = [
    "ANSWER_SHARE",
    "ANSWER_SHARE_AFTER_RESULT",
    "ANSWER_SHARE_HOW_TO",
    "ANSWER_SHARE_NAMED",
    "Here",
    "Leaning",
    "NO_TOOL",
    "aimed_call",
    "allowed_tools",
    "asks_for_a_change",
    "asks_for_knowledge",
    "asks_how_to",
    "asks_in_general",
    "follows_on",
    "forbids_changes",
    "forbids_looking",
    "looked_into",
    "looked_last_turn",
    "only_repeats",
    "round_choice",
    "speaks_of_the_notebook",
    "step_choice",
    "takes_acting_out",
    "turn_calls",
    "weighs_acting",
]


NO_TOOL = "none"
# The share of the first token that must go to answering for the model to answer in words:
# a small model's first token leans to tools even for "capital of France?" (a third of it), and
# to answering for what it has to look up only rarely. Tuned on the eval's dev split
# (bench/eval_split_dev.py), never on its test split.
ANSWER_SHARE = 0.2
# After a tool result the question is whether to look again: only when the model is sure.
ANSWER_SHARE_AFTER_RESULT = 0.02
# A message that names a file, folder or variable that is here leans to looking: it answers
# only when the model leans to answering itself.
ANSWER_SHARE_NAMED = 0.5
# A question about how to do something, naming nothing that is here, is general knowledge
# unless the model is nearly sure it must look.
ANSWER_SHARE_HOW_TO = 0.05


@dataclass(frozen=True)
class Leaning:
    """What tips the weighing of a first step: the round follows a tool result; the user's
    message names something that is here (`nbchat.tools.offer.named_in`)."""

    after_result: bool = False
    named: bool = False
    how_to: bool = False  # asks how to do something, or in general (`asks_for_knowledge`)
    # The message asks for a change (`asks_for_a_change`) and nothing that changes things has
    # run in this turn yet: after reading, the change is still to make. Asked to put an item on
    # a list, a 1.5B model read the list, answered at once and said the item was there.
    change_pending: bool = False
    # The message carries on from a turn that looked at something (`follows_on` after
    # `looked_last_turn`): "and the config?" asks the same of something else, which the
    # answer before it did not read. A 1.5B model answered such follow-ups from the turn
    # before, naming a database and a helper function nobody had read.
    follows_a_look: bool = False

    @property
    def answer_share(self) -> float:
        if self.after_result:
            return ANSWER_SHARE if self.change_pending else ANSWER_SHARE_AFTER_RESULT
        if self.named or (self.follows_a_look and not self.how_to):
            return ANSWER_SHARE_NAMED
        return ANSWER_SHARE_HOW_TO if self.how_to else ANSWER_SHARE


# "don't run", "do NOT delete anything", "never touch", "without changing", "no need to run".
NEGATION = r"(?:\bdo\s+not|\bdon['’]?t|\bnever|\bwithout|\bno\s+need\s+to)"
# Verb stems, so "changing", "deleting", "written" count too.
ACTION = (
    r"(?:run|execut|launch|start|delet|remov|rm|eras|chang|edit|modif|touch|writ|overwrit|"
    r"mov|renam|instal|commit|push)"
)
GAP = r"[\s,;:]+"  # between words: spaces and the punctuation of an aside
# "I don't know how to run it", "don't forget to run the tests" forbid nothing.
NOT_A_BAN = r"(?!(?:know|understand|remember|forget|think|see|get)\b)"
FORBIDS = re.compile(
    rf"{NEGATION}{GAP}{NOT_A_BAN}(?:[\w'’-]{{1,40}}{GAP}){{0,3}}?{ACTION}\w*\b", re.IGNORECASE
)


def forbids_changes(text: str) -> bool:
    """True when `text` tells the assistant not to run, delete or change something."""
    return FORBIDS.search(text) is not None


# "don't check anything", "without opening any files", "never search my files", "don't use
# tools", "no tools": the user asks for an answer without looking at all. Said of one
# thing ("don't read the tests, just app.py") or of everything else ("don't open anything
# else", "any other file"), it asks to look elsewhere: only what stands for everything here
# counts. Asked not to look in the workspace, a 1.5B model read config.yaml for a general
# question about a database's default port.
LOOK_VERB = r"(?:(?:look|check|open|read|search|peek|inspect|scan|brows)\w*|us(?:e|ing))"
EVERYTHING = (
    r"(?:(?:anything|any)\b(?!\s+(?:else|other|more)\b)|tools?\b|files\b"
    r"|my\s+(?:files|setup|stuff|workspace|project|folder)\b"
    r"|the\s+(?:workspace|files|notebook|project|repo|folder)\b)"
)
FORBIDS_LOOKING = re.compile(
    rf"{NEGATION}{GAP}(?:even{GAP}|really{GAP}|actually{GAP})?{LOOK_VERB}{GAP}"
    rf"(?:(?:at|in|into|through|up){GAP})?{EVERYTHING}"
    r"|(?:^\W*|[.!?,;:]\s*)no\s+tools\b",  # said as an instruction, not "there are no tools for …"
    re.IGNORECASE,
)


def forbids_looking(text: str) -> bool:
    """True when `text` tells the assistant to answer without looking at anything here."""
    return FORBIDS_LOOKING.search(text) is not None


# "is it safe to run …", "would this be ok to delete", "is cleanup.sh dangerous to run",
# "should I run …", "what happens if I run …": a question whether to act, which running the
# thing would answer by doing it (asked whether a script was dangerous to run, a 1.5B model ran
# it). Asked, not said: "it's fine to run the tests" gives leave.
WEIGHS = re.compile(
    r"\b(?:is|are|would|will)\s+(?:[\w./'’-]{1,60}\s+){1,2}?(?:be\s+)?(?:really\s+|actually\s+)?"
    r"(?:safe|dangerous|ok|okay|fine|risky|harmful|wise|smart|a\s+good\s+idea|a\s+bad\s+idea)"
    rf"\s+to\s+{ACTION}"
    rf"|\bshould\s+(?:i|we)\s+{ACTION}"
    r"|\bwhat\s+(?:happens|would\s+happen|will\s+happen)\s+(?:if|when)\s+(?:i|we|you)\s+"
    rf"(?:{ACTION}|ran\b)",
    re.IGNORECASE,
)


# The question is asked at a message's start or its end (after a pasted script or log).
WEIGHS_REACH = 2_000


def weighs_acting(text: str) -> bool:
    """True when `text` (its first and last `WEIGHS_REACH` characters) asks whether running,
    deleting or changing something is safe or wise, or what it would do."""
    if len(text) > 2 * WEIGHS_REACH:
        text = text[:WEIGHS_REACH] + "\n" + text[-WEIGHS_REACH:]
    return WEIGHS.search(text) is not None


# "how do I …", "in bash, how can you …", "how to …" (within two words of the start), "what's
# the best way to …", "is there a way to …", and asking for a command, shortcut or flag that
# does something ("which command shows …", "is there a shortcut for …",
# "what's the keyboard shortcut for …", "jupyter shortcut to …", "git command for …"): asked
# near the start of the message (its first
# `HOW_TO_REACH` characters). "How does this function work", "how many rows" and "what command
# does the script run" ask about something, not how to do it.
HOW_TO = re.compile(
    r"\bhow\s+(?:do|can|could|would|should|might)\s+(?:i|you|one)\b"
    r"|^\W*(?:[\w'’-]+\W+){0,2}?how\s+to\b"  # not "I don't know how to run it"
    r"|\b(?:what['’]?s|what\s+is|is\s+there)\s+(?:the\s+|an?\s+)?"
    r"(?:best\s+|easiest\s+|simplest\s+|quickest\s+|right\s+|proper\s+|good\s+)?way\s+to\b"
    r"|\b(?:what['’]?s|what(?:\s+is)?|which|is\s+there)\s+(?:the\s+|an?\s+|any\s+)?"
    r"(?:[\w-]+\s+)?(?:command|shortcut|hotkey|keybinding|magic|syntax|flag|option|switch)s?\s+"
    r"(?:to|for|that|which|would|do|should|can|i|you)\b"
    r"|^\W*(?:[\w'’-]+\W+){0,2}?(?:keyboard\s+)?"  # "jupyter shortcut to …", "git command for …"
    r"(?:command|shortcut|hotkey|keybinding|magic|flag|option|switch|one[\s-]?liner|snippet|"
    r"regexp?|idiom)s?\s+(?:to|for|that)\b",
    re.IGNORECASE,
)
HOW_TO_REACH = 80


def asks_how_to(text: str) -> bool:
    """True when `text` asks how to do something: for instructions, not for an action."""
    return HOW_TO.search(text[:HOW_TO_REACH]) is not None


# "add …", "please put …", "can you rename …", "ok now fix …": a request to change something,
# its verb within the first few words (`CHANGE_REACH` characters).
CHANGE = re.compile(
    r"^\W*(?:(?:please|pls|can|could|would|will|you|go|ahead|and|now|ok|okay|then|also|just)"
    r"\W+){0,4}"
    r"(?:add|put|append|insert|write|create|change|edit|fix|rename|delete|remove|replace|update|"
    r"set|move|save|correct)\b",
    re.IGNORECASE,
)
CHANGE_REACH = 80


# "in general", "generally speaking", "typically": the user asks about such things at large,
# not about the ones here. Anywhere in the message's start (`GENERAL_REACH`), often at its end:
# asked which sections a README should have, generally, a 1.5B model read the README here.
# Not in a message pointing at something of ours (`points_at_something`): "the server
# generally dies at startup, check the log" asks to look.
GENERAL = re.compile(
    r"\b(?:in\s+general|generally|general\s+question|typically|in\s+theory)\b", re.IGNORECASE
)
GENERAL_REACH = 400


def asks_in_general(text: str) -> bool:
    """True when `text` asks about things in general rather than the ones here."""
    return GENERAL.search(text[:GENERAL_REACH]) is not None and not points_at_something(text)


def asks_for_knowledge(text: str) -> bool:
    """True when `text` asks how to do something (`asks_how_to`) or about things in general
    (`asks_in_general`): for instructions or knowledge, not for an action or a look."""
    return asks_how_to(text) or asks_in_general(text)


def asks_for_a_change(text: str) -> bool:
    """True when `text` asks the assistant to change something (and neither forbids changes
    nor asks how to)."""
    head = text[:CHANGE_REACH]
    return CHANGE.search(head) is not None and not forbids_changes(text) and not asks_how_to(head)


# "and the tests?", "ok, what about utils", "how about the other one", "same for the log": a
# message that opens by carrying on from the one before, after a word of thanks or assent.
FOLLOWS_ON = re.compile(
    r"^\W*(?:(?:ok+(?:ay)?|cool|nice|great|thanks|thx|right|so|alright)\W+){0,2}"
    r"(?:and|also|(?:what|how)\s+about|what\s+of|same\s+(?:for|with)|now)\b",
    re.IGNORECASE,
)
FOLLOWS_ON_REACH = 40


# "go through the logs", "check our tests", "read the logs", "anything odd in the logs?":
# what the user asks to be looked into, by its name. Not when the word is said as a folder
# ("the logs folder", "logs/"): then the folder itself is asked about.
LOOKS_INTO = re.compile(
    r"\b(?:look(?:ing)?\s+(?:at|into|through|over|in)|check(?:ing)?(?:\s+out)?|read(?:ing)?|"
    r"open(?:ing)?|go(?:ing)?\s+(?:through|over)|scan(?:ning)?|dig(?:ging)?\s+(?:into|through)|"
    r"in)\s+(?:(?:the|our|my|those|these|all|of)\s+){0,2}"
    r"([\w-]+)(?![\w-])(?!\s*(?:/|folders?\b|dir\b|directory\b|directories\b))",
    re.IGNORECASE,
)
LOOKS_REACH = 400


def looked_into(text: str) -> set[str]:
    """The words `text` (its first `LOOKS_REACH` characters) asks to have looked into ("check
    the logs" → "logs"), lower case."""
    return {word.lower() for word in LOOKS_INTO.findall(text[:LOOKS_REACH])}


def follows_on(text: str) -> bool:
    """True when `text` opens by carrying on from the message before it ("and …", "what
    about …")."""
    return FOLLOWS_ON.search(text[:FOLLOWS_ON_REACH]) is not None


def looked_last_turn(rows: Sequence[Row]) -> bool:
    """Whether the turn before the user's last message called a tool (`turn_calls` of the
    rows before that message, when a user's message starts them)."""
    last = last_user_index(rows)
    if last is None or last_user_index(rows[:last]) is None:
        return False
    return any(any(True for _ in stored_calls(row)) for row in turn_calls(rows[:last]))


def allowed_tools(names: Sequence[str], dangerous: Collection[str], text: str) -> list[str]:
    """`names` without the dangerous ones when the user's `text` forbids changes, asks how to
    do something or about things in general, or asks whether to act (`weighs_acting`); none
    when it says not to look at anything (`forbids_looking`)."""
    if forbids_looking(text):
        return []
    if not takes_acting_out(text):
        return list(names)
    return [name for name in names if name not in dangerous]


def takes_acting_out(text: str) -> bool:
    """Whether the user's `text` leaves the dangerous tools out of its turn: it forbids
    changes, asks how to do something or about things in general, or whether to act."""
    return forbids_changes(text) or asks_for_knowledge(text) or weighs_acting(text)


def round_choice(
    rows: Sequence[Row], *, number: int, rounds: int, requested: str | None
) -> str | None:
    """The `tool_choice` of round `number` of `rounds` (1-based) when rules decide it: the
    caller's request on the first round, "none" on the last round or after repeated calls;
    None when the model's first step decides."""
    if number == 1:
        return requested
    if number >= rounds or only_repeats(rows):
        return NO_TOOL
    return None


def step_choice(chosen: str, answer_share: float, leaning: Leaning = Leaning()) -> str:
    """The round's `tool_choice` from the model's first step: "none", or the tool it named.
    A first token giving answering `leaning.answer_share` of its probability or more
    answers."""
    if chosen == NO_TOOL or answer_share >= leaning.answer_share:
        return NO_TOOL
    return chosen


def turn_calls(rows: Sequence[Row]) -> list[Row]:
    """The assistant rows holding calls since the user's last message, in order."""
    start = last_user_index(rows)
    turn = rows if start is None else rows[start + 1 :]
    return [row for row in turn if row.role == "assistant_full"]


def only_repeats(rows: Sequence[Row]) -> bool:
    """True when the turn's last assistant row only repeats calls (same tool, same arguments)
    that an earlier row of the same turn made."""
    made = turn_calls(rows)
    if len(made) < 2:
        return False
    earlier = {_key(name, args) for row in made[:-1] for _id, name, args in stored_calls(row)}
    last = [_key(name, args) for _id, name, args in stored_calls(made[-1])]
    return bool(last) and all(key in earlier for key in last)


def _key(name: str, arguments: object) -> str:
    return f"{name}:{json.dumps(arguments, sort_keys=True)}"


@dataclass(frozen=True)
class Here:
    """What is here for a call to aim at: the workspace's files (paths as the overview lists
    them), the notebook's variables, the names the workspace's code defines with their file."""

    files: frozenset[str] = frozenset()
    variables: frozenset[str] = frozenset()
    symbols: Mapping[str, str] = field(default_factory=dict)
    # Whether a distribution of that name is installed where the kernel runs (asked only of a
    # name that is no variable and nothing the code defines), and that kernel's interpreter.
    installed: Callable[[str], bool] = field(default=lambda name: False)
    python: str = "python"
    # Whether a file here is small enough to read whole (a search inside it shows less).
    small: Callable[[str], bool] = field(default=lambda path: False)
    # Whether a path names anything in the workspace (a search under one that does not searches
    # the whole workspace instead).
    exists: Callable[[str], bool] = field(default=lambda path: True)


def _file_named(pattern: object, here: Here) -> str | None:
    """The file here that a search `pattern` is the name of: its path (`src/app.py`, `./src/app.py`)
    or, when only one file has it, its last part (`server.log`). None for any other pattern."""
    text = str(pattern or "").strip().removeprefix("./")
    if text in here.files:
        return text
    if "/" in text or not text:
        return None
    found = [path for path in here.files if path.rsplit("/", 1)[-1] == text]
    return found[0] if len(found) == 1 else None


def _small_file(path: object, here: Here) -> str | None:
    """The file here a search is bounded to, when it is small enough to read whole."""
    text = str(path or "").strip().removeprefix("./")
    return text if text in here.files and here.small(text) else None


# The tools that act on the notebook's cells: turned to reading a file the message names when
# the message says nothing of the notebook (asked to add a function to a file or an item to a
# list, a 1.5B model inserted a notebook cell holding it; asked what a function of the code
# would return, it read cell 1).
CELL_TOOLS = frozenset({"insert_cell", "edit_cell", "run_cell", "read_cell"})
NOTEBOOK_WORDS = frozenset({"cell", "cells", "notebook", "notebooks", "jupyter", "kernel"})
WORDS = re.compile(r"[A-Za-z]+")
NOTEBOOK_SCAN = 4_000
# What `run_cell` takes: a cell's id or its position. Anything else is code (a 1.5B model sent
# an expression as the cell to run); it runs as `run_code`, the tool for code.
CELL_REFERENCE = re.compile(r"[\w-]{1,64}")


def speaks_of_the_notebook(text: str) -> bool:
    """True when `text` (its first `NOTEBOOK_SCAN` characters) says cell, notebook, Jupyter or
    kernel."""
    return any(word.lower() in NOTEBOOK_WORDS for word in WORDS.findall(text[:NOTEBOOK_SCAN]))


# A distribution's name as pip spells it: nothing a shell would read as more than a word.
PACKAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def aimed_call(
    name: str,
    arguments: Mapping[str, Any],
    here: Here,
    allowed: Collection[str],
    *,
    named_files: Sequence[str] = (),
    sole_files: Mapping[str, str] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The call to make for a first step's `name(arguments)`: itself, or the tool that looks at
    what it aimed at (`read_file` of a file, `describe_variable` of a notebook variable; see
    the module docstring); only to an `allowed` tool. `named_files`: the workspace files the
    user's message names (by path, or by a name their code defines, else the one file of a
    folder it names in the singular), when it says nothing of the notebook
    (`speaks_of_the_notebook`);
    `sole_files`: each folder the message names (`logs/`) that holds one file only, that file."""
    if name in CELL_TOOLS and len(named_files) == 1 and "read_file" in allowed:
        return "read_file", {"path": named_files[0]}
    if name == "list_files" and "read_file" in allowed:
        folder = str(arguments.get("path", "")).strip().removeprefix("./").rstrip("/") + "/"
        if sole_files and folder in sole_files:
            # "check the log", with one file in logs/: a 1.5B model listed the folder, then
            # wrote log lines it had never read.
            return "read_file", {"path": sole_files[folder]}
    if name == "run_cell" and "run_code" in allowed:
        cell = str(arguments.get("cell", "")).strip()
        if cell and not CELL_REFERENCE.fullmatch(cell):
            timeout = {"timeout": arguments["timeout"]} if "timeout" in arguments else {}
            return "run_code", {"code": cell, **timeout}
    if name == "search_files" and not here.exists(str(arguments.get("path", "."))):
        # Told a note was "somewhere in the project", a 1.5B model searched "./project", which
        # is not here, and was told nothing matched.
        arguments = {key: value for key, value in arguments.items() if key != "path"}
    if name == "search_files" and "describe_variable" in allowed:
        pattern = str(arguments.get("pattern", "")).strip()
        if pattern in here.variables and pattern not in here.symbols:
            return "describe_variable", {"name": pattern}
    if "read_file" in allowed:
        if name == "search_files" and (file := _file_named(arguments.get("pattern"), here)):
            return "read_file", {"path": file}
        if name == "search_files" and (file := _small_file(arguments.get("path"), here)):
            return "read_file", {"path": file}
        if name == "list_files":
            path = str(arguments.get("path", "")).removeprefix("./")
            if path in here.files:
                return "read_file", {"path": path}
        if name == "describe_variable":
            variable = str(arguments.get("name", ""))
            if variable not in here.variables and variable in here.symbols:
                return "read_file", {"path": here.symbols[variable]}
            if variable not in here.variables and (file := _file_named(variable, here)):
                return "read_file", {"path": file}
    if name == "describe_variable" and "run_shell" in allowed:
        package = str(arguments.get("name", ""))
        if (
            package not in here.variables
            and package not in here.symbols
            and PACKAGE_NAME.fullmatch(package)
            and here.installed(package)
        ):
            return "run_shell", {"command": f"{shlex.quote(here.python)} -m pip show {package}"}
    return name, dict(arguments)

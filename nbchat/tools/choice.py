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
  by in pandas"); one that names nothing here, nothing of the user's ("my", "our", "this")
  and not the notebook is not weighed at all: `nbchat.conversation.routing` answers it in
  words;
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
function to a file, it inserted a notebook cell holding it); a read of the notebook's cells,
for a message naming one of its variables and not the notebook, describes that variable;
`run_cell` given code instead of a cell runs it as `run_code`; a search under a folder that is
not here searches the whole workspace; a listing of a folder the message names in the singular
only ("the log"), or asks to have looked into by its own name ("go through the logs",
`looked_into`), that holds one file only reads that file.

What the user's message asks for (`forbids_changes`, `asks_how_to`, `follows_on`, ...) is read
from its words by `nbchat.tools.asking`.

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
from nbchat.tools.asking import forbids_looking, takes_acting_out

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
    "looked_last_turn",
    "only_repeats",
    "round_choice",
    "step_choice",
    "turn_calls",
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
CELL_READS = frozenset({"read_cell", "list_cells"})
# What `run_cell` takes: a cell's id or its position. Anything else is code (a 1.5B model sent
# an expression as the cell to run); it runs as `run_code`, the tool for code.
CELL_REFERENCE = re.compile(r"[\w-]{1,64}")


# A distribution's name as pip spells it: nothing a shell would read as more than a word.
PACKAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def aimed_call(
    name: str,
    arguments: Mapping[str, Any],
    here: Here,
    allowed: Collection[str],
    *,
    named_files: Sequence[str] = (),
    named_variables: Sequence[str] = (),
    sole_files: Mapping[str, str] | None = None,
    newest_cell: bool = False,
) -> tuple[str, dict[str, Any]]:
    """The call to make for a first step's `name(arguments)`: itself, or the tool that looks at
    what it aimed at (`read_file` of a file, `describe_variable` of a notebook variable; see
    the module docstring); only to an `allowed` tool. `named_files`: the workspace files the
    user's message names (by path, or by a name their code defines, else the one file of a
    folder it names in the singular), when it says nothing of the notebook
    (`speaks_of_the_notebook`); `named_variables`: the notebook's variables it names, when
    it says nothing of the notebook either;
    `sole_files`: each folder the message names (`logs/`) that holds one file only, that file;
    `newest_cell`: the message asks about the newest cell run (a `read_cell` reads -1)."""
    if name in CELL_TOOLS and len(named_files) == 1 and "read_file" in allowed:
        return "read_file", {"path": named_files[0]}
    if name == "read_cell" and newest_cell and not named_variables:
        return "read_cell", {**arguments, "number": -1}
    if name in CELL_READS and len(named_variables) == 1 and "describe_variable" in allowed:
        # Asked to show a DataFrame of the notebook by its name, a 1.5B model read the first cell.
        return "describe_variable", {"name": named_variables[0]}
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

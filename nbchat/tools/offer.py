"""A small model's first step: what it is shown to choose (the offer). Which tools each round may
use and how its answer is weighed: `nbchat.tools.choice`.

The offer is a short prompt of its own, apart from the chat's. On the embedded model (and any
llama.cpp server with `tools_on_request`) the chat's requests carry no tool schemas. Qwen's chat
template renders schemas as ~800 tokens of JSON and shows the call format with doubled braces, which
the 1.5B copies (`{{"name": ...}}}}`); offered them, it calls a tool for "17 × 23" and invents
`add`; and told about tools in the chat's own prompt, it answers "you can use the `read_file` tool"
instead of answering (issue 19). So whether a turn looks first is asked separately
(`nbchat.llm.firststep`), on the messages built here:

- `ROUTER_PROMPT`: what the model decides and when to look, with each of the turn's tools as
  one line (`describe_tools`; all of them, whatever the message allows: the caller's grammar
  leaves out the ones it may not use), then short example exchanges (`EXAMPLES`, none of them
  a user's words from any eval; two of them follow-ups answered from the conversation), always
  the same, so the server keeps them in its prompt cache;
- the workspace's listing (the overview the chat shows, `WorkspaceOverview`), so a path the
  user half-names can be found, and what other tools can look at (the notebook's variable
  names, `Tool.context`);
- the conversation so far, briefly (`recent_exchange`): the last turn's words, the calls made
  since and the start of their results, so "open that file" or "now the tests" can be followed;
- what the message names of the workspace and the notebook (`named_in`: "the logs" names
  `logs/`, "my todo list" `todo.md`, "big" the variable `big`), which also makes the caller lean
  to looking (the choice, below);
- which files hold the message's rarer words (`nbchat.tools.filewords`: a meeting's name
  is in `notes.txt`), only for the model to read: it does not lean the choice;
- the user's message; the reply is then opened as `{"tool": "` for the model to continue.

The chat's own prompt stays the user's prompt (and the overview): the answer is written as in
any chat, and a call, once chosen, is written there too, forced to that tool's schema.

`points_at_something` tells whether a message points at a particular thing (the, my, this…), for
the caller to decide whether to show which files hold its words.

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nbchat.history import Row, last_user_text, stored_calls

__all__ = [
    "EXAMPLES",
    "FOLLOW_UPS",
    "ROUTER_PROMPT",
    "brief",
    "describe_tools",
    "named_in",
    "paths_named",
    "points_at_something",
    "points_at_theirs",
    "speaks_of_their_own",
    "recent_exchange",
    "router_messages",
    "specific_words",
    "symbols_in",
    "typed_paths",
    "with_slips",
]


ROUTER_PROMPT = (
    "You choose the first step of an assistant that lives in the user's Jupyter notebook. "
    "Reply with one JSON object:\n"
    '- {{"tool": "none"}} when the message can be answered from general knowledge or from the '
    "conversation: facts, arithmetic, explaining code, commands or concepts, writing new code;\n"
    '- {{"tool": "<name>", "arguments": {{...}}}} when the answer depends on what the user\'s '
    "own files, their machine (installed versions, disk space, the current folder) or their "
    "live notebook (variables, cells, errors) hold. Never guess those: look.\n"
    "If the user says not to run or change something, do not choose a tool that would.\n"
    "Tools:\n{tools}"
)
# Example exchanges, written for this prompt (none of them a user's words from any eval): half
# answer, including "how do I" questions that name files or commands; half look, one per kind of
# tool, a question about what a file or a variable holds read from it rather than searched for.
EXAMPLES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("how do I merge two dicts in python?", {"tool": "none"}),
    ("is there a Dockerfile in here", {"tool": "list_files", "arguments": {"path": "."}}),
    ("who discovered penicillin", {"tool": "none"}),
    ("what's in setup.cfg", {"tool": "read_file", "arguments": {"path": "setup.cfg"}}),
    ("how do I count the lines of a file with awk", {"tool": "none"}),
    ("which node version have I got", {"tool": "run_shell", "arguments": {"command": "node -v"}}),
    ("45 divided by 9?", {"tool": "none"}),
    (
        "is git even installed on this machine",
        {"tool": "run_shell", "arguments": {"command": "git --version"}},
    ),
    (
        "where do we call parse_args?",
        {"tool": "search_files", "arguments": {"pattern": "parse_args"}},
    ),
    ("what does `git rebase -i` do", {"tool": "none"}),
    (
        "what base image does the Dockerfile use",
        {"tool": "read_file", "arguments": {"path": "Dockerfile"}},
    ),
    ("write a bash loop that renames *.jpeg to *.jpg", {"tool": "none"}),
    ("which columns has df got", {"tool": "describe_variable", "arguments": {"name": "df"}}),
    ("what's the difference between a process and a thread", {"tool": "none"}),
    ("why did that cell crash?", {"tool": "last_error", "arguments": {}}),
)
# Follow-ups, with the conversation as the first step sees it: answered from what was said; and
# a message naming what the workspace's code defines, looked up in its file.
FOLLOW_UPS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "The message names: parse_config (defined in the file app/settings.py).",
        "what does parse_config return",
        {"tool": "read_file", "arguments": {"path": "app/settings.py"}},
    ),
    (
        "Conversation so far:\nuser: what's the tallest mountain in Africa?\n"
        "assistant: Kilimanjaro, 5,895 m.",
        "and how long does it take to climb",
        {"tool": "none"},
    ),
    (
        "Conversation so far:\nuser: what does requirements.txt pin?\n"
        'assistant called read_file {"path": "requirements.txt"}\nresult: numpy==1.26.4\n'
        "assistant: It pins numpy 1.26.4.",
        "is that version still supported?",
        {"tool": "none"},
    ),
)
# The conversation the first step sees: this many characters of a message, of a result.
MESSAGE_CHARS = 400
RESULT_CHARS = 200
# What a message names of the workspace and the notebook: read from its start, a few at most.
MESSAGE_SCAN = 4_000
MAX_NAMED = 5
WORD = re.compile(r"[A-Za-z_][\w.-]*")
QUOTED = re.compile(r"`([^`\n]{1,80})`")


def describe_tools(schemas: Sequence[Mapping[str, Any]]) -> str:
    """One line per tool: `- name(required, optional?): first line of its description`."""
    lines = []
    for schema in schemas:
        function = schema.get("function") or {}
        parameters = function.get("parameters") or {}
        required = set(parameters.get("required") or ())
        names = [p if p in required else f"{p}?" for p in parameters.get("properties") or {}]
        summary = str(function.get("description") or "").strip().split("\n", 1)[0]
        lines.append(f"- {function.get('name')}({', '.join(names)}): {summary}")
    return "\n".join(lines)


def named_in(
    text: str,
    paths: Sequence[str],
    names: Sequence[str],
    symbols: Mapping[str, str] | None = None,
    columns: Mapping[str, str] | None = None,
    *,
    stems: bool = True,
) -> list[str]:
    """What the user's `text` names of what is here, each with what it is: a workspace path
    by its last part (`config.yaml`, `logs/`) or that part's stem, singular or plural
    (`config`, `log`), a notebook variable (`sales`), a name the workspace's code defines
    (`greet`, with its file), a column of a notebook DataFrame (`columns`: column → variable;
    a message about revenue names `sales`, with a column `revenue`), as a word (case aside), not
    only after "a" or "an" (asking what a setup.cfg is for asks about any such file); stems and
    names of under 3 letters only in backticks; with `stems` off, a path only by its whole
    last part. A word typed with one slip (`with_slips`: "slugfy", "requirments.txt") names
    what it slipped from. One linear pass over the words; at most `MAX_NAMED`. What each is tells a
    small model which tool looks at it: a 1.5B model asked about `greet` described a notebook
    variable of that name."""
    known = [*_path_names(paths), *names, *(symbols or {})]
    words = with_slips(specific_words(text[:MESSAGE_SCAN]), known)
    quoted = {word.lower() for word in QUOTED.findall(text[:MESSAGE_SCAN])}
    found: list[str] = []
    by_name = _paths_in(words | quoted, paths, stems=stems)
    if stems:
        by_name += [path for path in typed_paths(text, paths) if path not in by_name]
    for path in by_name:
        kind = "a folder in the workspace" if path.endswith("/") else "a file in the workspace"
        found.append(f"{path} ({kind})")
    if stems and speaks_of_dependencies(words):
        found += [
            f"{path} (a file in the workspace listing the project's dependencies)"
            for path in paths
            if path not in by_name and is_manifest(path)
        ]
    found += [
        f"{name} (a variable in the notebook)"
        for name in names
        if name.lower() in (words if len(name) >= 3 else quoted)
    ]
    for name, where in symbols_in(words, symbols or {}):
        found.append(f"{name} (defined in the file {where})")
    for column, variable in (columns or {}).items():
        if len(column) >= 3 and column.lower() in words:
            found.append(f"{variable} (a variable in the notebook, with a column {column})")
    return found[:MAX_NAMED]


# Words that speak of what a project depends on; "packages" and "libraries" only when said of
# ours ("are our packages up to date"): what packages are good for plotting asks nothing
# of the workspace.
DEPENDENCY_WORDS = frozenset(
    {"deps", "dependencies", "dependency", "pinned", "pin", "pins", "pinning", "requirements"}
)
PACKAGE_WORDS = frozenset({"packages", "libraries", "libs"})
OURS = frozenset({"our", "we", "we're", "were", "us", "project", "project's", "repo"})
# The files in which projects declare their dependencies (`requirements*.txt` too).
MANIFESTS = frozenset(
    {
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "pipfile",
        "environment.yml",
        "environment.yaml",
        "package.json",
        "cargo.toml",
        "go.mod",
        "gemfile",
    }
)


def speaks_of_dependencies(words: set[str]) -> bool:
    """Whether `words` (lower-cased) speak of the project's dependencies: "deps", "pinned",
    "dependencies", or packages or libraries said to be ours."""
    return bool(words & DEPENDENCY_WORDS) or bool(words & PACKAGE_WORDS and words & OURS)


def is_manifest(path: str) -> bool:
    """Whether a workspace file is one that declares a project's dependencies."""
    if path.endswith("/"):
        return False
    last = _last_and_stem(path)[0].lower()
    return last in MANIFESTS or (last.startswith("requirements") and last.endswith(".txt"))


def symbols_in(words: set[str], symbols: Mapping[str, str]) -> list[tuple[str, str]]:
    """The names the workspace's code defines (`symbols`: name → file) that `words` (lower-cased)
    hold, each with its file; names of under 3 letters never."""
    return [
        (name, where) for name, where in symbols.items() if len(name) >= 3 and name.lower() in words
    ]


def paths_named(text: str, paths: Sequence[str]) -> list[str]:
    """The workspace `paths` that `text` names (as `named_in` reads them), in their order."""
    words = with_slips(specific_words(text[:MESSAGE_SCAN]), _path_names(paths))
    quoted = {word.lower() for word in QUOTED.findall(text[:MESSAGE_SCAN])}
    return _paths_in(words | quoted, paths)


# A name this long is matched with a slip of typing too; shorter ones only as typed (a slip
# away from "greet" are "gret" and "egreet", but also every five-letter word one letter off).
SLIP_LENGTH = 6
SLIP_MAX = 64  # a longer name is matched only as typed


def with_slips(words: set[str], names: Iterable[str]) -> set[str]:
    """`words` and each of `names` (of `SLIP_LENGTH` to `SLIP_MAX` letters, lower-cased) that
    one of them is with one slip of typing: a letter left out, not the last ("slugfy" for
    "slugify"; a last letter left out is a word's other form, "value" for "values"), or two
    neighbouring letters swapped ("verison"). Each name's slips are looked up among the
    words: time linear in the names (each bounded), whatever the words."""
    slipped: set[str] = set()
    for name in {name.lower() for name in names if SLIP_LENGTH <= len(name) <= SLIP_MAX}:
        if name in words:
            continue
        left_out = (name[:at] + name[at + 1 :] for at in range(len(name) - 1))
        swapped = (
            name[:at] + name[at + 1] + name[at] + name[at + 2 :]
            for at in range(len(name) - 1)
            if name[at] != name[at + 1]
        )
        if any(slip in words for slip in itertools.chain(left_out, swapped)):
            slipped.add(name)
    return words | slipped


# Kinds of file a message names by their type ("the yaml", "our csv file", "that json"):
# each with the extensions it stands for. "Log" and "notebook" are not among them: "the log"
# names `logs/` already, and "the notebook" is the live one.
FILE_TYPES: Mapping[str, frozenset[str]] = {
    "yaml": frozenset({"yaml", "yml"}),
    "yml": frozenset({"yaml", "yml"}),
    **{kind: frozenset({kind}) for kind in ("csv", "tsv", "json", "toml", "ini", "xml", "sql")},
}


# "the json module", "the csv format", "the yaml library" speak of the type or its tools.
NOT_A_FILE = frozenset(
    {"module", "library", "lib", "package", "format", "spec", "standard", "syntax", "parser"}
)


def typed_paths(text: str, paths: Sequence[str]) -> list[str]:
    """The file of `paths` that `text` names by its type after a word pointing at it ("the
    yaml", "my csv"), when it is the only file of that type here: told a setting was "in the
    yaml", a 1.5B model searched the files for a word of the question instead. One pass over
    the words of the message's start (`MESSAGE_SCAN` characters)."""
    kinds: set[str] = set()
    previous, said = "", ""  # `said`: a type just named, kept unless the next word is a tool's
    for match in WORD.finditer(text[:MESSAGE_SCAN]):
        word = match.group().lower()
        if said and word not in NOT_A_FILE:
            kinds |= FILE_TYPES[said]
        said = word if previous in POINTING and word in FILE_TYPES else ""
        previous = word
    if said:
        kinds |= FILE_TYPES[said]
    if not kinds:
        return []
    by_type: dict[str, list[str]] = {}
    for path in paths:
        last = _last_and_stem(path)[0]
        if "." in last and not path.endswith("/"):  # a folder is of no type
            by_type.setdefault(last.rsplit(".", 1)[1].lower(), []).append(path)
    found = [found[0] for kind in sorted(kinds) if len(found := by_type.get(kind, [])) == 1]
    return found if len(found) == 1 else []


def _last_and_stem(path: str) -> tuple[str, str]:
    """A workspace path's last part (`server.log`, `logs` for `logs/`) and that part's stem."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return last, last.split(".", 1)[0]


def _path_names(paths: Sequence[str]) -> list[str]:
    """What a word may name a path by: each path's last part and that part's stem."""
    return [name for path in paths for name in _last_and_stem(path)]


def _paths_in(words: set[str], paths: Sequence[str], *, stems: bool = True) -> list[str]:
    """The `paths` one of `words` names: by the last part, or (with `stems`) by that part's
    stem, singular or plural, when the stem has 3 letters or more."""
    found = []
    for path in paths:
        last, stem = (part.lower() for part in _last_and_stem(path))
        if stems and len(stem) >= 3:
            forms = {last, stem, stem + "s", stem.removesuffix("s")}
        else:
            forms = {last}
        if forms & words:
            found.append(path)
    return found


# "a log file", "an app.py": any such thing, not the one here (what is a setup.cfg for?).
INDEFINITE = frozenset({"a", "an"})


def specific_words(text: str) -> set[str]:
    """The words of `text`, lower-cased, but for a word said only after "a" or "an" (read to
    `MESSAGE_SCAN` characters by the callers here)."""
    words: set[str] = set()
    previous = ""
    for match in WORD.finditer(text):
        word = match.group().lower()
        if previous not in INDEFINITE:
            words.add(word)
        previous = word
    return words


def router_messages(
    schemas: Sequence[Mapping[str, Any]],
    rows: Sequence[Row],
    *,
    workspace: str = "",
    notes: Sequence[str] = (),
    named: Sequence[str] = (),
    found: str = "",
) -> list[dict[str, Any]]:
    """The messages the first step is asked on (the opened reply is added by the caller):
    the prompt and examples (the same every time), the workspace and what the tools can see
    (`notes`: the notebook's variable names), the conversation so far in brief, what the
    message names of those (`named_in`), which files hold its words (`found`,
    `nbchat.tools.filewords`), and the user's last message."""
    names = {str((schema.get("function") or {}).get("name")) for schema in schemas}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": ROUTER_PROMPT.format(tools=describe_tools(schemas))}
    ]
    for text, step in EXAMPLES:
        if step["tool"] == "none" or step["tool"] in names:
            messages.append({"role": "user", "content": text})
            messages.append({"role": "assistant", "content": json.dumps(step)})
    for context, text, step in FOLLOW_UPS:
        if step["tool"] != "none" and step["tool"] not in names:
            continue
        messages.append({"role": "system", "content": context})
        messages.append({"role": "user", "content": text})
        messages.append({"role": "assistant", "content": json.dumps(step)})
    mentions = f"The message names: {', '.join(named)}." if named else ""
    parts = (workspace, *notes, recent_exchange(rows), mentions, found)
    context = "\n".join(part for part in parts if part)
    if context:
        messages.append({"role": "system", "content": context})
    last_user = last_user_text(rows)
    messages.append({"role": "user", "content": brief(last_user, MESSAGE_CHARS)})
    return messages


def recent_exchange(rows: Sequence[Row]) -> str:
    """The conversation before the user's last message, in brief: the turn before it (its
    message and its answer), then the calls made since that message and how their results
    begin. "" at the start of a chat."""
    users = [i for i, row in enumerate(rows) if row.role == "user"]
    if not users:
        return ""
    start = users[-2] if len(users) > 1 else users[-1]
    lines = []
    for index in range(start, len(rows)):
        row = rows[index]
        if row.role == "user" and index != users[-1]:
            lines.append(f"user: {brief(row.content, MESSAGE_CHARS)}")
        elif row.role == "assistant" and row.content.strip():
            lines.append(f"assistant: {brief(row.content, MESSAGE_CHARS)}")
        elif row.role == "assistant_full":
            for _id, name, arguments in stored_calls(row):
                lines.append(f"assistant called {name} {json.dumps(arguments)[:MESSAGE_CHARS]}")
        elif row.role == "tool":
            lines.append(f"result: {brief(row.content, RESULT_CHARS)}")
    return "Conversation so far:\n" + "\n".join(lines) if lines else ""


def brief(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters (cut with "…"); linear in `limit`."""
    text = " ".join(text[: limit * 2].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Words that point at a particular thing, the user's or one already in the conversation: "the
# weekly meeting", "my todo list", "this project", "in here". A message with none of them asks
# about things in general. Not "I", which general questions use as often ("I need a regex").
POINTING = frozenset({"the", "my", "our", "this", "these", "that", "those", "here", "we"})


def points_at_something(text: str) -> bool:
    """True when `text` (its first `MESSAGE_SCAN` characters) holds a word that points at a
    particular thing (`POINTING`)."""
    return _says_any(text, POINTING)


# The pointing words but "the", which how-to questions use of things at large as often as of
# the user's ("how do I split the string on its commas").
POINTING_AT_THEIRS = POINTING - {"the"}


# The words by which a message speaks of the user's own things: "my app", "our config",
# "what do we deploy with". Not "this" or "that", which point at the conversation as often.
OWNING = frozenset({"my", "our", "we", "us", "mine", "ours"})


def speaks_of_their_own(text: str) -> bool:
    """True when `text` (its first `MESSAGE_SCAN` characters) says my, our, we or us."""
    return _says_any(text, OWNING)


def points_at_theirs(text: str) -> bool:
    """True when `text` (its first `MESSAGE_SCAN` characters) holds a word that points at
    something of the user's or already in the conversation (`POINTING_AT_THEIRS`)."""
    return _says_any(text, POINTING_AT_THEIRS)


# "that" joining a clause points at nothing: "a shortcut that runs every cell", "a
# regex that matches emails", "make sure that it runs". It does when it stands for a thing: "is
# that above 8000", "what's in that file", "multiply that by 2". Told apart by the words around
# it: after a word that is no verb or preposition taking it as its object, and before a
# pronoun or a verb's "-s" or "-ed" form, it joins. Asked whether some magic shows what is
# defined, a 1.5B model listed the notebook's variables.
_TAKES_AN_OBJECT = """
is was are were does did do in at of on to about with for from by like into than open read
check run use see show fix explain mean means what whats multiply divide and or thanks thx
"""
TAKES_AN_OBJECT = frozenset(_TAKES_AN_OBJECT.split())
PRONOUNS = frozenset(["i", "you", "we", "it", "they", "he", "she"])


def _joins(previous: str, following: str) -> bool:
    """Whether "that" between `previous` and `following` (lower case, "" at an end) joins a
    clause rather than pointing at a thing."""
    if not previous or previous in TAKES_AN_OBJECT:
        return False
    return following in PRONOUNS or following.endswith(("s", "ed"))


def _says_any(text: str, words: frozenset[str]) -> bool:
    """Whether `text` (its first `MESSAGE_SCAN` characters) holds one of `words`, case aside;
    "that" only where it points at a thing (`_joins`)."""
    found = [word.lower() for word in WORD.findall(text[:MESSAGE_SCAN])]
    for index, word in enumerate(found):
        if word not in words:
            continue
        if word != "that":
            return True
        previous = found[index - 1] if index else ""
        following = found[index + 1] if index + 1 < len(found) else ""
        if not _joins(previous, following):
            return True
    return False

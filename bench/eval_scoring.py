"""How the default-model eval scores a turn: what one case's turn did (`Outcome`), the detectors
run over it, and one split's figures.

A turn is scored from what the user would see and what the tools returned:

- plain cases: answered without any tool call (and not with a call written as text);
- tool cases: the first call names an expected tool with arguments its schema accepts and that
  hold the expected values (`path`: the workspace entry it names, see `names_entry`; a string
  argument: a substring of it; any other value, such as `read_cell`'s `number`: its text equals
  the expected one), or reads the file whose code defines the name the case would search for,
  which is where that search leads (`Outcome.reads_definition`; the table counts apart the
  calls right by that alone, where the case lists no `read_file`);
- key facts: any of the case's facts in the final answer (the last assistant text of the turn);
- ungrounded claims (`ungrounded_claims`): the final answer states something only the workspace
  or the notebook could tell, with nothing behind it in the session's tool results, in the
  user's own messages, or in the names the system prompt showed (the workspace overview);
- empty answers after a tool round: a turn that ran a tool and whose text after the last tool
  result is empty or is a call written as JSON (`FAKE_CALL`).

Every pattern here runs in linear time on the model's text: one negated character class for
tokens, a version pattern anchored by a look-behind so it starts only at the head of a digit run.
Pure: no I/O, no model; `default_model_eval` runs the turns and hands the outcomes over.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from eval_cases import ANY_PATH, FILES, HIDDEN_FACTS, Case
from harness import Figure

from nbchat.tools import ToolRegistry

__all__ = [
    "ENTRIES",
    "FAKE_CALL",
    "GOALS",
    "Evidence",
    "Outcome",
    "file_names",
    "names_entry",
    "split_figures",
    "ungrounded_claims",
    "version_numbers",
]

# The goals, on the test split. Shares are of the cases the figure counts.
GOALS = {"plain": 0.95, "call": 0.85, "facts": 0.90}
# Tools whose `path` is a folder: when a case names none, the call must name the workspace.
FOLDER_TOOLS = frozenset({"list_files", "search_files"})
# In any quotes a model has mixed (`{"name': 'read_file', 'arguments': …}` from a 1.5B), or
# with the key's closing quote left out (`{"name: "read_file", …}`, the same model), or
# markdown's emphasis after the key (`{"name**: "list_notebook_variables", …}`, a 0.5B), or
# both keys in one (`{"name, arguments": {"path": "todo.md"}}`, the 1.5B).
Q = "[\"'“”‘’]"
FAKE_CALL = re.compile(
    rf"{Q}name[*_]*{Q}?[*_]*\s*:\s*{Q}[^\"'“”‘’]*{Q}\s*,\s*{Q}(arguments|parameters){Q}?\s*:"
    rf"|{Q}name\s*,\s*(arguments|parameters){Q}\s*:|<tool_call>"
)
# A token: a run of characters that are not space, quotes, brackets or list punctuation. One
# negated class, so a match never backtracks.
TOKEN = re.compile(r"[^\s`'\"()\[\]{}<>,;!?*|]+")
# `\d+\.\d+(\.\d+)?` that starts only where a digit run starts (not inside "12.34.56" or "v1.2"
# halfway): each start is tried once and each digit is read a bounded number of times.
VERSION = re.compile(r"(?<![\d.])\d+\.\d+(?:\.\d+)?")
# What a file name ends in when an answer names one ("notes.txt", "app.py", "server.log").
EXTENSIONS = frozenset(
    {
        "py",
        "ipynb",
        "txt",
        "md",
        "rst",
        "csv",
        "tsv",
        "json",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "env",
        "log",
        "sh",
        "bash",
        "zsh",
        "bat",
        "ps1",
        "ts",
        "html",
        "css",
        "sql",
        "db",
        "sqlite",
        "xml",
        "lock",
        "pdf",
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "zip",
        "gz",
        "tar",
        "whl",
        "parquet",
        "xlsx",
        "pkl",
        "c",
        "h",
        "cpp",
        "rs",
        "go",
        "java",
        "rb",
    }
)  # not "js": "Node.js" names no file
# The scratch workspace's entries (files and folders), relative to it.
# A definition at a line's start, and a name it could define (`reads_definition`).
DEFINITION = re.compile(r"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
ENTRIES = frozenset({*FILES, *(str(Path(name).parent) for name in FILES)} - {"."})


@dataclass
class Outcome:
    """What one case's turn did, as measured from its events. `tool_results`: every tool result
    of the case's session up to the end of the turn (a fact read in an earlier message of the
    same session is grounded too); `after_tool`: the assistant text after the turn's last tool
    result (None when the turn ran no tool); `shown`: the system prompt the turn was sent with."""

    case: Case
    first_token: float | None = None
    total: float = 0.0
    calls: list[tuple[str, str]] = field(default_factory=list)
    answer: str = ""
    texts: list[str] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)
    after_tool: str | None = None
    shown: str = ""
    hit_max_tokens: bool = False
    withdrawn: int = 0  # answers withdrawn as they streamed (asked again), for the verbose lines
    error: str = ""

    def as_record(self) -> dict[str, Any]:
        """Everything measured, as JSON values; the case is left to the caller to name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "case"}

    @classmethod
    def from_record(cls, case: Case, record: dict[str, Any]) -> Outcome:
        """The outcome `as_record` kept, for `case`: scored again exactly as when it ran."""
        measured = {f.name: record[f.name] for f in fields(cls) if f.name != "case"}
        measured["calls"] = [(name, arguments) for name, arguments in measured["calls"]]
        return cls(case, **measured)

    @property
    def fake_json(self) -> bool:
        return any(FAKE_CALL.search(text) for text in self.texts)

    @property
    def empty_after_tool(self) -> bool:
        """A tool ran and the user got no answer in words after its result."""
        if self.after_tool is None:
            return False
        return not self.after_tool.strip() or FAKE_CALL.search(self.after_tool) is not None

    def is_direct(self) -> bool:
        return not self.calls and bool(self.answer.strip()) and not self.fake_json

    def has_fact(self) -> bool:
        answer = self.answer.lower()
        return not self.case.fact or any(fact.lower() in answer for fact in self.case.fact)

    def is_right_call(self, registry: ToolRegistry, workspace: Path) -> bool:
        if not self.calls:
            return False
        name, values = self._first_call(registry)
        if values is None:
            return False
        expected = self.case.calls.get(name)
        if expected is None:
            return self.reads_definition(registry, workspace)
        wanted = dict(expected)
        if name in FOLDER_TOOLS:
            wanted.setdefault("path", ".")  # no folder named: the workspace itself
        return all(
            holds(key, values.get(key), want, workspace=workspace) for key, want in wanted.items()
        )

    def reads_definition(self, registry: ToolRegistry, workspace: Path) -> bool:
        """Whether the first call reads the file whose code defines the name the case would
        search for (`search_files` for "slugify": reading the file with `def slugify`), where the
        search leads: a right first call the case's list does not name."""
        name, values = self._first_call(registry)
        wanted = self.case.calls.get("search_files", {}).get("pattern", "")
        if name != "read_file" or values is None or not IDENTIFIER.fullmatch(wanted):
            return False
        path = values.get("path")
        entry = next((e for e in FILES if names_entry(path, e, workspace)), None)
        return entry is not None and defines(FILES[entry], wanted)

    def right_by_definition(self, registry: ToolRegistry, workspace: Path) -> bool:
        """Whether the first call is right only as a read of the file defining the name
        searched for (`reads_definition`): the case lists no `read_file` of its own."""
        return "read_file" not in self.case.calls and self.reads_definition(registry, workspace)

    def _first_call(self, registry: ToolRegistry) -> tuple[str, dict[str, Any] | None]:
        """The first call's tool and arguments; None for arguments that do not parse or that
        its schema refuses, a tool that is not there, or no call at all."""
        if not self.calls:
            return "", None
        name, arguments = self.calls[0]
        try:
            values = json.loads(arguments or "{}")
        except ValueError:
            return name, None
        if name not in registry or not isinstance(values, dict):
            return name, None
        return name, values if registry.accepts(name, values) else None

    def claims(self, entries: Collection[str], workspace: Path) -> list[str]:
        """This turn's ungrounded claims (see `ungrounded_claims`)."""
        evidence = Evidence(
            tool_results=(*self.tool_results, self.shown),
            user_texts=(*self.case.before, self.case.prompt),
            entries=frozenset(entries),
            workspace=str(workspace),
        )
        return ungrounded_claims(self.answer, evidence, tool_case=self.case.needs_tool)


def defines(code: str, name: str) -> bool:
    """Whether `code` defines `name` at a line's start: `def name`, `async def name`, `class
    name`."""
    for line in code.splitlines():
        match = DEFINITION.match(line)
        if match is not None and match.group(1) == name:
            return True
    return False


def holds(key: str, value: object, want: str, *, workspace: Path) -> bool:
    """One expected argument: `path` names the entry; a string contains `want`; any other
    value (a cell number) reads exactly `want`."""
    if key == "path":
        if want == ANY_PATH:
            return True
        return names_entry("." if value is None else value, want, workspace)
    if isinstance(value, str):
        return want.lower() in value.lower()
    return value is not None and str(value) == want


def names_entry(value: object, expected: str, workspace: Path) -> bool:
    """True when `value` names the workspace entry `expected` (a path relative to it): relative
    (`src/app.py`, `./src/app.py`) or absolute inside the workspace. `/path/to/src/app.py`
    names nothing here, so it does not count, though it holds the expected text."""
    if not isinstance(value, str) or not value.strip():
        return False
    text = os.path.normpath(value.strip())
    if os.path.isabs(text):
        for root in {os.path.normpath(workspace), os.path.realpath(workspace)}:
            if text == root or text.startswith(root.rstrip(os.sep) + os.sep):
                text = os.path.relpath(text, root)
                break
        else:
            return False
    return text == os.path.normpath(expected)


@dataclass(frozen=True)
class Evidence:
    """What may back a claim: the tool results the model had (and the system prompt it was
    shown), the user's own messages, and the workspace's real entries (relative paths)."""

    tool_results: tuple[str, ...]
    user_texts: tuple[str, ...]
    entries: frozenset[str] = frozenset()
    workspace: str = ""

    def read(self, text: str) -> bool:
        return any(text.lower() in result.lower() for result in self.tool_results)

    def said(self, text: str) -> bool:
        return any(text.lower() in message.lower() for message in self.user_texts)


def ungrounded_claims(answer: str, evidence: Evidence, *, tool_case: bool) -> list[str]:
    """What `answer` states with nothing behind it, each as `kind 'text'`:

    - a hidden fact (`HIDDEN_FACTS`: text only the workspace or notebook can tell) found in no
      tool result and not said by the user, in any case;
    - in a tool case, a file or path name found in no tool result, not said by the user, and
      not an existing entry whose name the user said (an invented or unread file);
    - in a tool case, a version number found in no tool result and not said by the user."""
    lowered = answer.lower()
    claims = [
        f"fact {fact!r}"
        for fact in HIDDEN_FACTS
        if fact.lower() in lowered and not evidence.read(fact) and not evidence.said(fact)
    ]
    if tool_case:
        claims += [
            f"file {name!r}" for name in file_names(answer) if not is_known_file(name, evidence)
        ]
        claims += [
            f"version {number!r}"
            for number in version_numbers(answer)
            if not evidence.read(number) and not evidence.said(number)
        ]
    return list(dict.fromkeys(claims))


def is_known_file(name: str, evidence: Evidence) -> bool:
    relative = name
    root = evidence.workspace.rstrip("/")
    if root and relative.startswith(root + "/"):
        relative = relative[len(root) + 1 :]
    relative = relative.removeprefix("./").rstrip("/")
    if not relative or evidence.read(relative) or evidence.said(relative):
        return True
    return relative in evidence.entries and evidence.said(os.path.basename(relative))


def file_names(answer: str) -> list[str]:
    """File-like names in `answer`: `name.ext` with a usual extension, or a path with `/` that
    starts like one (`./`, `../`, `~/`, `/x`), ends in `/` or ends in such a name. URLs and
    calls (`response.json(`, `math.log(`) are not names."""
    found = []
    for match in TOKEN.finditer(answer):
        if answer[match.end() : match.end() + 1] == "(":
            continue
        token = match.group().rstrip(".:")
        if "://" in token or token.startswith("//") or not any(c.isalpha() for c in token):
            continue
        if has_extension(token) or (
            "/" in token and (token.startswith(("./", "../", "~/", "/")) or token.endswith("/"))
        ):
            found.append(token)
    return list(dict.fromkeys(found))


def has_extension(token: str) -> bool:
    stem, extension = os.path.splitext(os.path.basename(token))
    return bool(stem) and extension[1:].lower() in EXTENSIONS


def version_numbers(answer: str) -> list[str]:
    return list(dict.fromkeys(match.group() for match in VERSION.finditer(answer)))


def split_figures(
    outcomes: Sequence[Outcome],
    *,
    registry: ToolRegistry,
    workspace: Path,
    first_split: bool,
) -> list[Figure]:
    """One split's figures, named the same in every split (the table sets them side by side).
    `first_split`: this split ran first after the warm-up, so its first case is the first reply
    after the server started."""
    plain_cases = [o for o in outcomes if not o.case.needs_tool]
    tool_cases = [o for o in outcomes if o.case.needs_tool]
    direct = sum(o.is_direct() for o in plain_cases)
    right = sum(o.is_right_call(registry, workspace) for o in tool_cases)
    rows = [
        Figure("cases (plain / tool)", f"{len(plain_cases)} / {len(tool_cases)}"),
        share_figure(
            "plain answered without a tool", direct, len(plain_cases), goal=GOALS["plain"]
        ),
        share_figure("correct first tool call", right, len(tool_cases), goal=GOALS["call"]),
        Figure(
            "of which right only as a read of the file defining the name searched for",
            str(sum(o.right_by_definition(registry, workspace) for o in tool_cases)),
        ),
        *fact_figures(plain_cases, tool_cases),
        *count_figures(outcomes, workspace),
        *timing_figures(outcomes, first_split=first_split),
    ]
    return rows


def fact_figures(plain_cases: Sequence[Outcome], tool_cases: Sequence[Outcome]) -> list[Figure]:
    plain_facts = [o for o in plain_cases if o.case.fact]
    tool_facts = [o for o in tool_cases if o.case.fact]
    held_plain = sum(o.has_fact() for o in plain_facts)
    held_tool = sum(o.has_fact() for o in tool_facts)
    total = len(plain_facts) + len(tool_facts)
    return [
        share_figure("key facts", held_plain + held_tool, total, goal=GOALS["facts"]),
        share_figure("key facts, plain", held_plain, len(plain_facts), goal=None),
        share_figure("key facts, tool", held_tool, len(tool_facts), goal=None),
    ]


def count_figures(outcomes: Sequence[Outcome], workspace: Path) -> list[Figure]:
    ungrounded = sum(bool(o.claims(ENTRIES, workspace)) for o in outcomes)
    fake = sum(o.fake_json for o in outcomes)
    empty = sum(o.empty_after_tool for o in outcomes)
    ran_tools = sum(o.after_tool is not None for o in outcomes)
    failed = [o.error for o in outcomes if o.error]
    return [
        Figure("ungrounded claims", str(ungrounded), target="0", met=ungrounded == 0),
        Figure("fake call JSON", str(fake), target="0", met=fake == 0),
        Figure(
            "empty answers after a tool round",
            f"{empty} of {ran_tools}",
            target="0",
            met=empty == 0,
        ),
        Figure("replies that hit max_tokens", str(sum(o.hit_max_tokens for o in outcomes))),
        Figure("turns that failed", f"{len(failed)}{': ' + failed[0][:60] if failed else ''}"),
    ]


def share_figure(name: str, count: int, total: int, *, goal: float | None) -> Figure:
    share = count / total if total else 0.0
    value = f"{count} / {total} ({share:.0%})" if total else "0 / 0"
    if goal is None or not total:
        return Figure(name, value, target=f">= {goal:.0%}" if goal else "")
    return Figure(name, value, target=f">= {goal:.0%}", met=share >= goal)


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def timing_figures(outcomes: Sequence[Outcome], *, first_split: bool) -> list[Figure]:
    firsts = [o.first_token for o in outcomes if o.first_token is not None]
    totals = [o.total for o in outcomes]
    rows = []
    for name, values in (("first visible token", firsts), ("end of turn", totals)):
        value = "-"
        if values:
            median, p90 = statistics.median(values), percentile(values, 0.9)
            value = f"{median:.2f} s / {p90:.2f} s"
        rows.append(Figure(f"{name}, median / p90", value))
    first = outcomes[0].first_token if outcomes and first_split else None
    warm = statistics.median(firsts[1:] or firsts) if firsts else None
    value, baseline, ratio = "-", "", ""
    if first is not None and warm is not None:
        value, baseline = f"{first:.2f} s", f"{warm:.2f} s median of the others"
        ratio = f"{first / max(warm, 1e-6):.2f}"
    rows.append(Figure("first reply after the server started", value, baseline, ratio))
    return rows

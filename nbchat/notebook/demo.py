"""Demo material for the notebooks, whose cells must hold calls, not logic: the scripted demo
session and the acting demo's helpers.

The demo session: one realistic tool-using session, built the same way every time.
`add_demo_session(store)` writes a 40-row session into a store as the chat loop would have: a user
has a date parser fixed and extended, the model lists, reads, edits and tests files, every model
request has a usage record, and after the first task the user pressed Compact.

The session is scripted, not recorded from a model run: the script holds the demo project's
files, every user and model turn (text, reasoning, tool calls and their results), the
hand-written pytest output and the checkpoint text its compaction is given (pure data and row
building). What is scripted and what is real:

- scripted: every user and model turn (the text, the reasoning and the tool calls are written
  in the script); the `run_shell` results (pytest's output, written by hand; the replay test in
  `tests/test_demo.py` skips them); the summary's checkpoint text (`SUMMARY`, handed to the engine
  by `ScriptedSummariser`); the usage of every request (prompt tokens are the estimate of the rows
  sent plus a fixed `OVERHEAD_TOKENS` for the system prompt and tool schemas, completion tokens the
  estimate of the reply).
- real: every other tool result is what the tool returns for that call on the demo project (the
  replay test checks it); the compaction is the real `CompactionEngine`'s, so which rows it
  archived, the token counts before and after and the recorded facts under the summary are what
  nbchat's code computed.
- not measured at all: durations are 0.0 (nothing was timed) and the summariser's usage is 0 (the
  scripted summariser is no server and reports none).

Everything is deterministic apart from ids and timestamps, so notebooks can compare outputs
strictly. Notebooks that show this session must say it is scripted.

Also here for the notebooks' cells: a scratch workspace holding the demo project, a tool that
counts its files, an approver that answers from a script, and short outlines of rows that leave
out model text; and for the acting demo (`notebooks/05-acting.ipynb`), an approval card's
question as plain text, a tool's newest result, and the notebook lines a compaction keeps by
code (`nbchat.compaction.findings`).

Must not: be needed by the chat itself or call a model. It writes only where it is told (the store
it is given) or into fresh temporary directories (`demo_store`, `scratch_workspace`).
"""

from __future__ import annotations

import atexit
import html
import json
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.facts import collect_facts
from nbchat.compaction.findings import render_cells
from nbchat.compaction.result import SummaryReply
from nbchat.conversation.session import apply_compaction
from nbchat.history import History, Message, Row, estimate_tokens, to_row
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolContext

__all__ = [
    "DEMO_MODEL",
    "DEMO_TITLE",
    "PARSER",
    "PARSER_BUGGY",
    "PROJECT",
    "PYTEST_WEEK_53",
    "README_BEFORE",
    "SUMMARY",
    "ScriptedApprover",
    "ScriptedSummariser",
    "TESTS",
    "add_demo_session",
    "card_text",
    "count_files",
    "demo_rows",
    "demo_store",
    "kept_by_compaction",
    "last_result",
    "outline",
    "scratch_workspace",
    "tool_results",
]


PARSER_BUGGY = '''"""Parse ISO 8601 dates: calendar and week forms."""
import datetime as dt
import re

WEEK = re.compile(r"^(\\d{4})-W(\\d{2})-(\\d)$")


def parse_iso_week(year: int, week: int, day: int) -> dt.date:
    if not 1 <= week <= 52:
        raise ValueError(f"week {week} is out of range for {year}")
    return dt.date.fromisocalendar(year, week, day)


def parse_date(text: str) -> dt.date:
    if match := WEEK.match(text):
        return parse_iso_week(*map(int, match.groups()))
    return dt.date.fromisoformat(text)
'''
WEEKS_IN_YEAR = '''def weeks_in_year(year: int) -> int:
    """52 or 53: 28 December always falls in the last ISO week."""
    return dt.date(year, 12, 28).isocalendar()[1]


'''
ORDINAL_BRANCH = """    if match := re.match(r"^(\\d{4})-(\\d{3})$", text):
        year, day = map(int, match.groups())
        return dt.date(year, 1, 1) + dt.timedelta(days=day - 1)
"""
RETURN_LINE = "    return dt.date.fromisoformat(text)\n"
OLD_CHECK = "    if not 1 <= week <= 52:"
NEW_CHECK = "    if not 1 <= week <= weeks_in_year(year):"
# The edits the model makes in the demo, as (old, new) for edit_file.
EDIT_CHECK = (OLD_CHECK, NEW_CHECK)
EDIT_WEEKS = ("def parse_iso_week", WEEKS_IN_YEAR + "def parse_iso_week")
EDIT_ORDINAL = (RETURN_LINE, ORDINAL_BRANCH + RETURN_LINE)
PARSER_FIXED = PARSER_BUGGY.replace(*EDIT_CHECK).replace(*EDIT_WEEKS)
PARSER = PARSER_FIXED.replace(*EDIT_ORDINAL)
TESTS = """import datetime as dt

import pytest

from dates.parser import parse_date


def test_calendar_date():
    assert parse_date("2024-02-29") == dt.date(2024, 2, 29)


@pytest.mark.parametrize("text, expected", [("2020-W53-4", dt.date(2020, 12, 31)),
                                            ("2021-W01-1", dt.date(2021, 1, 4))])
def test_iso_week(text, expected):
    assert parse_date(text) == expected
"""
ORDINAL_TESTS = """import datetime as dt

from dates.parser import parse_date


def test_parses_ordinal():
    assert parse_date("2024-060") == dt.date(2024, 2, 29)
"""
README_EXAMPLE = "```python\nparse_date('2020-W53-4')\n```\n"
README_ORDINAL = "\nOrdinal dates work too: `parse_date('2024-060')` is 29 February.\n"
README_BEFORE = "# dates\n\nParse ISO 8601 dates.\n\n" + README_EXAMPLE
PROJECT = {
    "README.md": README_BEFORE + README_ORDINAL,
    "dates/__init__.py": '"""ISO 8601 date parsing."""\n__version__ = "0.3.0"\n',
    "dates/parser.py": PARSER,
    "tests/test_parser.py": TESTS,
    "tests/test_ordinal.py": ORDINAL_TESTS,
}
PYTEST = "python -m pytest -q"
# The run_shell results are written by hand: pytest's real output would carry this machine's
# timings and paths, and the demo must be the same everywhere.
PYTEST_WEEK_53 = """exit code: 1
.....F......                                                             [100%]
=================================== FAILURES ===================================
______________________ test_iso_week[2020-W53-4-expected0] _____________________
    def test_iso_week(text, expected):
>       assert parse_date(text) == expected
tests/test_parser.py:13:
dates/parser.py:16: in parse_iso_week
    raise ValueError(f"week {week} is out of range for {year}")
E   ValueError: week 53 is out of range for 2020
=========================== short test summary info ============================
FAILED tests/test_parser.py::test_iso_week[2020-W53-4-expected0] - ValueError: week 53 is ou...
1 failed, 11 passed in 0.09s"""
PYTEST_ORDINAL = """exit code: 1
............F..                                                          [100%]
=================================== FAILURES ===================================
_____________________________ test_parses_ordinal ______________________________
    def test_parses_ordinal():
>       assert parse_date("2024-060") == dt.date(2024, 2, 29)
dates/parser.py:25: in parse_date
    return dt.date.fromisoformat(text)
E   ValueError: Invalid isoformat string: '2024-060'
=========================== short test summary info ============================
FAILED tests/test_ordinal.py::test_parses_ordinal - ValueError: Invalid isoformat string: '2024-060'
1 failed, 14 passed in 0.10s"""
# The checkpoint a model would have written for the first task (scripted: the demo calls no model).
SUMMARY = {
    "goal": "Find out why the tests of the dates project fail since a change to dates/parser.py.",
    "constraints": [],
    "done": [
        "Ran `python -m pytest -q`: test_iso_week[2020-W53-4] failed with ValueError: week 53 is "
        "out of range for 2020.",
        "Read dates/parser.py and tests/test_parser.py.",
        "Found the cause: parse_iso_week accepts weeks 1-52 only, but 2020 has 53 ISO weeks.",
    ],
    "in_progress": ["Waiting for the user to approve the fix."],
    "blocked": [],
    "decisions": ["Count the weeks of a year from the ISO week of 28 December."],
    "next_steps": [
        "Add weeks_in_year(year) and use it in the range check of parse_iso_week.",
        "Run `python -m pytest -q` again.",
    ],
    "critical_context": ["Tests run with `python -m pytest -q` from the workspace root."],
}


def _call(call_id: str, name: str, **arguments: Any) -> Row:
    function = {"name": name, "arguments": json.dumps(arguments)}
    calls = [{"id": call_id, "type": "function", "function": function}]
    return Row("assistant_full", "", tool_args=json.dumps(calls))


def _tool(call_id: str, name: str, result: str, **arguments: Any) -> list[Row]:
    """A call and its result: the two rows one tool round adds."""
    return [_call(call_id, name, **arguments), Row("tool", result, call_id, name)]


def _edit(call_id: str, path: str, edit: tuple[str, str]) -> list[Row]:
    done = f"Replaced 1 occurrence in {path}."
    return _tool(call_id, "edit_file", done, path=path, old=edit[0], new=edit[1])


def _passed(count: int, seconds: str) -> str:
    return f"exit code: 0\n{'.' * count}\n{count} passed in {seconds}s"


def _turn_one() -> list[Row]:
    """The week-53 bug, up to the reply that ends it (the rows before the compaction)."""
    listing = "dates/__init__.py\ndates/parser.py\ntests/test_parser.py"
    return [
        Row("user", "The tests fail since yesterday's change to dates/parser.py. Find out why."),
        *_tool("call_d01", "list_files", listing, path=".", pattern="**/*.py"),
        *_tool("call_d02", "run_shell", PYTEST_WEEK_53, command=PYTEST),
        *_tool("call_d03", "read_file", PARSER_BUGGY, path="dates/parser.py"),
        *_tool("call_d04", "read_file", TESTS, path="tests/test_parser.py"),
        Row("analysis", "2020 starts on a Wednesday and is a leap year, so it has 53 ISO weeks."),
        Row(
            "assistant",
            "Found it: `parse_iso_week` only accepts weeks 1-52, but ISO years such as 2020 have "
            "53 weeks. I would count the weeks of the year from 28 December, which always falls "
            "in the last week. Shall I make the change?",
        ),
        Row("user", "Yes, go ahead, and keep the public API unchanged."),
        *_edit("call_d05", "dates/parser.py", EDIT_CHECK),
        *_edit("call_d06", "dates/parser.py", EDIT_WEEKS),
        *_tool("call_d07", "run_shell", _passed(12, "0.08"), command=PYTEST),
        Row(
            "assistant",
            "Fixed: `weeks_in_year(year)` gives 52 or 53 and the range check uses it. "
            "All 12 tests pass; the public API is unchanged.",
        ),
    ]


def _turn_two() -> list[Row]:
    """Ordinal dates and the README, after the compaction."""
    wrote = f"Wrote {len(ORDINAL_TESTS)} characters to tests/test_ordinal.py."
    readme_edit = (README_EXAMPLE, README_EXAMPLE + README_ORDINAL)
    return [
        Row("user", "Now support ordinal dates like 2024-060 (year and day of the year)."),
        *_tool("call_d08", "read_file", PARSER_FIXED, path="dates/parser.py"),
        *_tool(
            "call_d09", "write_file", wrote, path="tests/test_ordinal.py", content=ORDINAL_TESTS
        ),
        *_tool("call_d10", "run_shell", PYTEST_ORDINAL, command=PYTEST),
        *_edit("call_d11", "dates/parser.py", EDIT_ORDINAL),
        *_tool("call_d12", "run_shell", _passed(15, "0.10"), command=PYTEST),
        Row(
            "assistant",
            "Ordinal dates work: `parse_date('2024-060')` returns 29 February 2024. I added "
            "tests/test_ordinal.py; all 15 tests pass.",
        ),
        Row("user", "Add an example to the README."),
        *_tool("call_d13", "read_file", README_BEFORE, path="README.md"),
        *_edit("call_d14", "README.md", readme_edit),
        Row("assistant", "Added an ordinal-date example to README.md."),
        Row("user", "Thanks. What is left before a release?"),
        Row(
            "assistant",
            "Three things: a CHANGELOG entry for the week-53 fix and ordinal dates, the version in "
            "dates/__init__.py (0.3.0 → 0.4.0), and a tag once the tests pass on CI.",
        ),
    ]


def demo_rows() -> tuple[list[Row], list[Row]]:
    """The demo session's rows: before and after its compaction (39 rows in all)."""
    return _turn_one(), _turn_two()


DEMO_TITLE = "Demo: fix the week-53 bug, add ordinal dates"
DEMO_MODEL = "qwen2.5-coder-0.5b-instruct"
# The budget of the engine that made the demo's compaction. It was the Compact button (forced), so
# the session was under this budget's trigger; it decides only which old outputs may be pruned.
DEMO_THRESHOLD = 6000
# What the scripted usage adds to every request for the system prompt and the tool schemas (fixed,
# so the demo's figures do not move when a tool's description is edited).
OVERHEAD_TOKENS = 950
MODEL_ROLES = frozenset({"analysis", "assistant", "assistant_full"})


class ScriptedSummariser:
    """A `Summariser` that always answers `text` (the demo's compaction must not need a model).

    It reports no usage (0 prompt and completion tokens): it is not a server, and an estimate
    here would look like a measurement in the compaction record."""

    def __init__(self, text: str) -> None:
        self.text = text

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply:
        return SummaryReply(self.text)


def add_demo_session(store: Store, *, title: str = DEMO_TITLE) -> str:
    """Write the demo session into `store` (a new session each call); returns its id."""
    session_id = store.create_session(title, model=DEMO_MODEL)
    before, after = demo_rows()
    history = History()
    _replay(store, session_id, history, before)
    _compact(store, session_id, history)
    _replay(store, session_id, history, after)
    return session_id


def _replay(store: Store, session_id: str, history: History, rows: Sequence[Row]) -> None:
    """Store rows as the chat loop does: each model reply after the usage of its request.

    The usage is scripted (the estimate of the rows plus `OVERHEAD_TOKENS`, no duration): no
    server answered these requests."""
    for start, end in _spans(rows):
        reply = list(rows[start:end])
        if reply[0].role in MODEL_ROLES:
            prompt = OVERHEAD_TOKENS + history.total_tokens
            completion = sum(estimate_tokens(row) for row in reply)
            store.record_request(
                session_id,
                model=DEMO_MODEL,
                prompt_tokens=prompt,
                completion_tokens=completion,
                active_rows=len(history),
            )
            history.record_usage(prompt)
        store.append_rows(session_id, reply)
        history.extend(reply)


def _spans(rows: Sequence[Row]) -> list[tuple[int, int]]:
    """(start, end) of every row, except that reasoning shares the span of the reply it precedes
    (one request answers with both)."""
    spans: list[tuple[int, int]] = []
    for index in range(len(rows)):
        if index > 0 and rows[index - 1].role == "analysis":
            spans[-1] = (spans[-1][0], index + 1)
        else:
            spans.append((index, index + 1))
    return spans


def _compact(store: Store, session_id: str, history: History) -> None:
    """The Compact button after the first task: the real engine with a scripted summariser.

    The engine's own timing of this (microseconds, different every run) is replaced by 0.0: the
    record must compare strictly, and the real figure would say nothing about a model's."""
    engine = CompactionEngine(
        DEMO_THRESHOLD,
        4,
        summary_model=DEMO_MODEL,
        summariser=ScriptedSummariser(json.dumps(SUMMARY)),
    )
    result = replace(engine.compact(history, force=True), duration=0.0)
    apply_compaction(store, session_id, result, expected_active=len(history))
    history.replace(result.rows)


def demo_store() -> Store:
    """A store in a fresh temporary directory, for looking at the demo without touching yours;
    the directory is removed when the kernel (or script) exits."""
    return Store(_scratch_directory("nbchat-demo-") / "demo.db")


def scratch_workspace() -> Path:
    """A fresh temporary folder holding the demo project (the files the demo session edits);
    removed when the kernel (or script) exits."""
    root = _scratch_directory("nbchat-workspace-")
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def count_files(ctx: ToolContext) -> str:
    """Count the files in the workspace, by file extension."""
    found = Counter(p.suffix or "(none)" for p in ctx.workspace.rglob("*") if p.is_file())
    return "\n".join(f"{suffix}: {count}" for suffix, count in sorted(found.items()))


class ScriptedApprover:
    """An approver for scripts: answers every request with `approve` and keeps what it was asked
    (it runs on the tool's thread, hence the lock)."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.requests: list[ApprovalRequest] = []
        self._lock = threading.Lock()

    def __call__(self, request: ApprovalRequest) -> bool:
        with self._lock:
            self.requests.append(request)
        return self.approve

    @property
    def asked(self) -> list[str]:
        """The names of the tools it was asked about, in order."""
        with self._lock:
            return [request.name for request in self.requests]

    def __repr__(self) -> str:
        return f"ScriptedApprover(approve={self.approve}, asked={self.asked})"


def outline(rows: Iterable[Sequence[str]]) -> list[str]:
    """One line per row without its text: the role, and the tool of a call or a result."""
    lines = []
    for role, _content, _tool_id, tool_name, tool_args in rows:
        if role == "assistant_full":
            names = [call["function"]["name"] for call in json.loads(tool_args or "[]")]
            lines.append(f"assistant_full: {', '.join(names)}")
        elif role == "tool":
            lines.append(f"tool: {tool_name}")
        else:
            lines.append(role)
    return lines


def tool_results(rows: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    """(tool name, result) for every tool row, in order."""
    return [(row[3], row[1]) for row in rows if row[0] == "tool"]


def _scratch_directory(prefix: str) -> Path:
    # Every notebook run makes these; without the cleanup each run left two folders in /tmp.
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


class _Text(HTMLParser):
    """The text of some HTML, each `<pre>` and block on lines of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("pre", "div", "p"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def card_text(card: Any) -> str:
    """What an approval card asks, as text: the question line, then the code or the diff."""
    parser = _Text()
    parser.feed(str(card.question.value))
    parser.close()
    lines = [line.rstrip() for line in html.unescape("".join(parser.parts)).split("\n")]
    return "\n".join(line for line in lines if line)


def last_result(rows: Iterable[Sequence[str]], tool: str) -> str:
    """The newest result of `tool` in `rows`."""
    found = [row[1] for row in rows if row[0] == "tool" and row[3] == tool]
    return found[-1] if found else f"(no result of {tool} yet)"


def kept_by_compaction(rows: Iterable[Sequence[str]]) -> list[str]:
    """The notebook lines a compaction of `rows` keeps by code: each cell the assistant
    inserted, edited or ran, and each of its runs with how it ended."""
    facts = collect_facts([to_row(row) for row in rows])
    acted = [(key, note) for key, note in facts.cells if not key.isdigit()]
    return render_cells(acted)

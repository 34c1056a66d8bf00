"""Demo material for the notebooks: one realistic tool-using session, built the same way every time.

`add_demo_session(store)` writes a 40-row session into a store as the chat loop would have: a user
has a date parser fixed and extended, the model lists, reads, edits and tests files, every model
request has a usage record, and after the first task the user pressed Compact.

The session is scripted, not recorded from a model run (the script, its turns, files and texts,
is `nbchat.notebook.scenario`). What is scripted and what is real:

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

Also here for the notebooks' cells, which must hold calls, not logic: a scratch workspace holding
the demo project, a tool that counts its files, an approver that answers from a script, and short
outlines of rows that leave out model text.

Must not: be needed by the chat itself or call a model. It writes only where it is told (the store
it is given) or into fresh temporary directories (`demo_store`, `scratch_workspace`).
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.summariser import SummaryReply
from nbchat.conversation.session import apply_compaction
from nbchat.history import History, Message, Row, estimate_tokens
from nbchat.notebook.scenario import (
    PARSER,
    PARSER_BUGGY,
    PROJECT,
    PYTEST_WEEK_53,
    README_BEFORE,
    SUMMARY,
    TESTS,
    demo_rows,
)
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
    "TESTS",
    "ScriptedApprover",
    "ScriptedSummariser",
    "add_demo_session",
    "count_files",
    "demo_rows",
    "demo_store",
    "outline",
    "scratch_workspace",
    "tool_results",
]

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

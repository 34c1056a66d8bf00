"""Test helpers for compaction: a scripted summariser and histories that are worth compacting."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from nbchat.compaction.result import SummaryReply
from nbchat.history import Message, Row

SUMMARY = (
    "## Goal\nFix the bug.\n\n## Constraints & preferences\n- (none)\n\n## Progress\n"
    "### Done\n- [x] read the code\n### In progress\n- [ ] patch\n### Blocked\n- (none)\n\n"
    "## Key decisions\n- **patch in place**: smallest change\n\n## Next steps\n1. run tests\n\n"
    "## Critical context\n- (none)"
)


class FakeSummariser:
    """A `Summariser` that answers from a script (a fixed text, or a function of the request)
    and records every request it was sent."""

    def __init__(self, reply: str | Callable[[Sequence[Message]], str] = SUMMARY) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply:
        self.requests.append(
            {
                "messages": list(messages),
                "max_tokens": max_tokens,
                "response_format": response_format,
                "stop": stop,
            }
        )
        text = self.reply(messages) if callable(self.reply) else self.reply
        return SummaryReply(text, prompt_tokens=100, completion_tokens=20)

    @property
    def prompts(self) -> list[str]:
        """The user message of every request (the transcript and the instruction)."""
        return [str(request["messages"][-1]["content"]) for request in self.requests]


words = st.text(alphabet="abcdefghij klmnop", min_size=0, max_size=60)
paths = st.sampled_from(["src/app.py", "README.md", "tests/test_app.py", "lib/x/y.py"])
errors = st.sampled_from(
    [
        "",
        "Traceback (most recent call last):\n  File 'a.py', line 1\nKeyError: 'x'",
        "FAILED tests/test_app.py::test_one - AssertionError: boom",
        "bash: frobnicate: command not found",
    ]
)


@st.composite
def tool_round(draw: st.DrawFn, call_id: str) -> list[Row]:
    """One assistant_full row calling a file or shell tool, and its result (possibly big)."""
    name = draw(st.sampled_from(["read_file", "edit_file", "run_shell"]))
    arguments = {"path": draw(paths)} if name != "run_shell" else {"command": draw(words)}
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    call["function"]["arguments"] = json.dumps(arguments)
    size = draw(st.sampled_from([20, 600, 3000]))  # small, prunable, big
    output = ((draw(words) or "output ") * size)[:size] + "\n" + draw(errors)
    rows = [Row("analysis", draw(words))] if draw(st.booleans()) else []
    rows.append(Row("assistant_full", draw(words), "", "", json.dumps([call])))
    rows.append(Row("tool", output, call_id, name, ""))
    return rows


@st.composite
def working_turn(draw: st.DrawFn, turn: int) -> list[Row]:
    """A user turn with 0-6 tool round-trips and a final reply."""
    rows = [Row("user", draw(words) or "do it")]
    for step in range(draw(st.integers(0, 6))):
        rows.extend(draw(tool_round(f"call_{turn}_{step}")))
    rows.append(Row("assistant", draw(words)))
    return rows


working_histories = st.lists(st.integers(0, 0), min_size=1, max_size=5).flatmap(
    lambda turns: st.tuples(*(working_turn(n) for n in range(len(turns)))).map(
        lambda parts: [row for part in parts for row in part]
    )
)
thresholds = st.sampled_from([40, 150, 600, 1500, 3000, 6000, 100_000])

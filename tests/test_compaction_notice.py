"""A compaction notice says what really happened, and what it says was kept stays kept.

Issue 19: one tool round bigger than the embedded trigger (5,376 tokens) compacted the chat and
the notice said "Compaction could not shrink the history … it was kept as it was"; the next
round then archived every row but that notice, and the request went out without the tool
results the model had asked for. One result can no longer be bigger than a quarter of the
trigger, so here four results of a quarter each make the round. Over real HTTP with the test
server and a real SQLite file.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai
from fakeserver import FakeServer, Reply
from helpers import Script

from nbchat.conversation.events import Notice, RequestStarted
from nbchat.conversation.loop import Conversation
from nbchat.history import Row
from nbchat.store.store import Store

SUMMARY = json.dumps(
    {
        "goal": "List the files",
        "constraints": [],
        "done": [],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": [],
        "critical_context": [],
    }
)
NOTICE = re.compile(
    r"Compaction changed nothing: fewer than two rows before the kept tail\. Nothing was "
    r"summarised or archived; all (\d+) rows were kept as they were \(about ([\d,]+) tokens; "
    r"compaction starts at 5,376\)\."
)


def call(call_id: str, name: str, **arguments: object) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(arguments))


def test_a_round_bigger_than_the_trigger_is_kept_as_the_notice_says(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(context_token_threshold=7168, tool_policy="allow")
    folders = ("a", "b", "c", "d")
    for folder in folders:  # each folder's search fills one result (a quarter of the trigger)
        (settings.workspace / folder).mkdir()
        for number in range(100):
            (settings.workspace / folder / f"m{number}.py").write_text(
                "import os  # a python line long enough that the results fill their share\n"
            )
    script = Script(SUMMARY)
    script.chat.extend(
        [
            Reply(
                tool_calls=[call(f"s{f}", "search_files", pattern="os", path=f) for f in folders]
            ),
            Reply(text="Each folder holds 100 modules."),
        ]
    )
    noticed: list[tuple[str, list[Row]]] = []
    sent_after_notice: list[list[Row]] = []
    with FakeServer(responder=script) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        chat = Conversation(settings, store, client=client)
        for event in chat.send("List the python files in this workspace"):
            if isinstance(event, Notice):
                noticed.append((event.text, chat.history.rows[:-1]))  # before the notice row
            if isinstance(event, RequestStarted) and noticed and not sent_after_notice:
                sent_after_notice.append(chat.history.rows)
        second_request = server.chat_requests()[1]
    [(text, described)] = noticed
    [rows] = sent_after_notice
    assert rows[: len(described)] == described  # kept, as the notice says
    sent = [m["content"] for m in second_request["messages"] if m["role"] == "tool"]
    assert sent == [row.content for row in described if row.role == "tool"]  # and read
    said = NOTICE.fullmatch(text)
    assert said is not None, text
    assert int(said[1]) == len(described) == 6  # the question, the call and its four results
    assert int(said[2].replace(",", "")) > 5376

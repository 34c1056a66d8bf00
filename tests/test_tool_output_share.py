"""One tool result never takes more than a quarter of the trigger (and never more than
`tool_output_limit`), whatever the window, and a cut result says how to get the rest, in words
right for the tool that produced it.

Issue 19: on the embedded model (trigger 5,376 tokens) one `search_files` result of 20,000
characters (~6,700 estimated tokens) was bigger than the whole trigger. Over real HTTP with the
test server and a real SQLite file.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply

from nbchat.conversation.budget import Budget
from nbchat.conversation.loop import Conversation
from nbchat.history import estimate_tokens
from nbchat.store.store import Store

EMBEDDED_THRESHOLD = 7168  # n_ctx 8192 minus the reply: the trigger is 5,376
SHARE = 5376 // 4 * 3  # a quarter of the trigger, in the characters the len/3 estimate counts


def call(call_id: str, name: str, **arguments: object) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(arguments))


@pytest.mark.parametrize(
    ("threshold", "setting", "limit"),
    [
        (EMBEDDED_THRESHOLD, 20_000, SHARE),
        (1_000, 20_000, 750 // 4 * 3),
        (200_000, 20_000, 20_000),  # a large window: the setting is the ceiling
        (EMBEDDED_THRESHOLD, 1_000, 1_000),
    ],
)
def test_one_tool_result_holds_at_most_a_quarter_of_the_trigger(
    make_settings: Any, threshold: int, setting: int, limit: int
) -> None:
    settings = make_settings(context_token_threshold=threshold, tool_output_limit=setting)
    assert Budget(settings, list).tool_output_limit() == limit


def test_a_search_bigger_than_the_trigger_comes_back_as_a_quarter_of_it(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(context_token_threshold=EMBEDDED_THRESHOLD, tool_policy="allow")
    for number in range(300):  # 300 files, each line matching: ~20,000 characters of matches
        (settings.workspace / f"module_{number:03}.py").write_text(
            "import os  # a python line that the search below matches, long enough to count\n"
        )
    (settings.workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(5_000)))
    replies = [
        Reply(
            tool_calls=[
                call("s1", "search_files", pattern="import"),
                call("r1", "read_file", path="big.txt"),
                call("c1", "run_shell", command="seq 1 100000"),
            ]
        ),
        Reply(text="Done."),
    ]
    with FakeServer(responder=lambda body: replies.pop(0)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        chat = Conversation(settings, store, client=client)
        list(chat.send("Find the imports, read big.txt and count to 100000."))
        sent = server.chat_requests()[-1]["messages"]
    results = {row.tool_name: row.content for row in chat.history.rows if row.role == "tool"}
    assert set(results) == {"search_files", "read_file", "run_shell"}
    for content in results.values():
        assert len(content) <= SHARE
        assert estimate_tokens(content) <= 5376 // 4
    assert results["search_files"].endswith(
        "matches shown; narrow the search: a more specific pattern, a path, or a glob such as "
        "'*.py']"
    )
    assert "; read on with start_line=" in results["read_file"].splitlines()[-1]
    assert results["run_shell"].endswith(
        "[the middle of the output was cut to fit the tool output limit: filter it (grep, head, "
        "tail) or redirect it to a file and read that with read_file]"
    )
    tool_messages = [message["content"] for message in sent if message["role"] == "tool"]
    assert tool_messages == list(results.values())  # what the model read is what was kept


def test_a_cut_read_says_where_to_read_on(make_settings: Any, store: Store) -> None:
    settings = make_settings(context_token_threshold=EMBEDDED_THRESHOLD, tool_policy="allow")
    (settings.workspace / "big.txt").write_text("".join(f"line {n}\n" for n in range(5_000)))
    replies = [Reply(tool_calls=[call("r1", "read_file", path="big.txt")]), Reply(text="ok")]
    with FakeServer(responder=lambda body: replies.pop(0)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        chat = Conversation(settings, store, client=client)
        list(chat.send("Read big.txt"))
    content = next(row.content for row in chat.history.rows if row.role == "tool")
    budget = SHARE - 200  # read_file keeps room for its note
    kept = "".join(f"line {n}\n" for n in range(5_000))[:budget]
    next_line = kept.count("\n") + 1
    assert content == (
        kept + f"\n[... cut at {budget:,} characters (the tool output limit); read on with "
        f"start_line={next_line}]"
    )

"""The small model's `tool_choice` per round, as sent over real HTTP to the fake server (issue
12): "required" (or the named tool) on the first request only for an explicit request for an
action here; no tools, under a text-only grammar, once the model should answer from the results
(the turn's last round, or after it only repeated a call); `read_archived_output` offered only
once something in the session is archived."""

from __future__ import annotations

from typing import Any

import openai
from factories import tool_call, tool_result, user
from fakeserver import FakeServer, Reply
from helpers import run

from nbchat.compaction.prune import to_placeholder
from nbchat.config import Settings
from nbchat.conversation.events import RowSaved
from nbchat.conversation.loop import Conversation
from nbchat.history import Row
from nbchat.store.records import CompactionRecord
from nbchat.store.store import Store

CALL = '{"name": "read_file", "arguments": {"path": "notes.txt"}}'


def conversation_on(server: FakeServer, store: Store, settings: Settings) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    chat = Conversation(settings, store, client=client)
    chat.new_session("t")
    return chat


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def test_the_first_request_requires_a_call_only_for_an_explicit_request_here(
    make_settings: Any, store: Store
) -> None:
    small = make_settings(tools_on_request=True, json_tool_fallback=False, max_tool_turns=1)
    large = make_settings(tools_on_request=False, json_tool_fallback=False, max_tool_turns=1)
    with FakeServer(default_reply=Reply(text="ok")) as server:
        chat = conversation_on(server, store, small)
        for text in (
            "Hi! What is 2 + 2?",
            "How do I run the tests in this repo?",
            "Read notes.txt please.",
            "Show the current directory with pwd.",
        ):
            run(chat, text)
        run(conversation_on(server, store, large), "Read notes.txt please.")
        plain, question, read, shell, on_large = server.chat_requests()
    assert "tools" not in plain and "tool_choice" not in plain
    assert "read_file" in offered(question) and "tool_choice" not in question
    assert read["tool_choice"] == "required"
    assert shell["tool_choice"] == {"type": "function", "function": {"name": "run_shell"}}
    assert "tool_choice" not in on_large
    for body in (question, read, shell, on_large):
        assert "read_archived_output" not in offered(body)


def test_read_archived_output_is_offered_once_an_output_is_archived(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(tools_on_request=True, json_tool_fallback=False, max_tool_turns=1)
    output = tool_result("c1", "x" * 2_000, name="read_file")
    with FakeServer(default_reply=Reply(text="ok")) as server:
        chat = conversation_on(server, store, settings)
        session_id = chat.session_id
        assert session_id is not None
        store.append_rows(
            session_id, [user("Read notes.txt"), tool_call(("c1", "read_file", {})), output]
        )
        chat.resume(session_id)
        run(chat, "Read todo.md please.")
        store.replace_rows(
            session_id,
            {2: to_placeholder(output)},
            expected_active=5,
            record=CompactionRecord(kind="prune"),
        )
        chat.resume(session_id)
        run(chat, "Read todo.md again please.")
        before, after = server.chat_requests()
    assert "read_archived_output" not in offered(before)
    assert "read_archived_output" in offered(after)


def test_the_last_round_answers_without_tools_under_a_text_only_grammar(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(
        tools_on_request=True, json_tool_fallback=True, tool_policy="deny", max_tool_turns=2
    )
    with FakeServer() as server:
        server.enqueue(Reply(text=CALL), Reply(text="It is on Thursday."))
        events = run(conversation_on(server, store, settings), "Read notes.txt please.")
        first, last = server.chat_requests()
    assert "response_format" in first  # "required", as the JSON fallback asks for it
    assert "tools" not in last and "response_format" not in last
    assert "root ::=" in last["grammar"]
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    assert saved[-1] == Row("assistant", "It is on Thursday.")


def test_after_a_repeated_call_the_model_answers_without_tools(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(
        tools_on_request=True, json_tool_fallback=True, tool_policy="deny", max_tool_turns=10
    )
    with FakeServer() as server:
        server.enqueue(Reply(text=CALL), Reply(text=CALL), Reply(text="It is on Thursday."))
        events = run(conversation_on(server, store, settings), "Read notes.txt please.")
        _first, second, third = server.chat_requests()
    assert "read_file" in offered(second) and "grammar" not in second
    assert "tools" not in third and "grammar" in third
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    assert saved[-1] == Row("assistant", "It is on Thursday.")

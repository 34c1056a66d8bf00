"""The default path's small-model levers (issues 12 and 19): tools described in the system
prompt, temperature 0 on the embedded model, and a reply that opens like a tool call streamed
as text, then shown as the call once it validates (never silent)."""

from __future__ import annotations

import json
from typing import Any

import openai
from fakeserver import FakeServer, Reply
from helpers import run

from nbchat.config import Settings
from nbchat.conversation.events import RowSaved, TextDelta
from nbchat.conversation.loop import Conversation
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.tools import default_registry
from nbchat.ui.messages import MessageList
from nbchat.ui.view import EventView

CALL = '{"name": "read_file", "arguments": {"path": "notes.txt"}}'
SCHEMAS = default_registry().schemas()


def test_the_embedded_model_answers_at_temperature_0_unless_told_otherwise() -> None:
    assert Settings(base_url=None).reply_temperature() == 0.0
    assert Settings(base_url=None, temperature=0.7).reply_temperature() == 0.7
    assert Settings(base_url="http://127.0.0.1:9/v1").reply_temperature() is None
    assert Settings(base_url=None).offers_tools_on_request()
    assert not Settings(base_url="http://127.0.0.1:9/v1").offers_tools_on_request()


def conversation_on(server: FakeServer, store: Store, settings: Settings) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, store, client=client)


def test_a_small_models_requests_describe_the_tools_instead_of_sending_them(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(tools_on_request=True, json_tool_fallback=True)
    with FakeServer(default_reply=Reply(text="4")) as server:
        chat = conversation_on(server, store, settings)
        run(chat, "Hi! What is 2 + 2?")
        run(chat, "Read notes.txt please.")
        plain, files = server.chat_requests()
        steps = server.first_steps()
    assert len(steps) == 2
    assert "tools" not in plain and "tools" not in files
    # Every tool but read_archived_output (nothing in the session is archived yet), one line
    # each, shown to the first steps; the chat's own prompt stays the same in every request.
    names = [name for name in chat.tools.names() if name != "read_archived_output"]
    for step in steps:
        assert all(f"- {name}(" in step["messages"][0]["content"] for name in names)
    assert files["messages"][0]["content"] == plain["messages"][0]["content"]


def test_a_call_written_as_json_streams_as_text_then_is_stored_as_the_call(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(json_tool_fallback=True, tool_policy="deny")
    with FakeServer() as server:
        server.enqueue(Reply(text=CALL, chunk_size=6), Reply(text="It is on Thursday."))
        chat = conversation_on(server, store, settings)
        events = run(chat, "Read notes.txt")
    first_call = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, RowSaved) and e.row.role == "assistant_full"
    )
    assert "".join(e.text for e in events[:first_call] if isinstance(e, TextDelta)) == CALL
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    call_row = next(row for row in saved if row.role == "assistant_full")
    assert call_row.content == ""  # sent back as the call alone, not as JSON text and a call
    assert json.loads(call_row.tool_args)[0]["function"]["name"] == "read_file"
    assert saved[-1] == Row("assistant", "It is on Thursday.")


def test_the_widget_replaces_the_streamed_json_with_the_tool_card(
    make_settings: Any, store: Store
) -> None:
    import ipywidgets as widgets

    settings = make_settings(json_tool_fallback=True, tool_policy="deny")
    messages = MessageList()
    view = EventView(messages, widgets.HTML(), lambda: None)
    with FakeServer() as server:
        server.enqueue(Reply(text=CALL, chunk_size=6), Reply(text="Done."))
        chat = conversation_on(server, store, settings)
        for event in chat.send("Read notes.txt"):
            view.handle(event)
    streamed = [box for box in messages.box.children if "nbchat-assistant" in box._dom_classes]
    assert [box.layout.display for box in streamed] == ["none", None]


def test_a_call_to_a_missing_tool_ends_as_a_real_call_not_a_json_answer(
    make_settings: Any, store: Store
) -> None:
    # A missing tool whose arguments fit one that exists: asked again once, forced to it.
    wrong = '{"name": "cat_file", "arguments": {"path": "notes.txt", "start_line": 1}}'
    settings = make_settings(json_tool_fallback=True, tool_policy="deny")
    with FakeServer() as server:
        server.enqueue(Reply(text=wrong), Reply(text=CALL), Reply(text="It is on Thursday."))
        chat = conversation_on(server, store, settings)
        events = run(chat, "Read notes.txt")
        second = server.chat_requests()[1]
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    assert [row.role for row in saved] == ["user", "assistant_full", "tool", "assistant"]
    assert saved[1].content == ""  # neither attempt's JSON is kept as text
    assert json.loads(saved[1].tool_args)[0]["function"]["name"] == "read_file"
    assert second["messages"][-1]["content"].startswith("There is no tool named 'cat_file'.")
    assert "response_format" in second  # forced to one of the offered tools
    assert saved[-1] == Row("assistant", "It is on Thursday.")

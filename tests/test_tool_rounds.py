"""Tool rounds that end in words, on a server that gets the tools in every request (issue 19,
item 4: `tools_on_request` off, as for a llama.cpp or OpenAI-style server named by
NBCHAT_BASE_URL), over real HTTP to the fake server: a call written as text, in Qwen's doubled
braces too, runs; a call of a tool that exists nowhere and fits none is asked again for words;
an empty reply after a tool result is asked again for words, an answer naming nothing is not
(only a small model, which gets notes, is); grammars go only to llama.cpp."""

from __future__ import annotations

import json
from typing import Any

import openai
from fakeserver import FakeServer, Reply
from helpers import run

from nbchat.config import Settings
from nbchat.conversation.events import RowSaved
from nbchat.conversation.loop import Conversation
from nbchat.history import Row
from nbchat.store.store import Store

DOUBLED = '{{"name": "read_file", "arguments": {"path": "notes.txt"}}}}'
MULTIPLY = '{"name": "multiply", "arguments": {"a": 17, "b": 23}}'
CALL = ("c1", "read_file", '{"path": "notes.txt"}')


def chat_on(server: FakeServer, store: Store, settings: Settings) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    chat = Conversation(settings, store, client=client)
    chat.new_session("t")
    return chat


def always(make_settings: Any) -> Settings:
    """Tools in every request; the grammars left for the chat to decide by the server."""
    return make_settings(tools_on_request=False, tool_policy="allow")


def saved(events: list[Any]) -> list[Row]:
    return [event.row for event in events if isinstance(event, RowSaved)]


def test_a_call_in_doubled_braces_from_a_llama_cpp_server_runs(
    make_settings: Any, store: Store
) -> None:
    (make_settings().workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    with FakeServer(models_owner="llamacpp") as server:
        server.enqueue(Reply(text=DOUBLED), Reply(text="It is on Thursday."))
        rows = saved(run(chat_on(server, store, always(make_settings)), "peek at my notes"))
    assert [row.role for row in rows] == ["user", "assistant_full", "tool", "assistant"]
    assert json.loads(rows[1].tool_args)[0]["function"]["name"] == "read_file"
    assert rows[1].content == ""  # the call, not its JSON as text
    assert "Meeting on Thursday." in rows[2].content
    assert rows[-1] == Row("assistant", "It is on Thursday.")


def test_a_call_of_a_tool_that_exists_nowhere_is_asked_again_for_words(
    make_settings: Any, store: Store
) -> None:
    with FakeServer(models_owner="llamacpp") as server:
        server.enqueue(Reply(text=MULTIPLY), Reply(text="17 × 23 = 391."))
        rows = saved(run(chat_on(server, store, always(make_settings)), "17*23?"))
        first, second = server.chat_requests()
    assert "tools" in first
    assert second["messages"][-2] == {"role": "assistant", "content": MULTIPLY}
    assert second["messages"][-1]["content"].startswith("There is no tool named 'multiply'")
    assert "root ::=" in second["grammar"]  # llama.cpp: words only, by grammar
    assert rows == [Row("user", "17*23?"), Row("assistant", "17 × 23 = 391.")]


def test_an_openai_style_server_is_asked_for_words_without_a_grammar(
    make_settings: Any, store: Store
) -> None:
    with FakeServer(models_owner="openai") as server:
        server.enqueue(Reply(text=MULTIPLY), Reply(text="391."))
        rows = saved(run(chat_on(server, store, always(make_settings)), "17*23?"))
        _first, second = server.chat_requests()
    assert second["tool_choice"] == "none"
    assert "grammar" not in second and "response_format" not in second
    assert rows[-1] == Row("assistant", "391.")


def test_an_empty_reply_after_a_tool_result_is_asked_again_for_words(
    make_settings: Any, store: Store
) -> None:
    (make_settings().workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    with FakeServer(models_owner="llamacpp") as server:
        server.enqueue(Reply(tool_calls=[CALL]), Reply(text=""), Reply(text="It is on Thursday."))
        rows = saved(run(chat_on(server, store, always(make_settings)), "peek at my notes"))
        _call, empty, again = server.chat_requests()
    assert "tool_choice" not in empty
    assert again["messages"] == empty["messages"]  # the same request, asked for words
    assert "root ::=" in again["grammar"]
    assert [row.role for row in rows] == ["user", "assistant_full", "tool", "assistant"]
    assert rows[-1] == Row("assistant", "It is on Thursday.")


def test_a_model_that_gets_no_notes_is_not_asked_again_for_an_answer_naming_nothing(
    make_settings: Any, store: Store
) -> None:
    (make_settings().workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    with FakeServer(models_owner="llamacpp") as server:
        server.enqueue(Reply(tool_calls=[CALL]), Reply(text="I have read your notes."))
        rows = saved(run(chat_on(server, store, always(make_settings)), "peek at my notes"))
        assert len(server.chat_requests()) == 2  # the call, the answer: none asked again
    assert rows[-1] == Row("assistant", "I have read your notes.")

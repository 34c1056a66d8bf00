"""What `Budget` learns and counts, over real HTTP with a real SQLite store: a script's
conversation (no widget) records the model a llama.cpp server really serves, whether the session
was created before the first connection or after it, and nbchat's default name gives way to it;
the overhead it counts is the system prompt
as sent, workspace overview included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakeserver import FakeServer
from fixtures_server import CHAT, Canned, ScriptedServer, chunk, client_for
from helpers import run

from nbchat.conversation.events import Done
from nbchat.conversation.loop import Conversation
from nbchat.history import request_overhead_tokens
from nbchat.llm.endpoint import ModelCheck
from nbchat.store.store import Store

LLAMA = {"id": "qwen", "object": "model", "owned_by": "llamacpp"}
OTHER = {"id": "gpt-4o-mini", "object": "model", "owned_by": "openai"}
REPLY = [chunk({"content": "4"}), chunk(finish="stop"), "[DONE]"]


def scripted_chat(
    scripted: ScriptedServer, store: Store, make_settings: Any, tmp_path: Path, **overrides: Any
) -> Conversation:
    settings = make_settings(base_url=scripted.url + "/v1", model="gpt-4o-mini-typo", **overrides)
    return Conversation(settings, store, client=client_for(scripted.url, tmp_path))


# With a threshold set, the session is created before anything asks the server; without one,
# the budget connects first (to learn the window).
@pytest.mark.parametrize("threshold", [9000, None])
def test_a_script_on_llama_cpp_records_the_model_really_served(
    store: Store, make_settings: Any, tmp_path: Path, threshold: int | None
) -> None:
    with ScriptedServer() as scripted:
        scripted.add("/v1/models", Canned(body={"object": "list", "data": [LLAMA]}))
        scripted.add(CHAT, Canned(events=REPLY), Canned(events=REPLY))
        chat = scripted_chat(
            scripted, store, make_settings, tmp_path, context_token_threshold=threshold
        )
        assert run(chat, "What is 2 + 2?")[-1] == Done()
        assert run(chat, "And 3 + 3?")[-1] == Done()
        chat.close()
    session_id = chat.session_id
    assert session_id is not None
    assert [info.model for info in store.list_sessions()] == ["qwen"]
    assert [record["model"] for record in store.list_requests(session_id)] == ["qwen", "qwen"]
    sent = [store.sent_request(request_id) for request_id, _ in store.sent_requests(session_id)]
    assert [request.body["model"] for request in sent if request is not None] == ["qwen", "qwen"]
    assert chat.budget.model_check is not None
    assert "serves 'qwen', not model 'gpt-4o-mini-typo'" in chat.budget.model_check.message


def test_a_server_that_lists_other_names_keeps_the_configured_one(
    store: Store, make_settings: Any, tmp_path: Path
) -> None:
    with ScriptedServer() as scripted:
        scripted.add("/v1/models", Canned(body={"object": "list", "data": [OTHER]}))
        scripted.add(CHAT, Canned(events=REPLY))
        chat = scripted_chat(scripted, store, make_settings, tmp_path, context_token_threshold=9000)
        assert run(chat, "What is 2 + 2?")[-1] == Done()
        chat.close()
    assert [info.model for info in store.list_sessions()] == ["gpt-4o-mini-typo"]
    assert chat.budget.model_check is not None
    assert "does not serve model 'gpt-4o-mini-typo'" in chat.budget.model_check.message


def test_nbchats_default_name_gives_way_to_the_model_a_llama_cpp_server_runs_quietly(
    store: Store, make_settings: Any, tmp_path: Path
) -> None:
    # The default names the model `auto` picks where it can; a smaller machine's model, or another
    # kernel's server, answers under its own name, and that is what the session must record.
    served = {"id": "smollm", "object": "model", "owned_by": "llamacpp"}
    with ScriptedServer() as scripted:
        scripted.add("/v1/models", Canned(body={"object": "list", "data": [served]}))
        scripted.add(CHAT, Canned(events=REPLY))
        settings = make_settings(base_url=scripted.url + "/v1", context_token_threshold=9000)
        chat = Conversation(settings, store, client=client_for(scripted.url, tmp_path))
        assert run(chat, "What is 2 + 2?")[-1] == Done()
        chat.close()
    session_id = chat.session_id
    assert session_id is not None
    assert [info.model for info in store.list_sessions()] == ["smollm"]
    assert [record["model"] for record in store.list_requests(session_id)] == ["smollm"]
    assert chat.budget.model_check == ModelCheck("smollm", ok=True, message="")


def test_the_overhead_counts_the_system_prompt_as_sent_with_the_workspace_overview(
    store: Store, make_settings: Any, tmp_path: Path
) -> None:
    settings = make_settings(
        system_prompt="Be brief.", workspace_overview=True, context_token_threshold=9000
    )
    for name in ("analysis.py", "data.csv", "notes.md"):
        (settings.workspace / name).write_text("x\n")
    with FakeServer() as server:
        settings = settings.replace(base_url=server.url + "/v1")
        chat = Conversation(settings, store, client=client_for(server.url, tmp_path))
        assert run(chat, "hi")[-1] == Done()
        chat.close()
    assert chat.session_id is not None
    ((request_id, _),) = store.sent_requests(chat.session_id)
    sent = store.sent_request(request_id)
    assert sent is not None
    assert '"./analysis.py"' in sent.system_prompt  # the overview was sent
    expected = request_overhead_tokens(sent.system_prompt, sent.tools or [])  # as sent
    assert chat.budget.overhead_tokens() == expected
    assert chat.engine.overhead_tokens == expected  # the trigger counts what the meter counts


def test_a_small_model_whose_requests_carry_no_schemas_counts_none_against_its_budget(
    store: Store, make_settings: Any
) -> None:
    # With the tools on request (the embedded default), the chat's requests carry no schemas:
    # the first step chooses. A message that fits beside the system prompt is not refused for
    # the schemas of every tool (the browser test's long message was, once the acting tools came).
    settings = make_settings(
        tools_on_request=True, json_tool_fallback=True, context_token_threshold=3000
    )
    chat = Conversation(settings, store)
    everything = request_overhead_tokens(chat.budget.sent_prompt(), chat.tools.schemas())
    overhead = request_overhead_tokens(chat.budget.sent_prompt(), [])
    assert chat.budget.overhead_tokens() == overhead < everything
    tokens = 3000 - overhead - 10
    assert tokens + everything > 3000  # refused, were every schema counted
    chat.budget.check_fits("x" * tokens * 3)
    assert chat.engine.overhead_tokens == overhead
    chat.close()

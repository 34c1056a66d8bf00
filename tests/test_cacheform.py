"""The cache form (compaction/cacheform.py), the server's cache counts, short and deep compactions.

Over the real test server: the summary request continues the chat's last request byte for byte
(same system message, same messages, same tools) plus one instruction, under the checkpoint's
JSON schema; the transcript form stays for a separate summary model and for chunked input. The
cache counts are read from llama.cpp's `timings` and from OpenAI's `prompt_tokens_details`, on
the exact chunks those servers send. A checkpoint section over its budget is cut and flagged; a
compaction lands at most at half the threshold. The `model` test shows a real cache hit on the
embedded SmolLM2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from helpers import Script, is_summary_request, run

from nbchat.compaction.cacheform import (
    CACHE_INSTRUCTION,
    SMALL_CACHE_INSTRUCTION,
    RequestShape,
    build_cache_request,
    cache_prefix_end,
)
from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.modelsummariser import OpenAISummariser
from nbchat.compaction.prompts import ITEM_CHARS, RESPONSE_FORMAT, SECTION_ITEMS, parse_reply
from nbchat.compaction.result import SummaryReply
from nbchat.config import Settings
from nbchat.conversation.events import CompactionFinished, Event
from nbchat.conversation.loop import Conversation
from nbchat.history import History, Row, build_messages
from nbchat.llm.reader import ReplyReader, Usage
from nbchat.store.store import Store
from nbchat.tools import ToolRegistry

SUMMARY = json.dumps(
    {
        "goal": "Answer the questions",
        "constraints": [],
        "done": ["answered six questions"],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": ["answer the next one", "then the one after"],
        "critical_context": [],
    }
)
THRESHOLD = 4000


@pytest.fixture
def script() -> Script:
    return Script(SUMMARY)


@pytest.fixture
def server(script: Script) -> Iterator[FakeServer]:
    with FakeServer(responder=script) as running:
        yield running


def conversation(
    server: FakeServer, store: Store, settings: Settings, tools: ToolRegistry | None = None
) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, store, client=client, tools=tools)


def compacting_turn(
    server: FakeServer,
    store: Store,
    settings: Settings,
    script: Script,
    *,
    files: bool = True,
    tools: ToolRegistry | None = None,
    answer_chars: int = 300,
) -> tuple[Conversation, list[Event]]:
    """Long question/answer pairs until a turn compacts (every other question speaks of a
    file when `files`); that turn's events."""
    budget = settings.replace(context_token_threshold=THRESHOLD)
    chat = conversation(server, store, budget, tools)
    for i in range(80):
        script.chat.append(Reply(text=f"answer {i} " + "x" * answer_chars))
        about = " about notes.txt" if files and i % 2 else ""
        events = run(chat, f"question {i}{about}")
        if compactions(events):
            return chat, events
    raise AssertionError("no turn compacted")


def summary_and_previous(server: FakeServer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (first) summary request and the chat request sent just before it."""
    bodies = server.chat_requests()
    index = next(i for i, body in enumerate(bodies) if is_summary_request(body))
    return bodies[index], bodies[index - 1]


def compactions(events: list[Event]) -> list[CompactionFinished]:
    return [e for e in events if isinstance(e, CompactionFinished) and e.result.changed]


# Item 2: the summary asked as the chat's continuation


def test_the_summary_request_continues_the_chats_last_request_byte_for_byte(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    settings = make_settings(base_url=server.url + "/v1")
    _, events = compacting_turn(server, store, settings, script)
    [finished] = compactions(events)
    summary, chat = summary_and_previous(server)
    *prefix, instruction = summary["messages"]
    assert prefix == chat["messages"][: len(prefix)]
    assert json.dumps(prefix) == json.dumps(chat["messages"][: len(prefix)])
    assert prefix[0]["content"] == settings.system_prompt
    assert instruction["role"] == "user"
    assert instruction["content"].startswith(CACHE_INSTRUCTION)
    assert summary["tools"] == chat["tools"]
    assert len(summary["tools"]) > 0
    assert summary["response_format"] == RESPONSE_FORMAT
    assert finished.result.usage.form == "cache"
    assert finished.result.edit.rows_summarised == len(prefix) - 1  # the system message is no row


def test_a_small_models_summary_carries_no_schemas_as_its_chat_carries_none(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    # A small model's tools are described to its first step only, never sent with the chat.
    settings = make_settings(
        base_url=server.url + "/v1", tools_on_request=True, json_tool_fallback=True
    )
    compacting_turn(server, store, settings, script, files=False)
    summary, chat = summary_and_previous(server)
    assert "tools" not in chat
    assert "tools" not in summary
    assert summary["messages"][:-1] == chat["messages"][: len(summary["messages"]) - 1]


def test_a_separate_summary_model_gets_the_transcript_form(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    settings = make_settings(base_url=server.url + "/v1", summary_model="summary-model")
    _, events = compacting_turn(server, store, settings, script)
    [finished] = compactions(events)
    summary, _ = summary_and_previous(server)
    assert summary["model"] == "summary-model"
    assert "tools" not in summary
    assert summary["messages"][1]["content"].startswith("<conversation>\n")
    assert finished.result.usage.form == "transcript"


def test_input_bigger_than_the_window_is_asked_in_the_cache_form_then_chunked_updates(
    server: FakeServer,
) -> None:
    rows = [Row("user", f"question {i} " + "q" * 1500) for i in range(8)]
    for i in range(8):
        rows.insert(2 * i + 1, Row("assistant", f"answer {i} " + "a" * 1500))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    settings = Settings(base_url=server.url + "/v1", model="fake-model")
    engine = CompactionEngine(
        2000, 2, None, None, "Be brief.", client, settings=settings, summariser_context=2048
    )
    engine.request_shape = RequestShape("Be brief.", (), "fake-model")
    result = engine.compact(History(rows))
    first, *updates = server.chat_requests()
    assert result.usage.form == "cache+transcript"
    assert result.layer == "chunked"
    end = len(first["messages"]) - 2  # the rows that fit, less the system and instruction
    assert 2 <= end < len(rows) - 2
    assert first["messages"][:-1] == build_messages(rows[:end], "Be brief.")
    assert first["messages"][-1]["content"] == SMALL_CACHE_INSTRUCTION  # a 1,500 trigger
    assert len(updates) == result.usage.requests - 1 > 1
    for body in updates:
        assert body["messages"][1]["content"].startswith("<conversation>\n[")
        assert "<previous-summary>" in body["messages"][1]["content"]


def test_the_cache_form_is_the_chats_messages_plus_one_instruction() -> None:
    rows = [Row("compacted", "## Goal\nold"), Row("user", "hi"), Row("assistant", "hello")]
    messages = build_cache_request(rows, RequestShape("System."), focus="the parser")
    assert messages[:-1] == build_messages(rows, "System.")
    assert len(messages) == 4
    assert messages[-1]["content"].startswith(CACHE_INSTRUCTION)
    assert messages[-1]["content"].endswith("Pay particular attention to: the parser")


# The server's cache counts

LLAMA_USAGE_CHUNK = {  # the last chunk of a streamed reply from llama.cpp's server, as sent
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "qwen",
    "choices": [],
    "usage": {
        "completion_tokens": 40,
        "prompt_tokens": 975,
        "total_tokens": 1015,
        "prompt_tokens_details": {"cached_tokens": 974},
    },
    "timings": {"cache_n": 974, "prompt_n": 1, "prompt_ms": 64.1, "predicted_n": 40},
}
OPENAI_USAGE_CHUNK = {
    "id": "chatcmpl-2",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "gpt",
    "choices": [],
    "usage": {
        "completion_tokens": 7,
        "prompt_tokens": 2006,
        "total_tokens": 2013,
        "prompt_tokens_details": {"cached_tokens": 1920},
    },
}
PLAIN_USAGE_CHUNK = {
    **OPENAI_USAGE_CHUNK,
    "usage": {"completion_tokens": 7, "prompt_tokens": 9, "total_tokens": 16},
}


@pytest.mark.parametrize(
    ("chunk", "usage"),
    [
        pytest.param(LLAMA_USAGE_CHUNK, Usage(975, 40, 974), id="llama.cpp-timings"),
        pytest.param(OPENAI_USAGE_CHUNK, Usage(2006, 7, 1920), id="openai-cached_tokens"),
        pytest.param(PLAIN_USAGE_CHUNK, Usage(9, 7, None), id="not-reported"),
    ],
)
def test_the_servers_cache_count_is_read_from_its_usage_chunk(
    chunk: dict[str, Any], usage: Usage
) -> None:
    from openai.types.chat import ChatCompletionChunk

    reader = ReplyReader(())
    list(reader.feed(ChatCompletionChunk.model_validate(chunk)))
    assert reader.usage == usage


def test_llama_timings_win_over_the_usage_details() -> None:
    from openai.types.chat import ChatCompletionChunk

    chunk = dict(LLAMA_USAGE_CHUNK, timings={"cache_n": 900, "prompt_n": 75})
    reader = ReplyReader(())
    list(reader.feed(ChatCompletionChunk.model_validate(chunk)))
    assert reader.usage == Usage(975, 40, 900)


# Item 3: short checkpoints


def test_the_schema_gives_every_section_a_budget() -> None:
    properties = RESPONSE_FORMAT["json_schema"]["schema"]["properties"]
    assert properties["goal"]["maxLength"] > 0
    for key, items in SECTION_ITEMS.items():
        assert properties[key]["maxItems"] == items
        assert properties[key]["items"]["maxLength"] == ITEM_CHARS


def test_a_section_over_its_budget_is_cut_and_flagged() -> None:
    reply = {
        "goal": "g",
        "done": [f"step {i}" for i in range(SECTION_ITEMS["done"] + 3)],
        "next_steps": ["z" * (ITEM_CHARS + 50)],
    }
    checkpoint = parse_reply(json.dumps(reply))
    assert checkpoint.over_budget == ("done", "next_steps")
    assert f"step {SECTION_ITEMS['done'] - 1}" in checkpoint.text
    assert f"step {SECTION_ITEMS['done']}" not in checkpoint.text
    assert "1. " + "z" * (ITEM_CHARS - 1) + "…" in checkpoint.text


def test_next_steps_are_numbered_one_two_three() -> None:
    reply = {"goal": "g", "next_steps": ["first", "second", "third"]}
    text = parse_reply(json.dumps(reply)).text
    assert "## Next steps\n1. first\n2. second\n3. third" in text


# Item 5: deep enough that the next compaction is many turns away


class FixedSummariser:
    """Answers every summary request with `SUMMARY`."""

    def summarise(self, messages: Any, **options: Any) -> SummaryReply:
        return SummaryReply(SUMMARY, prompt_tokens=1, completion_tokens=1)


def test_after_a_compaction_the_request_is_at_most_half_the_trigger() -> None:
    # Today's rule kept a tail of what the trigger (12,000) left after the system prompt (1,000)
    # and twice the summary's cap (2,048): ten 700-token pairs stayed, landing at ~8,300.
    rows: list[Row] = []
    for i in range(30):
        rows += [Row("user", f"question {i}"), Row("assistant", f"answer {i} " + "x" * 2100)]
    engine = CompactionEngine(
        16_000, 20, None, "m", "s" * 3000, summariser=FixedSummariser(), summariser_context=8192
    )
    result = engine.compact(History(rows))
    assert result.changed
    assert engine.context_tokens(list(result.rows)) <= engine.trigger // 2 < engine.threshold // 2


# A real cache hit, on the embedded SmolLM2


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(300)
def test_the_embedded_server_serves_the_cache_form_from_its_cache(home: Path) -> None:
    from nbchat.embedded.server import start_server

    server = start_server("smollm", home=home, n_ctx=1024, timeout=60)
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        rows = [Row("user", "My name is Ada. I like tea."), Row("assistant", "Hello Ada!")]
        shape = RequestShape("You are brief.", (), "smollm")
        chat = client.chat.completions.create(
            model="smollm",
            messages=build_cache_request(rows, shape)[:-1],  # type: ignore[arg-type]
            max_tokens=1,
        )
        summariser = OpenAISummariser(client, settings=Settings(base_url=server.base_url))
        reply = summariser.summarise_prefix(
            build_cache_request(rows, shape),
            tools=(),
            max_tokens=8,
            response_format=RESPONSE_FORMAT,
            stop=None,
        )
    finally:
        server.stop()
    assert chat.usage is not None
    assert reply.cached_tokens is not None and reply.cached_tokens > 0
    assert reply.prompt_tokens > reply.cached_tokens


def test_a_history_changed_since_the_last_request_is_summarised_as_a_transcript() -> None:
    rows = [Row("user", "read it"), Row("assistant", "x" * 3000), Row("user", "and now")]
    sent = build_messages(rows, "S.")
    shape = RequestShape("S.", (), "m", tuple(sent))
    assert cache_prefix_end(rows, shape, model="m", window=8192, reply_tokens=100) == 3
    archived = [rows[0], Row("assistant", "[Archived output]"), rows[2]]
    assert cache_prefix_end(archived, shape, model="m", window=8192, reply_tokens=100) == 0
    unknown = RequestShape("S.", (), "m")
    assert cache_prefix_end(archived, unknown, model="m", window=8192, reply_tokens=100) == 3
    assert cache_prefix_end(rows, shape, model="other", window=8192, reply_tokens=100) == 0

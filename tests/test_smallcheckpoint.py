"""The small checkpoint on a small trigger (issue 13, the compacting turn with no idle time).

With no pause to prepare in, the user waits for every token of the summary. On a trigger under
~2,000 tokens the summary is asked for under the small schema (goal, two items of progress and
of next steps, one in progress, short items) with a cap of a tenth of the
trigger; a bigger trigger keeps the full schema and `summary_max_tokens`. Over the real store,
the real `Conversation` and the real test server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from helpers import Script, is_summary_request, run

from nbchat.compaction.cacheform import SMALL_CACHE_INSTRUCTION
from nbchat.compaction.prompts import RESPONSE_FORMAT, SMALL_RESPONSE_FORMAT
from nbchat.compaction.result import CompactionResult
from nbchat.compaction.steps import CompactionSettings
from nbchat.conversation.events import CompactionFinished
from nbchat.conversation.loop import Conversation
from nbchat.history import estimate_tokens
from nbchat.store.store import Store
from nbchat.tools import ToolRegistry

SUMMARY = json.dumps({"goal": "Answer", "done": ["answered"], "next_steps": ["go on"]})


@pytest.fixture
def script() -> Script:
    return Script(SUMMARY)


@pytest.fixture
def server(script: Script) -> Iterator[FakeServer]:
    with FakeServer(responder=script) as running:
        yield running


def compacting_turn(
    server: FakeServer,
    store: Store,
    settings: Any,
    script: Script,
    *,
    tools: ToolRegistry | None = None,
    question: str = "question {i}",
) -> tuple[dict[str, Any], CompactionResult]:
    """Chat until a turn compacts; the summary request it sent and the compaction."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    chat = Conversation(settings, store, client=client, tools=tools)
    for i in range(60):
        script.chat.append(Reply(text=f"answer {i} " + "x" * 600))
        for event in run(chat, question.format(i=i)):
            if isinstance(event, CompactionFinished) and event.result.changed:
                body = next(b for b in server.chat_requests() if is_summary_request(b))
                return body, event.result
    raise AssertionError("no turn compacted")


def summary_request(
    server: FakeServer, store: Store, settings: Any, script: Script
) -> dict[str, Any]:
    return compacting_turn(server, store, settings, script)[0]


def test_a_small_trigger_asks_for_the_small_checkpoint_with_a_tenth_of_it(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    settings = make_settings(
        base_url=server.url + "/v1", context_token_threshold=1600, summary_max_tokens=150
    )
    body = summary_request(server, store, settings, script)
    assert body["response_format"] == SMALL_RESPONSE_FORMAT
    assert body["max_tokens"] == 1600 * 3 // 4 // 10
    assert body["messages"][-1]["content"] == SMALL_CACHE_INSTRUCTION
    schema = SMALL_RESPONSE_FORMAT["json_schema"]["schema"]["properties"]
    assert [schema[key]["maxItems"] for key in ("constraints", "done", "next_steps")] == [0, 2, 2]


def test_a_small_trigger_records_only_the_newest_user_words_beside_the_checkpoint(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    # The recorded facts are read again before every reply too: on a small trigger the user's
    # older messages are left to the checkpoint instead of being quoted (600 tokens of them).
    settings = make_settings(
        base_url=server.url + "/v1", context_token_threshold=1600, system_prompt="Be brief."
    )
    question = "question {i}: " + "please explain this part of the code in detail " * 3
    _, result = compacting_turn(
        server, store, settings, script, tools=ToolRegistry(), question=question
    )
    assert result.edit.summary_row is not None
    quoted = [line for line in result.edit.summary_row.content.splitlines() if "> question" in line]
    assert 2 <= len(quoted) <= 3  # the first message and the newest one or two
    assert estimate_tokens(result.edit.summary_row) < 1600 * 3 // 4 // 4


def test_a_big_trigger_keeps_the_full_checkpoint_and_its_cap(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    settings = make_settings(
        base_url=server.url + "/v1", context_token_threshold=4000, summary_max_tokens=300
    )
    body = summary_request(server, store, settings, script)
    assert body["response_format"] == RESPONSE_FORMAT
    assert body["max_tokens"] == 300


def test_the_cap_never_goes_under_its_floor_nor_over_the_setting() -> None:
    def cap(threshold: int, summary_max_tokens: int) -> int:
        settings = CompactionSettings(threshold, 5, summary_max_tokens=summary_max_tokens)
        return settings.checkpoint_tokens

    assert cap(400, 1024) == 96
    assert cap(400, 50) == 50
    assert cap(100_000, 1024) == 1024

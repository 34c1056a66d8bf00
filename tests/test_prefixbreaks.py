"""One break of the server's cached prefix per compaction (issue 13, the replay's cache column).

A prune rewrites old tool outputs in the middle of the history, so a prefix-caching server reads
everything after the first of them again; a prune alone, with no summary, then brings the
trigger back a few turns later for a summary that breaks the prefix once more. By default the
prune layer now acts only with a summary (`PRUNE_ALONE`); `prune_alone=True` gives the old,
model-free prune. Over the real store and the real test server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from factories import assistant, tool_call, tool_result, user
from fakeserver import FakeServer
from helpers import Script, is_summary_request

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.prune import is_placeholder
from nbchat.config import Settings
from nbchat.conversation.session import apply_compaction
from nbchat.history import Row
from nbchat.store.store import Store

BIG = "x" * 3000  # 1,000 tokens: an old tool output the prune layer would archive
SUMMARY = json.dumps({"goal": "Fix the build", "done": ["ran make six times"]})
THRESHOLD = 6000  # over the trigger with the outputs, under it with placeholders


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(responder=Script(SUMMARY)) as running:
        yield running


def engine(server: FakeServer, *, prune_alone: bool = False) -> CompactionEngine:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    settings = Settings(base_url=server.url + "/v1", model="fake-model")
    return CompactionEngine(
        THRESHOLD, 5, None, None, "Be brief.", client, settings=settings, prune_alone=prune_alone
    )


def history() -> list[Row]:
    rows = [user("fix everything")]
    for n in range(6):
        rows += [tool_call((f"c{n}", "run_shell", {"command": "make"})), tool_result(f"c{n}", BIG)]
    return [*rows, assistant("done"), user("thanks"), assistant("bye")]


def test_by_default_a_compaction_prunes_only_beside_a_summary(
    server: FakeServer, store: Store
) -> None:
    rows = history()
    session = store.create_session("one break")
    store.append_rows(session, rows)
    result = engine(server).compact(store.load_active(session))
    apply_compaction(store, session, result, expected_active=len(rows))
    assert result.layer == "summary"
    assert [is_summary_request(body) for body in server.chat_requests()] == [True]
    active = store.load_active(session)
    assert active[0].role == "compacted"
    # Everything after the new summary row is the old history's tail, unchanged or pruned:
    # the prefix breaks once, at the start.
    assert active[1:] == list(result.rows[1:])
    assert all(index >= len(rows) - result.edit.keep_tail for index in result.edit.replacements)
    kinds = [record["kind"] for record in store.list_compactions(session)]
    assert kinds[-1] == "summary"


def test_prune_alone_still_compacts_without_a_model_call_when_asked(
    server: FakeServer, store: Store
) -> None:
    rows = history()
    session = store.create_session("prune alone")
    store.append_rows(session, rows)
    result = engine(server, prune_alone=True).compact(store.load_active(session))
    apply_compaction(store, session, result, expected_active=len(rows))
    assert result.layer == "prune"
    assert server.chat_requests() == []
    assert [record["kind"] for record in store.list_compactions(session)] == ["prune"]
    placeholders = sum(is_placeholder(row) for row in store.load_active(session))
    assert placeholders == len(result.edit.replacements) > 0

"""Tool rounds that end in words on a real model (issue 19, item 4): the embedded SmolLM2, asked
the way the default path asks a small model (its tools to its first step) and the way any
llama.cpp server named by NBCHAT_BASE_URL is asked (tools in every request). After a tool
result the user gets words, never an empty reply or a call written as JSON, and a plain
question never gets call JSON, whatever the model would rather write."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from nbchat.config import Settings
from nbchat.conversation.events import Done, RowSaved
from nbchat.conversation.loop import Conversation
from nbchat.embedded.server import LocalServer, ensure_server
from nbchat.history import Row
from nbchat.store.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.timeout(300)]

FAKE_CALL = re.compile(r'"name"\s*:\s*"[^"]*"\s*,\s*"(arguments|parameters)"\s*:|<tool_call>')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    home = tmp_path_factory.mktemp("smollm-home")
    running = ensure_server("smollm", home=home, n_ctx=4096, timeout=240)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("The review meeting is on Thursday in room B12.\n")
    return tmp_path


def settings_for(server: LocalServer, workspace: Path, *, on_request: bool) -> Settings:
    """The default path's settings on this server: a small model's (its tools to its first
    step, llama.cpp's grammars) or any llama.cpp server's (tools in every request)."""
    return Settings(
        base_url=server.base_url,
        model=server.model,
        home=workspace / "home",
        workspace=workspace,
        tools_on_request=on_request,
        temperature=0.0,
        max_tokens=64,
        max_tool_turns=2,
        tool_policy="allow",
    )


def answer_of(settings: Settings, text: str, tool_choice: str | None = None) -> list[Row]:
    store = Store(settings.database_path)
    chat = Conversation(settings, store)
    try:
        chat.new_session("t")
        events = list(chat.send(text, tool_choice=tool_choice))
    finally:
        chat.close()
        store.close()
    assert events[-1] == Done()
    return [event.row for event in events if isinstance(event, RowSaved)]


def assert_words(rows: list[Row]) -> None:
    """The turn ends in words: an assistant row with text and no call written as JSON (a
    notice that the reply reached the test's small `max_tokens` may follow it: still words)."""
    if rows[-1].role == "system" and "max_tokens" in rows[-1].content:
        rows = rows[:-1]
    last = rows[-1]
    assert last.role == "assistant" and last.content.strip(), rows
    assert not FAKE_CALL.search(last.content), last.content


@pytest.mark.parametrize("on_request", [True, False], ids=["small model", "tools always"])
def test_after_a_tool_result_the_answer_is_words(
    server: LocalServer, workspace: Path, on_request: bool
) -> None:
    settings = settings_for(server, workspace, on_request=on_request)
    rows = answer_of(settings, "When is the meeting? It is in notes.txt.", "read_file")
    assert [row.role for row in rows][:3] == ["user", "assistant_full", "tool"]
    assert "Thursday" in rows[2].content  # the tool really ran
    assert_words(rows)


@pytest.mark.parametrize("on_request", [True, False], ids=["small model", "tools always"])
def test_a_plain_question_gets_no_call_json(
    server: LocalServer, workspace: Path, on_request: bool
) -> None:
    settings = settings_for(server, workspace, on_request=on_request)
    rows = answer_of(settings, "What is 17 times 23?")
    assert_words(rows)

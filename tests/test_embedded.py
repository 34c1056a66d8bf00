"""The default setup end to end on the real embedded model (SmolLM2): no server configured,
start it, chat, lose it, get told what to do, start it again from the widget."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from factories import user
from helpers import buttons

from nbchat.config import Settings
from nbchat.conversation.events import Done, Failed, UsageReported
from nbchat.conversation.loop import Conversation
from nbchat.embedded import server as local
from nbchat.errors import ServerUnavailableError
from nbchat.history import build_messages
from nbchat.store.store import Store
from nbchat.ui import ChatUI

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.timeout(240)]


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    home = tmp_path / "home"
    yield Settings(
        home=home,
        workspace=tmp_path,
        local_model="smollm",
        local_n_ctx=2048,
        max_tokens=48,
        temperature=0.0,
        tool_policy="deny",
        # SmolLM2's template drops the tools, so both warmed prompts are one prompt, kept in the
        # server's slot; with the overview they differ and the slot keeps only the last one.
        workspace_overview=False,
    )
    running = local.find_running(home=home)
    if running is not None:
        running.stop()


def kill_server(settings: Settings) -> None:
    running = local.find_running(home=settings.home)
    assert running is not None
    os.kill(running.pid, signal.SIGKILL)


def test_no_server_then_started_then_lost_says_what_to_do_each_time(settings: Settings) -> None:
    chat = Conversation(settings, Store(settings.database_path))
    refused = list(chat.send("hello"))[-1]
    assert isinstance(refused, Failed) and isinstance(refused.error, ServerUnavailableError)
    assert refused.message.startswith(
        "No model server is configured and the embedded one is "
        "not running. Start it with `nbchat serve-model`"
    )
    assert refused.unsent_text == "hello"

    connection = chat.connect(start=True)
    assert connection.embedded and connection.n_ctx == 2048
    assert chat.threshold == 2048 - 48
    events = list(chat.send("hello"))
    assert events[-1] == Done()
    assert chat.history.rows[0] == user("hello") and chat.history.rows[1].role == "assistant"

    kill_server(settings)
    lost = list(chat.send("still there?"))[-1]
    assert isinstance(lost, Failed) and isinstance(lost.error, ServerUnavailableError)
    assert lost.message.startswith("The embedded model server at http://127.0.0.1:")
    assert "nbchat serve-model" in lost.message and "NBCHAT_AUTOSTART=1" in lost.message
    assert chat.history.rows[-1] == user("still there?")  # the message was kept

    chat.connect(start=True)
    assert list(chat.send("and now?"))[-1] == Done()


def test_the_widget_offers_to_start_the_model_and_restart_it_after_it_dies(
    settings: Settings,
) -> None:
    ui = ChatUI(settings)
    try:
        assert ui.wait(60) is False  # no server yet: the cell is told too
        start = [b for b in buttons(ui.messages.box) if b.description == "Start local model"]
        assert len(start) == 1
        start[0].click()
        assert ui.wait(120)
        assert local.find_running(home=settings.home) is not None
        ui.send("hi")
        assert ui.wait(120)
        assert ui.conversation.history.rows[-1].role == "assistant"

        kill_server(settings)
        ui.send("are you there?")
        assert ui.wait(60) is False  # the server is gone: the turn failed
        offered = [b for b in buttons(ui.messages.box) if b.description == "Start local model"]
        assert len(offered) == 2
        offered[-1].click()
        assert ui.wait(120)
        ui.send("back?")
        assert ui.wait(120)
        assert ui.conversation.history.rows[-1].role == "assistant"
    finally:
        ui.close()


def test_autostart_starts_the_model_without_asking(settings: Settings) -> None:
    ui = ChatUI(settings.replace(autostart=True))
    try:
        ui.send("hi")
        assert ui.wait(120)
        assert ui.conversation.history.rows[-1].role == "assistant"
        assert not [b for b in buttons(ui.messages.box) if b.description == "Start local model"]
    finally:
        ui.close()


def test_after_warm_up_the_first_request_reads_its_prompt_from_the_cache(
    settings: Settings,
) -> None:
    # Issue 12: the first reply took 24-66 s, nearly all of it reading the system prompt and the
    # tool schemas. After `warm_up` the server has them: llama.cpp's own timings say how many
    # of the first request's prompt tokens came from its cache (cache_n) and how many it read.
    store = Store(settings.database_path)
    chat = Conversation(settings, store)
    try:
        chat.new_session()
        base_url = chat.budget.connect(start=True).base_url.rstrip("/")
        chat.warm_up()
        for tools in ([], chat.tools.schemas()):  # a plain first message, then a file request
            system_prompt = chat.overview.system_prompt(
                settings.system_prompt, tools_offered=bool(tools)
            )  # with tools it names the workspace's top level, as a real request's does
            messages = build_messages([user("Hi")], system_prompt)
            body = {"model": settings.model, "messages": messages, "max_tokens": 1}
            body |= {"tools": tools} if tools else {}
            reply = httpx.post(base_url + "/chat/completions", json=body, timeout=120).json()
            timings = reply["timings"]
            assert timings["cache_n"] > 10 * timings["prompt_n"], (bool(tools), timings)
    finally:
        chat.close()
        store.close()


def served_tokens(base_url: str) -> tuple[int, int]:
    """What the server has computed since it started (llama.cpp's /metrics): prompt tokens read
    (those reused from its cache excluded) and tokens generated."""
    metrics = httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=30).text
    values = dict(line.split()[:2] for line in metrics.splitlines() if line.startswith("llama"))
    read, generated = (
        values["llamacpp:prompt_tokens_total"],
        values["llamacpp:tokens_predicted_total"],
    )
    return int(float(read)), int(float(generated))


def test_a_message_sent_at_once_after_connecting_never_waits_for_the_warm_up(
    settings: Settings,
) -> None:
    # Issue 19: a message sent right after `ChatUI()` waited for the warm-up to read its prompts
    # (7.6 s for a plain question, a warm reply's first token coming in 0.3-0.7 s). Now the
    # turn cancels the warm-up before it is sent: the fresh server reads one prompt and answers
    # one request, the message's own. (After the turn the warm-up runs again, to save the
    # prompts for the next restart: the counts are read when the turn is done. Without the
    # grammars a small model's turn asks no first step: its one request is the chat's.)
    store = Store(settings.database_path)
    chat = Conversation(settings.replace(json_tool_fallback=False), store)
    try:
        chat.new_session()
        base_url = chat.connect(start=True).base_url
        events = []
        for event in chat.send("What is 2+2?"):
            events.append(event)
            if isinstance(event, Done):
                served = served_tokens(base_url)
        assert events[-1] == Done()
        assert chat.warmer.wait(60)
        usage = [event for event in events if isinstance(event, UsageReported)]
        assert len(usage) == 1
        assert served == (usage[0].prompt_tokens, usage[0].completion_tokens)
    finally:
        chat.close()
        store.close()

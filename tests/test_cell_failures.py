"""Failures reach the cell that drives a `ChatUI`, not only the widget's HTML.

`ui.send(...)` then `ui.wait()` is how a notebook run by nbconvert (or a script) uses the chat;
there the widget is never seen, so a failed turn must make `wait()` return False and print the
error, with what to do, on the cell's stderr. A session database that cannot be opened gives one
message with what to do instead of a traceback, and is left exactly as it was.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from fakeserver_replies import MODEL_NAME
from fixtures_server import Canned, ScriptedServer, chunk
from helpers import shown_text

from nbchat.store.store import Store
from nbchat.ui import ChatUI


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


def ui_for(server: FakeServer, make_settings: Any, **overrides: Any) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    settings = make_settings(context_token_threshold=50_000, **overrides)
    return ChatUI(settings, client=client)


def errors_in(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("nbchat:")]


def test_a_failed_turn_makes_wait_false_and_prints_the_error_in_the_cell(
    server: FakeServer, make_settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server.enqueue(Reply(fault="http500"))
    ui = ui_for(server, make_settings)
    try:
        ui.send("Hi")
        assert ui.wait(timeout=60) is False
        printed = errors_in(capsys)
        assert len(printed) == 1
        assert "Injected internal server error" in printed[0]
        # Reported once: the next turn that works makes wait() True again.
        server.enqueue(Reply(text="Hello!"))
        ui.send("Again")
        assert ui.wait(timeout=60) is True
        assert errors_in(capsys) == []
    finally:
        ui.close()


def test_without_a_server_or_autostart_wait_is_false_and_says_what_to_do(
    make_settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Headless, the embedded default, NBCHAT_AUTOSTART unset and no server running.
    ui = ChatUI(make_settings(base_url=None, autostart=False))
    try:
        ui.send("Hi! What is 2 + 2?")
        assert ui.wait(timeout=60) is False
        printed = errors_in(capsys)
        assert len(printed) == 1
        assert "the embedded one is not running" in printed[0]
        assert "NBCHAT_AUTOSTART=1" in printed[0] and "nbchat serve-model" in printed[0]
        assert list(ui.conversation.history) == []
        assert ui.input.value == "Hi! What is 2 + 2?"  # given back, to send once it runs
    finally:
        ui.close()


def test_a_file_that_is_no_database_gives_one_message_with_what_to_do_and_is_left_alone(
    make_settings: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"  # NBCHAT_DB_PATH pointed at the user's own file
    garbage = bytes(range(256)) * 40
    path.write_bytes(garbage)
    ui = ChatUI(make_settings(db_path=path))  # no traceback: the widget says what happened
    try:
        shown = shown_text(ui)
        message = (
            f"The chat cannot start: Could not open the session database: {path} is not a "
            "SQLite database, so it is not nbchat's; it was left as it is. Point NBCHAT_DB_PATH "
            "at nbchat's database or at a file that does not exist yet (nbchat creates it)."
        )
        assert shown.count(message) == 1
        assert "mv " not in shown and "nbchat doctor" not in shown  # advice given once, and
        assert "unavailable" in repr(ui)  # never to move the user's file
        assert capsys.readouterr().err == ""  # the widget shows it; the cell gets it on wait()
        ui.send("Hi")
        assert ui.wait(timeout=10) is False
        assert errors_in(capsys) == [f"nbchat: {message}"]
    finally:
        ui.close()
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("notes")) == ["notes.txt"]


def test_a_locked_database_says_to_close_the_other_program(
    make_settings: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("CREATE TABLE other (a)")
        holder.execute("BEGIN EXCLUSIVE")  # another program's long write
        ui = ChatUI(make_settings(db_path=path), store=Store(path, busy_timeout=0.2))
        try:
            shown = shown_text(ui)
            assert shown.count("The chat cannot start") == 1
            assert shown.count("Close ") == 1  # the advice once, in the store's words
            assert ui.wait(timeout=10) is False
            assert len(errors_in(capsys)) == 1
        finally:
            ui.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with sqlite3.connect(path) as check:
        tables = [name for (name,) in check.execute("SELECT name FROM sqlite_master")]
    assert tables == ["other"]


def test_the_widget_says_when_the_server_does_not_serve_the_model_name(
    server: FakeServer, make_settings: Any
) -> None:
    ui = ChatUI(make_settings(base_url=server.url + "/v1"), model="gpt-4o-mini-typo")
    try:
        assert ui.wait(timeout=30) is True  # a notice, not a failure: the user may fix it
        shown = shown_text(ui.messages.box)
        assert (
            f"does not serve model 'gpt-4o-mini-typo' (from argument); it serves {MODEL_NAME}."
        ) in shown
        assert ui.conversation.settings.model == "gpt-4o-mini-typo"  # not ours to change
    finally:
        ui.close()


def test_on_llama_cpp_the_session_records_the_model_really_served(
    make_settings: Any, tmp_path: Path
) -> None:
    llama = {"id": "qwen", "object": "model", "owned_by": "llamacpp"}
    reply = [chunk({"content": "4"}), chunk(finish="stop"), "[DONE]"]
    with ScriptedServer() as scripted:
        scripted.add("/v1/models", Canned(body={"object": "list", "data": [llama]}))
        scripted.add("/v1/chat/completions", Canned(events=reply))
        settings = make_settings(base_url=scripted.url + "/v1", context_token_threshold=9000)
        ui = ChatUI(settings, model="gpt-4o-mini-typo")
        try:
            assert ui.wait(timeout=30) is True
            assert "serves 'qwen', not model 'gpt-4o-mini-typo'" in shown_text(ui.messages.box)
            ui.send("What is 2 + 2?")
            assert ui.wait(timeout=30) is True
            assert [info.model for info in ui.store.list_sessions()] == ["qwen"]
        finally:
            ui.close()


def test_a_chat_that_cannot_be_built_says_why_and_nothing_else() -> None:
    # In a script (NBCHAT_HOME is the test's) a half-built widget's `__del__` once printed
    # "Exception ignored in ... Widget.__del__ ... no attribute '_stop'" after the real error.
    script = (
        "import gc\n"
        "from nbchat.errors import ConfigError\n"
        "from nbchat.ui import ChatUI\n"
        "try:\n"
        "    ChatUI(base_url='not a url')\n"
        "except ConfigError as error:\n"
        "    print(error)\n"
        "gc.collect()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.startswith("base_url must be an http:// or https:// URL")
    assert done.stderr == ""

"""ChatUI in plain pytest (no kernel, no browser), against the test server over real HTTP."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets
import openai
import pytest
from factories import assistant, user
from fakeserver import FakeServer, Reply
from helpers import buttons, recording_comms, shown_text

from nbchat.config import Settings
from nbchat.history import Row
from nbchat.llm.endpoint import destination_of
from nbchat.store.store import Store
from nbchat.ui import ChatUI
from nbchat.ui.actions import COMMANDS


@pytest.fixture(autouse=True)
def recording() -> Iterator[list[tuple[float, str, int]]]:
    with recording_comms() as sent:
        yield sent


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


@pytest.fixture
def settings(make_settings) -> Settings:  # type: ignore[no-untyped-def]
    return make_settings(context_token_threshold=50_000, tool_policy="ask")


def make_ui(server: FakeServer, store: Store, settings: Settings, **kwargs: Any) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return ChatUI(settings, store=store, client=client, **kwargs)


@pytest.fixture
def ui(server: FakeServer, store: Store, settings: Settings) -> Iterator[ChatUI]:
    chat = make_ui(server, store, settings)
    yield chat
    chat.close()


def texts(ui: ChatUI) -> str:
    """All HTML currently shown in the message list."""
    return shown_text(ui.messages.box)


def button_named(widget: widgets.Widget, name: str) -> widgets.Button:
    return next(b for b in buttons(widget) if b.description == name)


def test_typing_and_clicking_send_shows_the_streamed_reply(ui: ChatUI, server: FakeServer) -> None:
    server.enqueue(Reply(text="Hello **there**", chunk_size=3))
    ui.input.set_state({"value": "hi"})
    ui.press_send()
    assert ui.wait(20)
    assert "<strong>there</strong>" in texts(ui)
    assert ui.conversation.history.rows == [user("hi"), assistant("Hello **there**")]
    assert ui.input.value == ""
    assert ui.can_send and not ui.can_stop


def test_enter_in_the_input_sends(ui: ChatUI, server: FakeServer) -> None:
    server.enqueue(Reply(text="pong"))
    ui.input._on_frontend_message(ui.input, {"type": "submit", "value": "ping"}, [])
    assert ui.wait(20)
    assert ui.conversation.history.rows[-1] == assistant("pong")


def test_stop_mid_stream_stops_within_a_chunk(ui: ChatUI, server: FakeServer) -> None:
    server.enqueue(Reply(text="tok " * 2000, chunk_size=4, delay=0.005))
    started = threading.Event()
    original = ui.view.handle

    def watch(event: Any) -> None:
        original(event)
        if type(event).__name__ == "TextDelta":
            started.set()

    ui.view.handle = watch  # type: ignore[method-assign]
    ui.send("talk")
    assert started.wait(20)
    assert ui.can_stop
    ui.press_stop()
    assert ui.wait(20)
    rows = ui.conversation.history.rows
    assert rows[-1] == ("system", "Stopped by you; the reply so far was kept.", "", "", "")
    assert len(rows[-2].content) < len("tok " * 2000)
    assert not ui.can_stop and ui.can_send


def test_a_server_error_shows_a_bubble_and_the_input_is_usable_again(
    ui: ChatUI, server: FakeServer
) -> None:
    server.down()
    ui.send("anyone?")
    assert ui.wait(20) is False  # done, and failed (printed for the cell too)
    assert "nbchat-error" in texts(ui) and "Nothing answers at" in texts(ui)
    assert ui.can_send
    server.up()
    server.enqueue(Reply(text="back"))
    ui.send("again")
    assert ui.wait(20)
    assert ui.conversation.history.rows[-1] == assistant("back")


def test_a_tool_approval_round(ui: ChatUI, server: FakeServer) -> None:
    server.enqueue(
        Reply(tool_calls=[("c1", "run_shell", json.dumps({"command": "echo hi"}))]),
        Reply(text="it said hi"),
    )
    ui.send("run echo")
    card = ui.wait_for_approval(20)
    assert card is not None and card.decision == ""
    ui.approve()
    assert ui.wait(20)
    tool_row = ui.conversation.history.rows[2]
    assert tool_row.role == "tool" and "hi" in tool_row.content
    assert card.decision == "approved"
    assert button_named(card.widget, "Approve").disabled


def test_stop_while_waiting_for_approval_denies(
    ui: ChatUI, server: FakeServer, settings: Settings
) -> None:
    marker = settings.workspace / "ran"
    server.enqueue(
        Reply(tool_calls=[("c1", "run_shell", json.dumps({"command": f"touch {marker}"}))])
    )
    ui.send("run it")
    card = ui.wait_for_approval(20)
    assert card is not None and ui.can_stop
    ui.press_stop()
    assert ui.wait(20)
    assert card.decision == "denied"
    assert ui.conversation.history.rows[2:] == [
        Row(
            "tool",
            "Refused: Stop was pressed while 'run_shell' waited for approval.",
            "c1",
            "run_shell",
        ),
        Row("system", "Stopped by you; the reply so far was kept."),
    ]
    assert not marker.exists()


def test_switching_session_while_streaming_stops_the_old_turn_first(
    ui: ChatUI, server: FakeServer, store: Store
) -> None:
    other = store.create_session("Other chat")
    store.append_rows(other, [user("from the other session"), assistant("its reply")])
    server.enqueue(Reply(text="slow " * 2000, chunk_size=5, delay=0.005))
    ui.send("first")
    ui.refresh_sessions()
    ui.choose_session(other)
    assert ui.wait(20)
    assert ui.conversation.session_id == other
    assert "from the other session" in texts(ui)
    first = next(s for s in store.list_sessions() if s.id != other)
    first_rows = store.load_active(first.id)
    assert first_rows[-1].content == "Stopped by you; the reply so far was kept."


def test_new_starts_an_empty_session_and_keeps_the_old_one(
    ui: ChatUI, server: FakeServer, store: Store
) -> None:
    ui.send("keep me")
    assert ui.wait(20)
    old = ui.conversation.session_id
    ui.press_new()
    assert ui.wait(20)
    assert ui.conversation.session_id != old
    assert store.load_active(str(old))[0] == user("keep me")
    assert "keep me" not in texts(ui)


def run_command(ui: ChatUI, text: str) -> str:
    ui.send(text)
    assert ui.wait(20)
    return texts(ui)


def test_slash_help_and_unknown_commands_list_the_commands(ui: ChatUI) -> None:
    shown = run_command(ui, "/help")
    for name in COMMANDS:
        assert f"/{name}" in shown
    assert "Unknown command /frobnicate" in run_command(ui, "/frobnicate")


def test_slash_session_commands(
    ui: ChatUI, server: FakeServer, store: Store, settings: Settings
) -> None:
    ui.send("hello")
    assert ui.wait(20)
    run_command(ui, "/rename Parser work")
    session_id = str(ui.conversation.session_id)
    assert store.get_session(session_id).title == "Parser work"
    assert "Parser work" in run_command(ui, "/sessions")
    run_command(ui, "/new")
    assert ui.conversation.session_id != session_id
    run_command(ui, "/resume parser")
    assert ui.conversation.session_id == session_id
    run_command(ui, "/clear")
    assert ui.conversation.session_id != session_id and len(store.list_sessions()) >= 2
    run_command(ui, f"/resume {session_id}")
    shown = run_command(ui, "/export json")
    exported = settings.workspace / f"nbchat-parser-work-{session_id}.json"
    assert str(exported) in shown
    assert json.loads(exported.read_text())["session"]["id"] == session_id
    run_command(ui, "/export")
    assert (settings.workspace / f"nbchat-parser-work-{session_id}.md").exists()
    assert "No session matches 'nothing-like-it'" in run_command(ui, "/resume nothing-like-it")
    assert "/resume needs <title or id>" in run_command(ui, "/resume")


def test_slash_model_retry_edit_and_compact(ui: ChatUI, server: FakeServer) -> None:
    run_command(ui, "/model other-model")
    assert ui.conversation.settings.model == "other-model"
    server.enqueue(Reply(text="one"), Reply(text="two"))
    ui.send("question")
    assert ui.wait(20)
    run_command(ui, "/retry")
    assert ui.conversation.history.rows[-1] == assistant("two")
    assert server.chat_requests()[-1]["model"] == "other-model"
    run_command(ui, "/edit")
    assert ui.input.value == "question"
    assert ui.conversation.history.rows == []
    shown = run_command(ui, "/compact keep the file names")
    assert "Nothing compacted" in shown


def test_repr_is_short_and_stable(ui: ChatUI) -> None:
    assert repr(ui) == "ChatUI(model='qwen2.5-coder-1.5b-instruct')"


def test_close_ends_the_worker_thread_mid_stream(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    before = set(threading.enumerate())
    chat = make_ui(server, store, settings)
    server.enqueue(Reply(text="long " * 3000, chunk_size=5, delay=0.005))
    chat.send("go")
    chat.close()
    assert set(threading.enumerate()) - before == set()


def test_a_second_close_touches_nothing(
    server: FakeServer, store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ipywidgets closes a widget again when it is garbage-collected: at the interpreter's exit
    # that came after the store's connections were closed ("Cannot operate on a closed
    # database" from Widget.__del__).
    chat = make_ui(server, store, settings)
    server.enqueue(Reply(text="hello"))
    chat.send("hi")
    assert chat.wait(20)
    chat.close()
    store.close()

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the store was used after the chat was closed")

    monkeypatch.setattr(store, "release_lease", refuse)
    chat.close()
    chat.__del__()


def test_streaming_sends_few_updates_and_few_bytes(
    ui: ChatUI, server: FakeServer, recording: list[tuple[float, str, int]]
) -> None:
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 10 for i in range(53)]
    reply = "\n\n".join(paragraphs)[:15_000]
    chunks = 3000
    server.enqueue(Reply(text=reply, chunk_size=len(reply) // chunks, delay=0.001))
    ui.send("write a lot")
    recording.clear()
    started = time.monotonic()
    assert ui.wait(60)
    duration = time.monotonic() - started
    messages = list(recording)
    sent = sum(size for _, _, size in messages)
    # One refresh of the page = the messages sent together (a few widgets in one flush).
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(messages)]
    refreshes = 1 + sum(1 for gap in gaps if gap > 0.005)
    naive = sum(len(reply[: (i + 1) * 5]) for i in range(chunks))
    print(
        f"\nstream {duration:.2f}s: {refreshes} refreshes ({refreshes / duration:.1f}/s), "
        f"{len(messages)} widget messages, {sent:,} bytes (naive per-chunk re-send: "
        f"{naive:,} bytes)"
    )
    assert ui.conversation.history.rows[-1] == assistant(reply), texts(ui)[-2000:]
    assert refreshes <= 20 * duration + 5
    assert len(messages) <= 4 * refreshes
    assert sent < naive / 20


class FakeShell:
    """What /attach reads from IPython: the user namespace with In and Out."""

    def __init__(self) -> None:
        self.user_ns: dict[str, Any] = {
            "In": ["", "x = 1 / 0", "data = [1, 2, 3]"],
            "Out": {2: [1, 2, 3]},
            "data": [1, 2, 3],
        }


def test_attach_sends_a_cell_a_variable_and_the_last_error_with_the_next_message(
    ui: ChatUI, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbchat.ui import actions

    monkeypatch.setattr(actions, "current_shell", lambda: FakeShell())
    try:
        1 / 0  # noqa: B018 - the "last error" of this kernel
    except ZeroDivisionError as exc:
        monkeypatch.setattr("sys.last_value", exc, raising=False)
    assert "Attached source of cell 1 (9 characters)" in run_command(ui, "/attach cell 1")
    run_command(ui, "/attach var data")
    run_command(ui, "/attach error")
    assert "There is no cell [9]" in run_command(ui, "/attach cell 9")
    assert "No variable named 'nope'" in run_command(ui, "/attach var nope")
    ui.send("why does it fail?")
    assert ui.wait(20)
    sent = server.chat_requests()[-1]["messages"][-1]["content"]
    assert sent.startswith("Source of cell 1:\n```python\nx = 1 / 0\n```")
    assert "The variable data (list):\n```\n[1, 2, 3]\n```" in sent
    assert "ZeroDivisionError: division by zero" in sent
    assert sent.endswith("why does it fail?")
    ui.send("and this?")
    assert ui.wait(20)
    assert server.chat_requests()[-1]["messages"][-1]["content"] == "and this?"


def test_attach_without_a_notebook_kernel_says_so(ui: ChatUI) -> None:
    assert "Attaching needs a notebook (IPython) kernel." in run_command(ui, "/attach cell 1")


def test_each_reply_shows_its_tokens_and_speed(ui: ChatUI, server: FakeServer) -> None:
    server.enqueue(Reply(text="fine", usage=(10, 25), delay=0.01))
    ui.send("how are you?")
    assert ui.wait(20)
    assert " tokens · " in texts(ui) and "tok/s" in texts(ui)
    assert "25 tokens" in texts(ui)


def test_a_long_session_keeps_only_the_newest_messages_live(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session_id = store.create_session("long")
    store.append_rows(session_id, [user(f"message {i}") for i in range(250)])
    chat = make_ui(server, store, settings, session_id=session_id, live_limit=100)
    try:
        shown = chat.messages.box.children
        assert len(shown) == 101 and shown[0].description == "Show earlier (150 more)"
        assert "message 249" in texts(chat) and "message 149" not in texts(chat)
        shown[0].click()
        assert len(chat.messages.box.children) == 201
        assert "message 50" in texts(chat) and "message 49" not in texts(chat)
    finally:
        chat.close()


@pytest.mark.parametrize(
    ("base_url", "shown"),
    [
        (None, "local"),
        ("http://127.0.0.1:8080/v1", "local"),
        ("http://127.8.9.10/v1", "local"),
        ("http://[::1]:8000/v1", "local"),
        ("http://[::ffff:127.0.0.1]:8000/v1", "local"),
        ("http://localhost:11434/v1", "local"),
        ("http+unix://%2Frun%2Fllama.sock/v1", "local"),
        ("https://api.openai.com/v1", "api.openai.com"),
        ("http://192.168.1.20:8000/v1", "192.168.1.20"),
        ("http://127.0.0.1.example.com/v1", "127.0.0.1.example.com"),
    ],
)
def test_where_requests_go_is_decided_from_the_url(base_url: str | None, shown: str) -> None:
    assert destination_of(base_url) == shown


def test_the_header_badge_says_local_for_the_test_server_and_the_host_otherwise(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    local = make_ui(server, store, settings)
    remote_client = openai.OpenAI(base_url="https://api.example.org/v1", api_key="k")
    remote = ChatUI(settings, store=store, client=remote_client)
    try:
        local_badge = 'class="nbchat-badge nbchat-local"'
        assert ">local</span>" in shown_text(local) and local_badge in shown_text(local)
        assert ">api.example.org</span>" in shown_text(remote)
        assert local_badge not in shown_text(remote)
    finally:
        local.close()
        remote.close()


def test_the_picker_shows_the_session_named_by_its_first_message(
    ui: ChatUI, server: FakeServer
) -> None:
    server.enqueue(Reply(text="Sure."))
    ui.send("Plot the sales by month")
    assert ui.wait(20)
    labels = [label for label, _ in ui.session_choices]
    assert len(labels) == 1 and labels[0].startswith("Plot the sales by month · ")

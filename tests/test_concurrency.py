"""Concurrency: two widgets in one kernel, two kernels on one session, Stop / New / switch while
a tool runs or a compaction is in flight, and closing a widget mid-work.

Everything over real HTTP (the test server on 127.0.0.1), a real SQLite file and real child
processes; waits are on events, fifos, pipes and joins, never on sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from factories import assistant, user
from fakeserver import FakeServer, Reply
from helpers import is_summary_request, shown_text
from test_tools import has_exited

from nbchat.config import Settings
from nbchat.conversation.events import Event
from nbchat.conversation.session import READ_ONLY_MESSAGE
from nbchat.history import Row
from nbchat.llm.reader import TextDelta
from nbchat.store.store import Store
from nbchat.ui import ChatUI

SUMMARY = json.dumps({"goal": "Answer the questions", "done": ["answered"]})
STOPPED = Row("system", "Stopped by you; the reply so far was kept.")


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


@pytest.fixture
def settings(make_settings: Any, server: FakeServer) -> Settings:
    return make_settings(
        base_url=server.url + "/v1", context_token_threshold=50_000, tool_policy="allow"
    )


def make_ui(server: FakeServer, store: Store, settings: Settings, **kwargs: Any) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return ChatUI(settings, store=store, client=client, **kwargs)


def last_user_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def watch_events(ui: ChatUI, seen: Callable[[Event], None]) -> None:
    handle = ui.view.handle

    def watch(event: Event) -> None:
        handle(event)
        seen(event)

    ui.view.handle = watch  # type: ignore[method-assign]


# Two widgets in one kernel


@pytest.mark.timeout(60)
def test_two_widgets_in_one_kernel_stream_two_sessions_at_once(
    server: FakeServer, settings: Settings
) -> None:
    both_asked = threading.Barrier(2, timeout=20)

    def answer(body: dict[str, Any]) -> Reply:
        both_asked.wait()  # each request waits for the other: the streams overlap
        text = " ".join([f"reply to {last_user_text(body)}"] * 60)
        return Reply(text=text, chunk_size=7, delay=0.002)

    server.responder = answer
    # Each `ChatUI()` in a notebook opens its own Store on the same file.
    left = make_ui(server, Store(settings.database_path), settings)
    right = make_ui(server, Store(settings.database_path), settings)
    left.send("left question")
    right.send("right question")
    assert left.wait(30) and right.wait(30)
    for ui, side, other in [(left, "left", "right"), (right, "right", "left")]:
        expected = [
            user(f"{side} question"),
            assistant(" ".join([f"reply to {side} question"] * 60)),
        ]
        assert ui.conversation.history.rows == expected
        assert ui.store.load_active(str(ui.conversation.session_id)) == expected
        assert f"reply to {side} question" in shown_text(ui.messages.box)
        assert f"{other} question" not in shown_text(ui.messages.box)
    assert left.conversation.session_id != right.conversation.session_id
    left.close()
    right.close()


# Two kernels on one session

HOLDER = r"""
import sys
import openai
from nbchat.conversation.loop import Conversation
from nbchat.config import Settings
from nbchat.store.store import Store

path, session_id, url, home, workspace = sys.argv[1:6]
settings = Settings(base_url=url + "/v1", home=home, workspace=workspace,
                    context_token_threshold=50000)
client = openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
chat = Conversation(settings, Store(path), session_id, client=client)
print("read-only" if chat.read_only else "writing", flush=True)
for line in sys.stdin:
    if line.strip() == "send":
        events = list(chat.send("from the other kernel"))
        print(type(events[-1]).__name__, flush=True)
    elif line.strip() == "close":
        chat.close()
        print("closed", flush=True)
"""


class OtherKernel:
    """A child process holding a conversation on the same DB and session."""

    def __init__(self, store: Store, session_id: str, server: FakeServer, settings: Settings):
        command = [sys.executable, "-c", HOLDER, str(store.path), session_id, server.url]
        command += [str(settings.home), str(settings.workspace)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.first_line = self.read()

    def read(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def ask(self, word: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()
        return self.read()

    def end(self, *, kill: bool = False) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        if kill:
            self.process.kill()
        self.process.stdin.close()
        self.process.wait(20)
        self.process.stdout.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ending", ["closes the session", "is killed"])
def test_a_second_kernel_on_the_same_session_is_read_only_until_the_first_lets_go(
    server: FakeServer, store: Store, settings: Settings, ending: str
) -> None:
    session_id = store.create_session("shared")
    store.append_rows(session_id, [user("hello"), assistant("ok")])
    other = OtherKernel(store, session_id, server, settings)
    try:
        assert other.first_line == "writing"
        assert other.ask("send") == "Done"
        ui = make_ui(server, store, settings, session_id=session_id)
        assert ui.conversation.read_only
        assert READ_ONLY_MESSAGE in shown_text(ui.messages.box)
        assert "from the other kernel" in shown_text(ui.messages.box)  # its rows, as written there
        ui.send("mine")
        assert ui.wait(20) is False  # refused, and said so in the cell
        assert READ_ONLY_MESSAGE in shown_text(ui.messages.box)
        assert ui.input.value == "mine"  # handed back, nothing written
        assert store.load_active(session_id)[-1] == assistant("ok")
        if ending == "closes the session":
            assert other.ask("close") == "closed"
    finally:
        other.end(kill=ending == "is killed")
    ui.press_send()
    assert ui.wait(20)
    assert not ui.conversation.read_only
    assert store.load_active(session_id) == [
        user("hello"),
        assistant("ok"),
        user("from the other kernel"),
        assistant("ok"),
        user("mine"),
        assistant("ok"),
    ]
    ui.close()


# Stop, New and session switch while a tool runs


SHELL = "sleep 100 & echo $! > pids; echo $$ >> pids; echo go > started; wait"


def press(ui: ChatUI, action: str, other_session: str) -> None:
    if action == "Stop":
        ui.press_stop()
    elif action == "New":
        ui.press_new()
    else:
        ui.choose_session(other_session)


@pytest.fixture
def other_session(store: Store) -> str:
    session_id = store.create_session("Other chat")
    store.append_rows(session_id, [user("from the other session"), assistant("its reply")])
    return session_id


def current_after(action: str, first: str, other_session: str, ui: ChatUI) -> None:
    current = ui.conversation.session_id
    if action == "Stop":
        assert current == first
    elif action == "New":
        assert current not in (first, other_session) and ui.conversation.history.rows == []
    else:
        assert current == other_session
        assert "from the other session" in shown_text(ui.messages.box)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("action", ["Stop", "New", "switch"])
def test_stop_new_or_switch_while_a_shell_tool_runs_kills_its_processes(
    server: FakeServer, store: Store, settings: Settings, other_session: str, action: str
) -> None:
    workspace = settings.workspace
    os.mkfifo(workspace / "started")
    server.enqueue(Reply(tool_calls=[("s1", "run_shell", json.dumps({"command": SHELL}))]))
    ui = make_ui(server, store, settings)
    ui.send("run the long job")
    with open(workspace / "started") as fifo:  # opens once the command runs; read to its end
        assert fifo.read() == "go\n"
    first = str(ui.conversation.session_id)
    press(ui, action, other_session)
    assert ui.wait(30)
    pids = [int(pid) for pid in (workspace / "pids").read_text().split()]
    assert [has_exited(pid) for pid in pids] == [True, True]
    rows = store.load_active(first)
    assert [row.role for row in rows] == ["user", "assistant_full", "tool", "system"]
    assert rows[2].content == (
        "Stopped by the user: the command and everything it started were killed. "
        "Output so far:\n(no output)"
    )
    assert rows[3] == STOPPED
    current_after(action, first, other_session, ui)
    assert [t.name for t in threading.enumerate() if t.name == "nbchat-tool"] == []
    ui.close()


# ... or while a compaction is in flight


@pytest.mark.timeout(60)
@pytest.mark.parametrize("action", ["Stop", "New", "switch"])
def test_stop_new_or_switch_while_compacting_leaves_the_session_as_it_was(
    server: FakeServer, store: Store, settings: Settings, other_session: str, action: str
) -> None:
    summarising = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if not is_summary_request(body):
            return Reply(text="answer " + "x" * 600)
        summarising.set()
        return Reply(text=SUMMARY, chunk_size=1, delay=0.2)  # a slow summariser

    server.responder = answer
    ui = make_ui(server, store, settings)
    for n in range(4):
        ui.send(f"question {n}")
        assert ui.wait(20)
    first = str(ui.conversation.session_id)
    before = store.load_full(first)
    ui.press_compact()
    assert summarising.wait(20)
    press(ui, action, other_session)
    assert ui.wait(30)
    assert store.load_full(first) == before
    assert store.list_compactions(first) == []
    current_after(action, first, other_session, ui)
    if action == "Stop":
        assert ui.conversation.history.rows == [s.row for s in before]
        assert ui.status == "stopped"
    ui.close()


# Closing the widget mid-work


def nbchat_threads(before: set[threading.Thread]) -> list[str]:
    """Threads started since `before`, except the test server's own request handlers."""
    return [
        thread.name
        for thread in set(threading.enumerate()) - before
        if not thread.name.endswith("(process_request_thread)")
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("moment", ["streaming", "running a tool", "compacting"])
def test_closing_the_widget_mid_work_leaves_no_thread_and_no_process(
    server: FakeServer, store: Store, settings: Settings, moment: str
) -> None:
    workspace = settings.workspace
    os.mkfifo(workspace / "started")
    streaming = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            streaming.set()
            return Reply(text=SUMMARY, chunk_size=1, delay=0.2)
        if moment == "running a tool" and body["messages"][-1]["role"] == "user":
            return Reply(tool_calls=[("s1", "run_shell", json.dumps({"command": SHELL}))])
        return Reply(text="word " * 2000, chunk_size=5, delay=0.005)

    server.responder = answer
    before = set(threading.enumerate())
    ui = make_ui(server, store, settings)
    watch_events(ui, lambda event: isinstance(event, TextDelta) and streaming.set())
    if moment == "compacting":
        store.append_rows(
            ui.conversation.new_session(),
            [user(f"q{n}") if n % 2 == 0 else assistant("a" * 600) for n in range(8)],
        )
        ui.conversation.resume(str(ui.conversation.session_id))
        ui.press_compact()
    else:
        ui.send("go")
    if moment == "running a tool":
        with open(workspace / "started") as fifo:
            assert fifo.read() == "go\n"
    else:
        assert streaming.wait(20)
    ui.close()
    assert nbchat_threads(before) == []
    if moment == "running a tool":
        pids = [int(pid) for pid in (workspace / "pids").read_text().split()]
        assert [has_exited(pid) for pid in pids] == [True, True]
    session_id = str(ui.conversation.session_id)
    roles = [row.role for row in store.load_active(session_id)]
    assert (
        roles
        == {
            "streaming": ["user", "assistant", "system"],
            "running a tool": ["user", "assistant_full", "tool", "system"],
            "compacting": ["user", "assistant"] * 4,
        }[moment]
    )
    assert store.list_compactions(session_id) == []


def test_a_closed_widget_refuses_new_work_with_a_clear_message(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    ui = make_ui(server, store, settings)
    ui.close()
    with pytest.raises(RuntimeError) as caught:
        ui.send("anyone?")
    assert str(caught.value) == "this chat was closed; create a new ChatUI"

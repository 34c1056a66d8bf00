"""Faults a user can meet, each over real HTTP and a real SQLite file: the server gone, failing,
rate limiting, cutting or stalling a stream, overflowing; the summariser failing; the process
killed in the middle of a compaction; the database locked, corrupt, too new or on a full disk.

For each one: the turn ends with a message that says what to do, the user's message is either
stored or handed back (`Failed.unsent_text`), no row is half-written, and the next send works.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from factories import assistant, tool_call, tool_result, user
from fakeserver import FakeServer, Reply
from helpers import Script, run, saved, shown_text

from nbchat.config import Settings
from nbchat.conversation.events import CompactionFinished, Done, Event, Failed, Notice
from nbchat.conversation.loop import Conversation
from nbchat.errors import CompactionError, ContextOverflowError, StoreError
from nbchat.history import Row
from nbchat.llm.client import build_client
from nbchat.llm.reader import TextDelta
from nbchat.stopping import StopSignal
from nbchat.store.store import Store
from nbchat.tools import default_registry
from nbchat.ui import ChatUI

SUMMARY = json.dumps(
    {
        "goal": "Answer the questions",
        "constraints": [],
        "done": ["answered"],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": ["answer the next one"],
        "critical_context": [],
    }
)
STOPPED = Row("system", "Stopped by you; the reply so far was kept.")


@pytest.fixture
def script() -> Script:
    return Script(SUMMARY)


@pytest.fixture
def server(script: Script) -> Iterator[FakeServer]:
    with FakeServer(responder=script) as running:
        yield running


@pytest.fixture
def settings(make_settings: Any, server: FakeServer) -> Settings:
    return make_settings(
        base_url=server.url + "/v1", context_token_threshold=50_000, tool_policy="allow"
    )


def conversation(
    server: FakeServer, store: Store, settings: Settings, **kwargs: Any
) -> Conversation:
    """A conversation whose client does not retry: each scripted reply answers one attempt."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, store, client=client, **kwargs)


@pytest.fixture
def chat(server: FakeServer, store: Store, settings: Settings) -> Conversation:
    return conversation(server, store, settings)


def failure(events: list[Event]) -> Failed:
    last = events[-1]
    assert isinstance(last, Failed), last
    return last


def active(chat: Conversation) -> list[Row]:
    return chat.store.load_active(str(chat.session_id), problems=[])


def assert_next_send_works(chat: Conversation, script: Script) -> None:
    script.chat.append(Reply(text="working again"))
    events = run(chat, "are you back?")
    assert events[-1] == Done()
    assert saved(events) == [user("are you back?"), assistant("working again")]
    assert active(chat) == chat.history.rows


# The model server


def test_a_server_refusing_mid_turn_keeps_the_tool_round_and_the_next_send_works(
    server: FakeServer, store: Store, settings: Settings, script: Script
) -> None:
    registry = default_registry()

    @registry.register
    def restart_server() -> str:
        """Take the model server down (as a crash between two requests would)."""
        server.down()
        return "restarting"

    chat = conversation(server, store, settings, tools=registry)
    script.chat.append(Reply(tool_calls=[("r1", "restart_server", "{}")]))
    events = run(chat, "restart it")
    failed = failure(events)
    assert failed.message == (
        f"Nothing answers at {server.url}/v1 (the client given to the chat). Start that server, "
        "or give the chat a client for one that runs."
    )
    assert failed.unsent_text == ""
    assert [row.role for row in active(chat)] == ["user", "assistant_full", "tool"]
    assert active(chat)[2] == tool_result("r1", "restarting", name="restart_server")
    server.up()
    assert_next_send_works(chat, script)
    resent = server.chat_requests()[-1]["messages"]
    assert [m["role"] for m in resent] == ["system", "user", "assistant", "tool", "user"]


CUT_NOTE = "The partial reply was kept; retry for a complete one."
SERVER_FAULTS = [
    pytest.param(
        Reply(fault="http500"),
        "The model server at {url}/v1 answered with an error (500: Injected internal server "
        "error). Check the model name and the server's log, then retry.",
        "",
        id="500",
    ),
    pytest.param(
        Reply(fault="drop"),
        "The connection to the model server at {url}/v1 broke before it answered "
        "(RemoteProtocolError: Server disconnected without sending a response.). Retry; if it "
        "keeps happening, check the server's log.",
        "",
        id="dropped",
    ),
    pytest.param(
        Reply(text="abcdefghijkl", chunk_size=4, fault="cut", cut_after=3),
        "The model server at {url}/v1 broke off the stream before the reply was complete "
        "(RemoteProtocolError: peer closed connection without sending complete message body "
        f"(incomplete chunked read)). {CUT_NOTE}",
        "abcdefgh",
        id="cut",
    ),
    pytest.param(
        Reply(text="abcdefgh", chunk_size=4, fault="stall", stall_after=3),
        "The model server at {url}/v1 stopped answering in the middle of the reply (the read "
        f"timed out). {CUT_NOTE}",
        "abcdefgh",
        id="stalled",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("reply", "error", "partial"), SERVER_FAULTS)
def test_after_a_server_fault_the_message_is_kept_and_the_next_send_works(
    server: FakeServer,
    store: Store,
    settings: Settings,
    script: Script,
    reply: Reply,
    error: str,
    partial: str,
) -> None:
    client = build_client(settings.replace(request_timeout=1.0)).with_options(max_retries=0)
    chat = Conversation(settings, store, client=client)
    script.chat.append(reply)
    failed = failure(run(chat, "hello"))
    error = error.format(url=server.url)
    assert failed.unsent_text == ""
    if not partial:
        assert failed.message == error
        assert active(chat) == [user("hello")]
    else:  # what arrived is a complete row of its own, and a notice says why it ends there
        assert failed.message == error
        notice = Row("system", f"The reply was cut off: {error}")
        assert active(chat) == [user("hello"), assistant(partial), notice]
    assert_next_send_works(chat, script)


@pytest.mark.timeout(30)
def test_rate_limiting_is_retried_and_when_retries_run_out_the_user_is_told_to_wait(
    server: FakeServer, store: Store, settings: Settings, script: Script
) -> None:
    chat = Conversation(settings, store)  # the client nbchat builds: it retries a 429 twice
    script.chat.extend([Reply(fault="http429", retry_after=1)] * 3)
    events = run(chat, "hello")
    failed = failure(events)
    assert failed.message == (
        f"The model server at {server.url}/v1 is rate limiting requests (429: Injected rate "
        "limit). Wait a moment, then retry."
    )
    assert len(server.chat_requests()) == 3
    assert active(chat) == [user("hello")]  # no reply row, not even an empty one
    script.chat.extend([Reply(fault="http429", retry_after=1), Reply(text="there you are")])
    events = run(chat, "again")
    assert saved(events) == [user("again"), assistant("there you are")]
    assert len(server.chat_requests()) == 5


def stream_until(
    chat: Conversation, stop: StopSignal, text: str
) -> tuple[threading.Thread, list[Event], threading.Event]:
    """Run a turn in a thread; the returned event is set once `text` has streamed."""
    events: list[Event] = []
    arrived = threading.Event()

    def consume() -> None:
        streamed = ""
        for event in chat.send("talk", stop):
            events.append(event)
            if isinstance(event, TextDelta):
                streamed += event.text
                if streamed == text:
                    arrived.set()

    thread = threading.Thread(target=consume)
    thread.start()
    return thread, events, arrived


@pytest.mark.timeout(30)
def test_stop_ends_a_turn_whose_stream_stalled(
    chat: Conversation, server: FakeServer, script: Script
) -> None:
    script.chat.append(Reply(text="abcdefgh", chunk_size=4, fault="stall", stall_after=3))
    stop = StopSignal()
    thread, events, arrived = stream_until(chat, stop, "abcdefgh")
    assert arrived.wait(10)  # the server has nothing more to say: the read blocks now
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert events[-1] == Done(stopped=True)
    assert active(chat) == [user("talk"), assistant("abcdefgh"), STOPPED]
    assert_next_send_works(chat, script)


@pytest.mark.parametrize("shape", ["overflow_llama", "overflow_openai"])
def test_an_overflow_compacts_and_retries_and_a_second_one_says_what_to_do(
    chat: Conversation, server: FakeServer, script: Script, shape: Any
) -> None:
    for i in range(6):
        script.chat.append(Reply(text=f"answer {i} " + "x" * 300))
        run(chat, f"question {i} " + "y" * 300)
    script.chat.extend([Reply(fault=shape), Reply(text="fits now")])
    events = run(chat, "one more")
    assert [e.result.changed for e in events if isinstance(e, CompactionFinished)] == [True]
    assert saved(events)[-1] == assistant("fits now")
    assert active(chat)[0].role == "compacted"
    script.chat.extend([Reply(fault=shape), Reply(fault=shape)])
    events = run(chat, "and another")
    failed = failure(events)
    assert isinstance(failed.error, ContextOverflowError)
    assert failed.message.startswith(
        "The request is still too big for the model after compacting: The conversation is too "
        "long for the model's context window"
    )
    assert failed.message.endswith(
        "Start a new session (/new), or give the server a larger context."
    )
    assert failed.unsent_text == ""
    full = [stored.row for stored in chat.store.load_full(str(chat.session_id))]
    assert [r.content for r in full if r.role == "user"] == [
        *[f"question {i} " + "y" * 300 for i in range(6)],
        "one more",
        "and another",
    ]
    assert_next_send_works(chat, script)


# The summariser


def long_history(chat: Conversation, script: Script, turns: int = 6) -> None:
    for i in range(turns):
        script.chat.append(Reply(text=f"answer {i} " + "x" * 600))
        run(chat, f"question {i}")


SUMMARISER_FAULTS = [
    pytest.param(
        Reply(fault="http500"),
        "The summariser failed: The model server at {url}/v1 answered with an error (500: "
        "Injected internal server error). Check the model name and the server's log, then "
        "retry. The history was left as it was; compact again, or set another summary_model if "
        "it keeps failing.",
        id="failing",
    ),
    pytest.param(
        Reply(text=""),
        "The summariser returned an empty summary. The history was left as it was; compact "
        "again, or set another summary_model if it keeps happening.",
        id="empty",
    ),
]


@pytest.mark.parametrize(("reply", "message"), SUMMARISER_FAULTS)
def test_a_failing_summariser_leaves_history_and_store_as_they_were(
    chat: Conversation, server: FakeServer, script: Script, reply: Reply, message: str
) -> None:
    long_history(chat, script)
    before = chat.store.load_full(str(chat.session_id))
    rows = chat.history.rows
    script.summary = lambda body: reply
    failed = failure(list(chat.compact_now()))
    assert isinstance(failed.error, CompactionError)
    assert failed.message == message.format(url=server.url)
    assert chat.history.rows == rows
    assert chat.store.load_full(str(chat.session_id)) == before
    assert chat.store.list_compactions(str(chat.session_id)) == []
    assert_next_send_works(chat, script)


def test_an_automatic_compaction_that_fails_is_a_notice_and_the_turn_goes_on(
    server: FakeServer, store: Store, settings: Settings, script: Script
) -> None:
    first = conversation(server, store, settings)
    long_history(first, script, turns=3)
    first.close()
    tight = settings.replace(context_token_threshold=2000)  # the same session, a smaller model
    chat = conversation(server, store, tight, session_id=first.session_id)
    assert chat.engine.should_compact(chat.history)
    script.summary = lambda body: Reply(fault="http500")
    script.chat.append(Reply(text="answered anyway"))
    events = run(chat, "next question")
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices[0].startswith(
        "Compaction failed; the history was kept as it was. The summariser failed: "
    )
    assert events[-1] == Done()
    assert saved(events)[-1] == assistant("answered anyway")
    assert [r.role for r in active(chat)].count("compacted") == 0


def test_a_summary_without_the_sections_is_kept_and_the_facts_fill_in(
    chat: Conversation, script: Script
) -> None:
    long_history(chat, script)
    script.summary = lambda body: Reply(text="We talked about six questions and answered them.")
    events = list(chat.compact_now())
    [result] = [e.result for e in events if isinstance(e, CompactionFinished)]
    assert result.changed
    assert result.warnings == (
        "the summary lacks section(s) Goal, Constraints & preferences, Progress, Key decisions, "
        "Next steps, Critical context; the recorded facts stand in",
    )
    summary = active(chat)[0]
    assert summary.role == "compacted"
    assert summary.content.startswith("We talked about six questions and answered them.")
    assert "question 0" in summary.content  # the user's own words, kept by code
    assert events[-1] == Done()
    assert_next_send_works(chat, script)


@pytest.mark.timeout(30)
def test_a_summary_cancelled_by_stop_changes_nothing(chat: Conversation, script: Script) -> None:
    long_history(chat, script)
    before = chat.store.load_full(str(chat.session_id))
    rows = chat.history.rows
    stop = StopSignal()

    def stop_while_summarising(body: dict[str, Any]) -> Reply:
        stop.set()  # the user presses Stop while the summary streams
        return Reply(text=SUMMARY, chunk_size=2, delay=0.01)

    script.summary = stop_while_summarising
    events = list(chat.compact_now(stop=stop))
    [result] = [e.result for e in events if isinstance(e, CompactionFinished)]
    assert (result.changed, result.cancelled, result.reason) == (False, True, "cancelled")
    assert events[-1] == Done(stopped=True)
    assert chat.history.rows == rows
    assert chat.store.load_full(str(chat.session_id)) == before
    assert_next_send_works(chat, script)


# The process killed in the middle of a compaction

KILL_CHILD = r"""
import sys
import openai
from nbchat.conversation.loop import Conversation
from nbchat.config import Settings
from nbchat.store.store import Store

path, session_id, url, home, workspace, step = sys.argv[1:7]
store = Store(path)
settings = Settings(  # a budget whose compaction keeps placeholders in its tail: both layers
    base_url=url + "/v1", home=home, workspace=workspace, context_token_threshold=16000,
    tail_messages=4,
)
client = openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
chat = Conversation(settings, store, session_id, client=client)
kinds = []


def kind_of(sql):
    sql = sql.replace('"', "").lstrip().upper()
    for prefix, kind in [
        ("INSERT INTO COMPACTIONS", "record"),
        ("UPDATE ROWS SET ARCHIVED", "archive"),
        ("INSERT INTO ROWS", "insert"),
        ("COMMIT", "commit"),
    ]:
        if sql.startswith(prefix):
            return kind
    return None


def should_pause(now):
    # `now` is about to run; `kinds` holds what ran before it.
    if step == "record":  # the prune layer's record is written, nothing archived yet
        return now == "archive" and "archive" not in kinds
    if step == "archived":  # its archive UPDATE ran, its placeholder is not in yet
        return now == "insert" and "insert" not in kinds
    if step == "between":  # the prune layer is written, the summary layer not begun
        return now == "record" and kinds.count("record") == 1
    if step == "summary-archived":  # the summarised rows are archived, the summary not in
        return now == "insert" and kinds.count("record") == 2 and kinds[-1] == "archive"
    if step == "commit":  # everything written, the COMMIT not run
        return now == "commit"
    return False


def pause(where):
    print(where, flush=True)
    sys.stdin.read()  # until the test kills this process


def trace(sql):
    now = kind_of(sql)
    if now is None:
        return
    if should_pause(now):
        pause(step)
    kinds.append(now)


store.db.conn.set_trace_callback(trace)
for event in chat.compact_now():
    pass
pause("committed")
"""
KILL_STEPS = ["record", "archived", "between", "summary-archived", "commit"]


def compaction_history() -> list[Row]:
    """Chatty turns, then one long tool-using turn: a compaction stores both of its layers
    (old tool outputs behind placeholders, the rest summarised)."""
    rows: list[Row] = []
    for n in range(6):
        rows += [user(f"question {n}"), assistant(f"answer {n} " + "y" * 600)]
    rows.append(user("fix everything"))
    for n in range(6):
        rows += [
            tool_call((f"c{n}", "run_shell", {"command": "make"})),
            tool_result(f"c{n}", "x" * 3000),
        ]
    rows.append(assistant("all done"))
    return rows


def snapshot(path: Path, session_id: str) -> tuple[Any, ...]:
    """Everything a compaction may change, without timestamps."""
    store = Store(path)
    try:
        return (
            store.load_active(session_id),
            [(s.row, s.archived, s.compaction_id) for s in store.load_full(session_id)],
            [(c["kind"], c["rows_replaced"]) for c in store.list_compactions(session_id)],
            store.db.execute("PRAGMA integrity_check").fetchone()[0],
        )
    finally:
        store.close()


@pytest.fixture(scope="module")
def kill_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A fake model, a template DB with one session, and its states before and after."""
    root = tmp_path_factory.mktemp("kill")
    with FakeServer(responder=lambda body: Reply(text=SUMMARY)) as fake:
        template = root / "template.db"
        store = Store(template)
        session_id = store.create_session("compaction under fire")
        store.append_rows(session_id, compaction_history())
        store.close()
        reference = root / "reference.db"
        shutil.copy(template, reference)
        settings = Settings(
            base_url=fake.url + "/v1",
            home=root / "home",
            workspace=root,
            context_token_threshold=16000,  # as in KILL_CHILD
            tail_messages=4,
        )
        store = Store(reference)
        client = openai.OpenAI(base_url=fake.url + "/v1", api_key="test", max_retries=0)
        assert (
            list(Conversation(settings, store, session_id, client=client).compact_now())[-1]
            == Done()
        )
        store.close()
        yield {
            "server": fake,
            "root": root,
            "template": template,
            "session_id": session_id,
            "settings": settings,
            "before": snapshot(template, session_id),
            "after": snapshot(reference, session_id),
        }


def test_the_reference_compaction_writes_both_layers(kill_world: dict[str, Any]) -> None:
    active_rows, _, kinds, check = kill_world["after"]
    assert [kind for kind, _ in kinds] == ["prune", "summary"]
    assert active_rows[0].role == "compacted" and check == "ok"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("step", [*KILL_STEPS, "committed"])
def test_a_process_killed_during_a_compaction_leaves_the_db_before_or_after_never_half(
    kill_world: dict[str, Any], step: str
) -> None:
    world = kill_world
    path = world["root"] / f"killed-{step}.db"
    shutil.copy(world["template"], path)
    settings: Settings = world["settings"]
    command = [sys.executable, "-c", KILL_CHILD, str(path), world["session_id"]]
    command += [world["server"].url, str(settings.home), str(settings.workspace), step]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        try:
            assert child.stdout.readline().strip() == step  # it is paused right there
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
    assert child.returncode == -signal.SIGKILL
    state = snapshot(path, world["session_id"])
    assert state == (world["after"] if step == "committed" else world["before"])
    transcript = [row for row, _, _ in state[1]]
    assert all(row in transcript for row in compaction_history())  # the full transcript
    store = Store(path)
    chat = Conversation(
        settings,
        store,
        world["session_id"],
        client=openai.OpenAI(base_url=world["server"].url + "/v1", api_key="t", max_retries=0),
    )
    assert not chat.read_only  # the dead process's lease is taken over
    events = run(chat, "still there?")
    assert events[-1] == Done()
    store.close()


# The database


LOCKER = r"""
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
for line in sys.stdin:
    if line.strip() == "lock":
        conn.execute("BEGIN EXCLUSIVE")
        print("locked", flush=True)
    elif line.strip() == "unlock":
        conn.rollback()
        print("unlocked", flush=True)
"""


class Locker:
    """Another process that locks the database file on request."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _say(self, word: str, answer: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == answer

    def lock(self) -> None:
        self._say("lock", "locked")

    def unlock(self) -> None:
        self._say("unlock", "unlocked")

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(10)
        self.process.stdout.close()


@pytest.fixture
def locker(store: Store) -> Iterator[Locker]:
    other = Locker(store.path)
    yield other
    other.close()


def locked_message(store: Store, action: str) -> str:
    return (
        f"Could not {action}: the session database {store.path} stayed locked by another "
        f"process for more than {store.busy_timeout:g}s. Close other kernels or programs using "
        "it and try again; nothing was written."
    )


@pytest.mark.timeout(30)
def test_a_database_locked_before_the_send_hands_the_message_back(
    server: FakeServer, tmp_path: Path, settings: Settings, script: Script
) -> None:
    store = Store(tmp_path / "locked.db", busy_timeout=0.3)
    chat = conversation(server, store, settings)
    run(chat, "first")
    locker = Locker(store.path)
    try:
        locker.lock()
        failed = failure(run(chat, "my important message"))
        assert failed.message == locked_message(store, "save the message")
        assert failed.unsent_text == "my important message"
        locker.unlock()
    finally:
        locker.close()
    assert active(chat) == [user("first"), assistant("ok")]
    assert_next_send_works(chat, script)
    store.close()


@pytest.mark.timeout(30)
def test_a_database_locked_during_the_reply_keeps_the_message_and_no_half_row(
    server: FakeServer, tmp_path: Path, settings: Settings, script: Script
) -> None:
    store = Store(tmp_path / "locked.db", busy_timeout=0.3)
    chat = conversation(server, store, settings)
    run(chat, "first")
    locker = Locker(store.path)

    def lock_then_answer(body: dict[str, Any]) -> Reply:
        locker.lock()  # another program takes the file while the model answers
        return Reply(text="an answer that cannot be saved")

    try:
        server.responder = lock_then_answer
        failed = failure(run(chat, "my important message"))
        server.responder = script
        assert failed.message == locked_message(store, "record usage")
        assert failed.unsent_text == ""  # it was saved before the request
        locker.unlock()
    finally:
        locker.close()
    assert active(chat) == [user("first"), assistant("ok"), user("my important message")]
    assert active(chat) == chat.history.rows
    assert_next_send_works(chat, script)
    store.close()


def corrupt_session(chat: Conversation, script: Script) -> tuple[str, int]:
    long_history(chat, script, turns=4)
    session_id = str(chat.session_id)
    bad_id = [s.id for s in chat.store.load_full(session_id) if not s.archived][3]
    chat.store.db.execute("UPDATE rows SET role = 'bogus' WHERE id = ?", [bad_id])
    chat.store.db.conn.commit()
    chat.close()
    return session_id, bad_id


def test_a_corrupt_row_is_named_and_the_session_keeps_working(
    server: FakeServer, store: Store, settings: Settings, script: Script
) -> None:
    first = conversation(server, store, settings)
    session_id, bad_id = corrupt_session(first, script)
    chat = conversation(server, store, settings, session_id=session_id)
    assert [str(problem) for problem in chat.problems] == [
        f"Session {session_id}: row {bad_id} (position 3) is corrupt: unknown role 'bogus'. It "
        "was skipped; the rest of the session loads. Export the session to keep a copy, then "
        "delete or fix that row."
    ]
    assert len(chat.history) == 7
    assert_next_send_works(chat, script)
    events = list(chat.compact_now())
    [result] = [e.result for e in events if isinstance(e, CompactionFinished)]
    assert result.changed and events[-1] == Done()
    assert active(chat) == chat.history.rows
    problems: list[StoreError] = []
    store.load_active(session_id, problems=problems)
    assert problems == []  # it was among the summarised rows, so it was archived with them
    script.chat.extend([Reply(text="first try"), Reply(text="second try")])
    run(chat, "retry me")
    assert saved(list(chat.retry()))[-1] == assistant("second try")
    assert chat.take_back_last_message() == "retry me"
    assert active(chat) == chat.history.rows
    kept = store.db.execute("SELECT role, archived FROM rows WHERE id = ?", [bad_id]).fetchone()
    assert kept == ("bogus", 1)  # never deleted


def newer_database(path: Path) -> str:
    """A DB a newer nbchat wrote, every connection closed (so it is all in the main file)."""
    store = Store(path)
    session_id = store.create_session("from the future")
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('nbchat', 'm999_future', '2030-01-01')"
        )
    conn.close()
    assert not Path(f"{path}-wal").exists()
    return session_id


def test_a_database_from_a_newer_nbchat_is_refused_with_the_message_handed_back(
    server: FakeServer, tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "newer.db"
    session_id = newer_database(path)
    before = path.read_bytes()
    message = (
        f"{path} was written by a newer version of nbchat (schema m999_future). Upgrade "
        "nbchat, or point NBCHAT_HOME elsewhere; the file was not changed."
    )
    chat = conversation(server, Store(path), settings)
    failed = failure(run(chat, "hello from the past"))
    assert (failed.message, failed.unsent_text) == (message, "hello from the past")
    with pytest.raises(StoreError) as caught:
        conversation(server, Store(path), settings, session_id=session_id)
    assert str(caught.value) == message
    assert path.read_bytes() == before
    assert server.chat_requests() == []


def full_disk_message(store: Store) -> str:
    return (
        f"Could not save the message: the disk holding {store.path} is full. Free some space "
        "and try again; nothing was written."
    )


def fill_disk(store: Store) -> None:
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")


def free_disk(store: Store) -> None:
    store.db.execute("PRAGMA max_page_count = 1073741823")


def test_a_full_disk_hands_the_message_back_and_the_session_still_loads(
    chat: Conversation, store: Store, script: Script, settings: Settings, server: FakeServer
) -> None:
    run(chat, "first")
    fill_disk(store)
    big = "please keep this " * 3_000
    failed = failure(run(chat, big))
    assert (failed.message, failed.unsent_text) == (full_disk_message(store), big)
    reloaded = conversation(server, Store(store.path), settings, session_id=chat.session_id)
    assert reloaded.history.rows == [user("first"), assistant("ok")] == chat.history.rows
    reloaded.store.close()
    free_disk(store)
    assert_next_send_works(chat, script)


def test_a_full_disk_during_the_reply_keeps_the_message_and_no_half_row(
    chat: Conversation, store: Store, script: Script, settings: Settings, server: FakeServer
) -> None:
    run(chat, "first")
    script.chat.append(Reply(text="a very long answer " * 20_000, chunk_size=20_000))
    original = store.append_rows

    def fill_after_the_user_row(session_id: str, rows: Any) -> list[int]:
        ids = original(session_id, rows)
        fill_disk(store)
        return ids

    store.append_rows = fill_after_the_user_row  # type: ignore[method-assign]
    failed = failure(run(chat, "write a lot"))
    store.append_rows = original  # type: ignore[method-assign]
    assert (failed.message, failed.unsent_text) == (full_disk_message(store), "")
    expected = [user("first"), assistant("ok"), user("write a lot")]
    assert chat.history.rows == expected
    reloaded = Store(store.path)
    assert reloaded.load_active(str(chat.session_id)) == expected
    reloaded.close()
    free_disk(store)
    assert_next_send_works(chat, script)


# The same faults in the widget


def ui_for(server: FakeServer, store: Store, settings: Settings) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return ChatUI(settings, store=store, client=client)


@pytest.mark.timeout(30)
def test_the_stop_button_ends_a_turn_whose_stream_stalled(
    server: FakeServer, store: Store, settings: Settings, script: Script
) -> None:
    ui = ui_for(server, store, settings)
    script.chat.append(Reply(text="abcdefgh", chunk_size=4, fault="stall", stall_after=3))
    arrived = threading.Event()
    streamed: list[str] = []
    handle = ui.view.handle

    def watch(event: Event) -> None:
        handle(event)
        if isinstance(event, TextDelta):
            streamed.append(event.text)
            if "".join(streamed) == "abcdefgh":
                arrived.set()

    ui.view.handle = watch  # type: ignore[method-assign]
    ui.send("talk")
    assert arrived.wait(10)  # the server has nothing more to say: the read blocks now
    ui.stop()
    assert ui.wait(10)
    assert ui.conversation.history.rows == [user("talk"), assistant("abcdefgh"), STOPPED]
    assert ui.can_send and not ui.can_stop
    ui.send("again")
    assert ui.wait(10)
    assert ui.conversation.history.rows[-1] == assistant("ok")
    ui.close()


@pytest.mark.timeout(30)
def test_the_widget_gives_the_message_back_when_the_database_is_locked(
    server: FakeServer, tmp_path: Path, settings: Settings
) -> None:
    store = Store(tmp_path / "locked.db", busy_timeout=0.3)
    ui = ui_for(server, store, settings)
    ui.send("first")
    assert ui.wait(10)
    locker = Locker(store.path)
    try:
        locker.lock()
        ui.send("my important message")
        assert ui.wait(10) is False  # failed, and said so in the cell
        assert locked_message(store, "save the message") in shown_text(ui.messages.box)
        assert ui.input.value == "my important message"  # back in the box, ready to resend
        assert ui.can_send
        locker.unlock()
    finally:
        locker.close()
    ui.press_send()
    assert ui.wait(10)
    assert ui.conversation.history.rows[-2:] == [user("my important message"), assistant("ok")]
    assert ui.input.value == ""
    ui.close()
    store.close()


def test_the_widget_refuses_a_database_from_a_newer_nbchat_untouched(
    server: FakeServer, tmp_path: Path, settings: Settings
) -> None:
    path = tmp_path / "newer.db"
    newer_database(path)
    before = path.read_bytes()
    ui = ui_for(server, Store(path), settings)  # no traceback: the widget says it
    assert (
        f"{path} was written by a newer version of nbchat (schema m999_future). Upgrade "
        "nbchat, or point NBCHAT_HOME elsewhere; the file was not changed."
    ) in ui.unavailable
    assert ui.unavailable in shown_text(ui.messages.box)
    assert ui.wait(10) is False
    ui.close()
    assert path.read_bytes() == before

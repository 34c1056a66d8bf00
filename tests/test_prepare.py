"""The next compaction prepared while the user reads (issue 13): applied at once at the trigger,
updated with only the rows added since, dropped when what it depends on changes, and always
second to the user: every way the user acts cancels it, closing its request, writing nothing."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fakeserver
import openai
import pytest
from factories import assistant, user
from fakeserver import FakeServer, Reply
from fixtures_server import client_for
from helpers import is_summary_request, recording_comms, run, shown_text

from nbchat.config import Settings
from nbchat.conversation.events import CompactionFinished, Done
from nbchat.conversation.loop import Conversation
from nbchat.conversation.prepare import MAX_FAILURES, next_turn_reaches
from nbchat.history import build_messages
from nbchat.stopping import StopSignal
from nbchat.store.store import Store
from nbchat.tools import ToolRegistry
from nbchat.ui import ChatUI

SUMMARY = json.dumps(
    {
        "goal": "Learn Python",
        "constraints": [],
        "done": ["answered questions"],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": ["more questions"],
        "critical_context": [],
    }
)
THRESHOLD = 3000  # trigger 2,250; the mark at half of it, far from the trigger
HOLD = 30.0  # how long the server holds a summary's headers: a passing test never waits it out


def question(number: int) -> str:
    return f"question {number} " + "q" * 210


def answer(body: dict[str, Any]) -> Reply:
    """The same reply to the same question, so two sessions run alike."""
    last = str(body["messages"][-1]["content"])
    return Reply(text=f"answer to {last[:11]} " + "a" * 240)


class Server:
    """The test server's responder: summaries (or a scripted summary reply), and answers."""

    def __init__(self) -> None:
        self.summary: Callable[[dict[str, Any]], Reply] = lambda body: Reply(text=SUMMARY)
        self.summaries: list[dict[str, Any]] = []
        self.arrived = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if not is_summary_request(body):
            return answer(body)
        self.summaries.append(body)
        self.arrived.set()
        return self.summary(body)


@pytest.fixture
def script() -> Server:
    return Server()


@pytest.fixture
def server(script: Server) -> Iterator[FakeServer]:
    with FakeServer(responder=script) as running:
        yield running


@pytest.fixture
def settings(make_settings) -> Settings:  # type: ignore[no-untyped-def]
    return make_settings(
        context_token_threshold=THRESHOLD,
        system_prompt="Be brief.",
        summary_max_tokens=100,
        prepare_mark=0.5,
        notebook_tools=False,
    )


def conversation(server: FakeServer, store: Store, settings: Settings, **kw: Any) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    tools = kw.pop("tools", ToolRegistry())
    return Conversation(settings, store, client=client, tools=tools, **kw)


def take_note(text: str) -> str:
    """Take a note.

    Args:
        text: The note.
    """
    return text


def past_the_mark(chat: Conversation) -> int:
    """Turns until the next request is past the soft mark (never at the trigger)."""
    turns = 0
    while chat.context_tokens() < chat.settings.prepare_mark * chat.engine.trigger:
        assert isinstance(run(chat, question(turns))[-1], Done)
        turns += 1
    assert chat.context_tokens() < chat.engine.trigger
    return turns


def prepare(chat: Conversation) -> None:
    assert chat.use_idle_moment(StopSignal()) is None  # the trigger is more than a turn away
    assert chat.preparer.state(chat.session_id) == "ready"


def trigger_message(chat: Conversation) -> str:
    """A message that takes the next request over the trigger, before it is sent."""
    missing = chat.engine.trigger - chat.context_tokens()
    return "big " + "b" * 3 * (missing + 10)


def summaries_during(script: Server, action: Callable[[], object]) -> list[dict[str, Any]]:
    before = len(script.summaries)
    action()
    return script.summaries[before:]


def transcript(body: dict[str, Any]) -> str:
    return "\n".join(str(message["content"]) for message in body["messages"])


def test_a_prepared_compaction_is_applied_at_the_trigger_without_a_summary_request(
    server: FakeServer, script: Server, tmp_path: Path, settings: Settings
) -> None:
    chat = conversation(server, Store(tmp_path / "prepared.db"), settings)
    past_the_mark(chat)
    prepare(chat)
    prepared = chat.preparer._prepared
    assert prepared is not None
    covered = len(prepared.covered)
    rows_then = list(chat.history.rows)
    text = trigger_message(chat)
    events: list[Any] = []
    assert summaries_during(script, lambda: events.extend(run(chat, text))) == []
    finished = [e.result for e in events if isinstance(e, CompactionFinished)]
    assert len(finished) == 1 and finished[0].changed
    # The prepared summary replaces exactly the rows it covers; everything after them stays.
    rows = chat.history.rows
    assert rows[0].role == "compacted" and rows[0].content.startswith(
        prepared.result.edit.summary_row.content.split("\n\n# Recorded facts")[0]  # type: ignore[union-attr]
    )
    assert rows[1 : len(rows_then) - covered + 1] == rows_then[covered:]
    assert finished[0].tokens_after < chat.engine.trigger
    assert len(chat.store.list_compactions(str(chat.session_id))) == 1


def test_rows_added_since_are_the_only_ones_sent_to_update_the_prepared_summary(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    prepare(chat)
    covered = chat.preparer._prepared.covered  # type: ignore[union-attr]
    run(chat, "short one")  # not idle afterwards: nothing is brought up to date
    before = chat.history.rows
    # Forced (the button, or an idle moment), the deeper cut is worth a call with the new rows.
    sent = summaries_during(script, lambda: list(chat.compact_now()))
    assert len(sent) == 1
    request = transcript(sent[0])
    assert "<previous-summary>" in request and "Learn Python" in request
    for row in covered:
        assert row.content not in request
    assert chat.history.rows[0].role == "compacted"
    tail = chat.history.rows[1:]
    # The user rows that were in the tail when prepared and are summarised now: all sent.
    since = [r for r in before if r.role == "user" and r not in covered and r not in tail]
    assert since  # the deeper cut took some
    assert all(row.content in request for row in since)


def test_a_failed_preparation_leaves_a_log_line_and_is_retried_at_most_a_few_times(
    server: FakeServer,
    script: Server,
    store: Store,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    rows = chat.history.rows
    script.summary = lambda body: Reply(fault="http500")
    with caplog.at_level(logging.WARNING, logger="nbchat.conversation.prepare"):
        sent = summaries_during(
            script, lambda: [chat.use_idle_moment(StopSignal()) for _ in range(MAX_FAILURES + 2)]
        )
    assert len(sent) == MAX_FAILURES
    assert len([r for r in caplog.records if "preparing the next compaction failed" in r.message])
    assert chat.preparer.state(chat.session_id) == ""
    assert chat.history.rows == rows == store.load_active(str(chat.session_id))
    assert store.list_compactions(str(chat.session_id)) == []


def test_a_read_only_session_is_never_prepared(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    other = conversation(server, Store(store.path), settings, session_id=chat.session_id)
    assert other.read_only
    assert summaries_during(script, lambda: other.use_idle_moment(StopSignal())) == []
    assert other.preparer.state(other.session_id) == ""


def test_a_prepared_compaction_never_survives_a_change_of_the_workspace_overview(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    # The overview of the workspace's top level is part of the system prompt sent with tools
    # (one is needed: read_archived_output is offered only once an output is archived).
    tools = ToolRegistry()
    tools.register(take_note)
    chat = conversation(server, store, settings.replace(workspace_overview=True), tools=tools)
    past_the_mark(chat)
    prepare(chat)
    (settings.workspace / "new_file.py").write_text("x = 1\n")  # the next turn lists it
    sent = summaries_during(script, lambda: run(chat, trigger_message(chat)))
    assert len(sent) == 1  # summarised again, from the first row
    assert question(0)[:11] in transcript(sent[0])
    assert "<previous-summary>" not in transcript(sent[0])
    assert '"./new_file.py"' in str(server.chat_requests()[-1]["messages"][0]["content"])


def change_model(chat: Conversation) -> None:
    chat.set_model("another-model")


def change_system_prompt(chat: Conversation) -> None:
    chat.settings = chat.session.settings = chat.settings.replace(system_prompt="Be kind.")
    chat.budget.use_settings(chat.settings)


def change_tools(chat: Conversation) -> None:
    def word_count(text: str) -> int:
        """Count the words in `text`."""
        return len(text.split())

    chat.tools.register(word_count)


@pytest.mark.parametrize("change", [change_model, change_system_prompt, change_tools])
def test_a_prepared_compaction_never_survives_a_change_of_model_prompt_or_tools(
    server: FakeServer,
    script: Server,
    store: Store,
    settings: Settings,
    change: Callable[[Conversation], None],
) -> None:
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    prepare(chat)
    change(chat)
    sent = summaries_during(script, lambda: run(chat, trigger_message(chat)))
    assert len(sent) == 1  # summarised again, from the first row
    assert question(0)[:11] in transcript(sent[0])
    assert "<previous-summary>" not in transcript(sent[0])


def take_lease(store: Store, session_id: str) -> Store:
    """Another kernel takes the session over (its lease is made stale first)."""
    theirs = Store(store.path)
    theirs.db.execute("UPDATE sessions SET lease_until = 1.0 WHERE id = ?", [session_id])
    theirs.db.conn.commit()
    assert theirs.acquire_lease(session_id)
    return theirs


def test_a_lease_taken_by_another_kernel_drops_the_prepared_compaction(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    prepare(chat)
    theirs = take_lease(store, str(chat.session_id))
    assert summaries_during(script, lambda: chat.use_idle_moment(StopSignal())) == []
    assert chat.preparer.state(chat.session_id) == ""
    assert store.list_compactions(str(chat.session_id)) == []
    theirs.close()


def test_a_preparation_racing_a_kernel_that_takes_the_session_is_dropped(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    taken: list[Store] = []

    def summary_while_taken(body: dict[str, Any]) -> Reply:
        taken.append(take_lease(store, str(chat.session_id)))
        return Reply(text=SUMMARY)

    script.summary = summary_while_taken
    chat.use_idle_moment(StopSignal())
    assert len(taken) == 1
    assert chat.preparer.state(chat.session_id) == ""
    assert store.list_compactions(str(chat.session_id)) == []
    taken[0].close()


def test_when_the_next_turn_would_compact_the_idle_moment_applies_it_and_warms_the_prefix(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    chat = conversation(server, store, settings)
    applied = None
    turns = 0
    while applied is None:
        events = run(chat, question(turns))
        assert not [e for e in events if isinstance(e, CompactionFinished)]
        turns += 1
        server.clear()
        applied = chat.use_idle_moment(StopSignal())
    assert applied.changed and chat.history.rows == list(applied.rows)
    assert chat.history.rows[0].role == "compacted"
    assert store.load_active(str(chat.session_id)) == chat.history.rows
    warm = [body for body in server.chat_requests() if body.get("max_tokens") == 1]
    # The last prompt read is the new prefix (a prefix read ahead for a cut that no longer
    # left room for the next turn may come before it).
    assert 1 <= len(warm) <= 2 and "Learn Python" in str(warm[-1]["messages"][0]["content"])
    assert warm[-1]["messages"][-2]["content"] == chat.history.rows[-1].content
    sent = summaries_during(script, lambda: run(chat, question(turns)))
    assert sent == []  # the turn after it starts like any other


def until_a_pause_decides(chat: Conversation, server: FakeServer, caplog: Any) -> Any:
    """Turns and pauses until a pause applies a compaction or declines to; what it applied."""
    for turn in range(30):
        assert isinstance(run(chat, question(turn))[-1], Done)
        assert chat.history.rows[0].role == "user"  # no compaction at the trigger
        server.clear()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="nbchat.conversation.prepare"):
            applied = chat.use_idle_moment(StopSignal())
        if applied is not None or "in a pause would not shrink" in caplog.text:
            return applied
    raise AssertionError("no pause decided in 30 turns")


def test_after_a_pause_compaction_the_history_is_sized_by_the_servers_count_not_the_estimate(
    server: FakeServer, store: Store, settings: Settings, caplog: Any
) -> None:
    # The test server counts a token per four characters, the estimate one per three: sized by
    # the estimate, the compacted history looks a third bigger than the server reads it.
    chat = conversation(server, store, settings)
    assert until_a_pause_decides(chat, server, caplog) is not None
    warm = [body for body in server.chat_requests() if body.get("max_tokens") == 1]
    counted = fakeserver.count_prompt_tokens(warm[-1])
    assert warm[-1]["messages"][-2]["content"] == chat.history.rows[-1].content
    assert chat.context_tokens() == counted
    assert counted < chat.engine.context_tokens(chat.history.rows)


def test_a_pause_compaction_that_the_server_counts_no_smaller_is_not_applied(
    server: FakeServer, store: Store, settings: Settings, caplog: Any
) -> None:
    # A prefix the server read bigger than the history it would replace gains nothing and
    # costs a read: it is kept for the trigger, not applied.
    chat = conversation(server, store, settings)
    while not next_turn_reaches(chat.history, chat.context_tokens(), chat.engine.trigger):
        run(chat, question(len(chat.history)))
    applied: list[Any] = []
    with caplog.at_level(logging.INFO, logger="nbchat.conversation.prepare"):
        result = chat.preparer.use_idle_moment(
            chat.history,
            chat.engine,
            chat.situation,
            cancel=StopSignal(),
            notify=lambda: None,
            apply=applied.append,
            warm=lambda rows: None,
            counted=lambda rows: chat.context_tokens(),
        )
    assert result is None and applied == []
    assert "would not shrink the history" in caplog.text
    assert chat.preparer.state(chat.session_id) == "ready"  # kept for the trigger
    assert not chat.preparer.warm_due


def test_the_prefix_a_prepared_compaction_leaves_is_read_pause_by_pause_before_it_is_applied(
    server: FakeServer, script: Server, store: Store, make_settings: Any
) -> None:
    # A budget with room beside the facts: the cut made ahead still serves when it is applied.
    settings = make_settings(
        context_token_threshold=6_000,
        system_prompt="Be brief.",
        summary_max_tokens=100,
        prepare_mark=0.5,
        notebook_tools=False,
    )
    chat = conversation(server, store, settings)
    applied, turns, pauses = None, 0, []
    while applied is None:
        run(chat, question(turns))
        turns += 1
        server.clear()
        applied = chat.use_idle_moment(StopSignal())
        pauses.append([b["messages"] for b in server.chat_requests() if b.get("max_tokens") == 1])
    assert len(script.summaries) == 1  # prepared once, applied with no model call
    sent = build_messages(chat.history.rows, "Be brief.")
    # The pause that applied it read nothing new: the prefix was read ahead, then reused.
    assert [messages[:-1] for messages in pauses[-1]] == [sent]
    # The pause before read all of it but the last turn (two rows) while the old one served.
    assert [messages[:-1] for messages in pauses[-2]] == [sent[:-2]]


def test_a_pause_that_asked_the_model_for_a_summary_reads_the_next_turns_prompt_again_first(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    # The summary is asked on the chat's prefix, so the server keeps only what the two share:
    # the chat's own prompt is read again, then the prefix the compaction would leave.
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    server.clear()
    assert len(summaries_during(script, lambda: prepare(chat))) == 1
    warm = [body["messages"] for body in server.chat_requests() if body.get("max_tokens") == 1]
    today = build_messages(chat.history.rows, "Be brief.")
    assert warm[0][:-1] == today and warm[0][-1]["role"] == "user"
    coming = chat.preparer.coming(chat.history, chat.engine, chat.situation())
    assert coming is not None
    assert len(warm) == 2 and warm[1][:-1] == build_messages(coming.rows, "Be brief.")
    # A pause that asks the model nothing reads only ahead.
    server.clear()
    assert summaries_during(script, lambda: prepare(chat)) == []
    warm = [body["messages"] for body in server.chat_requests() if body.get("max_tokens") == 1]
    assert all(messages[:-1] != today for messages in warm)


def test_after_a_compaction_the_idle_moment_warms_the_new_prefix(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> None:
    chat = conversation(server, store, settings)
    past_the_mark(chat)
    run(chat, trigger_message(chat))
    assert chat.history.rows[0].role == "compacted"
    server.clear()
    assert chat.use_idle_moment(StopSignal()) is None
    warm = [body for body in server.chat_requests() if body.get("max_tokens") == 1]
    assert 1 <= len(warm) <= 2  # the new prefix first; then the next compaction's, read ahead
    expected = chat.history.rows
    assert "Learn Python" in str(warm[0]["messages"][0]["content"])
    assert warm[0]["messages"][-2]["content"] == expected[-1].content  # the tail, then "Hi"


# The widget: the user always comes first.


@pytest.fixture
def widgets_recorded() -> Iterator[None]:
    with recording_comms():
        yield


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set when the test server sees a stalled request closed by its client."""
    event = threading.Event()
    stall = fakeserver._Handler._stall

    def watched(handler: Any) -> None:
        stall(handler)
        event.set()

    monkeypatch.setattr(fakeserver._Handler, "_stall", watched)
    return event


def filled_session(store: Store) -> str:
    """A session just under the mark... over it once one more turn is added."""
    session_id = store.create_session("long")
    rows = []
    for number in range(5):
        rows += [user(question(number)), assistant(f"answer to {number} " + "a" * 240)]
    store.append_rows(session_id, rows)
    return session_id


def widget(server: FakeServer, store: Store, settings: Settings, session_id: str) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return ChatUI(
        settings.replace(prepare_mark=0.3),
        store=store,
        client=client,
        tools=ToolRegistry(),
        session_id=session_id,
    )


def preparing(
    server: FakeServer, script: Server, store: Store, settings: Settings
) -> tuple[ChatUI, str]:
    """A widget whose preparation's summary request is under way (the server holds it)."""
    script.summary = lambda body: Reply(fault="stall", stall_after=1)
    session_id = filled_session(store)
    ui = widget(server, store, settings, session_id)
    ui.send("one more")
    assert ui.wait(20)
    assert script.arrived.wait(20)
    assert "preparing…" in shown_text(ui)
    assert ui.can_send and not ui.can_stop  # never blocked by it
    return ui, session_id


def test_the_meter_says_checkpoint_ready_once_prepared(
    server: FakeServer, script: Server, store: Store, settings: Settings, widgets_recorded: None
) -> None:
    ui = widget(server, store, settings, filled_session(store))
    ui.send("one more")
    assert ui.wait(20)
    assert ui.background.wait(20)
    assert "checkpoint ready" in shown_text(ui)
    assert len(script.summaries) == 1
    ui.close()


def send(ui: ChatUI) -> None:
    ui.send("and now?")


def press_stop(ui: ChatUI) -> None:
    ui.press_stop()


def press_new(ui: ChatUI) -> None:
    ui.press_new()


def switch(ui: ChatUI) -> None:
    other = ui.store.create_session("other")
    ui.refresh_sessions()
    ui.choose_session(other)


def close(ui: ChatUI) -> None:
    ui.close()


@pytest.mark.parametrize("action", [send, press_stop, press_new, switch, close])
def test_every_user_action_cancels_a_preparation_closing_its_request_and_writing_nothing(
    server: FakeServer,
    script: Server,
    store: Store,
    settings: Settings,
    widgets_recorded: None,
    closed: threading.Event,
    action: Callable[[ChatUI], None],
) -> None:
    ui, session_id = preparing(server, script, store, settings)
    rows = store.load_active(session_id)
    action(ui)
    assert closed.wait(1.0)  # the server is free again within a second
    assert ui.wait(20)
    assert store.list_compactions(session_id) == []
    kept = store.load_active(session_id)
    assert kept[: len(rows)] == rows
    if action is send:
        assert kept[-2:] == [user("and now?"), assistant(answer_text("and now?"))]
    ui.close()


def test_a_slash_command_cancels_a_preparation_so_edit_does_not_wait_for_it(
    server: FakeServer,
    script: Server,
    store: Store,
    settings: Settings,
    widgets_recorded: None,
    closed: threading.Event,
) -> None:
    ui, session_id = preparing(server, script, store, settings)
    ui.send("/edit")  # takes the last message back under the conversation's lock
    assert closed.wait(1.0)
    assert ui.input.value == "one more"
    assert [c["kind"] for c in store.list_compactions(session_id)] == ["edit"]  # no summary
    ui.close()


def held_preparation(
    server: FakeServer, script: Server, store: Store, settings: Settings, tmp_path: Path
) -> tuple[ChatUI, str]:
    """A widget, with the client nbchat builds, whose preparation's summary request waits for
    the server's headers (llama.cpp sends none until it has read the whole prompt)."""
    script.summary = lambda body: Reply(text=SUMMARY, fault="hold_headers", hold=HOLD)
    session_id = filled_session(store)
    ui = ChatUI(
        settings.replace(prepare_mark=0.3),
        store=store,
        client=client_for(server.url, tmp_path),
        tools=ToolRegistry(),
        session_id=session_id,
    )
    ui.send("one more")
    assert ui.wait(20)
    assert server.wait_for_holds(held=1, timeout=HOLD)
    return ui, session_id


@pytest.mark.parametrize("action", [send, press_stop, press_new, switch, close])
def test_every_user_action_closes_a_preparation_the_server_has_not_answered_yet(
    server: FakeServer,
    script: Server,
    store: Store,
    settings: Settings,
    widgets_recorded: None,
    tmp_path: Path,
    action: Callable[[ChatUI], None],
) -> None:
    # Issue 20: with the headers held, the request used to stay open until the server answered.
    ui, session_id = held_preparation(server, script, store, settings, tmp_path)
    action(ui)
    assert server.wait_for_holds(hung_up=1, timeout=HOLD)  # the server was told before answering
    assert ui.wait(20)
    assert store.list_compactions(session_id) == []
    if action is send:
        kept = store.load_active(session_id)
        assert kept[-2:] == [user("and now?"), assistant(answer_text("and now?"))]
    ui.close()


def answer_text(text: str) -> str:
    return answer({"messages": [{"content": text}]}).text

"""The conversation loop over real HTTP: replies, tools, stop, faults, overflow, resume."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from factories import assistant, tool_result, user
from fakeserver import FakeServer, Reply
from helpers import is_summary_request, run, saved

from nbchat.config import Settings
from nbchat.conversation.events import CompactionFinished, Done, Event, Failed, Notice, ToolFinished
from nbchat.conversation.loop import Conversation
from nbchat.conversation.session import TITLE_CHARS
from nbchat.errors import ContextOverflowError, NbchatError, ServerUnavailableError
from nbchat.history import History, Row, build_messages
from nbchat.llm.reader import TextDelta
from nbchat.stopping import StopSignal
from nbchat.store.store import Store
from nbchat.ui.attach import Attachment, with_attachments

SUMMARY = json.dumps(
    {
        "goal": "Fix the parser",
        "constraints": [],
        "done": ["read files"],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": ["run tests"],
        "critical_context": [],
    }
)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        running.responder = lambda body: Reply(text=SUMMARY if is_summary_request(body) else "ok")
        yield running


def make_conversation(
    server: FakeServer, store: Store, settings: Settings, **kwargs: Any
) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, store, client=client, **kwargs)


@pytest.fixture
def settings(make_settings) -> Settings:  # type: ignore[no-untyped-def]
    return make_settings(
        context_token_threshold=50_000, tool_policy="allow", system_prompt="Be brief."
    )


@pytest.fixture
def chat(server: FakeServer, store: Store, settings: Settings) -> Conversation:
    return make_conversation(server, store, settings)


def call(call_id: str, name: str, **arguments: object) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(arguments))


def test_a_plain_reply_is_streamed_stored_and_ends_done(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(Reply(text="Hello there, friend."))
    events = run(chat, "hi")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there, friend."
    assert saved(events) == [user("hi"), assistant("Hello there, friend.")]
    assert isinstance(events[-1], Done) and not events[-1].stopped
    assert chat.store.load_active(str(chat.session_id)) == [
        user("hi"),
        assistant("Hello there, friend."),
    ]
    sent = server.chat_requests()[-1]
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert chat.history.reported_tokens is not None


def test_reasoning_is_stored_and_never_sent_back(chat: Conversation, server: FakeServer) -> None:
    server.enqueue(Reply(reasoning="Let me think.", text="Four."), Reply(text="Yes."))
    events = run(chat, "2+2?")
    assert saved(events)[1:] == [Row("analysis", "Let me think."), assistant("Four.")]
    run(chat, "sure?")
    roles = [m["role"] for m in server.chat_requests()[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert "Let me think." not in json.dumps(server.chat_requests()[-1])


def test_two_interleaved_tool_calls_run_and_their_results_are_sent(
    chat: Conversation, server: FakeServer, settings: Settings
) -> None:
    (settings.workspace / "a.txt").write_text("alpha")
    (settings.workspace / "b.txt").write_text("beta")
    server.enqueue(
        Reply(
            tool_calls=[
                call("c1", "read_file", path="a.txt"),
                call("c2", "read_file", path="b.txt"),
            ],
            interleave=True,
        ),
        Reply(text="Both read."),
    )
    events = run(chat, "read both")
    rows = saved(events)
    assert [r.role for r in rows] == ["user", "assistant_full", "tool", "tool", "assistant"]
    assert [json.loads(c["function"]["arguments"]) for c in json.loads(rows[1].tool_args)] == [
        {"path": "a.txt"},
        {"path": "b.txt"},
    ]
    assert "alpha" in rows[2].content and "beta" in rows[3].content
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [f.outcome.ok for f in finished] == [True, True]
    second = server.chat_requests()[-1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in second[3:]] == ["c1", "c2"]


def test_a_three_round_tool_loop(chat: Conversation, server: FakeServer) -> None:
    server.enqueue(
        *[Reply(tool_calls=[call(f"r{i}", "list_files")]) for i in range(3)], Reply(text="done")
    )
    events = run(chat, "explore")
    assert [r.role for r in saved(events)] == ["user"] + ["assistant_full", "tool"] * 3 + [
        "assistant"
    ]
    assert len(server.chat_requests()) == 4


def test_max_tool_turns_ends_the_turn_with_a_notice(
    server: FakeServer, store: Store, make_settings
) -> None:  # type: ignore[no-untyped-def]
    chat = make_conversation(server, store, make_settings(max_tool_turns=2, tool_policy="allow"))
    server.enqueue(*[Reply(tool_calls=[call(f"m{i}", "list_files")]) for i in range(5)])
    events = run(chat, "loop")
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices == [
        "Stopped after 2 tool rounds (max_tool_turns). Send a message to let the "
        "model continue, or raise NBCHAT_MAX_TOOL_TURNS."
    ]
    assert len(server.chat_requests()) == 2
    assert isinstance(events[-1], Done)


def test_stop_mid_stream_keeps_the_partial_reply_and_the_next_send_works(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(Reply(text="word " * 400, chunk_size=5, delay=0.01), Reply(text="again"))
    stop = StopSignal()
    events: list[Event] = []
    for event in chat.send("talk", stop):
        events.append(event)
        if isinstance(event, TextDelta) and len(events) == 6:
            stop.set()
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 4  # the chunk in flight when Stop was pressed was the last
    partial = "".join(d.text for d in deltas)
    assert saved(events)[1:] == [
        assistant(partial),
        Row("system", "Stopped by you; the reply so far was kept."),
    ]
    assert events[-1] == Done(stopped=True)
    assert saved(run(chat, "continue"))[-1] == assistant("again")


def test_server_down_fails_clearly_and_keeps_the_message(
    chat: Conversation, server: FakeServer
) -> None:
    server.down()
    events = run(chat, "anyone there?")
    failed = events[-1]
    assert isinstance(failed, Failed) and isinstance(failed.error, ServerUnavailableError)
    assert "Start that server" in failed.message and server.url in failed.message
    assert failed.unsent_text == ""  # it was saved
    assert chat.store.load_active(str(chat.session_id)) == [user("anyone there?")]
    server.up()
    assert saved(run(chat, "back?"))[-1] == assistant("ok")


def test_http_500_fails_and_writes_no_reply(chat: Conversation, server: FakeServer) -> None:
    server.enqueue(Reply(fault="http500"))
    events = run(chat, "hi")
    assert isinstance(events[-1], Failed) and isinstance(events[-1].error, NbchatError)
    assert chat.store.load_active(str(chat.session_id)) == [user("hi")]


def test_a_cut_stream_keeps_what_arrived_as_complete_rows(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(Reply(text="abcdefghijklmnopqrstuvwxyz", chunk_size=2, fault="cut", cut_after=5))
    events = run(chat, "hi")
    arrived = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert arrived and len(arrived) < 26
    rows = chat.store.load_active(str(chat.session_id))
    assert rows[:2] == [user("hi"), assistant(arrived)]
    assert rows[2].role == "system" and rows[2].content.startswith("The reply was cut off:")
    assert isinstance(events[-1], Failed) and events[-1].message.endswith(
        "The partial reply was kept; retry for a complete one."
    )


def test_overflow_compacts_once_and_the_retry_succeeds(
    chat: Conversation, server: FakeServer
) -> None:
    for i in range(6):
        server.enqueue(Reply(text=f"answer {i} " + "x" * 300))
        run(chat, f"question {i} " + "y" * 300)
    server.enqueue(Reply(fault="overflow_llama"), Reply(text=SUMMARY), Reply(text="fits now"))
    events = run(chat, "one more")
    results = [e.result for e in events if isinstance(e, CompactionFinished)]
    assert len(results) == 1 and results[0].changed
    assert saved(events)[-1] == assistant("fits now")
    active = chat.store.load_active(str(chat.session_id))
    assert active[0].role == "compacted" and active[-1] == assistant("fits now")
    full = chat.store.load_full(str(chat.session_id))
    assert sum(1 for s in full if s.row.role == "user") == 7  # nothing lost


def test_overflow_twice_gives_a_clear_error_and_loses_nothing(
    chat: Conversation, server: FakeServer
) -> None:
    for i in range(4):
        server.enqueue(Reply(text=f"answer {i} " + "x" * 300))
        run(chat, f"question {i} " + "y" * 300)
    server.enqueue(
        Reply(fault="overflow_openai"), Reply(text=SUMMARY), Reply(fault="overflow_openai")
    )
    events = run(chat, "last")
    failed = events[-1]
    assert isinstance(failed, Failed) and isinstance(failed.error, ContextOverflowError)
    assert failed.message.startswith("The request is still too big for the model after compacting")
    assert "/new" in failed.message
    full = [s.row for s in chat.store.load_full(str(chat.session_id))]
    assert user("last") in full and sum(1 for r in full if r.role == "user") == 5


def test_a_message_bigger_than_the_budget_is_refused_before_anything_is_sent(
    server: FakeServer,
    store: Store,
    make_settings,  # type: ignore[no-untyped-def]
) -> None:
    chat = make_conversation(server, store, make_settings(context_token_threshold=100))
    events = run(chat, "z" * 600)
    failed = events[-1]
    assert isinstance(failed, Failed) and failed.unsent_text == "z" * 600
    overhead = chat.budget.overhead_tokens()
    assert failed.message == (
        f"Your message is about 200 tokens, too big beside the system prompt and tools "
        f"({overhead:,}) for the whole budget (100). Shorten it, or save it to a file in the "
        "workspace and ask the model to read the parts it needs."
    )
    assert server.chat_requests() == []


def test_a_resumed_session_sends_byte_for_byte_what_the_live_one_would(
    chat: Conversation, server: FakeServer, store: Store, settings: Settings
) -> None:
    (settings.workspace / "a.txt").write_text("alpha")
    server.enqueue(
        Reply(reasoning="hmm", tool_calls=[call("c1", "read_file", path="a.txt")]),
        Reply(text="read it"),
    )
    run(chat, "read a.txt")
    live = build_messages(chat.history.rows, settings.system_prompt)
    resumed = make_conversation(server, store, settings, session_id=chat.session_id)
    assert json.dumps(build_messages(resumed.history.rows, settings.system_prompt)) == json.dumps(
        live
    )
    server.enqueue(Reply(text="next"))
    chat.close()
    resumed.resume(str(chat.session_id))
    run(resumed, "and then?")
    assert json.dumps(server.chat_requests()[-1]["messages"][:-1]) == json.dumps(live)


def test_bad_tool_arguments_and_unknown_tools_come_back_as_readable_rows(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(
        Reply(tool_calls=[("b1", "read_file", "{not json"), ("b2", "no_such_tool", "{}")]),
        Reply(text="sorry"),
    )
    rows = saved(run(chat, "go"))
    results = [r for r in rows if r.role == "tool"]
    assert "not valid JSON" in results[0].content or "JSON" in results[0].content
    assert "no_such_tool" in results[1].content and "read_file" in results[1].content
    assert rows[-1] == assistant("sorry")


def test_the_same_failing_call_three_times_ends_the_turn(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(
        *[Reply(tool_calls=[call(f"f{i}", "read_file", path="missing.txt")]) for i in range(5)]
    )
    events = run(chat, "read it")
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "The same tool call failed three times in a row, so the turn was ended. Tell the model "
        "what to do differently."
    ]
    assert len(server.chat_requests()) == 3


def test_ask_policy_uses_the_approver_and_a_declined_call_ends_the_turn_saying_so(
    server: FakeServer,
    store: Store,
    make_settings,  # type: ignore[no-untyped-def]
) -> None:
    asked: list[str] = []

    def deny(request: Any) -> bool:
        asked.append(request.name)
        return False

    chat = make_conversation(server, store, make_settings(tool_policy="ask"), approver=deny)
    server.enqueue(Reply(tool_calls=[call("s1", "run_shell", command="echo hi")]))
    rows = saved(run(chat, "run it"))
    assert asked == ["run_shell"]
    assert rows[2].role == "tool" and "hi\n" not in rows[2].content
    # The model is not asked to go on: the reply is the refusal, in the user's terms.
    assert rows[-1] == assistant("Not done: you declined run_shell. Say what to do instead.")
    assert len(server.chat_requests()) == 1
    # The next message's request carries the refusal, so the model knows what did not run.
    server.enqueue(Reply(text="noted"))
    run(chat, "fine, leave it")
    sent = server.chat_requests()[-1]["messages"]
    assert any("did not approve 'run_shell'" in str(m.get("content")) for m in sent)


def test_ask_without_an_approver_means_deny(
    server: FakeServer, store: Store, make_settings
) -> None:  # type: ignore[no-untyped-def]
    chat = make_conversation(server, store, make_settings(tool_policy="ask"))
    server.enqueue(Reply(tool_calls=[call("s1", "run_shell", command="echo hi")]))
    rows = saved(run(chat, "run it"))
    assert rows[2].role == "tool" and "approv" in rows[2].content.lower()
    assert rows[-1].role == "assistant" and "NBCHAT_TOOL_POLICY=allow" in rows[-1].content


def test_compaction_is_visible_in_events_and_store_and_the_next_request_fits(
    server: FakeServer,
    store: Store,
    make_settings,  # type: ignore[no-untyped-def]
) -> None:
    settings = make_settings(context_token_threshold=3000, tool_policy="allow")
    (settings.workspace / "big.txt").write_text("line of text\n" * 300)
    chat = make_conversation(server, store, settings)
    all_events: list[Event] = []
    for i in range(6):
        server.enqueue(
            Reply(tool_calls=[call(f"t{i}", "read_file", path="big.txt")]),
            Reply(text=f"summary of step {i}"),
        )
        all_events += run(chat, f"step {i}: read big.txt again")
    compactions = [e.result for e in all_events if isinstance(e, CompactionFinished)]
    assert any(r.changed for r in compactions)
    assert store.list_compactions(str(chat.session_id))
    last = server.chat_requests()[-1]
    size = sum(len(json.dumps(m)) for m in last["messages"]) // 3
    assert size <= 3000


def test_read_archived_output_brings_back_a_pruned_tool_output(
    chat: Conversation, server: FakeServer, store: Store
) -> None:
    session_id = chat.new_session()
    original = tool_result("orig1", "the full original output", name="run_shell")
    store.append_rows(
        session_id,
        [
            user("u"),
            Row(
                "assistant_full",
                "",
                "",
                "",
                json.dumps(
                    [
                        {
                            "id": "orig1",
                            "type": "function",
                            "function": {"name": "run_shell", "arguments": "{}"},
                        }
                    ]
                ),
            ),
            original,
        ],
    )
    from nbchat.store.rowsql import CompactionRecord

    store.replace_rows(
        session_id,
        {2: tool_result("orig1", "[pruned]", name="run_shell")},
        expected_active=3,
        record=CompactionRecord(kind="prune"),
    )
    chat.resume(session_id)
    server.enqueue(
        Reply(tool_calls=[call("r1", "read_archived_output", tool_id="orig1")]),
        Reply(text="got it"),
    )
    rows = saved(run(chat, "what was it?"))
    assert rows[2].content == "the full original output"


def test_retry_archives_the_last_reply_and_asks_again(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(Reply(text="first try"), Reply(text="second try"))
    run(chat, "hi")
    events = list(chat.retry())
    assert saved(events) == [assistant("second try")]
    assert chat.history.rows == [user("hi"), assistant("second try")]
    full = [s.row for s in chat.store.load_full(str(chat.session_id))]
    assert assistant("first try") in full


def test_take_back_last_message_returns_it_for_editing(
    chat: Conversation, server: FakeServer
) -> None:
    run(chat, "first")
    run(chat, "secnd")
    assert chat.take_back_last_message() == "secnd"
    assert chat.history.rows == [user("first"), assistant("ok")]


def test_a_session_written_by_another_kernel_is_read_only(
    chat: Conversation, server: FakeServer, store: Store, settings: Settings
) -> None:
    run(chat, "mine")
    other = make_conversation(server, Store(store.path), settings, session_id=chat.session_id)
    assert other.read_only
    events = run(other, "theirs")
    assert isinstance(events[-1], Failed)
    assert "read-only here" in events[-1].message
    assert events[-1].unsent_text == "theirs"
    chat.close()
    assert saved(run(other, "now mine"))[-1] == assistant("ok")


def test_nothing_is_connected_until_the_first_send(
    settings: Settings, store: Store, tmp_path: Path
) -> None:
    chat = Conversation(settings.replace(base_url="http://127.0.0.1:9/v1"), store)
    assert chat.session_id is None and len(chat.history) == 0


def test_tool_choice_names_the_tool_on_the_first_request_only(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(Reply(tool_calls=[call("c1", "list_files")]), Reply(text="listed"))
    run_events = list(chat.send("list them", tool_choice="list_files"))
    assert isinstance(run_events[-1], Done)
    first, second = server.chat_requests()[-2:]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "list_files"}}
    assert "tool_choice" not in second


def test_an_unknown_required_tool_is_refused_before_sending(
    chat: Conversation, server: FakeServer
) -> None:
    events = list(chat.send("go", tool_choice="teleport"))
    assert isinstance(events[-1], Failed) and events[-1].unsent_text == "go"
    assert events[-1].message.startswith("No tool named 'teleport' to require.")
    assert server.chat_requests() == []


def test_the_servers_reported_prompt_size_triggers_compaction(
    chat: Conversation, server: FakeServer
) -> None:
    for i in range(5):
        server.enqueue(Reply(text=f"answer {i} " + "x" * 300))
        run(chat, f"question {i} " + "y" * 300)
    assert not chat.engine.should_compact(chat.history)  # the estimate alone is far below
    server.enqueue(Reply(text="short", usage=(45_000, 2)), Reply(text=SUMMARY))
    events = run(chat, "and now?")
    results = [e.result for e in events if isinstance(e, CompactionFinished)]
    assert len(results) == 1 and results[0].changed
    assert chat.history.rows[0].role == "compacted"


def test_the_meter_counts_the_next_request_as_the_engine_does(
    chat: Conversation, server: FakeServer
) -> None:
    expected = chat.engine.context_tokens(History([]))
    assert chat.context_tokens() == expected
    server.enqueue(Reply(text="fine", usage=None))
    run(chat, "hello " * 50)
    assert chat.context_tokens() == chat.engine.context_tokens(chat.history)
    chat.history.forget_usage()
    assert chat.context_tokens() == chat.engine.context_tokens(chat.history)


# The session's title


@pytest.mark.parametrize(
    ("message", "title"),
    [
        ("  Why does\n my   parser fail on week 53?  ", "Why does my parser fail on week 53?"),
        (
            "Please read every module in src and tell me which of them parse ISO dates wrongly",
            "Please read every module in src and tell me which of them…",
        ),
        ("x" * 80, "x" * 59 + "…"),
    ],
    ids=["spaces", "long", "one long word"],
)
def test_the_first_message_names_the_session_on_one_short_line(
    chat: Conversation, store: Store, message: str, title: str
) -> None:
    run(chat, message)
    run(chat, "a second message names nothing")
    assert [info.title for info in store.list_sessions()] == [title]
    assert len(title) <= TITLE_CHARS


def test_attached_blocks_leave_the_typed_words_for_the_title(
    chat: Conversation, store: Store
) -> None:
    blocks = [Attachment("Source of cell 3", "x = 1\n```py\n", fence="python")]
    run(chat, with_attachments("Why is x one?", blocks))
    assert [info.title for info in store.list_sessions()] == ["Why is x one?"]


def test_a_session_the_user_named_keeps_its_name_and_new_ones_are_named_too(
    chat: Conversation, store: Store
) -> None:
    named = chat.new_session()
    store.rename_session(named, "My own name")
    run(chat, "hello there")
    untitled = chat.new_session()
    run(chat, "/attach only")  # typed words, even if they look like a command here
    assert {info.id: info.title for info in store.list_sessions()} == {
        named: "My own name",
        untitled: "/attach only",
    }

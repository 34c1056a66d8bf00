"""The request inspector: every chat request is recorded so that it can be rebuilt exactly as the
server received it (real SQLite, real HTTP to the fake server, the real widget tree)."""

from __future__ import annotations

import html
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import openai
import pytest
from factories import tool_result, user
from fakeserver import FakeServer, Reply
from helpers import is_summary_request, run
from sqlite_utils import Database

from nbchat.cli.command import main
from nbchat.config import Settings
from nbchat.conversation.events import Failed
from nbchat.conversation.loop import Conversation
from nbchat.conversation.requestview import (
    ATTACHMENT,
    PLACEHOLDER,
    SUMMARY,
    InspectedRequest,
    inspect_request,
    last_request,
)
from nbchat.history import Row
from nbchat.store.migrations import MIGRATIONS
from nbchat.store.requests import from_runs, list_sent, load_sent, to_runs
from nbchat.store.rowsql import CompactionRecord
from nbchat.store.store import Store
from nbchat.ui import ChatUI
from nbchat.ui.attach import Attachment, with_attachments
from nbchat.ui.cards import RequestLink

API_KEY = "sk-inspector-secret-4f1c9a"
USAGE = {"prompt_tokens": 120, "completion_tokens": 7, "duration": 0.5}
SUMMARY_JSON = json.dumps(
    {
        "goal": "Explore the data",
        "constraints": [],
        "done": ["looked at df"],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": ["plot it"],
        "critical_context": [],
    }
)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        running.responder = lambda body: Reply(
            text=SUMMARY_JSON if is_summary_request(body) else "ok"
        )
        yield running


@pytest.fixture
def settings(make_settings) -> Settings:  # type: ignore[no-untyped-def]
    return make_settings(
        context_token_threshold=50_000,
        tool_policy="allow",
        system_prompt="Be brief.",
        temperature=0.25,
        max_tokens=300,
    )


@pytest.fixture
def chat(server: FakeServer, store: Store, settings: Settings) -> Iterator[Conversation]:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    conversation = Conversation(settings, store, client=client)
    yield conversation
    conversation.close()


def chat_bodies(server: FakeServer) -> list[dict[str, Any]]:
    """What the server received from the chat (the summariser's requests left out)."""
    return [body for body in server.chat_requests() if not is_summary_request(body)]


def rebuilt(chat: Conversation) -> list[InspectedRequest]:
    found = []
    for request_id, _ in chat.store.sent_requests(str(chat.session_id)):
        inspected = inspect_request(chat.store, request_id)
        assert inspected is not None
        found.append(inspected)
    return found


def same_bytes(inspected: InspectedRequest, received: dict[str, Any]) -> bool:
    """The very bytes sent: the server's parsed body (its keys keep their order) written back
    the way the openai SDK writes a body (`openai._utils._json.openapi_dumps`)."""
    wire = json.dumps(received, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return inspected.to_bytes() == wire.encode()


def call(call_id: str, name: str, **arguments: object) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(arguments))


def set_system_prompt(chat: Conversation, prompt: str) -> None:
    chat.settings = chat.session.settings = chat.settings.replace(system_prompt=prompt)
    chat.budget.use_settings(chat.settings)


def test_the_last_request_is_rebuilt_exactly_as_the_server_received_it(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(Reply(text="Hello."))
    run(chat, "hi")
    inspected = chat.last_request()
    assert inspected is not None
    received = chat_bodies(server)[-1]
    assert inspected.body == received
    assert same_bytes(inspected, received)
    assert received["temperature"] == 0.25 and received["max_tokens"] == 300
    assert received["tools"]  # the schemas offered are part of it
    assert [p.kind for p in inspected.parts][:2] == ["system prompt", "message"]


def test_every_request_of_a_tool_turn_is_recorded_with_the_servers_count(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(
        Reply(tool_calls=[call("c1", "list_files", path=".")], usage=(321, 5)),
        Reply(text="There are no files.", usage=(400, 6)),
    )
    run(chat, "what files are there?")
    received = chat_bodies(server)
    requests = rebuilt(chat)
    assert len(requests) == len(received) == 2
    for inspected, body in zip(requests, received, strict=True):
        assert inspected.body == body
    assert [r.prompt_tokens for r in requests] == [321, 400]
    roles = [m["role"] for m in requests[1].body["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]


def test_requests_are_rebuilt_as_sent_after_compaction_and_a_new_system_prompt(
    chat: Conversation, server: FakeServer, store: Store
) -> None:
    for number in range(3):
        server.enqueue(Reply(text=f"reply {number} " + "words " * 300))
        run(chat, f"message {number} " + "about the data " * 100)
    before = rebuilt(chat)
    list(chat.compact_now())
    assert chat.history[0].role == "compacted"  # the rows those requests sent are archived now
    set_system_prompt(chat, "Be very brief, and polite.")
    server.enqueue(Reply(text="after"))
    run(chat, "one more")
    received = chat_bodies(server)
    requests = rebuilt(chat)
    assert len(requests) == len(received) == 4
    for inspected, body in zip(requests, received, strict=True):
        assert inspected.body == body
        assert same_bytes(inspected, body)
    assert [r.body for r in before] == [r.body for r in requests[:3]]
    last = requests[-1]
    assert last.body["messages"][0]["content"].startswith("Be very brief, and polite.")
    assert requests[0].body["messages"][0]["content"] == "Be brief."
    (summary,) = last.marked(SUMMARY)
    assert summary.row_id is not None and summary.text == chat.history[0].content
    # The system prompts and the tool list are stored once each, however many requests.
    parts = {record["hash"] for record in store.db["request_parts"].rows}
    assert len(parts) == 3


def test_the_json_fallbacks_corrected_retry_is_rebuilt_exactly_as_sent(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    # The retry sends the rows plus two messages that are no rows: the bad reply and the note.
    wrong = '{"name": "delete_file", "arguments": {"target": "old.log"}}'
    right = json.dumps({"name": "list_files", "arguments": {"path": "."}})
    server.enqueue(Reply(text=wrong), Reply(text=right), Reply(text="Nothing to delete."))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    chat = Conversation(settings.replace(json_tool_fallback=True), store, client=client)
    try:
        run(chat, "delete old.log")
        received = server.chat_requests()  # the retry has a response_format: no summary here
        requests = rebuilt(chat)
    finally:
        chat.close()
    assert received[1]["messages"][-2:] == [
        {"role": "assistant", "content": wrong},
        {"role": "user", "content": received[1]["messages"][-1]["content"]},
    ]
    assert len(requests) == len(received) == 3
    assert [same_bytes(r, body) for r, body in zip(requests, received, strict=True)] == [
        True,
        True,
        True,
    ]
    retry_parts = [part for part in requests[1].parts if part.kind == "message"]
    assert [(part.label, part.row_id) for part in retry_parts[-2:]] == [
        ("assistant", None),
        ("user", None),
    ]


@pytest.mark.parametrize(
    "sent",
    [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "a note no row holds"},
        ],
        [{"role": "system", "content": "Another prompt."}, {"role": "user", "content": "hi"}],
        [{"role": "user", "content": "hi"}, {"role": "system", "content": "Be brief."}],
    ],
    ids=["the rows", "the rows and more", "another prompt", "reordered"],
)
def test_any_messages_a_request_sent_are_rebuilt_to_the_same_bytes(
    store: Store, sent: list[dict[str, Any]]
) -> None:
    session_id = store.create_session("s")
    store.append_rows(session_id, [user("hi")])
    body = {"model": "m", "stream": True, "messages": sent, "max_tokens": 5}
    request_id = store.record_sent(session_id, body, system_prompt="Be brief.")
    inspected = inspect_request(store, request_id)
    assert inspected is not None
    assert same_bytes(inspected, body)


def test_the_api_key_is_never_stored(
    chat: Conversation, server: FakeServer, store: Store, tmp_path: Path
) -> None:
    server.enqueue(Reply(tool_calls=[call("c1", "list_files", path=".")]), Reply(text="ok"))
    run(chat, "look")
    received = server.requests[-1]
    assert API_KEY in received.headers["authorization"]  # it was sent, as a header
    assert chat.last_request() is not None
    for closed in (False, True):  # the write-ahead log too, then the file once it is folded in
        if closed:
            store.close()
        files = [p for p in tmp_path.iterdir() if p.name.startswith("test.db")]
        assert files
        for path in files:
            assert API_KEY.encode() not in path.read_bytes()
    assert API_KEY not in chat.store.export_json(str(chat.session_id))


def test_rows_are_marked_as_summary_placeholder_or_attachment(
    chat: Conversation, server: FakeServer, store: Store
) -> None:
    session_id = chat.new_session()
    calls = [{"id": "run1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]
    store.append_rows(
        session_id,
        [
            Row("compacted", "Earlier: the user loaded data.csv into df."),
            user("u"),
            Row("assistant_full", "", "", "", json.dumps(calls)),
            tool_result("run1", "a long output " * 200, name="run"),
            Row("assistant", "done"),
        ],
    )
    store.replace_rows(
        session_id,
        {3: tool_result("run1", "[Archived output of run: 2,800 characters, ~933 tokens.]", "run")},
        expected_active=5,
        record=CompactionRecord(kind="prune"),
    )
    chat.resume(session_id)
    attached = with_attachments(
        "why does this fail?",
        [
            Attachment("Source of cell 3", "df = load()", fence="python"),
            Attachment("The last error", "KeyError: 'x'"),
        ],
    )
    server.enqueue(Reply(text="Because of the key."))
    run(chat, attached)
    inspected = chat.last_request()
    assert inspected is not None and inspected.body == chat_bodies(server)[-1]
    (summary,) = inspected.marked(SUMMARY)
    assert summary.text == "Earlier: the user loaded data.csv into df."
    (placeholder,) = inspected.marked(PLACEHOLDER)
    assert placeholder.text.startswith("[Archived output of run")
    (attachment,) = inspected.marked(ATTACHMENT)
    assert attachment.text == attached
    assert attachment.label == "user, with source of cell 3; the last error"
    unmarked = [p for p in inspected.parts if p.kind == "message" and not p.marks]
    assert [p.text for p in unmarked] == ["u", calls_text(calls), "done"]
    assert all(p.tokens >= 1 for p in inspected.parts)


def calls_text(calls: list[dict[str, Any]]) -> str:
    return json.dumps(calls, ensure_ascii=False)


def test_a_request_the_server_refused_is_recorded_without_a_count(
    chat: Conversation, server: FakeServer
) -> None:
    server.enqueue(Reply(fault="http500"), Reply(fault="http500"), Reply(fault="http500"))
    events = run(chat, "hi")
    assert isinstance(events[-1], Failed)
    inspected = chat.last_request()
    assert inspected is not None
    assert inspected.body == chat_bodies(server)[-1]
    assert inspected.prompt_tokens is None


def test_usage_and_request_share_one_record(chat: Conversation, server: FakeServer) -> None:
    server.enqueue(Reply(text="a", usage=(50, 2)), Reply(text="b", usage=(70, 3)))
    run(chat, "one")
    run(chat, "two")
    usage = chat.store.list_requests(str(chat.session_id))
    assert [(r["prompt_tokens"], r["completion_tokens"]) for r in usage] == [(50, 2), (70, 3)]
    assert all(r["body"] for r in usage)


def test_row_ids_are_kept_as_runs() -> None:
    ids = [1, 2, 3, 9, 4, 5, 7]
    assert to_runs(ids) == "1-3,9,4-5,7"
    assert from_runs(to_runs(ids)) == ids
    assert from_runs(to_runs([])) == []


HOSTILE = '<script>alert("owned")</script><img src=x onerror=alert(1)>'


def make_ui(server: FakeServer, store: Store, settings: Settings, **kwargs: Any) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    return ChatUI(settings, store=store, client=client, **kwargs)


def request_links(root: widgets.Widget) -> list[RequestLink]:
    found = [root] if isinstance(root, RequestLink) else []
    for child in getattr(root, "children", ()):
        found.extend(request_links(child))
    return found


def test_each_reply_links_to_its_request_shown_escaped(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    ui = make_ui(server, store, settings)
    try:
        server.enqueue(Reply(text=f"Here you go: {HOSTILE}"), Reply(text="Fine.", usage=(99, 2)))
        ui.send(f"first {HOSTILE}")
        assert ui.wait(20)
        ui.send("second")
        assert ui.wait(20)
        link = ui.last_request_link()
        assert link is not None and link.panel.value == ""  # nothing is read before a press
        link.press()
        shown = link.panel.value
        assert link.is_open and link.panel.layout.display == ""
        assert "<script" not in shown and "<img" not in shown
        assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in shown
        assert "99 prompt tokens counted by the server" in shown
        assert "system prompt · ~" in shown and "tool: list_files · ~" in shown
        inspected = ui.conversation.last_request()
        assert inspected is not None and inspected.body == chat_bodies(server)[-1]
        assert f"~{inspected.estimated_tokens:,} tokens estimated" in shown
        link.press()
        assert not link.is_open and link.panel.layout.display == "none"
        assert len(request_links(ui.messages.box)) == 2
    finally:
        ui.close()


def test_a_reloaded_session_links_each_reply_to_the_request_sent_then(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    first = make_ui(server, store, settings)
    server.enqueue(
        Reply(tool_calls=[call("c1", "list_files", path=".")]),
        Reply(text="No files."),
        Reply(text="Second answer."),
    )
    first.send("first question")
    assert first.wait(20)
    first.send("second question")
    assert first.wait(20)
    session_id = first.conversation.session_id
    first.close()
    again = make_ui(server, store, settings, session_id=session_id)
    try:
        links = request_links(again.messages.box)
        assert len(links) == 3  # the tool call, its answer, the second answer
        for link, body in zip(links, chat_bodies(server), strict=True):
            link.press()
            assert html.unescape(link.panel.value).count('"role": "user"') == len(
                [m for m in body["messages"] if m["role"] == "user"]
            )
        assert "second question" not in html.unescape(links[1].panel.value)
        assert "second question" in html.unescape(links[2].panel.value)
    finally:
        again.close()


def export_one_session(server: FakeServer, settings: Settings) -> str:
    """A tool turn stored where `nbchat export` looks; its session id."""
    store = Store(settings.database_path)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0)
    chat = Conversation(settings, store, client=client)
    server.enqueue(Reply(tool_calls=[call("c1", "list_files", path=".")]), Reply(text="None."))
    run(chat, f"list them {HOSTILE}")
    session_id = str(chat.session_id)
    chat.close()
    store.close()
    return session_id


def test_export_json_with_requests_holds_each_request_as_sent(
    server: FakeServer, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    session_id = export_one_session(server, settings)
    assert main(["export", session_id, "--format", "json", "--requests"]) == 0
    out = capsys.readouterr().out
    assert API_KEY not in out
    document = json.loads(out)
    assert [r["body"] for r in document["sent_requests"]] == chat_bodies(server)
    assert [row["content"] for row in document["rows"]][0].startswith("list them")
    assert [p["kind"] for p in document["sent_requests"][0]["parts"]][0] == "system prompt"
    assert main(["export", session_id, "--format", "json"]) == 0
    assert "sent_requests" not in json.loads(capsys.readouterr().out)  # only when asked


def test_export_markdown_with_requests_holds_each_request_as_sent(
    server: FakeServer, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    session_id = export_one_session(server, settings)
    assert main(["export", session_id, "--requests"]) == 0
    out = capsys.readouterr().out
    assert API_KEY not in out
    requests = out.split("\n# Requests\n", 1)[1]
    assert requests.count("## Request ") == 2
    blocks = [block.split("\n```", 1)[0] for block in requests.split("```json\n")[1:]]
    assert [json.loads(block) for block in blocks] == chat_bodies(server)
    assert "- tool result: list_files · ~" in requests


def test_the_rebuild_benchmark_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "bench"))
    module = importlib.import_module("inspector_rebuild")
    monkeypatch.setattr(module, "ROWS", 60)
    monkeypatch.setattr(module, "REPEATS", 1)
    rows = module.main()
    assert [row["figure"].split(",")[0] for row in rows] == [
        "record a request",
        "inspect the last request",
        "render its panel",
        "the same once its rows were compacted",
    ]
    assert all(row["value"].endswith(" ms") and row["ratio"] for row in rows)


def test_a_file_from_before_request_records_reads_and_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = Database(path)
    MIGRATIONS.apply(old, stop_before="m007_request_records")
    old["sessions"].insert({"id": "s1", "title": "old", "created": "t", "updated": "t"})
    old["requests"].insert({"session_id": "s1", "kind": "chat", "created": "t"} | USAGE)
    # Read as it is (as a read-only file would be): no records, and no error.
    assert (list_sent(old, "s1"), load_sent(old, 1)) == ([], None)
    old.close()
    store = Store(path)
    try:
        assert store.sent_requests("s1") == [] and last_request(store, "s1") is None
        assert store.list_requests("s1")[0]["prompt_tokens"] == USAGE["prompt_tokens"]
        body = {"model": "m", "stream": True, "messages": None}
        request_id = store.record_sent("s1", body, system_prompt="Be brief.")
        assert store.sent_requests("s1") == [(request_id, store.sent_requests("s1")[0][1])]
    finally:
        store.close()


def test_deleting_a_session_forgets_the_prompts_only_it_sent(store: Store) -> None:
    kept, dropped = store.create_session("kept"), store.create_session("dropped")
    body = {"model": "m", "stream": True, "messages": None, "tools": [{"type": "function"}]}
    store.record_sent(kept, body, system_prompt="Shared prompt.")
    store.record_sent(dropped, body, system_prompt="Shared prompt.")
    store.record_sent(dropped, {**body, "tools": None}, system_prompt="Private prompt.")

    def parts() -> list[str]:
        return sorted(record["text"] for record in store.db["request_parts"].rows)

    assert parts() == ["Private prompt.", "Shared prompt.", '[{"type": "function"}]']
    store.delete_session(dropped)
    assert parts() == ["Shared prompt.", '[{"type": "function"}]']

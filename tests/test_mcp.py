"""Tools from MCP servers, end to end: real servers written with the SDK (tests/mcpserver.py, over
stdio and streamable HTTP), the chat's loop against the test model server, the approval policy,
failures that name the server, bounds, secrets, /help and `nbchat doctor`."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from helpers import run, saved

from nbchat.config import Settings
from nbchat.conversation.events import Event, ToolStarted
from nbchat.conversation.loop import Conversation
from nbchat.history import Row, request_overhead_tokens
from nbchat.llm.firststep import FIRST_STEP_OPENING
from nbchat.stopping import StopSignal
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolRegistry
from nbchat.tools.mcp import McpTools, tool_name
from nbchat.tools.mcpcall import SchemaCheck
from nbchat.tools.offer import router_messages

SCRIPT = Path(__file__).with_name("mcpserver.py")
SERVER = "testserver"
TOOLS = ["add", "shout", "huge", "picture", "crash", "hang", "variable", "pick", "pid"]


def stdio(*flags: str, **entry: Any) -> dict[str, Any]:
    """An `mcp_servers` entry that runs the test server over stdio."""
    return {"command": sys.executable, "args": [str(SCRIPT), *flags], **entry}


def call(call_id: str, tool: str, /, **arguments: object) -> tuple[str, str, str]:
    return (call_id, tool, json.dumps(arguments))


def tool_rows(events: list[Event]) -> list[str]:
    return [row.content for row in saved(events) if row.role == "tool"]


def notices(events: list[Event]) -> list[str]:
    return [row.content for row in saved(events) if row.role == "system"]


@pytest.fixture
def model() -> Iterator[FakeServer]:
    with FakeServer(default_reply=Reply(text="ok")) as running:
        yield running


@pytest.fixture
def chat_with(
    model: FakeServer, store: Store, make_settings: Callable[..., Settings]
) -> Iterator[Callable[..., Conversation]]:
    """A conversation with `mcp_servers` (and any other settings) against the test model."""
    made: list[Conversation] = []

    def build(servers: dict[str, Any], approver: Any = None, **overrides: Any) -> Conversation:
        settings = make_settings(
            base_url=model.url + "/v1", context_token_threshold=50_000, mcp_servers=servers
        ).replace(**overrides)
        client = openai.OpenAI(base_url=model.url + "/v1", api_key="test", max_retries=0)
        chat = Conversation(settings, store, client=client, approver=approver)
        made.append(chat)
        return chat

    yield build
    for chat in made:
        chat.close()


def mcp_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("nbchat-mcp-")]


def test_servers_start_with_the_first_turn_and_stop_with_the_chat(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    before = mcp_threads()
    chat = chat_with({SERVER: stdio()}, mcp_allow=[SERVER])
    assert mcp_threads() == before and f"{SERVER}__add" not in chat.tools  # nothing yet
    model.enqueue(Reply(tool_calls=[call("c1", f"{SERVER}__pid")]), Reply(text="done"))
    events = run(chat, "which process?")
    (pid,) = tool_rows(events)
    sent = model.chat_requests()[0]["tools"]
    add = next(t["function"] for t in sent if t["function"]["name"] == f"{SERVER}__add")
    assert add["description"] == f"Add two whole numbers. (from the MCP server '{SERVER}')"
    assert add["parameters"]["required"] == ["a", "b"]  # the server's own schema
    assert {"read_file", "run_shell"} <= {t["function"]["name"] for t in sent}
    os.kill(int(pid), 0)  # running
    chat.close()
    with pytest.raises(ProcessLookupError):  # ended and reaped by the SDK's shutdown
        os.kill(int(pid), 0)
    assert mcp_threads() == before


def test_a_call_returns_text_and_names_images_by_type_and_size(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    chat = chat_with({SERVER: stdio()}, mcp_allow=[SERVER])
    model.enqueue(
        Reply(
            tool_calls=[
                call("c1", f"{SERVER}__add", a=2, b=3),
                call("c2", f"{SERVER}__picture"),
                call("c3", f"{SERVER}__add", a="two"),
            ]
        ),
        Reply(text="done"),
    )
    rows = tool_rows(run(chat, "add and draw"))
    assert rows[:2] == ["5", "[image: image/png, 2,000 bytes]\na black square"]
    assert rows[2] == (  # checked against the server's schema before it is sent
        f"Invalid arguments for '{SERVER}__add': arguments: 'b' is a required property; a: 'two' "
        "is not of type 'integer'. Parameters: a (integer, required), b (integer, required)."
    )


def test_a_huge_result_is_bounded_like_any_tool_output(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    chat = chat_with({SERVER: stdio()}, mcp_allow=[SERVER], tool_output_limit=5_000)
    model.enqueue(Reply(tool_calls=[call("c1", f"{SERVER}__huge", size=3_000_000)]))
    (row,) = tool_rows(run(chat, "everything"))
    assert len(row) <= 5_000
    assert row.startswith("0123456789" * 10) and row.rstrip().endswith("56789")
    assert "one tool result holds at most 5,000 characters" in row


def test_every_mcp_tool_asks_first_and_a_refusal_reaches_the_model(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    asked: list[ApprovalRequest] = []
    answers = iter([False, True])

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return next(answers)

    chat = chat_with({SERVER: stdio()}, approver=approver)
    model.enqueue(Reply(tool_calls=[call("c1", f"{SERVER}__shout", text="no")]))
    declined = run(chat, "shout")
    # A declined call ends the turn, saying so; the model reads the refusal with the next one.
    assert tool_rows(declined) == [
        f"Refused: the user did not approve '{SERVER}__shout'. Ask the user how to proceed or "
        "do without it."
    ]
    model.enqueue(
        Reply(tool_calls=[call("c2", f"{SERVER}__shout", text="yes")]), Reply(text="done")
    )
    assert tool_rows(run(chat, "shout yes then")) == ["YES"]
    refusal = model.chat_requests()[-2]["messages"]
    assert any("did not approve" in str(m.get("content")) for m in refusal)
    assert [r.summary() for r in asked] == [
        f"{SERVER}__shout(text='no')",
        f"{SERVER}__shout(text='yes')",
    ]
    assert asked[0].reason == (
        f"{SERVER}__shout is a tool of the MCP server '{SERVER}', which can do anything that "
        "server can, and the tool policy is 'ask' (mcp_allow names the servers and tools that "
        "may run without asking)."
    )


@pytest.mark.parametrize("allow", [[SERVER], [f"{SERVER}__add"]])
def test_a_server_or_tool_named_in_mcp_allow_runs_without_asking(
    chat_with: Callable[..., Conversation], model: FakeServer, allow: list[str]
) -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.name)
        return False

    chat = chat_with({SERVER: stdio()}, approver=approver, mcp_allow=allow)
    model.enqueue(
        Reply(
            tool_calls=[
                call("c1", f"{SERVER}__add", a=1, b=2),
                call("c2", f"{SERVER}__shout", text="hi"),
            ]
        ),
        Reply(text="done"),
    )
    rows = tool_rows(run(chat, "go"))
    assert rows[0] == "3"
    if allow == [SERVER]:
        assert rows[1] == "HI" and asked == []
    else:
        assert rows[1].startswith("Refused") and asked == [f"{SERVER}__shout"]


def test_a_server_that_crashes_mid_call_is_named_once_and_the_chat_goes_on(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    chat = chat_with({SERVER: stdio()}, mcp_allow=[SERVER])
    model.enqueue(Reply(tool_calls=[call("c1", f"{SERVER}__crash")]), Reply(text="It crashed."))
    events = run(chat, "crash it")
    (row,) = tool_rows(events)
    assert row.startswith(f"The MCP server '{SERVER}' stopped while running 'crash' (it said: ")
    assert "about to crash" in row and row.endswith(
        "Its tools are no longer offered; tell the user."
    )
    (notice,) = notices(events)
    assert notice.startswith(
        f"The MCP server '{SERVER}' is no longer running: it stopped during a call of 'crash'"
    )
    after = {t["function"]["name"] for t in model.chat_requests()[-1]["tools"]}
    assert "read_file" in after and not any(name.startswith(SERVER) for name in after)
    assert notices(run(chat, "and now?")) == []  # said once
    assert saved(run(chat, "still there?"))[-1] == Row("assistant", "ok")


def test_a_call_that_hangs_past_the_time_limit_is_cancelled_and_the_server_still_answers(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    chat = chat_with({SERVER: stdio()}, mcp_allow=[SERVER], tool_timeout=2)
    model.enqueue(
        Reply(tool_calls=[call("c1", f"{SERVER}__hang")]),
        Reply(tool_calls=[call("c2", f"{SERVER}__add", a=20, b=22)]),
        Reply(text="done"),
    )
    assert tool_rows(run(chat, "wait for it")) == [
        f"'hang' of the MCP server '{SERVER}' did not answer within 2 s, so the call was "
        "cancelled. Ask for less at once, or raise NBCHAT_TOOL_TIMEOUT.",
        "42",
    ]


def test_stop_cancels_a_running_call_at_once(
    chat_with: Callable[..., Conversation], model: FakeServer, tmp_path: Path
) -> None:
    fifo = tmp_path / "hanging"
    os.mkfifo(fifo)
    server = stdio(env={"MCP_TEST_SIGNAL": str(fifo)})
    chat = chat_with({SERVER: server}, mcp_allow=[SERVER], tool_timeout=600)
    model.enqueue(Reply(tool_calls=[call("c1", f"{SERVER}__hang")]))
    stop = StopSignal()

    def press_stop_once_the_call_runs() -> None:
        with open(fifo) as running:  # blocks until the server's tool writes its line
            running.readline()
        stop.set()

    presser = threading.Thread(target=press_stop_once_the_call_runs, daemon=True)
    presser.start()
    events = run(chat, "wait for it", stop)
    presser.join()
    assert tool_rows(events) == [f"'hang' of the MCP server '{SERVER}' was stopped by the user."]
    assert any(isinstance(e, ToolStarted) for e in events)


def test_a_server_that_never_starts_gives_one_notice_and_the_chat_goes_on(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    quits = {
        "command": sys.executable,
        "args": ["-c", "import sys; print('no config found', file=sys.stderr); sys.exit(2)"],
    }
    servers = {"ghost": {"command": "no-such-mcp-server-here"}, "quits": quits, SERVER: stdio()}
    chat = chat_with(servers)
    events = run(chat, "hello")
    assert notices(events) == [
        "The MCP server 'ghost' did not start: its command 'no-such-mcp-server-here' was not "
        "found. Install it, or fix command (from argument). The chat goes on without its tools.",
        "The MCP server 'quits' closed the connection before the handshake (it said: no config "
        "found). The chat goes on without its tools.",
    ]
    assert saved(events)[-1] == Row("assistant", "ok")
    sent = {t["function"]["name"] for t in model.chat_requests()[-1]["tools"]}
    assert {"read_file", f"{SERVER}__add"} <= sent
    assert notices(run(chat, "again")) == []


def test_a_server_that_answers_its_handshake_with_garbage_is_named(
    chat_with: Callable[..., Conversation],
) -> None:
    babble = {
        "command": sys.executable,
        "args": ["-c", "import sys\nfor line in sys.stdin: print('hello, not json', flush=True)"],
    }
    chat = chat_with({"babble": babble}, mcp_start_timeout=3)
    events = run(chat, "try it")
    assert notices(events) == [
        "The MCP server 'babble' did not finish its start (the MCP handshake and the list of "
        "its tools) within 3 s (it wrote something that is not MCP: 'hello, not json'). Check "
        "that it runs, or raise NBCHAT_MCP_START_TIMEOUT. The chat goes on without its tools."
    ]
    assert saved(events)[-1] == Row("assistant", "ok")


def test_a_tool_result_that_is_garbage_is_named(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    chat = chat_with({"garbage": stdio("--garbage")}, mcp_allow=["garbage"])
    model.enqueue(Reply(tool_calls=[call("c1", "garbage__broken")]), Reply(text="done"))
    (row,) = tool_rows(run(chat, "try it"))
    assert row.startswith(
        "The MCP server 'garbage' answered 'broken' with something that is not a tool result "
        "nbchat can read (ValidationError: "
    )


def test_the_request_inspector_shows_the_mcp_schemas_that_were_sent(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    chat = chat_with({SERVER: stdio()})
    run(chat, "hi")
    inspected = chat.last_request()
    assert inspected is not None
    sent = model.chat_requests()[-1]["tools"]
    assert inspected.body["tools"] == sent
    listed = [part.label for part in inspected.parts if part.kind == "tool schema"]
    assert {f"tool: {SERVER}__{name}" for name in TOOLS} <= set(listed)


def test_secrets_reach_only_their_own_servers_process_and_never_the_store_or_an_export(
    chat_with: Callable[..., Conversation],
    model: FakeServer,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("B_SOURCE", "beta-secret-2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-kernel-secret-3")
    servers = {
        "a": stdio(env={"A_TOKEN": "alpha-secret-1"}),
        "b": stdio(env={"B_TOKEN": "${B_SOURCE}"}),
    }
    chat = chat_with(servers, mcp_allow=["a", "b"])
    asked = [("a", "A_TOKEN"), ("a", "B_TOKEN"), ("b", "B_TOKEN"), ("a", "OPENAI_API_KEY")]
    asked += [("a", "B_SOURCE")]
    calls = [call(f"c{i}", f"{s}__variable", name=n) for i, (s, n) in enumerate(asked)]
    model.enqueue(Reply(tool_calls=calls), Reply(text="done"))
    events = run(chat, "what did you get?")
    # A value that is a server's secret is replaced before the model sees it.
    assert tool_rows(events) == ["***", "unset", "***", "unset", "unset"]
    session = str(chat.session_id)
    exported = store.export_json(session) + store.export_markdown(session)
    inspected = json.dumps(chat.last_request().body)  # type: ignore[union-attr]
    chat.close()
    store.close()
    with closing(sqlite3.connect(store.path)) as db:
        (kept,) = db.execute("SELECT settings FROM sessions WHERE id = ?", (session,)).fetchone()
    assert json.loads(kept)["mcp_servers"] == {  # what is stored: names, never values
        "a": {"command": sys.executable, "env": ["A_TOKEN"]},
        "b": {"command": sys.executable, "env": ["B_TOKEN"]},
    }
    stored = b"".join(p.read_bytes() for p in store.path.parent.glob(store.path.name + "*"))
    for secret in ("alpha-secret-1", "beta-secret-2"):
        assert secret not in exported and secret not in inspected
        assert secret.encode() not in stored


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test server over streamable HTTP, wanting `Authorization: Bearer http-secret-4`."""
    env = {**os.environ, "MCP_TEST_TOKEN": "http-secret-4"}
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    try:
        yield process.stdout.readline().strip()
    finally:
        process.send_signal(signal.SIGKILL)  # a `hang` call would hold off SIGTERM
        process.wait()
        process.stdout.close()


def test_a_streamable_http_server_gets_its_headers_and_its_tools_work(
    chat_with: Callable[..., Conversation],
    model: FakeServer,
    store: Store,
    http_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEB_TOKEN", "http-secret-4")
    servers = {
        "web": {"url": http_server, "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}},
        "bare": {"type": "http", "url": http_server},
    }
    chat = chat_with(servers, mcp_allow=["web"])
    model.enqueue(
        Reply(
            tool_calls=[
                call("c1", "web__add", a=40, b=2),
                call("c2", "web__huge", size=200_000),
            ]
        ),
        Reply(text="done"),
    )
    events = run(chat, "over http")
    address = http_server.removesuffix("/mcp")
    assert notices(events) == [
        f"The MCP server 'bare' at {address} failed: MCPError: Server returned an error "
        "response (it answered HTTP 401). Check that it runs and its configuration (from "
        "argument). The chat goes on without its tools."
    ]
    added, huge = tool_rows(events)
    assert added == "42" and huge.startswith("0123456789") and len(huge) < 200_000
    chat.close()
    store.close()
    stored = b"".join(p.read_bytes() for p in store.path.parent.glob(store.path.name + "*"))
    assert b"http-secret-4" not in stored


def test_small_models_see_mcp_tools_in_their_first_step_and_the_budget_counts_what_is_sent(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    # A small model's chat requests carry no schemas (its first step names the tools and
    # chooses), so its budget counts the system prompt alone, MCP servers or not; where the
    # schemas travel in the body, the MCP ones count (the next test).
    chat = chat_with({SERVER: stdio()}, tools_on_request=True, json_tool_fallback=True)
    before = chat.budget.overhead_tokens()
    model.enqueue(Reply(first_step={"none": 0.9, f"{SERVER}__add": 0.1}), Reply(text="4"))
    run(chat, "what is 2 + 2?")
    (step,) = model.first_steps()
    assert f"- {SERVER}__add(a, b)" in step["messages"][0]["content"]
    assert step["messages"][-1] == {"role": "assistant", "content": FIRST_STEP_OPENING}
    schemas = chat.tools.schemas()
    assert any(s["function"]["name"] == f"{SERVER}__huge" for s in schemas)
    assert chat.budget.overhead_tokens() == before
    assert before == request_overhead_tokens(chat.budget.sent_prompt(), [])
    described = router_messages(schemas, [])[0]["content"]
    assert f"- {SERVER}__shout(text)" in described


def test_where_schemas_travel_in_the_body_the_budget_counts_the_mcp_ones(
    chat_with: Callable[..., Conversation], model: FakeServer
) -> None:
    chat = chat_with({SERVER: stdio()})
    before = chat.budget.overhead_tokens()  # the servers start with the first turn
    model.enqueue(Reply(text="4"))
    run(chat, "what is 2 + 2?")
    (body,) = model.chat_requests()
    sent = {schema["function"]["name"] for schema in body["tools"]}
    assert f"{SERVER}__huge" in sent
    after = chat.budget.overhead_tokens()
    assert after == request_overhead_tokens(chat.budget.sent_prompt(), body["tools"]) > before


def test_help_lists_the_mcp_tools_with_their_server(
    model: FakeServer, store: Store, make_settings: Callable[..., Settings]
) -> None:
    from helpers import shown_text

    from nbchat.ui import ChatUI

    settings = make_settings(base_url=model.url + "/v1", mcp_servers={SERVER: stdio()})
    client = openai.OpenAI(base_url=model.url + "/v1", api_key="test", max_retries=0)
    ui = ChatUI(settings, store=store, client=client)
    try:
        ui.send("/help")
        assert ui.wait(20)
        assert f"{SERVER}: starts with your next message" in shown_text(ui.messages.box)
        ui.send("hi")
        assert ui.wait(60)
        ui.send("/help")
        assert ui.wait(20)
        shown = shown_text(ui.messages.box)
    finally:
        ui.close()
    assert (
        f"{SERVER}__add — from the MCP server '{SERVER}', asks first under the 'ask' policy"
    ) in shown
    assert f"{SERVER}: 9 tools ({', '.join(f'{SERVER}__{t}' for t in TOOLS)})" in shown
    assert "run_shell — asks first" in shown and "read_file\n" in shown


def test_doctor_lists_each_server_and_whether_it_answers(
    home: Path, capsys: pytest.CaptureFixture[str], model: FakeServer
) -> None:
    from nbchat.cli.doctor import run_doctor

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'base_url = "{model.url}/v1"\n'
        f"[mcp_servers.{SERVER}]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SCRIPT))}]\nenv = {{ SOME_TOKEN = 'doctor-secret-5' }}\n"
        '[mcp_servers.ghost]\ncommand = "no-such-mcp-server-here"\n'
    )
    run_doctor(argparse.Namespace())
    out = capsys.readouterr().out
    assert f"✓ MCP server {SERVER} ({sys.executable}) answers: 9 tools" in out
    assert (
        "✗ The MCP server 'ghost' did not start: its command 'no-such-mcp-server-here' was not "
        f"found. Install it, or fix command (from {home / 'config.toml'})."
    ) in out
    assert "doctor-secret-5" not in out


def test_without_the_sdk_one_notice_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, make_settings: Callable[..., Settings]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    tools = McpTools(make_settings(mcp_servers={"a": stdio(), "b": stdio()}))
    registry = ToolRegistry()
    assert tools.start(registry) == [
        "MCP servers are configured (a, b) but the mcp package is not installed: "
        "pip install 'nbchat[mcp]'."
    ]
    assert tools.start(registry) == [] and len(registry) == 0


def test_the_kernels_exit_ends_a_server_that_outlives_its_input(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from nbchat.config import Settings\n"
        "from nbchat.tools.mcp import McpTools\n"
        "from nbchat.tools.registry import ToolRegistry\n"
        "from nbchat.tools.context import ToolContext\n"
        f"servers = {{'s': {{'command': sys.executable, 'args': [{str(SCRIPT)!r}, '--linger']}}}}\n"
        f"settings = Settings(home={str(tmp_path)!r}, workspace={str(tmp_path)!r}, "
        "base_url='http://127.0.0.1:9/v1', mcp_servers=servers)\n"
        "registry = ToolRegistry()\n"
        "McpTools(settings).start(registry)\n"
        f"context = ToolContext({str(tmp_path)!r})\n"
        "print(registry.get('s__pid').invoke({}, context), flush=True)\n"
    )  # and exits without closing anything
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    pid = int(done.stdout.strip())
    try:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        if done.returncode == 0:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_names_follow_openais_rule_and_long_ones_stay_apart() -> None:
    assert tool_name("my server", "files.read/all") == "my_server__files_read_all"
    long_a, long_b = (tool_name("s" * 40, "t" * 40 + end) for end in "ab")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b


def test_a_pattern_in_a_servers_schema_is_left_to_the_server() -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}, "n": {"type": "integer"}},
        "patternProperties": {"^(x+)+$": {"type": "string"}},
        "additionalProperties": False,
    }
    check = SchemaCheck.of(schema)
    hostile = "a" * 50_000 + "b"  # would backtrack for ages under Python's re
    assert check.problems({"code": hostile, "x" * 50_000 + "y": 1}) == []
    assert check.problems({"n": "1"}) == ["n: '1' is not of type 'integer'"]
    assert check.schema == schema  # sent to the model as the server gave it

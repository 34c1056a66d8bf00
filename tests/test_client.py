"""nbchat.llm.client against real HTTP: the fake OpenAI server (and a byte-level scripted one)
driven by the real `openai` client, as nbchat builds it."""

from __future__ import annotations

import json
import re
import select
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from fixtures_server import CHAT, Canned, ScriptedServer, chunk, client_for, settings_for

from nbchat.errors import ContextOverflowError, NbchatError, ServerError, ServerUnavailableError
from nbchat.history import ToolCall
from nbchat.llm.client import build_client, server_context_size, stream_chat
from nbchat.llm.reader import (
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    TextWithdrawn,
    ToolCallsReady,
    Usage,
)
from nbchat.llm.servererrors import translate_error
from nbchat.stopping import StopSignal
from nbchat.tools import Tool, ToolRegistry

MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "What is in this notebook?"}]
CALL_ID = re.compile(r"^call_[0-9a-f]{12}$")
READ_FILE_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    },
}


def read_file(path: str) -> str:
    """Read a file."""
    return path


# The check the conversation hands the JSON fallback: the registry's, for the same read_file.
ARGUMENT_CHECK = ToolRegistry([Tool.from_function(read_file)]).accepts


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def client(fake: FakeServer, tmp_path: Path) -> Iterator[openai.OpenAI]:
    with client_for(fake.url, tmp_path) as real_client:
        yield real_client


def collect(client: openai.OpenAI, **options: Any) -> list[StreamEvent]:
    if options.get("json_tool_fallback"):
        options.setdefault("check_arguments", ARGUMENT_CHECK)
    return list(stream_chat(client, MESSAGES, model="test-model", **options))


def texts(events: list[StreamEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


def test_a_plain_reply_arrives_as_text_deltas_then_usage_then_finish(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(text="Hello there", chunk_size=4, usage=(12, 3)))
    events = collect(client)
    assert events == [
        TextDelta("Hell"),
        TextDelta("o th"),
        TextDelta("ere"),
        Usage(12, 3),
        Finish("stop"),
    ]
    request = fake.chat_requests()[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["model"] == "test-model"
    assert "tools" not in request


def test_reasoning_content_arrives_as_reasoning_deltas_before_the_reply(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(reasoning="Think first", text="Done", chunk_size=6, usage=(1, 2)))
    events = collect(client)
    assert events == [
        ReasoningDelta("Think "),
        ReasoningDelta("first"),
        TextDelta("Done"),
        Usage(1, 2),
        Finish("stop"),
    ]


def test_a_reasoning_field_is_read_like_reasoning_content(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning": "Hmm."}),
        chunk({"content": "Yes."}),
        chunk(finish="stop"),
        "[DONE]",
    ]
    scripted.add(CHAT, Canned(events=events))
    with client_for(scripted.url, tmp_path) as client:
        assert collect(client) == [ReasoningDelta("Hmm."), TextDelta("Yes."), Finish("stop")]


def test_interleaved_tool_call_fragments_are_assembled_in_index_order(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    calls = [
        ("call_a", "read_file", '{"path": "notes/a.txt"}'),
        ("call_b", "list_files", '{"path": ".", "pattern": "*.py"}'),
    ]
    fake.enqueue(Reply(tool_calls=calls, interleave=True, chunk_size=3, usage=(5, 5)))
    events = collect(client, tools=[READ_FILE_TOOL])
    assert events == [
        ToolCallsReady(
            (
                ToolCall("call_a", "read_file", '{"path": "notes/a.txt"}'),
                ToolCall("call_b", "list_files", '{"path": ".", "pattern": "*.py"}'),
            )
        ),
        Usage(5, 5),
        Finish("tool_calls"),
    ]
    assert fake.chat_requests()[0]["tools"] == [READ_FILE_TOOL]


def test_a_tool_call_without_an_id_gets_a_generated_one(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(tool_calls=[("", "read_file", '{"path": "a"}')]))
    ready = [event for event in collect(client) if isinstance(event, ToolCallsReady)]
    assert len(ready) == 1
    (call,) = ready[0].calls
    assert CALL_ID.match(call.id)
    assert (call.name, call.arguments) == ("read_file", '{"path": "a"}')


def test_a_server_that_ignores_include_usage_gives_no_usage_event(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    events = [chunk({"content": "Hi"}), chunk(finish="stop"), "[DONE]"]
    scripted.add(CHAT, Canned(events=events))
    with client_for(scripted.url, tmp_path) as client:
        assert collect(client) == [TextDelta("Hi"), Finish("stop")]


def test_a_chunk_with_empty_choices_in_the_middle_is_skipped(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    events = [
        chunk({"content": "a"}),
        chunk(choices=False),
        chunk({"content": "b"}),
        chunk(finish="length"),
        chunk(choices=False, usage={"prompt_tokens": 7, "completion_tokens": 2}),
        "[DONE]",
    ]
    scripted.add(CHAT, Canned(events=events))
    with client_for(scripted.url, tmp_path) as client:
        assert collect(client) == [TextDelta("a"), TextDelta("b"), Usage(7, 2), Finish("length")]


def test_repeated_ids_and_names_in_fragments_are_not_doubled(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    head = {"index": 0, "id": "c1", "type": "function"}
    events = [
        chunk({"tool_calls": [{**head, "function": {"name": "read_file", "arguments": ""}}]}),
        chunk({"tool_calls": [{**head, "function": {"name": "read_file", "arguments": '{"p'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ath": "x"}'}}]}),
        chunk(finish="tool_calls"),
        "[DONE]",
    ]
    scripted.add(CHAT, Canned(events=events))
    with client_for(scripted.url, tmp_path) as client:
        assert collect(client) == [
            ToolCallsReady((ToolCall("c1", "read_file", '{"path": "x"}'),)),
            Finish("tool_calls"),
        ]


def test_stop_set_from_another_thread_ends_the_reply_within_a_chunk(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(text="x" * 200, chunk_size=1, delay=0.02))
    stop = threading.Event()
    first_delta = threading.Event()
    stopper = threading.Thread(target=lambda: first_delta.wait(10) and stop.set())
    stopper.start()
    events: list[StreamEvent] = []
    after_stop = 0
    for event in stream_chat(client, MESSAGES, model="m", stop=stop):
        if stop.is_set() and isinstance(event, TextDelta):
            after_stop += 1
        events.append(event)
        first_delta.set()
    stopper.join()
    assert events[-1] == Finish("stopped")
    assert after_stop <= 1
    assert 1 <= len(texts(events)) < 200


@pytest.mark.timeout(10)
def test_a_stop_signal_releases_a_read_blocked_on_a_stalled_server(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(text="hello world", fault="stall", stall_after=2))
    stop = StopSignal()
    first_delta = threading.Event()
    stopper = threading.Thread(target=lambda: first_delta.wait(10) and stop.set())
    stopper.start()
    events: list[StreamEvent] = []
    for event in stream_chat(client, MESSAGES, model="m", stop=stop):
        events.append(event)
        first_delta.set()
    stopper.join()
    assert events == [TextDelta("hell"), Finish("stopped")]


def test_a_stop_set_before_the_request_sends_nothing(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    stop = StopSignal()
    stop.set()
    assert collect(client, stop=stop) == [Finish("stopped")]
    assert fake.chat_requests() == []


def test_a_closed_port_is_reported_as_no_model_server(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.down()
    with pytest.raises(ServerUnavailableError) as caught:
        collect(client)
    # What to do depends on where the URL came from: the chat's budget says it (test_cli).
    assert str(caught.value) == f"No model server answers at {fake.url}/v1."


def test_an_unexpected_failure_says_what_to_do_without_sending_to_doctor() -> None:
    # `nbchat doctor` prints these messages itself: "run nbchat doctor" there goes in a circle.
    error = translate_error(RuntimeError("boom"), base_url="http://127.0.0.1:9/v1")
    assert str(error) == (
        "The request to the model server at http://127.0.0.1:9/v1 failed: RuntimeError: boom. "
        "Retry; if it keeps failing, check the server and its log."
    )


def test_a_500_keeps_the_servers_message_and_status(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(fault="http500"))
    with pytest.raises(ServerError) as caught:
        collect(client)
    assert caught.value.status == 500
    assert str(caught.value) == (
        f"The model server at {fake.url}/v1 answered with an error (500: Injected internal "
        "server error). Check the model name and the server's log, then retry."
    )


def test_a_429_says_to_wait_and_retry(fake: FakeServer, client: openai.OpenAI) -> None:
    fake.enqueue(Reply(fault="http429"))
    with pytest.raises(ServerError) as caught:
        collect(client)
    assert caught.value.status == 429
    assert str(caught.value) == (
        f"The model server at {fake.url}/v1 is rate limiting requests (429: Injected rate "
        "limit). Wait a moment, then retry."
    )


def test_a_500_before_any_token_is_retried_by_the_built_client(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.enqueue(Reply(fault="http500"), Reply(text="second try"))
    with build_client(settings_for(fake.url, tmp_path)) as client:
        assert texts(collect(client)) == "second try"
    assert len(fake.chat_requests()) == 2


def test_a_cut_stream_raises_after_the_deltas_that_arrived(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(text="abcdefghij", chunk_size=2, fault="cut", cut_after=3))
    events: list[StreamEvent] = []
    with pytest.raises(ServerError) as caught:
        for event in stream_chat(client, MESSAGES, model="m"):
            events.append(event)
    assert events == [TextDelta("ab"), TextDelta("cd")]
    message = str(caught.value)
    assert message.startswith(
        f"The model server at {fake.url}/v1 broke off the stream before the reply was complete ("
    )
    assert message.endswith("). The partial reply was kept; retry for a complete one.")


def test_a_stream_that_ends_without_a_finish_reason_counts_as_cut(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    scripted.add(CHAT, Canned(events=[chunk({"content": "Half"}), "[DONE]"]))
    events: list[StreamEvent] = []
    with client_for(scripted.url, tmp_path) as client, pytest.raises(ServerError) as caught:
        events.extend(stream_chat(client, MESSAGES, model="m"))
    assert events == [TextDelta("Half")]
    assert str(caught.value) == (
        f"The model server at {scripted.url}/v1 ended the stream before the reply was complete."
        " The partial reply was kept; retry for a complete one."
    )


def test_an_error_event_inside_the_stream_keeps_the_servers_message(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    error = {"error": {"message": "slot unavailable", "type": "server_error", "code": 503}}
    scripted.add(CHAT, Canned(events=[chunk({"content": "So"}), error]))
    events: list[StreamEvent] = []
    with client_for(scripted.url, tmp_path) as client, pytest.raises(ServerError) as caught:
        events.extend(stream_chat(client, MESSAGES, model="m"))
    assert events == [TextDelta("So")]
    assert str(caught.value) == (
        f"The model server at {scripted.url}/v1 answered with an error (slot unavailable). "
        "Check the model name and the server's log, then retry. "
        "The partial reply was kept; retry for a complete one."
    )


def test_a_stream_event_that_is_not_json_is_a_server_error(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    scripted.add(CHAT, Canned(events=[chunk({"content": "Par"}), "{not json"]))
    events: list[StreamEvent] = []
    with client_for(scripted.url, tmp_path) as client, pytest.raises(ServerError) as caught:
        events.extend(stream_chat(client, MESSAGES, model="m"))
    assert events == [TextDelta("Par")]
    assert str(caught.value) == (
        f"The model server at {scripted.url}/v1 sent a stream that is not valid JSON. "
        "The partial reply was kept; retry for a complete one."
    )


def test_a_read_timeout_says_the_server_stopped_answering(fake: FakeServer, tmp_path: Path) -> None:
    fake.enqueue(Reply(text="slow", fault="stall", stall_after=0))
    with (
        client_for(fake.url, tmp_path, request_timeout=0.2) as client,
        pytest.raises(ServerError) as caught,
    ):
        collect(client)
    assert str(caught.value) == (
        f"The model server at {fake.url}/v1 stopped answering in the middle of the reply (the "
        "read timed out). Nothing had arrived yet; retry, and check the server's log if it "
        "happens again."
    )


@pytest.mark.parametrize("fault", ["overflow_llama", "overflow_openai"])
def test_both_overflow_shapes_become_context_overflow_with_sizes(
    fake: FakeServer, client: openai.OpenAI, fault: str
) -> None:
    fake.enqueue(Reply(fault=fault, n_ctx=4096, n_prompt_tokens=6041))  # type: ignore[arg-type]
    with pytest.raises(ContextOverflowError) as caught:
        collect(client)
    assert (caught.value.prompt_tokens, caught.value.context_size) == (6041, 4096)
    assert str(caught.value).startswith(
        "The conversation is too long for the model's context window (6,041 tokens; the window "
        "holds 4,096). Compact the history or start a new session. The server said: "
    )


def test_a_server_side_context_window_rejects_before_generation(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.configure(context_window=5)
    with pytest.raises(ContextOverflowError) as caught:
        collect(client)
    assert (caught.value.prompt_tokens, caught.value.context_size) == (6, 5)


@pytest.mark.parametrize(
    ("message", "prompt_tokens", "context_size"),
    [
        (
            "This model's maximum context length is 2048 tokens. However, you requested 2100 "
            "tokens (2000 in the messages, 100 in the completion).",
            2000,
            2048,
        ),
        ("prompt is too long: 250000 tokens > 200000 maximum", 250000, 200000),
        ("Input has too many tokens for this model", None, None),
        ("context length exceeded", None, None),
    ],
)
def test_overflow_messages_from_other_servers_are_recognised(
    scripted: ScriptedServer,
    tmp_path: Path,
    message: str,
    prompt_tokens: int | None,
    context_size: int | None,
) -> None:
    scripted.add(CHAT, Canned(400, {"error": {"message": message, "type": "invalid_request"}}))
    with (
        client_for(scripted.url, tmp_path) as client,
        pytest.raises(ContextOverflowError) as caught,
    ):
        collect(client)
    assert (caught.value.prompt_tokens, caught.value.context_size) == (prompt_tokens, context_size)
    assert str(caught.value).endswith(f"The server said: {message}")


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_says_to_set_nbchat_api_key_without_showing_it(
    scripted: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    monkeypatch.setenv("NBCHAT_API_KEY", "sk-MARKER-1234")
    echo = {"error": {"message": "Incorrect API key provided: sk-MARKER-1234.", "code": status}}
    scripted.add(CHAT, Canned(status, echo))
    with client_for(scripted.url, tmp_path) as client, pytest.raises(ServerError) as caught:
        collect(client)
    assert scripted.requests[0][1]["authorization"] == "Bearer sk-MARKER-1234"
    assert str(caught.value) == (
        f"The model server at {scripted.url}/v1 refused the API key ({status}: Incorrect API "
        "key provided: ***.). Set NBCHAT_API_KEY to a key this server accepts."
    )


@pytest.mark.parametrize(
    "reply",
    [
        Reply(fault="http500"),
        Reply(fault="http429"),
        Reply(fault="overflow_llama"),
        Reply(text="abcdef", fault="cut", cut_after=2),
        Reply(fault="drop"),
    ],
)
def test_the_api_key_never_appears_in_an_error_message(
    fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reply: Reply
) -> None:
    monkeypatch.setenv("NBCHAT_API_KEY", "sk-MARKER-5678")
    fake.enqueue(reply)
    with client_for(fake.url, tmp_path) as client, pytest.raises(NbchatError) as caught:
        collect(client)
    assert fake.requests[0].headers["authorization"] == "Bearer sk-MARKER-5678"
    assert "MARKER" not in str(caught.value)
    assert "MARKER" not in repr(caught.value)


def test_build_client_uses_the_settings_timeouts_key_and_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBCHAT_API_KEY", "sk-from-env")
    settings = settings_for("http://127.0.0.1:9", tmp_path, request_timeout=42, connect_timeout=3)
    with build_client(settings, base_url="http://127.0.0.1:8/v1") as client:
        assert str(client.base_url) == "http://127.0.0.1:8/v1/"
        assert client.api_key == "sk-from-env"
        assert client.max_retries == 2
        assert isinstance(client.timeout, openai.Timeout)
        assert (client.timeout.connect, client.timeout.read) == (3, 42)


def test_build_client_without_any_url_says_how_to_get_a_server(tmp_path: Path) -> None:
    settings = settings_for("http://127.0.0.1:9", tmp_path).replace(base_url=None)
    with pytest.raises(ServerUnavailableError) as caught:
        build_client(settings)
    assert str(caught.value) == (
        "No model server URL is known yet: start the embedded one with `nbchat serve-model` "
        "or set NBCHAT_BASE_URL."
    )


def test_server_context_size_is_none_without_props(fake: FakeServer, client: openai.OpenAI) -> None:
    assert server_context_size(client) is None


@pytest.mark.parametrize(
    ("props", "size"),
    [
        ({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}, 2048),
        ({"n_ctx": 4096}, 4096),
        ({"default_generation_settings": {}}, None),
    ],
)
def test_server_context_size_reads_llama_cpp_props(
    scripted: ScriptedServer, tmp_path: Path, props: dict[str, Any], size: int | None
) -> None:
    scripted.add("/props", Canned(body=props))
    with client_for(scripted.url, tmp_path) as client:
        assert server_context_size(client) == size


def test_server_context_size_is_none_when_no_server_answers(tmp_path: Path) -> None:
    with FakeServer() as fake:
        url = fake.url
    with client_for(url, tmp_path) as client:
        assert server_context_size(client) is None


FALLBACK_CALL = '{"name": "read_file", "arguments": {"path": "a.txt"}}'


@pytest.mark.parametrize(
    "text",
    [
        FALLBACK_CALL,
        f"  {FALLBACK_CALL}\n",
        f"```json\n{FALLBACK_CALL}\n```",
        f"```\n{FALLBACK_CALL}\n```",
        f"<tool_call>\n{FALLBACK_CALL}\n</tool_call>",
        '{"name": "read_file", "parameters": {"path": "a.txt"}}',
        f"{FALLBACK_CALL} Done.",
    ],
)
def test_the_json_fallback_turns_a_json_call_into_a_tool_call_and_stops_there(
    fake: FakeServer, client: openai.OpenAI, text: str
) -> None:
    # chunk_size 1: the stream is closed at the call's last brace, before what follows it (a
    # closing fence, a tag, junk) and before the finish and usage chunks.
    fake.enqueue(Reply(text=text, chunk_size=1, usage=(1, 1)))
    events = collect(client, tools=[READ_FILE_TOOL], json_tool_fallback=True)
    assert texts(events) == text[: text.index("}}") + 2]  # shown as it streamed
    *deltas, ready, finish = events
    assert all(isinstance(delta, TextDelta) for delta in deltas)
    assert isinstance(ready, ToolCallsReady)
    assert ready.from_content is True
    (call,) = ready.calls
    assert CALL_ID.match(call.id)
    assert (call.name, call.parsed_arguments()) == ("read_file", {"path": "a.txt"})
    assert finish == Finish("stop")


@pytest.mark.parametrize(
    "text",
    [
        f"Sure! {FALLBACK_CALL}",
        '{"name": "read_file", "arguments": {"path": "a"}, "id": 1}',
        "{not json at all",
        '{"path": "a.txt"}',
        "```python\nprint('hi')\n```",
    ],
)
def test_the_json_fallback_delivers_anything_else_intact_as_text(
    fake: FakeServer, client: openai.OpenAI, text: str
) -> None:
    fake.enqueue(Reply(text=text, chunk_size=5, usage=(1, 1)))
    events = collect(client, tools=[READ_FILE_TOOL], json_tool_fallback=True)
    assert texts(events) == text
    assert not [event for event in events if isinstance(event, ToolCallsReady)]
    assert events[-2:] == [Usage(1, 1), Finish("stop")]
    assert len(fake.chat_requests()) == 1  # not call-shaped: no second chance


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '{"name": "open_file", "arguments": {"path": "a.txt"}}',
            "There is no tool named 'open_file'. Its arguments fit 'read_file'.",
        ),
        (
            '{"name": "read_file", "arguments": {"path": 3}}',
            "The arguments of 'read_file' did not fit its parameters (path).",
        ),
        (
            '{"name": "read_file", "arguments": "a.txt"}',
            "The arguments of 'read_file' did not fit its parameters (path).",
        ),
    ],
)
def test_a_call_that_does_not_validate_gets_one_forced_second_chance(
    fake: FakeServer, client: openai.OpenAI, text: str, problem: str
) -> None:
    fake.enqueue(Reply(text=text, chunk_size=5), Reply(text=FALLBACK_CALL, chunk_size=5))
    events = collect(client, tools=[READ_FILE_TOOL], json_tool_fallback=True)
    assert texts(events) == text + FALLBACK_CALL  # both attempts streamed as they came
    (ready,) = [event for event in events if isinstance(event, ToolCallsReady)]
    assert ready.from_content is True  # the consumer drops the text and shows the call
    assert [(c.name, c.parsed_arguments()) for c in ready.calls] == [
        ("read_file", {"path": "a.txt"})
    ]
    assert [e for e in events if isinstance(e, Finish)] == [Finish("stop")]
    first, second = fake.chat_requests()
    assert "response_format" not in first
    assert second["messages"][-2:] == [
        {"role": "assistant", "content": text},
        {
            "role": "user",
            "content": f"{problem} Call one of these tools instead:\n- read_file: Read a file.",
        },
    ]
    schema = second["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["name"] == {"const": "read_file"}


def test_a_second_chance_that_fails_too_is_text(fake: FakeServer, client: openai.OpenAI) -> None:
    wrong = '{"name": "nope", "arguments": {}}'
    fake.enqueue(Reply(text=wrong), Reply(text="I cannot do that."))
    events = collect(client, tools=[READ_FILE_TOOL], json_tool_fallback=True)
    assert texts(events) == wrong + "I cannot do that."
    assert not [event for event in events if isinstance(event, ToolCallsReady)]
    assert len(fake.chat_requests()) == 2  # one second chance, never a loop


def test_text_that_does_not_open_like_a_call_streams_normally_with_the_fallback_on(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(text="Plain words here", chunk_size=5, usage=(1, 1)))
    events = collect(client, tools=[READ_FILE_TOOL], json_tool_fallback=True)
    assert events == [
        TextDelta("Plain"),
        TextDelta(" word"),
        TextDelta("s her"),
        TextDelta("e"),
        Usage(1, 1),
        Finish("stop"),
    ]


def test_without_the_fallback_a_call_written_as_json_is_still_the_call(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    # Any server: the whole reply, a tool that exists, arguments it accepts (issue 19).
    fake.enqueue(Reply(text=FALLBACK_CALL, chunk_size=100, usage=(1, 1)))
    events = collect(client, tools=[READ_FILE_TOOL])
    (ready,) = [event for event in events if isinstance(event, ToolCallsReady)]
    assert ready.from_content and ready.calls[0].name == "read_file"
    assert "response_format" not in fake.chat_requests()[0]


def test_a_call_of_a_tool_that_fits_nothing_is_withdrawn_and_asked_again_for_words(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    wrong = '{"name": "multiply", "arguments": {"a": 17, "b": 23}}'
    fake.enqueue(Reply(text=wrong), Reply(text="391"))
    events = collect(client, tools=[READ_FILE_TOOL])
    withdrawn = events.index(TextWithdrawn("the tool call came out as text"))
    assert "".join(e.text for e in events[:withdrawn] if isinstance(e, TextDelta)) == wrong
    assert "".join(e.text for e in events[withdrawn:] if isinstance(e, TextDelta)) == "391"
    _first, second = fake.chat_requests()
    assert second["tool_choice"] == "none" and "grammar" not in second
    assert second["messages"][-1]["content"] == (
        "There is no tool named 'multiply', and none is needed for that: answer the user "
        "directly, in words."
    )


FORCED_READ_FILE = {
    "type": "object",
    "properties": {
        "name": {"const": "read_file"},
        "arguments": READ_FILE_TOOL["function"]["parameters"],  # type: ignore[index]
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}


def test_a_forced_tool_is_asked_for_as_json_content_when_the_fallback_is_on(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(text=FALLBACK_CALL, chunk_size=5, usage=(1, 1)))
    events = collect(
        client, tools=[READ_FILE_TOOL], json_tool_fallback=True, tool_choice="read_file"
    )
    (body,) = fake.chat_requests()
    assert "tool_choice" not in body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "tool_call", "schema": FORCED_READ_FILE},
    }
    (ready,) = [event for event in events if isinstance(event, ToolCallsReady)]
    assert [call.name for call in ready.calls] == ["read_file"]


def test_required_with_the_fallback_on_allows_a_call_of_any_offered_tool(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    other = {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}
    fake.enqueue(Reply(text=FALLBACK_CALL, usage=(1, 1)))
    collect(client, tools=[READ_FILE_TOOL, other], json_tool_fallback=True, tool_choice="required")
    (body,) = fake.chat_requests()
    calls = body["response_format"]["json_schema"]["schema"]["anyOf"]
    assert [call["properties"]["name"] for call in calls] == [
        {"const": "read_file"},
        {"const": "now"},
    ]
    assert "tool_choice" not in body


@pytest.mark.parametrize(
    ("choice", "fallback", "sent"),
    [
        ("read_file", False, {"type": "function", "function": {"name": "read_file"}}),
        ("auto", True, "auto"),
        ("none", True, "none"),
    ],
)
def test_tool_choice_is_sent_as_is_when_nothing_is_forced_through_the_fallback(
    fake: FakeServer, client: openai.OpenAI, choice: str, fallback: bool, sent: object
) -> None:
    fake.enqueue(Reply(text="ok", usage=(1, 1)))
    collect(client, tools=[READ_FILE_TOOL], json_tool_fallback=fallback, tool_choice=choice)
    (body,) = fake.chat_requests()
    assert body["tool_choice"] == sent
    assert "response_format" not in body


@pytest.mark.timeout(60)
@pytest.mark.parametrize("opening", ['{"name": "read_file"', "```json\n{", "<tool_call>\n{"])
def test_text_that_may_become_a_call_is_shown_before_the_stream_ends(
    fake: FakeServer, client: openai.OpenAI, opening: str
) -> None:
    # The server sends the opening, then nothing: a held-back reply would show nothing at all
    # until the stream ended (issue 12: 17 silent minutes). The timer only ends the old code's
    # wait; it is never what the assertion measures.
    fake.enqueue(Reply(text=opening, chunk_size=len(opening), fault="stall", stall_after=2))
    stop = StopSignal()
    safety_net = threading.Timer(30, stop.set)
    safety_net.start()
    seen: list[tuple[StreamEvent, bool]] = []
    try:
        for event in stream_chat(
            client, MESSAGES, model="m", tools=[READ_FILE_TOOL], json_tool_fallback=True, stop=stop
        ):
            seen.append((event, stop.is_set()))
            stop.set()  # the first event is all this test needs
    finally:
        safety_net.cancel()
    assert seen[0] == (TextDelta(opening), False)
    assert seen[-1] == (Finish("stopped"), True)


def test_text_that_may_be_a_call_is_kept_as_text_when_the_stream_breaks(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(text='{"name": "read_file", "arguments"', fault="cut", cut_after=3))
    events: list[StreamEvent] = []
    with pytest.raises(ServerError):
        for event in stream_chat(
            client, MESSAGES, model="m", tools=[READ_FILE_TOOL], json_tool_fallback=True
        ):
            events.append(event)
    assert events == [TextDelta('{"na'), TextDelta('me":')]


def test_a_connection_dropped_before_any_answer_is_a_server_error(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    fake.enqueue(Reply(fault="drop"))
    with pytest.raises(ServerError) as caught:
        collect(client)
    assert str(caught.value).startswith(
        f"The connection to the model server at {fake.url}/v1 broke before it answered ("
    )
    assert str(caught.value).endswith("). Retry; if it keeps happening, check the server's log.")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            "{",
            "the arguments of the call to 'f' are not valid JSON (Expecting property name "
            "enclosed in double quotes: line 1 column 2 (char 1))",
        ),
        ("[1]", "the arguments of the call to 'f' must be a JSON object, got list"),
    ],
)
def test_parsed_arguments_says_what_is_wrong(arguments: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ToolCall("c", "f", arguments).parsed_arguments()
    assert str(caught.value) == message


def test_a_tool_call_goes_on_the_wire_in_openai_shape() -> None:
    call = ToolCall("call_1", "read_file", '{"path": "a"}')
    assert call.to_wire() == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a"}'},
    }
    assert ToolCall("c", "f", "").parsed_arguments() == {}


class _CallThenJunk(BaseHTTPRequestHandler):
    """Streams a whole call, then waits: it would send junk forever, but first checks for the
    client hanging up. `hung_up` is set when the client closed the connection."""

    protocol_version = "HTTP/1.1"
    hung_up = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test's output is its own."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in (FALLBACK_CALL[:20], FALLBACK_CALL[20:], " and then some junk"):
            self._send(chunk({"content": piece}))
        # The client must hang up now: wait for its EOF (a bounded wait, not a poll).
        readable, _, _ = select.select([self.connection], [], [], 30)
        try:
            hung_up = bool(readable) and not self.connection.recv(1)
        except ConnectionResetError:
            # Closing a socket with the junk still unread in its buffer sends a reset, not an
            # EOF: that is hanging up too.
            hung_up = True
        if hung_up:
            type(self).hung_up.set()
        self.close_connection = True

    def _send(self, event: dict[str, Any]) -> None:
        payload = f"data: {json.dumps(event)}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()


def test_the_stream_is_closed_once_the_json_call_is_whole(tmp_path: Path) -> None:
    # The server never ends this reply by itself: the call must end it.
    _CallThenJunk.hung_up.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _CallThenJunk)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        with client_for(url, tmp_path) as client:
            events = collect(client, tools=[READ_FILE_TOOL], json_tool_fallback=True)
        hung_up = _CallThenJunk.hung_up.wait(timeout=30)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
    assert texts(events) == FALLBACK_CALL  # the junk after the call was never read
    (ready,) = [event for event in events if isinstance(event, ToolCallsReady)]
    assert [(c.name, c.parsed_arguments()) for c in ready.calls] == [
        ("read_file", {"path": "a.txt"})
    ]
    assert events[-1] == Finish("stop")
    assert hung_up  # the server saw the connection closed: the model is not left generating


def test_a_missing_tool_whose_arguments_fit_one_offered_tool_is_told_so(
    fake: FakeServer, client: openai.OpenAI
) -> None:
    # A 0.5B model writes `replace_text` with edit_file's very arguments.
    edit = {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": "Change a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {}, "old": {}, "new": {}},
                "required": ["path", "old", "new"],
            },
        },
    }
    wrong = '{"name": "replace_text", "arguments": {"path": "a", "old": "x", "new": "y"}}'
    fake.enqueue(Reply(text=wrong), Reply(text=FALLBACK_CALL))
    collect(client, tools=[READ_FILE_TOOL, edit], json_tool_fallback=True)
    note = fake.chat_requests()[1]["messages"][-1]["content"]
    assert note.splitlines()[0] == (
        "There is no tool named 'replace_text'. Its arguments fit 'edit_file'. "
        "Call one of these tools instead:"
    )

"""The fake OpenAI-compatible server, driven by the real `openai` client over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, RecordedRequest, Reply, start_fakeserver_process
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
)

MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is in this notebook?"}  # 25 characters
]
LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "request (6041 tokens) exceeds the available context size (4096 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 6041,
        "n_ctx": 4096,
    }
}
OPENAI_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, your messages "
        "resulted in 6041 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


def make_client(url: str, **options: Any) -> openai.OpenAI:
    # No retries: each scripted reply answers exactly one attempt.
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, **options)


@pytest.fixture
def client(server: FakeServer) -> Iterator[openai.OpenAI]:
    with make_client(server.url) as real_client:
        yield real_client


def stream_chat(client: openai.OpenAI, **options: Any) -> list[ChatCompletionChunk]:
    stream = client.chat.completions.create(model="fake", messages=MESSAGES, stream=True, **options)
    return list(stream)


def text_of(chunks: list[ChatCompletionChunk]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_streamed_text_assembles_from_small_chunks(
    server: FakeServer, client: openai.OpenAI
) -> None:
    server.enqueue(Reply(text="Hello from the fake server", chunk_size=5))
    chunks = stream_chat(client)
    choice_chunks = [chunk for chunk in chunks if chunk.choices]
    assert text_of(chunks) == "Hello from the fake server"
    assert len([c for c in choice_chunks if c.choices[0].delta.content]) == 6
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    assert [c.choices[0].finish_reason for c in choice_chunks][-2:] == [None, "stop"]
    assert choice_chunks[0].choices[0].delta.role == "assistant"


def test_reasoning_deltas_arrive_before_text(server: FakeServer, client: openai.OpenAI) -> None:
    server.enqueue(Reply(text="The answer", reasoning="Let me think", chunk_size=3))
    kinds = []
    reasoning = ""
    for chunk in stream_chat(client):
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        if extra.get("reasoning_content"):
            kinds.append("reasoning")
            reasoning += delta.reasoning_content  # type: ignore[attr-defined]  # an extra field
        elif delta.content:
            kinds.append("text")
    assert reasoning == "Let me think"
    assert kinds == ["reasoning"] * 4 + ["text"] * 4


def test_interleaved_tool_calls_reassemble_by_index(
    server: FakeServer, client: openai.OpenAI
) -> None:
    calls = [("call_a", "read_file", '{"path": "notes.md"}'), ("call_b", "run", '{"cmd": "ls"}')]
    server.enqueue(Reply(tool_calls=calls, interleave=True, chunk_size=4))
    chunks = stream_chat(client)
    assembled: dict[int, dict[str, str]] = {}
    order = []
    for chunk in chunks:
        for call in chunk.choices[0].delta.tool_calls or []:
            order.append(call.index)
            entry = assembled.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            assert call.function is not None
            entry["id"] += call.id or ""
            entry["name"] += call.function.name or ""
            entry["arguments"] += call.function.arguments or ""
    assert assembled == {
        0: {"id": "call_a", "name": "read_file", "arguments": '{"path": "notes.md"}'},
        1: {"id": "call_b", "name": "run", "arguments": '{"cmd": "ls"}'},
    }
    assert order[:6] == [0, 1, 0, 1, 0, 1]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_usage_chunk_comes_only_with_include_usage(
    server: FakeServer, client: openai.OpenAI
) -> None:
    server.enqueue(Reply(text="x" * 41), Reply(text="x" * 41))
    without = stream_chat(client)
    with_usage = stream_chat(client, stream_options={"include_usage": True})
    assert [chunk.usage for chunk in without] == [None] * len(without)
    assert with_usage[-1].choices == []
    assert with_usage[-1].usage is not None
    assert with_usage[-1].usage.model_dump(exclude_none=True) == {
        "prompt_tokens": 6,  # 25 characters // 4, not // 3
        "completion_tokens": 10,
        "total_tokens": 16,
    }


def test_prompt_tokens_count_tool_call_arguments_and_explicit_usage_wins(
    server: FakeServer, client: openai.OpenAI
) -> None:
    call: ChatCompletionMessageFunctionToolCallParam = {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "a" * 15},
    }
    messages: list[ChatCompletionMessageParam] = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    server.enqueue(Reply(text="ok"), Reply(text="ok", usage=(1234, 56)))
    computed = client.chat.completions.create(model="fake", messages=messages)
    explicit = client.chat.completions.create(model="fake", messages=MESSAGES)
    assert computed.usage is not None
    assert explicit.usage is not None
    assert computed.usage.prompt_tokens == (25 + 15) // 4
    assert (explicit.usage.prompt_tokens, explicit.usage.completion_tokens) == (1234, 56)


def test_non_streaming_reply_carries_message_tool_calls_and_usage(
    server: FakeServer, client: openai.OpenAI
) -> None:
    server.enqueue(Reply(text="Done", reasoning="hmm", tool_calls=[("c1", "ls", "{}")]))
    completion = client.chat.completions.create(model="fake", messages=MESSAGES)
    message = completion.choices[0].message
    assert message.content == "Done"
    assert (message.model_extra or {})["reasoning_content"] == "hmm"
    calls = [
        c for c in message.tool_calls or [] if isinstance(c, ChatCompletionMessageFunctionToolCall)
    ]
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [("c1", "ls", "{}")]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage is not None
    assert completion.usage.total_tokens == 25 // 4 + 9 // 4


@pytest.mark.parametrize(
    ("fault", "error_type", "status"),
    [("http500", openai.InternalServerError, 500), ("http429", openai.RateLimitError, 429)],
)
def test_http_faults_raise_status_errors(
    server: FakeServer,
    client: openai.OpenAI,
    fault: Any,
    error_type: type[openai.APIStatusError],
    status: int,
) -> None:
    server.enqueue(Reply(text="never sent", fault=fault, retry_after=7))
    with pytest.raises(error_type) as caught:
        stream_chat(client)
    assert caught.value.status_code == status
    assert caught.value.response.json()["error"]["code"] == status
    assert caught.value.response.headers.get("retry-after") == ("7" if status == 429 else None)


@pytest.mark.parametrize(
    ("fault", "body"), [("overflow_llama", LLAMA_OVERFLOW), ("overflow_openai", OPENAI_OVERFLOW)]
)
def test_overflow_faults_send_the_exact_server_bodies(
    server: FakeServer, client: openai.OpenAI, fault: Any, body: dict[str, Any]
) -> None:
    server.enqueue(Reply(fault=fault, n_prompt_tokens=6041, n_ctx=4096))
    with pytest.raises(openai.BadRequestError) as caught:
        stream_chat(client)
    assert caught.value.status_code == 400
    assert caught.value.response.json() == body
    assert caught.value.body == body["error"]  # openai unwraps the "error" object


def test_context_window_rejects_with_real_numbers_and_keeps_the_queue(
    server: FakeServer, client: openai.OpenAI
) -> None:
    server.context_window = 5
    server.enqueue(Reply(text="after compaction"))
    with pytest.raises(openai.BadRequestError) as caught:
        stream_chat(client)
    server.context_window = 6
    assert caught.value.response.json()["error"]["n_prompt_tokens"] == 6
    assert caught.value.response.json()["error"]["n_ctx"] == 5
    assert text_of(stream_chat(client)) == "after compaction"


def test_dropped_connection_raises_connection_error(
    server: FakeServer, client: openai.OpenAI
) -> None:
    server.enqueue(Reply(text="never sent", fault="drop"))
    with pytest.raises(openai.APIConnectionError) as caught:
        stream_chat(client)
    assert "without sending a response" in str(caught.value.__cause__)


@pytest.mark.parametrize("stream", [True, False])
def test_cut_reply_raises_connection_error_after_partial_body(
    server: FakeServer, client: openai.OpenAI, stream: bool
) -> None:
    server.enqueue(Reply(text="a long reply that is cut", fault="cut", cut_after=3))
    received: list[ChatCompletionChunk] = []
    with pytest.raises(openai.APIConnectionError) as caught:
        if stream:
            stream_chat_iter = client.chat.completions.create(
                model="fake", messages=MESSAGES, stream=True
            )
            received.extend(stream_chat_iter)
        else:
            client.chat.completions.create(model="fake", messages=MESSAGES)
    assert len(received) == (3 if stream else 0)
    assert "peer closed connection without sending complete message body" in str(
        caught.value.__cause__
    )


def test_down_refuses_connections_and_up_serves_on_the_same_port(
    server: FakeServer, client: openai.OpenAI
) -> None:
    port = server.port
    server.down()
    with pytest.raises(openai.APIConnectionError) as caught:
        stream_chat(client)
    server.up()
    server.enqueue(Reply(text="back again"))
    assert "Connection refused" in str(caught.value.__cause__)
    assert server.port == port
    assert text_of(stream_chat(client)) == "back again"


@pytest.mark.timeout(20)
def test_down_severs_a_stream_in_progress(server: FakeServer, client: openai.OpenAI) -> None:
    server.enqueue(Reply(text="slow tokens " * 20, delay=5))
    stream = client.chat.completions.create(model="fake", messages=MESSAGES, stream=True)
    first = next(stream)
    server.down()
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert first.choices[0].delta.role == "assistant"


@pytest.mark.timeout(20)
def test_stall_can_be_abandoned_by_closing_the_stream(
    server: FakeServer, client: openai.OpenAI
) -> None:
    server.enqueue(Reply(text="stalls after a little", fault="stall", stall_after=2))
    stream = client.chat.completions.create(model="fake", messages=MESSAGES, stream=True)
    received = [next(stream), next(stream)]
    stream.close()
    assert text_of(received) == "stal"
    assert text_of(stream_chat(client)) == "ok"


@pytest.mark.timeout(20)
def test_stall_does_not_block_server_stop(server: FakeServer, client: openai.OpenAI) -> None:
    server.enqueue(Reply(text="stalls", fault="stall", stall_after=1))
    stream = client.chat.completions.create(model="fake", messages=MESSAGES, stream=True)
    next(stream)
    server.stop()
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert not server.is_up


@pytest.mark.timeout(20)
def test_non_streaming_stall_times_out_on_the_client(server: FakeServer) -> None:
    server.enqueue(Reply(text="never sent", fault="stall"))
    with make_client(server.url, timeout=0.5) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="fake", messages=MESSAGES)


def test_requests_are_recorded_in_order_and_cleared(
    server: FakeServer, client: openai.OpenAI
) -> None:
    client.models.list()
    stream_chat(client, temperature=0.5)
    recorded = server.requests
    assert [(r.method, r.path) for r in recorded] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert recorded[1].headers["authorization"] == "Bearer x"
    assert server.chat_requests() == [
        {"model": "fake", "messages": MESSAGES, "stream": True, "temperature": 0.5}
    ]
    server.clear()
    assert server.requests == []


def test_request_log_is_bounded_or_off() -> None:
    with FakeServer(max_recorded=2) as bounded, make_client(bounded.url) as bounded_client:
        for _ in range(3):
            bounded_client.models.list()
        bounded.record_requests = False
        bounded_client.models.list()
        assert len(bounded.requests) == 2


def test_queue_then_responder_then_default_reply(server: FakeServer, client: openai.OpenAI) -> None:
    server.default_reply = Reply(text="default")
    first = text_of(stream_chat(client))
    server.responder = lambda body: Reply(text=f"{len(body['messages'])} message(s)")
    server.enqueue(Reply(text="queued"))
    assert [first, text_of(stream_chat(client)), text_of(stream_chat(client))] == [
        "default",
        "queued",
        "1 message(s)",
    ]
    assert server.queued == 0


def test_models_endpoint_lists_the_fake_model(client: openai.OpenAI) -> None:
    assert [model.id for model in client.models.list()] == ["fake-model"]


def test_reply_survives_a_json_round_trip() -> None:
    reply = Reply(text="t", tool_calls=[("c", "f", "{}")], usage=(3, 4), fault="cut")
    assert Reply.from_dict(json.loads(json.dumps(reply.to_dict()))) == reply
    assert RecordedRequest.from_dict(RecordedRequest("GET", "/", {}, None).to_dict()).path == "/"


def test_unknown_fault_is_rejected_with_the_known_names() -> None:
    with pytest.raises(ValueError, match=r"unknown fault 'boom'; expected one of \['bad_bytes', "):
        Reply.from_dict({"fault": "boom"})


@pytest.mark.timeout(30)
def test_subprocess_server_is_scripted_through_remote_control() -> None:
    with start_fakeserver_process() as remote, make_client(remote.url) as client:
        remote.enqueue(Reply(text="from another process", reasoning="r"))
        assert text_of(stream_chat(client)) == "from another process"
        remote.configure(default_reply=Reply(text="new default"), context_window=1)
        with pytest.raises(openai.BadRequestError):
            stream_chat(client)
        assert [body["messages"] for body in remote.chat_requests()] == [MESSAGES, MESSAGES]
        remote.clear()
        remote.configure(default_reply=Reply(text="new default"))
        assert text_of(stream_chat(client)) == "new default"
        assert len(remote.requests) == 1
    assert remote.process.returncode == 0

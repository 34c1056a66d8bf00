"""Cancelling a request in any phase (issue 20 item 1): Stop reaches the socket before the server
has sent a header (llama.cpp sends none until it has read the whole prompt), while the body is
still being sent, and before the connection opens; a cancelled request is never retried; a
connection that went back to the pool is never shut by the request that used it before; and the
environment's proxy is still used."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from fakeserver import FakeServer, Reply
from fixtures_server import settings_for

from nbchat.llm.client import build_client, stream_chat
from nbchat.llm.reader import Finish, StreamEvent
from nbchat.llm.transport import Release, RequestCancelledError, http_client, releasing
from nbchat.stopping import StopSignal

HOLD = 30.0  # how long the server holds its headers: a test that passes never waits for it
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
CHAT_BODY = {"model": "m", "messages": MESSAGES}


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def streaming(
    client: openai.OpenAI, stop: StopSignal, messages: list[dict[str, Any]] = MESSAGES
) -> tuple[threading.Thread, list[StreamEvent]]:
    """`stream_chat` running on its own thread, as a widget's worker runs it."""
    events: list[StreamEvent] = []
    thread = threading.Thread(
        target=lambda: events.extend(stream_chat(client, messages, model="m", stop=stop))
    )
    thread.start()
    return thread, events


def test_stop_closes_a_request_while_the_server_holds_its_headers(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.enqueue(Reply(text="too late", fault="hold_headers", hold=HOLD))
    stop = StopSignal()
    with build_client(settings_for(fake.url, tmp_path)) as client:  # with its retries
        thread, events = streaming(client, stop)
        assert fake.wait_for_holds(held=1, timeout=HOLD)
        stop.set()
        # The client hung up while the server still held the headers: it was told at once.
        assert fake.wait_for_holds(hung_up=1, timeout=HOLD)
        thread.join()
    assert events == [Finish("stopped")]
    assert len(fake.chat_requests()) == 1  # a cancelled request is not retried


class DeafServer:
    """Accepts one connection and reads nothing until `drain()`: a client sending a large body
    fills the socket buffers and its write blocks. Then it reads until the client hangs up."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted = threading.Event()
        self.hung_up = threading.Event()
        self._drain = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connection, _ = self.listener.accept()
        self.accepted.set()
        self._drain.wait()
        with connection, contextlib.suppress(ConnectionResetError):
            while connection.recv(1 << 20):
                pass
        self.hung_up.set()

    def drain(self) -> None:
        self._drain.set()

    def close(self) -> None:
        self._drain.set()
        self.listener.close()
        self._thread.join()


def test_stop_ends_a_request_still_sending_its_body(tmp_path: Path) -> None:
    server = DeafServer()
    # Far more than the socket buffers hold, so the body is still being sent when Stop comes.
    huge = [{"role": "user", "content": "x" * (32 << 20)}]
    stop = StopSignal()
    try:
        with build_client(settings_for(server.url, tmp_path)) as client:
            thread, events = streaming(client, stop, huge)
            assert server.accepted.wait(HOLD)
            stop.set()
            thread.join()
            server.drain()
            assert server.hung_up.wait(HOLD)  # and the connection was closed
    finally:
        server.close()
    assert events == [Finish("stopped")]


def test_a_request_released_before_its_connection_opens_sends_nothing(fake: FakeServer) -> None:
    release = Release()
    release.release()
    with http_client(fake.url), releasing(release), pytest.raises(RequestCancelledError):
        httpx2_post(fake)
    assert fake.requests == []


def httpx2_post(fake: FakeServer, client: httpx2.Client | None = None) -> httpx2.Response:
    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(http_client(fake.url))
        return client.post(fake.url + "/v1/chat/completions", json=CHAT_BODY)


def test_a_release_never_shuts_a_connection_another_request_now_uses(fake: FakeServer) -> None:
    fake.enqueue(Reply(text="one"), Reply(text="two", fault="hold_headers", hold=1.0))
    first, second = Release(), Release()
    answers: list[httpx2.Response] = []
    with http_client(fake.url) as client:
        with releasing(first):
            answers.append(httpx2_post(fake, client))

        def post_second() -> None:
            with releasing(second):
                answers.append(httpx2_post(fake, client))

        thread = threading.Thread(target=post_second)
        thread.start()
        assert fake.wait_for_holds(held=1, timeout=HOLD)
        first.release()  # late: its connection now carries the second request
        thread.join()
    assert [answer.status_code for answer in answers] == [200, 200]
    assert "two" in answers[1].text
    reused = [answer.extensions["network_stream"] for answer in answers]
    assert reused[0] is reused[1]  # one connection served both
    assert fake.hung_up == []


def test_the_environment_proxy_is_still_used(
    fake: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", fake.url)
    with http_client("http://nbchat.invalid/v1") as client:
        client.get("http://nbchat.invalid/v1/models")
    assert [request.path for request in fake.requests] == ["http://nbchat.invalid/v1/models"]


def test_a_server_on_this_machine_is_never_reached_through_a_proxy(
    fake: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    with http_client(fake.url) as client:
        assert client.get(fake.url + "/v1/models").status_code == 200
    assert [request.path for request in fake.requests] == ["/v1/models"]

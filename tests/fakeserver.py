"""A scripted OpenAI-compatible chat server on 127.0.0.1 for integration tests and benchmarks.

Owns the transport: a real `ThreadingHTTPServer` speaking `POST /v1/chat/completions` (SSE when
`"stream": true`) and `GET /v1/models`, a FIFO of scripted `Reply`s, the request log, fault
injection at the socket level (refused, dropped, cut, stalled, bad bytes, keep-alives only,
a flood that ignores max_tokens, a line that never ends) and the `/_control/*` endpoints
that let another process script it. What the replies say lives in `fakeserver_replies.py`; the
client side of another process's server in `fakeserver_remote.py` (re-exported here).

In-process:  `with FakeServer() as server: server.enqueue(Reply(text="hi"))`
Subprocess:  `with start_fakeserver_process() as server: server.enqueue(...)` (benchmarks, so the
             server does not compete with the code under test for the GIL), or
             `python tests/fakeserver.py --port 0`: prints its URL first, stops on SIGTERM.

Streams use HTTP/1.1 chunked encoding with keep-alive, like llama.cpp's server, so a cut stream
is an incomplete body to the client rather than a clean end of a connection-delimited one.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import select
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from fakeserver_remote import FakeServerProcess, RemoteFakeServer, start_fakeserver_process
from fakeserver_replies import (
    ANSWER_STEP,
    CHAT_PATH,
    CONTROL_PREFIX,
    DEFAULT_REPLY,
    KEEPALIVE_COMMENT,
    MODEL_NAME,
    RecordedRequest,
    Reply,
    bad_bytes_event,
    completion_body,
    count_prompt_tokens,
    endless_line_events,
    error_response,
    flood_events,
    is_arguments_step,
    is_first_step,
    llama_overflow_body,
    stream_events,
)

__all__ = [
    "DEFAULT_REPLY",
    "FakeServer",
    "FakeServerProcess",
    "RecordedRequest",
    "RemoteFakeServer",
    "Reply",
    "Responder",
    "start_fakeserver_process",
]

HOST = "127.0.0.1"
HTTP_ERROR_FAULTS = frozenset({"http500", "http429", "overflow_llama", "overflow_openai"})
# How often idle loops look for a stop; down() shuts sockets, so this is only a backstop.
STOP_CHECK_SECONDS = 0.05
KEEPALIVE_SECONDS = 0.05

Responder = Callable[[dict[str, Any]], Reply]


class _HTTPServer(ThreadingHTTPServer):
    """One listening socket's lifetime; tracks open connections so down() can sever them."""

    daemon_threads = True  # a stalled handler must never keep the interpreter alive

    def __init__(self, fake: FakeServer, port: int) -> None:
        self.fake = fake
        self.stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__((HOST, port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def sever_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            # The handler may have closed it a moment ago; either way it is gone.
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one SSE event per segment, no 40 ms delayed-ACK stalls
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a test's output should be its own, and benchmarks print figures."""

    def handle(self) -> None:
        # A client that hangs up mid-reply, or down() severing the socket, ends this
        # connection; that is the scenario under test, not a server error.
        with contextlib.suppress(ConnectionError):
            super().handle()

    def do_GET(self) -> None:
        fake, path = self.server.fake, self.path.split("?")[0]
        if path == CONTROL_PREFIX + "requests":
            self._send_json(200, [request.to_dict() for request in fake.requests])
            return
        fake.record(RecordedRequest("GET", path, self._header_dict(), None))
        if path == "/v1/models":
            owner = fake.models_owner
            model = {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": owner}
            self._send_json(200, {"object": "list", "data": [model]})
        else:
            self._send_json(404, {"error": {"message": f"no route {path}", "code": 404}})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError as error:
            self._send_json(400, {"error": {"message": f"invalid JSON: {error}", "code": 400}})
            return
        if path.startswith(CONTROL_PREFIX):
            self._control(path.removeprefix(CONTROL_PREFIX), body)
            return
        self.server.fake.record(RecordedRequest("POST", path, self._header_dict(), body))
        if path == CHAT_PATH:
            self._chat(body)
        else:
            self._send_json(404, {"error": {"message": f"no route {path}", "code": 404}})

    def _header_dict(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _control(self, action: str, body: Any) -> None:
        fake = self.server.fake
        try:
            if action == "enqueue":
                fake.enqueue(*(Reply.from_dict(reply) for reply in body))
            elif action == "config":
                default = body.get("default_reply")
                fake.configure(
                    default_reply=DEFAULT_REPLY if default is None else Reply.from_dict(default),
                    context_window=body.get("context_window"),
                    record_requests=body.get("record_requests", True),
                )
            elif action == "clear":
                fake.clear()
            else:
                self._send_json(404, {"error": {"message": f"no control {action!r}"}})
                return
        except (AttributeError, TypeError, ValueError) as error:
            self._send_json(400, {"error": {"message": f"bad control request: {error}"}})
            return
        self._send_json(200, {"ok": True})

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        window = fake.context_window
        prompt_tokens = count_prompt_tokens(body)
        if window is not None and prompt_tokens > window:
            # Rejected before generation, so the scripted queue is left untouched.
            self._send_json(400, llama_overflow_body(prompt_tokens, window))
            return
        try:
            reply = fake.next_reply(body)
        except Exception as error:  # a broken responder should fail the test visibly, not hang it
            self._send_json(500, {"error": {"message": f"responder failed: {error!r}"}})
            return
        if reply.fault == "hold_headers" and not self._hold_headers(reply.hold, body):
            return
        if reply.fault == "drop":
            self._drop_connection()
        elif reply.fault in HTTP_ERROR_FAULTS:
            status, payload = error_response(reply, body)
            retry = {"Retry-After": str(reply.retry_after)} if status == 429 else {}
            self._send_json(status, payload, retry)
        elif body.get("stream"):
            self._stream(reply, body)
        else:
            self._complete(reply, body)

    def _complete(self, reply: Reply, body: dict[str, Any]) -> None:
        if reply.fault == "stall":
            self._stall()
            return
        payload = completion_body(reply, body, self.server.fake.new_completion_id())
        if reply.fault != "cut":
            self._send_json(200, payload)
            return
        data = json.dumps(payload).encode()
        self._send_headers(200, {"Content-Type": "application/json"}, len(data))
        self.wfile.write(data[: len(data) // 2])
        self._drop_connection()

    def _stream(self, reply: Reply, body: dict[str, Any]) -> None:
        completion_id = self.server.fake.new_completion_id()
        events = stream_events(reply, body, completion_id)
        if reply.fault == "flood":
            events = flood_events(reply, body, completion_id)
        elif reply.fault == "endless_line":
            events = endless_line_events(events, reply, body, completion_id)
        elif reply.fault == "bad_bytes":
            events = _inserted(events, reply.cut_after, bad_bytes_event(body, completion_id))
        limits = {
            "cut": reply.cut_after,
            "stall": reply.stall_after,
            "keepalive": reply.stall_after,
        }
        limit = limits.get(reply.fault or "")
        self._send_headers(200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        for count, event in enumerate(itertools.islice(events, limit)):
            if count and reply.delay and self.server.stopping.wait(reply.delay):
                self._drop_connection()
                return
            if self.server.stopping.is_set():  # a flood ends when the server goes down
                self._drop_connection()
                return
            self._write_chunk(event)
        if reply.fault == "cut":
            self._drop_connection()
        elif reply.fault == "stall":
            self._stall()
        elif reply.fault == "keepalive":
            self._keep_alive(reply.delay or KEEPALIVE_SECONDS)
        else:
            self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _keep_alive(self, every: float) -> None:
        """Only SSE comments (no data) until the client hangs up or the server goes down."""
        while not self.server.stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], every)
            if readable:  # EOF from the client, or down() shut the socket
                break
            try:
                self._write_chunk(KEEPALIVE_COMMENT)
            except OSError:
                break
        self.close_connection = True

    def _stall(self) -> None:
        """Send nothing until the client hangs up or the server goes down."""
        while not self.server.stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], STOP_CHECK_SECONDS)
            if readable:  # EOF from the client, or down() shut the socket
                break
        self.close_connection = True

    def _hold_headers(self, seconds: float, body: dict[str, Any]) -> bool:
        """Send nothing for `seconds`, as llama.cpp does while it reads a prompt; False when
        the client hung up meanwhile (recorded in `FakeServer.hung_up`) or the server went
        down."""
        fake = self.server.fake
        fake.note_hold(body)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], left)
            if self.server.stopping.is_set():
                break
            if readable:  # EOF: a client never sends more while it waits for an answer
                fake.note_hold(body, hung_up=True)
                self.close_connection = True
                return False
        else:
            return True
        self._drop_connection()
        return False

    def _drop_connection(self) -> None:
        """Close abruptly: no response, or no more of one, and no chunked terminator."""
        self.close_connection = True
        with contextlib.suppress(OSError):  # the peer may already be gone
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_headers(
        self, status: int, headers: dict[str, str], length: int | None = None
    ) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if length is None:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self._send_headers(
            status, {"Content-Type": "application/json", **(headers or {})}, len(data)
        )
        self.wfile.write(data)


def _is_step(body: Any) -> bool:
    return is_first_step(body) or is_arguments_step(body)


def _inserted(events: Iterator[bytes], position: int, extra: bytes) -> Iterator[bytes]:
    """`events` with `extra` sent after the first `position` of them."""
    for count, event in enumerate(events):
        if count == position:
            yield extra
        yield event


class FakeServer:
    """The in-process server: scripted replies, request log, down()/up() on the same port.

    Reply order: queued replies (FIFO), then `responder(request_json)`, then `default_reply`.
    With `context_window` set, any request over it gets llama.cpp's overflow 400 first.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        default_reply: Reply = DEFAULT_REPLY,
        context_window: int | None = None,
        responder: Responder | None = None,
        record_requests: bool = True,
        max_recorded: int = 10_000,
        models_owner: str = "fakeserver",
    ) -> None:
        self.port = port
        # `/v1/models`' `owned_by`: "llamacpp" makes the chat treat this as a llama.cpp server.
        self.models_owner = models_owner
        self.default_reply = default_reply
        self.context_window = context_window
        self.responder = responder
        self.record_requests = record_requests
        self._queue: deque[Reply] = deque()
        self._log: deque[RecordedRequest] = deque(maxlen=max_recorded)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Requests whose headers a `hold_headers` reply held, and those whose client hung up
        # during the hold (the event a cancellation test waits for).
        self.held: list[dict[str, Any]] = []
        self.hung_up: list[dict[str, Any]] = []
        self._holds = threading.Condition()
        self._recorded = threading.Condition()

    @property
    def url(self) -> str:
        if self.port == 0:
            raise RuntimeError("the fake server has no port yet: call start() or use `with`")
        return f"http://{HOST}:{self.port}"

    @property
    def is_up(self) -> bool:
        return self._httpd is not None

    def start(self) -> FakeServer:
        self.up()
        return self

    def stop(self) -> None:
        if self.is_up:
            self.down()

    def up(self) -> None:
        """Listen (again) on the same port; the first call picks a free one if port was 0."""
        if self._httpd is not None:
            raise RuntimeError("the fake server is already up")
        self._httpd = _HTTPServer(self, self.port)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": STOP_CHECK_SECONDS},
            name=f"fakeserver-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def down(self) -> None:
        """Refuse connections from now on and sever the open ones, as a crashed server would."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            raise RuntimeError("the fake server is already down")
        self._httpd = self._thread = None
        httpd.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.sever_connections()
        thread.join()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def queued(self) -> int:
        """How many scripted replies are still waiting to be served."""
        with self._lock:
            return len(self._queue)

    def configure(
        self,
        *,
        default_reply: Reply = DEFAULT_REPLY,
        context_window: int | None = None,
        record_requests: bool = True,
    ) -> None:
        self.default_reply = default_reply
        self.context_window = context_window
        self.record_requests = record_requests

    def next_reply(self, body: dict[str, Any]) -> Reply:
        """A first-step request takes the queue's head only when it is a first step (else it
        is answered "none": answer in words); any other request takes the head."""
        with self._lock:
            if is_first_step(body):
                if self._queue and self._queue[0].first_step:
                    return self._queue.popleft()
                return ANSWER_STEP
            if self._queue:
                return self._queue.popleft()
        responder = self.responder
        return self.default_reply if responder is None else responder(body)

    def note_hold(self, body: dict[str, Any], *, hung_up: bool = False) -> None:
        with self._holds:
            (self.hung_up if hung_up else self.held).append(body)
            self._holds.notify_all()

    def wait_for_holds(
        self, *, held: int = 0, hung_up: int = 0, timeout: float | None = None
    ) -> bool:
        """Block until at least `held` requests were held and `hung_up` clients hung up during
        a hold; False on timeout."""
        with self._holds:
            return self._holds.wait_for(
                lambda: len(self.held) >= held and len(self.hung_up) >= hung_up, timeout
            )

    def new_completion_id(self) -> str:
        return f"chatcmpl-fake-{next(self._ids)}"

    def record(self, request: RecordedRequest) -> None:
        if self.record_requests:
            with self._lock:
                self._log.append(request)
            with self._recorded:
                self._recorded.notify_all()

    def wait_for_chat_requests(self, count: int, timeout: float | None = None) -> bool:
        """Block until at least `count` chat requests (first steps apart) were received; False
        on timeout. A test that must not block the kernel waits here for a turn's progress."""
        with self._recorded:
            return self._recorded.wait_for(lambda: len(self.chat_requests()) >= count, timeout)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot, oldest first (only the newest `max_recorded` are kept)."""
        with self._lock:
            return list(self._log)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completion requests, oldest first (a small model's first
        steps apart: `first_steps`)."""
        return [
            request.body
            for request in self.requests
            if request.path == CHAT_PATH and not _is_step(request.body)
        ]

    def first_steps(self) -> list[dict[str, Any]]:
        """The JSON bodies of a small model's first-step requests (`nbchat.llm.firststep`: the
        choice, and the chosen tool's arguments), oldest first."""
        return [r.body for r in self.requests if r.path == CHAT_PATH and _is_step(r.body)]

    def clear(self) -> None:
        """Forget the recorded requests (the reply queue is kept)."""
        with self._lock:
            self._log.clear()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible test server.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--context-window", type=int, default=None)
    parser.add_argument("--no-record", action="store_true", help="keep no request log (soaks)")
    args = parser.parse_args(argv)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    server = FakeServer(
        port=args.port, context_window=args.context_window, record_requests=not args.no_record
    )
    with server:
        print(server.url, flush=True)
        stopped.wait()


if __name__ == "__main__":
    main()

"""Helpers for tests that talk to a server over real HTTP, and a byte-level scripted server.

`ScriptedServer` answers each path with canned responses written out exactly (status, JSON body
or SSE events), for wire shapes the fake OpenAI server does not produce on purpose: a
`reasoning` delta field, a stream without usage, a stream that ends without a finish reason, an
error event inside a stream, an error that echoes the API key, llama.cpp's `/props` and
`/metrics`.
`pretend_embedded_server` records a live-looking embedded server that loads no model.

`client_for` builds the real client the way nbchat does. The fixtures themselves live in each
test module: importing fixtures from here would shadow them in every test signature.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai

from nbchat.config import Settings
from nbchat.embedded.runtime import write_record
from nbchat.llm.client import build_client

CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Canned:
    """One response: a JSON body, or (when `events` is given) an SSE stream of those events, or
    (when `text` is given) that plain text (llama.cpp's `/metrics`).

    Events that are dicts are sent as `data: <json>`, strings as `data: <string>`.
    """

    status: int = 200
    body: Any = None
    events: Sequence[Any] | None = None
    text: str | None = None


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """One `chat.completion.chunk` event body."""
    body: dict[str, Any] = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0}
    body["model"] = "scripted"
    body["choices"] = (
        [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    )
    if usage is not None:
        body["usage"] = usage
    return body


class ScriptedServer:
    """An HTTP server on 127.0.0.1 that answers each path with its queued `Canned` responses."""

    def __init__(self) -> None:
        self.routes: dict[str, deque[Canned]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        # A short poll interval so shutdown() (every test's teardown) returns at once.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def add(self, path: str, *responses: Canned) -> None:
        with self._lock:
            self.routes.setdefault(path, deque()).extend(responses)

    def take(self, path: str, headers: dict[str, str]) -> Canned | None:
        with self._lock:
            self.requests.append((path, headers))
            queue = self.routes.get(path)
            return queue.popleft() if queue else None

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test's output is its own."""

        def handle(self) -> None:
            # A client that hangs up early (Stop, an error event) is part of the scenario.
            with contextlib.suppress(ConnectionError):
                super().handle()

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer()

        def _answer(self) -> None:
            path = self.path.split("?")[0]
            canned = server.take(path, {k.lower(): v for k, v in self.headers.items()})
            if canned is None:
                canned = Canned(404, {"error": {"message": f"no route {path}", "code": 404}})
            if canned.events is None:
                if canned.text is None:
                    data, kind = json.dumps(canned.body).encode(), "application/json"
                else:
                    data, kind = canned.text.encode(), "text/plain; version=0.0.4"
                self.send_response(canned.status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(canned.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in canned.events:
                text = event if isinstance(event, str) else json.dumps(event)
                payload = f"data: {text}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.write(b"0\r\n\r\n")

    return Handler


def settings_for(url: str, tmp_path: Path, **overrides: Any) -> Settings:
    """Settings pointing at a server's OpenAI base URL, with everything else under tmp_path."""
    values: dict[str, Any] = {"base_url": url + "/v1", "home": tmp_path / "home"}
    values.update(workspace=tmp_path, **overrides)
    return Settings(**values)


def client_for(url: str, tmp_path: Path, **overrides: Any) -> openai.OpenAI:
    """The real client as nbchat builds it, without retries: one scripted reply, one attempt."""
    return build_client(settings_for(url, tmp_path, **overrides)).with_options(max_retries=0)


@contextlib.contextmanager
def pretend_embedded_server(
    home: Path, *, model: str, n_ctx: int = 8192, idle_timeout: float | None = 1800.0
) -> Iterator[subprocess.Popen[bytes]]:
    """A live embedded server as `nbchat.embedded.server` sees one, without loading a model: a
    sleeping process whose command line names nbchat, a `/health` that answers ok, and the
    runtime record naming both (`idle_timeout=None`: a record from before it was written)."""
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "nbchat-pretend-server"]
    )
    try:
        with ScriptedServer() as health:
            health.add("/health", *[Canned(body={"status": "ok"})] * 50)
            record = {"url": health.url, "pid": sleeper.pid, "model": model, "n_ctx": n_ctx}
            if idle_timeout is not None:
                record["idle_timeout"] = idle_timeout
            write_record(home, record)
            yield sleeper
    finally:
        sleeper.kill()
        sleeper.wait()

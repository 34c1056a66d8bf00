"""The client side of a fake server running in another process.

Owns `RemoteFakeServer` (scripts any fake server through its `/_control/*` endpoints, with the
same `enqueue` / `requests` / `chat_requests` / `clear` / `configure` as `FakeServer`) and the
child process that benchmarks use so the server does not compete with them for the GIL. Talks
plain HTTP with urllib; imports nothing from the server module, which runs as the child.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from fakeserver_replies import CHAT_PATH, CONTROL_PREFIX, DEFAULT_REPLY, RecordedRequest, Reply

SERVER_SCRIPT = Path(__file__).resolve().with_name("fakeserver.py")
CONTROL_TIMEOUT_SECONDS = 30
STOP_TIMEOUT_SECONDS = 10


class RemoteFakeServer:
    """Scripts a fake server in another process through its `/_control/*` endpoints."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        # Straight to 127.0.0.1 even when the environment configures an HTTP proxy.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def enqueue(self, *replies: Reply) -> None:
        self._call("enqueue", [reply.to_dict() for reply in replies])

    def configure(
        self,
        *,
        default_reply: Reply = DEFAULT_REPLY,
        context_window: int | None = None,
        record_requests: bool = True,
    ) -> None:
        config = {"default_reply": default_reply.to_dict(), "context_window": context_window}
        self._call("config", {**config, "record_requests": record_requests})

    @property
    def requests(self) -> list[RecordedRequest]:
        return [RecordedRequest.from_dict(item) for item in self._call("requests")]

    def chat_requests(self) -> list[dict[str, Any]]:
        return [request.body for request in self.requests if request.path == CHAT_PATH]

    def clear(self) -> None:
        self._call("clear", {})

    def _call(self, action: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url + CONTROL_PREFIX + action,
            data=data,
            headers={"Content-Type": "application/json"},
            method="GET" if data is None else "POST",
        )
        with self._opener.open(request, timeout=CONTROL_TIMEOUT_SECONDS) as response:
            return json.loads(response.read())


class FakeServerProcess(RemoteFakeServer):
    """A fake server running in a child process; `stop()` sends SIGTERM and waits."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        super().__init__(url)
        self.process = process

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> FakeServerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_fakeserver_process(
    *, port: int = 0, context_window: int | None = None, record_requests: bool = True
) -> FakeServerProcess:
    """Run `python tests/fakeserver.py` and return once it listens (its URL is its first line)."""
    command = [sys.executable, str(SERVER_SCRIPT), "--port", str(port)]
    if context_window is not None:
        command += ["--context-window", str(context_window)]
    if not record_requests:
        command.append("--no-record")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None  # guaranteed by stdout=PIPE; narrows the type
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        process.wait()
        process.stdout.close()
        raise RuntimeError(f"fake server process did not start (printed {url!r})")
    return FakeServerProcess(process, url)

"""The Jupyter server extension: enabled and valid, and its endpoints over a real `jupyter server`.

The server runs in a subprocess on a free 127.0.0.1 port with a known token, its own Jupyter
config and runtime directories (so the developer's ~/.jupyter does not apply) and `NBCHAT_HOME`
pointing at a temp directory that holds a DB with one session.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from factories import assistant, user

from nbchat.embedded.runtime import is_running
from nbchat.embedded.server import ensure_server, find_running
from nbchat.store.store import Store

JUPYTER = Path(sys.executable).with_name("jupyter")
TOKEN = "nbchat-test-token-5b1f"
STARTUP_SECONDS = 120.0  # a deadline, not a timing: on a busy two-core machine 15 s was too few
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class JupyterServer:
    url: str
    home: Path
    session_id: str
    proc: subprocess.Popen[bytes]

    def client(self, *, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"token {token}"} if token else {}
        # trust_env=False: a proxy from the environment must not see 127.0.0.1 traffic.
        return httpx.Client(base_url=self.url, headers=headers, trust_env=False, timeout=120)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_up(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll the unauthenticated `/api` with a deadline: the server has no ready signal."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"jupyter server exited:\n{log.read_text()}"
        try:
            if httpx.get(url + "/api", trust_env=False, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(
        f"jupyter server did not answer within {STARTUP_SECONDS} s:\n{log.read_text()}"
    )


def stop_jupyter(server: JupyterServer) -> int:
    """`/api/shutdown`, then wait; terminate only if it does not exit on its own."""
    try:
        with server.client() as client:
            client.post("/api/shutdown")
        return server.proc.wait(timeout=20)
    except (httpx.TransportError, subprocess.TimeoutExpired):
        server.proc.terminate()
        return server.proc.wait(timeout=20)


def kill_leftover_servers(home: Path) -> None:
    """Whatever a failed test left: model servers whose command line names this home."""
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if b"nbchat.embedded.server" in cmdline and os.fsencode(home) in cmdline:
            os.kill(int(entry.name), signal.SIGKILL)


def seed_store(home: Path) -> str:
    store = Store(home / "nbchat.db")
    session_id = store.create_session("Percent % and <b>tags</b>", model="m")
    store.append_rows(session_id, [user("hello"), assistant("hi there")])
    store.close()
    return session_id


def clean_env(tmp: Path, home: Path) -> dict[str, str]:
    """This process's environment minus the developer's nbchat settings and Jupyter config."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("NBCHAT_") and name != "OPENAI_API_KEY"
    }
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"),
        NBCHAT_HOME=str(home),
    )
    return env


@contextmanager
def running_jupyter(tmp: Path) -> Iterator[JupyterServer]:
    home = tmp / "nbchat-home"
    session_id = seed_store(home)
    port = free_port()
    log = tmp / "jupyter.log"
    command = [str(JUPYTER), "server", "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    command += ["--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}"]
    command += ["--allow-root"]  # CI containers run as root; harmless otherwise
    command += [f"--ServerApp.root_dir={tmp}"]
    with log.open("wb") as log_handle:
        proc = subprocess.Popen(
            command, env=clean_env(tmp, home), stdout=log_handle, stderr=subprocess.STDOUT
        )
    server = JupyterServer(f"http://127.0.0.1:{port}", home, session_id, proc)
    try:
        wait_until_up(proc, server.url, log)
        yield server
    finally:
        stop_jupyter(server)
        kill_leftover_servers(home)


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """One server for the read-only tests of this module."""
    with running_jupyter(tmp_path_factory.mktemp("jupyter")) as server:
        yield server


@pytest.fixture
def own_jupyter(tmp_path: Path) -> Iterator[JupyterServer]:
    """A server of the test's own, for a test that shuts it down."""
    with running_jupyter(tmp_path) as server:
        yield server


def test_extension_list_reports_nbchat_enabled_and_valid(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(JUPYTER), "server", "extension", "list"],
        env=clean_env(tmp_path, tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ANSI.sub("", line).strip() for line in (result.stdout + result.stderr).splitlines()]
    assert result.returncode == 0
    assert "nbchat.jupyter.serverext enabled" in lines
    assert "- Validating nbchat.jupyter.serverext..." in lines
    assert "nbchat.jupyter.serverext 0.1.0 OK" in lines


def test_extension_points_name_the_module_itself() -> None:
    from nbchat.jupyter.serverext import _jupyter_server_extension_points

    assert _jupyter_server_extension_points() == [{"module": "nbchat.jupyter.serverext"}]


ENDPOINTS = [
    ("GET", "/nbchat/api/sessions"),
    ("GET", "/nbchat/api/sessions/x/export?format=md"),
    ("GET", "/nbchat/api/model"),
    ("POST", "/nbchat/api/model/start"),
    ("POST", "/nbchat/api/model/stop"),
]


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_endpoints_refuse_requests_without_a_valid_token(jupyter: JupyterServer) -> None:
    for token in (None, "wrong-token"):
        with jupyter.client(token=token) as client:
            statuses = [client.request(method, path).status_code for method, path in ENDPOINTS]
        assert statuses == [403] * len(ENDPOINTS)
    assert find_running(home=jupyter.home) is None


NOT_RUNNING = {
    "running": False,
    "url": None,
    "base_url": None,
    "pid": None,
    "model": None,
    "n_ctx": None,
    "started_here": False,
}


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_sessions_endpoint_lists_each_session_with_its_row_counts(jupyter: JupyterServer) -> None:
    with jupyter.client() as client:
        response = client.get("/nbchat/api/sessions")
    assert response.status_code == 200
    [listed] = response.json()
    assert sorted(listed) == sorted(
        ["id", "title", "model", "created", "updated", "active_rows", "total_rows"]
    )
    assert {key: listed[key] for key in ("id", "title", "model", "active_rows", "total_rows")} == {
        "id": jupyter.session_id,
        "title": "Percent % and <b>tags</b>",
        "model": "m",
        "active_rows": 2,
        "total_rows": 2,
    }


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_export_endpoint_serves_markdown_by_default_and_json_on_request(
    jupyter: JupyterServer,
) -> None:
    path = f"/nbchat/api/sessions/{jupyter.session_id}/export"
    with jupyter.client() as client:
        markdown = client.get(path, params={"format": "md"})
        default = client.get(path)
        exported = client.get(path, params={"format": "json"})
    assert (markdown.status_code, exported.status_code) == (200, 200)
    assert markdown.headers["content-type"] == "text/markdown; charset=UTF-8"
    assert "hello" in markdown.text
    assert "hi there" in markdown.text
    assert default.text == markdown.text
    assert exported.headers["content-type"] == "application/json"
    document = exported.json()
    assert document["session"]["id"] == jupyter.session_id
    assert [row["content"] for row in document["rows"]] == ["hello", "hi there"]


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        (
            "GET",
            "sessions/nope/export",
            None,
            404,
            "No session 'nope'. GET nbchat/api/sessions lists them.",
        ),
        (
            "GET",
            "sessions/{sid}/export?format=pdf",
            None,
            400,
            "format must be md or json, not 'pdf'.",
        ),
        (
            "POST",
            "model/start",
            b"[1]",
            400,
            'The body must be a JSON object such as {"model": "qwen"}.',
        ),
        (
            "POST",
            "model/start",
            b'{"n_ctx": -1}',
            400,
            "n_ctx must be 0 (the model's own) or a positive number.",
        ),
        (
            "POST",
            "model/start",
            b'{"model": 7}',
            400,
            "model must be 'qwen', 'smollm' or the path of a .gguf file.",
        ),
    ],
)
def test_bad_requests_get_a_json_message_saying_what_is_wrong(
    jupyter: JupyterServer, method: str, path: str, body: bytes | None, status: int, message: str
) -> None:
    url = "/nbchat/api/" + path.format(sid=jupyter.session_id)
    with jupyter.client() as client:
        response = client.request(method, url, content=body)
    assert (response.status_code, response.json()) == (status, {"message": message})


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_model_endpoints_report_and_stop_nothing_when_no_server_runs(
    jupyter: JupyterServer,
) -> None:
    with jupyter.client() as client:
        status = client.get("/nbchat/api/model")
        stopped = client.post("/nbchat/api/model/stop")
    assert (status.status_code, status.json()) == (200, NOT_RUNNING)
    assert (stopped.status_code, stopped.json()) == (200, NOT_RUNNING)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(180)
def test_a_model_the_extension_started_is_stopped_when_jupyter_shuts_down(
    own_jupyter: JupyterServer,
) -> None:
    with own_jupyter.client() as client:
        started = client.post("/nbchat/api/model/start", json={"model": "smollm", "n_ctx": 512})
        again = client.post("/nbchat/api/model/start", json={"model": "smollm"})
        status = client.get("/nbchat/api/model")
        models = httpx.get(started.json()["base_url"] + "/models", trust_env=False, timeout=10)
    assert started.status_code == 200
    assert (started.json()["running"], started.json()["started_here"]) == (True, True)
    assert started.json()["model"] == "smollm"
    assert again.json() == started.json()
    assert status.json() == started.json()
    assert models.status_code == 200
    pid = started.json()["pid"]

    assert stop_jupyter(own_jupyter) == 0
    assert not is_running(pid)
    assert find_running(home=own_jupyter.home) is None


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(180)
def test_a_model_started_elsewhere_keeps_running_after_jupyter_shuts_down(
    own_jupyter: JupyterServer,
) -> None:
    elsewhere = ensure_server("smollm", home=own_jupyter.home, n_ctx=512, timeout=60)
    try:
        with own_jupyter.client() as client:
            reused = client.post("/nbchat/api/model/start", json={"model": "smollm"})
        assert reused.json() == {
            "running": True,
            "url": elsewhere.url,
            "base_url": elsewhere.base_url,
            "pid": elsewhere.pid,
            "model": "smollm",
            "n_ctx": 512,
            "started_here": False,
        }
        assert stop_jupyter(own_jupyter) == 0
        assert find_running(home=own_jupyter.home) == elsewhere
    finally:
        elsewhere.stop()

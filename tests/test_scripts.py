"""The README's commands, run as the README says: `scripts/run` starts JupyterLab for whoever
runs it, root included (containers, cloud notebooks and CI run as root), and passes its extra
arguments to `jupyter lab`.

The script is run itself, in a subprocess (as root when the test suite runs as root, which is
the case the issue is about), with the install step skipped (the test venv already holds it).
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "nbchat-run-test"
START_SECONDS = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def read_until(proc: subprocess.Popen[bytes], marker: bytes, *, seconds: float) -> bytes:
    """The process's output up to the first line holding `marker` (read as it arrives)."""
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while marker not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(timeout=left):
                pytest.fail(f"no {marker!r} in {seconds:g} s; output:\n{seen.decode()[-3000:]}")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                proc.wait()
                pytest.fail(f"exited with {proc.returncode} before {marker!r}:\n{seen.decode()}")
            seen += chunk
    return seen


def status_of(url: str, proc: subprocess.Popen[bytes]) -> int:
    """The HTTP status of `url`. Jupyter logs its URL just before its loop binds the port, and
    a port coming up sends no event, so a refused connection is retried briefly."""
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + 30.0
    while True:
        try:
            with opener.open(request, timeout=10) as response:
                status: int = response.status
                return status
        except urllib.error.URLError as error:
            refused = isinstance(error.reason, ConnectionRefusedError)
            if not refused or proc.poll() is not None or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


@pytest.fixture
def run_script(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    env = {
        **os.environ,
        "NBCHAT_RUN_SKIP_INSTALL": "1",
        "NBCHAT_AUTOSTART": "0",  # opening the notebook starts no kernel; keep it that way
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
    }
    command = [str(ROOT / "scripts" / "run"), "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    command += ["--ServerApp.port_retries=0", f"--ServerApp.token={TOKEN}"]
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.slow
def test_scripts_run_starts_jupyterlab_for_the_current_user_root_included(
    run_script: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, port = run_script
    output = read_until(proc, f"127.0.0.1:{port}/lab".encode(), seconds=START_SECONDS)
    assert status_of(f"http://127.0.0.1:{port}/api/status", proc) == 200
    assert b"Running as root is not recommended" not in output

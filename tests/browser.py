"""What the browser tests share: a Jupyter server on 127.0.0.1, Debian's chromium, and the chat
driven in the page the way a person drives it.

The server (JupyterLab or Notebook 7, `jupyter_server`) runs headless with a known token and
every Jupyter directory in a temp dir; the embedded SmolLM2 model starts when the notebook's
`ChatUI()` asks for it (NBCHAT_AUTOSTART=1). Playwright drives /usr/bin/chromium, never a
downloaded browser. Screenshots go to test-artifacts/ (`SCREENSHOTS`: docs/ only when
`scripts/screenshots` refreshes the README's). `stream_then_stop` is the shared scenario: a
long reply is seen streaming while Stop is enabled, Stop ends it as stopped, and the input is
usable again.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Locator, Page, Response, expect

from nbchat.embedded.server import find_running

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
# The README's screenshots (docs/*.png) are retaken by every browser test, into test-artifacts/
# so that the test command leaves the checkout as it found it; `scripts/screenshots` sets
# SCREENSHOTS_TO_DOCS=1 to write them over the README's own.
SCREENSHOTS = REPO / "docs" if os.environ.get("SCREENSHOTS_TO_DOCS") == "1" else ARTIFACTS
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
INSTALL_HINT = (
    "Debian's chromium is needed at /usr/bin/chromium for the browser test: install it with "
    "`sudo apt-get install chromium` (scripts/test installs it when it is missing). "
    "Playwright's own browser download is not used."
)
TOKEN = "nbchat-browser-test"
START_SECONDS = 90.0
LONG_MESSAGE = "Tell me a long story about a robot who learns to paint."


@dataclass(frozen=True)
class Server:
    url: str
    token: str
    log: Path


def find_chromium(path: Path = CHROMIUM) -> Path:
    """Debian's chromium, or a test failure that says how to install it (never a silent skip)."""
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"{INSTALL_HINT} (not found: {path})", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def jupyter_environment(
    home: Path, scratch: Path, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBCHAT_")}
    for name in ("config", "runtime", "data", "ipython", "workspace"):
        (scratch / name).mkdir(parents=True, exist_ok=True)
    env.update(
        NBCHAT_HOME=str(home),
        # The 135M test model, fast; `scripts/screenshots` takes the README's pictures on the
        # default model (SCREENSHOTS_MODEL=auto), whose checkpoint is a real one.
        NBCHAT_LOCAL_MODEL=os.environ.get("SCREENSHOTS_MODEL", "smollm"),
        NBCHAT_AUTOSTART="1",
        NBCHAT_MAX_TOKENS="4000",  # a long reply: Stop must be seen enabled while it streams
        NBCHAT_TOOL_POLICY="deny",
        NBCHAT_WORKSPACE=str(scratch / "workspace"),
        JUPYTER_CONFIG_DIR=str(scratch / "config"),
        JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
        JUPYTER_DATA_DIR=str(scratch / "data"),
        JUPYTER_PLATFORM_DIRS="1",
        IPYTHONDIR=str(scratch / "ipython"),
    )
    env.update(extra or {})
    return env


def wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll the server's status endpoint until it answers (a port coming up has no event)."""
    deadline = time.monotonic() + START_SECONDS
    request = urllib.request.Request(
        f"{url}/api/status", headers={"Authorization": f"token {TOKEN}"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"Jupyter exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with opener.open(request, timeout=2):
                return  # urllib raises for any answer but a 2xx
        except OSError:
            time.sleep(0.2)  # not listening yet
    pytest.fail(
        f"Jupyter did not answer at {url} in {START_SECONDS:g} s:\n{log.read_text()[-3000:]}"
    )


@contextmanager
def jupyter_server(
    app: str,
    notebook: Path,
    *,
    home: Path,
    scratch: Path,
    env: Mapping[str, str] | None = None,
) -> Iterator[Server]:
    """`python -m <app>` (jupyterlab or notebook) serving a copy of `notebook` in `scratch`/root
    (`env` added to its environment); stopped with its kernels and the embedded model server
    afterwards."""
    root = scratch / "root"
    root.mkdir(parents=True)
    shutil.copy(notebook, root / notebook.name)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", app, "--no-browser", "--ip=127.0.0.1"]
    command += [f"--port={port}", "--ServerApp.port_retries=0", f"--ServerApp.token={TOKEN}"]
    command += [f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = scratch / f"{app}.log"
    with log.open("wb") as output:
        proc = subprocess.Popen(
            command,
            env=jupyter_environment(home, scratch, env),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_up(url, proc, log)
        yield Server(url, TOKEN, log)
    finally:
        stop_process_group(proc)
        server = find_running(home=home)
        if server is not None:
            server.stop()


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the Jupyter server and its kernels (its own process group), SIGKILL after a grace
    period."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def run_all_cells(page: Page) -> None:
    """Run > Run All Cells, once the kernel is idle (earlier, the front end would not run
    them). The execution indicator in the notebook's toolbar is the same in Lab and Notebook 7."""
    name = page.locator(".jp-Toolbar-kernelName", has_text="ipykernel")
    expect(name.first).to_be_visible(timeout=120_000)
    idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    expect(idle.first).to_be_attached(timeout=120_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def wait_for_cells_to_finish(page: Page, timeout: float) -> None:
    """Every code cell has an execution count: the notebook ran to its end."""
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=timeout * 1000,
    )


def open_chat(page: Page) -> Locator:
    """Run the notebook and wait until its chat is ready for input; the chat's locator."""
    run_all_cells(page)
    chat = page.locator(".nbchat")
    chat.locator("textarea.nbchat-input-area").wait_for(timeout=120_000)
    wait_for_cells_to_finish(page, timeout=300)
    # The static transcript beside the live widget is hidden while the widget shows.
    transcript = page.locator(".nbchat-transcript")
    expect(transcript).to_have_count(1)
    expect(transcript).to_be_hidden()
    return chat


def stream_then_stop(page: Page, chat: Locator, screenshot: Path) -> None:
    """Ask for a long reply, see it stream while Stop is enabled, press Stop: the reply ends as
    stopped and the input is usable again."""
    area = chat.locator("textarea.nbchat-input-area")
    replies = chat.locator(".nbchat-assistant")
    before = replies.count()
    stop = chat.locator("button", has_text="Stop")
    expect(stop).to_be_disabled()

    area.fill(LONG_MESSAGE)
    area.press("Enter")
    expect(stop).to_be_enabled(timeout=60_000)
    expect(chat.locator(".nbchat-user", has_text=LONG_MESSAGE)).to_have_count(1)
    expect(replies).to_have_count(before + 1, timeout=60_000)
    reply = replies.nth(before)
    expect(reply).to_contain_text("Assistant")
    expect(reply).not_to_have_text("Assistant", timeout=60_000)
    shown = len(reply.inner_text())
    # More text arrives while Stop is still enabled: the reply streams in, piece by piece.
    page.wait_for_function(
        "([el, n]) => el.innerText.length > n", arg=[reply.element_handle(), shown]
    )
    expect(stop).to_be_enabled()
    page.screenshot(path=str(screenshot))

    stop.click()
    expect(stop).to_be_disabled(timeout=30_000)
    expect(chat.locator(".nbchat-notice", has_text="Stopped by you")).to_have_count(1)
    expect(chat.locator("button", has_text="Send")).to_be_enabled()
    expect(area).to_be_enabled()
    expect(area).to_have_value("")
    area.fill("and then?")
    expect(area).to_have_value("and then?")


def reopen_chat(page: Page) -> Locator:
    """Save the notebook and load the page again while its kernel runs (as when the notebook
    is opened again, or in another tab): the chat shows again from the kernel's widgets, its
    saved transcript hidden beside it. The chat's locator."""
    save_notebook(page)
    page.reload()
    chat = page.locator(".nbchat")
    chat.locator("textarea.nbchat-input-area").wait_for(timeout=120_000)
    transcript = page.locator(".nbchat-transcript")
    expect(transcript).to_have_count(1)
    expect(transcript).to_be_hidden()
    return chat


def save_notebook(page: Page) -> None:
    """File > Save, as a person saves; returns once the server has written the file."""

    def is_save(response: Response) -> bool:
        return response.request.method == "PUT" and "/api/contents/" in response.url

    with page.expect_response(is_save, timeout=60_000) as saved:
        page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
        label = re.compile(r"^Save( Notebook| and Checkpoint)?$")
        page.locator(".lm-Menu-itemLabel", has_text=label).first.click()
    assert saved.value.ok


def saved_transcript(path: Path) -> str:
    """The static transcript's HTML in the notebook saved at `path` (exactly one)."""
    notebook = nbformat.read(path, as_version=4)
    found = [
        output["data"]["text/html"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if 'class="nbchat-transcript"' in output.get("data", {}).get("text/html", "")
    ]
    assert len(found) == 1, f"{len(found)} transcripts in {path}"
    return str(found[0])

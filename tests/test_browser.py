"""One real-browser test: the quickstart notebook in JupyterLab, driven in Debian's chromium.

JupyterLab runs headless on 127.0.0.1 with a known token and every Jupyter directory in a temp
dir; the embedded SmolLM2 model starts when the notebook's `ChatUI()` asks for it
(NBCHAT_AUTOSTART=1). Playwright drives /usr/bin/chromium (never a downloaded browser): it runs
all cells, types a message into the widget's input, presses Enter, and checks that the reply
streams into the page while Stop is enabled. A long max_tokens keeps the reply streaming long
enough to see that; the test then presses Stop. A screenshot taken while the reply streams is
saved in test-artifacts/.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from nbchat.embedded.server import find_running

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "01-quickstart.ipynb"
ARTIFACTS = REPO / "test-artifacts"
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
MESSAGE = "Tell me a long story about a robot who learns to paint."
KERNEL_IDLE = re.compile(r"\(ipykernel\) \| Idle$")


@dataclass(frozen=True)
class Lab:
    url: str
    token: str
    log: Path


def find_chromium(path: Path = CHROMIUM) -> Path:
    """Debian's chromium, or a test failure that says how to install it (never a silent skip)."""
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(f"{INSTALL_HINT} (not found: {path})", pytrace=False)
    return path


@pytest.fixture
def chromium() -> Path:
    return find_chromium()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lab_environment(home: Path, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBCHAT_")}
    for name in ("config", "runtime", "data", "ipython", "workspace"):
        (scratch / name).mkdir(parents=True, exist_ok=True)
    env.update(
        NBCHAT_HOME=str(home),
        NBCHAT_LOCAL_MODEL="smollm",
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
            pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with opener.open(request, timeout=2):
                return  # urllib raises for any answer but a 2xx
        except OSError:
            time.sleep(0.2)  # not listening yet
    pytest.fail(
        f"JupyterLab did not answer at {url} in {START_SECONDS:g} s:\n{log.read_text()[-3000:]}"
    )


@pytest.fixture
def lab(home: Path, tmp_path: Path) -> Iterator[Lab]:
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1"]
    command += [f"--port={port}", "--ServerApp.port_retries=0", f"--ServerApp.token={TOKEN}"]
    command += [f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = tmp_path / "jupyterlab.log"
    with log.open("wb") as output:
        proc = subprocess.Popen(
            command,
            env=lab_environment(home, tmp_path),
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_up(url, proc, log)
        yield Lab(url, TOKEN, log)
    finally:
        stop_process_group(proc)
        server = find_running(home=home)
        if server is not None:
            server.stop()


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop JupyterLab and its kernels (its own process group), SIGKILL after a grace period."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def run_all_cells(page: Page) -> None:
    """Run > Run All Cells, once the kernel is ready (earlier, Lab would not run them)."""
    kernel = page.locator(".jp-StatusBar-TextItem", has_text=KERNEL_IDLE)
    expect(kernel).to_be_visible(timeout=120_000)
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


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.model
@pytest.mark.timeout(600)
def test_a_message_typed_into_the_widget_streams_a_reply_while_stop_is_enabled(
    chromium: Path, lab: Lab
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            chat_in_the_browser(page, lab)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "browser-quickstart-failure.png"))
            raise
        finally:
            browser.close()


def chat_in_the_browser(page: Page, lab: Lab) -> None:
    page.goto(f"{lab.url}/lab/tree/{NOTEBOOK.name}?token={lab.token}")
    run_all_cells(page)
    chat = page.locator(".nbchat")
    area = chat.locator("textarea.nbchat-input-area")
    area.wait_for(timeout=120_000)
    wait_for_cells_to_finish(page, timeout=300)
    replies = chat.locator(".nbchat-assistant")
    before = replies.count()
    stop = chat.locator("button", has_text="Stop")
    expect(stop).to_be_disabled()

    area.fill(MESSAGE)
    area.press("Enter")
    expect(stop).to_be_enabled(timeout=60_000)
    expect(chat.locator(".nbchat-user", has_text=MESSAGE)).to_have_count(1)
    expect(replies).to_have_count(before + 1, timeout=60_000)
    reply = replies.nth(before)
    expect(reply).not_to_have_text("", timeout=60_000)
    shown = len(reply.inner_text())
    # More text arrives while Stop is still enabled: the reply streams in, piece by piece.
    page.wait_for_function(
        "([el, n]) => el.innerText.length > n", arg=[reply.element_handle(), shown]
    )
    expect(stop).to_be_enabled()
    page.screenshot(path=str(ARTIFACTS / "browser-quickstart-streaming.png"))

    stop.click()
    expect(stop).to_be_disabled(timeout=30_000)
    expect(chat.locator(".nbchat-notice", has_text="Stopped by you")).to_have_count(1)


def test_a_missing_chromium_fails_the_test_saying_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        find_chromium(tmp_path / "chromium")
    assert str(failed.value) == f"{INSTALL_HINT} (not found: {tmp_path / 'chromium'})"
    assert "apt-get install chromium" in INSTALL_HINT

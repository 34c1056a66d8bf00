"""The static transcript: what a saved notebook shows of the chat where no kernel runs.

Fast tests render rows and display a real `ChatUI` through IPython's display machinery (a real
`InteractiveShell` whose publisher records what a kernel would send); the slow one executes a
notebook with nbclient against the test server and converts it with `jupyter nbconvert`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import openai
import pytest
from factories import assistant, user
from fakeserver import FakeServer, Reply
from helpers import recording_comms
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.display import display
from test_render import executable_parts

from nbchat.config import Settings
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.ui import ChatUI
from nbchat.ui.transcript import TRANSCRIPT_LIMIT, render_transcript

REPO = Path(__file__).resolve().parent.parent
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
HOSTILE = (
    "Here you go <script>alert('s')</script> <img src=x onerror=alert('i')> "
    "[click](javascript:alert('j')) and the MARKER-42 word."
)
HOSTILE_CALL = json.dumps(
    [{"id": "c1", "type": "function", "function": {"name": "<b onmouseover=x>", "arguments": "{}"}}]
)


def hostile_rows() -> list[tuple[Row, dict[str, Any] | None]]:
    return [
        (user("<script>alert('u')</script> hi"), None),
        (assistant(HOSTILE), None),
        (Row("assistant_full", "```html\n<script>x</script>\n```", "", "", HOSTILE_CALL), None),
        (Row("tool", "<iframe src=x></iframe>", "c1", "<svg onload=x>"), None),
        (Row("compacted", HOSTILE), {"rows_replaced": 3, "tokens_before": 9, "tokens_after": 2}),
        (Row("system", "<body onload=x>"), None),
    ]


def test_the_transcript_runs_nothing_the_model_wrote_and_says_whose_each_message_is() -> None:
    markup = render_transcript(hostile_rows())
    assert executable_parts(markup) == []
    assert "onclick" not in markup  # not even nbchat's own copy buttons: nothing runs
    assert "MARKER-42" in markup
    assert markup.index(">You<") < markup.index(">Assistant<")


def test_a_long_session_keeps_the_newest_messages_and_says_how_many_are_left_out() -> None:
    rows: list[tuple[Row, dict[str, Any] | None]] = [
        (user(f"message {i}."), None) for i in range(TRANSCRIPT_LIMIT + 5)
    ]
    markup = render_transcript(rows)
    assert "5 earlier messages not shown." in markup
    assert "message 4." not in markup and "message 5." in markup


def test_displaying_the_chat_shows_the_widget_then_a_transcript_each_turn_updates(
    shell: CapturingDisplayPublisher, store: Store, make_settings: Any
) -> None:
    settings: Settings = make_settings(context_token_threshold=50_000)
    with recording_comms(), FakeServer() as server:
        server.enqueue(Reply(text=HOSTILE))
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        ui = ChatUI(settings, store=store, client=client)
        try:
            display(ui)
            widget, transcript = shell.outputs
            assert set(widget["data"]) == {"text/plain", WIDGET_VIEW}
            assert set(transcript["data"]) == {"text/html"}
            display_id = transcript["transient"]["display_id"]
            assert "No messages yet." in transcript["data"]["text/html"]

            ui.send("hello there")
            assert ui.wait(20)
        finally:
            ui.close()
    update = shell.outputs[-1]
    assert update["update"] is True
    assert update["transient"] == {"display_id": display_id}
    shown = update["data"]["text/html"]
    assert "hello there" in shown and "MARKER-42" in shown
    assert executable_parts(shown) == []


class VisibleText(HTMLParser):
    """The text of a page outside <script>, <style> and <head>; and the scripts' text."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden_depth = 0
        self.script_type = ""
        self.visible: list[str] = []
        self.scripts: list[str] = []  # the text of scripts a browser runs (not JSON data blocks)
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self.hidden_depth += 1
        if tag == "script":
            self.script_type = dict(attrs).get("type") or "text/javascript"
        self.handlers += [f"{tag}[{name}={value}]" for name, value in attrs if name[:2] == "on"]
        self.handlers += [
            f"{tag}[{name}={value}]"
            for name, value in attrs
            if name in ("href", "src") and "javascript:" in (value or "").lower()
        ]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head"):
            self.hidden_depth -= 1

    def handle_data(self, data: str) -> None:
        if self.lasttag == "script" and self.hidden_depth:
            if "javascript" in self.script_type or self.script_type == "module":
                self.scripts.append(data)
        elif not self.hidden_depth:
            self.visible.append(data)


def chat_notebook(server_url: str) -> nbformat.NotebookNode:
    setup = (
        "import openai\n"
        "from nbchat import ChatUI\n"
        f"client = openai.OpenAI(base_url={server_url + '/v1'!r}, api_key='t', max_retries=0)\n"
        "ui = ChatUI(client=client)\n"
        "ui"
    )
    cells = [
        nbformat.v4.new_code_cell(setup),
        nbformat.v4.new_code_cell("ui.send('hello there')\nui.wait()"),
    ]
    return nbformat.v4.new_notebook(cells=cells)


def executed_chat_notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A notebook whose chat got HOSTILE as its reply, executed by nbclient and saved."""
    from nbclient import NotebookClient

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    path = tmp_path / "chat.ipynb"
    with FakeServer() as server:
        server.enqueue(Reply(text=HOSTILE))
        notebook = chat_notebook(server.url)
        # nbclient saves the widget state (its default), so nbconvert could render the widget:
        # the transcript must show as static HTML even then.
        NotebookClient(notebook, timeout=120, resources={"metadata": {"path": tmp_path}}).execute()
    assert "widgets" in notebook.metadata
    nbformat.write(notebook, path)
    return path


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_a_saved_notebook_converted_to_html_shows_the_chat_and_runs_none_of_the_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = executed_chat_notebook(tmp_path, monkeypatch)
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(path)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)

    page = VisibleText()
    page.feed((tmp_path / "chat.html").read_text())
    visible = " ".join(page.visible)
    assert "MARKER-42" in visible
    assert "You" in visible and "Assistant" in visible
    assert [script for script in page.scripts if "alert(" in script] == []
    assert page.handlers == []


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.browser
@pytest.mark.timeout(300)
def test_a_saved_notebook_opened_in_jupyterlab_without_the_chat_running_shows_the_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    from browser import CHROMIUM_ARGS, find_chromium, jupyter_server
    from playwright.sync_api import expect, sync_playwright

    chromium = find_chromium()
    path = executed_chat_notebook(tmp_path, monkeypatch)
    dialogs: list[str] = []
    with (
        jupyter_server("jupyterlab", path, home=home, scratch=tmp_path / "lab") as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("dialog", lambda dialog: dialogs.append(dialog.message))
            page.goto(f"{server.url}/lab/tree/{path.name}?token={server.token}")
            transcript = page.locator(".nbchat-transcript")
            expect(transcript).to_be_visible(timeout=120_000)
            expect(transcript).to_contain_text("MARKER-42")
            expect(transcript.locator(".nbchat-label", has_text="Assistant")).to_have_count(1)
            expect(page.locator(".nbchat")).to_have_count(0)  # the widget is not live here
        finally:
            browser.close()
    assert dialogs == []  # nothing from the reply ran (its script would alert)

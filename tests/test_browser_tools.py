"""The notebook tools in JupyterLab, driven in Debian's chromium, against the fake HTTP server.

The kernel's chat talks to `fakeserver.FakeServer` on 127.0.0.1 (no model): its first reply is
scripted to call the three notebook tools at once (list the variables, describe the DataFrame
`sales`, the last exception), the second is a scripted answer. The tools themselves run for
real in the notebook's kernel, on the notebook's real variables and its real KeyError; what
they returned is read back from the request the server received. The chat, cropped to the
widget with the DataFrame's preview opened, is saved as notebook-tools.png (`browser.SCREENSHOTS`).

The notebook is saved and reopened (a page reload) before the chat, while its kernel runs,
as when a notebook is opened again or in another tab: the chat's cell ran in an earlier page.
After the chat the notebook is saved from the browser (File > Save) and read from disk: its
static transcript holds the conversation as it stands after the chat, not as of the earlier
save (`nbchat.ui.transcript`; without it, the saved transcript still said "No messages yet.").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from browser import (
    ARTIFACTS,
    CHROMIUM_ARGS,
    KERNELSPEC,
    SCREENSHOTS,
    Server,
    find_chromium,
    jupyter_server,
    open_chat,
    reopen_chat,
    save_notebook,
    saved_transcript,
)
from fakeserver import FakeServer, Reply
from playwright.sync_api import Locator, expect, sync_playwright
from test_browser import NO_NEWS

CELLS = (
    'import pandas as pd\n\nsales = pd.DataFrame(\n    {"region": ["north", "south", "east", '
    '"west"], "units": [120, 95, 143, 80], "price": [9.5, 11.0, 8.75, 12.25]}\n)',
    "from nbchat import ChatUI\n\nui = ChatUI()\nui",
    'sales["profit"].sum()',
)
QUESTION = "Why did my last cell fail?"
CALLS = (
    ("c1", "list_notebook_variables", "{}"),
    ("c2", "describe_variable", json.dumps({"name": "sales"})),
    ("c3", "last_error", "{}"),
)
ANSWER = (
    "`sales` has no `profit` column: its columns are `region`, `units` and `price`. Add it "
    'first:\n\n```python\nsales["profit"] = sales["units"] * sales["price"]\n```'
)


def tools_notebook(path: Path) -> Path:
    cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC}), path)
    return path


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        server.enqueue(Reply(tool_calls=CALLS), Reply(text=ANSWER))
        yield server


@pytest.fixture
def lab(home: Path, tmp_path: Path, fake: FakeServer) -> Iterator[Server]:
    notebook = tools_notebook(tmp_path / "tools.ipynb")
    settings = tmp_path / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps(NO_NEWS))
    env = {"NBCHAT_BASE_URL": f"{fake.url}/v1", "NBCHAT_MODEL": "fake-model"}
    with jupyter_server("jupyterlab", notebook, home=home, scratch=tmp_path, env=env) as server:
        yield server


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(600)
def test_the_model_calls_the_notebook_tools_and_the_saved_notebook_holds_the_whole_chat(
    lab: Server, fake: FakeServer, tmp_path: Path
) -> None:
    chromium = find_chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 1800})
        try:
            page.goto(f"{lab.url}/lab/tree/tools.ipynb?token={lab.token}")
            open_chat(page)
            chat = reopen_chat(page)  # the chat's cell ran in an earlier page
            ask_why(chat)
            see_the_tool_cards(chat)
            chat.screenshot(path=str(SCREENSHOTS / "notebook-tools.png"))
            save_notebook(page)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "browser-tools-failure.png"))
            raise
        finally:
            browser.close()

    results = tool_results(fake)
    assert "sales" in results["list_notebook_variables"]
    assert "DataFrame" in results["list_notebook_variables"]
    assert "region" in results["describe_variable"] and "143" in results["describe_variable"]
    assert "KeyError" in results["last_error"] and "profit" in results["last_error"]

    transcript = saved_transcript(tmp_path / "root" / "tools.ipynb")
    assert QUESTION in transcript
    assert "Add it first" in transcript  # the last reply, written after the cell had finished
    for _call_id, name, _arguments in CALLS:
        assert f"<b>{name}</b>" in transcript


def ask_why(chat: Locator) -> None:
    area = chat.locator("textarea.nbchat-input-area")
    area.fill(QUESTION)
    area.press("Enter")
    reply = chat.locator(".nbchat-assistant", has_text="Add it first")
    expect(reply).to_have_count(1, timeout=60_000)
    expect(chat.locator("button", has_text="Send")).to_be_enabled(timeout=30_000)


def see_the_tool_cards(chat: Locator) -> None:
    """Each call and each result shows as a card; the call cards' icon is painted (no emoji
    font needed); the DataFrame's preview is opened for the screenshot."""
    for _call_id, name, _arguments in CALLS:
        card = chat.locator(".nbchat-card", has=chat.page.locator("summary b", has_text=name))
        expect(card).to_have_count(1)
        icon = card.locator(".nbchat-icon-tool")
        expect(icon).to_be_visible()
        box = icon.bounding_box()
        assert box is not None and box["width"] > 4 and box["height"] > 4
        mask = icon.evaluate("el => getComputedStyle(el).webkitMaskImage || ''")
        assert mask.startswith('url("data:image/svg+xml')
        results = chat.locator(".nbchat-card summary", has_text=f"{name} · result")
        expect(results).to_have_count(1)
    summary = chat.page.locator("summary", has_text="describe_variable · result")
    card = chat.locator(".nbchat-card", has=summary)
    card.locator("summary").click()
    preview = card.locator(".nbchat-result")
    expect(preview).to_be_visible()
    expect(preview).to_contain_text("region")


def tool_results(fake: FakeServer) -> dict[str, str]:
    """What each tool returned, as the second request carried it back to the server."""
    chats = [r for r in fake.requests if r.path.endswith("/chat/completions")]
    messages = chats[-1].body["messages"]
    by_id = {call_id: name for call_id, name, _arguments in CALLS}
    return {by_id[m["tool_call_id"]]: m["content"] for m in messages if m["role"] == "tool"}

"""The assistant acting on the open notebook in JupyterLab and Notebook 7, driven in Debian's
chromium against the test server (the model's calls scripted; the page, the kernel and the
widget's front-end code real).

The chat inserts a cell (it shows below the chat's own cell in the page at once), then edits
the first cell: the approval card shows the diff, nothing changes until Accept is clicked, and
after it the cell's editor holds the new source. The notebook is then saved from the browser
(File > Save) and read from disk: the saved `.ipynb` holds the inserted cell and the accepted
edit, written through the notebook model the page holds (`nbchat.ui.acting`). Then "rewind to
here" on the first message takes both back (the inserted cell removed, the edit undone, the
message back in the input), and the notebook saved again holds its first two cells as they
were. Screenshots of the edit's card and of the notebook after it go to `browser.SCREENSHOTS`
(acting-edit.png and acting-notebook.png from JupyterLab; test-artifacts/ for Notebook 7), the
rewound notebook to test-artifacts/.
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
    find_chromium,
    jupyter_server,
    open_chat,
    save_notebook,
)
from fakeserver import FakeServer, Reply
from playwright.sync_api import Locator, Page, expect, sync_playwright
from test_browser import NO_NEWS

FIRST = "x = 41\nprint(x)"
CHAT = "from nbchat import ChatUI\n\nui = ChatUI()\nui"
INSERTED = "y = x + 1  # put here by the assistant"
ASK_INSERT = "put y = x + 1 in a new cell"
ASK_EDIT = "make x 42 in the first cell"
APPS = {"jupyterlab": "lab/tree", "notebook": "notebooks"}


def acting_notebook(path: Path) -> Path:
    cells = [nbformat.v4.new_code_cell(FIRST), nbformat.v4.new_code_cell(CHAT)]
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC}), path)
    return path


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        server.enqueue(
            Reply(tool_calls=[("i1", "insert_cell", json.dumps({"source": INSERTED}))]),
            Reply(text="Inserted it below the chat."),
            Reply(
                tool_calls=[
                    ("e1", "edit_cell", json.dumps({"cell": "1", "old": "41", "new": "42"}))
                ]
            ),
            Reply(text="Edited the first cell."),
        )
        yield server


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(600)
@pytest.mark.parametrize("app", list(APPS))
def test_an_inserted_cell_and_an_accepted_edit_are_in_the_saved_notebook(
    app: str, fake: FakeServer, home: Path, tmp_path: Path
) -> None:
    chromium = find_chromium()
    notebook = acting_notebook(tmp_path / "acting.ipynb")
    settings = tmp_path / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps(NO_NEWS))
    env = {
        "NBCHAT_BASE_URL": f"{fake.url}/v1",
        "NBCHAT_MODEL": "fake-model",
        "NBCHAT_TOOL_POLICY": "ask",
    }
    ARTIFACTS.mkdir(exist_ok=True)
    shots = SCREENSHOTS if app == "jupyterlab" else ARTIFACTS
    suffix = "" if app == "jupyterlab" else "-notebook7"
    with (
        jupyter_server(app, notebook, home=home, scratch=tmp_path, env=env) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 1900})
        try:
            page.goto(f"{server.url}/{APPS[app]}/{notebook.name}?token={server.token}")
            chat = open_chat(page)
            insert_a_cell(page, chat)
            accept_an_edit(page, chat, shots / f"acting-edit{suffix}.png")
            page.screenshot(path=str(shots / f"acting-notebook{suffix}.png"))
            save_notebook(page)
            saved = nbformat.read(tmp_path / "root" / notebook.name, as_version=4)
            assert [cell.source for cell in saved.cells] == ["x = 42\nprint(x)", CHAT, INSERTED]
            rewind_both(page, chat, ARTIFACTS / f"acting-rewind{suffix}.png")
            save_notebook(page)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / f"browser-acting-{app}-failure.png"))
            raise
        finally:
            browser.close()

    saved = nbformat.read(tmp_path / "root" / notebook.name, as_version=4)
    assert [cell.source for cell in saved.cells] == [FIRST, CHAT]  # after the rewind


def ask(chat: Locator, text: str) -> None:
    area = chat.locator("textarea.nbchat-input-area")
    area.fill(text)
    area.press("Enter")


def insert_a_cell(page: Page, chat: Locator) -> None:
    ask(chat, ASK_INSERT)
    expect(chat.locator(".nbchat-assistant", has_text="Inserted it below")).to_have_count(
        1, timeout=60_000
    )
    cells = page.locator(".jp-Notebook .jp-Cell")
    expect(cells).to_have_count(3, timeout=30_000)
    expect(cells.nth(2).locator(".jp-InputArea")).to_contain_text("put here by the assistant")
    result = chat.locator(".nbchat-acting", has_text="insert_cell")
    expect(result).to_contain_text("Inserted a code cell at position 3")


def accept_an_edit(page: Page, chat: Locator, screenshot: Path) -> None:
    ask(chat, ASK_EDIT)
    card = chat.locator(".nbchat-approval", has_text="Accept this edit?")
    expect(card).to_have_count(1, timeout=60_000)
    expect(card.locator(".nbchat-del")).to_have_text("-x = 41")
    expect(card.locator(".nbchat-add")).to_have_text("+x = 42")
    first = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputArea")
    expect(first).to_contain_text("x = 41")  # nothing lands before Accept
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(screenshot))
    card.locator("button", has_text="Accept").first.click()
    expect(chat.locator(".nbchat-assistant", has_text="Edited the first cell")).to_have_count(
        1, timeout=60_000
    )
    expect(first).to_contain_text("x = 42")
    expect(chat.locator(".nbchat-acting", has_text="edit_cell")).to_contain_text("+x = 42")


def rewind_both(page: Page, chat: Locator, screenshot: Path) -> None:
    """ "rewind to here" on the first message: the inserted cell goes, the edit is undone, the
    message is back in the input."""
    chat.locator("button", has_text="rewind to here").first.click()
    notices = chat.locator(".nbchat-notice")
    expect(notices.filter(has_text="Rewound to before your message")).to_have_count(
        1, timeout=60_000
    )
    expect(notices.filter(has_text="(inserted by the assistant): removed")).to_have_count(1)
    expect(notices.filter(has_text="(edited by the assistant): restored")).to_have_count(1)
    cells = page.locator(".jp-Notebook .jp-Cell")
    expect(cells).to_have_count(2, timeout=30_000)
    expect(cells.first.locator(".jp-InputArea")).to_contain_text("x = 41")
    expect(chat.locator("textarea.nbchat-input-area")).to_have_value(ASK_INSERT)
    page.screenshot(path=str(screenshot))

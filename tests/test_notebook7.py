"""The chat in Notebook 7 (`jupyter notebook`), driven in Debian's chromium like the JupyterLab
test (`browser.py`): a small generated notebook displays `ChatUI()` on the embedded SmolLM2 and
is saved and reopened while its kernel runs; a message typed into the widget streams a reply
while Stop is enabled, Stop ends it as stopped, and the input is usable again. The chat,
cropped to the widget, is saved as chat-notebook7.png (`browser.SCREENSHOTS`). The notebook
saved from the browser (File > Save) holds the question and the stopped reply in its static
transcript. Nothing in the widget is JupyterLab-only (ipywidgets 8 and anywidget, JupyterLab's
CSS variables with fallbacks), so this also stands for other front ends built on them.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from browser import (
    ARTIFACTS,
    CHROMIUM_ARGS,
    KERNELSPEC,
    LONG_MESSAGE,
    SCREENSHOTS,
    find_chromium,
    jupyter_server,
    open_chat,
    reopen_chat,
    save_notebook,
    saved_transcript,
    stream_then_stop,
)
from playwright.sync_api import sync_playwright

SOURCE = "from nbchat import ChatUI\n\nui = ChatUI()\nui"


def chat_notebook(path: Path) -> Path:
    cells = [nbformat.v4.new_code_cell(SOURCE)]
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC})
    nbformat.write(notebook, path)
    return path


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.model
@pytest.mark.timeout(600)
def test_in_notebook_7_a_reply_streams_stop_ends_it_and_the_saved_notebook_holds_the_turn(
    home: Path, tmp_path: Path
) -> None:
    chromium = find_chromium()
    notebook = chat_notebook(tmp_path / "chat.ipynb")
    scratch = tmp_path / "notebook7"
    ARTIFACTS.mkdir(exist_ok=True)
    with (
        jupyter_server("notebook", notebook, home=home, scratch=scratch) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        try:
            page.goto(f"{server.url}/notebooks/{notebook.name}?token={server.token}")
            open_chat(page)
            chat = reopen_chat(page)  # the chat's cell ran in an earlier page
            stream_then_stop(page, chat, ARTIFACTS / "browser-notebook7-streaming.png")
            chat.locator("textarea.nbchat-input-area").fill("")
            chat.screenshot(path=str(SCREENSHOTS / "chat-notebook7.png"))
            save_notebook(page)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "browser-notebook7-failure.png"))
            raise
        finally:
            browser.close()
    # Saved in a page where the chat's cell never ran: the transcript holds the stopped turn.
    transcript = saved_transcript(scratch / "root" / notebook.name)
    assert LONG_MESSAGE in transcript
    assert transcript.rindex('class="nbchat-assistant"') > transcript.index(LONG_MESSAGE)

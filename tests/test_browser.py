"""One real-browser test: the quickstart notebook in JupyterLab, driven in Debian's chromium.

JupyterLab runs headless on 127.0.0.1 (`browser.jupyter_server`); Playwright runs all cells,
types a message into the widget's input, presses Enter, checks that the reply streams into the
page while Stop is enabled, and presses Stop (`browser.stream_then_stop`). A screenshot taken while
the reply streams is saved in test-artifacts/; the chat itself, cropped to the widget, is saved in
JupyterLab's light and dark themes as docs/chat-light.png and docs/chat-dark.png (the README
shows them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import (
    ARTIFACTS,
    CHROMIUM_ARGS,
    INSTALL_HINT,
    REPO,
    Server,
    find_chromium,
    jupyter_server,
    open_chat,
    stream_then_stop,
)
from playwright.sync_api import Locator, Page, expect, sync_playwright

NOTEBOOK = REPO / "notebooks" / "01-quickstart.ipynb"
DOCS = REPO / "docs"


@pytest.fixture
def chromium() -> Path:
    return find_chromium()


@pytest.fixture
def lab(home: Path, tmp_path: Path) -> Iterator[Server]:
    with jupyter_server("jupyterlab", NOTEBOOK, home=home, scratch=tmp_path) as server:
        yield server


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.model
@pytest.mark.timeout(600)
def test_a_message_typed_into_the_widget_streams_a_reply_while_stop_is_enabled(
    chromium: Path, lab: Server
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            page.goto(f"{lab.url}/lab/tree/{NOTEBOOK.name}?token={lab.token}")
            chat = open_chat(page)
            stream_then_stop(page, chat, ARTIFACTS / "browser-quickstart-streaming.png")
            save_in_both_themes(page, chat)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "browser-quickstart-failure.png"))
            raise
        finally:
            browser.close()


def save_in_both_themes(page: Page, chat: Locator) -> None:
    """The chat cropped to the widget, in JupyterLab Light, then switched to JupyterLab Dark."""
    DOCS.mkdir(exist_ok=True)
    chat.locator("textarea.nbchat-input-area").fill("")
    expect(page.locator("body[data-jp-theme-light='true']")).to_have_count(1)
    chat.screenshot(path=str(DOCS / "chat-light.png"))
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel", has_text="JupyterLab Dark").first.click()
    expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=30_000)
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=30_000)  # shown meanwhile
    chat.screenshot(path=str(DOCS / "chat-dark.png"))


def test_a_missing_chromium_fails_the_test_saying_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        find_chromium(tmp_path / "chromium")
    assert str(failed.value) == f"{INSTALL_HINT} (not found: {tmp_path / 'chromium'})"
    assert "apt-get install chromium" in INSTALL_HINT

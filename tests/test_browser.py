"""One real-browser test: the quickstart notebook in JupyterLab, driven in Debian's chromium.

JupyterLab runs headless on 127.0.0.1 (`browser.jupyter_server`); Playwright runs all cells,
types a message into the widget's input, presses Enter, checks that the reply streams into the
page while Stop is enabled, and presses Stop (`browser.stream_then_stop`). A screenshot taken while
the reply streams is saved in test-artifacts/; the chat itself, cropped to the widget, is saved in
JupyterLab's light and dark themes as chat-light.png and chat-dark.png. Back in the light theme,
the "request" link under the stopped reply shows the request as it was sent
(request-inspector.png), and `/compact` shows the preview card (compaction-preview.png); Accept
replaces it with the compaction card and its Undo button (compaction-undo.png). The README shows
these screenshots from docs/; the tests save them in test-artifacts/, and `scripts/screenshots`
writes them into docs/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import (
    ARTIFACTS,
    CHROMIUM_ARGS,
    INSTALL_HINT,
    LONG_MESSAGE,
    REPO,
    SCREENSHOTS,
    Server,
    find_chromium,
    jupyter_server,
    open_chat,
    stream_then_stop,
)
from playwright.sync_api import Locator, Page, expect, sync_playwright

NOTEBOOK = REPO / "notebooks" / "01-quickstart.ipynb"
# Enough history for `/compact` to propose something: the newest 4 rows are kept, and what the
# summary replaces must outweigh the facts kept beside it and the summary itself (at most 1,024
# tokens). The model's own replies are cut short, so a test run is pasted: ~1,600 tokens (a
# message must fit the 4.2k budget beside ~1.6k of system prompt and tools), in a code block
# (no wrapping) so that the chat stays short on screen. A chat a user would have: the README
# shows the checkpoint the default model writes of it (`scripts/screenshots`).
PASTED_RUN = (REPO / "tests" / "data" / "pasted_test_run.txt").read_text()
TURNS_TO_COMPACT = (
    f"My invoice tests fail:\n```\n{PASTED_RUN}```\nWhy does test_due_date_end_of_month fail?",
    "How should due_date add the terms instead?",
    "And why is the total 483.0000 rather than 483.00?",
)
# JupyterLab's "get notified about Jupyter news?" toast would sit over the chat's screenshots.
NO_NEWS = {"fetchNews": "false", "checkForUpdates": False}


@pytest.fixture
def chromium() -> Path:
    return find_chromium()


@pytest.fixture
def lab(home: Path, tmp_path: Path) -> Iterator[Server]:
    settings = tmp_path / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps(NO_NEWS))
    with jupyter_server("jupyterlab", NOTEBOOK, home=home, scratch=tmp_path) as server:
        yield server


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.model
@pytest.mark.timeout(900)
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
            switch_theme(page, "JupyterLab Light", light=True)
            inspect_last_request(chat)
            for message in TURNS_TO_COMPACT:
                ask(page, chat, message, chars=300)
            preview_then_accept_compaction(page, chat)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "browser-quickstart-failure.png"))
            raise
        finally:
            browser.close()


def save_in_both_themes(page: Page, chat: Locator) -> None:
    """The chat cropped to the widget, in JupyterLab Light, then switched to JupyterLab Dark."""
    SCREENSHOTS.mkdir(exist_ok=True)
    chat.locator("textarea.nbchat-input-area").fill("")
    expect(page.locator("body[data-jp-theme-light='true']")).to_have_count(1)
    chat.screenshot(path=str(SCREENSHOTS / "chat-light.png"))
    switch_theme(page, "JupyterLab Dark", light=False)
    chat.screenshot(path=str(SCREENSHOTS / "chat-dark.png"))


def switch_theme(page: Page, theme: str, *, light: bool) -> None:
    """Settings > Theme > `theme`; returns once the page shows it (the splash shows meanwhile)."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel", has_text=theme).first.click()
    shown = f"body[data-jp-theme-light='{str(light).lower()}']"
    expect(page.locator(shown)).to_have_count(1, timeout=30_000)
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=30_000)


def inspect_last_request(chat: Locator) -> None:
    """The "request" link under the last (stopped) reply shows the request as it was sent:
    the system prompt and the user's message among its parts."""
    chat.locator("button.nbchat-request-link").last.click()
    panel = chat.locator(".nbchat-request").last
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel).to_contain_text("tokens estimated")
    expect(panel.locator("summary", has_text="system")).not_to_have_count(0)
    expect(panel).to_contain_text(LONG_MESSAGE)
    panel.scroll_into_view_if_needed()
    chat.screenshot(path=str(SCREENSHOTS / "request-inspector.png"))


def ask(page: Page, chat: Locator, message: str, *, chars: int) -> None:
    """Send `message`; once the reply is `chars` characters long (or ends), Stop it if it still
    streams (the model's replies are long: 4,000 tokens at most). Waits until the chat is idle."""
    area = chat.locator("textarea.nbchat-input-area")
    replies, asked = chat.locator(".nbchat-assistant"), chat.locator(".nbchat-user")
    before, questions = replies.count(), asked.count()
    area.fill(message)
    area.press("Enter")
    expect(asked).to_have_count(questions + 1, timeout=30_000)
    expect(replies).to_have_count(before + 1, timeout=60_000)
    stop = chat.locator("button", has_text="Stop")
    page.wait_for_function(
        "([el, stop, n]) => el.innerText.length > n || stop.disabled",
        arg=[replies.nth(before).element_handle(), stop.element_handle(), chars],
        timeout=240_000,
    )
    # Clicked in the page only while enabled: the reply may end on its own at any moment.
    stop.evaluate("button => { if (!button.disabled) button.click(); }")
    expect(stop).to_be_disabled(timeout=60_000)
    expect(area).to_be_enabled()


def preview_then_accept_compaction(page: Page, chat: Locator) -> None:
    """`/compact` shows the preview card with Accept, Edit, Discard; Accept replaces it with
    the compaction card, which offers Undo."""
    area = chat.locator("textarea.nbchat-input-area")
    area.fill("/compact")
    area.press("Enter")
    preview = chat.locator(".nbchat-preview")
    expect(preview).to_be_visible(timeout=240_000)  # the model writes the summary first
    expect(preview).to_contain_text("Proposed compaction")
    for name in ("Accept", "Edit", "Discard"):
        expect(preview.get_by_role("button", name=name, exact=True)).to_be_visible()
    # The card is taller than the page: the page grows until it fits (JupyterLab scrolls the
    # notebook inside a panel, so a screenshot of a taller element would be cut).
    size = page.viewport_size
    page.set_viewport_size({"width": 1280, "height": 3000})
    preview.scroll_into_view_if_needed()
    preview.screenshot(path=str(SCREENSHOTS / "compaction-preview.png"))
    if size is not None:
        page.set_viewport_size(size)

    preview.get_by_role("button", name="Accept", exact=True).click()
    expect(preview).to_contain_text("accepted", timeout=60_000)
    card = chat.locator(".nbchat-compacted").last
    expect(card).to_be_visible(timeout=60_000)
    expect(card).to_contain_text("Earlier conversation compacted")
    undo = chat.get_by_role("button", name="Undo", exact=True)
    expect(undo).to_be_visible()
    expect(undo).to_be_enabled()
    # The card, its "What was replaced" view and Undo: the widget box around the summary.
    card.locator("xpath=ancestor::div[contains(@class, 'widget-vbox')][1]").screenshot(
        path=str(SCREENSHOTS / "compaction-undo.png")
    )


def test_a_missing_chromium_fails_the_test_saying_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        find_chromium(tmp_path / "chromium")
    assert str(failed.value) == f"{INSTALL_HINT} (not found: {tmp_path / 'chromium'})"
    assert "apt-get install chromium" in INSTALL_HINT

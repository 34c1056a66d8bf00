"""What the chat looks like, over the real widget tree: whose each message is, the reply's stats
shown once, and colours that follow JupyterLab's theme (with fallbacks for other front ends)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets
import openai
import pytest
from fakeserver import FakeServer, Reply
from helpers import recording_comms, shown_text

from nbchat.config import Settings
from nbchat.conversation.events import RequestStarted
from nbchat.llm.reader import TextDelta, TextWithdrawn
from nbchat.store.store import Store
from nbchat.ui import ChatUI
from nbchat.ui.controls import CSS as INPUT_CSS
from nbchat.ui.messages import MessageList
from nbchat.ui.render import STYLE
from nbchat.ui.view import EventView

STATS = re.compile(r"\d+ tokens · [\d.]+ tok/s · [\d.]+ s")
# A colour written out: a hex value, or rgb()/hsl() with any number in it.
COLOUR = re.compile(r"#[0-9a-fA-F]{3,8}\b|\b(?:rgba?|hsla?)\([^)]*\)")


@pytest.fixture
def chat(store: Store, make_settings: Any) -> Iterator[tuple[ChatUI, FakeServer]]:
    settings: Settings = make_settings(context_token_threshold=50_000)
    with recording_comms(), FakeServer() as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        ui = ChatUI(settings, store=store, client=client)
        yield ui, server
        ui.close()


def labelled(root: widgets.Widget) -> list[tuple[str, str]]:
    """(label, text) of each message under `root`, in order: a widget carrying a
    `nbchat-user`/`nbchat-assistant` class, its label and its shown text."""
    found: list[tuple[str, str]] = []

    def walk(widget: widgets.Widget) -> None:
        classes = set(getattr(widget, "_dom_classes", ()))
        if classes & {"nbchat-user", "nbchat-assistant"}:
            text = shown_text(widget)
            label = re.search(r'<div class="nbchat-label">([^<]*)</div>', text)
            words = re.sub(r"<[^>]+>", " ", text).split()
            found.append((label.group(1) if label else "", " ".join(words)))
            return
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(root)
    return found


def test_each_message_says_whose_it_is_while_streaming_and_when_loaded_again(
    chat: tuple[ChatUI, FakeServer], store: Store, make_settings: Any
) -> None:
    ui, server = chat
    server.enqueue(Reply(text="Fine, thanks.", chunk_size=4))
    ui.send("How are you?")
    assert ui.wait(20)
    expected = [("You", "You How are you?"), ("Assistant", "Assistant Fine, thanks.")]
    assert labelled(ui.messages.box) == expected
    again = ChatUI(
        make_settings(context_token_threshold=50_000),
        store=store,
        session_id=ui.conversation.session_id,
        client=openai.OpenAI(base_url=server.url + "/v1", api_key="t", max_retries=0),
    )
    try:
        assert labelled(again.messages.box) == expected
    finally:
        again.close()


def test_the_replys_stats_are_shown_once_under_it_and_the_status_says_ready(
    chat: tuple[ChatUI, FakeServer],
) -> None:
    ui, server = chat
    server.enqueue(Reply(text="fine", usage=(10, 25), delay=0.01))
    ui.send("how are you?")
    assert ui.wait(20)
    assert len(STATS.findall(shown_text(ui))) == 1
    assert len(STATS.findall(shown_text(ui.messages.box))) == 1
    assert ui.status == "ready"


def test_withdrawn_text_vanishes_and_the_status_says_why_until_the_next_request() -> None:
    with recording_comms():
        messages = MessageList()
        view = EventView(messages, widgets.HTML(), lambda: None)
        view.handle(RequestStarted(2))
        view.handle(TextDelta("I have read your notes."))
        (box,) = messages.box.children
        view.handle(TextWithdrawn("the answer named nothing the tool results show"))
        assert box.layout.display == "none"
        asking = "asking again: the answer named nothing the tool results show…"
        assert view.status_text == asking
        view.handle(RequestStarted(2))  # the request asking again
        assert view.status_text == asking
        view.handle(TextDelta("It is on Thursday."))
        assert [child.layout.display for child in messages.box.children] == ["none", None]
        view.handle(RequestStarted(3))  # a later round is no longer asking again
        assert view.status_text == "thinking…"


def var_without_fallback(css: str) -> list[str]:
    return re.findall(r"var\(--[\w-]+\s*\)", css)


def colours_outside_fallbacks(css: str) -> list[str]:
    """Colours written out anywhere but as the fallback of a theme variable."""
    without_fallbacks = re.sub(r"var\(--[\w-]+\s*,\s*(?:[^()]|\([^()]*\))*\)", "var()", css)
    return COLOUR.findall(without_fallbacks)


def test_every_colour_comes_from_the_theme_with_a_fallback(
    chat: tuple[ChatUI, FakeServer],
) -> None:
    ui, server = chat
    server.enqueue(Reply(text="fine", usage=(10, 25)))
    ui.send("hi")
    assert ui.wait(20)
    for css in (STYLE, INPUT_CSS, shown_text(ui)):
        assert var_without_fallback(css) == []
        assert colours_outside_fallbacks(css) == []
    assert "--jp-layout-color2" in STYLE and "--jp-brand-color1" in STYLE


@pytest.mark.parametrize(
    ("css", "problems"),
    [
        ("color: var(--jp-ui-font-color1);", ["var(--jp-ui-font-color1)"]),
        ("color: #fff;", ["#fff"]),
        ("color: var(--jp-ui-font-color1, #333);", []),
        ("background: var(--jp-layout-color2, rgba(127, 127, 127, 0.1));", []),
    ],
)
def test_the_colour_check_finds_what_a_dark_theme_would_break_on(
    css: str, problems: list[str]
) -> None:
    assert var_without_fallback(css) + colours_outside_fallbacks(css) == problems

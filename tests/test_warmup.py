"""The background warm-up is second to the user (issue 19 item 7): a message sent at once cancels
it before its request is sent; one sent while its request waits for the server closes that
request and is answered; closing the chat or changing session closes it too. Over real HTTP,
with the test server holding the warm-up's headers as llama.cpp does while it reads a prompt."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakeserver import FakeServer, Reply
from fixtures_server import client_for

from nbchat.config import Settings
from nbchat.conversation.events import Done
from nbchat.conversation.loop import Conversation
from nbchat.store.store import Store

HOLD = 30.0  # how long the server holds the warm-up's headers: a passing test never waits it out


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def chat(
    fake: FakeServer, store: Store, make_settings: Callable[..., Settings], tmp_path: Path
) -> Iterator[Conversation]:
    settings = make_settings(base_url=fake.url + "/v1", notebook_tools=False)
    conversation = Conversation(settings, store, client=client_for(fake.url, tmp_path))
    conversation.new_session()
    yield conversation
    conversation.close()


def warm_ups(fake: FakeServer) -> list[int]:
    """The index in the request log of each warm-up request (one token, nothing else)."""
    return [i for i, body in enumerate(fake.chat_requests()) if body.get("max_tokens") == 1]


def test_a_message_sent_at_once_cancels_the_warm_up_before_it_is_sent(
    fake: FakeServer, chat: Conversation
) -> None:
    chat.warmer.start(chat.warm_up)  # as `connect` starts it on the embedded server
    assert list(chat.send("hello"))[-1] == Done()
    assert chat.warmer.wait(HOLD)
    assert warm_ups(fake) == []
    assert len(fake.chat_requests()) == 1  # the message's own request only


def test_a_message_sent_while_the_warm_up_waits_for_the_server_closes_its_request(
    fake: FakeServer, chat: Conversation
) -> None:
    fake.enqueue(Reply(text="!", fault="hold_headers", hold=HOLD))
    chat.warmer.start(chat.warm_up, grace=0)
    assert fake.wait_for_holds(held=1, timeout=HOLD)
    assert list(chat.send("hello"))[-1] == Done()
    assert fake.wait_for_holds(hung_up=1, timeout=HOLD)  # closed before the server answered it
    assert chat.warmer.wait(HOLD)
    assert fake.hung_up == fake.held and warm_ups(fake) == [0]
    assert chat.history.rows[-1].role == "assistant"


def close(chat: Conversation) -> None:
    chat.close()


def new_session(chat: Conversation) -> None:
    chat.new_session()


def resume(chat: Conversation) -> None:
    chat.resume(chat.store.create_session("other"))


@pytest.mark.parametrize("action", [close, new_session, resume])
def test_closing_or_changing_session_closes_the_warm_ups_request(
    fake: FakeServer, chat: Conversation, action: Callable[[Conversation], None]
) -> None:
    fake.enqueue(Reply(text="!", fault="hold_headers", hold=HOLD))
    chat.warmer.start(chat.warm_up, grace=0)
    assert fake.wait_for_holds(held=1, timeout=HOLD)
    action(chat)
    assert fake.wait_for_holds(hung_up=1, timeout=HOLD)
    assert chat.warmer.wait(HOLD)

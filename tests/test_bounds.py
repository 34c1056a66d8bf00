"""A reply is bounded and its failures are translated, over real HTTP: a server that sends bytes
that are not UTF-8, one that ignores max_tokens and floods, one that sends only keep-alive
comments, one that sends a line that never ends, and the stream loop that must not swallow a
bug once Stop is set.

Each case is checked at the client (`stream_chat`) and, where the user sees it, through the
conversation loop: the partial reply is kept as a row, a notice says what happened, and the next
send works.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from factories import assistant, user
from fakeserver import FakeServer, Reply
from fixtures_server import CHAT, Canned, ScriptedServer, chunk, client_for
from helpers import run, saved

from nbchat.config import Settings
from nbchat.conversation.events import Done, Failed, Notice
from nbchat.conversation.loop import Conversation
from nbchat.errors import ServerError
from nbchat.history import Row
from nbchat.llm.client import reply_char_limit, stream_chat
from nbchat.llm.reader import TextDelta
from nbchat.llm.transport import BoundedEvents, event_byte_limit
from nbchat.stopping import StopSignal
from nbchat.store.store import Store

MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
KEPT = "The partial reply was kept; retry for a complete one."


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def client_with(fake: FakeServer, tmp_path: Path, **overrides: Any) -> openai.OpenAI:
    return client_for(fake.url, tmp_path, **overrides)


def streamed(client: openai.OpenAI, **options: Any) -> tuple[str, BaseException | None]:
    """The text that arrived, and the error that ended the stream (None: it finished)."""
    parts: list[str] = []
    try:
        for event in stream_chat(client, MESSAGES, model="m", **options):
            if isinstance(event, TextDelta):
                parts.append(event.text)
    except ServerError as exc:
        return "".join(parts), exc
    return "".join(parts), None


def conversation(fake: FakeServer, store: Store, settings: Settings) -> Conversation:
    client = openai.OpenAI(
        base_url=fake.url + "/v1",
        api_key="test",
        max_retries=0,
        timeout=openai.Timeout(settings.request_timeout, connect=settings.connect_timeout),
    )
    return Conversation(settings, store, client=client)


def fails_with_notice(events: list[Any], partial: str, message: str) -> None:
    """The turn kept `partial` as its reply, said so in a notice and failed with `message`."""
    last = events[-1]
    assert isinstance(last, Failed), last
    assert last.message == message
    assert last.traceback == ""
    assert saved(events)[1:] == [
        assistant(partial),
        Row("system", f"The reply was cut off: {message}"),
    ]
    assert [e.text for e in events if isinstance(e, Notice)] == [
        f"The reply was cut off: {message}"
    ]


# Bytes that are not UTF-8


def test_bytes_that_are_not_utf8_are_a_server_error_after_the_partial_reply(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.enqueue(Reply(text="abcdefgh", chunk_size=2, fault="bad_bytes", cut_after=3))
    text, error = streamed(client_with(fake, tmp_path))
    assert text == "abcd"
    assert str(error) == (
        f"The model server at {fake.url}/v1 sent bytes that are not UTF-8 in the middle of the "
        f"reply (byte ff). {KEPT}"
    )


def test_bytes_that_are_not_utf8_keep_the_partial_reply_in_the_conversation(
    fake: FakeServer, store: Store, make_settings: Any
) -> None:
    settings = make_settings(base_url=fake.url + "/v1")
    chat = conversation(fake, store, settings)
    fake.enqueue(Reply(text="abcdefgh", chunk_size=2, fault="bad_bytes", cut_after=3))
    events = run(chat, "hi")
    message = (
        f"The model server at {fake.url}/v1 sent bytes that are not UTF-8 in the middle of the "
        f"reply (byte ff). {KEPT}"
    )
    fails_with_notice(events, "abcd", message)
    fake.enqueue(Reply(text="fine now"))
    again = run(chat, "again?")
    assert again[-1] == Done()
    assert saved(again) == [user("again?"), assistant("fine now")]


# A server that ignores max_tokens


def test_a_flood_is_cut_at_the_bound_derived_from_max_tokens(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.enqueue(Reply(fault="flood", chunk_size=100_000))
    limit = reply_char_limit(100)
    text, error = streamed(client_with(fake, tmp_path), max_tokens=100)
    assert text == "y" * limit
    assert str(error) == (
        f"The model server at {fake.url}/v1 sent more than {limit:,} characters for one reply, "
        "far more than its max_tokens allows, so the reply was cut there. The partial reply "
        "was kept; check that the server honours max_tokens, or raise NBCHAT_MAX_TOKENS."
    )


def test_the_bound_grows_with_max_tokens_and_has_a_floor() -> None:
    assert reply_char_limit(4096) == 4096 * 16
    assert reply_char_limit(1) == reply_char_limit(10) == 16_384
    assert reply_char_limit(None) == 32_768 * 16


def test_a_flood_in_a_conversation_keeps_the_cut_reply_and_says_so(
    fake: FakeServer, store: Store, make_settings: Any
) -> None:
    settings = make_settings(base_url=fake.url + "/v1", max_tokens=2000)
    chat = conversation(fake, store, settings)
    fake.enqueue(Reply(fault="flood", chunk_size=50_000))
    events = run(chat, "write a lot")
    limit = 2000 * 16
    message = (
        f"The model server at {fake.url}/v1 sent more than {limit:,} characters for one reply, "
        "far more than its max_tokens allows, so the reply was cut there. The partial reply "
        "was kept; check that the server honours max_tokens, or raise NBCHAT_MAX_TOKENS."
    )
    fails_with_notice(events, "y" * limit, message)


# A line that never ends


def endless_line_message(url: str, max_tokens: int, note: str = KEPT) -> str:
    limit = event_byte_limit(reply_char_limit(max_tokens))
    return (
        f"The model server at {url}/v1 sent more than {limit:,} bytes in one server-sent event "
        "without ending it, far more than one reply may take, so the stream was given up "
        "before it could fill this kernel's memory. Check the server (or a proxy in front of "
        f"it): its stream is broken. {note}"
    )


def test_a_line_that_never_ends_is_refused_at_the_event_bound(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.enqueue(Reply(text="abcdefgh", chunk_size=2, fault="endless_line", cut_after=3))
    text, error = streamed(client_with(fake, tmp_path), max_tokens=100)
    assert text == "abcd"
    assert str(error) == endless_line_message(fake.url, 100)
    # Compression would inflate bytes behind the bound's back: the request asks for none.
    assert fake.requests[-1].headers["accept-encoding"] == "identity"


def test_an_endless_line_before_any_text_says_nothing_arrived(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.enqueue(Reply(text="never", fault="endless_line", cut_after=0))
    text, error = streamed(client_with(fake, tmp_path), max_tokens=100)
    nothing = "Nothing had arrived yet; retry, and check the server's log if it happens again."
    assert (text, str(error)) == ("", endless_line_message(fake.url, 100, nothing))


def test_an_endless_line_in_a_conversation_keeps_the_reply_so_far_and_says_so(
    fake: FakeServer, store: Store, make_settings: Any
) -> None:
    settings = make_settings(base_url=fake.url + "/v1", max_tokens=100)
    chat = conversation(fake, store, settings)
    fake.enqueue(Reply(text="abcdefgh", chunk_size=2, fault="endless_line", cut_after=3))
    events = run(chat, "hi")
    fails_with_notice(events, "abcd", endless_line_message(fake.url, 100))
    fake.enqueue(Reply(text="fine now"))
    again = run(chat, "again?")
    assert again[-1] == Done()
    assert saved(again) == [user("again?"), assistant("fine now")]


@pytest.mark.parametrize(
    ("pieces", "refused"),
    [
        ([b"data: " + b"x" * 90 + b"\n\n"] * 50, False),  # many events, each under the bound
        ([b"data: " + b"x" * 90 + b"\r\n\r\n"] * 50, False),  # CRLF line ends
        ([b"data: x\r", b"\ndata: y\r\n"] * 20, True),  # a CRLF split across reads ends no event
        ([b"data: " + b"x" * 30 + b"\n"] * 4, True),  # short lines, one event over the bound
        ([b"x" * 60, b"x" * 60], True),  # one line over the bound, across two reads
    ],
)
def test_the_event_bound_counts_bytes_since_the_last_blank_line(
    pieces: list[bytes], refused: bool
) -> None:
    body = BoundedEvents(httpx2.ByteStream(b""), limit=100, url="http://x")
    body.inner = iter(pieces)  # type: ignore[assignment]
    if refused:
        with pytest.raises(
            ServerError, match="more than 100 bytes in one server-sent event .*broken.$"
        ):
            list(body)
    else:
        assert list(body) == pieces


# A stream of keep-alive comments


def test_a_stream_of_keepalives_times_out_a_second_after_the_read_timeout(
    fake: FakeServer, tmp_path: Path
) -> None:
    fake.enqueue(Reply(text="abcdef", chunk_size=2, fault="keepalive", stall_after=2))
    client = client_with(fake, tmp_path, request_timeout=0.5)
    text, error = streamed(client)
    assert text == "ab"
    assert str(error) == (
        f"The model server at {fake.url}/v1 sent no data for 1.5 s (only keep-alive comments), "
        f"so the reply was given up. {KEPT} If the model is just slow, raise "
        "NBCHAT_REQUEST_TIMEOUT."
    )


def test_keepalives_before_any_data_time_out_too(
    fake: FakeServer, store: Store, make_settings: Any
) -> None:
    settings = make_settings(base_url=fake.url + "/v1", request_timeout=0.5)
    chat = conversation(fake, store, settings)
    fake.enqueue(Reply(text="never", fault="keepalive", stall_after=1))
    events = run(chat, "hi")
    last = events[-1]
    assert isinstance(last, Failed)
    assert last.message == (
        f"The model server at {fake.url}/v1 sent no data for 1.5 s (only keep-alive comments), "
        "so the reply was given up. Nothing had arrived yet; retry, and check the server's log "
        "if it happens again. If the model is just slow, raise NBCHAT_REQUEST_TIMEOUT."
    )
    assert saved(events) == [user("hi")]


def test_a_slow_server_that_sends_data_is_not_idle(fake: FakeServer, tmp_path: Path) -> None:
    # Every chunk comes well within the timeout, though the whole reply takes longer than it.
    fake.enqueue(Reply(text="abcdefghij", chunk_size=1, delay=0.1))
    text, error = streamed(client_with(fake, tmp_path, request_timeout=0.6))
    assert (text, error) == ("abcdefghij", None)


# Stop does not hide a bug


def test_an_error_after_stop_that_is_not_the_closed_stream_is_raised(tmp_path: Path) -> None:
    # The consumer presses Stop on the first text delta; the same chunk then carries a
    # malformed tool-call fragment, which the reader trips over. That is a bug to surface,
    # not the stream closing under Stop.
    with ScriptedServer() as scripted:
        events = [chunk({"content": "hi", "tool_calls": [5]}), chunk(finish="stop"), "[DONE]"]
        scripted.add(CHAT, Canned(events=events))
        client = client_for(scripted.url, tmp_path)
        stop = StopSignal()
        stream = stream_chat(client, MESSAGES, model="m", stop=stop)
        assert next(stream) == TextDelta("hi")
        stop.set()
        with pytest.raises(AttributeError):
            next(stream)

"""Driving the summariser: chunk by chunk, cancel, failures; and the OpenAI-backed summariser."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import openai
import pytest
from compaction_strategies import SUMMARY, FakeSummariser
from fakeserver import FakeServer, Reply
from fixtures_server import Canned, ScriptedServer, client_for, settings_for

from nbchat.compaction import modelsummariser as summariser_module
from nbchat.compaction.modelsummariser import OpenAISummariser, to_compaction_error
from nbchat.compaction.result import SummaryReply
from nbchat.compaction.writer import SummaryWriter, write_digest
from nbchat.config import Settings
from nbchat.embedded.server import start_server
from nbchat.errors import (
    CompactionError,
    ContextOverflowError,
    NbchatError,
    ServerError,
    ServerUnavailableError,
)
from nbchat.history import Message
from nbchat.llm.reader import Finish, StreamEvent, TextDelta, Usage

BLOCKS = [f"[User]: message {n} " + "x" * 1500 for n in range(12)]  # ~500 tokens each


def digest(fake: FakeSummariser, blocks: Sequence[str] = BLOCKS, **options: Any) -> Any:
    values: dict[str, Any] = {"previous": "", "window": 2000, "max_tokens": 200, "fmt": "markdown"}
    values.update(options)
    return write_digest(fake, blocks, **values)


def test_each_chunk_updates_the_summary_so_far() -> None:
    fake = FakeSummariser(lambda messages: f"## Goal\nafter {len(fake.requests)}")
    result = digest(fake)
    assert result.chunks == result.usage.requests == len(fake.requests) > 2
    assert result.text == f"## Goal\nafter {result.usage.requests}"
    assert "<previous-summary>" not in fake.prompts[0]
    assert "<previous-summary>\n## Goal\nafter 1\n</previous-summary>" in fake.prompts[1]
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (
        100 * result.usage.requests,
        20 * result.usage.requests,
    )


def test_a_previous_summary_is_updated_from_the_first_request() -> None:
    fake = FakeSummariser()
    digest(fake, BLOCKS[:1], previous="## Goal\nolder")
    assert "<previous-summary>\n## Goal\nolder\n</previous-summary>" in fake.prompts[0]


def test_nothing_to_summarise_keeps_the_previous_summary_without_a_request() -> None:
    fake = FakeSummariser()
    assert digest(fake, [], previous="kept").text == "kept"
    assert fake.requests == []


def test_a_window_too_small_for_any_transcript_is_a_clear_error() -> None:
    with pytest.raises(CompactionError) as caught:
        digest(FakeSummariser(), window=900, max_tokens=200)
    assert str(caught.value).startswith(
        "The summariser's window (900 tokens) leaves no room for the transcript"
    )
    assert "raise summariser_context or lower summary_max_tokens" in str(caught.value)


def test_a_stopped_reply_is_a_cancel_not_an_error() -> None:
    class Stopped(FakeSummariser):
        def summarise(self, messages: Sequence[Message], **options: Any) -> SummaryReply:
            super().summarise(messages, **options)
            return SummaryReply("half a summ", finish_reason="stopped")

    result = digest(Stopped())
    assert (result.cancelled, result.usage.requests) == (True, 1)


def test_a_reply_cut_at_max_tokens_is_kept_with_a_warning() -> None:
    class Cut(FakeSummariser):
        def summarise(self, messages: Sequence[Message], **options: Any) -> SummaryReply:
            super().summarise(messages, **options)
            return SummaryReply(SUMMARY, finish_reason="length")

    result = digest(Cut(), BLOCKS[:1])
    assert result.text == SUMMARY
    assert result.warnings == ("the summary was cut at its max_tokens",)


def test_the_window_is_asked_once_of_the_own_summariser_and_defaults_to_8192(
    tmp_path: Path,
) -> None:
    with ScriptedServer() as server, client_for(server.url, tmp_path) as client:
        server.add("/props", Canned(body={"n_ctx": 3000}), Canned(body={"n_ctx": 3000}))
        settings = settings_for(server.url, tmp_path)
        writer = SummaryWriter(None, client=client, model="m", settings=settings)
        assert (writer.window, writer.window) == (3000, 3000)
        given = SummaryWriter(None, client=client, model="m", settings=settings, window=5000)
        assert given.window == 5000
        asked = [path for path, _ in server.requests if path == "/props"]
    assert asked == ["/props"]
    with ScriptedServer() as silent, client_for(silent.url, tmp_path) as client:
        settings = settings_for(silent.url, tmp_path)
        assert SummaryWriter(None, client=client, model="m", settings=settings).window == 8192
    # A summariser handed in is asked nothing but summaries: the window is the default.
    assert SummaryWriter(FakeSummariser()).window == 8192


def test_an_overflow_teaches_the_writer_the_real_window() -> None:
    def overflow(messages: Sequence[Message]) -> str:
        cause = ContextOverflowError("too long", prompt_tokens=9000, context_size=4096)
        raise to_compaction_error(cause) from cause

    writer = SummaryWriter(FakeSummariser(overflow), window=16_000)
    with pytest.raises(CompactionError, match="too big for the summariser's context window"):
        writer.write(BLOCKS, previous="", max_tokens=200, fmt="json")
    assert writer.window == 4096


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            ContextOverflowError("x", prompt_tokens=9000, context_size=4096),
            "The summary request was too big for the summariser's context window (9,000 "
            "tokens; its window holds 4,096). The history was left as it was. Set "
            "summariser_context (NBCHAT_SUMMARISER_CONTEXT) to the summariser's real window so "
            "the input is summarised in chunks, then compact again.",
        ),
        (
            ServerUnavailableError("No model server at http://h — start one."),
            "The summariser could not be reached: No model server at http://h — start one. The "
            "history was left as it was; compact again once the server answers.",
        ),
        (
            ServerError("The server answered 500.", status=500),
            "The summariser failed: The server answered 500. The history was left as it was; "
            "compact again, or set another summary_model if it keeps failing.",
        ),
    ],
)
def test_client_errors_become_compaction_errors_that_say_what_to_do(
    error: NbchatError, expected: str
) -> None:
    assert str(to_compaction_error(error)) == expected


def test_the_openai_summariser_does_no_io_until_it_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[Settings] = []
    monkeypatch.setattr(summariser_module, "build_client", lambda s: built.append(s))
    summariser = OpenAISummariser(model="m")
    assert built == []
    assert repr(summariser) == "OpenAISummariser(model='m')"


def test_a_rejected_response_format_is_retried_and_then_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[Mapping[str, Any] | None] = []

    def fake_stream(client: object, messages: object, **options: Any) -> Iterator[StreamEvent]:
        sent.append(options["response_format"])
        if options["response_format"] is not None:
            raise ServerError("response_format is not supported", status=400)
        yield TextDelta("## Goal\nx")
        yield Usage(50, 5)
        yield Finish("stop")

    monkeypatch.setattr(summariser_module, "stream_chat", fake_stream)
    settings = Settings(base_url="http://127.0.0.1:9/v1")
    summariser = OpenAISummariser(object(), model="m", settings=settings)  # type: ignore[arg-type]
    schema = {"type": "json_schema"}
    stop = threading.Event()
    first = summariser.summarise([], max_tokens=10, response_format=schema, stop=stop)
    summariser.summarise([], max_tokens=10, response_format=schema, stop=stop)
    assert first == SummaryReply("## Goal\nx", prompt_tokens=50, completion_tokens=5)
    assert sent == [schema, None, None]


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(120)
def test_the_openai_summariser_finds_the_running_embedded_server(home: Path) -> None:
    # `CompactionEngine(threshold)` in a cell, with no base URL: the embedded model answers.
    server = start_server("smollm", home=home, n_ctx=512, timeout=60)
    try:
        summariser = OpenAISummariser(settings=Settings.load())
        reply = summariser.summarise(
            [{"role": "user", "content": "Say hi."}],
            max_tokens=8,
            response_format=None,
            stop=None,
        )
        assert summariser.context_size() == 512
    finally:
        server.stop()
    assert reply.text.strip() != ""
    assert reply.completion_tokens > 0


@pytest.mark.parametrize(("embedded", "temperature"), [(True, 0.0), (False, None)])
def test_summaries_on_the_embedded_model_ask_at_temperature_0_with_the_cache_on(
    embedded: bool, temperature: float | None
) -> None:
    # Stability comes from priming (see modelsummariser), no longer from `cache_prompt: false`;
    # a server without llama.cpp's /props (this one) is not primed: one request.
    with FakeServer() as server:
        server.enqueue(Reply(text="## Goal\nx"))
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        settings = Settings() if embedded else Settings(base_url=server.url + "/v1")
        summariser = OpenAISummariser(client, model="m", settings=settings)
        summariser.summarise(
            [{"role": "user", "content": "hi"}], max_tokens=8, response_format=None, stop=None
        )
        [sent] = server.chat_requests()
    assert sent.get("temperature") == temperature
    assert "cache_prompt" not in sent

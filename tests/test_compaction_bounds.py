"""Compaction fails cleanly and is never silent, over real HTTP and a real SQLite file.

- A summary reply with bytes that are not UTF-8, or a summariser that raises anything, is a
  notice: the history stays as it was and the turn goes on to its reply.
- The user's latest instruction is never summarised away: a cut inside a long turn carries it
  whole in the summary row, and later compactions carry it on.
- A compaction that cannot shrink the history says so, and a request over the budget never
  goes out without a notice.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import openai
import pytest
from factories import assistant
from fakeserver import FakeServer, Reply
from helpers import Script, run, saved

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.facts import (
    LATEST_HEADING,
    latest_instruction,
    parse_latest,
    render_latest,
)
from nbchat.compaction.result import SummaryReply
from nbchat.config import Settings
from nbchat.conversation.events import Done, Event, Failed, Notice, RequestStarted
from nbchat.conversation.loop import Conversation
from nbchat.errors import CompactionError
from nbchat.history import Message, Row, build_messages
from nbchat.store.store import Store
from nbchat.tools import default_registry

SUMMARY = json.dumps(
    {
        "goal": "Work through the request",
        "constraints": [],
        "done": ["fetched pages"],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": ["fetch the next page"],
        "critical_context": [],
    }
)


@pytest.fixture
def script() -> Script:
    return Script(SUMMARY)


@pytest.fixture
def server(script: Script) -> Iterator[FakeServer]:
    with FakeServer(responder=script) as running:
        yield running


def conversation(
    server: FakeServer, store: Store, settings: Settings, **kwargs: Any
) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, store, client=client, **kwargs)


def notices(events: list[Event]) -> list[str]:
    return [event.text for event in events if isinstance(event, Notice)]


def grown(server: FakeServer, store: Store, settings: Settings, script: Script) -> str:
    """A session of six long question/answer pairs (about 4,400 tokens), made under a large
    budget, so reopening it under a small one puts it over the trigger. Returns its id."""
    roomy = conversation(server, store, settings.replace(context_token_threshold=50_000))
    for i in range(6):
        script.chat.append(Reply(text=f"answer {i} " + "x" * 2000))
        run(roomy, f"question {i}")
    roomy.close()
    return str(roomy.session_id)


# Item 8: any failure inside compaction is a notice; the turn goes on


def test_a_summary_with_bytes_that_are_not_utf8_is_a_notice_and_the_reply_comes(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    settings = make_settings(base_url=server.url + "/v1")
    session = grown(server, store, settings, script)
    chat = conversation(server, store, settings.replace(context_token_threshold=3000))
    chat.resume(session)
    rows = chat.history.rows
    script.summary = lambda body: Reply(text=SUMMARY, chunk_size=8, fault="bad_bytes")
    for turn in range(3):
        script.chat.append(Reply(text=f"reply {turn}"))
        events = run(chat, f"go on {turn}")
        assert events[-1] == Done()
        assert saved(events)[-1] == assistant(f"reply {turn}")
        said = notices(events)
        assert said[0].startswith(
            "Compaction failed; the history was kept as it was. The summariser failed: The "
            f"model server at {server.url}/v1 sent bytes that are not UTF-8 in the middle of the "
            "reply (byte ff)."
        )
    assert chat.history.rows[: len(rows)] == rows
    assert [row.role for row in chat.history.rows].count("compacted") == 0


class Raising:
    """A plugged-in summariser with a bug."""

    def summarise(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        stop: threading.Event | None,
    ) -> SummaryReply:
        raise RuntimeError("the summariser broke")


def test_a_summariser_raising_anything_is_a_compaction_error() -> None:
    engine = CompactionEngine(3000, 2, summariser=Raising())
    history = [Row("user", f"question {i} " + "x" * 3000) for i in range(8)]
    with pytest.raises(CompactionError) as caught:
        engine.compact(history)
    assert str(caught.value) == (
        "The summariser failed with RuntimeError: the summariser broke. The history was left as "
        "it was; compact again, or set another summary_model if it keeps failing."
    )


def test_a_summariser_raising_anything_leaves_the_turn_its_reply(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    settings = make_settings(base_url=server.url + "/v1")
    session = grown(server, store, settings, script)
    tight = settings.replace(context_token_threshold=3000)
    chat = conversation(server, store, tight, summariser=Raising())
    chat.resume(session)
    rows = chat.history.rows
    script.chat.append(Reply(text="answered anyway"))
    events = run(chat, "next question")
    assert events[-1] == Done()
    assert saved(events)[-1] == assistant("answered anyway")
    assert notices(events)[0] == (
        "Compaction failed; the history was kept as it was. The summariser failed with "
        "RuntimeError: the summariser broke. The history was left as it was; compact again, or "
        "set another summary_model if it keeps failing."
    )
    assert chat.history.rows[: len(rows)] == rows


# Item 9: the user's latest instruction stays whole

LAST_WORDS = "and finally, write the answer to result.txt, nothing else."


def long_instruction() -> str:
    body = "".join(f"Step {i}: fetch page {i} and note its title. " for i in range(200))
    text = (body[: 8462 - len(LAST_WORDS) - 1] + " " + LAST_WORDS)[:8462]
    assert len(text) == 8462 and text.endswith(LAST_WORDS)
    return text


def fetching_conversation(
    server: FakeServer, store: Store, make_settings: Any, **overrides: Any
) -> Conversation:
    registry = default_registry()

    @registry.register
    def fetch_page(number: int) -> str:
        """Fetch one page of the catalogue."""
        return f"page {number}: " + "lorem ipsum dolor sit amet " * 220

    settings = make_settings(
        base_url=server.url + "/v1", context_token_threshold=10_000, tool_policy="allow"
    )
    return conversation(server, store, settings.replace(**overrides), tools=registry)


def fetch(number: int) -> Reply:
    return Reply(tool_calls=[(f"call{number}", "fetch_page", json.dumps({"number": number}))])


def test_the_latest_instruction_survives_a_compaction_inside_its_turn(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    chat = fetching_conversation(server, store, make_settings)
    script.chat.extend([fetch(1), fetch(2), fetch(3), fetch(4), Reply(text="done")])
    events = run(chat, long_instruction())
    assert events[-1] == Done()
    assert [row.role for row in chat.history.rows].count("compacted") == 1
    assert [row.role for row in chat.history.rows].count("user") == 0  # cut inside the turn
    # What the model saw last holds the instruction whole, and so does the active history.
    last_request = server.chat_requests()[-1]
    assert long_instruction() in last_request["messages"][0]["content"]
    assert latest_instruction(chat.history.rows, len(chat.history.rows)) == long_instruction()
    assert any(row.content.endswith(LAST_WORDS) for row in chat.history.rows)
    # A resumed session sends the same bytes.
    again = conversation(server, store, chat.settings, tools=chat.tools, session_id=None)
    again.resume(str(chat.session_id))
    assert build_messages(again.history.rows, chat.settings.system_prompt) == build_messages(
        chat.history.rows, chat.settings.system_prompt
    )


def test_a_second_compaction_in_the_same_turn_carries_the_instruction_on(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    chat = fetching_conversation(server, store, make_settings)
    calls = [fetch(n) for n in range(1, 9)]
    script.chat.extend([*calls, Reply(text="done")])
    events = run(chat, long_instruction())
    assert events[-1] == Done()
    compactions = chat.store.list_compactions(str(chat.session_id))
    assert len(compactions) >= 2
    assert long_instruction() in server.chat_requests()[-1]["messages"][0]["content"]
    [summary] = [row for row in chat.history.rows if row.role == "compacted"]
    assert parse_latest(summary.content) == long_instruction()


def test_a_newer_message_replaces_the_carried_one() -> None:
    carried = Row("compacted", "summary\n\n" + render_latest("old instruction"))
    rows = [carried, Row("assistant", "done"), Row("user", "new one"), Row("assistant", "ok")]
    assert latest_instruction(rows, 3) == "new one"
    assert latest_instruction(rows, 2) == ""
    assert latest_instruction(rows[:2], 1) == "old instruction"


def test_a_carried_message_reads_back_exactly_whatever_it_says() -> None:
    tricky = f"line one\n\n{LATEST_HEADING}\n# Recorded facts\n> quoted\n"
    content = "the summary\n\n# Recorded facts\n- a.txt\n\n" + render_latest(tricky)
    assert parse_latest(content) == tricky


def test_a_message_that_cannot_stay_whole_is_refused_before_sending(
    server: FakeServer, store: Store, make_settings: Any
) -> None:
    chat = fetching_conversation(server, store, make_settings, context_token_threshold=2000)
    overhead = chat.budget.overhead_tokens()
    text = "w" * (3 * (2000 - overhead) + 3)  # one token more than what is left
    events = run(chat, text)
    failed = events[-1]
    assert failed.unsent_text == text  # type: ignore[union-attr]
    assert failed.message == (  # type: ignore[union-attr]
        f"Your message is about {2001 - overhead:,} tokens, too big beside the system prompt "
        f"and tools ({overhead:,}) for the whole budget (2,000). Shorten it, or save it to a "
        "file in the workspace and ask the model to read the parts it needs."
    )
    assert server.chat_requests() == []


# Item 10: a compaction that cannot shrink the history is not silent


OVER_BUDGET = re.compile(
    r"This request is about ([\d,]+) tokens, over the budget of 3,000: compaction could not "
    r"bring the history under it\. The server may refuse it or drop the start of the "
    r"conversation; start a new session \(/new\), or raise context_token_threshold if the "
    r"model's window is larger\."
)
NO_SHRINK = re.compile(
    r"Compaction changed nothing: the summary would not shrink it\. Nothing was summarised or "
    r"archived; all 13 rows were kept as they were \(about [\d,]+ tokens; compaction starts at "
    r"2,250\)\."
)


@pytest.mark.parametrize(
    ("summary_chars", "not_shrunk"),
    [
        pytest.param(14_000, True, id="summary-larger-than-its-input"),
        pytest.param(10_000, False, id="summary-too-large-for-the-budget"),
    ],
)
def test_a_compaction_that_leaves_the_request_over_budget_is_announced_before_it(
    server: FakeServer,
    store: Store,
    make_settings: Any,
    script: Script,
    summary_chars: int,
    not_shrunk: bool,
) -> None:
    settings = make_settings(base_url=server.url + "/v1")
    session = grown(server, store, settings, script)
    chat = conversation(server, store, settings.replace(context_token_threshold=3000))
    chat.resume(session)
    rows = chat.history.rows
    # A markdown reply: a JSON checkpoint's sections are cut to their budgets (prompts.py).
    script.summary = lambda body: Reply(text="## Goal\n" + "y" * summary_chars)
    script.chat.append(Reply(text="answered"))
    events = run(chat, "next question")
    assert events[-1] == Done()
    first_request = next(i for i, e in enumerate(events) if isinstance(e, RequestStarted))
    said = notices(events[:first_request])
    assert [bool(NO_SHRINK.fullmatch(text)) for text in said[:-1]] == ([True] if not_shrunk else [])
    over = OVER_BUDGET.fullmatch(said[-1])
    assert over is not None and int(over[1].replace(",", "")) > 3000
    if not_shrunk:
        assert chat.history.rows[: len(rows)] == rows


def test_a_failed_compaction_after_an_overflow_ends_the_turn_saying_what_to_do(
    server: FakeServer, store: Store, make_settings: Any, script: Script
) -> None:
    settings = make_settings(base_url=server.url + "/v1")
    session = grown(server, store, settings, script)
    chat = conversation(server, store, settings)
    chat.resume(session)
    script.chat.append(Reply(fault="overflow_llama", n_ctx=4096, n_prompt_tokens=6041))
    script.summary = lambda body: Reply(text=SUMMARY, fault="bad_bytes", cut_after=2)
    events = run(chat, "one more")
    last = events[-1]
    assert isinstance(last, Failed)
    assert last.traceback == ""
    assert last.message.startswith(
        "The request was too big for the model, and compacting it failed: The summariser "
        f"failed: The model server at {server.url}/v1 sent bytes that are not UTF-8"
    )
    assert last.message.endswith("Start a new session (/new), or compact (/compact) and resend.")
    assert saved(events) == [Row("user", "one more"), Row("system", last.message)]

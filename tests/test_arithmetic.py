"""Arithmetic in the user's words worked out by code for a small model (issue 19): what counts
as an expression and what does not, exact values, bounds, linear time, and the note the model
gets before it answers (over real HTTP)."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from helpers import run

from nbchat.conversation.loop import Conversation
from nbchat.store.store import Store
from nbchat.tools.arithmetic import MAX_FOUND, work_out


@pytest.mark.parametrize(
    ("text", "worked"),
    [
        ("how much is 125x64", ["125 × 64 = 8000"]),
        ("125 x 64?", ["125 × 64 = 8000"]),
        ("quick one, 19 times 23?", ["19 × 23 = 437"]),
        ("what is 17×23", ["17 × 23 = 391"]),
        ("What is 15% of 200?", ["15% of 200 = 30"]),
        ("15 percent of 200", ["15% of 200 = 30"]),
        ("2 to the power of 16?", ["2^16 = 65536"]),
        ("2**10", ["2^10 = 1024"]),
        ("what's the square root of 81", ["√81 = 9"]),
        ("(3 + 4) * 5", ["(3 + 4) × 5 = 35"]),
        ("10 minus 4 times 2", ["10 − 4 × 2 = 2"]),
        ("-5 + 3", ["-5 + 3 = -2"]),
        ("1,000,000 / 8", ["1000000 ÷ 8 = 125000"]),
        ("7 divided by 2", ["7 ÷ 2 = 7/2 ≈ 3.5"]),
        ("12 multiplied by 12, and 6 plus 7", ["12 × 12 = 144", "6 + 7 = 13"]),
    ],
)
def test_an_expression_in_words_or_symbols_is_worked_out_exactly(
    text: str, worked: list[str]
) -> None:
    assert work_out(text) == worked


@pytest.mark.parametrize(
    "text",
    [
        "the meeting is on 2026-11-20 at 10:00",
        "python 3.11.2 or 3.12?",
        "I have 3 apples and 5 pears",
        "what does len([1, 2, 3]) return",
        "is 0x1F hex?",
        "pages 10-20",
        "what is the square root of 2",  # no exact root: left to the model
        "2 to the power of 100000",  # too large to show
        "what is x + 1",
    ],
)
def test_what_is_no_expression_or_too_large_is_left_alone(text: str) -> None:
    assert work_out(text) == []


def test_at_most_a_few_expressions_are_worked_out_and_only_the_start_is_read() -> None:
    assert len(work_out("1 + 1, " * 1_000)) == MAX_FOUND
    assert work_out("x" * 10_000 + " 2 + 2") == []


def test_working_out_takes_linear_time_on_hostile_text() -> None:
    def seconds(size: int) -> float:
        text = ("(" * 40 + "1 +" + " -" * 30 + "divided " * 5) * (size // 200)
        started = time.process_time()
        work_out(text)
        return time.process_time() - started

    seconds(1_000)
    assert seconds(10_000_000) / max(seconds(1_000_000), 1e-4) < 30


@pytest.mark.parametrize(
    ("message", "note"),
    [
        ("how much is 125x64", "Worked out by code, exactly: 125 × 64 = 8000."),
        # A unit conversion (`nbchat.tools.units`) goes in the same note.
        (
            "100 fahrenheit in celsius? and 3 x 4",
            "Worked out by code, exactly: 3 × 4 = 12. Converted by code: 100 °F ≈ 37.78 °C.",
        ),
    ],
)
def test_a_small_model_is_told_the_worked_out_values_before_it_answers(
    make_settings: Any, store: Store, message: str, note: str
) -> None:
    settings = make_settings(tools_on_request=True, json_tool_fallback=True)
    with FakeServer(default_reply=Reply(text="8000")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        chat = Conversation(settings, store, client=client)
        chat.new_session("t")
        run(chat, message)
        run(chat, "thanks")
        worked, thanks = server.chat_requests()
    assert worked["messages"][-2:] == [
        {"role": "system", "content": note},
        {"role": "user", "content": message},
    ]
    assert thanks["messages"][-1] == {"role": "user", "content": "thanks"}
    # Never stored: the next request carries the conversation without it.
    assert all("Worked out" not in str(m["content"]) for m in thanks["messages"])

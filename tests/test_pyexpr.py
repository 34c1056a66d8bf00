"""`nbchat.tools.pyexpr`: the Python expression a message asks about, evaluated by a restricted
interpreter (its value, or the error Python raises); names, attributes, imports and anything
that would grow past a bound are not evaluated; only the start of a message is read."""

from __future__ import annotations

import time

import pytest

from nbchat.conversation.notes import EVALUATED, worked_out
from nbchat.tools.pyexpr import MAX_FOUND, evaluate_asked


@pytest.mark.parametrize(
    ("message", "told"),
    [
        ("What does len([1, 2, 3]) return in Python?", "len([1, 2, 3]) → 3"),
        ("what is [1, 2, 3][::-1] in python", "[1, 2, 3][::-1] → [3, 2, 1]"),
        ("whats 7 // 2", "7 // 2 → 3"),
        ("what would round(2.5) be", "round(2.5) → 2"),
        ("what is 0.1 + 0.2 == 0.3 in python", "0.1 + 0.2 == 0.3 → False"),
        ('what does "a,b".split(",") return', "\"a,b\".split(\",\") → ['a', 'b']"),
        (
            "what does `sorted([3, 1, 2], reverse=True)` give",
            "sorted([3, 1, 2], reverse=True) → [3, 2, 1]",
        ),
        ("evaluate 3 in {1: 'a'}", "3 in {1: 'a'} → False"),
        ('what does {"a": 1}.get("b", 0) return', '{"a": 1}.get("b", 0) → 0'),
        # The error Python raises is what the expression gives.
        ("what does [1, 2][5] give?", "[1, 2][5] raises IndexError: list index out of range"),
        ("what does `max([])` give", "max([]) raises ValueError: max() arg is an empty sequence"),
    ],
)
def test_an_expression_asked_about_is_evaluated_as_python_does(message: str, told: str) -> None:
    assert evaluate_asked(message) == [told]


@pytest.mark.parametrize(
    "message",
    [
        "what is a list comprehension",  # no expression
        "what is the difference between == and is",  # not one that parses
        "what is 2 + 3",  # arithmetic: `nbchat.tools.arithmetic`'s
        # What this interpreter does not know: it is not evaluated, whatever it is.
        'what does `__import__("os").system("ls")` return',
        "what does `().__class__.__base__` give",
        "what does `[x for x in range(3)]` give",
        "what does `print(1)` do",
        "what does `open('x').read()` return",
        "what does `lambda: 1` give",
        "what does `sales['units'].sum()` give",  # a name: the notebook's, not this module's
        # What would grow past a bound.
        'what does `"x" * 10**9` give',
        "what does `[0] * 10**8` give",
        "what does `9 ** 9 ** 9` give",
        "what does `list(range(10**9))` give",
        'what does `"%0100000d" % 1` give',
        'what does `"a".ljust(10**8)` give',
        'what does `"-".join(["ab"] * 9000)` give',
        'what does `("a" * 9000).replace("a", "bb" * 5000)` give',
        "what does `" + "[" * 45 + "1" + "]" * 45 + "` give",  # nested deeper than read
    ],
)
def test_what_is_not_evaluated_is_not_told(message: str) -> None:
    assert evaluate_asked(message) == []


def test_at_most_a_few_and_only_the_start_is_read() -> None:
    assert len(evaluate_asked("what does `len('ab')` give? " * 50)) == 1  # the same, once
    many = " ".join(f"what does `len('{'a' * i}')` give?" for i in range(1, 10))
    assert len(evaluate_asked(many)) == MAX_FOUND
    assert evaluate_asked("x" * 10_000 + " what does `len('ab')` give") == []


def test_reading_a_message_takes_linear_time_on_hostile_text() -> None:
    def seconds(size: int) -> float:
        text = ("what does `" + "[" * 30 + "1" + "]" * 30 + "` give " + "what is (" * 20) * (
            size // 400
        )
        started = time.process_time()
        evaluate_asked(text)
        return time.process_time() - started

    seconds(10_000)
    assert seconds(10_000_000) / max(seconds(1_000_000), 1e-4) < 30


def test_the_value_is_told_before_the_answer_with_the_other_worked_out_notes() -> None:
    assert worked_out("What does len([1, 2, 3]) return in Python?") == (
        EVALUATED + "len([1, 2, 3]) → 3."
    )

"""`nbchat.tools.extremes`: a message asking for a largest or smallest, and the extremes of a
result that is a whole table (a CSV, or every row of a DataFrame as `describe_variable` prints
it), worked out by code; nothing for a result that is not one, or is only part of one."""

from __future__ import annotations

import time

import pytest

from nbchat.tools.extremes import (
    BOTH,
    LARGEST,
    MAX_ROWS,
    MAX_TIED,
    SCANNED,
    SMALLEST,
    asks_for_extremes,
    extremes_asked,
    extremes_of,
)

CITIES = "city,population\nOslo,709000\nBergen,291000\nTrondheim,212000\n"
FRAME = (
    "sales: DataFrame, shape 3×3 (3 rows, 3 columns), columns region, units, price\n"
    "dtypes:\nregion  str\nunits  int64\nprice  float64\n"
    "head():\n  region  units  price\n0  north    120   9.50\n1  south     85  12.00\n"
    "2   east    240   7.25"
)


@pytest.mark.parametrize(
    ("message", "asks"),
    [
        ("who's smallest", True),
        ("which region sold the most units?", True),
        ("the priciest item in sales", True),
        ("what's the max price", True),
        ("which city has the fewest people", True),
        ("show me the latest test results", False),
        ("what is the best way to do it", False),
        ("revenue for the west region", False),
    ],
)
def test_a_message_asking_for_a_largest_or_smallest_is_told_apart(message: str, asks: bool) -> None:
    assert asks_for_extremes(message) is asks


@pytest.mark.parametrize(
    ("message", "asked"),
    [
        ("whats the smallest city in the csv", (SMALLEST,)),
        ("which item is cheapest", (SMALLEST,)),
        ("which region sold the most units?", (LARGEST,)),
        ("the priciest item in sales", (LARGEST,)),
        ("the biggest and the smallest city", BOTH),
        ("who is the oldest", BOTH),  # says neither: both are told
        ("show me the latest test results", ()),
    ],
)
def test_the_extremes_told_are_those_the_message_asks_for(
    message: str, asked: tuple[str, ...]
) -> None:
    assert extremes_asked(message) == asked
    wanted = extremes_of(CITIES, asked) if asked else []
    assert all(which in told for told in wanted for which in asked)
    assert all(which not in told for told in wanted for which in BOTH if which not in asked)


def test_a_csv_s_number_columns_have_their_extremes_named_by_the_first_text_column() -> None:
    assert extremes_of(CITIES) == ["population: largest 709000 (Oslo), smallest 212000 (Trondheim)"]
    semicolons = "name;score;age\nAda;1,200;36\nBob;900;36\nCy;1,200;41\n"
    assert extremes_of(semicolons) == [
        "score: largest 1,200 (Ada, Cy), smallest 900 (Bob)",
        "age: largest 41 (Cy), smallest 36 (Ada, Bob)",
    ]


def test_a_dataframe_s_rows_are_a_table_only_when_they_are_all_of_them() -> None:
    assert extremes_of(FRAME) == [
        "units: largest 240 (east), smallest 85 (south)",
        "price: largest 12.00 (south), smallest 7.25 (east)",
    ]
    # head() of a longer frame: its five rows say nothing of the frame's extremes.
    assert extremes_of(FRAME.replace("(3 rows", "(300 rows")) == []
    # A value with a space shifts the fields: not read.
    assert extremes_of(FRAME.replace("north", "north pole")) == []


@pytest.mark.parametrize(
    "result",
    [
        "Project notes\nThe review, on Thursday, is in B12.\nBring notes, pens.\n",
        "city,population\nOslo,709000\nBergen\n",  # a row short of fields
        "a,b\n1,2\n",  # a single row: nothing to compare
        "No matches for 'x' in '.'.",
        "city,population\nOslo,709000\nBergen,709000\n",  # all alike
        "name,city\nAda,Oslo\nBob,Rome\n",  # no numbers
    ],
)
def test_a_result_that_is_no_whole_table_has_no_extremes(result: str) -> None:
    assert extremes_of(result) == []


def test_ties_are_named_up_to_a_few_and_counted_past_them() -> None:
    rows = "".join(f"r{i},5\n" for i in range(MAX_TIED + 2))
    (told,) = extremes_of("name,n\n" + rows + "top,9\n")
    assert told == "n: largest 9 (top), smallest 5 (r0, r1, r2 and 2 more)"


def test_only_the_start_of_a_huge_result_or_message_is_read() -> None:
    def seconds(size: int) -> float:
        rows = "k,v\n" + "1,2\n" * (size // 4)
        message = "tempest " * (size // 8)
        started = time.process_time()
        extremes_of(rows)
        extremes_of(rows[:SCANNED])
        asks_for_extremes(message)
        return time.process_time() - started

    seconds(100_000)
    # Ten times the text, in this process: about the same time, as only its start is read.
    assert seconds(10_000_000) / max(seconds(1_000_000), 1e-4) < 30
    assert extremes_of("name,n\n" + "".join(f"r{i},{i}\n" for i in range(MAX_ROWS + 1))) == []

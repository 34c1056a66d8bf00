"""The largest and smallest values of a small table a tool returned, worked out by code for a
small model to state.

Shown a three-row CSV of cities and populations and asked which city is smallest, a 1.5B
model named the largest; shown a DataFrame's rows and asked which region brings in the most
revenue, it named the first row's. It reads a table, it does not compare its numbers. So when
the user's message asks for an extreme (`asks_for_extremes`: "smallest", "fewest", "most",
"highest", "max", …) and a result of the round is a whole table, each numeric column's largest
or smallest rows, those the message asks for (`extremes_asked`), are worked out here
(`extremes_of`) and told to the model with the results, as the arithmetic in a message is
(`nbchat.tools.arithmetic`).

A table is a CSV (comma, semicolon or tab; a header and rows of as many fields) or the rows of
a DataFrame as `describe_variable` prints them, when they are all of its rows (it says how many
there are: a `head()` of a longer frame is not the whole table, and its extremes are not the
frame's). Rows are labelled by the first column that is not numeric, else by their index.

Bounded: the first `SCANNED` characters of a result, at most `MAX_ROWS` rows of `MAX_COLUMNS`
fields, `MAX_COLUMNS_TOLD` columns told, `MAX_TIED` rows named for one value; one linear
pattern over the message. Pure: no I/O.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BOTH", "LARGEST", "SMALLEST", "asks_for_extremes", "extremes_asked", "extremes_of"]

SCANNED = 20_000  # characters of one result read as a table
MAX_ROWS = 1_000
MAX_COLUMNS = 20
MAX_COLUMNS_TOLD = 4
MAX_TIED = 3
MESSAGE_SCAN = 2_000  # characters of the message searched for an extreme
# "smallest", "fewest", "priciest", "most", "least", "max", "top": one alternation of literal
# words, no nesting.
EXTREME = re.compile(
    r"\b(?:\w{2,12}est|most|least|max|maximum|min|minimum|top|bottom|biggest|largest|smallest)\b",
    re.IGNORECASE,
)
# Words ending in "est" that are no superlatives.
_NOT_SUPERLATIVE = """
test pytest unittest latest rest unrest request interest suggest best just guest west east
midwest northwest northeast southwest southeast nest chest quest conquest bequest inquest
manifest forest protest contest digest honest modest harvest earnest invest ingest arrest
attest detest priest crest vest zest jest pest behest infest tempest
"""
NOT_SUPERLATIVE = frozenset(_NOT_SUPERLATIVE.split())
# The extremes asked for, where the word says which: told a column's largest and smallest for
# "which city is smallest", a 1.5B model still named the largest, the one told first. Any
# other superlative ("oldest", "latest"-like words of a domain) gets both.
_SMALLEST_WORDS = """
smallest fewest least min minimum bottom lowest cheapest shortest tiniest lightest slowest
poorest narrowest thinnest weakest quietest
"""
_LARGEST_WORDS = """
most max maximum top biggest largest highest greatest priciest dearest richest longest
heaviest tallest fastest widest strongest busiest loudest
"""
SMALLEST_WORDS = frozenset(_SMALLEST_WORDS.split())
LARGEST_WORDS = frozenset(_LARGEST_WORDS.split())
LARGEST, SMALLEST = "largest", "smallest"
BOTH = (LARGEST, SMALLEST)
# The rows `describe_variable` says a DataFrame has: "shape 4×4 (4 rows, 4 columns)".
STATED_ROWS = re.compile(r"\((\d{1,9}) rows?, \d{1,9} columns?\)")
HEAD_MARK = "head():\n"


def asks_for_extremes(text: str) -> bool:
    """Whether `text` asks for a table's largest or smallest ("who's smallest", "which
    region sold the most", "the max price")."""
    return bool(extremes_asked(text))


def extremes_asked(text: str) -> tuple[str, ...]:
    """Which extremes `text` asks for, in `BOTH`'s order: `LARGEST` ("the most", "max",
    "priciest"), `SMALLEST` ("fewest", "cheapest"), both (a superlative that says neither,
    or words for each), or none."""
    asked: set[str] = set()
    for match in EXTREME.finditer(text[:MESSAGE_SCAN]):
        word = match.group().lower()
        if word in NOT_SUPERLATIVE:
            continue
        if word in SMALLEST_WORDS:
            asked.add(SMALLEST)
        elif word in LARGEST_WORDS:
            asked.add(LARGEST)
        else:
            asked.update(BOTH)
    return tuple(which for which in BOTH if which in asked)


@dataclass(frozen=True)
class _Table:
    header: list[str]
    rows: list[list[str]]
    labels: list[str]  # one per row


def extremes_of(result: str, asked: Sequence[str] = BOTH) -> list[str]:
    """For a result that is a whole table: each numeric column's largest and smallest values
    (those `asked`, of `BOTH`) with the rows holding them ("population: largest 709000 (Oslo),
    smallest 212000 (Trondheim)"); [] for any other result."""
    table = _table(result[:SCANNED]) if len(result) <= SCANNED else None
    if table is None:
        return []
    told = []
    for index, name in enumerate(table.header):
        values = [_number(row[index]) for row in table.rows]
        if any(value is None for value in values) or len(values) < 2:
            continue
        numbers = [value for value in values if value is not None]
        largest, smallest = max(numbers), min(numbers)
        if largest == smallest:
            continue
        values_told = {LARGEST: largest, SMALLEST: smallest}
        told.append(
            f"{name}: "
            + ", ".join(f"{which} {_said(table, index, values_told[which])}" for which in asked)
        )
        if len(told) == MAX_COLUMNS_TOLD:
            break
    return told


def _said(table: _Table, column: int, value: float) -> str:
    """ "709000 (Oslo)": the value as the table writes it, and the rows holding it."""
    rows = [i for i, row in enumerate(table.rows) if _number(row[column]) == value]
    written = table.rows[rows[0]][column]
    labels = ", ".join(table.labels[i] for i in rows[:MAX_TIED])
    more = f" and {len(rows) - MAX_TIED} more" if len(rows) > MAX_TIED else ""
    return f"{written} ({labels}{more})"


def _table(text: str) -> _Table | None:
    if HEAD_MARK in text:
        return _frame_rows(text)
    return _csv(text)


def _csv(text: str) -> _Table | None:
    """A CSV result: a header of at least two fields and rows of as many (a cut or a stray
    line makes it no table)."""
    lines = text.strip("\n").splitlines()
    if not 3 <= len(lines) <= MAX_ROWS + 1:
        return None
    delimiter = next((d for d in (",", "\t", ";") if d in lines[0]), None)
    if delimiter is None:
        return None
    try:
        parsed = list(csv.reader(lines, delimiter=delimiter))
    except csv.Error:
        return None
    header, rows = [field.strip() for field in parsed[0]], parsed[1:]
    width = len(header)
    if not 2 <= width <= MAX_COLUMNS or any(len(row) != width for row in rows):
        return None
    rows = [[field.strip() for field in row] for row in rows]
    return _labelled(header, rows, [f"row {i + 1}" for i in range(len(rows))])


def _frame_rows(text: str) -> _Table | None:
    """A DataFrame's rows as `describe_variable` prints them (`head():` then pandas' table:
    a header of column names, each row its index and one value per column), when they are
    all the rows it says the frame has and every value is one word."""
    stated = STATED_ROWS.search(text)
    lines = text.split(HEAD_MARK, 1)[1].strip("\n").splitlines()
    if stated is None or not lines or len(lines) > MAX_ROWS + 1:
        return None
    header, rows = lines[0].split(), [line.split() for line in lines[1:]]
    if len(rows) != int(stated.group(1)) or not 1 <= len(header) <= MAX_COLUMNS:
        return None
    if any(len(row) != len(header) + 1 for row in rows):
        return None  # a value with a space, a cut or a wrapped table: not read
    return _labelled(header, [row[1:] for row in rows], [row[0] for row in rows])


def _labelled(header: list[str], rows: list[list[str]], index: Sequence[str]) -> _Table:
    """The table with each row's label: its value in the first column that is not numeric,
    else `index`."""
    for column in range(len(header)):
        if any(_number(row[column]) is None for row in rows):
            return _Table(header, rows, [row[column] for row in rows])
    return _Table(header, rows, list(index))


NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d{1,30})(?:\.\d{1,30})?")


def _number(text: str) -> float | None:
    """The number `text` writes ("709000", "1,140.5", "-3"), None for anything else."""
    if NUMBER.fullmatch(text) is None:
        return None
    value = float(text.replace(",", ""))
    return value if math.isfinite(value) else None

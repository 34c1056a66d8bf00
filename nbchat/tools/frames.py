"""What code written over a user's pandas DataFrame needs to know, read without running user
code: its plain-word column names (`frame_columns`) and an outline (`frame_outline`) of its
rows, each column's kind and, for a text column with few values, those values as written; and
code's compared string literals spelt as those values are (`spelt_as_in_data`).

Asked how much revenue "north" brought in, a 1.5B model that knew only the column names wrote
`sales[sales['region'] == 'North']` and reported 0 for a frame whose regions are lower case;
asked which region had the priciest item, it wrote `sales[region]`, a name the notebook does not
have. Code is written right when the names and values are in front of the writer, as they are
for a person who has the frame printed above the cell. Shown the values, the same model still
wrote 'North' (as a name is spelt), so a literal that is a value but for its case is spelt as
the value before the call is shown for approval.

Only an exact `pandas.DataFrame` (a subclass's attributes may be the user's code) and only
pandas' own methods are called; a text column's values are read as a list and kept only when
each is exactly a `str` (nothing of a user's object is hashed or compared), at most
`ROWS_READ` rows of it. What is shown is bounded (`COLUMNS_SHOWN` columns, `VALUES_SHOWN`
values of at most `VALUE_CHARS` characters each, plain words only: a value could be an
instruction aimed at the model) and masked like any tool output.

Must not: import pandas (it is found in `sys.modules`, imported by the user), or change a frame.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection
from typing import Any, NamedTuple

__all__ = ["COLUMNS_SHOWN", "Outline", "frame_columns", "frame_outline", "spelt_as_in_data"]

COLUMNS_SHOWN = 8  # of one DataFrame
# A column's name as the first step is shown it: one plain word, nothing a prompt could read as
# more (a column may be named anything, an instruction too).
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
# A text column's values are shown when it holds this many different ones or fewer: a column
# of categories ("north", "south"), not of names or free text.
VALUES_SHOWN = 8
VALUE_CHARS = 24
# A value shown: words of letters, digits and a few joining marks ("New York", "in-store").
PLAIN_VALUE = re.compile(r"[\w][\w .'&/-]{0,23}")
ROWS_READ = 5_000  # rows of a text column read for its values; beyond, "such as"


def frame_columns(value: Any) -> tuple[str, ...]:
    """The first `COLUMNS_SHOWN` column names of a pandas DataFrame that are plain words, () for
    any other value. Only for exactly `pandas.DataFrame`, already imported by the user: a
    subclass's `columns` may be the user's code; pandas' own reads an index, no user code."""
    if not _is_frame(value):
        return ()
    try:
        names = list(value.columns[:COLUMNS_SHOWN])
    except Exception:  # a frame being changed by the user's cell meanwhile: nothing to show
        return ()
    return tuple(name for name in names if type(name) is str and COLUMN_NAME.fullmatch(name))


class Outline(NamedTuple):
    """A DataFrame as code over it needs it: `line` says it ("sales, a DataFrame of 4 rows:
    region (text: 'north', 'south'), units (int64)."), `values` are its text columns' values
    as written, to spell a literal in code the way the data does."""

    line: str
    values: tuple[str, ...]


def frame_outline(name: str, value: Any) -> Outline | None:
    """The outline of the DataFrame `value`, called `name`; None for any other value, or when it
    cannot be read now."""
    columns = frame_columns(value)
    if not columns:
        return None
    try:
        rows = len(value.index)
        described = [_column(column, value[column], rows) for column in columns]
    except Exception:  # changed meanwhile, or a column name that is not unique: say nothing
        return None
    kind = f"{rows:,} rows" if rows != 1 else "1 row"
    line = f"{name}, a DataFrame of {kind}: {', '.join(text for text, _ in described)}."
    return Outline(line, tuple(value for _, values in described for value in values))


# A string literal in code where it is compared or looked up: after `==`, `!=`, `[` or a comma
# (`isin(['a', 'b'])`), not an argument of a call (`print('North')`); as short as a value shown
# (`VALUE_CHARS`). Bounded, no nesting: linear in the code.
COMPARED_LITERAL = re.compile(
    r"(?P<before>==|!=|[\[,])(?P<space>[ ]{0,4})"
    r"(?P<quote>['\"])(?P<text>[^'\"\\\n]{1,24})(?P=quote)"
)
CODE_SCAN = 10_000  # characters of code looked at; a call's code is far shorter


def spelt_as_in_data(code: str, values: Collection[str], *, written: str = "") -> str:
    """`code` with each compared string literal that is none of `values` but is one of them
    but for its case (`'North'` where the column holds `'north'`) spelt as that value. A
    comparison spelt otherwise matches nothing, and the answer said north brought in 0. A
    literal the user `written` themselves, quotes and all, is theirs: it is left as it is."""
    if not values or len(code) > CODE_SCAN:
        return code
    folded: dict[str, str | None] = {}
    for value in values:  # a spelling shared by two values ('North', 'NORTH') is left alone
        key = value.casefold()
        folded[key] = value if folded.get(key, value) == value else None
    exact = set(values)

    def spelt(found: re.Match[str]) -> str:
        text, quote = found["text"], found["quote"]
        value = folded.get(text.casefold()) if text not in exact else None
        if value is None or f"{quote}{text}{quote}" in written:
            return found[0]
        return f"{found['before']}{found['space']}{quote}{value}{quote}"

    return COMPARED_LITERAL.sub(spelt, code)


def _column(name: str, column: Any, rows: int) -> tuple[str, list[str]]:
    """ "region (text: 'north', 'south')" and those values, or "units (int64)" and none."""
    dtype = str(column.dtype)
    if dtype not in ("object", "string", "category", "str"):
        return f"{name} ({dtype})", []
    values = _text_values(column.iloc[:ROWS_READ].tolist())
    if not values:
        return f"{name} (text)", []
    such_as = "such as " if rows > ROWS_READ else ""
    return f"{name} (text: {such_as}{', '.join(repr(value) for value in values)})", values


def _text_values(items: list[Any]) -> list[str]:
    """The different values of `items` in their order, when each is a `str` (checked with
    `type`, so no user object is hashed), there are at most `VALUES_SHOWN` of them and each
    is a plain value; [] otherwise."""
    seen: dict[str, None] = {}
    for item in items:
        if type(item) is not str:
            return []
        if item not in seen:
            if len(seen) == VALUES_SHOWN or not PLAIN_VALUE.fullmatch(item):
                return []
            seen[item] = None
    return list(seen)


def _is_frame(value: Any) -> bool:
    pandas = sys.modules.get("pandas")
    frame = getattr(pandas, "DataFrame", None)
    return frame is not None and type(value) is frame

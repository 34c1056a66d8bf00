"""`find_lines` reads a file a block at a time and tries the pattern on the whole block: it must
find exactly the lines a line-by-line search finds, wherever lines, cuts, NULs and "\\r" fall."""

from __future__ import annotations

import io
from pathlib import Path
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from nbchat.tools import ToolContext
from nbchat.tools import lines as search

CONTEXT = ToolContext(Path.cwd(), timeout=60)
# Small limits so that a few bytes of example cross block bounds and cut lines.
SMALL: dict[str, object] = {"BLOCK_BYTES": 7, "MAX_LINE_BYTES": 5}
PATTERNS = ["a", "^a", "a$", "ab+", r"b\s*a", r"a[\s\S]*b", r"\s", "", "é", r"\ba", "a.b", "(?m)^b"]
PIECES = [b"a", b"b", b"ab", b"\n", b"\r", b"\r\n", b" ", "é".encode(), b"\xff", b"\0"]


def reference(data: bytes, pattern: str) -> list[tuple[int, str]]:
    """The plain rule: split at "\\n", stop at the first line holding a NUL, cut each line at
    MAX_LINE_BYTES, drop trailing "\\r", decode with replacement, search each line alone."""
    compiled = search.Pattern(pattern).compiled
    found = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line does not start another
    for number, raw in enumerate(lines, start=1):
        if b"\0" in raw:
            break
        text = raw[: search.MAX_LINE_BYTES].rstrip(b"\r").decode("utf-8", errors="replace")
        if compiled.search(text):
            found.append((number, text))
    return found


@given(st.lists(st.sampled_from(PIECES), max_size=40), st.sampled_from(PATTERNS))
def test_a_block_search_finds_exactly_the_lines_a_line_by_line_search_finds(
    pieces: list[bytes], pattern: str
) -> None:
    data = b"".join(pieces)
    with mock.patch.multiple(search, **SMALL):  # type: ignore[call-overload]
        expected = reference(data, pattern)
        found = list(search.find_lines(io.BytesIO(data), search.Pattern(pattern), CONTEXT))
    assert found == expected


def test_a_match_over_several_lines_hides_no_later_line_that_matches_alone() -> None:
    data = b"a x\nb a b\nzzz\n"
    found = list(search.find_lines(io.BytesIO(data), search.Pattern(r"a[\s\S]*b"), CONTEXT))
    assert found == [(2, "b a b")]


def test_a_pattern_without_a_capital_matches_any_case_and_one_with_a_capital_exactly() -> None:
    """ripgrep's smart case: asked for Bergen's population, a 1.5B model searched for 'bergen'."""
    assert search.Pattern("bergen").found_in("Bergen,291000", CONTEXT)
    assert search.Pattern(r"berg\w+,\d+").found_in("BERGEN,291000", CONTEXT)  # \w, \d: syntax
    assert not search.Pattern("Bergen").found_in("BERGEN,291000", CONTEXT)
    assert not search.Pattern("TODO").found_in("todo: buy milk", CONTEXT)
    assert search.Pattern("todo(").found_in("call TODO(x)", CONTEXT)  # as plain text, too

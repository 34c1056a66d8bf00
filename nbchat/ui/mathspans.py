r"""Where the math is in markdown text: `$$…$$`, `\[…\]`, `\(…\)` and inline `$…$`, in one pass.

The renderer sets these spans aside before markdown so MathJax sees them verbatim. The rules are
those of the regular expression the renderer used before (DOTALL, leftmost match, alternatives
in this order),

    \$\$.+?\$\$ | \\\[.+?\\\] | \\\(.+?\\\) | (?<![\\$\w])\$(?=\S)[^$\n]+?(?<=\S)\$(?![\w$])

but found in time linear in the text. The expression retried every unclosed opener against the
whole rest of the text (20,000 unclosed `\(` took 18 s); here a closer found missing after one
position is known to be missing after every later one, and an inline `$` only ever looks as far
as the next `$`.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["math_spans"]

# Where a span can start: `$` (display or inline) or a backslash before `[` or `(`.
OPENER = re.compile(r"\$|\\[\[(]")
CLOSERS = {"$$": "$$", "\\[": "\\]", "\\(": "\\)"}


class _Closers:
    """`find` for the closing delimiters, remembering where each one no longer occurs."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.missing_from: dict[str, int] = {}

    def find(self, closer: str, start: int) -> int:
        if start >= self.missing_from.get(closer, len(self.text) + 1):
            return -1
        found = self.text.find(closer, start)
        if found < 0:
            self.missing_from[closer] = start
        return found


def math_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each math span in `text`, left to right, not overlapping."""
    closers = _Closers(text)
    position = 0
    while (opener := OPENER.search(text, position)) is not None:
        start = opener.start()
        end = _display_end(text, start, closers)
        if end < 0 and text[start] == "$":
            end = _inline_end(text, start, closers)
        if end < 0:
            position = start + 1
            continue
        yield start, end
        position = end


def _display_end(text: str, start: int, closers: _Closers) -> int:
    """The end of a `$$…$$`, `\\[…\\]` or `\\(…\\)` span starting at `start`, or -1."""
    closer = CLOSERS.get(text[start : start + 2])
    if closer is None:
        return -1
    found = closers.find(closer, start + 3)  # at least one character between
    return -1 if found < 0 else found + 2


def _inline_end(text: str, start: int, closers: _Closers) -> int:
    """The end of an inline `$…$` starting at `start`, or -1.

    Not after a backslash, `$` or word character; no space just inside either `$`; no `$` or
    newline within; not followed by a word character or `$` (so "$5 and $10" is not math).
    """
    before = text[start - 1] if start else " "
    if before in "\\$" or _is_word(before):
        return -1
    first = text[start + 1 : start + 2]
    if not first or first.isspace() or first == "$":
        return -1
    close = closers.find("$", start + 2)
    if close < 0 or text.find("\n", start + 1, close) >= 0 or text[close - 1].isspace():
        return -1
    after = text[close + 1 : close + 2]
    if after == "$" or (after and _is_word(after)):
        return -1
    return close + 1


def _is_word(character: str) -> bool:
    """Whether `re`'s `\\w` matches the character."""
    return character.isalnum() or character == "_"

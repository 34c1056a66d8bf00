r"""Text shown exactly, each found in one linear pass: invisible and bidi characters as escapes,
and where the math is (set aside for MathJax).

Text shown exactly: every character that is invisible, or that changes how its neighbours are
displayed, becomes a visible escape. What a user approves must be what runs. Bidi controls
(U+202E reverses what follows), zero-width characters, other format and control characters,
unusual spaces and combining marks laid over ASCII can make a command look like another one;
here each is written as a JSON escape (`\u202e`), so the text shown is valid JSON that decodes
back to exactly the arguments that run. The renderer also displays it left to right whatever
the script (`nbchat-exact` in its style), so right-to-left letters cannot reorder what
surrounds them.

Where the math is in markdown text: `$$…$$`, `\[…\]`, `\(…\)` and inline `$…$`. The renderer
sets these spans aside before markdown so MathJax sees them verbatim. The rules are those of the
regular expression the renderer used before (DOTALL, leftmost match, alternatives in this
order),

    \$\$.+?\$\$ | \\\[.+?\\\] | \\\(.+?\\\) | (?<![\\$\w])\$(?=\S)[^$\n]+?(?<=\S)\$(?![\w$])

but found in time linear in the text. The expression retried every unclosed opener against the
whole rest of the text (20,000 unclosed `\(` took 18 s); here a closer found missing after one
position is known to be missing after every later one, and an inline `$` only ever looks as far
as the next `$`.

Pure: no widgets, no I/O.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["math_spans", "needs_escape", "visible_json", "visible_text", "visible_text_lines"]


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


# Invisible, or laid over what precedes them, by their Unicode category.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
COMBINING_CATEGORIES = frozenset({"Mn", "Me"})
# Letters and symbols that draw nothing: Hangul fillers, the braille blank, variation selectors.
BLANK_LOOKING = frozenset(
    [0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
)
# Only these run the per-character check; printable ASCII and the line break are always shown.
NOT_PLAIN = re.compile(r"[^\x20-\x7e\n]")


def needs_escape(character: str, previous: str = "") -> bool:
    """Whether `character` (after `previous`) must be shown as an escape."""
    if character == " ":
        return False
    category = unicodedata.category(character)
    if category in INVISIBLE_CATEGORIES or ord(character) in BLANK_LOOKING:
        return True
    # A combining mark on ASCII disguises it (`=` with U+0338 looks like `≠`); on letters of its
    # own script it is ordinary writing.
    return category in COMBINING_CATEGORIES and (not previous or previous < "\x80")


def _escape(character: str) -> str:
    code = ord(character)
    if code > 0xFFFF:  # JSON spells these as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _escaped(text: str, *, keep_line_breaks: bool) -> str:
    escaped_until = -1  # where the last escape ended: what follows it is drawn after ASCII

    def replace(match: re.Match[str]) -> str:
        nonlocal escaped_until
        character, start = match.group(0), match.start()
        previous = "0" if start == escaped_until else (text[start - 1] if start else "")
        if character == "\n" and keep_line_breaks:
            return character
        if not needs_escape(character, previous):
            return character
        escaped_until = match.end()
        return _escape(character)

    pattern = NOT_PLAIN if keep_line_breaks else re.compile(r"[^\x20-\x7e]")
    return pattern.sub(replace, text)


def visible_json(arguments: Mapping[str, Any]) -> str:
    """The arguments as indented JSON, every hidden character escaped.

    `json.loads` of the result gives back exactly `arguments`: JSON already escapes quotes,
    backslashes and the C0 controls inside strings, and the escapes added here are JSON's own.
    A line break in the result is always JSON's indentation, never part of a value.
    """
    text = json.dumps(dict(arguments), indent=2, ensure_ascii=False, default=str)
    return _escaped(text, keep_line_breaks=True)


def visible_text(text: str) -> str:
    """A label (a tool name, a reason) with every hidden character, line breaks too, escaped."""
    return _escaped(text, keep_line_breaks=False)


def visible_text_lines(text: str) -> str:
    """Text of several lines (a tool call's arguments) with every other hidden character escaped."""
    return _escaped(text, keep_line_breaks=True)

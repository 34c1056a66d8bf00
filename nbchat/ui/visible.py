"""Text shown exactly: every character that is invisible, or that changes how its neighbours are
displayed, becomes a visible escape.

What a user approves must be what runs. Bidi controls (U+202E reverses what follows), zero-width
characters, other format and control characters, unusual spaces and combining marks laid over
ASCII can make a command look like another one; here each is written as a JSON escape
(`\\u202e`), so the text shown is valid JSON that decodes back to exactly the arguments that
run. The renderer also displays it left to right whatever the script (`nbchat-exact` in its
style), so right-to-left letters cannot reorder what surrounds them.

Pure: no widgets, no I/O.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["needs_escape", "visible_json", "visible_text", "visible_text_lines"]

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

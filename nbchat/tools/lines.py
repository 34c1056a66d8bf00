"""Reading a text file's lines and matching a pattern, with bounded memory and time.

Owns how the file tools read: line by line from an open descriptor (a search: a block at a
time, the pattern tried on the block and only the lines around a hit tried alone), each line
cut at a byte bound (a 256 MiB file without a newline is not one 256 MiB line), a NUL byte
anywhere in what is read meaning "binary" (a text head does not make a binary tail readable),
and the tool's deadline and Stop checked between lines or blocks. Owns the search pattern too:
compiled with the `regex` library, which releases the GIL while it matches (the kernel's other
threads, Stop and the widget keep running) and gives up after a timeout, so a pattern that
backtracks exponentially (`(a|aa)+$`) costs at most `PATTERN_SLICE` of one line before the
model is told; and a pattern in the wrong dialect is answered with what is expected: a glob of
file names (`*.py`, invalid as a regular expression) or a regular expression for names (`.*py`,
which as a search matches nearly every line) points to `list_files` and the `glob` argument; a
pattern with no capital letter matches any case (`smart_case`, as ripgrep's); plain words that
found nothing as written are tried again apart or joined another way (`Pattern.loosened`:
`release_notes` finds "release notes"), then, for several words, any one of them in another
form (`Pattern.any_word`: `domain renewal` finds "renew the domain name").

Must not: open files (nbchat.tools.fileaccess does) or format results for the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import regex

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext
from nbchat.tools.listing import MAX_PATTERN_CHARS, glob_for_regex

__all__ = [
    "MAX_LINE_BYTES",
    "PATTERN_SLICE",
    "BinaryContentError",
    "Pattern",
    "find_lines",
    "read_lines",
    "smart_case",
]

MAX_LINE_BYTES = 64 * 1024  # a searched line is cut here; a match is shown in 300 characters
PATTERN_SLICE = 0.5  # seconds one line may take to match; `regex` may overrun it about twice
CHECK_EVERY = 256  # lines between two looks at the deadline and Stop
BLOCK_BYTES = 256 * 1024  # a search reads and first tries this much at once (memory stays ~1 MiB)
SLOW_BLOCK = -1  # `Pattern.search_block`: gave up on the block, try its lines one by one
# `Pattern.loosened`: words and the separators between them, the parts of a camelCase word,
# and what joins them in the loosened pattern.
PLAIN_WORDS = regex.compile(r"[A-Za-z0-9]+(?:[ _.\-]+[A-Za-z0-9]+)*")
CAMEL_PARTS = regex.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
LOOSE_JOIN = r"[\s_.\-]*"
# Short forms programmers type for words a file may spell out.
SHORT_FOR = {  # none is the start of its long form, which a search for it already finds
    "db": "database",
    "cfg": "config",
    "deps": "dependencies",
    "pkg": "package",
    "msg": "message",
    "pwd": "password",
    "img": "image",
    "idx": "index",
    "cnt": "count",
    "src": "source",
    "fn": "function",
}
# `Pattern.any_word`: words that find nothing by themselves, the endings cut so that a word's
# other forms match (`renewal`, `renewed` → `renew`), and the shortest stem left.
COMMON_WORDS = frozenset(
    {"the", "and", "for", "from", "with", "its", "this", "that", "our", "your", "any", "all"}
)
WORD_ENDINGS = (
    *("ations", "ation", "ings", "ing", "ions", "ion", "ments", "ment", "als", "al"),
    *("ed", "es", "s"),
)
MIN_STEM = 4
# Where a pattern can tell a line from a block of lines, the batch is not a fair test.
LINE_BOUND_SYNTAX = ("\\A", "\\Z", "\\z", "\\G", "(?<", "(?m", "(?s", "(?-")


class BinaryContentError(Exception):
    """A NUL byte was read: the file is not text (the caller says so, or skips it)."""


def read_lines(
    handle: BinaryIO, ctx: ToolContext, *, doing: str, max_line: int = MAX_LINE_BYTES
) -> Iterator[bytes]:
    """The lines of `handle` (newline kept), each at most `max_line` bytes: the rest of a longer
    line is read and dropped. Raises `BinaryContentError` at the first NUL byte, and the
    context's `ToolError` once the deadline passes or Stop is pressed."""
    for count, line in enumerate(iter(lambda: handle.readline(max_line), b""), start=1):
        if b"\0" in line:
            raise BinaryContentError
        if not line.endswith(b"\n") and len(line) == max_line:
            _skip_rest_of_line(handle, ctx, doing=doing)
        if count % CHECK_EVERY == 0:
            ctx.check(doing)
        yield line


def _skip_rest_of_line(handle: BinaryIO, ctx: ToolContext, *, doing: str) -> None:
    while True:
        ctx.check(doing)
        piece = handle.readline(MAX_LINE_BYTES)
        if b"\0" in piece:
            raise BinaryContentError
        if not piece or piece.endswith(b"\n"):
            return


class Pattern:
    """A search pattern: a regular expression, or the plain text when it is not a valid one."""

    def __init__(self, text: str, *, described: str = "") -> None:
        self.text = text
        self.described = described  # a loosened pattern: how it differs, in words
        _refuse_wrong_dialect(text)
        flags = smart_case(text)
        try:
            self.compiled = regex.compile(text, flags)
        except (regex.error, OverflowError, RecursionError):
            if _looks_like_glob(text):
                raise ToolError(
                    f"search_files looks for text inside files; {text!r} is a glob of file "
                    f"names. To list files by name, call list_files with pattern={text!r}; to "
                    f"search only such files, give the text to find as pattern and glob={text!r}."
                ) from None
            self.compiled = regex.compile(regex.escape(text), flags)
        # In MULTILINE mode ^ and $ match at every line of a batch as they do in one line.
        batchable = not any(mark in text for mark in LINE_BOUND_SYNTAX)
        self.batch = (
            regex.compile(self.compiled.pattern, flags | regex.MULTILINE) if batchable else None
        )

    def loosened(self) -> Pattern | None:
        """For plain words of two or more parts (`release_notes`, `release notes`,
        `releaseNotes`), the pattern that finds them apart or joined by any of space, `_`,
        `-` or `.`, in any case, a common short form also written out (`db`: `database`);
        None for anything else (one word with no short form, regex syntax). Identifiers and
        prose name the same thing: asked whether a to-do about release notes was still open, a
        1.5B model searched for `release_notes` in a list saying "release notes"; asked for
        the db's address from a log, for `db` in a log saying "database at …"."""
        if not PLAIN_WORDS.fullmatch(self.text):
            return None
        words = [word.lower() for word in CAMEL_PARTS.findall(self.text)]
        short = [word for word in words if word in SHORT_FOR]
        if len(words) < 2 and not short:
            return None
        how = ["its words apart or joined another way"] if len(words) >= 2 else []
        how += [f"{SHORT_FOR[word]!r} for {word!r}" for word in dict.fromkeys(short)]
        return Pattern(
            LOOSE_JOIN.join(_either_form(word) for word in words), described=", ".join(how)
        )

    def any_word(self) -> Pattern | None:
        """For plain words of two or more parts, the pattern that finds a line holding any
        one of them at a word's start in any case, each cut to its stem (`renewal` →
        `renew`), common and one- or two-letter words left out but for short forms (`db`);
        None for anything else. Asked where a domain renewal was mentioned, a 1.5B model
        searched for the two words together, found nothing in a list saying "renew the
        domain name", and named a file that did not hold it."""
        if not PLAIN_WORDS.fullmatch(self.text):
            return None
        words = [word.lower() for word in CAMEL_PARTS.findall(self.text)]
        if len(words) < 2:
            return None
        kept = [w for w in words if (len(w) > 2 or w in SHORT_FOR) and w not in COMMON_WORDS]
        stems = list(dict.fromkeys(_stem(word) for word in kept))
        if not stems:
            return None
        either = "|".join(_either_form(stem) for stem in stems)
        return Pattern(rf"\b(?:{either})", described=f"one of its words ({', '.join(stems)})")

    def search_block(self, block: str, position: int, ctx: ToolContext) -> int | None:
        """Where the pattern next occurs in `block` (lines joined by "\\n") from `position`,
        or None; `SLOW_BLOCK` when the block takes too long (its lines are then tried alone,
        which says which line is too slow, if one is)."""
        assert self.batch is not None
        budget = min(ctx.remaining(), PATTERN_SLICE)
        if budget <= 0:
            ctx.check("searching")
        try:
            found = self.batch.search(block, position, timeout=budget, concurrent=True)
        except TimeoutError:
            ctx.check("searching")
            return SLOW_BLOCK
        return None if found is None else found.start()

    def found_in(self, line: str, ctx: ToolContext) -> bool:
        """Whether the pattern occurs in `line`; a `ToolError` when matching takes too long."""
        budget = min(ctx.remaining(), PATTERN_SLICE)
        if budget <= 0:
            ctx.check("searching")
        try:
            return self.compiled.search(line, timeout=budget, concurrent=True) is not None
        except TimeoutError:
            ctx.check("searching")  # Stop, or the whole time limit: say that
            raise ToolError(
                f"The pattern {self.text!r} is too slow: matching it against one line took more "
                f"than {PATTERN_SLICE:g} s and was given up. Nested repetition such as (a|aa)+ "
                "or (x+x+)+ backtracks exponentially; use a simpler pattern or plain text."
            ) from None


# A backslash and what it escapes (`\S`, `\D`): regex syntax, not a letter of the text.
ESCAPE = regex.compile(r"\\.", regex.DOTALL)


def _stem(word: str) -> str:
    """`word` without the first of `WORD_ENDINGS` that leaves `MIN_STEM` letters."""
    for ending in WORD_ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= MIN_STEM:
            return word[: -len(ending)]
    return word


def _either_form(word: str) -> str:
    """`word` as a pattern, or its short form or the written-out word (`db|database`)."""
    long = SHORT_FOR.get(word)
    return f"(?:{word}|{long})" if long else regex.escape(word)


def smart_case(text: str) -> int:
    """`regex.IGNORECASE` for a pattern with no capital letter, as ripgrep's smart case: asked
    for a number a CSV held about a city, a 1.5B model searched for the city's name in lower
    case and found nothing. A
    capital anywhere (outside an escape) searches exactly as written."""
    plain = ESCAPE.sub("", text)
    return 0 if any(char.isupper() for char in plain) else regex.IGNORECASE


def _refuse_wrong_dialect(text: str) -> None:
    """A pattern too long to compile quickly, or one written for file names (`.*`, `.*py`,
    `^.*\\.py$`: a search never needs a leading `.*`, a name pattern does), is answered."""
    if len(text) > MAX_PATTERN_CHARS:
        raise ToolError(
            f"The pattern is {len(text):,} characters long; give at most "
            f"{MAX_PATTERN_CHARS:,} (a distinctive part of the text is enough)."
        )
    rest = text.removeprefix("^")
    if rest[:2] not in (".*", ".+"):
        return
    tail = rest[2:].removesuffix("$").removeprefix("\\").removeprefix(".")
    glob = glob_for_regex(text)
    if glob is None or len(tail) > 10 or not (tail.isalnum() or tail == ""):
        return
    raise ToolError(
        f"search_files finds lines inside files; {text!r} looks like a pattern for file names "
        "(a search never needs a leading '.*'). To list files by name, call list_files with "
        f"pattern={glob!r} ({'**/' + glob!r} looks in subfolders too); to search only such "
        f"files, give the text to find as pattern and glob={glob!r}."
    )


def _looks_like_glob(text: str) -> bool:
    """Whether an invalid regular expression reads as a glob: `*.py`, `?x`, `**/*.py`."""
    return text.startswith(("*", "?")) or "**" in text or "/*" in text


def find_lines(handle: BinaryIO, pattern: Pattern, ctx: ToolContext) -> Iterator[tuple[int, str]]:
    """(number, text) of each line of `handle` where `pattern` occurs, until the file ends or
    turns binary. The file is read a block at a time and the pattern tried on the whole block
    first, so the lines of a block are only split and tried one by one around a hit."""
    number = 0
    for lines in _line_blocks(handle, ctx):
        # One decode per block; lines hold no "\n", so "\n" in the text is a line boundary.
        text = b"\n".join(lines).decode("utf-8", errors="replace")
        candidates: Iterator[tuple[int, str]]
        if pattern.batch is None:
            candidates = enumerate(text.split("\n"), start=number + 1)
        else:
            candidates = _candidate_lines(text, pattern, ctx, first=number + 1)
        for line_number, line in candidates:
            if pattern.found_in(line, ctx):
                yield line_number, line
        number += len(lines)


def _candidate_lines(
    text: str, pattern: Pattern, ctx: ToolContext, *, first: int
) -> Iterator[tuple[int, str]]:
    """The lines of `text` where the block-wide pattern finds a match, each then checked alone.

    After a hit the search goes on from the next line, not from the match's end: a match that
    runs over several lines must not hide a later line that matches by itself."""
    position, line_start, line_number = 0, 0, first
    while (start := pattern.search_block(text, position, ctx)) is not None:
        if start == SLOW_BLOCK:
            rest = text[line_start:].split("\n")
            yield from enumerate(rest, start=line_number)
            return
        line_number += text.count("\n", line_start, start)
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        yield line_number, text[line_start:line_end]
        if line_end >= len(text):
            return
        position = line_start = line_end + 1
        line_number += 1


def _line_blocks(handle: BinaryIO, ctx: ToolContext) -> Iterator[list[bytes]]:
    """The file's lines a block at a time: no newline, trailing "\r" dropped, each cut at
    `MAX_LINE_BYTES` (the rest of a longer line is read and dropped). Ends before the line that
    holds the first NUL byte: a binary file (or its binary tail) is not searched further."""
    pending, overflowing = b"", False
    while True:
        ctx.check("searching")
        chunk = handle.read(BLOCK_BYTES)
        nul = chunk.find(b"\0")
        if nul >= 0:
            # Whole lines before the NUL's line are still searched, as a text file's would be.
            chunk, ended = chunk[: chunk.rfind(b"\n", 0, nul) + 1], True
            pending = pending if chunk else b""
        else:
            ended = not chunk
        pieces = chunk.split(b"\n")
        if not overflowing:
            pending += pieces[0]
        lines = [pending, *pieces[1:-1]] if len(pieces) > 1 else []
        tail = pieces[-1] if len(pieces) > 1 else pending
        overflowing = (len(pieces) == 1 and overflowing) or len(tail) > MAX_LINE_BYTES
        pending = tail[:MAX_LINE_BYTES]
        if ended and pending and nul < 0:
            lines.append(pending)
        if lines:
            yield [line[:MAX_LINE_BYTES].rstrip(b"\r") for line in lines]
        if ended:
            return

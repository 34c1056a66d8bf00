"""Reading a text file's lines and matching a pattern, with bounded memory and time.

Owns how the file tools read: line by line from an open descriptor, each line cut at a byte
bound (a 256 MiB file without a newline is not one 256 MiB line), a NUL byte anywhere in what
is read meaning "binary" (a text head does not make a binary tail readable), and the tool's
deadline and Stop checked between lines. Owns the search pattern too: compiled with the `regex`
library, which releases the GIL while it matches (the kernel's other threads, Stop and the
widget keep running) and gives up after a timeout, so a pattern that backtracks exponentially
(`(a|aa)+$`) costs at most `PATTERN_SLICE` of one line before the model is told.

Must not: open files (nbchat.tools.fileaccess does) or format results for the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import BinaryIO

import regex

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext

__all__ = [
    "MAX_LINE_BYTES",
    "PATTERN_SLICE",
    "BinaryContentError",
    "Pattern",
    "find_lines",
    "read_lines",
]

MAX_LINE_BYTES = 64 * 1024  # a searched line is cut here; a match is shown in 300 characters
PATTERN_SLICE = 0.5  # seconds one line may take to match; `regex` may overrun it about twice
CHECK_EVERY = 256  # lines between two looks at the deadline and Stop
BATCH_LINES = 512  # lines tried at once before line by line: one call instead of 512
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

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            self.compiled = regex.compile(text)
        except (regex.error, OverflowError, RecursionError):
            self.compiled = regex.compile(regex.escape(text))
        # In MULTILINE mode ^ and $ match at every line of a batch as they do in one line.
        batchable = not any(mark in text for mark in LINE_BOUND_SYNTAX)
        self.batch = regex.compile(self.compiled.pattern, regex.MULTILINE) if batchable else None

    def may_occur_in(self, block: str, ctx: ToolContext) -> bool:
        """False when the pattern surely occurs in no line of `block` (lines joined by "\\n")."""
        if self.batch is None:
            return True
        budget = min(ctx.remaining(), PATTERN_SLICE)
        if budget <= 0:
            ctx.check("searching")
        try:
            return self.batch.search(block, timeout=budget, concurrent=True) is not None
        except TimeoutError:
            ctx.check("searching")
            return True  # line by line then says which line is too slow, if one is

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


def find_lines(handle: BinaryIO, pattern: Pattern, ctx: ToolContext) -> Iterator[tuple[int, str]]:
    """(number, text) of each line of `handle` where `pattern` occurs, until the file ends or
    turns binary. Lines are tried in batches first, so a file without a match costs a few
    calls, not one per line."""
    lines = _text_lines(handle, ctx)
    number = 0
    while batch := list(islice(lines, BATCH_LINES)):
        # One decode for the batch; "\r\n" as "\n" so that `$` sees the end of each line.
        joined = b"\n".join(raw.rstrip(b"\r\n") for raw in batch)
        if pattern.may_occur_in(joined.decode("utf-8", errors="replace"), ctx):
            for offset, raw in enumerate(batch, start=1):
                text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if pattern.found_in(text, ctx):
                    yield number + offset, text
        number += len(batch)


def _text_lines(handle: BinaryIO, ctx: ToolContext) -> Iterator[bytes]:
    try:
        yield from read_lines(handle, ctx, doing="searching")
    except BinaryContentError:
        return  # a binary file (or its binary tail) is not searched further

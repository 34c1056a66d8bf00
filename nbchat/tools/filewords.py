"""Which of the workspace's files hold the words of a message: for a question about the user's
things that names no file (when a meeting in the user's notes is, which version a package is
pinned at), the files those words are in.

A small model deciding whether to look knows the workspace's file names and the names its code
defines (`nbchat.tools.overview`); asked about a meeting its notes hold, or a package its
requirements pin, with neither file named, it answered from nothing and invented a day and a
version. Told which files hold the message's rarer words, it has somewhere to look. It stays
the model's decision: this only adds a line to what its first step reads
(`nbchat.tools.offer.router_messages`).

Bounded and safe like the overview it follows: only the files the overview lists (at most
`MAX_FILES`), each opened inside the workspace without following links, its first `MAX_BYTES`
read, and again only when it changed (`nbchat.tools.filedigests`); a file with a NUL byte in them
taken as binary and skipped, one linear pattern over the bytes, at most `MAX_WORDS` words kept a
file. Words only, and only the
message's own: no file text leaves this module.

A word most of the files hold (more than `COMMON_SHARE` of them, and at least
`COMMON_FILES`) points nowhere and is left out, as are words under `MIN_LETTERS` letters.

Must not: run code, read below what the overview lists, or say anything but which listed files
hold which of the message's words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from nbchat.tools.filedigests import FileDigests

__all__ = ["FileWords", "describe_found"]

MAX_FILES = 60
MAX_BYTES = 64 * 1024
MAX_WORDS = 5_000
MIN_LETTERS = 4
COMMON_SHARE = 0.4
COMMON_FILES = 3
# At most this many of the message's words are reported, each with at most `FILES_PER_WORD` files.
MAX_FOUND = 6
FILES_PER_WORD = 3
# A word as the index keeps it: a letter, then letters, digits or `_`; at most 40 characters.
WORD = re.compile(rb"[A-Za-z][A-Za-z0-9_]{3,39}")  # MIN_LETTERS or more
MESSAGE_WORD = re.compile(WORD.pattern.decode())
# The message is read this far for its words (the first step sees no more of it either).
MESSAGE_CHARS = 400


class FileWords:
    """The words of a workspace's listed files, by file, kept between turns."""

    def __init__(self, workspace: Path) -> None:
        self._files = FileDigests(workspace, _words, max_bytes=MAX_BYTES)
        self._pending: list[str] | None = None

    def refresh(self, paths: Iterable[str]) -> None:
        """Take the listed files among `paths` (workspace-relative); those that changed are
        read again when a message is next looked up, not here: most turns never look one up
        (a message naming a file, a how-to, a model that chooses its own tools)."""
        self._pending = [path for path in paths if not path.endswith("/")][:MAX_FILES]

    def holding(self, text: str) -> dict[str, list[str]]:
        """Each word of `text` (case aside, `MIN_LETTERS` letters or more) that some listed
        files hold and most do not, with those files; at most `MAX_FOUND` words, in the
        message's order. Linear in `text` (read up to `MESSAGE_CHARS`) and the index."""
        if self._pending is not None:
            self._files.refresh(self._pending)
            self._pending = None
        common = max(COMMON_FILES, int(len(self._files) * COMMON_SHARE))
        found: dict[str, list[str]] = {}
        for match in MESSAGE_WORD.finditer(text[:MESSAGE_CHARS]):
            word = match.group().lower()
            if word in found:
                continue
            where = [path for path, words in self._files.items() if word in words]
            if where and len(where) < common:
                found[word] = where[:FILES_PER_WORD]
                if len(found) >= MAX_FOUND:
                    break
        return found


def _words(data: bytes) -> frozenset[str]:
    """The words of a file's first bytes (none for a binary file: a NUL byte among them)."""
    if b"\0" in data:
        return frozenset()
    words: dict[str, None] = {}
    for match in WORD.finditer(data):
        words[match.group().decode("ascii").lower()] = None
        if len(words) >= MAX_WORDS:
            break
    return frozenset(words)


def describe_found(found: Mapping[str, list[str]]) -> str:
    """`{"meeting": ["notes.txt"], ...}` as the line the first step reads, "" for nothing."""
    if not found:
        return ""
    parts = [f"{word} ({', '.join(paths)})" for word, paths in found.items()]
    return "Words of the message found in the workspace's files: " + "; ".join(parts) + "."

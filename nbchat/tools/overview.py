"""What the workspace holds, for the prompt: its top-level names and folders, and the names its
source files define.

The symbols: the names the workspace's source files define (`def greet`, `class Store`, `function
x`), so that a message naming one ("where is greet defined?", "how does slugify work") is known to
be about the user's own code, not a general question (`nbchat.tools.offer.named_in`).

Bounded and safe like the overview it follows: only the source files the overview lists (at
most `MAX_FILES`), each opened inside the workspace without following links
(`fileaccess.open_regular`), its first `MAX_BYTES` read, one line-anchored pattern per line
(linear), at most `MAX_SYMBOLS` names; a file is read again only when its size or modification
time changed (`SymbolIndex`). Names only: no source text leaves this module.

The overview: the workspace's top-level names and what its folders hold, for the system prompt.
A 0.5B model asked "Show me src/app.py" called `read_file("/path/to/src/app.py")`, and asked
which files there are it invented some. Naming the workspace's entries in the system prompt
(when tools are offered) gives it real paths to use. Bounded and safe by construction: one
listing of the workspace folder itself (`listing.entries_of`, from a descriptor opened by
`fileaccess.open_folder`), then of its top-level folders, never deeper and never following a
link (links are left out, as are hidden names, cache folders and what `.gitignore` ignores, as
the tools leave them out), at most `MAX_READ` entries read per folder and the time limit
checked while reading (it runs before every request: a folder of 300,000 files must not add
seconds to each), the first names picked without sorting the rest (`MAX_NAMES` at the top,
`PER_FOLDER` and `MAX_INSIDE` below it), each cut to `MAX_NAME_CHARS`, written `./name` and
quoted as a JSON string, so a hostile name stays a name and never reads as an instruction on a
line of its own.

`WorkspaceOverview` keeps the text between turns: `refresh()` lists again at the start of a
turn, and the text only changes when the listing does, so the prompt stays byte-identical for
the server's prompt cache.

Must not: run code, read file contents (but `.gitignore`, the listed source files' first
bytes, for their names, and the listed files' first bytes for their words,
`nbchat.tools.filewords`), or list anything below the top-level folders.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from nbchat.errors import NbchatError
from nbchat.tools.context import ToolContext
from nbchat.tools.fileaccess import open_folder
from nbchat.tools.filedigests import FileDigests
from nbchat.tools.filewords import FileWords
from nbchat.tools.listing import (
    HERE,
    SKIPPED_DIRS,
    Entry,
    GitIgnore,
    Ignoring,
    entries_of,
    ignore_text,
)

__all__ = [
    "Listing",
    "MAX_NAMES",
    "MAX_SYMBOLS",
    "MAX_NAME_CHARS",
    "SymbolIndex",
    "WorkspaceOverview",
    "describe_listing",
    "list_workspace",
    "overview_text",
    "with_overview",
]


SOURCE_SUFFIXES = (".py", ".js", ".ts", ".jsx", ".tsx", ".r", ".jl", ".rb", ".go", ".rs")
MAX_FILES = 40
MAX_BYTES = 64 * 1024
MAX_SYMBOLS = 300
DEFINITION = re.compile(
    rb"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?(?:def|class|function|fn|func)[ \t]+"
    rb"([A-Za-z_][A-Za-z0-9_]{1,60})",
    re.MULTILINE,
)


class SymbolIndex:
    """Names defined in a workspace's source files, by file, kept between turns."""

    def __init__(self, workspace: Path) -> None:
        self._files = FileDigests(workspace, _definitions, max_bytes=MAX_BYTES)

    def refresh(self, paths: Iterable[str]) -> None:
        """Read again the source files among `paths` (workspace-relative) that changed."""
        self._files.refresh([p for p in paths if p.lower().endswith(SOURCE_SUFFIXES)][:MAX_FILES])

    def names(self) -> dict[str, str]:
        """Each defined name with the (first) file defining it, at most `MAX_SYMBOLS`."""
        found: dict[str, str] = {}
        for path, names in self._files.items():
            for name in names:
                found.setdefault(name, path)
                if len(found) >= MAX_SYMBOLS:
                    return found
        return found


def _definitions(data: bytes) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.decode() for m in DEFINITION.findall(data)))


MAX_NAMES = 30
MAX_NAME_CHARS = 60
# What the top-level folders hold: a path the user half-names ("the log", "cleanup.sh") is then
# found without a listing first. A few names per folder, a cap in all, for every request's prompt.
PER_FOLDER = 8
MAX_INSIDE = 30
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Of a huge folder only the first entries (in the folder's own order, stable while it does not
# change) are read: the names shown are the first among them, and the rest is "more".
MAX_READ = 1_000
LIST_TIMEOUT = 5.0  # one folder's listing; a hung network mount must not hold up a turn


@dataclass(frozen=True)
class Listing:
    """What the overview shows: the top-level names (folders end in "/"), what the top-level
    folders hold (`inside`, as paths), and how much more there is (`more`, "" for nothing)."""

    top: tuple[str, ...] = ()
    inside: tuple[str, ...] = ()
    more: str = ""

    @property
    def paths(self) -> tuple[str, ...]:
        return (*self.top, *self.inside)


def list_workspace(workspace: Path) -> Listing | None:
    """The overview's names (None when the workspace cannot be read)."""
    ctx = ToolContext(workspace, timeout=LIST_TIMEOUT, deadline=time.monotonic() + LIST_TIMEOUT)
    try:
        with open_folder(ctx.workspace, ".") as folder:
            read = list(entries_of(folder, ctx, limit=MAX_READ))
            rules = _rules_of(folder, HERE)
            names = [
                name + ("/" if kind == "folder" else "")
                for name, kind in read
                if kind in ("file", "folder") and not _left_out(name, kind, folder, rules, ctx)
            ]
            first = heapq.nsmallest(MAX_NAMES, names, key=lambda name: name.rstrip("/"))
            inside = _inside(folder, [n for n in first if n.endswith("/")], rules, ctx)
    except (OSError, NbchatError):
        return None  # no overview is better than a failed turn
    if len(read) >= MAX_READ:
        more = f" and more (only its first {MAX_READ:,} entries were read)"
    else:
        more = f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else ""
    return Listing(tuple(first), tuple(inside), more)


def overview_text(workspace: Path) -> str:
    """One paragraph naming the workspace's top-level files and folders, then what the
    folders hold ("" when unreadable)."""
    return describe_listing(list_workspace(workspace))


def describe_listing(listing: Listing | None) -> str:
    if listing is None:
        return ""
    if not listing.top:
        return "The workspace is empty."
    shown = ", ".join(_quoted(name) for name in listing.top)
    inside = listing.inside
    below = f" Inside its folders: {', '.join(_quoted(n) for n in inside)}." if inside else ""
    return (
        f"The workspace is the current folder '.'. Its top level (folders end in '/'): "
        f"{shown}{listing.more}.{below} Paths given to tools are relative to '.'."
    )


def _inside(
    root: int, folders: list[str], rules: tuple[GitIgnore, ...], ctx: ToolContext
) -> list[str]:
    """What the top-level `folders` hold, the same way the tools list them (hidden, ignored
    and cache folders left out): at most `PER_FOLDER` names each, `MAX_INSIDE` in all."""
    found: list[str] = []
    for folder in folders:
        name = folder.rstrip("/")
        if name in SKIPPED_DIRS or len(found) >= MAX_INSIDE:
            continue
        try:
            fd = os.open(name, FOLDER_FLAGS, dir_fd=root)
        except OSError:
            continue  # vanished, unreadable, or swapped for a link since it was listed
        try:
            here = (*rules, *_rules_of(fd, PurePosixPath(name)))
            entries = [
                f"{name}/{entry}" + ("/" if kind == "folder" else "")
                for entry, kind in entries_of(fd, ctx, limit=MAX_READ)
                if kind in ("file", "folder")
                and not _left_out(f"{name}/{entry}", kind, fd, here, ctx)
            ]
        finally:
            os.close(fd)
        room = min(PER_FOLDER, MAX_INSIDE - len(found))
        found += heapq.nsmallest(room, entries, key=lambda entry: entry.rstrip("/"))
    return found


def _rules_of(fd: int, at: PurePosixPath) -> tuple[GitIgnore, ...]:
    text = ignore_text(fd)
    return (GitIgnore(text, at=at),) if text else ()


def _left_out(
    path: str, kind: str, fd: int, rules: tuple[GitIgnore, ...], ctx: ToolContext
) -> bool:
    """Hidden, or ignored by a `.gitignore`, as `list_files` leaves it out by default."""
    entry = Entry(PurePosixPath(path), "folder" if kind == "folder" else "file", fd)
    return Ignoring().leaves_out(entry, rules, ctx)


def _quoted(name: str) -> str:
    """`"./name"`: a JSON string (newlines, quotes and control characters escaped), with the
    `./` that made the model write workspace paths instead of `/src/app.py`."""
    if len(name) > MAX_NAME_CHARS:
        name = name[: MAX_NAME_CHARS - 1] + "…"
    return json.dumps("./" + name)


def with_overview(system_prompt: str, overview: str) -> str:
    """The system prompt followed by the overview (the prompt alone when there is none)."""
    if not overview:
        return system_prompt
    return f"{system_prompt}\n\n{overview}" if system_prompt else overview


class WorkspaceOverview:
    """The overview of one conversation's workspace, listed again only by `refresh()`."""

    def __init__(self, workspace: Path, *, enabled: bool = True) -> None:
        self.workspace = workspace
        self.enabled = enabled
        self._listing: Listing | None = None
        self._text: str | None = None
        self._symbols = SymbolIndex(workspace)
        self._words = FileWords(workspace)

    def refresh(self) -> None:
        """List the workspace again (at a turn's start); the text changes only if it did."""
        self._listing = list_workspace(self.workspace) if self.enabled else None
        self._text = describe_listing(self._listing) if self.enabled else ""
        paths = self._listing.paths if self._listing is not None else ()
        self._symbols.refresh(paths)
        self._words.refresh(paths)

    def text(self) -> str:
        if self._text is None:
            self.refresh()
        return self._text or ""

    def paths(self) -> tuple[str, ...]:
        """The paths the overview shows (none when it is off or the workspace unreadable)."""
        if self._text is None:
            self.refresh()
        return self._listing.paths if self._listing is not None else ()

    def symbols(self) -> dict[str, str]:
        """The names the listed source files define, each with its file (`SymbolIndex`)."""
        if self._text is None:
            self.refresh()
        return self._symbols.names()

    def files_holding(self, text: str) -> dict[str, list[str]]:
        """The words of `text` that few listed files hold, each with those files
        (`nbchat.tools.filewords`)."""
        if self._text is None:
            self.refresh()
        return self._words.holding(text)

    def system_prompt(self, system_prompt: str, *, tools_offered: bool) -> str:
        """What a request sends as its system prompt: with the overview when it offers tools."""
        if not tools_offered or not self.enabled:
            return system_prompt
        return with_overview(system_prompt, self.text())

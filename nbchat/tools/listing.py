"""Walking a workspace folder without leaving it, and matching glob patterns on what is found.

Owns the walk behind `list_files` and `search_files`: from an open folder descriptor, each
subfolder opened relative to its parent with `O_NOFOLLOW` (a folder swapped for a link is
skipped, never entered), links reported as links and not descended, entries in name order, the
tool's deadline and Stop checked per folder. Glob patterns are matched here against the path
below the walked folder, segment by segment, so a pattern can only select among names the walk
found: `../*`, `/proc/self/*` and absolute patterns name nothing the walk can reach (and are
refused with a message).

Must not: read file contents, or open anything by a path string.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext

__all__ = ["MAX_DEPTH", "Entry", "GlobPattern", "walk"]

MAX_DEPTH = 100  # folders deeper than this are not walked (and recursion stays shallow)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Kind = Literal["file", "folder", "link", "other"]


@dataclass(frozen=True)
class Entry:
    """A name found by the walk: its path below the walked folder, its kind (the entry itself,
    links not followed) and the descriptor of its folder, valid while the walk is at it."""

    relative: PurePosixPath
    kind: Kind
    folder_fd: int

    @property
    def name(self) -> str:
        return self.relative.name


def walk(
    folder_fd: int,
    ctx: ToolContext,
    *,
    depth: int | None = None,
    skip: frozenset[str] = frozenset(),
) -> Iterator[Entry]:
    """Every entry below `folder_fd`, a folder's own entries before its subfolders' ones.

    `depth` 1 is the folder's own entries; folders named in `skip` are listed, not entered.
    """
    yield from _walk(folder_fd, ctx, PurePosixPath(), min(depth or MAX_DEPTH, MAX_DEPTH), skip)


def _walk(
    fd: int, ctx: ToolContext, below: PurePosixPath, depth: int, skip: frozenset[str]
) -> Iterator[Entry]:
    ctx.check("walking the workspace")
    with os.scandir(fd) as found:
        entries = sorted(((item.name, _kind(item)) for item in found), key=lambda e: e[0])
    for name, kind in entries:
        yield Entry(below / name, kind, fd)
    if depth <= 1:
        return
    for name, kind in entries:
        if kind != "folder" or name in skip:
            continue
        try:
            sub = os.open(name, _FOLDER, dir_fd=fd)
        except OSError:
            continue  # vanished, unreadable, or swapped for a link since it was listed
        try:
            yield from _walk(sub, ctx, below / name, depth - 1, skip)
        finally:
            os.close(sub)


def _kind(item: os.DirEntry[str]) -> Kind:
    try:
        if item.is_symlink():
            return "link"
        if item.is_dir(follow_symlinks=False):
            return "folder"
        return "file" if item.is_file(follow_symlinks=False) else "other"
    except OSError:
        return "other"


class GlobPattern:
    """A `list_files` pattern: `*.py`, `src/*.txt`, `**/*.py` (`**` is any number of folders).

    Matched segment by segment against a path below the listed folder; `*` never crosses a `/`.
    """

    def __init__(self, text: str) -> None:
        path = PurePosixPath(text)
        if path.is_absolute() or ".." in path.parts:
            raise ToolError(
                f"The pattern {text!r} leaves the listed folder; patterns select names inside "
                "it. Give the folder as `path` and a pattern such as '*.py' or '**/*.py'."
            )
        self.text = text
        self.segments = tuple(part for part in path.parts if part != ".") or ("*",)

    def depth(self) -> int | None:
        """How deep a walk must go to find every match (None: all the way)."""
        return None if "**" in self.segments else len(self.segments)

    def matches(self, relative: PurePosixPath) -> bool:
        return _match(relative.parts, self.segments)


def _match(parts: tuple[str, ...], segments: tuple[str, ...]) -> bool:
    # Memoised on positions: a pattern full of `**` stays polynomial, not exponential.
    @functools.cache
    def match_from(part: int, segment: int) -> bool:
        if segment == len(segments):
            return part == len(parts)
        if segments[segment] == "**":
            return any(match_from(at, segment + 1) for at in range(part, len(parts) + 1))
        return (
            part < len(parts)
            and fnmatch.fnmatchcase(parts[part], segments[segment])
            and match_from(part + 1, segment + 1)
        )

    return match_from(0, 0)

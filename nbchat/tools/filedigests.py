"""Something read from the first bytes of each of the workspace's listed files, kept between turns:
the names a source file defines (`nbchat.tools.overview.SymbolIndex`), the words a file holds
(`nbchat.tools.filewords`).

Each file is opened inside the workspace without following links (`fileaccess.open_regular`),
only its first `max_bytes` are read, and it is read again only when its size or modification
time changed, so a turn's refresh costs a `stat` per unchanged file. A file that is gone,
unreadable or no longer a regular file inside the workspace is dropped.

Must not: keep the bytes themselves (only what `digest` makes of them), or read a path it was not
given.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from nbchat.errors import NbchatError
from nbchat.tools.fileaccess import open_regular

__all__ = ["FileDigests"]

T = TypeVar("T")
# Size and modification time (ns): a file whose stamp is unchanged is not read again.
Stamp = tuple[int, int]


class FileDigests(Generic[T]):
    """`digest(first bytes)` of each file given to `refresh`, by workspace-relative path."""

    def __init__(self, workspace: Path, digest: Callable[[bytes], T], *, max_bytes: int) -> None:
        self.workspace = workspace
        self.digest = digest
        self.max_bytes = max_bytes
        self._files: dict[str, tuple[Stamp, T]] = {}

    def refresh(self, paths: Iterable[str]) -> None:
        """Keep the digests of `paths` only, reading again those that changed."""
        kept: dict[str, tuple[Stamp, T]] = {}
        for path in paths:
            found = self._read(path)
            if found is not None:
                kept[path] = found
        self._files = kept

    def items(self) -> Iterator[tuple[str, T]]:
        """(path, digest), in the order the paths were given."""
        for path, (_stamp, value) in self._files.items():
            yield path, value

    def __len__(self) -> int:
        return len(self._files)

    def _read(self, path: str) -> tuple[Stamp, T] | None:
        try:
            fd, status = open_regular(self.workspace, path)
        except (OSError, NbchatError):
            return None  # gone, unreadable, or no longer a regular file inside the workspace
        stamp = (status.st_size, status.st_mtime_ns)
        try:
            known = self._files.get(path)
            if known is not None and known[0] == stamp:
                return known
            data = os.read(fd, self.max_bytes)
        except OSError:
            return None
        finally:
            os.close(fd)
        return stamp, self.digest(data)

"""The names the workspace's source files define (`def greet`, `class Store`, `function x`), so
that a message naming one ("where is greet defined?", "how does slugify work") is known to be
about the user's own code, not a general question (`nbchat.tools.offer.named_in`).

Bounded and safe like the overview it follows: only the source files the overview lists (at
most `MAX_FILES`), each opened inside the workspace without following links
(`fileaccess.open_regular`), its first `MAX_BYTES` read, one line-anchored pattern per line
(linear), at most `MAX_NAMES` names; a file is read again only when its size or modification
time changed (`SymbolIndex`). Names only: no source text leaves this module.

Must not: read anything the overview does not list, or run code.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from nbchat.errors import NbchatError
from nbchat.tools.fileaccess import open_regular

__all__ = ["MAX_NAMES", "SymbolIndex"]

SOURCE_SUFFIXES = (".py", ".js", ".ts", ".jsx", ".tsx", ".r", ".jl", ".rb", ".go", ".rs")
MAX_FILES = 40
MAX_BYTES = 64 * 1024
MAX_NAMES = 300
DEFINITION = re.compile(
    rb"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?(?:def|class|function|fn|func)[ \t]+"
    rb"([A-Za-z_][A-Za-z0-9_]{1,60})",
    re.MULTILINE,
)


class SymbolIndex:
    """Names defined in a workspace's source files, by file, kept between turns."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._files: dict[str, tuple[tuple[int, int], tuple[str, ...]]] = {}

    def refresh(self, paths: Iterable[str]) -> None:
        """Read again the source files among `paths` (workspace-relative) that changed."""
        sources = [p for p in paths if p.lower().endswith(SOURCE_SUFFIXES)][:MAX_FILES]
        kept: dict[str, tuple[tuple[int, int], tuple[str, ...]]] = {}
        for path in sources:
            found = self._read(path)
            if found is not None:
                kept[path] = found
        self._files = kept

    def names(self) -> dict[str, str]:
        """Each defined name with the (first) file defining it, at most `MAX_NAMES`."""
        found: dict[str, str] = {}
        for path, (_stamp, names) in self._files.items():
            for name in names:
                found.setdefault(name, path)
                if len(found) >= MAX_NAMES:
                    return found
        return found

    def _read(self, path: str) -> tuple[tuple[int, int], tuple[str, ...]] | None:
        try:
            fd, status = open_regular(self.workspace, path)
        except (OSError, NbchatError):
            return None  # gone, unreadable, or no longer a regular file inside the workspace
        stamp = (status.st_size, status.st_mtime_ns)
        try:
            known = self._files.get(path)
            if known is not None and known[0] == stamp:
                return known
            data = os.read(fd, MAX_BYTES)
        except OSError:
            return None
        finally:
            os.close(fd)
        names = tuple(dict.fromkeys(m.decode() for m in DEFINITION.findall(data)))
        return stamp, names

"""The built-in tools: read, write, edit, list and search files in the workspace; run a command.

Each takes a `ToolContext` (filled in by the executor, never shown to the model). Every file is
opened through nbchat.tools.fileaccess (component by component, never following a link out of
the workspace, regular files only) and read through nbchat.tools.lines (streamed, bounded, under
the call's deadline and Stop). Problems the model can fix (a missing file, an ambiguous edit)
raise `ToolError` with a message saying what to do; the executor turns it into the tool result.
`write_file`, `edit_file` and `run_shell` are dangerous: the approval policy applies to them.

Every result fits the call's output limit (`ToolContext.output_limit`: a share of the chat's
budget, set by the conversation) and says what it left out and how to get it: read on from a
line, list a subfolder, narrow a search, filter a command's output. `list_files` and
`search_files` leave out hidden entries and what `.gitignore` files ignore, as ripgrep does,
unless asked (`include_hidden`).

Must not: check the approval policy, catch their own errors into text, or keep state between
calls.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import PurePosixPath
from typing import BinaryIO

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext
from nbchat.tools.fileaccess import (
    OpenedFile,
    open_entry,
    open_folder,
    open_regular,
    split_inside,
)
from nbchat.tools.lines import BinaryContentError, Pattern, find_lines, read_lines
from nbchat.tools.listing import SKIPPED_DIRS, Entry, GlobPattern, Ignoring, rules_above, walk
from nbchat.tools.registry import Tool
from nbchat.tools.shell import run_command

__all__ = [
    "builtin_tools",
    "edit_file",
    "list_files",
    "read_file",
    "run_shell",
    "search_files",
    "write_file",
]

MAX_LISTED = 500
MAX_MATCHES = 200
MAX_LINE_SHOWN = 300
MAX_EDITED_BYTES = 16 * 1024 * 1024  # edit_file holds the file in memory twice
NOTE_ROOM = 200  # characters kept free for a tool's note, so the output cap cuts nothing
_CUT_MARK = re.compile(r"\n\[\.\.\. [\d,]+ characters cut \.\.\.\]\n")  # context.cut_marker's
SHELL_CUT = (
    "[the middle of the output was cut to fit the tool output limit: filter it (grep, head, "
    "tail) or redirect it to a file and read that with read_file]"
)


def read_file(
    ctx: ToolContext, path: str, start_line: int | None = None, end_line: int | None = None
) -> str:
    """Read a text file in the workspace, whole or from start_line to end_line.

    Args:
        path: File path, relative to the workspace.
        start_line: First line (1-based); default: the first.
        end_line: Last line (inclusive); default: the last.
    """
    first = max(start_line or 1, 1)
    budget = max(ctx.output_limit - NOTE_ROOM, ctx.output_limit // 2, 1)
    kept: list[bytes] = []
    size = count = 0
    with _opened(ctx, path) as (handle, status):
        lines = read_lines(handle, ctx, doing=f"reading {path!r}", max_line=budget + 1)
        for count, line in _binary_is_an_error(enumerate(lines, start=1), path, status):
            if count < first or (end_line is not None and count > end_line):
                continue  # before the range, or an empty range read to the end to count lines
            if size + len(line) > budget:
                kept.append(line[: budget - size])
                return _decoded(kept) + (
                    f"\n[... cut at {budget:,} characters (the tool output limit); "
                    f"read on with start_line={count}]"
                )
            kept.append(line)
            size += len(line)
            if count == end_line:
                break  # not one byte more than the range is read
    if not kept and (start_line is not None or end_line is not None):
        last = count if end_line is None else min(end_line, count)
        raise ToolError(
            f"{path!r} has {count} lines, so lines {first}-{last} are empty. "
            "Ask for a range inside the file."
        )
    return _decoded(kept)


def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create a text file, or overwrite one, with this content (folders are created).

    Args:
        path: The file to write (a new name creates it).
        content: The complete new content of the file.
    """
    _write(ctx, path, content)
    plural = "" if len(content) == 1 else "s"
    return f"Wrote {len(content):,} character{plural} to {_shown(ctx, path)}."


def edit_file(ctx: ToolContext, path: str, old: str, new: str) -> str:
    """Change a text file: replace the exact text `old`, which occurs once, with `new`.

    Args:
        path: File path, relative to the workspace.
        old: The exact text to replace, including whitespace.
        new: The text to put in its place.
    """
    with _opened(ctx, path) as (handle, status):
        if not old:
            raise ToolError("'old' is empty; give the exact text to replace.")
        data = handle.read(MAX_EDITED_BYTES + 1)
    if len(data) > MAX_EDITED_BYTES or b"\0" in data:
        what = "too large to edit" if len(data) > MAX_EDITED_BYTES else "a binary file"
        raise ToolError(
            f"{path!r} is {what} ({status.st_size:,} bytes); use run_shell for it instead."
        )
    text = data.decode("utf-8", errors="replace")
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"The text to replace was not found in {path!r} (0 matches). Read the file and copy "
            "the exact text, including whitespace and indentation."
        )
    if count > 1:
        raise ToolError(
            f"The text to replace occurs {count} times in {path!r}; include more of the "
            "surrounding lines so that it matches exactly once."
        )
    _write(ctx, path, text.replace(old, new, 1))
    return f"Replaced 1 occurrence in {_shown(ctx, path)}."


def list_files(
    ctx: ToolContext, path: str = ".", pattern: str = "*", include_hidden: bool = False
) -> str:
    """List the files and folders in a folder (folders end in '/').

    Args:
        path: Folder, relative to the workspace.
        pattern: Glob pattern such as '*.py', or '**/*.py' to look in subfolders too.
    """
    glob = GlobPattern(pattern)
    parts = split_inside(ctx.workspace, path)
    base = PurePosixPath(*parts)
    ignoring = None if include_hidden else Ignoring(rules_above(ctx.workspace, parts))
    skip = frozenset() if include_hidden else SKIPPED_DIRS
    found: list[Entry] = []
    with _folder(ctx, path) as folder:
        for entry in walk(folder, ctx, depth=glob.depth(), skip=skip, ignoring=ignoring):
            if glob.matches(entry.relative):
                found.append(entry)
            if len(found) > MAX_LISTED:
                break
    listed = sorted(_listed(ctx, base / entry.relative, entry.kind) for entry in found[:MAX_LISTED])
    shown, unshown = _fitted(listed, ctx.output_limit - NOTE_ROOM - len(glob.note))
    lines = [glob.note] if glob.note else []
    lines += shown or [f"No entries match {glob.text!r} in {path!r}."]
    if unshown or len(found) > MAX_LISTED:
        total = f"more than {MAX_LISTED}" if len(found) > MAX_LISTED else f"{len(listed)}"
        lines.append(
            f"[... {len(shown)} of {total} entries shown; list a subfolder (path) or use a "
            "narrower pattern]"
        )
    if ignoring is not None and ignoring.left_out:
        lines.append(
            f"[{ignoring.left_out} hidden or .gitignore'd entries left out; include_hidden=true "
            "lists them]"
        )
    return "\n".join(lines)


def search_files(
    ctx: ToolContext,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    include_hidden: bool = False,
) -> str:
    """Find the lines holding a text in the files under a folder; returns 'file:line: text'
    lines.

    Args:
        pattern: The text to find, as the request names it, such as 'TODO' (or a regular
            expression).
        path: Leave it out to search the whole workspace, or name a folder or file in it.
        glob: Only files whose name matches this glob, such as '*.py'.
    """
    matcher = Pattern(pattern)
    names = None if glob is None else GlobPattern(glob, taker="search_files' glob argument")
    parts = split_inside(ctx.workspace, path)
    ignoring = None if include_hidden else Ignoring(rules_above(ctx.workspace, parts))
    found = _first_found(ctx, matcher, path, names=names, ignoring=ignoring)
    notes = [names.note] if names is not None and names.note else []
    for loose in (matcher.loosened, matcher.any_word):
        if found or (looser := loose()) is None:
            continue
        # The same entries again, counted afresh (a second count would double what was left out).
        ignoring = None if include_hidden else Ignoring(rules_above(ctx.workspace, parts))
        found = _first_found(ctx, looser, path, names=names, ignoring=ignoring)
        if found:
            notes.append(f"No line holds {pattern!r} as written; these hold {looser.described}:")
    note = "\n".join(notes)
    shown, unshown = _fitted(found[:MAX_MATCHES], ctx.output_limit - NOTE_ROOM - len(note))
    results = ([note] if note else []) + shown
    if unshown or len(found) > MAX_MATCHES:
        total = f"more than {MAX_MATCHES}" if len(found) > MAX_MATCHES else f"{len(found)}"
        results.append(
            f"[... {len(shown)} of {total} matches shown; narrow the search: a more specific "
            "pattern, a path, or a glob such as '*.py']"
        )
    if not found:
        results.append(f"No matches for {pattern!r} in {path!r}.")
        if ignoring is not None and ignoring.left_out:
            results.append(
                f"[{ignoring.left_out} hidden or .gitignore'd entries were not searched; "
                "include_hidden=true searches them]"
            )
    return "\n".join(results)


def _first_found(
    ctx: ToolContext,
    matcher: Pattern,
    path: str,
    *,
    names: GlobPattern | None,
    ignoring: Ignoring | None,
) -> list[str]:
    """The first `MAX_MATCHES` + 1 matching lines (one more says there are more)."""
    with closing(_found_lines(ctx, matcher, path, names=names, ignoring=ignoring)) as lines:
        return list(itertools.islice(lines, MAX_MATCHES + 1))


def _found_lines(
    ctx: ToolContext,
    matcher: Pattern,
    path: str,
    *,
    names: GlobPattern | None,
    ignoring: Ignoring | None,
) -> Generator[str, None, None]:
    """'file:line: text' for each matching line, file after file."""
    for shown, handle in _searchable_files(ctx, path, names, ignoring):
        for number, line in _matching_lines(ctx, handle, matcher):
            yield f"{shown}:{number}: {line[:MAX_LINE_SHOWN]}"


def _fitted(lines: list[str], room: int) -> tuple[list[str], int]:
    """The first of `lines` that fit in `room` characters (one line each), and how many did
    not."""
    used = 0
    for count, line in enumerate(lines):
        used += len(line) + 1
        if used > room:
            return lines[:count], len(lines) - count
    return lines, 0


def run_shell(ctx: ToolContext, command: str, timeout: float | None = None) -> str:
    """Run a shell command in the workspace folder (also to delete, move or copy files, or to
    run programs and tests); returns its exit code and output.

    Args:
        command: The command line, such as `git status`.
        timeout: Seconds before it is killed.
    """
    limit = ctx.time_limit(timeout)
    result = run_command(
        command,
        cwd=ctx.workspace,
        env=ctx.child_environment(),
        timeout=limit,
        output_limit=max(ctx.output_limit - len(SHELL_CUT) - 1, 1),
        stop=ctx.stop,
    )
    output = result.output or "(no output)"
    if _CUT_MARK.search(output):  # shell.py kept the head and the tail: say how to see the rest
        output += "\n" + SHELL_CUT
    if result.ending == "timed out":
        raise ToolError(
            f"Timed out after {limit:g} s: the command and everything it started were killed. "
            f"Output so far:\n{output}"
        )
    if result.ending == "stopped":
        raise ToolError(
            "Stopped by the user: the command and everything it started were killed. "
            f"Output so far:\n{output}"
        )
    stopped = result.background_stopped
    if stopped:
        processes = "process was" if stopped == 1 else "processes were"
        output += (
            f"\n[{stopped} background {processes} still running when the command ended, "
            "and stopped: nothing a command starts outlives it]"
        )
    return f"exit code: {result.exit_code}\n{output}"


@contextmanager
def _opened(ctx: ToolContext, path: str) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """The regular file `path` open for reading, with its status; OS errors said for the model."""
    with _translated(path):
        fd, status = open_regular(ctx.workspace, path)
    with os.fdopen(fd, "rb") as handle:
        yield handle, status


def _write(ctx: ToolContext, path: str, content: str) -> None:
    with _translated(path):
        fd, _ = open_regular(ctx.workspace, path, write=True, make_parents=True)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(content)


@contextmanager
def _folder(ctx: ToolContext, path: str) -> Iterator[int]:
    try:
        with open_folder(ctx.workspace, path) as fd:
            yield fd
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(
            f"{path!r} is not a folder in the workspace; use '.' for its root."
        ) from None


@contextmanager
def _translated(path: str) -> Iterator[None]:
    """OS errors from opening `path` as messages the model can act on."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(
            f"No file {path!r} in the workspace. Use list_files or search_files to find it."
        ) from None
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a folder; use list_files to see what is in it.") from None
    except PermissionError:
        raise ToolError(
            f"Permission denied for {path!r}; the user's files stay as they are."
        ) from None
    except OSError as error:
        raise ToolError(f"Cannot open {path!r}: {error.strerror or error}.") from None


def _binary_is_an_error(
    lines: Iterator[tuple[int, bytes]], path: str, status: os.stat_result
) -> Iterator[tuple[int, bytes]]:
    try:
        yield from lines
    except BinaryContentError:
        raise ToolError(
            f"{path!r} looks like a binary file ({status.st_size:,} bytes); not shown."
        ) from None


def _decoded(kept: list[bytes]) -> str:
    return b"".join(kept).decode("utf-8", errors="replace")


def _shown(ctx: ToolContext, path: str) -> str:
    """How a path inside the workspace is shown to the model."""
    return PurePosixPath(*split_inside(ctx.workspace, path)).as_posix() or "."


def _listed(ctx: ToolContext, shown: PurePosixPath, kind: str) -> str:
    if kind == "folder":
        return f"{shown}/"
    if kind != "link":
        return str(shown)
    try:  # where the link leads, worked out without the kernel following it
        with open_folder(ctx.workspace, str(shown)):
            return f"{shown}/"
    except ToolError:
        return f"{shown} (link to outside the workspace; not readable)"
    except OSError:
        return str(shown)  # to a file, or to nothing (a broken link)


def _searchable_files(
    ctx: ToolContext, path: str, glob: GlobPattern | None, ignoring: Ignoring | None
) -> Iterator[tuple[str, BinaryIO]]:
    """(how it is shown, an open handle) for each regular file to search under `path`."""
    base = PurePosixPath(*split_inside(ctx.workspace, path))
    skip = frozenset() if ignoring is None else SKIPPED_DIRS
    try:
        with open_folder(ctx.workspace, path) as folder:
            for entry in walk(folder, ctx, skip=skip, ignoring=ignoring):
                shown = (base / entry.relative).as_posix()
                if glob is not None and not _selects(glob, PurePosixPath(shown)):
                    continue
                opened = _open_searchable(ctx, entry, shown)
                if opened is not None:
                    with os.fdopen(opened[0], "rb") as handle:
                        yield shown, handle
            return
    except NotADirectoryError:
        pass  # a single file
    except FileNotFoundError:
        raise ToolError(
            f"{path!r} does not exist in the workspace; use '.' for its root."
        ) from None
    with _opened(ctx, path) as (handle, _):
        yield base.as_posix(), handle


def _selects(glob: GlobPattern, shown: PurePosixPath) -> bool:
    """A glob without a `/` selects by name, at any depth (`*.py`, as ripgrep's `-g`); one with
    a `/` by the path from the workspace root, `**` for any folders (`src/**/*.py` selects
    `src/app.py`, which `PurePosixPath.match` refused)."""
    if "/" not in glob.text:
        return shown.match(glob.text)
    return glob.matches(shown)


def _open_searchable(ctx: ToolContext, entry: Entry, shown: str) -> OpenedFile | None:
    if entry.kind == "file":
        return open_entry(entry.folder_fd, entry.name)
    if entry.kind != "link":
        return None  # pipes, sockets and devices are never opened
    try:  # a link is searched when it leads to a regular file inside the workspace
        return open_regular(ctx.workspace, shown)
    except (ToolError, OSError):
        return None


def _matching_lines(
    ctx: ToolContext, handle: BinaryIO, matcher: Pattern
) -> Iterator[tuple[int, str]]:
    try:
        yield from find_lines(handle, matcher, ctx)
    except OSError:
        return  # unreadable (permissions, vanished): not a match, and not worth failing over


def builtin_tools() -> tuple[Tool, ...]:
    """The built-in tools, described afresh (nothing is built at import time)."""
    return (
        Tool.from_function(read_file),
        Tool.from_function(write_file, dangerous=True),
        Tool.from_function(edit_file, dangerous=True),
        Tool.from_function(list_files),
        Tool.from_function(search_files),
        Tool.from_function(run_shell, dangerous=True),
    )

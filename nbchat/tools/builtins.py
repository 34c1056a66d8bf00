"""The built-in tools: read, write, edit, list and search files in the workspace; run a command.

Each takes a `ToolContext` (filled in by the executor, never shown to the model) and confines
every path to the workspace through `ToolContext.resolve`. Problems the model can fix (a missing
file, an ambiguous edit) raise `ToolError` with a message saying what to do; the executor turns
it into the tool result. `write_file`, `edit_file` and `run_shell` are dangerous: the approval
policy applies to them.

Must not: check the approval policy, catch their own errors into text, or keep state between
calls.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext
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
BINARY_SNIFF = 8192
# Directories no one wants searched: version control, caches, environments.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv"})
SKIPPED_DIRS |= {".mypy_cache", ".ruff_cache", ".pytest_cache", ".ipynb_checkpoints"}


def read_file(
    ctx: ToolContext, path: str, start_line: int | None = None, end_line: int | None = None
) -> str:
    """Read a text file in the workspace, whole or from start_line to end_line.

    Args:
        path: File path, relative to the workspace.
        start_line: First line to return (1-based). Default: the first line.
        end_line: Last line to return (inclusive). Default: the last line.
    """
    target = _existing_file(ctx, path)
    text = _read_text(target, path)
    if start_line is None and end_line is None:
        return text
    lines = text.splitlines(keepends=True)
    first = max(start_line or 1, 1)
    last = len(lines) if end_line is None else min(end_line, len(lines))
    if first > len(lines) or first > last:
        raise ToolError(
            f"{path!r} has {len(lines)} lines, so lines {first}-{last} are empty. "
            "Ask for a range inside the file."
        )
    return "".join(lines[first - 1 : last])


def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a text file in the workspace (parent folders are created).

    Args:
        path: File path, relative to the workspace.
        content: The complete new content of the file.
    """
    target = ctx.resolve(path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory; give a file path.")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    plural = "" if len(content) == 1 else "s"
    return f"Wrote {len(content):,} character{plural} to {ctx.relative(target)}."


def edit_file(ctx: ToolContext, path: str, old: str, new: str) -> str:
    """Replace one exact occurrence of `old` with `new` in a text file.

    Args:
        path: File path, relative to the workspace.
        old: The exact text to replace, including whitespace; it must occur exactly once.
        new: The text to put in its place.
    """
    target = _existing_file(ctx, path)
    if not old:
        raise ToolError("'old' is empty; give the exact text to replace.")
    text = _read_text(target, path)
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
    target.write_text(text.replace(old, new, 1), encoding="utf-8")
    return f"Replaced 1 occurrence in {ctx.relative(target)}."


def list_files(ctx: ToolContext, path: str = ".", pattern: str = "*") -> str:
    """List files and folders (folders end in '/') under a workspace folder.

    Args:
        path: Folder, relative to the workspace.
        pattern: Glob pattern such as '*.py', or '**/*.py' to look in subfolders too.
    """
    folder = ctx.resolve(path)
    if not folder.is_dir():
        raise ToolError(f"{path!r} is not a folder in the workspace; use '.' for its root.")
    shown: list[str] = []
    for found in sorted(folder.glob(pattern)):
        if len(shown) == MAX_LISTED:
            shown.append(f"[... more than {MAX_LISTED} entries; use a narrower pattern]")
            break
        if not found.resolve().is_relative_to(ctx.workspace):
            shown.append(f"{ctx.relative(found)} (link to outside the workspace; not readable)")
        else:
            shown.append(ctx.relative(found) + ("/" if found.is_dir() else ""))
    return "\n".join(shown) if shown else f"No entries match {pattern!r} in {path!r}."


def search_files(ctx: ToolContext, pattern: str, path: str = ".", glob: str | None = None) -> str:
    """Search the text files under a folder for a regular expression (or plain text, when the
    pattern is not a valid regular expression); returns 'file:line: text' lines.

    Args:
        pattern: Regular expression or plain text to look for.
        path: Folder (or file), relative to the workspace.
        glob: Only search files whose name matches this glob, such as '*.py'.
    """
    root = ctx.resolve(path)
    if not root.exists():
        raise ToolError(f"{path!r} does not exist in the workspace; use '.' for its root.")
    try:
        matcher = re.compile(pattern)
    except re.error:
        matcher = re.compile(re.escape(pattern))
    results: list[str] = []
    for file in _searchable_files(ctx, root, glob):
        for number, line in _matching_lines(file, matcher):
            if len(results) == MAX_MATCHES:
                results.append(f"[... more than {MAX_MATCHES} matches; narrow the search]")
                return "\n".join(results)
            results.append(f"{ctx.relative(file)}:{number}: {line[:MAX_LINE_SHOWN]}")
    return "\n".join(results) if results else f"No matches for {pattern!r} in {path!r}."


def run_shell(ctx: ToolContext, command: str, timeout: float | None = None) -> str:
    """Run a shell command in the workspace folder; returns its exit code and output.

    Args:
        command: The command line, run with /bin/sh.
        timeout: Seconds before it is killed (at most the configured tool timeout).
    """
    limit = ctx.timeout if timeout is None or timeout <= 0 else min(timeout, ctx.timeout)
    result = run_command(
        command,
        cwd=ctx.workspace,
        env=ctx.child_environment(),
        timeout=limit,
        output_limit=ctx.output_limit,
        stop=ctx.stop,
    )
    output = result.output or "(no output)"
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
    return f"exit code: {result.exit_code}\n{output}"


def _existing_file(ctx: ToolContext, path: str) -> Path:
    target = ctx.resolve(path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a folder; use list_files to see what is in it.")
    if not target.is_file():
        raise ToolError(
            f"No file {path!r} in the workspace. Use list_files or search_files to find it."
        )
    return target


def _read_text(target: Path, path: str) -> str:
    with target.open("rb") as handle:
        if b"\0" in handle.read(BINARY_SNIFF):
            size = target.stat().st_size
            raise ToolError(f"{path!r} looks like a binary file ({size:,} bytes); not shown.")
    return target.read_text(encoding="utf-8", errors="replace")


def _searchable_files(ctx: ToolContext, root: Path, glob: str | None) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name not in SKIPPED_DIRS)
        for name in sorted(files):
            file = Path(folder) / name
            if glob is not None and not file.match(glob):
                continue
            if file.resolve().is_relative_to(ctx.workspace):
                yield file


def _matching_lines(file: Path, matcher: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    try:
        with file.open("rb") as handle:
            if b"\0" in handle.read(BINARY_SNIFF):
                return
        with file.open(encoding="utf-8", errors="replace") as text:
            for number, line in enumerate(text, start=1):
                if matcher.search(line):
                    yield number, line.rstrip("\n")
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

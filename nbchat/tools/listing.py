"""Walking a workspace folder without leaving it, leaving out what nobody asked for, and
matching glob patterns on what is found.

Owns the walk behind `list_files` and `search_files`: from an open folder descriptor, each
subfolder opened relative to its parent with `O_NOFOLLOW` (a folder swapped for a link is
skipped, never entered), links reported as links and not descended, entries in name order, the
tool's deadline and Stop checked per folder and while a folder is read. Glob patterns are matched
here against the path below the walked folder, segment by segment, so a pattern can only select
among names the walk found: `../*`, `/proc/self/*` and absolute patterns name nothing the walk
can reach (and are refused with a message).

What the walk leaves out: `.git` always; with an `Ignoring`, as ripgrep does, hidden names and
what `.gitignore` files ignore (each applies to its own folder and below, a deeper one overriding
its parents; those above the walked folder up to the workspace root apply too; whether or not
the workspace is a git repository). Gitignore's rules (`/`, a trailing `/`, `!`, `*`, `**`, `?`)
are translated by `pathspec` and matched with `regex` under a time limit: a `.gitignore` is
workspace content, which a hostile repository writes.

Must not: read file contents other than a `.gitignore`'s first `MAX_IGNORE_BYTES`, or open
anything by a path string.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

import pathspec
import regex

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext
from nbchat.tools.fileaccess import open_entry, open_folder

__all__ = [
    "MAX_DEPTH",
    "SKIPPED_DIRS",
    "Entry",
    "GitIgnore",
    "GlobPattern",
    "Ignoring",
    "entries_of",
    "glob_for_regex",
    "ignore_text",
    "looks_like_regex",
    "rules_above",
    "walk",
]

MAX_DEPTH = 100  # folders deeper than this are not walked (and recursion stays shallow)
GIT_FOLDER = ".git"  # never listed nor entered, whatever is asked
IGNORE_FILE = ".gitignore"
MAX_IGNORE_BYTES = 64 * 1024  # of a .gitignore, only this much is read
RULE_SLICE = 0.5  # seconds one .gitignore pattern may take on one path before it is given up
CHECK_EVERY = 1024  # entries read between two looks at the deadline and Stop
MAX_PATTERN_CHARS = 1_000  # a longer glob is refused: matching cost grows with its length
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_GITIGNORE = pathspec.lookup_pattern("gitignore")
HERE = PurePosixPath()  # the walked folder itself
# Folders no one wants searched even where no .gitignore names them: caches and environments.
# Listed, not entered, unless hidden entries are asked for too (`.git` is never entered).
SKIPPED_DIRS = frozenset({".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv"})
SKIPPED_DIRS |= {".mypy_cache", ".ruff_cache", ".pytest_cache", ".ipynb_checkpoints"}
ANY_FOLDERS = "^(?:.+/)?"  # how pathspec's expression for a line without a `/` inside starts

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


class GitIgnore:
    """The rules of one `.gitignore`, for the entries of the walk below its folder.

    `at` is its folder below the walked one (a `.gitignore` the walk met); `prefix` is the walked
    folder below its folder (a `.gitignore` above the walked folder). Lines pathspec finds
    invalid are dropped, as git drops them. A line without a `/` inside (`*.log`, `build/`)
    matches an entry's name at any depth, so it is tried on the name alone (a short string);
    the other lines on the path below the `.gitignore`'s folder. Each kind is one regular
    expression, one alternative per line, last line first: the first alternative that matches
    is the line that decides, found in one call.
    """

    def __init__(
        self,
        text: str,
        *,
        at: PurePosixPath = HERE,
        prefix: PurePosixPath = HERE,
    ) -> None:
        self.at = str(at) + "/" if at.parts else ""
        self.prefix = str(prefix) + "/" if prefix.parts else ""
        names: list[tuple[str, int]] = []
        paths: list[tuple[str, int]] = []
        self.ignores: list[bool] = []
        for line in text.splitlines():
            try:
                rule = _GITIGNORE(line)
            except ValueError:
                continue
            if isinstance(rule, pathspec.RegexPattern) and rule.include is not None and rule.regex:
                name_rule = _name_rule(rule.regex.pattern)
                kind = paths if name_rule is None else names
                kind.append((name_rule or rule.regex.pattern, len(self.ignores)))
                self.ignores.append(rule.include)
        self.names = _Alternatives(names)
        self.paths = _Alternatives(paths)

    def verdict(self, entry: Entry, ctx: ToolContext) -> bool | None:
        """True: the entry is ignored; False: re-included by a `!` line; None: no line matches.

        A folder is matched as `name/`, so `build/` takes folders only. A match that ends
        inside `prefix` only names the folder the tool was asked about: it hides nothing in it.
        """
        mark = "/" if entry.kind == "folder" else ""
        path = self.prefix + str(entry.relative)[len(self.at) :] + mark
        by_name = self.names.deciding(entry.name + mark, ctx)
        by_path = self.paths.deciding(path, ctx, after=len(self.prefix))
        lines = [line for line in (by_name, by_path) if line is not None]
        return self.ignores[max(lines)] if lines else None


class _Alternatives:
    """Some lines of a `.gitignore` as one regular expression, last line first."""

    def __init__(self, rules: list[tuple[str, int]]) -> None:
        rules = rules[::-1]
        self.lines = [line for _, line in rules]
        self.sources = [source for source, _ in rules]
        joined = (
            regex.compile("|".join(f"({source})" for source in self.sources)) if rules else None
        )
        # One group per line, or the group number would not say which line matched.
        self.joined = joined if joined is not None and joined.groups == len(rules) else None

    @functools.cached_property
    def each(self) -> list[regex.Pattern[str]]:
        """The lines one by one: needed only when the joined expression cannot decide."""
        return [regex.compile(source) for source in self.sources]

    def deciding(self, text: str, ctx: ToolContext, *, after: int = 0) -> int | None:
        """The last line that matches `text` with a match ending past `after`, or None."""
        if self.joined is not None:
            found = _match_rule(self.joined, text, ctx)
            if found is None:
                return None
            if found.end() > after and found.lastindex:
                return self.lines[found.lastindex - 1]
        for rule, line in zip(self.each, self.lines, strict=True):
            found = _match_rule(rule, text, ctx)
            if found is not None and found.end() > after:
                return line
        return None


def _name_rule(source: str) -> str | None:
    """The expression for an entry's name alone (`^build/`), when pathspec's expression for the
    line matches that name at any depth (`^(?:.+/)?build/`); None when it needs the path."""
    if not source.startswith(ANY_FOLDERS):
        return None
    rest = source[len(ANY_FOLDERS) :]
    core = rest.removesuffix("(?:/|$)") if rest.endswith("(?:/|$)") else rest.removesuffix("/")
    return None if "/" in core else "^" + rest


def _match_rule(rule: regex.Pattern[str], path: str, ctx: ToolContext) -> regex.Match[str] | None:
    try:
        return rule.match(path, timeout=min(max(ctx.remaining(), 0.0), RULE_SLICE))
    except TimeoutError:
        ctx.check("reading .gitignore rules")
        return None  # a pattern that backtracks for ever ignores nothing


class Ignoring:
    """What a walk leaves out besides `.git`: hidden names and what `.gitignore` files ignore.

    `above` holds the rules of the walked folder's ancestors (`rules_above`); `left_out` counts
    the entries left out, so a tool can say so.
    """

    def __init__(self, above: tuple[GitIgnore, ...] = ()) -> None:
        self.above = above
        self.left_out = 0

    def leaves_out(self, entry: Entry, rules: tuple[GitIgnore, ...], ctx: ToolContext) -> bool:
        ignored = entry.name.startswith(".") or _is_ignored(entry, rules, ctx)
        self.left_out += ignored
        return ignored


def _is_ignored(entry: Entry, rules: tuple[GitIgnore, ...], ctx: ToolContext) -> bool:
    """The deepest `.gitignore` with a line for the entry decides (it overrides its parents)."""
    for ignore in reversed(rules):
        verdict = ignore.verdict(entry, ctx)
        if verdict is not None:
            return verdict
    return False


def rules_above(workspace: Path, parts: tuple[str, ...]) -> tuple[GitIgnore, ...]:
    """The `.gitignore` rules of the folders from the workspace root down to the folder at
    `parts` (itself excluded: the walk reads its own), outermost first."""
    found: list[GitIgnore] = []
    for depth in range(len(parts)):
        try:
            with open_folder(workspace, "/".join(parts[:depth]) or ".") as fd:
                text = ignore_text(fd)
        except (OSError, ToolError):
            continue  # an ancestor that cannot be read has no rules to give
        if text:
            found.append(GitIgnore(text, prefix=PurePosixPath(*parts[depth:])))
    return tuple(found)


def ignore_text(folder_fd: int) -> str:
    """The folder's `.gitignore` (a regular file, not a link), its first `MAX_IGNORE_BYTES`."""
    opened = open_entry(folder_fd, IGNORE_FILE)
    if opened is None:
        return ""
    with os.fdopen(opened[0], "rb") as handle:
        return handle.read(MAX_IGNORE_BYTES).decode("utf-8", errors="replace")


def walk(
    folder_fd: int,
    ctx: ToolContext,
    *,
    depth: int | None = None,
    skip: frozenset[str] = frozenset(),
    ignoring: Ignoring | None = None,
) -> Iterator[Entry]:
    """Every entry below `folder_fd`, a folder's own entries before its subfolders' ones.

    `depth` 1 is the folder's own entries; folders named in `skip` are listed, not entered;
    `.git` is neither; with `ignoring`, what it leaves out is neither.
    """
    rules = () if ignoring is None else ignoring.above
    limit = min(depth or MAX_DEPTH, MAX_DEPTH)
    yield from _walk(folder_fd, ctx, HERE, depth=limit, skip=skip, ignoring=ignoring, rules=rules)


def _walk(
    fd: int,
    ctx: ToolContext,
    below: PurePosixPath,
    *,
    depth: int,
    skip: frozenset[str],
    ignoring: Ignoring | None,
    rules: tuple[GitIgnore, ...],
) -> Iterator[Entry]:
    ctx.check("walking the workspace")
    found = sorted(pair for pair in entries_of(fd, ctx) if pair[0] != GIT_FOLDER)
    entries = [Entry(below / name, kind, fd) for name, kind in found]
    if ignoring is not None:
        text = ignore_text(fd)
        rules = (*rules, GitIgnore(text, at=below)) if text else rules
        entries = [entry for entry in entries if not ignoring.leaves_out(entry, rules, ctx)]
    yield from entries
    if depth <= 1:
        return
    for entry in entries:
        if entry.kind != "folder" or entry.name in skip:
            continue
        try:
            sub = os.open(entry.name, _FOLDER, dir_fd=fd)
        except OSError:
            continue  # vanished, unreadable, or swapped for a link since it was listed
        try:
            yield from _walk(
                sub, ctx, entry.relative, depth=depth - 1, skip=skip, ignoring=ignoring, rules=rules
            )
        finally:
            os.close(sub)


def entries_of(
    fd: int, ctx: ToolContext, *, limit: int | None = None
) -> Iterator[tuple[str, Kind]]:
    """One folder's (name, kind) pairs in the folder's own order, at most `limit` of them; the
    deadline and Stop are checked while reading (a folder may hold millions)."""
    with os.scandir(fd) as listing:
        for count, item in enumerate(listing, start=1):
            if count % CHECK_EVERY == 0:
                ctx.check("walking the workspace")
            yield item.name, _kind(item)
            if limit is not None and count >= limit:
                return


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
    A regular expression given instead is read as the glob it unambiguously means (`note` says
    so), or refused saying what is expected.
    """

    def __init__(self, text: str, *, taker: str = "list_files") -> None:
        if len(text) > MAX_PATTERN_CHARS:
            raise ToolError(
                f"The pattern is {len(text):,} characters long; a glob such as '*.py' or "
                f"'**/*.py' of at most {MAX_PATTERN_CHARS:,} characters is expected."
            )
        glob, self.note = text, ""
        if looks_like_regex(text):
            translated = glob_for_regex(text)
            if translated is None:
                raise ToolError(
                    f"{taker} takes a glob such as '*.py' ('**/*.py' to look in subfolders "
                    f"too); {text!r} looks like a regular expression. Give a glob, or use "
                    "search_files to search the text inside files."
                )
            glob = translated
            deeper = "" if "/" in glob else f"; '**/{glob}' looks in subfolders too"
            self.note = (
                f"({taker} takes a glob: the regular expression {text!r} was read as the "
                f"glob {glob!r}{deeper}.)"
            )
        path = PurePosixPath(glob)
        if path.is_absolute() or ".." in path.parts:
            raise ToolError(
                f"The pattern {text!r} leaves the listed folder; patterns select names inside "
                "it. Give the folder as `path` and a pattern such as '*.py' or '**/*.py'."
            )
        self.text = glob
        parts = [part for part in path.parts if part != "."] or ["*"]
        # `**/**` is `**`: kept once, a pattern of many cannot make matching costly.
        self.segments = tuple(
            part for at, part in enumerate(parts) if part != "**" or parts[at - 1 : at] != ["**"]
        )

    def depth(self) -> int | None:
        """How deep a walk must go to find every match (None: all the way)."""
        return None if "**" in self.segments else len(self.segments)

    def matches(self, relative: PurePosixPath) -> bool:
        return _match(relative.parts, self.segments)


def looks_like_regex(text: str) -> bool:
    """Whether a name pattern has syntax only a regular expression has: an anchor (`^test`,
    `py$`), a backslash escape (`\\.py`), `.+`, or a name that starts with `.*` (`.*py`, `.*`).
    As globs, `.*` and `.*py` would name hidden entries only, which are left out unless asked
    for, and then `*` and `*py` list them too; `*.*` and `test.*` stay globs."""
    return (
        text.startswith("^")
        or text.endswith("$")
        or "\\" in text
        or ".+" in text
        or any(segment.startswith(".*") for segment in text.split("/"))
    )


def glob_for_regex(text: str) -> str | None:
    """The glob a regular expression for names means, or None when a glob cannot say it.

    Literals, escaped punctuation, `.` (`?`), `.*` (`*`), `.+` (`?*`) and character classes
    translate; other repetition, groups, alternation and `\\d`-style classes do not. A side
    with an anchor is closed; without anchors the name's start is open and its end closed, as a
    name pattern usually means (`.*\\.py` is `*.py`); `^test` is `test*`. Linear in the text.
    """
    anchored_start = text.startswith("^")
    body = text[1:] if anchored_start else text
    anchored_end = body.endswith("$") and not body.endswith("\\$")
    body = body[:-1] if anchored_end else body
    pieces: list[str] = []
    index = 0
    while index < len(body):
        piece, index = _glob_piece(body, index)
        if piece is None:
            return None
        pieces.append(piece)
    glob = "".join(pieces)
    if not anchored_start:
        glob = "*" + glob
    if anchored_start and not anchored_end:
        glob += "*"
    while "**" in glob:  # `**` is "any folders" in a glob, never what `.*.*` meant
        glob = glob.replace("**", "*")
    return glob


def _glob_piece(body: str, index: int) -> tuple[str | None, int]:
    """The glob for the regular expression's token at `index`, and where the next one starts."""
    char, after = body[index], body[index + 1 : index + 2]
    if char == "\\":
        if not after or after.isalnum():
            return None, index  # \\d, \\w, \\b: classes and positions a glob cannot say
        return (f"[{after}]" if after in "*?[]" else after), index + 2
    if char == ".":
        if after in ("*", "+"):
            return ("*" if after == "*" else "?*"), index + 2
        return "?", index + 1
    if char == "[":
        close = body.find("]", index + 2)
        following = body[close + 1 : close + 2] if close > 0 else ""
        klass = body[index : close + 1]
        repeated = following != "" and following in "*+?{"
        if close < 0 or "\\" in klass or klass.startswith("[^") or repeated:
            return None, index
        return klass, close + 1
    if char in "*+?{}()|^$":
        return None, index  # repetition, groups, alternation: not a glob
    return char, index + 1


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

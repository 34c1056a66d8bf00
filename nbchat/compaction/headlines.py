"""Error headlines: the one line of a tool's output that says what went wrong, found by code.

A headline is a Traceback's last line; a line naming an exception (`KeyError: 'x'`, `Error: …`),
also behind a prefix (pytest's `E       X: …`, pytest-xdist's `INTERNALERROR> X: …`); a test
runner's summary line (`FAILED …`, `ERROR …`, unittest's `FAIL: …`); a command-line tool's
`prog: error: …` (argparse) or `error: …` (git, pip); and a shell's own errors (`command not
found`, `No such file or directory`, `syntax error near unexpected token`, `fatal: …`,
`Segmentation fault`). Each is kept as the whole stripped line (at most HEADLINE_CHARS), so the
words the run printed are the words kept.

`fold_headlines` turns many per-test lines of one file with one message (sixty
`ERROR tests/test_x.py::test_…` lines from one missing module, say) into one counted line
(`ERROR tests/test_x.py::… ×60: ModuleNotFoundError: …`), so they cannot push the task's own
errors out of the facts' budget.

Plain string operations, line by line: linear in the output's length (outputs can be
megabytes), no regular expression. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "FOLD_AT",
    "HEADLINE_CHARS",
    "error_headlines",
    "fold_headlines",
    "is_headline",
]

HEADLINE_CHARS = 200
# Lines searched after a "Traceback" for the exception that ended it.
TRACEBACK_SEARCH_LINES = 400
# Per-test lines of one file with one message are folded from this many on.
FOLD_AT = 3
TRACEBACK = "Traceback (most recent call last)"
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# Prefixes a runner puts before a line of its own: the line behind it is read as any other.
INTERNAL_PREFIX = "INTERNALERROR>"  # pytest's internal errors, pytest-xdist's workers
PYTEST_PREFIX = "E "  # pytest's assertion and exception lines: `E       NameError: …`
EXCEPTION_ENDINGS = ("Error", "Exception")
PYTEST_OUTCOMES = frozenset({"Failed", "Exit"})  # pytest.fail(), pytest.exit()
SUMMARY_WORDS = ("FAILED", "ERROR")
SHELL_PHRASES = (
    "No such file or directory",
    "syntax error near unexpected token",
    "syntax error: unexpected end of file",
)
SHELL_STARTS = ("fatal: ", "Segmentation fault")
IDENTIFIER_CHARACTERS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."
)
FOLD_MARK = "…"


def error_headlines(text: str) -> list[str]:
    """Distinct error headlines in `text`, in order of appearance (each at most
    HEADLINE_CHARS characters): see the module docstring for what counts."""
    lines = text.splitlines()
    found: dict[str, None] = {}
    for index, line in enumerate(lines):
        stripped = line.strip()
        if _unprefixed(stripped).startswith(TRACEBACK):
            headline = _traceback_headline(lines, index + 1)
            if headline:
                found.setdefault(headline[:HEADLINE_CHARS], None)
        elif is_headline(stripped):
            found.setdefault(stripped[:HEADLINE_CHARS], None)
    return list(found)


def is_headline(stripped: str) -> bool:
    """Whether one stripped line is an error headline (a Traceback's last line aside)."""
    body = _unprefixed(stripped)
    if _names_exception(body, endings=EXCEPTION_ENDINGS) or _is_summary(body):
        return True
    if stripped.startswith(PYTEST_PREFIX) and _is_pytest_exception(body):
        return True
    if body.startswith(SHELL_STARTS) or body.endswith(": command not found"):
        return True
    if any(phrase in body for phrase in SHELL_PHRASES):
        return True
    return _is_tool_error(body)


def _unprefixed(stripped: str) -> str:
    """The line behind a runner's prefix (the line itself when it has none)."""
    if stripped.startswith(INTERNAL_PREFIX):
        return stripped[len(INTERNAL_PREFIX) :].strip()
    if stripped.startswith(PYTEST_PREFIX):
        return stripped[len(PYTEST_PREFIX) :].strip()
    return stripped


def _names_exception(text: str, *, endings: tuple[str, ...] | None) -> bool:
    """`Name` or `Name: message`, Name a dotted identifier (ending in one of `endings`,
    unless None)."""
    name, colon, rest = text.partition(":")
    if colon and rest and not rest[0].isspace():
        return False
    if not name or not (name[0].isalpha() or name[0] == "_"):
        return False
    if not set(name) <= IDENTIFIER_CHARACTERS:
        return False
    return endings is None or name.endswith(endings)


def _is_pytest_exception(body: str) -> bool:
    """pytest's `E` line naming the exception a test raised: a qualified name
    (`requests.exceptions.InvalidURL: …`) or pytest's own `Failed: …`."""
    name = body.partition(":")[0]
    return ("." in name or name in PYTEST_OUTCOMES) and _names_exception(body, endings=None)


def _is_summary(body: str) -> bool:
    """A test runner's summary line: `FAILED …`, `ERROR …` (a whole word), `FAIL: …`."""
    if body.startswith("FAIL: "):
        return True
    for word in SUMMARY_WORDS:
        if body.startswith(word):
            after = body[len(word) : len(word) + 1]
            return not after or not (after.isalnum() or after == "_")
    return False


def _is_tool_error(body: str) -> bool:
    """`error: …` (git, pip) or `prog: error: …` (argparse), `prog` one word."""
    if body.startswith("error: "):
        return True
    prog, colon, rest = body.partition(": ")
    return bool(colon) and bool(prog) and " " not in prog and rest.startswith("error: ")


def _traceback_headline(lines: Sequence[str], start: int) -> str:
    """The first unindented line after a traceback's frames (behind the runner's prefix, if
    the traceback had one): the exception it ended with."""
    for line in lines[start : start + TRACEBACK_SEARCH_LINES]:
        body = line[len(INTERNAL_PREFIX) + 1 :] if line.startswith(INTERNAL_PREFIX) else line
        if body.startswith((TRACEBACK, *CHAINED)):
            return ""  # a chained traceback: its own headline comes later
        if body[:1].isspace() or not body:
            continue  # a frame or its source line
        if _names_exception(body.rstrip(), endings=None):
            return line.strip()
        # Whatever a harness inserted (elision markers) is skipped.
    return ""


def _per_test(headline: str) -> tuple[str, str, str] | None:
    """(kind, file, message) of a per-test summary line `KIND file::test[ - message]`."""
    kind, space, rest = headline.partition(" ")
    if kind not in SUMMARY_WORDS or not space:
        return None
    node, _, message = rest.partition(" - ")
    path, colons, test = node.partition("::")
    if not colons or not test or " " in path or FOLD_MARK in test:
        return None
    return kind, path, message.strip()


def fold_headlines(headlines: Sequence[str]) -> list[tuple[int, str]]:
    """`headlines` with each group of at least FOLD_AT per-test lines of one file and one
    message (`ERROR a.py::test_x - E: m`) folded into one counted line where its first member
    stood (`ERROR a.py::… ×60: E: m`); every other line as it was, in its place. Each line comes
    with the index of the headline it stands for (a group's first member)."""
    keys = [_per_test(headline) for headline in headlines]
    groups: dict[tuple[str, str, str], int] = {}
    for key in keys:
        if key is not None:
            groups[key] = groups.get(key, 0) + 1
    folded: list[tuple[int, str]] = []
    written: set[tuple[str, str, str]] = set()
    for index, (headline, key) in enumerate(zip(headlines, keys, strict=True)):
        if key is None or groups[key] < FOLD_AT:
            folded.append((index, headline))
        elif key not in written:
            written.add(key)
            kind, path, message = key
            line = f"{kind} {path}::{FOLD_MARK} ×{groups[key]}"
            folded.append((index, f"{line}: {message}" if message else line))
    return folded

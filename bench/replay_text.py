"""Deterministic text for the replay: exact lengths that read like code, logs, grep hits, prose.

`generated_text(seed, chars, kind)` returns exactly `chars` characters, the same ones for the
same seed, so the replay's messages and tool outputs are identical in every run. (Only their
lengths matter to the measure; the user messages are sized from them, so the first-request
sizes stay exact even if another Python's `random` produced different words.) Pure.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

__all__ = ["generated_text"]


def generated_text(seed_text: str, chars: int, kind: str) -> str:
    """Deterministic text of exactly `chars` characters that reads like `kind` output."""
    rng = random.Random(zlib.crc32(seed_text.encode()))
    make = LINE_MAKERS[kind]
    lines: list[str] = []
    length = 0
    while length < chars:
        line = make(rng, len(lines) + 1)
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:chars]


VOCABULARY = (
    "value frame index column parse date reader loader sample channel offset buffer unit "
    "timestamp series field record header config result errors path shape dtype"
)
WORDS = VOCABULARY.split()


def _code_line(rng: random.Random, number: int) -> str:
    a, b, c = rng.sample(WORDS, 3)
    patterns = (
        f"def {a}_{b}(self, {c}: str, *, strict: bool = False) -> {b.title()}:",
        f"    {a} = self._{b}.get({c!r}, None)",
        f"    if {a} is None:\n        raise ValueError(f'missing {b}: {{{c}}}')",
        f"    return [{b}.{c} for {b} in {a} if {b}.{c} is not None]",
        f"    # {a} {b} are stored in {c} order, see {a}_{b}.rst",
        f"class {a.title()}{b.title()}({c.title()}Base):",
    )
    return rng.choice(patterns)


def _log_line(rng: random.Random, number: int) -> str:
    a, b = rng.sample(WORDS, 2)
    if number % 37 == 0:
        return f"FAILED tests/test_io.py::test_{a}_{b} - AssertionError: {a} != {b}"
    if number % 53 == 0:
        return f"E   ValueError: time data '13/04/2023' does not match format ('{a}')"
    status = rng.choice(("PASSED", "PASSED", "PASSED", "SKIPPED"))
    return f"tests/test_{a}.py::test_{b}_{number} {status} [{number % 100:3d}%]"


def _grep_line(rng: random.Random, number: int) -> str:
    a, b, c = rng.sample(WORDS, 3)
    return f"src/labtools/io/{a}_reader.py:{number * 7}:    {b} = parse_dates({c}, dayfirst=True)"


def _attachment_line(rng: random.Random, number: int) -> str:
    """A notebook attachment: the cell's source, then its traceback, then rows of the data."""
    if number <= 40:
        return _code_line(rng, number)
    if number <= 46:
        return TRACEBACK[number - 41]
    day, month = rng.randint(1, 28), rng.randint(1, 12)
    reading = ",".join(f"{rng.uniform(-50, 150):.3f}" for _ in range(4))
    return f"{day:02d}/{month:02d}/2023 {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d},{reading}"


TRACEBACK = (
    "Traceback (most recent call last):",
    '  File "/home/user/analysis.ipynb", cell 4, line 3, in <module>',
    '  File "src/labtools/loader.py", line 88, in load_measurements',
    "    frame = parse_dates(raw, dayfirst=True)",
    "ValueError: time data '13/04/2023' does not match format '%m/%d/%Y'",
    "timestamp,channel_a,channel_b,channel_c,channel_d",
)


def _prose_line(rng: random.Random, number: int) -> str:
    words = rng.choices(WORDS, k=14)
    return " ".join(words).capitalize() + "."


LINE_MAKERS: dict[str, Callable[[random.Random, int], str]] = {
    "code": _code_line,
    "log": _log_line,
    "grep": _grep_line,
    "prose": _prose_line,
    "attachment": _attachment_line,
}

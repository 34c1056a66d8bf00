"""`docs/results.md`, the project's one place for measured figures: written by the benchmarks,
never by hand, and quoted by the README in a way a test can check.

The file is a title and a series of sections, each between two markers:

    <!-- results:NAME -->
    ### NAME
    Measured 2026-11-25 09:12 UTC on <machine line>; load (1/5/15 min) 0.52 0.60 0.70 at the
    start, 1.90 1.40 0.80 at the end. `<the command that wrote it>`

    | figure | value | … |
    |---|---|---|
    …
    <!-- /results:NAME -->

`write_section` replaces one section (or adds it beside the sections of its group: the part of
NAME before the first "/", so `default-model-eval/qwen` and `default-model-eval/smollm` sit
together) and leaves every other byte of the file as it was.

A figure is named `SECTION/COLUMN/ROW`: COLUMN and ROW are the `slug` of a table's header cell
and of a row's first cell (`default-model-eval/qwen/test/correct-first-tool-call`). A document
quotes one as `<!-- fig:SECTION/COLUMN/ROW -->` directly followed by the cell's text;
`quote_problems` lists every quote that does not read exactly what the file holds.

Plain string scanning (`str.find`, `str.split`): linear in the file's size.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import REPO, machine_line, to_cells

__all__ = [
    "RESULTS",
    "figure_value",
    "figures_table",
    "markdown_table",
    "quote_problems",
    "read_sections",
    "slug",
    "write_section",
]

RESULTS = REPO / "docs" / "results.md"
TITLE = (
    "# Measured results\n\n"
    "Written by the benchmarks (`python bench/run_all.py --write`, "
    "`python bench/default_model_eval.py --write`); do not edit by hand. Each section says "
    "when, on what machine and at what load it was measured. The README quotes figures from "
    "here, and a test checks each quote (`bench/README.md` says how).\n"
)
OPEN, CLOSE, FIG, END = "<!-- results:", "<!-- /results:", "<!-- fig:", " -->"
NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._/-")
NOT_SLUG = re.compile(r"[^a-z0-9]+")  # one negated class: linear
PIPE = "\x00"  # stands for an escaped `\|` while a table row is split into cells


def slug(text: str) -> str:
    """Lower case, each run of other characters one "-": "Correct first tool call" →
    "correct-first-tool-call"."""
    return NOT_SLUG.sub("-", text.lower()).strip("-")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table; a `|` inside a cell is escaped, a line break becomes a space."""

    def line(cells: Sequence[str]) -> str:
        text = " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells)
        return f"| {text} |"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


FIGURE_HEADER = ("figure", "value", "baseline", "ratio", "target", "met?")


def figures_table(rows: Sequence[dict[str, Any]]) -> str:
    """A benchmark's figures (`harness.Figure.as_dict` rows) as a table under `FIGURE_HEADER`."""
    return markdown_table(FIGURE_HEADER, [to_cells(row) for row in rows])


def section_text(name: str, body: str, *, command: str, loads: Sequence[Sequence[float]]) -> str:
    """A whole section: markers, heading, when/where/load, the command, then `body`."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    start, end = (" ".join(f"{value:.2f}" for value in load) for load in loads)
    return (
        f"{OPEN}{name}{END}\n### {name}\n\n"
        f"Measured {when} on {machine_line()}; load (1/5/15 min) {start} at the start, "
        f"{end} at the end. `{command}`\n\n{body.strip()}\n{CLOSE}{name}{END}\n"
    )


def write_section(
    name: str,
    body: str,
    *,
    command: str,
    load_start: Sequence[float],
    load_end: Sequence[float],
    path: Path | None = None,
) -> None:
    """Put section `name` into the results file (`RESULTS` unless `path`), creating the file
    if needed; every other section and line stays as it was."""
    if not name or not set(name) <= NAME_CHARACTERS:
        raise ValueError(f"A results section name uses a-z, 0-9, '.', '_', '/', '-': {name!r}")
    target = RESULTS if path is None else path
    old = target.read_text() if target.exists() else TITLE
    new = section_text(name, body, command=command, loads=(load_start, load_end))
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(target.name + ".new")
    scratch.write_text(replace_section(old, name, new))
    os.replace(scratch, target)


def replace_section(text: str, name: str, new: str) -> str:
    """`text` with section `name` replaced by `new` (a whole section), or `new` added after
    the last section of its group, else at the end."""
    spans = section_spans(text)
    if name in spans:
        start, end = spans[name]
        return text[:start] + new + text[end:]
    group = name.split("/")[0]
    ends = [end for other, (_, end) in spans.items() if other.split("/")[0] == group]
    if ends:
        at = max(ends)
        return text[:at] + "\n" + new + text[at:]
    return text.rstrip("\n") + "\n\n" + new


def section_spans(text: str) -> dict[str, tuple[int, int]]:
    """Each section's name → (start of its opening marker, end of its closing marker's line)."""
    spans: dict[str, tuple[int, int]] = {}
    at = text.find(OPEN)
    while at >= 0:
        name_end = text.find(END, at)
        if name_end < 0:
            break
        name = text[at + len(OPEN) : name_end]
        close = text.find(f"{CLOSE}{name}{END}", name_end)
        if close < 0:
            raise ValueError(f"The results section {name!r} has no closing marker.")
        end = close + len(f"{CLOSE}{name}{END}")
        end = end + 1 if text[end : end + 1] == "\n" else end
        spans[name] = (at, end)
        at = text.find(OPEN, end)
    return spans


def read_sections(text: str) -> dict[str, str]:
    """Each section's name → its text between the markers."""
    return {name: text[start:end] for name, (start, end) in section_spans(text).items()}


def tables(body: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each markdown table in `body`: its header cells and its rows' cells (separator left
    out), with escaped pipes restored."""
    found: list[tuple[list[str], list[list[str]]]] = []
    block: list[list[str]] = []
    for line in [*body.splitlines(), ""]:
        stripped = line.strip()
        if stripped.startswith("|"):
            inner = stripped.replace("\\|", PIPE).strip("|")
            block.append([cell.strip().replace(PIPE, "|") for cell in inner.split("|")])
        elif block:
            found.append((block[0], block[2:]))
            block = []
    return found


def figure_value(sections: dict[str, str], key: str) -> str | None:
    """The cell named `key` (`SECTION/COLUMN/ROW`), or None when there is none. SECTION may
    hold "/" itself: the longest section name that `key` starts with is taken."""
    names = [name for name in sections if key.startswith(name + "/")]
    if not names:
        return None
    name = max(names, key=len)
    column, _, row = key[len(name) + 1 :].partition("/")
    for header, rows in tables(sections[name]):
        columns = [slug(cell) for cell in header]
        if column not in columns:
            continue
        index = columns.index(column)
        for cells in rows:
            if cells and slug(cells[0]) == row and index < len(cells):
                return cells[index]
    return None


def quote_problems(document: str, results_text: str) -> list[str]:
    """Every `<!-- fig:KEY -->` in `document` that is not directly followed by the value the
    results file holds for KEY, one message each ([] when all agree or there are none)."""
    sections = read_sections(results_text)
    problems = []
    at = document.find(FIG)
    while at >= 0:
        key_end = document.find(END, at)
        if key_end < 0:
            problems.append(f"an unclosed figure marker at character {at}")
            break
        key = document[at + len(FIG) : key_end]
        value = figure_value(sections, key)
        quoted = document[key_end + len(END) :].split("\n", 1)[0]
        if not value:
            problems.append(f"{key}: no such figure in the results file")
        elif not quoted.startswith(value):
            problems.append(f"{key}: quoted as {quoted[:60]!r}, the results file has {value!r}")
        at = document.find(FIG, key_end)
    return problems

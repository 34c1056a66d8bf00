"""The README and the guides in docs/: the README stays a short guide (at most 300 lines) whose
"Set up" shows exactly the two commands, every guide says what it covers and links back, and
every relative link or image in them leads to a file (and heading) that is there.

What the documents import from `nbchat` is tests/test_exports.py's; the figures they quote from
docs/results.md are tests/test_results_file.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
GENERATED = DOCS / "results.md"  # written by bench/results.py, never by hand
BACK_LINK = "[Back to the README](../README.md)"
# `[text](target)` and `![alt](target)`: the target up to the first `)` or space (our own text).
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def guides() -> list[Path]:
    """The hand-written guides: every Markdown file under docs/ but the generated results."""
    return sorted(path for path in DOCS.rglob("*.md") if path != GENERATED)


def section(text: str, heading: str) -> str:
    """The text under a `## ` heading, up to the next `## ` heading."""
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    kept = "".join(ch for ch in heading.strip().lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def broken_links(path: Path, *, root: Path = REPO) -> list[str]:
    """Each relative link or image in `path` whose file, or heading in it, is not there."""
    problems = []
    for target in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        name, _, anchor = target.partition("#")
        linked = (path.parent / name).resolve() if name else path
        if not linked.is_file():
            problems.append(f"{path.relative_to(root)}: {target} (no such file)")
        elif anchor and anchor not in anchors(linked):
            problems.append(f"{path.relative_to(root)}: {target} (no such heading)")
    return problems


def test_the_readme_is_a_guide_of_at_most_300_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"{len(lines)} lines: move the detail into a guide under docs/"


def test_set_up_shows_exactly_the_two_commands() -> None:
    set_up = section(README.read_text(encoding="utf-8"), "## Set up")
    assert [block.strip() for block in FENCE.findall(set_up)] == ["./scripts/run", "./scripts/test"]


@pytest.mark.parametrize("guide", guides(), ids=lambda path: path.name)
def test_each_guide_says_what_it_covers_and_links_back(guide: Path) -> None:
    title, blank, header = guide.read_text(encoding="utf-8").splitlines()[:3]
    assert title.startswith("# ") and blank == ""
    assert header.endswith(BACK_LINK) and len(header) > len(BACK_LINK) + 20


def test_the_readme_links_every_guide() -> None:
    linked = {(REPO / target).resolve() for target in LINK.findall(README.read_text("utf-8"))}
    assert [path.name for path in guides() if path not in linked] == []


@pytest.mark.parametrize("document", [README, *guides()], ids=lambda path: path.name)
def test_every_relative_link_and_image_leads_somewhere(document: Path) -> None:
    assert broken_links(document) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"")
    (tmp_path / "guide.md").write_text("# Guide\n\n## The server's life: how it stops\n")
    page = tmp_path / "page.md"
    page.write_text(
        "![ok](a.png) [ok](guide.md#the-servers-life-how-it-stops) [web](https://x.org/y)\n"
        "![gone](b.png) [bad](guide.md#the-server) [self](#nowhere)\n"
        "```\n[in code](not-checked.md)\n```\n"
    )
    assert broken_links(page, root=tmp_path) == [
        "page.md: b.png (no such file)",
        "page.md: guide.md#the-server (no such heading)",
        "page.md: #nowhere (no such heading)",
    ]

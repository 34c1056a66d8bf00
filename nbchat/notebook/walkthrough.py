"""Helpers for the acting demo (`notebooks/05-acting.ipynb`), whose cells must hold calls, not
logic: an approval card's question as plain text, a tool's newest result, and the notebook
lines a compaction keeps by code (`nbchat.compaction.notebookfacts`).

Must not: be needed by the chat itself, or call a model.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from html.parser import HTMLParser
from typing import Any

from nbchat.compaction.facts import collect_facts
from nbchat.compaction.notebookfacts import render_cells
from nbchat.history import to_row

__all__ = ["card_text", "kept_by_compaction", "last_result"]


class _Text(HTMLParser):
    """The text of some HTML, each `<pre>` and block on lines of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("pre", "div", "p"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def card_text(card: Any) -> str:
    """What an approval card asks, as text: the question line, then the code or the diff."""
    parser = _Text()
    parser.feed(str(card.question.value))
    parser.close()
    lines = [line.rstrip() for line in html.unescape("".join(parser.parts)).split("\n")]
    return "\n".join(line for line in lines if line)


def last_result(rows: Iterable[Sequence[str]], tool: str) -> str:
    """The newest result of `tool` in `rows`."""
    found = [row[1] for row in rows if row[0] == "tool" and row[3] == tool]
    return found[-1] if found else f"(no result of {tool} yet)"


def kept_by_compaction(rows: Iterable[Sequence[str]]) -> list[str]:
    """The notebook lines a compaction of `rows` keeps by code: each cell the assistant
    inserted, edited or ran, and each of its runs with how it ended."""
    facts = collect_facts([to_row(row) for row in rows])
    acted = [(key, note) for key, note in facts.cells if not key.isdigit()]
    return render_cells(acted)

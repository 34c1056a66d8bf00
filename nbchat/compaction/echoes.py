"""Echoes: a summary that copies its instruction or repeats itself, found in the reply.

A small summariser that has little to say fills the checkpoint's lists with its instruction's
own words ("Read files and changed", "Run commands and showed") or with one line again and again
("Edit files with sed" three times). Such items tell the next model nothing and crowd out what
code keeps, so they are dropped: an item *echoes* its instruction when every word of it that
carries meaning is a word of the instruction and it names nothing specific; it *repeats* when
its words equal an earlier item's. When the echoes and repeats are at least half of what the
model wrote, or the goal itself is one, the summary is not kept at all (`Echoes.rejected`): the
compaction then keeps what code picked (the facts and key lines) alone.

Linear in the text's length. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Echoes", "find_echoes", "words_of"]

WORD = re.compile(r"[a-z0-9_]+")  # one character class: linear
# Words that carry no meaning of their own, so an item is judged by the others.
FILLER = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "so",
        "the",
        "then",
        "this",
        "to",
        "was",
        "were",
        "with",
        "what",
        "which",
        "that",
        "they",
        "them",
        "their",
    ]
)
# Characters that make a word name something specific: a path, a call, a quote, a number, an
# identifier (a "." or ":" inside a word too, as in `a.py` or `os:path`; at its end they are
# punctuation).
SPECIFIC = frozenset("/_`'\"()[]{}=<>0123456789")
PUNCTUATION = ".,;:!?"
MIN_WORDS = 2


@dataclass(frozen=True)
class Echoes:
    """What to drop from a reply's sections: (section key, item index) pairs, and whether the
    whole summary is not to be kept."""

    dropped: frozenset[tuple[str, int]]
    rejected: bool
    total: int


def words_of(text: str) -> list[str]:
    return WORD.findall(text.lower())


def find_echoes(sections: Mapping[str, Sequence[str]], instruction: str) -> Echoes:
    """The items of `sections` (key → items, the goal one of them) that echo `instruction` or
    repeat an earlier item, in the sections' order."""
    told = frozenset(words_of(instruction))
    seen: set[tuple[str, ...]] = set()
    dropped: set[tuple[str, int]] = set()
    goal_dropped = False
    total = 0
    for key, items in sections.items():
        for index, item in enumerate(items):
            total += 1
            words = tuple(words_of(item))
            if words in seen or _echoes(item, words, told):
                dropped.add((key, index))
                goal_dropped = goal_dropped or key == "goal"
            seen.add(words)
    rejected = total > 0 and (goal_dropped or 2 * len(dropped) >= total)
    return Echoes(frozenset(dropped), rejected, total)


def _echoes(item: str, words: tuple[str, ...], told: frozenset[str]) -> bool:
    meaning = [word for word in words if word not in FILLER]
    if len(meaning) < MIN_WORDS or any(_names_something(token) for token in item.split()):
        return False
    return all(word in told for word in meaning)


def _names_something(token: str) -> bool:
    word = token.rstrip(PUNCTUATION)
    return (
        any(char in SPECIFIC for char in word)
        or "." in word
        or ":" in word
        or any(char.isupper() for char in word[1:])
    )

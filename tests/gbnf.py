"""A small matcher for the part of llama.cpp's GBNF that nbchat's grammars use, so a test can
say which replies a grammar allows without a model: rules `name ::= …`, alternatives `|`,
sequences, "literals" (with `\\"` and `\\n`-style escapes), character classes `[…]` and
`[^…]` (single characters and escapes, no ranges), groups `( … )` and `*`.

`matches(grammar, text)` is True when `root` derives exactly `text`. Backtracking over sets of
end positions: fine for the short texts tests give it, not for anything else.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

__all__ = ["matches"]

# ("lit", text) | ("cls", negated, chars) | ("ref", name) | ("alt" or "seq", nodes) | ("star", node)
Node = tuple[Any, ...]

ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "]": "]", "[": "["}
TOKEN = re.compile(
    r'\s*(?:(?P<literal>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])'
    r"|(?P<name>[a-zA-Z0-9_-]+)|(?P<op>[()|*]))"
)


def _unescape(body: str) -> list[str]:
    chars, i = [], 0
    while i < len(body):
        if body[i] == "\\":
            chars.append(ESCAPES[body[i + 1]])
            i += 2
        else:
            chars.append(body[i])
            i += 1
    return chars


def _parse(expr: str) -> Node:
    tokens = [m for m in TOKEN.finditer(expr) if m.group(0).strip()]
    position = 0

    def alternatives() -> Node:
        nonlocal position
        options = [sequence()]
        while position < len(tokens) and tokens[position].group("op") == "|":
            position += 1
            options.append(sequence())
        return ("alt", options)

    def sequence() -> Node:
        nonlocal position
        items = []
        while position < len(tokens) and tokens[position].group("op") not in ("|", ")"):
            token = tokens[position]
            position += 1
            if token.group("literal"):
                item: Node = ("lit", "".join(_unescape(token.group("literal")[1:-1])))
            elif token.group("cls"):
                body = token.group("cls")[1:-1]
                negated = body.startswith("^")
                item = ("cls", negated, frozenset(_unescape(body[1:] if negated else body)))
            elif token.group("name"):
                item = ("ref", token.group("name"))
            else:  # "("
                item = alternatives()
                position += 1  # ")"
            if position < len(tokens) and tokens[position].group("op") == "*":
                position += 1
                item = ("star", item)
            items.append(item)
        return ("seq", items)

    return alternatives()


def matches(grammar: str, text: str) -> bool:
    rules = {}
    for line in grammar.strip().splitlines():
        name, _, expr = line.partition("::=")
        rules[name.strip()] = _freeze(_parse(expr))

    @cache
    def ends(node: Node, start: int) -> frozenset[int]:
        kind = node[0]
        if kind == "lit":
            return frozenset({start + len(node[1])} if text.startswith(node[1], start) else ())
        if kind == "cls":
            if start < len(text) and (text[start] in node[2]) != node[1]:
                return frozenset({start + 1})
            return frozenset()
        if kind == "ref":
            return ends(rules[node[1]], start)
        if kind == "alt":
            return frozenset().union(*(ends(option, start) for option in node[1]))
        if kind == "seq":
            positions = frozenset({start})
            for item in node[1]:
                positions = frozenset().union(*(ends(item, p) for p in positions))
            return positions
        # star: every position reachable by repeating the item, none twice
        seen, frontier = {start}, {start}
        while frontier:
            frontier = {e for p in frontier for e in ends(node[1], p) if e not in seen}
            seen |= frontier
        return frozenset(seen)

    return len(text) in ends(rules["root"], 0)


def _freeze(node: object) -> Node:
    """The parsed node as nested tuples (lists made hashable), for the cache."""
    if isinstance(node, list):
        return tuple(_freeze(item) for item in node)
    if isinstance(node, tuple):
        return tuple(_freeze(item) for item in node)
    return node  # type: ignore[return-value]

"""Where a compaction cuts a history, and the cache form of the summary request that cut makes.

The cut: the rows to summarise and the tail kept verbatim, by two rules tried in order:

1. The baseline's user-row rule: the tail starts `tail_messages` rows from the end and moves
   back to the nearest `user` row, so a tool result is never separated from its call. Under
   the trigger its tail is kept exactly. Over the trigger a tail has two budgets (`TailBudget`):
   the `aim` (the request after a compaction at about half the trigger, so the next one is
   many turns away) and the `fit` (the result just under the trigger). A deeper cut is made
   only at a later `user` row, the first whose tail fits the aim; else the user-row tail is
   kept when it fits; else the first later user row that fits.
2. Only when no user row at or after rule 1's leaves the result under the trigger (or rule 1
   compacts nothing: a single long turn), a safe cut inside the turn: the earliest cut point
   whose tail fits the aim, else the last cut point. A cut point is a `user`, `assistant`,
   `assistant_full` or `system` row that is not inside a call's block of results, so the tail
   never starts on a `tool` or `analysis` row nor between an `assistant_full` and its results.

Fewer than two rows to summarise (a leading `compacted` row does not count) is no cut at all.
Both rules are fixed points: cutting `[compacted, *tail]` again finds nothing to summarise, so
compacting twice in a row changes nothing the second time.

The cache form: a summary asked as a continuation of the chat's own last request. The transcript
form (`nbchat.compaction.prompts`) re-serialises the rows into a new prompt, so a
server with a prompt cache reads them all again: on the embedded model that was ~90% of a
compaction's cost. The cache form sends instead exactly what the chat sent for the rows being
replaced, byte for byte: the same system message (`build_messages` with the same system prompt,
earlier summaries folded in), the same messages, the same tool schemas. Those rows are the start
of the chat's last request, so a prefix-caching server (llama.cpp) finds them in its cache and
computes only the one user message added at the end, which asks for the checkpoint under the
JSON schema, so even a 0.5B model writes the checkpoint instead of continuing the chat.

`RequestShape` is what the conversation hands the engine about its last request (the system
prompt, the tools it offered, the model); the engine uses this form only when the summary model
is that model; the transcript form otherwise (a separate summary model). Rows too many for the
window are cut where a tail could start: the longest prefix that fits goes in the cache form,
the rest is added in the transcript form as an update of that checkpoint.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Literal

from nbchat.compaction.prompts import FOCUS_PROMPT, PROMPT_ITEMS, PROMPT_WORDS
from nbchat.history import (
    UNSENT_ROLES,
    Message,
    Row,
    build_messages,
    estimate_tokens,
    request_overhead_tokens,
)

__all__ = [
    "CACHE_INSTRUCTION",
    "RequestShape",
    "SMALL_CACHE_INSTRUCTION",
    "Split",
    "TailBudget",
    "build_cache_request",
    "cache_prefix_end",
    "cache_request_tokens",
    "choose_split",
    "compactable_before",
    "find_user_tail",
    "is_cut_point",
]


CUT_ROLES = frozenset({"user", "assistant", "assistant_full", "system"})
MIN_COMPACTABLE = 2


@dataclass(frozen=True)
class Split:
    """Summarise `rows[:start]`, keep `rows[start:]`; `rule` says which rule found it."""

    start: int
    rule: Literal["user", "turn"]


@dataclass(frozen=True)
class TailBudget:
    """How many tokens a kept tail may hold over the trigger: `aim` for a deeper cut at a user
    row or inside a turn, `fit` for the user-row tail to be kept (the result under the
    trigger)."""

    aim: int
    fit: int


def find_user_tail(rows: Sequence[Row], tail_messages: int) -> int:
    """The baseline rule: `tail_messages` from the end, back to the nearest user row (0: none)."""
    start = len(rows) - tail_messages
    while start > 0 and rows[start].role != "user":
        start -= 1
    return max(start, 0)


def compactable_before(rows: Sequence[Row], end: int) -> int:
    """How many rows before `end` a summary would replace, not counting earlier summaries."""
    return sum(1 for row in rows[:end] if row.role != "compacted")


def is_cut_point(rows: Sequence[Row], index: int) -> bool:
    """May a tail start at `rows[index]`? Never on a tool result, reasoning or a summary, and
    never on a notice that sits between a call and its results."""
    if rows[index].role not in CUT_ROLES:
        return False
    for row in rows[index:]:
        if row.role not in UNSENT_ROLES:  # these sit inside a call's block without ending it
            return row.role != "tool"
    return True


def choose_split(
    rows: Sequence[Row],
    estimates: Sequence[int],
    *,
    tail_messages: int,
    budget: TailBudget,
    over_trigger: bool,
) -> Split | None:
    """Where to cut, or None when nothing should be compacted.

    Under the trigger only the user-row rule applies (the baseline); over it, `budget` says how
    much a tail may keep (see the module docstring for the order the rules are tried in).
    """
    user = find_user_tail(rows, tail_messages)
    works = user > 0 and compactable_before(rows, user) >= MIN_COMPACTABLE
    if not over_trigger:
        return Split(user, "user") if works else None
    suffix = _suffix_sums(estimates)
    starts = [index for index in range(max(user, 1), len(rows)) if rows[index].role == "user"]
    for allowance in (budget.aim, budget.fit):
        fits = next((index for index in starts if suffix[index] <= allowance), None)
        if fits is not None:
            # The earliest user row whose tail fits: with too little before it, nothing needs
            # compacting (and a cut inside a turn is only for a tail that fits nowhere else).
            enough = compactable_before(rows, fits) >= MIN_COMPACTABLE
            return Split(fits, "user") if enough else None
    start = _turn_cut(rows, suffix, budget.aim)
    if start is None or compactable_before(rows, start) < MIN_COMPACTABLE:
        return None
    return Split(start, "turn")


def _turn_cut(rows: Sequence[Row], suffix: Sequence[int], budget: int) -> int | None:
    """The earliest cut point whose tail fits `budget`, else the last cut point."""
    cuts = [index for index in range(1, len(rows)) if is_cut_point(rows, index)]
    fitting = (index for index in cuts if suffix[index] <= budget)
    return next(fitting, cuts[-1] if cuts else None)


def _suffix_sums(estimates: Sequence[int]) -> list[int]:
    """suffix[i] = sum(estimates[i:]), with suffix[len] = 0."""
    totals = list(accumulate(reversed(estimates), initial=0))
    return totals[::-1]


CACHE_INSTRUCTION = (
    "STOP. Do not answer or call tools: this message is not the user's. Write a checkpoint of "
    "the conversation above (with the summary in the system message, if any) for an assistant "
    "who will continue it: the user's goal, from their messages; what was done and decided; "
    "what comes next."
)
# Shorter than the transcript form's JSON_FORMAT: the schema itself holds the keys and budgets,
# and every token here is one the server computes (the rest comes from its cache).
CACHE_FORMAT = (
    'Reply with the JSON object only: "goal" (one sentence), then short lists "constraints", '
    '"done", "in_progress", "blocked", "decisions", "next_steps", "critical_context" ([] when '
    f"empty), at most {PROMPT_ITEMS} items each, under {PROMPT_WORDS} words each."
)
# The small checkpoint's instruction and format in one (`prompts.SMALL_RESPONSE_FORMAT`): every
# token of it is read while the user waits, so it says only what the schema does not.
SMALL_CACHE_INSTRUCTION = (
    "STOP. Do not answer: write, as the JSON object only, a checkpoint of the conversation "
    'above for the assistant who continues it: "goal" (one sentence), "done" and "next_steps" '
    '(at most 2 items), "in_progress" (at most 1), the other lists []. Under 10 words an item.'
)
MARGIN = 20  # 1/MARGIN of the window: len//3 is a guess


@dataclass(frozen=True)
class RequestShape:
    """What the chat's last request carried besides its rows: the system prompt it was built
    with, the tool schemas it offered (maybe none) and the model it asked."""

    system_prompt: str
    tools: tuple[Mapping[str, Any], ...] = ()
    model: str = ""
    messages: tuple[Message, ...] = field(default=(), compare=False)  # as sent; () unknown


def build_cache_request(
    rows: Sequence[Row],
    shape: RequestShape,
    *,
    instruction: str | None = None,
    focus: str | None = None,
    small: bool = False,
) -> list[Message]:
    """The chat's messages for `rows` (its request's start, unchanged) plus the instruction
    (for the small checkpoint's schema when `small`)."""
    messages = build_messages(rows, shape.system_prompt)
    parts = [instruction or CACHE_INSTRUCTION, CACHE_FORMAT]
    if small:
        parts = [instruction] if instruction else [SMALL_CACHE_INSTRUCTION]
    if focus:
        parts.append(FOCUS_PROMPT.format(focus=focus))
    messages.append({"role": "user", "content": "\n\n".join(parts)})
    return messages


def cache_request_tokens(rows_tokens: int, shape: RequestShape, *, reply_tokens: int) -> int:
    """The estimated window a cache-form request needs: prompt, instruction and reply."""
    overhead = request_overhead_tokens(shape.system_prompt, shape.tools)
    instruction = estimate_tokens(CACHE_INSTRUCTION) + estimate_tokens(CACHE_FORMAT)
    return overhead + rows_tokens + instruction + reply_tokens


def fits_window(tokens: int, window: int) -> bool:
    """Whether a request of `tokens` (estimated) fits `window` with the estimate's margin."""
    return tokens <= window - window // MARGIN


def cache_prefix_end(
    rows: Sequence[Row],
    shape: RequestShape | None,
    *,
    model: str,
    window: int,
    reply_tokens: int,
) -> int:
    """How many of `rows` to summarise in the cache form: all of them when the request fits the
    window, else the longest prefix that fits and ends where a tail could start (never between
    a call and its results); the rest then goes to the transcript form as an update. 0: no
    cache form (no shape known, another summary model, or not even two rows fit)."""
    if shape is None or (shape.model and model and shape.model != model):
        return 0
    fixed = cache_request_tokens(0, shape, reply_tokens=reply_tokens)
    prefix = list(accumulate((estimate_tokens(row) for row in rows), initial=0))
    for end in range(len(rows), 1, -1):
        safe = end == len(rows) or is_cut_point(rows, end)
        if safe and fits_window(fixed + prefix[end], window):
            return end if is_mostly_cached(rows[:end], shape) else 0
    return 0


def is_mostly_cached(rows: Sequence[Row], shape: RequestShape) -> bool:
    """Whether at least half of the chat's messages for `rows` open the request it last sent
    (so the server's cache holds them). A history changed since (old tool outputs archived
    behind placeholders) is cheaper to summarise as a transcript, which trims long outputs."""
    if not shape.messages:
        return True  # not known: the conversation sends before it compacts
    built = build_messages(rows, shape.system_prompt)
    sizes = [len(json.dumps(message)) for message in built]
    shared = 0
    for mine, sent in zip(built, shape.messages, strict=False):
        if mine != sent:
            break
        shared += 1
    return 2 * sum(sizes[:shared]) >= sum(sizes)

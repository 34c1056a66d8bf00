"""Answers that open by repeating the note nbchat sent with the request, held back as they stream.

After a tool round a small model is told, in a note the user never sees, what the user asked
and how to answer (`nbchat.conversation.reply`). A 1.5B model sometimes opens its answer by
copying that note ("The user asked: " and the message again, or the failure note's first
sentence) and only then answers. Those sentences are nbchat's own words, not an answer, so
they are dropped as the answer streams (`without_note_echo`).

The start of the answer is held back only while it may still be such a copy (every word so far
the note's, or the note's words in the note's order), at most to the end of its first
sentence: an answer of its own streams from its first whole word. A sentence of three words or
more is dropped when every word of it is a word of the note's own text, or when it opens with
"the user asked" and every other word is the note's or the user's message's (up to
`MAX_DROPPED` sentences). A sentence made of the user's words alone is kept: restating a
yes-or-no question is how a small model says yes. The first sentence kept loses an opening
that copies a run of the note (`copied_opening`: "The files, items, values or lines that the
results show are" before the values); it, and everything after it, streams as it came. A
sentence the answer ends with is never dropped, so no answer is emptied by this. An opening
that narrates the call instead ("The tool call was: {…}", "The results showed:", with its
colon: `narration_end`) is dropped the same way, the call's JSON with it.

Linear in the answer's length: each held character is looked at a bounded number of times.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TypeVar

from nbchat.llm.reader import ReasoningDelta, TextDelta, TextWithdrawn

__all__ = ["copied_opening", "echoes_note", "narration_end", "without_note_echo"]

WORD = re.compile(r"[a-z0-9_]+")  # one character class: linear
# Where a sentence of an answer ends: a line break, or ".", "?" or "!" before white space.
SENTENCE_END = re.compile(r"\n|[.?!](?=\s)")
REPORTED = ("the", "user", "asked")  # how a copy of the note's first line opens
MIN_WORDS = 3  # "No." or "Yes, it is." is an answer even when the note holds its words
MAX_DROPPED = 3  # sentences dropped at most: past them the answer streams as it came
HOLD_CHARS = 400  # held back at most: a longer first sentence is no copy of a note
# Words a copy of the note may add or leave out around the note's own ("lines that the results
# show are"): they are skipped when an opening is matched against the note.
LINKING = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "follows",
        "following",
        "is",
        "of",
        "or",
        "that",
        "the",
        "these",
        "this",
        "those",
        "to",
        "was",
        "were",
    ]
)
MIN_COPIED = 4  # words of the note, in its order, that make an opening a copy
# What may stand between a copied opening and what follows it.
AFTER_COPY = " \t:,-"

# An opening that narrates the call or its result before the answer: "The tool call was:
# {"name": "read_file", …}", "The results showed:", "The tool response shows:". Told not to
# describe the tool call, a 1.5B model opened so, then quoted the list it was asked for. Only
# with its colon: "The results show the meeting is on Thursday" is the answer itself.
NARRATION = re.compile(
    r"\s*(?:the\s+|my\s+)?(?:tool\s+)?(?:calls?|responses?|results?|output)\s+"
    r"(?:(?:i\s+)?made\s+|above\s+)?"
    r"(?:was|were|is|are|shows?|showed|returned|returns|says|said|gave|gives)\s*:",
    re.IGNORECASE,
)
NARRATION_OPENERS = frozenset(
    ["the", "my", "tool", "call", "calls", "response", "responses", "result", "results", "output"]
)
_NARRATION_VERBS = (
    "i made above was were is are show shows showed returned returns says said gave gives"
)
NARRATION_WORDS = NARRATION_OPENERS | frozenset(_NARRATION_VERBS.split())
CALL_CHARS = 600  # of a call's JSON quoted after a narrating opening


def narration_end(text: str) -> int | None:
    """Where an opening of `text` that narrates the call ends (`NARRATION`, and the call's
    JSON object when one follows it): 0 when `text` opens otherwise, None while it may still
    turn out to (more of the answer is needed to tell)."""
    match = NARRATION.match(text)
    if match is None:
        words = _finished_words(text)
        maybe = ":" not in text and len(words) <= 6 and all(w in NARRATION_WORDS for w in words)
        return None if maybe and (not words or words[0] in NARRATION_OPENERS) else 0
    end = match.end()
    rest = text[end:]
    start = len(rest) - len(rest.lstrip())
    if not rest.strip():
        return None  # what follows the colon decides whether a call's JSON is quoted
    if rest[start] != "{":
        return end
    depth = 0
    for index, character in enumerate(rest[start : start + CALL_CHARS], start):
        depth += {"{": 1, "}": -1}.get(character, 0)
        if depth == 0:
            close = end + index + 1
            while close < len(text) and text[close] in " \t.":
                close += 1
            return close
    return None if len(rest) - start < CALL_CHARS else end


Event = TypeVar("Event")


def echoes_note(sentence: str, note_words: frozenset[str], asked_words: frozenset[str]) -> bool:
    """Whether `sentence` only repeats the note: three words or more, each one of `note_words`
    (the note's own text), or opening with "the user asked" and each one of those or of
    `asked_words` (the user's message, which the note quotes)."""
    words = WORD.findall(sentence.lower())
    reported = tuple(words[: len(REPORTED)]) == REPORTED
    return len(words) >= MIN_WORDS and _all_said(words, note_words, asked_words, reported)


def _all_said(
    words: list[str], note_words: frozenset[str], asked_words: frozenset[str], reported: bool
) -> bool:
    """Whether every one of `words` is the note's, or, in a sentence `reported` ("the user
    asked …"), the note's or the user's message's."""
    return all(word in note_words or (reported and word in asked_words) for word in words)


def _run_in_note(words: list[str], note_run: tuple[str, ...]) -> int:
    """How many of `words`, from the first, are a run of `note_run` (the longest such)."""
    longest = 0
    for start in (i for i, word in enumerate(note_run) if words and word == words[0]):
        length = 0
        while (
            length < len(words)
            and start + length < len(note_run)
            and words[length] == note_run[start + length]
        ):
            length += 1
        longest = max(longest, length)
    return longest


def copied_opening(sentence: str, note_run: tuple[str, ...]) -> int:
    """Where an opening of `sentence` that copies the note ends (0: none): its first
    `MIN_COPIED` words or more, linking words aside, are a run of `note_run` (the note's words,
    linking words aside, in order), followed by any linking words and `AFTER_COPY`."""
    spans = [
        (match.group(), match.end())
        for match in WORD.finditer(sentence.lower())
        if match.group() not in LINKING
    ]
    longest = _run_in_note([word for word, _end in spans], note_run)
    if longest < MIN_COPIED or longest == len(spans):
        return 0  # too short to be a copy, or nothing follows it
    end = spans[longest - 1][1]
    for match in WORD.finditer(sentence.lower(), end):  # the linking words after it
        if match.group() not in LINKING or sentence[end : match.start()].strip(AFTER_COPY):
            break
        end = match.end()
    while end < len(sentence) and sentence[end] in AFTER_COPY:
        end += 1
    return end


def note_run_of(note: str) -> tuple[str, ...]:
    """The note's words in order, linking words aside (what `copied_opening` matches)."""
    return tuple(word for word in WORD.findall(note.lower()) if word not in LINKING)


def without_note_echo(
    events: Iterable[Event], note: str, asked: str = ""
) -> Iterator[Event | TextDelta]:
    """`events` of one streamed answer, its leading sentences that repeat `note` (its own text,
    without the user's message `asked` that it quotes) left out, as `TextDelta`s holding what
    remains. Reasoning passes at once; any other event passes after what was held back. A
    `TextWithdrawn` starts the answer again, held back anew."""
    note_words = frozenset(WORD.findall(note.lower()))
    asked_words = frozenset(WORD.findall(asked.lower()))
    note_run = note_run_of(note)
    held = ""
    holding = bool(note_words)
    dropped = 0
    try:
        for event in events:
            if isinstance(event, TextWithdrawn):
                held, dropped, holding = "", 0, bool(note_words)
                yield event
            elif isinstance(event, TextDelta) and holding:
                held, dropped, holding = _drop_echoes(
                    held + event.text, dropped, note_words, asked_words, note_run
                )
                if not holding and held:
                    yield TextDelta(held)
                    held = ""
            elif isinstance(event, ReasoningDelta) or not held:
                yield event
            else:  # the answer ended inside its first sentences: they are the answer
                yield TextDelta(_without_copied_opening(held, note_run))
                held, holding = "", False
                yield event
    except Exception:
        if held:  # a stream cut while text was held back keeps it, as it keeps the rest
            yield TextDelta(held)
        raise
    if held:
        yield TextDelta(_without_copied_opening(held, note_run))


def _without_copied_opening(text: str, note_run: tuple[str, ...]) -> str:
    cut = copied_opening(text[:HOLD_CHARS], note_run)
    return text[cut:].lstrip() if cut else text


def _finished_words(text: str) -> list[str]:
    """The words of `text` (lower case) but one it may still be writing at its end."""
    words = WORD.findall(text.lower())
    if text and (text[-1].isalnum() or text[-1] == "_"):
        words = words[:-1]  # the word being written may go on
    return words


def _may_copy(
    sentence: str,
    note_words: frozenset[str],
    asked_words: frozenset[str],
    note_run: tuple[str, ...],
) -> bool:
    """Whether the start of a sentence, its last word perhaps unfinished, may still turn out
    to echo the note or open with a copy of it: held back only while it may, the answer's
    first words are not kept from the user any longer than that."""
    words = _finished_words(sentence)
    reported = tuple(words[: len(REPORTED)]) == REPORTED[: len(words)]
    if _all_said(words, note_words, asked_words, reported):
        return True
    run = [word for word in words if word not in LINKING]
    return _run_in_note(run, note_run) == len(run)


def _drop_echoes(
    held: str,
    dropped: int,
    note_words: frozenset[str],
    asked_words: frozenset[str],
    note_run: tuple[str, ...],
) -> tuple[str, int, bool]:
    """`held` without its leading sentences that echo the note (and the first other one
    without an opening copied from it), how many were dropped in all, and whether to hold on
    (the first sentence that is no echo is not over yet)."""
    while dropped < MAX_DROPPED:
        narrated = narration_end(held[:HOLD_CHARS])
        if narrated is None:
            return held, dropped, len(held) < HOLD_CHARS
        if narrated:
            if not any(character.isalnum() for character in held[narrated:]):
                return held, dropped, True  # whether more follows decides if it is the answer
            held, dropped = held[narrated:].lstrip(), dropped + 1
            continue
        end = SENTENCE_END.search(held, 0, HOLD_CHARS)
        first = held[:HOLD_CHARS] if end is None else held[: end.end()]
        if not _may_copy(first, note_words, asked_words, note_run):
            # Its first words are the answer's own, or end a copied opening: let it stream.
            return _without_copied_opening(held, note_run), dropped, False
        if end is None:
            return held, dropped, len(held) < HOLD_CHARS
        sentence, rest = held[: end.end()], held[end.end() :]
        if not any(character.isalnum() for character in rest):
            return held, dropped, True  # whether more follows decides if it is the answer
        if not echoes_note(sentence, note_words, asked_words):
            return _without_copied_opening(held, note_run), dropped, False
        held, dropped = rest.lstrip(), dropped + 1
    return held, dropped, False

"""Whether an answer given after a tool round names anything that round's results show.

A 1.5B model that has just read a file sometimes answers past it: "The script is dangerous to
run." after reading a script that deletes `build/` and `dist/` (naming nothing it does), "The
README contains the setup instructions." after reading a README that holds none. Such an
answer shares no word with the results beyond the words the user or the call already said;
one that answers from them quotes at least a name, a value or a word of a line. So the check
is a set of words, not a judgement: `names_nothing_shown` is true when the answer holds none of
the results' own words, and the reply is then asked once more (`nbchat.conversation.reply`).

A word here is a run of letters or digits: of three characters or more, or holding a digit
(a port, a count, a version's parts; a number's thousands separators left out), and not one
of the words any sentence about files uses (`COMMON`). Long results hold many words, so the
check only ever fires on an answer that names nothing at all; it cannot tell a misread value
from a right one.

Linear in the texts (one pass of a pattern without backtracking over each, bounded by
`SCANNED`), whatever the model or the workspace wrote.
Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["COMMON", "SCANNED", "names_nothing_shown", "words_of"]

WORD = re.compile(r"[^\W_]+")  # letters and digits; `_`, `.`, `/` and spaces split words
# A thousands separator inside a number: "291,000" is the "291000" a CSV holds.
THOUSANDS = re.compile(r"(?<=\d)[,_ \u00a0\u202f](?=\d{3}(?!\d))")
SCANNED = 200_000  # characters of any one text read: more than a tool result may hold
# Words any answer about a workspace uses without having read anything: a result that holds
# "file" does not make "the file is fine" an answer from it.
_COMMON_WORDS = """
the and for are was were not has have had but all any can its this that these those with
from into out about there their them they you your yes does did done then than what which
who whom when where why how will would could should may might must also just only some
one file files line lines folder folders name names text content contents tool tools
result results found show shows shown says said call called read list listed search
match matches matching none empty here user asked question answer
"""
COMMON = frozenset(_COMMON_WORDS.split())


def words_of(text: str) -> set[str]:
    """The words of `text` (its first `SCANNED` characters) that can carry a fact: lower-cased
    runs of letters or digits, three characters or more or holding a digit, not in `COMMON`."""
    found = set()
    for word in WORD.findall(THOUSANDS.sub("", text[:SCANNED].lower())):
        if (len(word) >= 3 or any(ch.isdigit() for ch in word)) and word not in COMMON:
            found.add(word)
    return found


def names_nothing_shown(answer: str, results: Iterable[str], said: Iterable[str]) -> bool:
    """Whether `answer` holds none of the words of `results` (the round's tool results) that
    `said` (the user's message, the calls' names and arguments) did not already hold. An
    answer of no words, or results with no words of their own, is not judged (False)."""
    answered = words_of(answer)
    if not answered:
        return False
    already = set().union(*(words_of(text) for text in said))
    shown = set().union(*(words_of(text) for text in results)) - already
    return bool(shown) and not (answered & shown)

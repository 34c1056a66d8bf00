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

A second check names what an answer invents: a file (`name.ext` with an extension files have,
or a path) that no earlier text of the session holds (the user's messages, the calls, the tool
results, a summary) and that is not here (`invented_files`). After running
`sales['units'].max()` on a notebook DataFrame, a 1.5B model answered "The file "sales.csv"
contains the data": no such file, and nobody had named one. That answer is asked again too.

A third names what an answer speaks of without having looked: files here named in the prose of
an answer given before any tool ran (`files_spoken_of`). Asked what a shell script here would
delete if run, a 1.5B model answered without reading it that it deletes "the `app.py` file
from the `src` directory"; the reply then asks the model which tool to look with. So does an
answer given before any tool ran that opens with a yes or a no (`says_yes_or_no`) to a message
naming something here: asked whether a dependency was pinned, the same model said "Yes"; and
one that says it was not given what it was asked (`says_it_was_not_told`): asked a setting's
value in one word, it answered that the value was "not specified in the given information".

A fourth names what such an answer states of the user's own: the figures and the names written
with a capital that nothing in the session said (`facts_stated`). Asked which port the app
listens on, or which database "we" use, the same model answered "5000" and "SQLite" without
reading anything. After a tool round, the figures among them (three digits or more, a version)
that no result holds (`figures_unshown`) have the answer asked again: after reading a file that
sets no port, it still said 5000.

An answer that names nothing the results show even when asked again is followed by what the
results it was about begin with (`results_quoted`): the user sees what was read.

Linear in the texts (one pass of a pattern without backtracking over each, bounded by
`SCANNED`), whatever the model or the workspace wrote.
Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

__all__ = [
    "COMMON",
    "SCANNED",
    "facts_stated",
    "figures_unshown",
    "file_names",
    "files_spoken_of",
    "invented_files",
    "names_nothing_shown",
    "results_quoted",
    "says_it_was_not_told",
    "says_yes_or_no",
    "words_of",
]

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
project projects workspace repo repository directory code
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


# A run of characters that could be a file's name in prose: anything but spaces, quotes,
# brackets and the separators around a name in a sentence. One negated class: no backtracking.
TOKEN = re.compile(r"[^\s`'\"()<>\[\]{},;*|]+")
# Extensions that name a file in prose; not "js" ("Node.js") nor ones that are words.
_FILE_EXTENSIONS = """
py ipynb csv tsv json jsonl yaml yml toml ini cfg conf txt md rst log sh bash zsh sql db sqlite
xml html css parquet xlsx xls pkl pickle h5 npy npz lock pdf png jpg jpeg gif svg zip gz tar whl
c h cpp rs go java rb env
"""
FILE_EXTENSIONS = frozenset(_FILE_EXTENSIONS.split())
NAMES_JUDGED = 50  # file names of one answer checked: an answer listing more is not made up
PATH_CHARS = 1_024  # a longer run of characters is no path anyone wrote


def file_names(text: str) -> list[str]:
    """The names of files in `text` (its first `SCANNED` characters), each once: `name.ext`
    with an extension of `FILE_EXTENSIONS`, or a path ending in one. A URL, a call
    (`np.log(`), a number (`3.10`) is none."""
    found: dict[str, None] = {}
    text = text[:SCANNED]
    for match in TOKEN.finditer(text):
        if text[match.end() : match.end() + 1] == "(":
            continue
        token = match.group().rstrip(".:!?")
        if len(token) > PATH_CHARS or "://" in token or token.startswith("//"):
            continue
        stem, extension = os.path.splitext(token.rsplit("/", 1)[-1])
        if stem.strip(".") and extension[1:].lower() in FILE_EXTENSIONS:
            found[token] = None
    return list(found)


def files_spoken_of(answer: str, is_here: Callable[[str], bool]) -> list[str]:
    """The files `answer` names in its prose (outside its ``` code blocks, where a name is an
    example) that `is_here` finds: an answer given without reading anything that says the
    database "is configured in `config.yaml`" speaks of a file here it did not read."""
    prose = " ".join(answer[:SCANNED].split("```")[::2])
    return [name for name in file_names(prose)[:NAMES_JUDGED] if is_here(name)]


# An answer opening with a yes or a no (after at most `OPENING` characters of quotes, stars and
# spaces): a verdict on what the question asks about.
YES_OR_NO = re.compile(r"\W*(?:yes|no|yep|nope)\b", re.IGNORECASE)
OPENING = 40


def says_yes_or_no(answer: str) -> bool:
    """Whether `answer` opens with a yes or a no ("Yes, it is pinned.", "No.")."""
    return YES_OR_NO.match(answer[:OPENING]) is not None


# An answer saying it was not given the information, where a tool could have looked it up:
# "not specified in the given information", "not mentioned in the provided context". Literal
# words and spaces: no backtracking.
NOT_TOLD = re.compile(
    r"\bnot\s+(?:specified|provided|mentioned|given|stated|included|shown)\s+in\s+"
    r"(?:the|your|this)\b|\b(?:given|provided)\s+(?:information|context)\b",
    re.IGNORECASE,
)
NOT_TOLD_SCAN = 2_000  # characters of an answer searched: it says so early, if at all


def says_it_was_not_told(answer: str) -> bool:
    """Whether `answer` says the information it was asked for was not given to it."""
    return NOT_TOLD.search(answer[:NOT_TOLD_SCAN]) is not None


# What an answer states as a fact of the user's own: a figure ("port 5000", "3.8.5", "2 rows")
# or a name written with a capital inside a sentence ("we are using SQLite", "your Python"),
# not "I". Tokens of one character class (linear), each then looked at on its own.
STATED_TOKEN = re.compile(r"[A-Za-z0-9][\w.:+#-]*")
SENTENCE_OPENERS = ".!?:\n*>#-"  # after these (and spaces), a capital only opens a sentence
NOT_STATED = frozenset({"I", "I'm", "OK", "Ok"})
FACTS_JUDGED = 20  # facts of an answer looked for in what the session said


def facts_stated(answer: str, earlier: Iterable[str]) -> list[str]:
    """The figures and names `answer` states (a token holding a digit, or a capital that does
    not open a sentence; outside its ``` code blocks) that none of the `earlier` texts (the
    session's messages, calls and results) holds, case aside: given before anything was read,
    an answer to a question about the user's own things that states them ("The app listens on
    port 5000.", "The database we are using is SQLite.") made them up."""
    return list(_unsaid(_stated(answer), earlier))


def _stated(answer: str) -> dict[str, str]:
    """The first `FACTS_JUDGED` figures and names `answer` states (`facts_stated`), each once
    whatever its case, with the lower-case text looked for."""
    prose = " ".join(answer[:SCANNED].split("```")[::2])
    found: dict[str, str] = {}  # lower case → as written
    for match in STATED_TOKEN.finditer(prose):
        word = match.group().rstrip(".:-")
        if word in NOT_STATED or word.lower() in found:
            continue
        if not any(character.isdigit() for character in word):
            if not any(character.isupper() for character in word):
                continue
            before = prose[max(0, match.start() - 8) : match.start()].rstrip(" \t\"'`(")
            if not before or before[-1] in SENTENCE_OPENERS:
                continue  # a capital that only opens a sentence
        found[word.lower()] = word
        if len(found) == FACTS_JUDGED:
            break
    return {word: key for key, word in found.items()}


def _unsaid(looked_for: dict[str, str], earlier: Iterable[str]) -> dict[str, str]:
    """`looked_for` (what an answer says → the lower-case text looked for) less what one of
    the `earlier` texts holds (its first `SCANNED` characters, case aside)."""
    for text in earlier:
        if not looked_for:
            break
        lowered = text[:SCANNED].lower()
        looked_for = {said: key for said, key in looked_for.items() if key not in lowered}
    return looked_for


# A figure an answer after a tool round may not have from anywhere but the results: three
# digits or more ("5000", "8042"), or a version's dotted parts ("3.8.5"). A count of rows or
# items ("3 rows") is the answer's own counting.
UNSHOWN_FIGURE = re.compile(r"\d{3}|\d\.\d")


def figures_unshown(answer: str, earlier: Iterable[str]) -> list[str]:
    """The figures (`UNSHOWN_FIGURE`) `answer` states that none of the `earlier` texts holds
    (`facts_stated`): after reading a file that sets no port, a 1.5B model answered that the
    app listens on port 5000."""
    stated = _stated(answer)
    figures = {word: key for word, key in stated.items() if UNSHOWN_FIGURE.search(word)}
    return list(_unsaid(figures, earlier))


def invented_files(
    answer: str, earlier: Iterable[str], is_here: Callable[[str], bool]
) -> list[str]:
    """The files `answer` names that none of the `earlier` texts (the session's messages,
    calls and results) holds and that `is_here` does not find: names nothing behind it."""
    names = file_names(answer)[:NAMES_JUDGED]
    unseen = _unsaid({name: name.lower().removeprefix("./") for name in names}, earlier)
    return [name for name in unseen if not is_here(name)]


# What an answer that names nothing its results show, even asked again, is followed by: the
# opening of each result it was about, quoted, so the user sees what was read. Asked to read a
# file out, a 1.5B model answered twice with where the file is; asked whether a README says how
# to install, that it does not, and never what it does say.
QUOTED_RESULTS = 2  # results quoted at most, the first of the round
QUOTED_LINES = 12  # lines of one result
QUOTED_LINE_CHARS = 200
QUOTED_CHARS = 1_000  # of one result, all its lines


def results_quoted(results: Iterable[tuple[str, str]]) -> str:
    """The text that follows such an answer: for each of `results` (what the call was, as
    "read_file `README.md`", and what it returned), the call and its first lines in a fence;
    "" when there are none."""
    pieces = []
    for label, text in list(results)[:QUOTED_RESULTS]:
        lines = text[: QUOTED_CHARS + 1].splitlines()
        shown = [_cut_line(line) for line in lines[:QUOTED_LINES]]
        body = "\n".join(shown)[:QUOTED_CHARS]
        cut = len(text) > QUOTED_CHARS or len(lines) > QUOTED_LINES or shown != lines
        fence = "````" if "```" in body else "```"
        more = "\n…" if cut else ""
        pieces.append(f"{label} returned:\n{fence}\n{body}{more}\n{fence}")
    return "\n\n" + "\n\n".join(pieces) if pieces else ""


def _cut_line(line: str) -> str:
    return line if len(line) <= QUOTED_LINE_CHARS else line[:QUOTED_LINE_CHARS] + "…"

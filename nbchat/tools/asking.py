"""What a user's message asks for, read from its words: not to run or change things
(`forbids_changes`), not to look at anything (`forbids_looking`), whether acting is safe
(`weighs_acting`), how to do something or about things in general (`asks_for_knowledge`), for a
change (`asks_for_a_change`), to carry on from the message before (`follows_on`), to have
something looked into by its name (`looked_into`), about the notebook
(`speaks_of_the_notebook`) or its newest cell (`asks_for_the_newest_cell`), whether something
here is on, installed or running (`asks_about_state`), for an explanation (`asks_why`); and
whether the dangerous tools are out of its turn (`takes_acting_out`). `nbchat.tools.choice`
weighs a turn's tools with these.

Each reads the text with one bounded pattern (`forbids_changes`: a negation followed, within
three words, by an action verb), most over the message's start or its ends only: linear time,
whatever the text, and no backtracking that could hold the GIL on a hostile message.

Pure: no I/O.
"""

from __future__ import annotations

import re

from nbchat.tools.offer import points_at_something, points_at_theirs

__all__ = [
    "asks_about_state",
    "asks_for_a_change",
    "asks_for_the_newest_cell",
    "asks_for_knowledge",
    "asks_how_to",
    "asks_in_general",
    "asks_why",
    "follows_on",
    "forbids_changes",
    "forbids_looking",
    "looked_into",
    "speaks_of_the_notebook",
    "takes_acting_out",
    "weighs_acting",
]

# "don't run", "do NOT delete it", "never touch", "without changing", "no need to start it".
NEGATION = r"(?:\bdo\s+not|\bdon['’]?t|\bnever|\bwithout|\bno\s+need\s+to)"
# Verb stems, so "changing", "deleting", "written" count too.
ACTION = (
    r"(?:run|execut|launch|start|delet|remov|rm|eras|chang|edit|modif|touch|writ|overwrit|"
    r"mov|renam|instal|commit|push)"
)
GAP = r"[\s,;:]+"  # between words: spaces and the punctuation of an aside
# "I don't know how to run it", "don't forget to run the tests" forbid nothing.
NOT_A_BAN = r"(?!(?:know|understand|remember|forget|think|see|get)\b)"
FORBIDS = re.compile(
    rf"{NEGATION}{GAP}{NOT_A_BAN}(?:[\w'’-]{{1,40}}{GAP}){{0,3}}?{ACTION}\w*\b", re.IGNORECASE
)


def forbids_changes(text: str) -> bool:
    """True when `text` tells the assistant not to run, delete or change something."""
    return FORBIDS.search(text) is not None


# "don't check anything", "without opening any files", "never search my files", "don't use
# tools", "no tools": the user asks for an answer without looking at all. Said of one
# thing ("don't read the tests, just app.py") or of everything else ("don't open anything
# else", "any other file"), it asks to look elsewhere: only what stands for everything here
# counts. Asked not to look in the workspace, a 1.5B model read config.yaml for a general
# question about a database's default port.
LOOK_VERB = r"(?:(?:look|check|open|read|search|peek|inspect|scan|brows)\w*|us(?:e|ing))"
EVERYTHING = (
    r"(?:(?:anything|any)\b(?!\s+(?:else|other|more)\b)|tools?\b|files\b"
    r"|my\s+(?:files|setup|stuff|workspace|project|folder)\b"
    r"|the\s+(?:workspace|files|notebook|project|repo|folder)\b)"
)
FORBIDS_LOOKING = re.compile(
    rf"{NEGATION}{GAP}(?:even{GAP}|really{GAP}|actually{GAP})?{LOOK_VERB}{GAP}"
    rf"(?:(?:at|in|into|through|up){GAP})?{EVERYTHING}"
    r"|(?:^\W*|[.!?,;:]\s*)no\s+tools\b",  # said as an instruction, not "there are no tools for …"
    re.IGNORECASE,
)


def forbids_looking(text: str) -> bool:
    """True when `text` tells the assistant to answer without looking at anything here."""
    return FORBIDS_LOOKING.search(text) is not None


# "is it safe to run …", "would this be ok to delete", "is cleanup.sh dangerous to run",
# "should I run …", "what happens if I run …": a question whether to act, which running the
# thing would answer by doing it (asked whether a script was dangerous to run, a 1.5B model ran
# it). Asked, not said: "it's fine to run the tests" gives leave.
WEIGHS = re.compile(
    r"\b(?:is|are|would|will)\s+(?:[\w./'’-]{1,60}\s+){1,2}?(?:be\s+)?(?:really\s+|actually\s+)?"
    r"(?:safe|dangerous|ok|okay|fine|risky|harmful|wise|smart|a\s+good\s+idea|a\s+bad\s+idea)"
    rf"\s+to\s+{ACTION}"
    rf"|\bshould\s+(?:i|we)\s+{ACTION}"
    r"|\bwhat\s+(?:happens|would\s+happen|will\s+happen)\s+(?:if|when)\s+(?:i|we|you)\s+"
    rf"(?:{ACTION}|ran\b)",
    re.IGNORECASE,
)


# The question is asked at a message's start or its end (after a pasted script or log).
WEIGHS_REACH = 2_000


def weighs_acting(text: str) -> bool:
    """True when `text` (its first and last `WEIGHS_REACH` characters) asks whether running,
    deleting or changing something is safe or wise, or what it would do."""
    if len(text) > 2 * WEIGHS_REACH:
        text = text[:WEIGHS_REACH] + "\n" + text[-WEIGHS_REACH:]
    return WEIGHS.search(text) is not None


# "how do I …", "in bash, how can you …", "how do people …", "how to …" (within two words of
# the start), "what's the best (usual, quickest…) way to …", "is there a way to …", "what are
# some ways to …", and asking for a command,
# shortcut or flag that does something ("which command shows …", "is there a shortcut for …",
# "what's the keyboard shortcut for …", "jupyter shortcut to …", "git command for …"): asked
# near the start of the message (its first `HOW_TO_REACH` characters). "How does this
# function work", "how many rows" and "what command does the script run" ask about something,
# not how to do it.
HOW_TO = re.compile(
    r"\bhow\s+(?:do|can|could|would|should|might)\s+(?:i|you|one|people|folks)\b"
    r"|^\W*(?:[\w'’-]+\W+){0,2}?how\s+to\b"  # not "I don't know how to run it"
    r"|\b(?:what['’]?s|what\s+is|is\s+there)\s+(?:the\s+|an?\s+)?"
    r"(?:[\w-]+\s+){0,3}?way\s+to\b"  # "the usual way to", "a quick and easy way to"
    r"|\bwhat\s+are\s+(?:some|the)\s+(?:[\w-]+\s+)?ways\s+to\b"
    r"|\b(?:what['’]?s|what(?:\s+is)?|which|is\s+there)\s+(?:the\s+|an?\s+|any\s+)?"
    r"(?:[\w-]+\s+)?(?:command|shortcut|hotkey|keybinding|magic|syntax|flag|option|switch)s?\s+"
    r"(?:to|for|that|which|would|do|should|can|i|you)\b"
    r"|^\W*(?:[\w'’-]+\W+){0,2}?(?:keyboard\s+)?"  # "jupyter shortcut to …", "git command for …"
    r"(?:command|shortcut|hotkey|keybinding|magic|flag|option|switch|one[\s-]?liner|snippet|"
    r"regexp?|idiom)s?\s+(?:to|for|that)\b",
    re.IGNORECASE,
)
HOW_TO_REACH = 80
# A task asked the way a search box is: a topic, a colon or a dash, the task, a question mark
# ("python: reverse a list?", "bash - loop over files?"). Asked so how to take back a commit
# in git, a 1.5B model chose to run `git reset`. Only a short message, all of it,
# and only a task: "logs - anything odd?" or "config: is debug on?" asks about what is here.
NOT_A_TASK = (
    r"(?:what|which|who|whose|where|when|why|how|is|are|was|were|do|does|did|can|could|should|"
    r"would|will|has|have|any|anything|anyone|something|everything|the|a|an|my|our|this|that|"
    r"these|those|it|its|there|here)\b"
)
TOPIC_QUESTION = re.compile(
    r"^\W*[\w.+#-]{1,30}(?:\s+[\w.+#-]{1,30})?\s*(?::|\s[-–—])\s+"
    rf"(?!{NOT_A_TASK})\w[^\n?]*\?\s*$",
    re.IGNORECASE,
)
TOPIC_QUESTION_CHARS = 200


def asks_how_to(text: str) -> bool:
    """True when `text` asks how to do something: for instructions, not for an action."""
    if HOW_TO.search(text[:HOW_TO_REACH]) is not None:
        return True
    return len(text) <= TOPIC_QUESTION_CHARS and TOPIC_QUESTION.search(text) is not None


# "add …", "please put …", "can you rename …", "ok now fix …": a request to change something,
# its verb within the first few words (`CHANGE_REACH` characters).
CHANGE = re.compile(
    r"^\W*(?:(?:please|pls|can|could|would|will|you|go|ahead|and|now|ok|okay|then|also|just)"
    r"\W+){0,4}"
    r"(?:add|put|append|insert|write|create|change|edit|fix|rename|delete|remove|replace|update|"
    r"set|move|save|correct)\b",
    re.IGNORECASE,
)
CHANGE_REACH = 80


# "in general", "generally speaking", "typically", "usually": the user asks about such things
# at large, not about the ones here. Anywhere in the message's start (`GENERAL_REACH`), often
# at its end: asked which sections a README should have, generally, a 1.5B model read the
# README here; asked how such files are usually rotated, it searched the workspace's logs.
# Not in a message pointing at something of ours (`points_at_something`): "the server
# generally dies at startup, check the log" asks to look.
GENERAL = re.compile(
    r"\b(?:in\s+general|generally|general\s+question|typical(?:ly)?|usual(?:ly)?|normally|"
    r"commonly|conventionally|by\s+convention|in\s+theory|(?:best|good|common|standard)\s+"
    r"practices?|rule\s+of\s+thumb)\b"
    # "what pattern should migration files follow", "how should a README be laid out":
    # advice on such things, asked of a thing at large, not of "I", "we" or "you".
    r"|^\W*(?:what|which|how)\s+(?:[\w-]+\s+){0,3}?should\s+(?!(?:i|we|you|my|our)\b)"
    r"(?:an?\s+|\w+\s+\w+\s+(?:follow|look|contain|have|include|use|be)\b)",
    re.IGNORECASE,
)
GENERAL_REACH = 400
# "what's the default port for redis", "which encoding does python use by default": what a
# tool or a language does unless told otherwise, knowledge even when it says "the". Not when
# it points at the user's own ("my", "our", "this"): "is debug on by default in our config".
# Asked for flask's default port, a 1.5B model read config.yaml and gave the port set there.
DEFAULTS = re.compile(
    r"\bby\s+default\b|\bthe\s+default\s+[\w-]+(?:\s+[\w-]+)?\s+(?:for|of|in|on|with)\s",
    re.IGNORECASE,
)


def asks_in_general(text: str) -> bool:
    """True when `text` asks about things in general rather than the ones here: in its words
    (`GENERAL`, pointing at nothing), or for what something does by default (`DEFAULTS`,
    pointing at nothing of the user's)."""
    head = text[:GENERAL_REACH]
    if GENERAL.search(head) is not None and not points_at_something(text):
        return True
    return DEFAULTS.search(head) is not None and not points_at_theirs(text)


def asks_for_knowledge(text: str) -> bool:
    """True when `text` asks how to do something (`asks_how_to`) or about things in general
    (`asks_in_general`): for instructions or knowledge, not for an action or a look."""
    return asks_how_to(text) or asks_in_general(text)


def asks_for_a_change(text: str) -> bool:
    """True when `text` asks the assistant to change something (and neither forbids changes
    nor asks how to)."""
    head = text[:CHANGE_REACH]
    return CHANGE.search(head) is not None and not forbids_changes(text) and not asks_how_to(head)


# "and the tests?", "ok, what about utils", "how about the other one", "same for the log": a
# message that opens by carrying on from the one before, after a word of thanks or assent.
FOLLOWS_ON = re.compile(
    r"^\W*(?:(?:ok+(?:ay)?|cool|nice|great|thanks|thx|right|so|alright)\W+){0,2}"
    r"(?:and|also|(?:what|how)\s+about|what\s+of|same\s+(?:for|with)|now)\b",
    re.IGNORECASE,
)
FOLLOWS_ON_REACH = 40


# "go through the logs", "check our tests", "read the logs", "anything odd in the logs?":
# what the user asks to be looked into, by its name. Not when the word is said as a folder
# ("the logs folder", "logs/"): then the folder itself is asked about.
LOOKS_INTO = re.compile(
    r"\b(?:look(?:ing)?\s+(?:at|into|through|over|in)|check(?:ing)?(?:\s+out)?|read(?:ing)?|"
    r"open(?:ing)?|go(?:ing)?\s+(?:through|over)|scan(?:ning)?|dig(?:ging)?\s+(?:into|through)|"
    r"in)\s+(?:(?:the|our|my|those|these|all|of)\s+){0,2}"
    r"([\w-]+)(?![\w-])(?!\s*(?:/|folders?\b|dir\b|directory\b|directories\b))",
    re.IGNORECASE,
)
LOOKS_REACH = 400


def looked_into(text: str) -> set[str]:
    """The words `text` (its first `LOOKS_REACH` characters) asks to have looked into ("check
    the logs" → "logs"), lower case."""
    return {word.lower() for word in LOOKS_INTO.findall(text[:LOOKS_REACH])}


def follows_on(text: str) -> bool:
    """True when `text` opens by carrying on from the message before it ("and …", "what
    about …")."""
    return FOLLOWS_ON.search(text[:FOLLOWS_ON_REACH]) is not None


def takes_acting_out(text: str) -> bool:
    """Whether the user's `text` leaves the dangerous tools out of its turn: it forbids
    changes, asks how to do something or about things in general, or whether to act."""
    return forbids_changes(text) or asks_for_knowledge(text) or weighs_acting(text)


# Words that speak of the notebook rather than the workspace's files.
NOTEBOOK_WORDS = frozenset({"cell", "cells", "notebook", "notebooks", "jupyter", "kernel"})
WORDS = re.compile(r"[A-Za-z]+")
NOTEBOOK_SCAN = 4_000


def speaks_of_the_notebook(text: str) -> bool:
    """True when `text` (its first `NOTEBOOK_SCAN` characters) says cell, notebook, Jupyter or
    kernel."""
    return any(word.lower() in NOTEBOOK_WORDS for word in WORDS.findall(text[:NOTEBOOK_SCAN]))


# "is logging switched on?", "is pandas installed", "are the workers running", "do I have numpy
# installed": whether something here is on, installed or running, which only a look can tell.
# Asked whether debug was on, a 1.5B model answered yes without looking.
STATE = re.compile(
    r"^\W*(?:(?:is|are)\s+(?:the\s+|my\s+|our\s+)?|do\s+(?:i|we)\s+(?:still\s+)?have\s+)"
    r"(?:[\w.+-]{1,60}\s+){1,3}?"
    r"(?:(?:turned|switched|set)\s+(?:on|off)|on|off|enabled|disabled|installed|running|"
    r"configured|pinned|set\s+up|active|up|down)"
    # Ending the question: "is my shop on sqlite?" asks what it runs on, not whether it is on.
    r"(?=\s*(?:[?.!,]|$|(?:now|here|yet|or\s+not|right\s+now|at\s+the\s+moment)\b))",
    re.IGNORECASE,
)
STATE_REACH = 200


def asks_about_state(text: str) -> bool:
    """True when `text` opens by asking whether something is on, off, installed, running or
    set up (its first `STATE_REACH` characters)."""
    return STATE.search(text[:STATE_REACH]) is not None


# "why does my build fail so often", "what does it mean when my terminal says …", "explain my
# error": asking for an explanation, which the answer gives in words of its own (a language, a
# tool, a cause), not as a claim about what is here.
WHY = re.compile(r"\b(?:why|mean|means|meaning|explain|explanation|difference)\b", re.IGNORECASE)
WHY_REACH = 400


def asks_why(text: str) -> bool:
    """True when `text` (its start) asks why, what something means, or for an explanation."""
    return WHY.search(text[:WHY_REACH]) is not None


# "my last cell", "the latest cell", "the most recent cell": the newest cell run, which
# `read_cell` reads as -1. Asked what the last cell said, a 1.5B model read In [1].
NEWEST_CELL = re.compile(
    r"\b(?:last|latest|newest|most\s+recent)\s+(?:code\s+)?cell\b(?!\s+(?:before|but))",
    re.IGNORECASE,
)
NEWEST_CELL_REACH = 400


def asks_for_the_newest_cell(text: str) -> bool:
    """True when `text` (its start) speaks of the newest cell run ("show my last cell",
    "the latest cell's output")."""
    return NEWEST_CELL.search(text[:NEWEST_CELL_REACH]) is not None

"""What a small model is told besides the conversation, never stored: after a tool round, to
answer the user's words from the results (or, asked again, to quote them), with a table's
largest and smallest values worked out by code when the message asks for them, or, when every
call failed, to say so; before it answers a message, the arithmetic, the unit conversion and
the Python expression in it, worked out by code, and what the installed Jupyter says of the
keys or magics it asks about. `nbchat.conversation.reply` puts them in the request; the texts
are here with what each was written against.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from nbchat.history import Row, last_user_text
from nbchat.tools.arithmetic import work_out
from nbchat.tools.executor import is_failed_result
from nbchat.tools.extremes import MAX_COLUMNS_TOLD, extremes_asked, extremes_of
from nbchat.tools.offer import brief
from nbchat.tools.pyexpr import evaluate_asked
from nbchat.tools.units import convert_units

__all__ = [
    "AFTER_FAILURES",
    "AFTER_RESULTS",
    "ASKED_AGAIN",
    "CONVERTED",
    "EVALUATED",
    "EXTREMES",
    "INVENTED",
    "UNSHOWN",
    "JUPYTER_REFERENCE",
    "WORKED_OUT",
    "after_results",
    "last_results",
    "worked_out",
]

# Before a small model answers arithmetic (a 1.5B model said 125 × 64 = 7500): the values.
WORKED_OUT = "Worked out by code, exactly: "
# Before it answers a conversion (a 1.5B model gave the formula and no number): the value.
CONVERTED = "Converted by code: "
# Before it answers what a Python expression gives (a 1.5B model said len([1, 2, 3]) is 4):
# its value, or what it raises.
EVALUATED = "Evaluated by code, as Python does: "
# Before it answers a question about Jupyter's keys or magics (a 1.5B model gave Ctrl+Enter for
# running a cell and adding one below): the installed Jupyter's own entries.
JUPYTER_REFERENCE = "This Jupyter's own shortcuts and magics, read from it:\n"
# Sent after a small model's tool results (not stored): shown a file it was asked to show, a
# 1.5B model answered "I have read the README.md file" without it.
# Told what the user asked, in their words, just before answering: with only "the user's last
# message" to go on, a 1.5B model narrated ("The user asked if there was anything left on their
# todo list. The tool response shows…") instead of answering. Told to answer from the results
# above, it answered a follow-up asking for the todo list from notes an earlier turn had read;
# and it answered with a bare yes ("there are tests", "the script is safe"), naming nothing.
# It still begins a few answers with "The user asked: …" and the result (2 of 86 answers after
# a tool on the dev split's fresh cases); quoting the message inside the instruction instead
# lost more answers' facts than that ("The cleanup script is safe to run.").
AFTER_RESULTS = (
    "The user asked: {asked}\n"
    "Answer them now, speaking to them, from the results of the tools called since they asked "
    "(earlier results answered earlier questions): name the files, items, values or lines "
    "those results show, quoted where they asked to see something, not a bare yes or no. Do "
    "not describe the tool call or restate the question."
)
# Sent instead, once, when the answer to that note named nothing the results show, or named a
# file that nothing holds and that is not here (`nbchat.conversation.grounding`): the answer is
# withdrawn and asked again; for a made-up file, saying which (`INVENTED`).
ASKED_AGAIN = (
    "The user asked: {asked}\n"
    "Answer them from the results of the tools called since they asked. Quote from those "
    "results the lines, names or values that answer the question, or, if none do, say what "
    "the results show instead. Do not describe the tool call or restate the question."
)
INVENTED = " The results name no file {names}: name only files they or the user name."
# Likewise for figures: after reading a file that sets no port, the answer said port 5000.
UNSHOWN = " The results show no {figures}: give only values they or the user give."
# After the results, when the message asks for a largest or smallest and a result is a whole
# table (`nbchat.tools.extremes`): shown a three-city CSV, a 1.5B model named the largest city
# as the smallest.
EXTREMES = "Worked out by code from those results, each number column's {which}: "
# When every call of the round was refused or failed there is nothing to answer from, and the
# question is not repeated: told it, the same model answered a refused `python --version` with
# "Python 3.8", and a refused `pip show pandas` with a version, even when told not to guess.
AFTER_FAILURES = (
    "The tool call above did not run, or failed: its result says why. Tell the user what it "
    "says and what they can do instead, in a sentence or two. You did not see what it would "
    "have shown, so say nothing about that."
)
ASKED_CHARS = 400  # of the user's message, in that note


def after_results(
    rows: Sequence[Row],
    asked_again: bool,
    invented: Sequence[str] = (),
    unshown: Sequence[str] = (),
) -> tuple[str, str, str]:
    """What a small model is told after a tool round: to answer the user's words from the
    results (`asked_again`: to quote them, which `invented` files are not here and which
    `unshown` figures the results do not show), or, when every call failed, to say so. The
    note's own words, the user's message it quotes, and the note as sent."""
    results = last_results(rows)
    if all(is_failed_result(row.content) for row in results):
        return AFTER_FAILURES, "", AFTER_FAILURES
    message = last_user_text(rows)
    asked = brief(message, ASKED_CHARS)
    template = ASKED_AGAIN if asked_again else AFTER_RESULTS
    note, told = template.format(asked=""), template.format(asked=asked)
    if invented:
        note += INVENTED.format(names="")
        told += INVENTED.format(names=" or ".join(invented))
    if unshown:
        note += UNSHOWN.format(figures="")
        told += UNSHOWN.format(figures=" or ".join(unshown))
    if asked_extremes := extremes_asked(message):
        found = [extreme for row in results for extreme in extremes_of(row.content, asked_extremes)]
        if found:  # the values are the answer's own words, not the note's: not in `note`
            which = " and ".join(asked_extremes)
            told += "\n" + EXTREMES.format(which=which) + "; ".join(found[:MAX_COLUMNS_TOLD]) + "."
    return note, asked, told


def worked_out(text: str, reference: str = "") -> str:
    """The note of what code worked out in the user's `text`: its arithmetic
    (`nbchat.tools.arithmetic`), a quantity converted to the unit it asks for
    (`nbchat.tools.units`) and a Python expression it asks about (`nbchat.tools.pyexpr`),
    then what this Jupyter says of itself that it may ask about (`reference`,
    `nbchat.tools.jupyterhelp`); "" when none."""
    notes = []
    if worked := work_out(text):
        notes.append(WORKED_OUT + "; ".join(worked) + ".")
    if converted := convert_units(text):
        notes.append(CONVERTED + "; ".join(converted) + ".")
    if evaluated := evaluate_asked(text):
        notes.append(EVALUATED + "; ".join(evaluated) + ".")
    told = " ".join(notes)
    if reference:
        told = (told + "\n" if told else "") + JUPYTER_REFERENCE + reference
    return told


def last_results(rows: Sequence[Row]) -> list[Row]:
    """The tool rows at the end of `rows`: the last round's results."""
    end = len(rows)
    start = end
    while start > 0 and rows[start - 1].role == "tool":
        start -= 1
    return list(rows[start:end])

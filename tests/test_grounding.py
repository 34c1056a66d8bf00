"""`nbchat.conversation.grounding`: an answer after a tool round that holds none of the
results' own words (beyond what the user and the call said) names nothing shown; one that
quotes a value, a name or a word of a line does; a text is read only up to `SCANNED`. The files
an answer names that nothing earlier holds and that are not here are invented; the files here
an answer speaks of are those its prose names, outside code blocks."""

from __future__ import annotations

import pytest
from helpers import grows_linearly

from nbchat.conversation.grounding import (
    NAMES_JUDGED,
    PATH_CHARS,
    QUOTED_CHARS,
    QUOTED_LINE_CHARS,
    QUOTED_LINES,
    SCANNED,
    facts_stated,
    file_names,
    files_spoken_of,
    invented_files,
    names_nothing_shown,
    results_quoted,
    says_it_was_not_told,
    says_yes_or_no,
    words_of,
)

SCRIPT = "#!/bin/sh\n# remove build output\nrm -rf build/ dist/ *.egg-info\n"
CONFIG = "server:\n  port: 8042\n  debug: false\n"


@pytest.mark.parametrize(
    ("answer", "result", "asked", "nothing"),
    [
        # Past the result: none of its words.
        ("The script is dangerous to run.", SCRIPT, "is the shell script dangerous", True),
        ("Debug is on.", CONFIG, "is debug on in the config", True),
        # Only a word any sentence about a workspace uses ("project"): nothing shown.
        (
            "The README has instructions on how to install the project.",
            "# Demo project\nA tiny project for the evaluation.\n",
            "does the readme say how to install it",
            True,
        ),
        # From it: a value, a word of a line.
        ("It deletes build/ and dist/.", SCRIPT, "is the shell script dangerous", False),
        ("The port is 8042.", CONFIG, "which port", False),
        ("No: debug is false.", CONFIG, "is debug on", False),
        # A number written with thousands separators is the number the file holds.
        ("Bergen has 291,000 people.", "city,population\nBergen,291000\n", "bergen?", False),
        ("Bergen has 291 000 people.", "city,population\nBergen,291000\n", "bergen?", False),
    ],
)
def test_an_answer_names_something_shown_or_nothing(
    answer: str, result: str, asked: str, nothing: bool
) -> None:
    assert names_nothing_shown(answer, [result], [asked, '{"path": "f"}']) is nothing


def test_words_the_user_or_the_call_said_do_not_ground_an_answer() -> None:
    result = "# Demo project\nA tiny project.\n"
    # "readme" is the call's path and "setup" the user's word: neither is the result's.
    said = ["does the readme have setup instructions", '{"path": "README.md"}']
    assert names_nothing_shown("The README has setup instructions.", [result], said)
    assert not names_nothing_shown("It only says: Demo project.", [result], said)


def test_no_words_to_judge_by_is_not_judged() -> None:
    assert not names_nothing_shown("", ["port: 8042"], ["which port"])
    assert not names_nothing_shown("Ok.", ["port: 8042"], ["which port"])  # no word of its own
    assert not names_nothing_shown("Nothing there.", ["the file"], ["x"])  # result: common only


def test_a_text_is_read_only_up_to_its_bound() -> None:
    huge = "a " * SCANNED + "zebra"
    assert "zebra" not in words_of(huge)
    assert words_of("Port 8042, v2 of 3 files") == {"port", "8042", "v2", "3"}


def test_the_files_an_answer_names() -> None:
    text = (
        'The file "sales.csv" holds it; see `src/app.py`, ./logs/server.log, README.md. '
        "Not np.log(x), https://example.org/data.csv, Python 3.10, df.to_csv or Node.js; "
        "sales.csv again."
    )
    assert file_names(text) == ["sales.csv", "src/app.py", "./logs/server.log", "README.md"]
    assert file_names("x" * (PATH_CHARS + 1) + ".csv") == []  # no path anyone wrote
    assert file_names("a " * SCANNED + "late.csv") == []


def test_a_file_is_invented_when_nothing_earlier_holds_it_and_it_is_not_here() -> None:
    def here(name: str) -> bool:
        return name in {"notes.txt", "src/app.py"}

    answer = "From notes.txt and src/app.py, per sales.csv and Plan.MD."
    assert invented_files(answer, [], here) == ["sales.csv", "Plan.MD"]
    # Named earlier (any case) by the user, a call or a result: not made up.
    assert invented_files(answer, ["what's in plan.md?", '{"path": "sales.csv"}'], here) == []
    assert invented_files("Nothing named.", [], here) == []
    # An answer listing many names is judged on its first `NAMES_JUDGED`.
    many = " ".join(f"f{number}.csv" for number in range(NAMES_JUDGED + 10))
    assert len(invented_files(many, [], here)) == NAMES_JUDGED


def test_the_files_here_an_answer_speaks_of_are_those_of_its_prose() -> None:
    here = {"settings.toml", "run.sh", "deploy/run.sh"}.__contains__
    answer = "It is in `settings.toml`; see deploy/run.sh and notes.md.\n```\nopen('run.sh')\n```"
    assert files_spoken_of(answer, here) == ["settings.toml", "deploy/run.sh"]
    # Past a closing fence the prose goes on; an unclosed fence runs to the end.
    assert files_spoken_of("```\nx = 1\n```\nrun.sh does it", here) == ["run.sh"]
    assert files_spoken_of("Here:\n```\nbash run.sh", here) == []
    assert files_spoken_of("run.sh " * (SCANNED // 7 + 10), here) == ["run.sh"]


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("Yes, it is pinned.", True),
        ("**No.** It is not.", True),
        ("  nope", True),
        ("Not that I know.", False),
        ("None of them.", False),
        ("Yesterday it was.", False),
        ("It is: yes.", False),
        (" " * 100 + "Yes", False),  # past the opening
    ],
)
def test_an_answer_opening_with_a_yes_or_a_no(answer: str, verdict: bool) -> None:
    assert says_yes_or_no(answer) is verdict


@pytest.mark.parametrize(
    ("answer", "not_told"),
    [
        ("The port is not specified in the given information.", True),
        ("That is not mentioned in your message.", True),
        ("I can't tell from the provided context.", True),
        ("The error means the server is not listening on that port.", False),
        ("It was not given a value, so it defaults to 5432.", False),
        ("x " * 1_500 + "not specified in the notes", False),  # past what is searched
    ],
)
def test_an_answer_saying_it_was_not_given_what_was_asked(answer: str, not_told: bool) -> None:
    assert says_it_was_not_told(answer) is not_told


def test_an_answer_that_still_names_nothing_is_followed_by_what_the_calls_read() -> None:
    quoted = results_quoted([("read_file `README.md`", "# Demo\nA tiny project.\n")])
    assert quoted == "\n\nread_file `README.md` returned:\n```\n# Demo\nA tiny project.\n```"
    assert results_quoted([]) == ""


def test_what_follows_such_an_answer_is_bounded_and_fenced_whatever_the_result_holds() -> None:
    lines = [f"line {i} " + "x" * (QUOTED_LINE_CHARS + 50) for i in range(QUOTED_LINES * 3)]
    results = [(f"tool{i}", "\n".join(lines)) for i in range(3)]
    quoted = results_quoted(results)
    # The first two results, each its first lines, each line cut, a mark where it was cut.
    assert quoted.count(" returned:") == 2 and "tool2" not in quoted
    first = quoted.split("tool1 returned:")[0]
    assert first.count("\nline ") <= QUOTED_LINES and first.rstrip().endswith("…\n```")
    assert all(len(line) <= QUOTED_LINE_CHARS + 1 for line in quoted.splitlines())
    assert len(quoted) < 2 * (QUOTED_CHARS + 100)
    # A result holding a fence is quoted in a longer one, so it cannot close it.
    fenced = results_quoted([("run_code", "```\nrm -rf /\n```")])
    assert "run_code returned:\n````\n```\n" in fenced and fenced.endswith("```\n````")


@pytest.mark.parametrize(
    ("answer", "earlier", "stated"),
    [
        ("The app listens on port 5000.", ["which port does the app listen on"], ["5000"]),
        ("We are using SQLite, version 3.45.", ["which db are we using"], ["SQLite", "3.45"]),
        # Said before, by the user or a result, or only opening a sentence: nothing stated.
        ("Your name is Ada.", ["Hello, my name is Ada.", "what is my name?"], []),
        ("It is 8042, as config.yaml says.", ["port: 8042"], []),
        ("Yes. Debug is off.", ["is debug on?"], []),
        ("I have not looked. OK?", ["which db?"], []),
        # Inside a code block a figure or a name is an example.
        ("```\nPORT = 5000\n```", ["which port"], []),
    ],
)
def test_the_facts_an_answer_states_are_figures_and_names_nothing_earlier_said(
    answer: str, earlier: list[str], stated: list[str]
) -> None:
    assert facts_stated(answer, earlier) == stated


def test_stating_facts_is_judged_in_linear_time_on_hostile_answers() -> None:
    for piece in ("a" * 50, "1." * 25, "aB" * 25, "Word " * 10):
        assert grows_linearly(lambda text: facts_stated(text, [text[:10]]), piece)

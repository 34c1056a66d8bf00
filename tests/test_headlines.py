"""Error headlines found by code (`nbchat.compaction.findings`): each form a run prints, the
folding of many per-test lines, and the task's first errors kept in the facts whatever came
after them."""

from __future__ import annotations

import pytest
from factories import tool_call, tool_result, user

from nbchat.compaction.facts import FAILURES_TOKENS, collect_facts, parse_facts, render_facts
from nbchat.compaction.findings import FOLD_AT, error_headlines, fold_headlines


@pytest.mark.parametrize(
    ("output", "headlines"),
    [
        (
            "Traceback (most recent call last):\n  File 'a.py', line 3\n    go()\nKeyError: 'name'",
            ["KeyError: 'name'"],
        ),
        (
            "Traceback (most recent call last):\n  File 'x'\n"
            "myapp.errors.Misconfigured: no database",
            ["myapp.errors.Misconfigured: no database"],
        ),
        (
            "E       NameError: name 'xxx' is not defined",
            ["E       NameError: name 'xxx' is not defined"],
        ),
        (
            "collected 3\nFAILED t.py::test_a - AssertionError: no\n",
            ["FAILED t.py::test_a - AssertionError: no"],
        ),
        ("FAILED (errors=21)", ["FAILED (errors=21)"]),
        ("ERROR: test_get (tests.T)", ["ERROR: test_get (tests.T)"]),
        ("Error: Line 613 does not match", ["Error: Line 613 does not match"]),
        ("bash: frob: command not found", ["bash: frob: command not found"]),
        (
            "python3: can't open file 'a.py': [Errno 2] No such file or directory",
            ["python3: can't open file 'a.py': [Errno 2] No such file or directory"],
        ),
        ("    raise ValueError('bad')\nall good", []),
        (
            "Traceback (most recent call last):\n</output_head>\n12070 characters elided\n"
            "  File 'x'\nTypeError: nope",
            ["TypeError: nope"],
        ),
        (
            "SyntaxError: invalid syntax\nSyntaxError: invalid syntax",
            ["SyntaxError: invalid syntax"],
        ),
    ],
)
def test_error_headlines_are_found_once_each(output: str, headlines: list[str]) -> None:
    assert error_headlines(output) == headlines


def test_a_headline_is_cut_at_two_hundred_characters() -> None:
    assert error_headlines("ValueError: " + "x" * 500) == ["ValueError: " + "x" * 188]


@pytest.mark.parametrize(
    ("output", "headline"),
    [
        # pytest's internal errors, pytest-xdist's workers: every line behind a prefix.
        (
            "INTERNALERROR> Traceback (most recent call last):\n"
            'INTERNALERROR>   File "/x/main.py", line 3, in wrap_session\n'
            "INTERNALERROR>     session.exitstatus = doit(config, session) or 0\n"
            "INTERNALERROR> TypeError: 'NoneType' object is not iterable",
            "INTERNALERROR> TypeError: 'NoneType' object is not iterable",
        ),
        (
            "INTERNALERROR> KeyError: <WorkerController gw0>",
            "INTERNALERROR> KeyError: <WorkerController gw0>",
        ),
        (
            "INTERNALERROR> Traceback (most recent call last):\n"
            "INTERNALERROR>   File 'x'\nINTERNALERROR> pluggy.PluginValidationError: bad hook",
            "INTERNALERROR> pluggy.PluginValidationError: bad hook",
        ),
        # pytest's exception lines under a failing test.
        (
            "    def test_x():\n>       import trustme\n"
            "E   ModuleNotFoundError: No module named 'trustme'",
            "E   ModuleNotFoundError: No module named 'trustme'",
        ),
        (
            "E       requests.exceptions.InvalidURL: Failed to parse: '.example.com'",
            "E       requests.exceptions.InvalidURL: Failed to parse: '.example.com'",
        ),
        ("E       Failed: DID NOT RAISE <class 'ValueError'>", None),
        # argparse's usage error, and other tools' `error:` lines.
        (
            "usage: pylint [options]\n"
            "pylint: error: argument --bad-names-rgxs: Error in provided regular expression",
            "pylint: error: argument --bad-names-rgxs: Error in provided regular expression",
        ),
        ("error: pathspec 'nope' did not match any file(s)", None),
        ("fatal: not a git repository (or any of the parent directories): .git", None),
        # The shell's own errors.
        (
            "bash: -c: line 1: syntax error near unexpected token `('",
            "bash: -c: line 1: syntax error near unexpected token `('",
        ),
        ("bash: -c: line 3: syntax error: unexpected end of file", None),
        ("/bin/sh: 1: pytets: command not found", None),
        ("cat: missing.py: No such file or directory", None),
        ("Segmentation fault (core dumped)", None),
        # unittest's failure line.
        ("FAIL: test_parse (tests.test_url.URLTests)", None),
    ],
)
def test_each_form_of_headline_is_found(output: str, headline: str | None) -> None:
    assert error_headlines(output) == [headline or output.splitlines()[-1]]


@pytest.mark.parametrize(
    "output",
    [
        "usage: prog [-h] [--name NAME]",
        "Errors are reported below.",
        "ERRORS = []",
        "FAILEDX",
        "E   assert 1 == 2",
        "E       Expected:",
        "E         At index 11 diff: 2 != 88",
        "pkg.module: 3 files changed",
        "INTERNALERROR>   File 'x', line 3",
        "terror: none",
        "some words: error: in the middle",
        "0 errors, 3 warnings",
    ],
)
def test_lines_that_only_mention_an_error_are_not_headlines(output: str) -> None:
    assert error_headlines(output) == []


def per_test(kind: str, count: int, message: str = "") -> list[str]:
    suffix = f" - {message}" if message else ""
    return [f"{kind} tests/test_requests.py::test_{n}{suffix}" for n in range(count)]


def test_many_per_test_lines_of_one_file_and_message_fold_into_one_counted_line() -> None:
    missing = "ModuleNotFoundError: No module named 'trustme'"
    lines = ["IDNAError: Empty Label", *per_test("ERROR", 60, missing), "FAILED a.py::t - X"]
    assert fold_headlines(lines) == [
        (0, "IDNAError: Empty Label"),
        (1, f"ERROR tests/test_requests.py::… ×60: {missing}"),
        (61, "FAILED a.py::t - X"),
    ]


def test_per_test_lines_fold_by_file_and_message_and_only_from_the_fold_count_on() -> None:
    few = per_test("FAILED", FOLD_AT - 1, "AssertionError")
    other = [line.replace("test_requests.py", "test_other.py") for line in per_test("ERROR", 5)]
    lines = [*few, *per_test("ERROR", 4), *other]
    folded = [line for _, line in fold_headlines(lines)]
    assert folded == [
        *few,
        "ERROR tests/test_requests.py::… ×4",
        "ERROR tests/test_other.py::… ×5",
    ]


def test_a_folded_line_stays_as_it_is_when_folded_again() -> None:
    line = "ERROR tests/test_requests.py::… ×60: ModuleNotFoundError: trustme"
    assert fold_headlines([line, line, line]) == [(0, line), (1, line), (2, line)]


def run(number: int, output: str) -> list[object]:
    call_id = f"c{number}"
    return [
        tool_call((call_id, "run_shell", {"command": "pytest"})),
        tool_result(call_id, output, name="run_shell"),
    ]


def test_the_tasks_own_errors_survive_sixty_per_test_lines_run_after_run() -> None:
    """The trace the issue measured: the bug's own errors first, then test runs whose sixty
    per-test lines (one missing module) filled the budget, newest first, and pushed them out."""
    bug = (
        "Traceback (most recent call last):\n  File 'x'\n"
        "urllib3.exceptions.LocationParseError: Failed to parse: '.example.com', label empty "
        "or too long\nE   idna.core.IDNAError: Empty Label"
    )
    rows = [user("Fix the crash on http://.example.com"), *run(0, bug)]
    for number in range(1, 12):
        lines = per_test("ERROR", 60, f"ModuleNotFoundError: No module named 'trustme{number}'")
        rows += run(number, "\n".join([*lines, f"ValueError: attempt {number}"]))
    block = render_facts(collect_facts(rows))  # type: ignore[arg-type]
    assert "urllib3.exceptions.LocationParseError: Failed to parse: '.example.com'" in block
    assert "E   idna.core.IDNAError: Empty Label" in block
    assert "ValueError: attempt 11" in block  # the newest
    assert "ERROR tests/test_requests.py::… ×60: ModuleNotFoundError: No module named " in block
    kept = parse_facts(block).failures
    assert sum(len(f"- {h} (in run_shell)") // 3 for _, h in kept) <= FAILURES_TOKENS


def test_a_megabyte_of_output_is_read_line_by_line() -> None:
    # No regular expression runs over the output: a line of a million characters that
    # nearly matches every form is simply not a headline.
    line = "E " + "INTERNALERROR> " + "a.b_" * 250_000 + " error: x"
    assert error_headlines(line + "\n" + "KeyError: 'k'") == ["KeyError: 'k'"]

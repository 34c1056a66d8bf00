"""The offer rule (`nbchat.tools.offer`): on a small model the tools go with a request only when
the user's message asks for workspace work, named by its vocabulary (files, folders, paths, shell
commands, the notebook's state), not by any one phrasing."""

from __future__ import annotations

import pytest
from factories import assistant, tool_call, tool_result, user

from nbchat.compaction.prune import to_placeholder
from nbchat.conversation.archivetool import offerable
from nbchat.history import Row
from nbchat.tools import default_registry
from nbchat.tools.choice import requests_action, round_choice
from nbchat.tools.offer import asks_for_tools, offered_tools

SCHEMAS = default_registry().schemas()
ARCHIVE_SCHEMA = {"type": "function", "function": {"name": "read_archived_output"}}


@pytest.mark.parametrize(
    "text",
    [
        "Show me ~/data",
        "cd ./build and list it",
        "Delete the build/ folder",
        "Install numpy",
        "Check the repo with ruff",
        "Is curl available?",
        "Copy the logs with cp",
        "What's the cwd?",
        "Open report.xlsx",
        "How do I run the tests in this repo?",
        "How can I see which files are here?",
    ],
)
def test_a_request_for_workspace_work_gets_the_tools(text: str) -> None:
    assert asks_for_tools(text)


@pytest.mark.parametrize(
    "text",
    [
        "In Python, how do I read a file?",
        "How do I list files in a folder in Python?",
        "How to delete a directory in bash?",
        "What is a file descriptor?",
        "Explain what a shell script is.",
        "What is 1/2 of 10?",
        "Is TCP/IP slower than I/O on disk, and/or memory?",
        "Make it return the sum",
        "Find the bug: x = [1, 2",
    ],
)
def test_a_general_question_about_files_or_commands_gets_none(text: str) -> None:
    assert not asks_for_tools(text)


def test_the_rule_reads_the_last_user_message_and_offers_in_a_tool_round() -> None:
    asked = [user("List the src/ folder")]
    plain = [user("List the src/ folder"), user("In Python, how do I read a file?")]
    round_ = [*plain, tool_result("call-1", "text")]
    assert offered_tools(SCHEMAS, asked, on_request=True) == list(SCHEMAS)
    assert offered_tools(SCHEMAS, plain, on_request=True) == []
    assert offered_tools(SCHEMAS, round_, on_request=True) == list(SCHEMAS)
    assert offered_tools(SCHEMAS, plain, on_request=False) == list(SCHEMAS)


# The first round's `tool_choice` (`nbchat.tools.choice`): "required" (or the one tool the
# message names by its vocabulary) for an explicit request for an action here, never otherwise.


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("Read notes.txt and tell me when the meeting is.", "required"),
        ("What files are in this workspace?", "required"),
        ("Show me the contents of src/app.py.", "required"),
        ("Please open todo.md", "required"),
        ("Can you list the files in the src folder?", "required"),
        ("In src/app.py, replace 'Hello' with 'Hi'.", "required"),
        ("Create a file hello.txt containing the text 'hi there'.", "required"),
        ("Search the files for the word TODO.", "search_files"),
        ("Which file defines the function greet? Search the workspace.", "search_files"),
        ("Run `python --version` in the shell.", "run_shell"),
        ("Run the tests with pytest.", "run_shell"),
        ("Show the current directory with pwd.", "run_shell"),
        ("Delete the file old.log using the shell.", "run_shell"),
        ("Run `git status`", "run_shell"),
    ],
)
def test_an_explicit_request_for_an_action_here_requires_a_call(text: str, choice: str) -> None:
    assert requests_action(text) == choice


@pytest.mark.parametrize(
    "text",
    [
        "Show me how to reverse a list",
        "Explain what a shell is",
        "Explain what a shell is in README.md style",
        "Write a function that reads a file",
        "Write a Python script that lists the files in a folder",
        "Write a SQL query that selects all rows from a table named users.",
        "How do I run the tests in this repo?",
        "How can I see which files are here?",
        "Show me an example of a shell loop",
        "Show me the difference between git merge and rebase",
        "What does the ls command do?",
        "What is a file descriptor?",
        "List three prime numbers",
        "Make it return the sum",
        "Find the bug: x = [1, 2",
        "Print hello world in Python",
        "Create a class that stores files",
        "Search for the meaning of life",
        "Read this sentence back to me",
        "Open question: is P equal to NP?",
        "Delete the last sentence of your answer",
        "Replace the word big with large in: a big cat",
        "Count the vowels in banana",
        "Tell me a joke about the shell",
        "Hi! What is 2 + 2?",
        "In Python, how do I reverse a list?",
        "Fix this Python 2 line for Python 3: print 'hi'",
    ],
)
def test_a_general_question_never_requires_a_call(text: str) -> None:
    assert requests_action(text) is None


def call_row(call_id: str, path: str) -> Row:
    return tool_call((call_id, "read_file", {"path": path}))


def test_later_rounds_answer_without_tools_when_last_or_when_the_model_only_repeats() -> None:
    asked = [user("Read notes.txt")]
    once = [*asked, call_row("c1", "notes.txt"), tool_result("c1", "text")]
    again = [*once, call_row("c2", "notes.txt"), tool_result("c2", "text")]
    other = [*once, call_row("c2", "todo.md"), tool_result("c2", "text")]
    assert round_choice(asked, number=1, rounds=5, requested=None) == "required"
    assert round_choice(asked, number=1, rounds=5, requested="auto") == "auto"
    assert round_choice(once, number=2, rounds=5, requested=None) is None
    assert round_choice(once, number=5, rounds=5, requested=None) == "none"
    assert round_choice(again, number=3, rounds=5, requested=None) == "none"
    assert round_choice(other, number=3, rounds=5, requested=None) is None
    # The same call in an earlier turn is no repeat.
    later = [*once, assistant("text"), user("Read notes.txt"), call_row("c3", "notes.txt")]
    assert round_choice(later, number=2, rounds=5, requested=None) is None


def test_an_answer_round_offers_no_tools_on_a_small_model_only() -> None:
    round_ = [user("Read notes.txt"), call_row("c1", "notes.txt"), tool_result("c1", "text")]
    assert offered_tools(SCHEMAS, round_, on_request=True, tool_choice="none") == []
    assert offered_tools(SCHEMAS, round_, on_request=False, tool_choice="none") == SCHEMAS


def test_read_archived_output_is_offered_only_with_something_archived() -> None:
    schemas = [*SCHEMAS, ARCHIVE_SCHEMA]
    plain = [user("Read notes.txt"), call_row("c1", "notes.txt"), tool_result("c1", "text")]
    pruned = [*plain[:2], to_placeholder(plain[2])]
    summarised = [Row("compacted", "Earlier: notes.txt was read."), *plain]
    assert ARCHIVE_SCHEMA not in offerable(schemas, plain)
    assert offerable(schemas, pruned) == schemas
    assert ARCHIVE_SCHEMA not in offerable(schemas, summarised)  # it names no call id

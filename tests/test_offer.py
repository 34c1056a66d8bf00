"""The offer rule (`nbchat.tools.offer`): on a small model the tools go with a request only when
the user's message asks for workspace work, named by its vocabulary (files, folders, paths, shell
commands, the notebook's state), not by any one phrasing."""

from __future__ import annotations

import pytest
from factories import tool_result, user

from nbchat.tools import default_registry
from nbchat.tools.offer import asks_for_tools, offered_tools

SCHEMAS = default_registry().schemas()


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

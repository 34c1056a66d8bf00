"""The grammar a reply meant as words is sent with (`nbchat.llm.textcalls.TEXT_ONLY_GRAMMAR`),
checked by a GBNF matcher (`gbnf`): words, code and JSON come through; a tool call written as
text, in any quoting a small model has used, cannot."""

from __future__ import annotations

import pytest
from gbnf import matches

from nbchat.llm.textcalls import TEXT_ONLY_GRAMMAR


@pytest.mark.parametrize(
    "reply",
    [
        "It is on Thursday.",
        '{"port": 8042}',
        "{'a': 1}",
        "```python\nsizes = {name: len(name) for name in names}\n```",
        'The names: {"named": 1, "tools": 2}',
        '{"names": ["a"]}',
        '[{"id": 1}]',
        "Use `{}` for an empty dict.",
        '{"names**": 1}',
        '{"name_of_file": "a.txt"}',
    ],
)
def test_words_code_and_json_are_allowed(reply: str) -> None:
    assert matches(TEXT_ONLY_GRAMMAR, reply)


@pytest.mark.parametrize(
    "reply",
    [
        "",
        '{"name": "read_file", "arguments": {"path": "notes.txt"}}',
        '{{"name": "read_file", "arguments": {"path": "notes.txt"}}}}',  # Qwen's doubled braces
        # A 1.5B model's, after reading a file for a user who said not to edit anything.
        "{\"name': 'read_file', 'arguments': {'path': 'src/app.py'}}",
        "{'name': 'read_file'}",
        # The same model, the same turn, another day: the key's closing quote left out.
        '{"name: "read_file", "arguments": {"path": "src/app.py"}}',
        # A 0.5B model's, after listing the notebook's variables: markdown's bold in the key.
        '{"name**: "list_notebook_variables", "arguments": {}}',
        '{"name__": "read_file"}',
        # The 1.5B's, after reading a file: both keys in one.
        '{"name, arguments": {"path": "todo.md"}}',
        '{"tool : "none"}',
        '{ "tool": "none" }',
        "{“name”: “read_file”}",
        "<tool_call>\n{}",
        'Sure: {"function": "read_file"}',
    ],
)
def test_a_call_written_as_text_is_not(reply: str) -> None:
    assert not matches(TEXT_ONLY_GRAMMAR, reply)

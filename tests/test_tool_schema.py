"""nbchat.tools.schema: JSON schemas from signatures, and the validator for them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Optional

import pytest

from nbchat.errors import ToolError
from nbchat.llm.fallback import call_from_text, looks_like_call_start
from nbchat.tools.context import ToolContext
from nbchat.tools.schema import describe_function, parameters_schema, type_schema, validate


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (list, {"type": "array"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (
            list[list[int]],
            {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        ),
        (dict, {"type": "object"}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (str | None, {"type": ["string", "null"]}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the old spelling too
        (list[str] | None, {"type": ["array", "null"], "items": {"type": "string"}}),
        (int | str, {"type": ["integer", "string"]}),
        (Literal["r", "w"], {"type": "string", "enum": ["r", "w"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal["a", 1], {"type": ["string", "integer"], "enum": ["a", 1]}),
        (Literal["r", "w"] | None, {"type": ["string", "null"], "enum": ["r", "w", None]}),
    ],
)
def test_each_type_form_has_its_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert type_schema(hint) == schema


def test_a_signature_becomes_an_object_schema_with_only_needed_arguments_required() -> None:
    def tool(
        ctx: ToolContext,
        path: str,
        count: int = 3,
        tags: list[str] | None = None,
        mode: Literal["fast", "slow"] = "fast",
        note: str | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> str:
        return ""

    assert parameters_schema(tool) == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "count": {"type": "integer"},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "note": {"type": ["string", "null"]},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_google_style_docstrings_give_the_description_and_parameter_texts() -> None:
    def tool(path: str, limit: int = 10) -> str:
        """Read a file.

        Returns its text.

        Args:
            path: Where the file is,
                relative to the workspace.
            limit (int): How many lines.

        Returns:
            The text.
        """
        return ""

    assert describe_function(tool) == "Read a file.\n\nReturns its text."
    assert parameters_schema(tool)["properties"] == {
        "path": {"type": "string", "description": "Where the file is, relative to the workspace."},
        "limit": {"type": "integer", "description": "How many lines."},
    }


def test_numpy_style_docstrings_give_the_parameter_texts() -> None:
    def tool(path: str, limit: int = 10) -> str:
        """Read a file.

        Parameters
        ----------
        path : str
            Where the file is.
        limit : int
            How many
            lines.

        Returns
        -------
        str
        """
        return ""

    assert describe_function(tool) == "Read a file."
    assert parameters_schema(tool)["properties"] == {
        "path": {"type": "string", "description": "Where the file is."},
        "limit": {"type": "integer", "description": "How many lines."},
    }


def test_a_function_without_hints_or_docstring_accepts_any_values() -> None:
    def tool(a, b=1):  # type: ignore[no-untyped-def]
        return a

    assert describe_function(tool) == ""
    assert parameters_schema(tool) == {
        "type": "object",
        "properties": {"a": {}, "b": {}},
        "required": ["a"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("hint", "message"),
    [
        (
            set[str],
            "Cannot describe parameter 'x' of 'tool': type set[str] is not supported. Use str, "
            "int, float, bool, list[...], dict[str, ...], Literal[...], Any or X | None.",
        ),
        (
            dict[int, str],
            "Cannot describe parameter 'x' of 'tool': JSON object keys are strings, so use "
            "dict[str, ...]. Use str, int, float, bool, list[...], dict[str, ...], Literal[...], "
            "Any or X | None.",
        ),
        (
            list[str] | dict[str, str],
            "Cannot describe parameter 'x' of 'tool': a union of list[str], dict[str, str] is "
            "not supported. Use str, int, float, bool, list[...], dict[str, ...], Literal[...], "
            "Any or X | None.",
        ),
    ],
)
def test_an_unsupported_type_is_refused_with_the_supported_ones_listed(
    hint: Any, message: str
) -> None:
    def tool(x: str) -> None: ...

    tool.__annotations__["x"] = hint
    with pytest.raises(ToolError) as caught:
        parameters_schema(tool)
    assert str(caught.value) == message


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "count": {"type": ["integer", "null"]},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"type": "string", "enum": ["r", "w"]},
        "options": {"type": "object", "additionalProperties": {"type": "integer"}},
        "anything": {},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({"path": "a"}, []),
        ({"path": "a", "count": None, "ratio": 2, "flag": True, "anything": [1]}, []),
        ({"path": 3}, ["path: expected a string, got 3"]),
        ({}, ["missing required argument 'path'"]),
        ({"path": "a", "colour": "red"}, ["unexpected argument 'colour'"]),
        ({"path": "a", "count": 1.5}, ["count: expected an integer or null, got 1.5"]),
        ({"path": "a", "count": True}, ["count: expected an integer or null, got true"]),
        ({"path": "a", "ratio": "1"}, ['ratio: expected a number, got "1"']),
        ({"path": "a", "flag": 1}, ["flag: expected a boolean, got 1"]),
        ({"path": "a", "tags": "x"}, ['tags: expected an array, got "x"']),
        ({"path": "a", "tags": ["x", 2]}, ["tags[1]: expected a string, got 2"]),
        ({"path": "a", "mode": "x"}, ['mode: expected one of "r", "w", got "x"']),
        ({"path": "a", "options": {"n": "1"}}, ['options.n: expected an integer, got "1"']),
        ([1, 2], ["arguments: expected an object, got [1, 2]"]),
        (
            {"count": "x", "extra": 1},
            [
                "missing required argument 'path'",
                'count: expected an integer or null, got "x"',
                "unexpected argument 'extra'",
            ],
        ),
    ],
)
def test_validation_says_exactly_what_is_wrong(arguments: object, problems: list[str]) -> None:
    assert validate(arguments, SCHEMA) == problems


def test_a_huge_wrong_value_is_shown_shortened() -> None:
    huge = "x" * 10_000_000
    assert validate({"path": "a", "flag": huge}, SCHEMA) == [
        f'flag: expected a boolean, got "{"x" * 60}"... (10,000,000 characters)'
    ]


@pytest.mark.parametrize(
    ("head", "verdict"),
    [("", None), ("`", None), ("<tool", None), ("{", True), ("```json", True), ("Sure", False)],
)
def test_streamed_text_is_held_only_while_it_may_still_be_a_call(
    head: str, verdict: bool | None
) -> None:
    assert looks_like_call_start(head) is verdict


def test_a_call_written_as_text_is_read_only_when_its_arguments_validate() -> None:
    schemas = {"read": {"type": "object", "properties": {"path": {"type": "string"}}}}

    def check(name: str, arguments: Mapping[str, Any]) -> bool:
        return not validate(dict(arguments), schemas[name])

    assert call_from_text('{"name": "read", "arguments": {"path": "a"}}', schemas, check) == (
        "read",
        {"path": "a"},
    )
    assert call_from_text('{"name": "read", "arguments": {"path": 1}}', schemas, check) is None
    assert call_from_text('{"name": "write", "arguments": {}}', schemas, check) is None

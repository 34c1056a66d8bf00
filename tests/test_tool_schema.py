"""nbchat.tools.schema: a function's schema (by pydantic, kept small); the words for bad ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import Field
from typing_extensions import TypedDict

from nbchat.errors import ToolError
from nbchat.llm.textcalls import call_from_text, looks_like_call_start
from nbchat.tools import ToolRegistry, default_registry
from nbchat.tools.context import ToolContext
from nbchat.tools.schema import Signature, describe_function, parameters_schema


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Box:
    width: float
    label: str | None = None


def schema_of(hint: Any) -> dict[str, Any]:
    """The schema of one parameter typed `hint`."""

    def tool(x: str) -> None: ...

    tool.__annotations__["x"] = hint
    schema: dict[str, Any] = parameters_schema(tool)["properties"]["x"]
    return schema


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (list, {"type": "array", "items": {}}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (
            list[list[int]],
            {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        ),
        (dict, {"type": "object", "additionalProperties": True}),
        (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (str | None, {"type": ["string", "null"]}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the old spelling too
        (list[str] | None, {"type": ["array", "null"], "items": {"type": "string"}}),
        (int | str, {"type": ["integer", "string"]}),
        (Literal["r", "w"], {"enum": ["r", "w"], "type": "string"}),
        (Literal[1, 2], {"enum": [1, 2], "type": "integer"}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Literal["r", "w"] | None, {"enum": ["r", "w", None], "type": ["string", "null"]}),
        (set[str], {"type": "array", "uniqueItems": True, "items": {"type": "string"}}),
        (
            list[str] | dict[str, str],
            {
                "anyOf": [
                    {"type": "array", "items": {"type": "string"}},
                    {"type": "object", "additionalProperties": {"type": "string"}},
                ]
            },
        ),
        (Annotated[int, Field(ge=1)], {"type": "integer", "minimum": 1}),
        # Nested types are written inline, untitled: a forced call nests the schema in another,
        # where a `$ref` to `#/$defs` would point nowhere.
        (
            Point,
            {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
                "additionalProperties": False,
            },
        ),
        (
            list[Box] | None,
            {
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "properties": {
                        "width": {"type": "number"},
                        "label": {"type": ["string", "null"]},
                    },
                    "required": ["width"],
                    "additionalProperties": False,
                },
            },
        ),
    ],
)
def test_each_type_form_has_its_schema(hint: Any, schema: dict[str, Any]) -> None:
    assert schema_of(hint) == schema


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

    # No titles, no defaults: a small model pays for every token of the schema.
    assert parameters_schema(tool) == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "count": {"type": "integer"},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "mode": {"enum": ["fast", "slow"], "type": "string"},
            "note": {"type": ["string", "null"]},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_the_built_in_tools_schemas_stay_small() -> None:
    text = json.dumps(default_registry().schemas())
    assert all(word not in text for word in ('"title"', '"default"', '"anyOf"', '"$ref"'))
    # The hand-written schemas of before pydantic came to 3,119 characters; the only growth
    # since is `include_hidden` on list_files and search_files (39 characters each, no
    # description: their results say when it matters). Not one more.
    assert len(text) <= 3_197


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


def test_rest_style_docstrings_give_the_parameter_texts() -> None:
    def tool(path: str) -> str:
        """Read a file,
        whole.

        :param path: Where the file is.
        :returns: The text.
        """
        return ""

    assert describe_function(tool) == "Read a file,\nwhole."
    assert parameters_schema(tool)["properties"] == {
        "path": {"type": "string", "description": "Where the file is."}
    }


def test_a_description_given_with_field_wins_over_the_docstrings() -> None:
    def tool(n: Annotated[int, Field(ge=1, description="How many.")], m: int) -> None:
        """Count.

        Args:
            n: Overruled.
            m: From the docstring.
        """

    assert parameters_schema(tool)["properties"] == {
        "n": {"type": "integer", "minimum": 1, "description": "How many."},
        "m": {"type": "integer", "description": "From the docstring."},
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
    assert Signature.of(tool).problems({"a": [1, {"b": None}], "b": "x"}) == []


class Opaque:
    """A class pydantic knows nothing about."""


class Tree(TypedDict):
    children: list[Tree]


SUPPORTED = (
    "Use str, int, float, bool, list[...], dict[str, ...], Literal[...], Any, X | None, or a "
    "TypedDict, dataclass or pydantic model of these."
)


@pytest.mark.parametrize(
    ("hint", "message"),
    [
        (
            Opaque,
            "Cannot describe parameter 'x' of 'tool': pydantic cannot make a JSON schema of "
            f"<class 'test_tool_schema.Opaque'>. {SUPPORTED}",
        ),
        (
            Callable[[int], int],
            "Cannot describe parameter 'x' of 'tool': pydantic cannot make a JSON schema of "
            f"collections.abc.Callable[[int], int]. {SUPPORTED}",
        ),
        (
            Tree,
            "Cannot describe the parameters of 'tool': Tree contains itself, which a JSON schema "
            "without $ref cannot say.",
        ),
    ],
)
def test_an_undescribable_type_is_refused_naming_the_parameter(hint: Any, message: str) -> None:
    with pytest.raises(ToolError) as caught:
        schema_of(hint)
    assert str(caught.value) == message


def test_a_hint_that_cannot_be_resolved_names_the_function() -> None:
    def tool(x: Missing) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ToolError) as caught:
        parameters_schema(tool)
    assert str(caught.value) == (
        "Cannot read the type hints of 'tool': name 'Missing' is not defined. Use types that are "
        "defined where the function is defined."
    )


def checked(
    path: str,
    count: int | None = None,
    ratio: float = 1.0,
    flag: bool = False,
    tags: list[str] | None = None,
    mode: Literal["r", "w"] = "r",
    options: dict[str, int] | None = None,
    either: int | str = 0,
    point: Point | None = None,
    positive: Annotated[int, Field(gt=0)] = 1,
    anything: Any = None,
) -> None:
    """A function with one parameter of each kind."""


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({"path": "a"}, []),
        ({"path": "a", "count": None, "ratio": 2, "flag": True, "anything": [1]}, []),
        ({"path": "a", "point": {"x": 1, "y": 2}, "either": "s", "tags": []}, []),
        ({"path": 3}, ["path: expected a string, got 3"]),
        ({}, ["missing required argument 'path'"]),
        ({"path": "a", "colour": "red"}, ["unexpected argument 'colour'"]),
        ({"path": "a", "count": 1.5}, ["count: expected an integer or null, got 1.5"]),
        ({"path": "a", "count": True}, ["count: expected an integer or null, got true"]),
        ({"path": "a", "ratio": "1"}, ['ratio: expected a number, got "1"']),
        ({"path": "a", "flag": 1}, ["flag: expected a boolean, got 1"]),
        ({"path": "a", "tags": "x"}, ['tags: expected an array or null, got "x"']),
        ({"path": "a", "tags": ["x", 2]}, ["tags[1]: expected a string, got 2"]),
        ({"path": "a", "mode": "x"}, ['mode: expected one of "r", "w", got "x"']),
        ({"path": "a", "options": {"n": "1"}}, ['options.n: expected an integer, got "1"']),
        ({"path": "a", "either": 1.5}, ["either: expected an integer or a string, got 1.5"]),
        ({"path": "a", "point": {"x": "1", "y": 2}}, ['point.x: expected an integer, got "1"']),
        ({"path": "a", "point": {"x": 1}}, ["missing required argument 'y' in point"]),
        ({"path": "a", "point": {"x": 1, "y": 2, "z": 3}}, ["unexpected argument 'z' in point"]),
        ({"path": "a", "positive": 0}, ["positive: input should be greater than 0, got 0"]),
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
def test_validation_says_exactly_what_is_wrong(
    arguments: dict[str, Any], problems: list[str]
) -> None:
    assert Signature.of(checked).problems(arguments) == problems


def test_a_huge_wrong_value_is_shown_shortened() -> None:
    huge = "x" * 10_000_000
    assert Signature.of(checked).problems({"path": "a", "flag": huge}) == [
        f'flag: expected a boolean, got "{"x" * 60}"... (10,000,000 characters)'
    ]


def test_the_function_gets_the_validated_values_and_none_for_left_out_optionals(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}

    def tool(ctx: ToolContext, names: set[str], box: Box, note: str | None) -> None:
        seen.update(ctx=ctx, names=names, box=box, note=note)

    registry = ToolRegistry()
    registry.register(tool)
    context = ToolContext(tmp_path)
    found = registry.get("tool")
    assert found is not None
    found.invoke({"names": ["a", "b", "a"], "box": {"width": 2}}, context)
    assert seen == {"ctx": context, "names": {"a", "b"}, "box": Box(2.0), "note": None}
    with pytest.raises(ToolError) as caught:
        found.invoke({"names": "a", "box": {}}, context)
    assert str(caught.value) == (
        "names: expected an array, got \"a\"; missing required argument 'width' in box"
    )


@pytest.mark.parametrize(
    ("head", "verdict"),
    [("", None), ("`", None), ("<tool", None), ("{", True), ("```json", True), ("Sure", False)],
)
def test_streamed_text_is_held_only_while_it_may_still_be_a_call(
    head: str, verdict: bool | None
) -> None:
    assert looks_like_call_start(head) is verdict


def test_a_call_written_as_text_is_read_only_when_the_registry_accepts_its_arguments() -> None:
    registry = ToolRegistry()

    @registry.register
    def read(path: str) -> str:
        return path

    schemas = {"read": read.parameters}
    accepts = registry.accepts
    assert call_from_text('{"name": "read", "arguments": {"path": "a"}}', schemas, accepts) == (
        "read",
        {"path": "a"},
    )
    assert call_from_text('{"name": "read", "arguments": {"path": 1}}', schemas, accepts) is None
    assert call_from_text('{"name": "write", "arguments": {}}', schemas, accepts) is None
    assert registry.accepts("write", {}) is False


def test_a_null_for_a_defaulted_or_unknown_argument_means_not_given(tmp_path: Path) -> None:
    def list_things(path: str = ".", pattern: str = "*", limit: int | None = 5) -> str:
        """List things."""
        return f"{path} {pattern} {limit}"

    signature = Signature.of(list_things)
    assert signature.problems({"pattern": None, "glob": None}) == []
    assert signature.problems({"glob": "x"}) == ["unexpected argument 'glob'"]
    assert signature.problems({"path": 3}) == ["path: expected a string, got 3"]
    keywords = signature.keywords({"pattern": None, "limit": None}, ToolContext(tmp_path))
    called = list_things(**keywords)
    assert called == ". * None"  # None is a value `limit` takes: kept as given

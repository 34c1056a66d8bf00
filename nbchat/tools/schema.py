"""JSON schemas from Python signatures, and a validator for exactly the schemas made here.

Owns the mapping from type hints to JSON schema (str, int, float, bool, `list[X]`,
`dict[str, X]`, `X | None`, `Literal[...]`, `Any`), the parameter descriptions read from a
Google- or NumPy-style docstring, and `validate`, which checks a model's arguments against such a
schema (type, required, enum, items, additionalProperties) and says what is wrong in words the
model can act on.

Must not: call tools, or grow into a general JSON-schema implementation (no third-party
jsonschema; a schema written by hand with other keywords is checked only for the keywords above).
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext

__all__ = ["describe_function", "parameters_schema", "type_hints", "type_schema", "validate"]

SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
SECTION_HEADINGS = ("args", "arguments", "parameters", "params")
OTHER_SECTIONS = ("returns", "return", "raises", "yields", "examples", "example", "notes", "note")
SHOWN_VALUE_CHARS = 60
# "name (type): text" in Google style; "name : type" on its own line in NumPy style.
GOOGLE_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
NUMPY_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(:.*)?$")
SUPPORTED_TYPES = "str, int, float, bool, list[...], dict[str, ...], Literal[...], Any or X | None"


def describe_function(fn: Callable[..., Any]) -> str:
    """The docstring's opening paragraphs, up to its first section (Args:, Returns:, ...)."""
    opening, _ = _split_docstring(inspect.getdoc(fn) or "")
    return "\n".join(opening).strip()


def parameters_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema of `fn`'s parameters, as OpenAI's `function.parameters` expects.

    Parameters with a default, or typed `X | None`, are not required; `*args`, `**kwargs` and a
    `ToolContext` parameter are not shown. Raises ToolError for a type it cannot describe.
    """
    hints = type_hints(fn)
    docs = _parameter_docs(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in inspect.signature(fn).parameters.values():
        hint = hints.get(parameter.name, Any)
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if hint is ToolContext:
            continue
        try:
            schema = type_schema(hint)
        except TypeError as exc:
            raise ToolError(
                f"Cannot describe parameter {parameter.name!r} of {_name(fn)}: {exc}. "
                f"Use {SUPPORTED_TYPES}."
            ) from exc
        if parameter.name in docs:
            schema["description"] = docs[parameter.name]
        properties[parameter.name] = schema
        if parameter.default is parameter.empty and not _is_nullable(hint):
            required.append(parameter.name)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def type_schema(hint: Any) -> dict[str, Any]:
    """The schema of one type hint; raises TypeError for a form it does not support."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in SCALARS:
        return {"type": SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is list or origin is list:
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise TypeError("JSON object keys are strings, so use dict[str, ...]")
        return {"type": "object", "additionalProperties": type_schema(args[1])}
    if origin is Literal:
        return _literal_schema(args)
    if origin in (typing.Union, types.UnionType):
        return _union_schema(args)
    raise TypeError(f"type {hint!r} is not supported")


def _literal_schema(values: tuple[Any, ...]) -> dict[str, Any]:
    names: list[str] = []
    for value in values:
        name = "null" if value is None else SCALARS.get(type(value))
        if name is None:
            raise TypeError(f"Literal value {value!r} is not a JSON scalar")
        if name not in names:
            names.append(name)
    return {"type": names[0] if len(names) == 1 else names, "enum": list(values)}


def _union_schema(args: tuple[Any, ...]) -> dict[str, Any]:
    others = [arg for arg in args if arg is not type(None)]
    nullable = len(others) < len(args)
    if len(others) == 1:
        schema = type_schema(others[0])
    elif all(arg in SCALARS for arg in others):
        schema = {"type": [SCALARS[arg] for arg in others]}
    else:
        raise TypeError(f"a union of {', '.join(map(repr, others))} is not supported")
    if not nullable or "type" not in schema:
        return schema
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    schema["type"] = [*kinds, "null"]
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _is_nullable(hint: Any) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(hint)
    return hint is None or hint is type(None)


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """`fn`'s resolved type hints; ToolError (naming the function) when they cannot be read."""
    try:
        return typing.get_type_hints(fn)
    except (NameError, TypeError) as exc:
        # A hint naming something not importable where the function lives (a notebook cell's
        # forward reference, say) cannot be turned into a schema; say which function.
        raise ToolError(
            f"Cannot read the type hints of {_name(fn)}: {exc}. Use types that are defined "
            "where the function is defined."
        ) from exc


def _name(fn: Callable[..., Any]) -> str:
    return repr(getattr(fn, "__name__", fn))


@dataclass(frozen=True)
class _Section:
    lines: list[str]
    numpy: bool  # NumPy style: an underlined heading, unindented entries


def _split_docstring(doc: str) -> tuple[list[str], dict[str, _Section]]:
    """The opening lines, and each section's body under its lower-cased heading."""
    lines = doc.splitlines()
    opening: list[str] = []
    sections: dict[str, _Section] = {}
    current = opening
    index = 0
    while index < len(lines):
        line, following = lines[index], lines[index + 1] if index + 1 < len(lines) else ""
        heading = line.strip().rstrip(":").lower()
        underlined = bool(following.strip()) and set(following.strip()) == {"-"}
        if heading in SECTION_HEADINGS + OTHER_SECTIONS and (
            line.strip().endswith(":") or underlined
        ):
            section = sections.setdefault(heading, _Section([], numpy=underlined))
            current = section.lines
            index += 2 if underlined else 1
            continue
        current.append(line)
        index += 1
    return opening, sections


def _parameter_docs(doc: str) -> dict[str, str]:
    """Parameter descriptions from an `Args:` (Google) or `Parameters` (NumPy) section."""
    _, sections = _split_docstring(doc)
    section = next((sections[name] for name in SECTION_HEADINGS if name in sections), None)
    if section is None:
        return {}
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    entry_indent: int | None = None
    for line in section.lines:
        depth = len(line) - len(line.lstrip())
        match = (NUMPY_ENTRY if section.numpy else GOOGLE_ENTRY).match(line.strip())
        starts_entry = match is not None and (
            depth == 0 if section.numpy else entry_indent is None or depth <= entry_indent
        )
        if match is not None and starts_entry:
            entry_indent = depth
            current = entries.setdefault(match.group(1).lstrip("*"), [])
            if not section.numpy:
                current.append(match.group(3))
        elif current is not None and line.strip():
            current.append(line.strip())
    return {name: " ".join(part for part in parts if part) for name, parts in entries.items()}


def validate(arguments: object, schema: dict[str, Any]) -> list[str]:
    """Everything wrong with `arguments` for `schema`, one message per problem ([] when valid)."""
    problems: list[str] = []
    _check(arguments, schema, "", problems)
    return problems


def _check(value: object, schema: dict[str, Any], path: str, problems: list[str]) -> None:
    kinds = schema.get("type")
    if kinds is not None:
        allowed: list[str] = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is_type(value, kind) for kind in allowed):
            words = " or ".join(TYPE_WORDS.get(kind) or kind for kind in allowed)
            problems.append(f"{path or 'arguments'}: expected {words}, got {_show(value)}")
            return
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        options = ", ".join(_show(option) for option in schema["enum"])
        problems.append(f"{path or 'arguments'}: expected one of {options}, got {_show(value)}")
        return
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{index}]", problems)
    if isinstance(value, dict):
        _check_object(value, schema, path, problems)


def _check_object(
    value: dict[Any, Any], schema: dict[str, Any], path: str, problems: list[str]
) -> None:
    properties: dict[str, Any] = schema.get("properties", {})
    where = f" in {path}" if path else ""
    for name in schema.get("required", []):
        if name not in value:
            problems.append(f"missing required argument {name!r}{where}")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        inner = f"{path}.{name}" if path else str(name)
        if name in properties:
            _check(item, properties[name], inner, problems)
        elif extra is False:
            problems.append(f"unexpected argument {name!r}{where}")
        elif isinstance(extra, dict):
            _check(item, extra, inner, problems)


def _is_type(value: object, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    checks: dict[str, Callable[[object], bool]] = {
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
        "null": lambda v: v is None,
    }
    check = checks.get(kind)
    return True if check is None else check(value)


def _same(value: object, option: object) -> bool:
    # JSON has no bool/int identity: true is not 1, so compare types as well as values.
    return type(value) is type(option) and value == option


def _show(value: object) -> str:
    """A short JSON rendering of a value for a message; long strings are cut, not copied."""
    if isinstance(value, str) and len(value) > SHOWN_VALUE_CHARS:
        return json.dumps(value[:SHOWN_VALUE_CHARS]) + f"... ({len(value):,} characters)"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > SHOWN_VALUE_CHARS:
        return text[:SHOWN_VALUE_CHARS] + "..."
    return text

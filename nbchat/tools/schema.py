"""What a tool function looks like to a model: its description, its JSON schema, and the words the
model reads when its arguments are wrong. pydantic builds the schema from the signature and
validates the arguments (strict JSON mode: true is not 1, "1" is not a number); docstring-parser
reads the parameter texts of a Google, NumPy or reST docstring. What stays nbchat's own is here:

- which parameters are shown: not one annotated `ToolContext` (`nbchat.tools.context`: the
  executor supplies it), nor `*args` or `**kwargs`; a parameter is required when it has no
  default and is not typed `X | None` (such a parameter left out gets None);
- a small schema, because small models pay for every token of it: no titles, no defaults, and
  `X | None` written `"type": [X, "null"]` rather than an `anyOf`;
- `Signature.problems`: one message per problem, naming the argument, what was expected and what
  was given (`path: expected a string, got 3`, `missing required argument 'path'`, `unexpected
  argument 'colour'`), with long values shortened.

Must not: call tools (the executor does), read files, start processes, or describe the tool's
name (the registry does).
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import docstring_parser
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema
from typing_extensions import Required, TypedDict

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext

__all__ = [
    "Signature",
    "describe_function",
    "parameters_schema",
    "type_hints",
]


TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
# pydantic error types that mean "not the kind of value expected": worded from the schema.
WRONG_KIND = ("literal_error", "enum", "none_required", "union_tag_invalid", "is_instance_of")
SHOWN_VALUE_CHARS = 60
SUPPORTED_TYPES = (
    "str, int, float, bool, list[...], dict[str, ...], Literal[...], Any, X | None, or a "
    "TypedDict, dataclass or pydantic model of these"
)


def describe_function(fn: Callable[..., Any]) -> str:
    """The docstring's opening paragraphs, up to its first section (Args:, Returns:, ...)."""
    doc = _docstring(fn)
    parts = [doc.short_description or "", doc.long_description or ""]
    gap = "\n\n" if doc.blank_after_short_description else "\n"
    return gap.join(part for part in parts if part).strip()


def parameters_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema of `fn`'s parameters, as OpenAI's `function.parameters` expects."""
    return Signature.of(fn).schema


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """`fn`'s resolved type hints (`Annotated` kept); ToolError naming the function when they
    cannot be read."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as exc:
        # A hint naming something not importable where the function lives (a notebook cell's
        # forward reference, say) cannot be turned into a schema; say which function.
        raise ToolError(
            f"Cannot read the type hints of {_name(fn)}: {exc}. Use types that are defined "
            "where the function is defined."
        ) from exc


@dataclass(frozen=True)
class Signature:
    """A function's parameters as the model sees them, and the check of what it sends.

    `schema` is sent to the server; `context_parameter` names the `ToolContext` parameter (if
    any); `filled_with_none` are the `X | None` parameters without a default, which the model may
    leave out; `null_means_default` are the parameters with a default that do not take None, for
    which a null from the model means "the default" (small models write `"glob": null` for an
    argument they do not want; a null for an argument the tool does not have is left out too).
    """

    schema: dict[str, Any]
    adapter: TypeAdapter[dict[str, Any]]
    context_parameter: str | None = None
    filled_with_none: tuple[str, ...] = ()
    null_means_default: frozenset[str] = frozenset()

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Signature:
        """Describe `fn`'s parameters; ToolError for a type pydantic cannot describe as JSON."""
        hints = type_hints(fn)
        docs = _parameter_docs(fn)
        fields: dict[str, Any] = {}
        context: str | None = None
        fill: list[str] = []
        defaulted: set[str] = set()
        for parameter in inspect.signature(fn).parameters.values():
            hint = hints.get(parameter.name, Any)
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if hint is ToolContext:
                context = parameter.name
                continue
            if parameter.name in docs:
                hint = _described(hint, docs[parameter.name])
            if parameter.default is not parameter.empty:
                fields[parameter.name] = hint
                if not _is_nullable(hint):
                    defaulted.add(parameter.name)
            elif _is_nullable(hint):
                fields[parameter.name] = hint
                fill.append(parameter.name)
            else:
                fields[parameter.name] = Required[hint]
        adapter, schema = _adapter_and_schema(fn, fields)
        return cls(schema, adapter, context, tuple(fill), frozenset(defaulted))

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        """Everything wrong with `arguments` (JSON values), one message per problem; [] when
        they are valid."""
        try:
            self._validated(arguments)
        except ValidationError as exc:
            return _messages(exc, self.schema, arguments)
        return []

    def keywords(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        """The keyword arguments to call the function with: the validated `arguments`, None for
        the left-out `X | None` parameters, and `context`. ToolError when they are not valid."""
        try:
            values = {**dict.fromkeys(self.filled_with_none), **self._validated(arguments)}
        except ValidationError as exc:
            raise ToolError("; ".join(_messages(exc, self.schema, arguments))) from exc
        if self.context_parameter is not None:
            values[self.context_parameter] = context
        return values

    def _validated(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        # Validated as JSON text, so pydantic's strict JSON rules apply (a list is a valid
        # set[str] or tuple, true is not 1) exactly as they would to what the model sent.
        # A null for a parameter with a default, or for one the tool does not have, says "not
        # given": it is left out instead of failing the call.
        known = self.schema.get("properties", {})
        given = {
            name: value
            for name, value in arguments.items()
            if not (value is None and (name in self.null_means_default or name not in known))
        }
        return self.adapter.validate_json(json.dumps(given), strict=True)


class _SmallSchema(GenerateJsonSchema):
    """pydantic's schema without titles, defaults or key sorting (`_inlined` does the rest)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        return value


def _merged_types(schemas: list[JsonSchemaValue]) -> JsonSchemaValue | None:
    """`X | None` as X's schema with "null" added to its types (and None to its enum), a union
    of plain types as one list of types; None for a union that needs its `anyOf`."""
    others = [schema for schema in schemas if schema != {"type": "null"}]
    if len(others) == 1 < len(schemas) and "type" in others[0]:
        rest = {key: value for key, value in others[0].items() if key != "type"}
        merged = {"type": [*_kinds(others[0]), "null"], **rest}
        if "enum" in merged:
            merged["enum"] = [*merged["enum"], None]
        return merged
    if all(set(schema) == {"type"} for schema in schemas):
        return {"type": list(dict.fromkeys(kind for s in schemas for kind in _kinds(s)))}
    return None


def _kinds(schema: JsonSchemaValue) -> list[str]:
    kinds = schema["type"]
    return list(kinds) if isinstance(kinds, list) else [kinds]


def _inlined(node: Any, definitions: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """`node` with every `$ref` replaced by its definition (untitled), and every `anyOf` that a
    list of types can say written as one. A forced call nests the schema inside another, where
    `#/$defs/...` would point nowhere; small models read an inline schema more easily, and pay
    for every token. ValueError for a type that contains itself."""
    if isinstance(node, list):
        return [_inlined(item, definitions, seen) for item in node]
    if not isinstance(node, dict):
        return node
    reference = node.get("$ref")
    if isinstance(reference, str):
        name = reference.rsplit("/", 1)[-1]
        if name in seen:
            raise ValueError(f"{name} contains itself, which a JSON schema without $ref cannot say")
        target = {k: v for k, v in definitions[name].items() if k != "title"}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _inlined({**target, **rest}, definitions, (*seen, name))
    inlined = {key: _inlined(value, definitions, seen) for key, value in node.items()}
    union = inlined.get("anyOf")
    merged = _merged_types(union) if isinstance(union, list) else None
    if merged is None:
        return inlined
    return {**merged, **{k: v for k, v in inlined.items() if k != "anyOf"}}


def _adapter_and_schema(
    fn: Callable[..., Any], fields: dict[str, Any]
) -> tuple[TypeAdapter[dict[str, Any]], dict[str, Any]]:
    # A TypedDict rather than a model: its parameter names cannot clash with BaseModel's
    # attributes (`copy`, `json`, `schema`), and it validates to a dict of just what was sent.
    make_typed_dict: Any = TypedDict  # built at run time, which mypy cannot follow
    arguments = make_typed_dict("arguments", fields, total=False)
    arguments.__pydantic_config__ = ConfigDict(extra="forbid")
    try:
        adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(arguments)
        built = adapter.json_schema(schema_generator=_SmallSchema)
    except (PydanticSchemaGenerationError, PydanticUserError) as exc:
        raise _undescribable(fn, fields, exc) from exc
    try:
        properties = _inlined(built.get("properties", {}), built.get("$defs", {}))
    except ValueError as exc:
        raise ToolError(f"Cannot describe the parameters of {_name(fn)}: {exc}.") from exc
    schema = {
        "type": "object",
        "properties": properties,
        "required": built.get("required", []),
        "additionalProperties": False,
    }
    return adapter, schema


def _undescribable(fn: Callable[..., Any], fields: dict[str, Any], error: Exception) -> ToolError:
    """A ToolError naming the first parameter whose type pydantic cannot describe."""
    for name, hint in fields.items():
        try:
            TypeAdapter(hint).json_schema(schema_generator=_SmallSchema)
        except (PydanticSchemaGenerationError, PydanticUserError):
            if typing.get_origin(hint) is Required:
                hint = typing.get_args(hint)[0]
            return ToolError(
                f"Cannot describe parameter {name!r} of {_name(fn)}: pydantic cannot make a "
                f"JSON schema of {hint!r}. Use {SUPPORTED_TYPES}."
            )
    return ToolError(f"Cannot describe the parameters of {_name(fn)}: {error}")


def _described(hint: Any, text: str) -> Any:
    """`hint` with the docstring's `text` as its description; a description given with
    `Annotated[..., Field(description=...)]` comes later, so it wins."""
    if typing.get_origin(hint) is Annotated:
        base, *metadata = typing.get_args(hint)
        parts = (base, Field(description=text), *metadata)
        return Annotated[parts]
    return Annotated[hint, Field(description=text)]


def _is_nullable(hint: Any) -> bool:
    if typing.get_origin(hint) is Annotated:
        return _is_nullable(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(hint)
    return hint is None or hint is type(None)


def _parameter_docs(fn: Callable[..., Any]) -> dict[str, str]:
    """Each parameter's text in the docstring (Google, NumPy or reST), on one line."""
    doc = _docstring(fn)
    return {
        param.arg_name.lstrip("*"): " ".join((param.description or "").split())
        for param in doc.params
        if param.description
    }


def _docstring(fn: Callable[..., Any]) -> docstring_parser.Docstring:
    return docstring_parser.parse(inspect.getdoc(fn) or "")


def _name(fn: Callable[..., Any]) -> str:
    return repr(getattr(fn, "__name__", fn))


def _messages(error: ValidationError, schema: dict[str, Any], arguments: object) -> list[str]:
    """pydantic's errors in words the model can act on, each once (a union's members fail
    separately but are one problem)."""
    found: list[str] = []
    for detail in error.errors(include_url=False):
        message = _message(detail, schema, arguments)
        if message not in found:
            found.append(message)
    return found


def _message(detail: ErrorDetails, schema: dict[str, Any], arguments: object) -> str:
    kind, loc = detail["type"], detail["loc"]
    if kind in ("missing", "extra_forbidden"):
        path, _, _ = _locate(schema, arguments, loc[:-1])
        where = f" in {path}" if path else ""
        what = "missing required" if kind == "missing" else "unexpected"
        return f"{what} argument {str(loc[-1])!r}{where}"
    path, node, value = _locate(schema, arguments, loc)
    if kind.endswith(("_type", "_parsing")) or kind in WRONG_KIND:
        return f"{path or 'arguments'}: expected {_expected(node)}, got {_show(value)}"
    text = detail["msg"]
    return f"{path or 'arguments'}: {text[:1].lower()}{text[1:]}, got {_show(value)}"


def _locate(
    schema: dict[str, Any], arguments: object, loc: tuple[int | str, ...]
) -> tuple[str, dict[str, Any], object]:
    """Follow pydantic's error location through the schema and the arguments together; stop
    where the schema has no place for the next step (a union member's tag, say)."""
    path, node, value = "", schema, arguments
    for key in loc:
        inner = _inner(node, key, value)
        if inner is None:
            break
        node, value = inner
        path = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
    return path, node, value


def _inner(node: dict[str, Any], key: int | str, value: object) -> tuple[Any, object] | None:
    if isinstance(key, int) and isinstance(value, list) and key < len(value):
        prefix = node.get("prefixItems", [])
        item = prefix[key] if key < len(prefix) else node.get("items")
        return None if item is None else (item, value[key])
    if isinstance(key, str) and isinstance(value, dict) and key in value:
        item = node.get("properties", {}).get(key, node.get("additionalProperties"))
        return (item, value[key]) if isinstance(item, dict) else None
    return None


def _expected(node: dict[str, Any]) -> str:
    if "enum" in node:
        return "one of " + ", ".join(_show(option) for option in node["enum"])
    if "const" in node:
        return _show(node["const"])
    if "type" in node:
        return " or ".join(TYPE_WORDS.get(kind, kind) for kind in _kinds(node))
    if "anyOf" in node:
        words = [_expected(member) for member in node["anyOf"]]
        return " or ".join(dict.fromkeys(words))
    return "an object" if "properties" in node else "a JSON value"


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

"""What goes into an MCP tool call and what comes out of it: the model's arguments checked
against the JSON schema the server gave (`SchemaCheck`), and a result as the text the model
reads (`result_text`: text kept; images, audio and resources named by type and size).

The check leaves the keywords that run the server's regular expressions (`pattern`,
`patternProperties`) to the server: Python's `re` can backtrack for minutes on a bad pattern
over what the model wrote, on the chat's own thread. A schema the check cannot follow (a remote
`$ref`) is left to the server too.

Must not: talk to a server (nbchat.tools.mcplink does), or be imported unless a server is
configured (jsonschema and mcp-types come with the optional SDK).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import mcp_types as types
from referencing.exceptions import Unresolvable

from nbchat.errors import McpError, ToolError
from nbchat.tools.context import ToolContext

__all__ = ["SchemaCheck", "result_text"]

MAX_PROBLEMS = 8
REGEX_KEYWORDS = ("pattern", "patternProperties")
SCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SCHEMA_ONES = ("items", "not", "if", "then", "else", "contains", "additionalProperties")

SHOWN_CHARS = 200


@dataclass(frozen=True)
class SchemaCheck:
    """An MCP tool's arguments checked against the JSON schema its server gave (`schema`, sent
    to the model as given). The regular-expression keywords are left to the server, and a
    schema this check cannot follow (a remote `$ref`) is too."""

    schema: dict[str, Any]
    validator: Any = field(repr=False, compare=False)

    @classmethod
    def of(cls, schema: dict[str, Any]) -> SchemaCheck:
        """The check for `schema`; McpError when it is not a valid JSON schema."""
        kind = jsonschema.validators.validator_for(schema)
        try:
            kind.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise McpError(f"its input schema is not valid JSON Schema ({exc.message})") from exc
        return cls(schema, kind(_without_regex(schema)))

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        try:
            errors = sorted(self.validator.iter_errors(dict(arguments)), key=_error_path)
        except (Unresolvable, jsonschema.exceptions.JsonSchemaException, ValueError):
            return []  # a schema this check cannot follow: the server checks the call
        return [f"{_error_path(e) or 'arguments'}: {_clip(e.message)}" for e in errors][
            :MAX_PROBLEMS
        ]

    def keywords(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        problems = self.problems(arguments)
        if problems:
            raise ToolError("; ".join(problems))
        return {"arguments": dict(arguments), "context": context}


def result_text(result: types.CallToolResult) -> str:
    """A tool result as the model reads it: text kept; images, audio and resources named by
    type and size; structured content as JSON when there is no text."""
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts) if parts else "(no output)"


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {_decoded_size(block.data):,} bytes]"
    if isinstance(block, types.ResourceLink):
        size = f", {block.size:,} bytes" if block.size is not None else ""
        return f"[resource link: {block.uri} ({block.mime_type or 'type not given'}{size})]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        kind = resource.mime_type or "type not given"
        if isinstance(resource, types.TextResourceContents):
            return f"[resource: {resource.uri} ({kind}, {len(resource.text):,} characters)]"
        return f"[resource: {resource.uri} ({kind}, {_decoded_size(resource.blob):,} bytes)]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def _decoded_size(data: str) -> int:
    """The size of base64 `data` once decoded, without decoding it."""
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _without_regex(schema: Any) -> Any:
    """`schema` without the keywords that run its regular expressions (and, beside
    patternProperties, the additionalProperties that depend on it), at every level."""
    if not isinstance(schema, dict):
        return schema
    kept = {key: value for key, value in schema.items() if key not in REGEX_KEYWORDS}
    if "patternProperties" in schema:
        kept.pop("additionalProperties", None)
        kept.pop("unevaluatedProperties", None)
    for key in SCHEMA_MAPS:
        if isinstance(kept.get(key), dict):
            kept[key] = {name: _without_regex(value) for name, value in kept[key].items()}
    for key in SCHEMA_LISTS:
        if isinstance(kept.get(key), list):
            kept[key] = [_without_regex(value) for value in kept[key]]
    for key in SCHEMA_ONES:
        if key in kept:
            kept[key] = _without_regex(kept[key])
    return kept


def _error_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path)


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_CHARS else flat[: SHOWN_CHARS - 1] + "…"

"""A tool call that a small model wrote as plain JSON text instead of `tool_calls` (the
fallback): recognising one, checking it, what to tell the model when it does not validate, and
asking for a call, or forbidding one, through what llama.cpp applies to the content.

The reply (stripped; optionally after a ```json fence or a `<tool_call>` tag) opens with one
complete JSON object `{"name": <an offered tool>, "arguments": {...}}` (or `"parameters"`), and
the arguments pass the check the caller hands in (the tool registry's validation). Anything else
is ordinary text. What follows the object does not count: the client closes the stream as soon
as the object is complete (`call_shape`), so the model cannot append more. A call-shaped object
that does not validate (a tool that does not exist, arguments its schema refuses) is what
`call_problem` explains to the model for its second chance (`fitting_tool`: the offered tool it
meant, if any; `answer_instead`: the note when it meant none). `looks_like_call_start` tells the
reader when streamed text may become a call (it is shown as it streams all the same, and
replaced by the call only once it validates); `forced_call_format` is the `response_format` that
makes a model write such a call: llama.cpp's server ignores a `tool_choice` that names a
function (it accepts only strings), and with "required" it lets small models pad a call with
whitespace up to `max_tokens`, but it does apply a JSON schema to the content, so a forced call
is asked for that way and read back by this fallback. `text_only_grammar` is the grammar of a
reply meant as an answer (`tool_choice="none"`), which cannot open like a call or hold a JSON
object.

Pure: no I/O and no stream; `nbchat.llm.reader` watches a streamed reply with these rules and
`nbchat.llm.client` sends what they build. Must not import the tools (their check is handed in,
`ArgumentCheck`) or the reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

__all__ = [
    "ArgumentCheck",
    "CALL_OPENINGS",
    "answer_instead",
    "call_from_text",
    "call_problem",
    "call_shape",
    "fitting_tool",
    "forced_call_format",
    "looks_like_call_start",
    "schemas_by_name",
    "text_only_grammar",
]


CALL_OPENINGS = ("{", "```", "<tool_call>")
# What may come before the call's JSON object: a code fence or Qwen's <tool_call> tag.
OPENING = re.compile(r"^(?:```(?:json)?|<tool_call>)\s*")
DECODER = json.JSONDecoder()
CALL_KEYS = ({"name", "arguments"}, {"name", "parameters"})

# Whether `arguments` are valid for the tool `name`; the conversation passes the tool registry's
# own check down, so this edge never imports the tools.
ArgumentCheck: TypeAlias = Callable[[str, Mapping[str, Any]], bool]


def schemas_by_name(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each offered function tool's parameter schema, by name (from the OpenAI `tools` list)."""
    return {
        tool["function"]["name"]: dict(tool["function"].get("parameters") or {})
        for tool in tools
        if tool.get("type", "function") == "function" and "function" in tool
    }


def forced_call_format(
    tools: Sequence[Mapping[str, Any]], choice: str | None
) -> dict[str, Any] | None:
    """A JSON-schema `response_format` whose only valid content is a call of the tool named by
    `choice` (or, for "required", of any offered tool); None when `choice` forces nothing."""
    schemas = schemas_by_name(tools)
    if choice == "required":
        names = list(schemas)
    elif choice in schemas:
        names = [choice]
    else:
        return None  # None, "auto", "none", or a name nobody offered: nothing to force
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": schemas[name]},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for name in names
    ]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    return {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}}


# llama.cpp's GBNF for a reply meant as words: not empty, not opening with `{` or `<` (no
# `<tool_call>`), and no `{` anywhere that opens an object whose first key is "name", "tool"
# or "function", whatever whitespace or extra braces (`{{"name": ...}}`, Qwen's template) come
# between (nor `"name "`, nor typographic or single quotes: `{“name”`, `{'name'`, and a 1.5B
# model's `{"name': 'read_file', …}`; nor a key left unclosed, its colon inside the quotes, as
# the same model wrote `{"name: "read_file", …}`; nor markdown's emphasis between the key and
# its quote or colon, as a 0.5B wrote `{"name**: "list_notebook_variables", …}`; nor a comma
# there, as the 1.5B wrote `{"name, arguments": {"path": "todo.md"}}`): so it cannot be a call
# written as text.
# After a tool result, offered no tools, a 0.5B model wrote its call again as JSON text (issue
# 12). Any other JSON stays possible (`{"port": 8042}`, `[{"id": 1}]`), as does code (`{ x }`,
# `{'a': 1}`). A character read while ruling a key out is never `{`, so no brace is passed
# over unchecked.
TEXT_ONLY_GRAMMAR = r"""
root ::= [ \t\r\n]* first rest
first ::= [^{< \t\r\n] | brace
rest ::= ([^{] | brace)*
brace ::= "{" [ \t\r\n]* ([^"“'‘ \t\r\n{] | ["“'‘] key | brace)
key ::= [^nft"{] | "\"" | "n" n1 | "t" t1 | "f" f1
n1 ::= [^a{] | "a" ([^m{] | "m" ([^e{] | "e" end))
t1 ::= [^o{] | "o" ([^o{] | "o" ([^l{] | "l" end))
f1 ::= [^u{] | "u" ([^n{] | "n" ([^c{] | "c" ([^t{] | "t" f2)))
f2 ::= [^i{] | "i" ([^o{] | "o" ([^n{] | "n" end))
end ::= [ \t\r\n*_]* [^"”'’:,*_ \t\r\n{]
""".strip()


def text_only_grammar(choice: str | None) -> dict[str, Any] | None:
    """For `tool_choice="none"` with the fallback on: the `extra_body` that keeps the reply
    from opening like a call written as text (llama.cpp's `grammar`); None otherwise."""
    return {"grammar": TEXT_ONLY_GRAMMAR} if choice == "none" else None


def looks_like_call_start(head: str) -> bool | None:
    """True when `head` (stripped text so far) opens like a call, False when it cannot be one,
    None while it is too short to tell (`""`, `"`"`, `"<tool"`)."""
    if any(head.startswith(opening) for opening in CALL_OPENINGS):
        return True
    if any(opening.startswith(head) for opening in CALL_OPENINGS):
        return None
    return False


def call_shape(text: str) -> tuple[str, Any] | None:
    """`(name, arguments)` when `text` opens with one complete call-shaped JSON object
    (`{"name": ..., "arguments": ...}`, optionally after ```json or `<tool_call>`, or in the
    doubled braces of Qwen's template, `{{"name": ...}}}}`), whatever follows it and whether or
    not the tool exists; None while it is incomplete or not one."""
    body = OPENING.sub("", text.lstrip(), count=1)
    if not body.startswith("{"):
        return None
    if body.startswith("{{"):  # Qwen's template shows the call in doubled braces: so does it
        body = body[1:].lstrip()
    try:
        value, _end = DECODER.raw_decode(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) not in CALL_KEYS:
        return None
    name = value["name"]
    if not isinstance(name, str):
        return None
    return name, value.get("arguments", value.get("parameters"))


def call_from_text(
    text: str, schemas: Mapping[str, dict[str, Any]], check: ArgumentCheck | None = None
) -> tuple[str, dict[str, Any]] | None:
    """`(tool name, arguments)` when `text` is a call of an offered tool whose arguments pass
    `check` (without one, any JSON object passes). What follows the call is ignored: the reader
    stops the stream once a call is complete (`call_shape`), so it is at most a stray token."""
    found = call_shape(text)
    if found is None:
        return None
    name, arguments = found
    if name not in schemas or not isinstance(arguments, dict):
        return None
    if check is not None and not check(name, arguments):
        return None
    return name, arguments


def call_problem(name: str, arguments: Any, tools: Sequence[Mapping[str, Any]]) -> str:
    """What to tell a model whose call-shaped reply did not validate, so it can try again: what
    was wrong, and each offered tool with the first line of its description."""
    schemas = schemas_by_name(tools)
    if name not in schemas:
        problem = f"There is no tool named {name!r}."
        fitting = [other for other in schemas if _fits(arguments, schemas[other])]
        if len(fitting) == 1:
            problem += f" Its arguments fit {fitting[0]!r}."
    else:
        wanted = ", ".join(schemas[name].get("properties") or {}) or "none"
        problem = f"The arguments of {name!r} did not fit its parameters ({wanted})."
    lines = [f"{problem} Call one of these tools instead:"]
    for tool in tools:
        function = tool.get("function") or {}
        summary = " ".join(str(function.get("description") or "").split())
        lines.append(f"- {function.get('name')}: {summary}")
    return "\n".join(lines)


def fitting_tool(name: str, arguments: Any, tools: Sequence[Mapping[str, Any]]) -> str | None:
    """The offered tool a call-shaped reply meant: `name` when offered, the one tool whose
    parameters its arguments fit exactly, "required" (any tool) when several fit; None when
    it meant none of them (a 1.5B model asked "17 × 23" wrote `{"name": "multiply", ...}`)."""
    schemas = schemas_by_name(tools)
    if name in schemas:
        return name
    fitting = [other for other in schemas if _fits(arguments, schemas[other])]
    if not fitting:
        return None
    return fitting[0] if len(fitting) == 1 else "required"


def answer_instead(name: str) -> str:
    """What to tell a model whose call-shaped reply named a tool that exists nowhere and
    meant none that does: answer in words."""
    return (
        f"There is no tool named {name!r}, and none is needed for that: answer the user "
        "directly, in words."
    )


def _fits(arguments: Any, schema: Mapping[str, Any]) -> bool:
    """Whether `arguments` name exactly a tool's required parameters and no others it lacks."""
    if not isinstance(arguments, dict) or not arguments:
        return False
    given = set(arguments)
    known = set(schema.get("properties") or {})
    return set(schema.get("required") or ()) <= given <= known

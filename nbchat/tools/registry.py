"""`Tool` and `ToolRegistry`: which functions the model may call, and how they are described.

A `Tool` is a function plus its name, description, JSON schema and argument check (made from
the signature by `nbchat.tools.schema`, or any `ArgumentCheck`: an MCP server's tools are
checked against the schema the server gives), whether it is `dangerous` (writes files, runs
commands or comes from elsewhere, so the approval policy applies) and its `origin` when it
comes from outside nbchat and the user's code (an MCP server). A `ToolRegistry` holds tools by
name, hands the OpenAI `tools=` list to the client and checks arguments for the JSON fallback
(`accepts`).
Users add their own functions with one decorator or one call:

    registry = default_registry()

    @registry.register
    def word_count(text: str) -> int:
        "Count the words in a text."
        return len(text.split())

    registry.register(some_function, name="other", dangerous=True)

Must not: run tools (the executor does) or hold a global registry that user code mutates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import InitVar, dataclass, field
from typing import Any, Protocol, overload

from nbchat.errors import ToolError
from nbchat.tools.context import ToolContext
from nbchat.tools.frames import Outline
from nbchat.tools.schema import Signature, describe_function

__all__ = ["ArgumentCheck", "Review", "Tool", "ToolRegistry", "tool"]

# OpenAI's rule for function names; llama.cpp and vLLM accept the same.
NAME_RULE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

ToolFunction = Callable[..., Any]


@dataclass(frozen=True)
class Review:
    """What the user reviews before a dangerous call runs, beyond its arguments: `kind` is
    "diff" (a cell's change, unified diff lines) or "code" (exactly the code that runs), and
    `text` the diff or the code; `note` one line about it ("cell 3, below the chat")."""

    kind: str
    text: str
    note: str = ""


# Made from the call's id and its checked arguments, before the approver is asked; None when
# there is nothing more to show than the arguments.
Reviewer = Callable[[str, Mapping[str, Any]], "Review | None"]


class ArgumentCheck(Protocol):
    """How a tool's arguments are described and checked (`Signature` for a function)."""

    @property
    def schema(self) -> dict[str, Any]: ...

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        """Everything wrong with `arguments`, one message each ([] when valid)."""
        ...

    def keywords(self, arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        """The keyword arguments the function is called with (ToolError when not valid)."""
        ...


@dataclass(frozen=True)
class Sight:
    """What a tool can look at now, for a small model's first step: one line to show it, the
    names in that line a user's message may mention (a notebook's variables, and the columns
    of its DataFrames as (column, variable) pairs), and what code written over those names
    needs (`frames()`: each DataFrame's name and outline, `nbchat.tools.frames.Outline`, read
    only when called: only a call that writes code needs them, and a first step is read for
    every message)."""

    line: str
    names: tuple[str, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    frames: Callable[[], tuple[tuple[str, Outline], ...]] = field(
        default=tuple, compare=False, repr=False
    )


@dataclass(frozen=True)
class Tool:
    """A function the model may call. Calling the `Tool` calls the function.

    `parameters` is the schema sent to the server; the arguments are checked against the
    function's own signature (`signature`, made from `function` unless `described` is given).
    `context` (optional) says in a line what the tool can look at now, for a small model's
    first step. `origin` names where the tool comes from when that is not nbchat or the user's
    own code ("MCP server 'github'"); the approval card and /help show it. `review` makes what
    an approval card shows besides the arguments (`Review`: a cell's diff, the code to run).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: ToolFunction = field(repr=False)
    dangerous: bool = False
    described: InitVar[ArgumentCheck | None] = None
    signature: ArgumentCheck = field(init=False, repr=False, compare=False)
    origin: str = ""
    # What the tool can look at right now ("The notebook's variables: …"), shown to a small
    # model's first step (`nbchat.tools.offer`): names, and the values code needs to name.
    context: Callable[[], Sight] | None = field(default=None, repr=False, compare=False)
    # What an approval card shows besides the arguments (a cell's diff, the code that runs).
    review: Reviewer | None = field(default=None, repr=False, compare=False)

    def __post_init__(self, described: ArgumentCheck | None) -> None:
        object.__setattr__(self, "signature", described or Signature.of(self.function))

    @classmethod
    def from_function(
        cls,
        fn: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        dangerous: bool = False,
    ) -> Tool:
        """Describe `fn`: its name, its docstring's opening and a schema of its parameters."""
        tool_name = str(name or getattr(fn, "__name__", ""))
        if not NAME_RULE.match(tool_name):
            raise ToolError(
                f"Invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' "
                "(pass name=... to choose one)."
            )
        text = describe_function(fn) if description is None else description
        signature = Signature.of(fn)
        return cls(tool_name, text, signature.schema, fn, dangerous, signature)

    def to_schema(self) -> dict[str, Any]:
        """The entry for the `tools=` list of a chat request."""
        function = {"name": self.name, "description": self.description}
        return {"type": "function", "function": {**function, "parameters": self.parameters}}

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        """Everything wrong with the model's `arguments`, one message each ([] when valid)."""
        return self.signature.problems(arguments)

    def invoke(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        """Call the function with the model's `arguments` (validated here: ToolError when they
        are wrong) and `context`, when it asks for one."""
        return self.function(**self.signature.keywords(arguments, context))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


class ToolRegistry:
    """Tools by name, in registration order. Registering a name again replaces the tool (so a
    notebook cell can be run twice)."""

    def __init__(self, tools: tuple[Tool, ...] | list[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    @overload
    def register(self, fn: ToolFunction | Tool) -> Tool: ...

    @overload
    def register(
        self,
        fn: None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        dangerous: bool = False,
    ) -> Callable[[ToolFunction], Tool]: ...

    def register(
        self,
        fn: ToolFunction | Tool | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        dangerous: bool = False,
    ) -> Tool | Callable[[ToolFunction], Tool]:
        """Register a function (or a `Tool`). Works as `@register`, `@register(name=...)` and
        `register(fn, ...)`; returns the `Tool`, which is still callable like the function."""

        def add(function: ToolFunction | Tool) -> Tool:
            if isinstance(function, Tool):
                item = function
            else:
                item = Tool.from_function(
                    function, name=name, description=description, dangerous=dangerous
                )
            self._tools[item.name] = item
            return item

        return add if fn is None else add(fn)

    def unregister(self, name: str) -> None:
        if name not in self._tools:
            raise ToolError(f"No tool named {name!r} to remove. Registered: {self._listing()}.")
        del self._tools[name]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def accepts(self, name: str, arguments: Mapping[str, Any]) -> bool:
        """Whether `name` is registered and `arguments` are valid for it (the check handed to
        the JSON tool-call fallback, which must not import the tools)."""
        found = self._tools.get(name)
        return found is not None and not found.problems(arguments)

    def sights(self, names: Collection[str]) -> list[Sight]:
        """What the tools named can look at now (`Tool.context`), skipping empty ones."""
        found = (self._tools[n].context for n in names if n in self._tools)
        return [sight for sight in (context() for context in found if context) if sight.line]

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI `tools=[{"type": "function", "function": {...}}]` list."""
        # A snapshot: the meter reads this on the kernel thread while a turn may add tools.
        return [item.to_schema() for item in list(self._tools.values())]

    def copy(self) -> ToolRegistry:
        return ToolRegistry(list(self._tools.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({self._listing()})"

    def _listing(self) -> str:
        return ", ".join(self._tools) or "none"


@overload
def tool(fn: ToolFunction) -> Tool: ...


@overload
def tool(
    fn: None = None,
    *,
    registry: ToolRegistry | None = None,
    name: str | None = None,
    description: str | None = None,
    dangerous: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    *,
    registry: ToolRegistry | None = None,
    name: str | None = None,
    description: str | None = None,
    dangerous: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make a `Tool` from a function (`@tool`, `@tool(dangerous=True)`), registering it in
    `registry` when one is given."""

    def make(function: ToolFunction) -> Tool:
        item = Tool.from_function(function, name=name, description=description, dangerous=dangerous)
        return item if registry is None else registry.register(item)

    return make if fn is None else make(fn)

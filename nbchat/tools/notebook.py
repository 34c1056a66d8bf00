"""Read-only tools over the live notebook: the user's variables, one variable, a cell, the last
error.

The chat runs inside the kernel, so the model can look at what a side-panel chat cannot: the
live objects. Everything these tools return is bounded: at most `LIST_LIMIT` names, every
answer cut to `ANSWER_LIMIT` characters, and every call into user code (a summary, a `repr`, a
DataFrame's `head()`, `str()` of an exception) made inside one bounded call per tool call
(nbchat.tools.isolation: a forked child on Linux, else a helper thread), with one deadline for
the whole call: `TIME_LIMIT`, or less when the tool call's own limit is nearer. The kernel's side
only looks up names and types with operations that run no user code (`type()`, `issubclass`,
the type's own `__module__`), so a dead `weakref.proxy`, a lying `__class__` or a key that is
not a string cannot stop it. What a listing made before its deadline is kept, and says where it
stopped. Secrets are masked in every answer (nbchat.tools.preview; values under secret-looking
names in nbchat.tools.preview). Private names (a leading underscore), modules, IPython's own
names and nbchat's own objects are hidden.

Must not: change the namespace, run cells, or import numpy/pandas (their values are recognised
by their classes in `sys.modules` and only their own methods are called).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any, Protocol

from nbchat.tools.context import ToolContext
from nbchat.tools.frames import Outline, frame_columns, frame_outline
from nbchat.tools.isolation import Outcome, Output, call_bounded
from nbchat.tools.preview import (
    MARGIN,
    cut,
    error_headline,
    format_error,
    is_secret_name,
    mask_secrets,
    preview_value,
    summarise_value,
    type_name,
)
from nbchat.tools.registry import Sight, Tool

__all__ = [
    "ANSWER_LIMIT",
    "LIST_LIMIT",
    "TIME_LIMIT",
    "Shell",
    "current_shell",
    "describe_value",
    "is_user_variable",
    "list_variables",
    "notebook_tools",
    "variable_names",
]

LIST_LIMIT = 200  # names listed at most; the rest are counted
ANSWER_LIMIT = 4000  # characters in one answer
LINE_LIMIT = 160  # characters in one listed variable's line
TIME_LIMIT = 2.0  # seconds for all the calls into user code of one tool call
NOTE_ROOM = 300  # characters kept free at the end of a listing for the line that closes it
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})
# Values that name their own module (a class, a function); any other value, through its type.
MODULE_OF: dict[type, Callable[[Any], Any]] = {
    types.FunctionType: types.FunctionType.__dict__["__module__"].__get__,
}
NO_VARIABLE = "No variable named {name!r} (list_notebook_variables lists them)."
NAMES_SHOWN = 20  # variables named to a small model's first step (`variable_names`)
# Definitions (classes, functions) are code, not data the user asks about by name.
DEFINITIONS = (type, types.FunctionType, types.BuiltinFunctionType)


class Shell(Protocol):
    """What the tools read of IPython's shell: its user namespace (with `In` and `Out`)."""

    user_ns: dict[str, Any]


def is_user_variable(name: object, value: Any) -> bool:
    """Whether `name` is one of the user's own variables (a string, not private, not a module,
    IPython's or nbchat's). Runs no user code: only `type()`, `issubclass` and the type's own
    `__module__` entry are read, never the value's attributes."""
    if type(name) is not str or name.startswith("_") or name in IPYTHON_NAMES:
        return False
    kind = type(value)
    if issubclass(kind, types.ModuleType):
        return False
    if issubclass(kind, type):
        module = type.__dict__["__module__"].__get__(value)
    elif kind in MODULE_OF:
        module = MODULE_OF[kind](value)
    else:
        module = type.__dict__["__module__"].__get__(kind)
    return type(module) is not str or not module.startswith(("nbchat", "IPython"))


def list_variables(
    namespace: dict[Any, Any],
    seconds: float = TIME_LIMIT,
    *,
    stop: threading.Event | None = None,
    fork: bool | None = None,
) -> str:
    """The user's variables, sorted by name, one bounded line each, as many as fit and as are
    summarised within `seconds`."""
    outcome = call_bounded(
        lambda out: _list_into(namespace, out),
        deadline=time.monotonic() + seconds,
        stop=stop,
        fork=fork,
    )
    lines = list(outcome.pieces)
    if outcome.ending != "done":
        where = f" at {outcome.working_on}" if outcome.working_on else ""
        lines.append(f"… the listing stopped{where}: {_why(outcome, seconds)}.")
    return cut(mask_secrets("\n".join(lines)), ANSWER_LIMIT)


def describe_value(
    name: str,
    value: Any,
    seconds: float = TIME_LIMIT,
    *,
    stop: threading.Event | None = None,
    fork: bool | None = None,
) -> str:
    """A bounded preview of one value: a DataFrame's dtypes and head(), an array's statistics,
    anything else's repr (cut), made within `seconds`; a marker under a secret-looking name."""
    outcome = call_bounded(
        lambda out: _describe_into(name, value, out),
        deadline=time.monotonic() + seconds,
        stop=stop,
        fork=fork,
    )
    pieces = list(outcome.pieces)
    if not pieces:
        pieces.append(f"{name}: (could not read it: {_why(outcome, seconds)})")
    elif len(pieces) == 1:
        pieces.append(f"(could not show its contents: {_why(outcome, seconds)})")
    return cut(mask_secrets("\n".join(pieces)), ANSWER_LIMIT)


def notebook_tools(
    shell: Shell, *, notes: Callable[[], list[str]] | None = None
) -> tuple[Tool, ...]:
    """The four read-only notebook tools, reading `shell`'s namespace when they run; `notes`
    gives lines the variables' listing ends with (the variables whose cell changed or went)."""

    def list_notebook_variables(ctx: ToolContext) -> str:
        """List the notebook's variables with their types and sizes."""
        listing = list_variables(shell.user_ns, _seconds(ctx), stop=ctx.stop)
        said = notes() if notes is not None else []
        if not said:
            return listing
        stale = "\n".join(["Set by a cell that changed or is gone:", *(f"- {n}" for n in said)])
        return cut(mask_secrets(f"{listing}\n{stale}"), ANSWER_LIMIT + len(stale) + 1)

    def describe_variable(ctx: ToolContext, name: str) -> str:
        """Show a preview of one notebook variable (type, size, first rows or repr).

        Args:
            name: the variable's name.
        """
        value = shell.user_ns.get(name, _MISSING)
        if value is _MISSING or not is_user_variable(name, value):
            return NO_VARIABLE.format(name=name)
        return describe_value(name, value, _seconds(ctx), stop=ctx.stop)

    def read_cell(ctx: ToolContext, number: int) -> str:
        """Read the source and the result of the notebook cell with this execution number.

        Args:
            number: the cell's execution count, as in In [number]; -1 for the newest cell
                run, -2 for the one before it.
        """
        return _cell(shell.user_ns, number, ctx)

    def last_error(ctx: ToolContext) -> str:
        """Show the last exception raised in the notebook, with its traceback."""
        return _last_error(ctx)

    listing = dataclasses.replace(
        Tool.from_function(list_notebook_variables),
        context=lambda: variable_names(shell.user_ns),
    )
    others = (describe_variable, read_cell, last_error)
    return (listing, *(Tool.from_function(function) for function in others))


def variable_names(namespace: dict[Any, Any], limit: int = NAMES_SHOWN) -> Sight:
    """What a small model's first step is told of the notebook: "The notebook's variables:
    sales (DataFrame: region, units), threshold (int)." (at most `limit`, enough for it to
    know `sales` is one and what "the revenue" may be a column of), those names and columns,
    and the outline of the first `FRAMES_OUTLINED` DataFrames for code written over them
    (`nbchat.tools.frames`), read when asked (`Sight.frames`). Runs no user code
    (`is_user_variable`, `type()`, pandas' own methods on an exact DataFrame); an empty line
    when there are none."""
    found = sorted(
        (
            (name, value, type(value).__name__, frame_columns(value))
            for name, value in list(namespace.items())
            if is_user_variable(name, value) and not issubclass(type(value), DEFINITIONS)
        ),
        key=lambda found: str(found[0]),  # names are unique: values are never compared
    )
    if not found:
        return Sight("")
    shown = found[:limit]
    more = f" and {len(found) - limit} more" if len(found) > limit else ""
    listed = ", ".join(
        f"{name} ({kind}: {', '.join(columns)})" if columns else f"{name} ({kind})"
        for name, _, kind, columns in shown
    )
    frames = [(name, value) for name, value, _, columns in shown if columns]

    def outline_frames() -> tuple[tuple[str, Outline], ...]:
        outlines = (
            (name, frame_outline(name, value)) for name, value in frames if not is_secret_name(name)
        )
        outlined = itertools.islice(((n, o) for n, o in outlines if o is not None), FRAMES_OUTLINED)
        return tuple((name, _masked(outline)) for name, outline in outlined)

    return Sight(
        f"The notebook's variables: {listed}{more}.",
        tuple(name for name, _, _, _ in shown),
        tuple((column, name) for name, _, _, columns in shown for column in columns),
        outline_frames,
    )


def _masked(outline: Outline) -> Outline:
    """`outline` with what looks like a secret masked in its line and out of its values."""
    line = mask_secrets(outline.line)
    return Outline(line, tuple(value for value in outline.values if repr(value) in line))


FRAMES_OUTLINED = 8  # DataFrames outlined for code (`Sight.frames`), in name order


_MISSING = object()


def current_shell() -> Shell | None:
    """IPython's shell when this runs in a kernel, else None (a plain script)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell: Shell | None = get_ipython()
    return shell


def _seconds(ctx: ToolContext) -> float:
    """The tool call's time for user code: `TIME_LIMIT`, or what is left of its own limit."""
    return max(0.0, min(TIME_LIMIT, ctx.remaining()))


def _why(outcome: Outcome, seconds: float) -> str:
    if outcome.ending == "timed out":
        return f"it took longer than {seconds:.2g} s"
    if outcome.ending == "refused":
        return "earlier previews are still running (previews resume once they finish)"
    if outcome.ending == "stopped":
        return "stopped by the user"
    return outcome.error or "it ended without an answer"


def _user_items(namespace: dict[Any, Any]) -> tuple[list[tuple[str, Any]], int]:
    """The user's variables sorted by name, and how many entries were skipped because their
    name is not a string. A copy first: the kernel may run a cell (and add names) meanwhile."""
    found = []
    skipped = 0
    for name, value in list(namespace.items()):
        if type(name) is not str:
            skipped += 1
        elif is_user_variable(name, value):
            found.append((name, value))
    found.sort(key=lambda item: item[0])
    return found, skipped


def _list_into(namespace: dict[Any, Any], out: Output) -> None:
    """The listing's lines, one variable at a time (runs in the bounded call)."""
    found, skipped = _user_items(namespace)
    if not found:
        out.add("The notebook has no variables of its own yet.")
    room = ANSWER_LIMIT - NOTE_ROOM
    shown = 0
    for name, value in found[:LIST_LIMIT]:
        out.doing(name)
        line = cut(f"{name}: {_summary(name, value)}", LINE_LIMIT)
        room -= len(line) + 1
        if room < 0:
            break
        out.add(line)
        shown += 1
    out.doing("")
    if shown < len(found):
        out.add(f"… and {len(found) - shown:,} more (describe_variable shows one).")
    if skipped:
        entries = "entry" if skipped == 1 else "entries"
        out.add(f"({skipped:,} {entries} of the namespace skipped: not named by a string.)")


def _summary(name: str, value: Any) -> str:
    """One variable's summary; a summary that fails says so instead of ending the listing."""
    try:
        return summarise_value(value, secret=is_secret_name(name))
    except Exception as exc:
        return f"{type_name(type(value))} (no summary: {type(exc).__name__})"


def _describe_into(name: str, value: Any, out: Output) -> None:
    """The header line, then the contents (runs in the bounded call)."""
    secret = is_secret_name(name)
    out.add(f"{name}: {summarise_value(value, secret=secret)}")
    out.add(preview_value(value, secret=secret))


def _cell(namespace: dict[str, Any], number: int, ctx: ToolContext) -> str:
    inputs = namespace.get("In")
    if number < 0 and type(inputs) is list:  # counted back from the newest run
        number += len(inputs)
    if type(inputs) is not list or not 0 < number < len(inputs):
        return f"There is no cell In [{number}] in this kernel's history."
    source = inputs[number] if type(inputs[number]) is str else ""
    shown = cut(mask_secrets(source[: ANSWER_LIMIT // 2 + MARGIN]), ANSWER_LIMIT // 2)
    if len(source) > ANSWER_LIMIT // 2 + MARGIN:
        shown += f" [... {len(source) - ANSWER_LIMIT // 2:,} characters of the cell cut]"
    outputs = namespace.get("Out")
    if type(outputs) is dict and number in outputs:
        result = describe_value(f"Out[{number}]", outputs[number], _seconds(ctx), stop=ctx.stop)
    else:
        result = f"Out[{number}]: (no result value; printed output is not kept by the kernel)"
    return cut(f"In [{number}]:\n{shown}\n{result}", ANSWER_LIMIT)


def _last_error(ctx: ToolContext) -> str:
    error = getattr(sys, "last_value", None)
    if error is None:
        return "No error has been raised in this notebook yet."
    seconds = _seconds(ctx)
    outcome = call_bounded(
        lambda out: _error_into(error, out),
        deadline=time.monotonic() + seconds,
        stop=ctx.stop,
    )
    if len(outcome.pieces) == 2:
        return mask_secrets(outcome.pieces[1])
    if outcome.pieces:  # the frames without the messages: reading a message is what hung
        note = f"\n(The messages could not be read: {_why(outcome, seconds)}.)"
        return mask_secrets(outcome.pieces[0]) + note
    kind = type_name(type(error))
    return (
        f"The last error is a {kind}; its traceback could not be shown: {_why(outcome, seconds)}."
    )


def _error_into(error: BaseException, out: Output) -> None:
    """The headline and traceback without the messages (no user code), then with them
    (`str()` of each exception is user code, and may hang)."""
    bare = error_headline(error, messages=False)
    out.add(bare + format_error(error, ANSWER_LIMIT - len(bare), messages=False))
    headline = error_headline(error)
    out.add(headline + format_error(error, ANSWER_LIMIT - len(headline)))

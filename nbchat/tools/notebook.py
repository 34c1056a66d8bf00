"""Read-only tools over the live notebook: the user's variables, one variable, a cell, the last
error.

The chat runs inside the kernel, so the model can look at what a side-panel chat cannot: the
live objects. Everything these tools return is bounded: at most `LIST_LIMIT` names, every
answer cut to `ANSWER_LIMIT` characters, and every call into user code (a `repr`, a DataFrame's
`head()`, an array's statistics) made on a helper thread with a time limit, so a huge or slow
`repr` cannot freeze the chat. A `repr` that never returns leaves its helper thread behind (a
thread cannot be killed); while `STUCK_LIMIT` of them are still running, previews are refused.
Private names (a leading underscore), modules, IPython's own names and nbchat's own objects
are hidden.

Must not: change the namespace, run cells, or import numpy/pandas (their values are recognised
by their type's module and only their own methods are called).
"""

from __future__ import annotations

import reprlib
import sys
import threading
import traceback
import types
from collections.abc import Callable
from typing import Any, Protocol

from nbchat.tools.registry import Tool

__all__ = [
    "ANSWER_LIMIT",
    "LIST_LIMIT",
    "TIME_LIMIT",
    "Shell",
    "call_bounded",
    "describe_value",
    "is_user_variable",
    "current_shell",
    "list_variables",
    "notebook_tools",
    "summarise_value",
]

LIST_LIMIT = 200  # names listed at most; the rest are counted
ANSWER_LIMIT = 4000  # characters in one answer
LINE_LIMIT = 160  # characters in one listed variable's line
TIME_LIMIT = 2.0  # seconds for one call into user code
STUCK_LIMIT = 2  # previews still running after their time limit, before new ones are refused
SAMPLE_LIMIT = 100_000  # array elements the statistics are computed over at most
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})
SIZED = (list, tuple, dict, set, frozenset, str, bytes, bytearray)
DEFINED = (type, types.FunctionType)  # values that name their own module

_stuck = threading.BoundedSemaphore(STUCK_LIMIT)


class Shell(Protocol):
    """What the tools read of IPython's shell: its user namespace (with `In` and `Out`)."""

    user_ns: dict[str, Any]


class PreviewTimeoutError(Exception):
    """A call into user code ran past its time limit (its thread is left to finish)."""


def call_bounded(fn: Callable[[], str], seconds: float = TIME_LIMIT) -> str:
    """`fn()` on a helper thread, waited for at most `seconds`."""
    if not _stuck.acquire(blocking=False):
        raise PreviewTimeoutError("earlier previews are still running")
    result: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # user code may raise anything; it is reported
            result["error"] = exc
        finally:
            done.set()
            _stuck.release()

    threading.Thread(target=run, name="nbchat-preview", daemon=True).start()
    if not done.wait(seconds):
        raise PreviewTimeoutError(f"it took longer than {seconds:g} s")
    if "error" in result:
        raise result["error"]
    return str(result["value"])


def is_user_variable(name: str, value: Any) -> bool:
    """Whether `name` is one of the user's own variables (not private, a module, IPython's or
    nbchat's)."""
    if name.startswith("_") or name in IPYTHON_NAMES or isinstance(value, types.ModuleType):
        return False
    # A class or function says where it was defined; any other value, through its type. Only
    # attributes of `type` objects are read: an instance's own __getattr__ is never called.
    owner = value if isinstance(value, DEFINED) else type(value)
    module = str(type.__getattribute__(owner, "__module__") or "")
    return not module.startswith(("nbchat", "IPython"))


def summarise_value(value: Any) -> str:
    """One cheap line: the type, and a length, shape, dtype or columns where the type is known.
    Calls no user code (only builtins' `len` and numpy/pandas attributes)."""
    kind = type(value)
    name, module = kind.__name__, kind.__module__ or ""
    if kind in SIZED:  # the exact builtin: a subclass's __len__ is user code
        return f"{name}, length {len(value):,}"
    if isinstance(value, bool | int | float | complex) or value is None:
        return f"{name} = {_short(value)}"
    if module.split(".")[0] not in ("numpy", "pandas"):
        return name
    parts = [name]
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        parts.append("shape " + "×".join(f"{n:,}" for n in shape))
    if hasattr(value, "dtype"):
        parts.append(f"dtype {value.dtype}")
    if hasattr(value, "columns"):
        columns = [str(c) for c in list(value.columns[:8])]
        more = len(value.columns) - len(columns)
        parts.append("columns " + ", ".join(columns) + (f" (+{more:,} more)" if more > 0 else ""))
    return ", ".join(parts)


def list_variables(namespace: dict[str, Any]) -> str:
    """The user's variables, sorted by name, one bounded line each, as many as fit."""
    found = sorted(_user_items(namespace), key=lambda item: item[0])
    if not found:
        return "The notebook has no variables of its own yet."
    lines: list[str] = []
    room = ANSWER_LIMIT - 80  # what is left for the closing "… and N more" line
    for name, value in found[:LIST_LIMIT]:
        line = _cut(f"{name}: {summarise_value(value)}", LINE_LIMIT)
        room -= len(line) + 1
        if room < 0:
            break
        lines.append(line)
    if len(lines) < len(found):
        lines.append(f"… and {len(found) - len(lines):,} more (describe_variable shows one).")
    return "\n".join(lines)


def describe_value(name: str, value: Any, seconds: float = TIME_LIMIT) -> str:
    """A bounded preview of one value: a DataFrame's dtypes and head(), an array's statistics,
    anything else's repr (cut), under a time limit."""
    header = f"{name}: {summarise_value(value)}"
    try:
        body = call_bounded(lambda: _preview(value), seconds)
    except PreviewTimeoutError as exc:
        body = f"(could not show its contents: {exc})"
    except Exception as exc:
        body = f"(could not show its contents: {type(exc).__name__}: {_short(exc)})"
    return _cut(f"{header}\n{body}", ANSWER_LIMIT)


def notebook_tools(shell: Shell) -> tuple[Tool, ...]:
    """The four read-only notebook tools, reading `shell`'s namespace when they run."""

    def list_notebook_variables() -> str:
        """List the notebook's variables with their types and sizes."""
        return list_variables(shell.user_ns)

    def describe_variable(name: str) -> str:
        """Show a preview of one notebook variable (type, size, first rows or repr).

        Args:
            name: the variable's name.
        """
        value = shell.user_ns.get(name, _MISSING)
        if value is _MISSING or not is_user_variable(name, value):
            return f"No variable named {name!r} (list_notebook_variables lists them)."
        return describe_value(name, value)

    def read_cell(number: int) -> str:
        """Read the source and the result of the notebook cell with this execution number.

        Args:
            number: the cell's execution count, as in In [number].
        """
        return _cell(shell.user_ns, number)

    def last_error() -> str:
        """Show the last exception raised in the notebook, with its traceback."""
        return _last_error()

    functions = (list_notebook_variables, describe_variable, read_cell, last_error)
    return tuple(Tool.from_function(function) for function in functions)


_MISSING = object()


class _LimitedRepr(reprlib.Repr):
    """reprlib's bounded repr, except that a `repr` that raises is reported, not disguised as
    `<X instance at 0x…>`."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = ANSWER_LIMIT
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 30

    def repr_instance(self, x: Any, level: int) -> str:
        return _cut(repr(x), self.maxother)


_LIMITED = _LimitedRepr()


def current_shell() -> Shell | None:
    """IPython's shell when this runs in a kernel, else None (a plain script)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell: Shell | None = get_ipython()
    return shell


def _user_items(namespace: dict[str, Any]) -> list[tuple[str, Any]]:
    # A copy first: the kernel may run a cell (and add names) while the chat reads. Instances
    # of one type share the answer, so it is worked out once per type.
    by_type: dict[type, bool] = {}
    found = []
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in IPYTHON_NAMES:
            continue
        kind = type(value)
        if isinstance(value, DEFINED):
            keep = is_user_variable(name, value)
        elif kind in by_type:
            keep = by_type[kind]
        else:
            keep = by_type[kind] = is_user_variable(name, value)
        if keep:
            found.append((name, value))
    return found


def _preview(value: Any) -> str:
    kind = type(value)
    module = (kind.__module__ or "").split(".")[0]
    if module == "pandas" and hasattr(value, "head"):
        dtypes = getattr(value, "dtypes", None)
        head = value.head(5).to_string(max_cols=20, max_colwidth=40)
        typed = "" if dtypes is None else f"dtypes:\n{dtypes.head(30).to_string()}\n"
        return f"{typed}head():\n{head}"
    if module == "numpy" and hasattr(value, "ravel") and hasattr(value, "dtype"):
        return _array_statistics(value)
    return _LIMITED.repr(value)


def _array_statistics(array: Any) -> str:
    flat = array.ravel()
    if flat.size == 0 or array.dtype.kind not in "biuf":
        return reprlib.repr(array)
    step = max(1, flat.size // SAMPLE_LIMIT)
    sample = flat[::step]
    scope = "all" if step == 1 else f"every {step:,}th of the {flat.size:,}"
    return (
        f"statistics over {scope} elements: min {sample.min()}, max {sample.max()}, "
        f"mean {sample.mean():.6g}\nfirst elements: {reprlib.repr(flat[:10].tolist())}"
    )


def _cell(namespace: dict[str, Any], number: int) -> str:
    inputs = namespace.get("In")
    if not isinstance(inputs, list) or not 0 < number < len(inputs):
        return f"There is no cell In [{number}] in this kernel's history."
    source = _cut(str(inputs[number]), ANSWER_LIMIT // 2)
    outputs = namespace.get("Out")
    if isinstance(outputs, dict) and number in outputs:
        result = describe_value(f"Out[{number}]", outputs[number])
    else:
        result = f"Out[{number}]: (no result value; printed output is not kept by the kernel)"
    return _cut(f"In [{number}]:\n{source}\n{result}", ANSWER_LIMIT)


def _last_error() -> str:
    error = getattr(sys, "last_value", None)
    if error is None:
        return "No error has been raised in this notebook yet."
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    text = "".join(lines)
    if len(text) <= ANSWER_LIMIT:
        return text
    # The end names the error and where it was raised: keep more of it than of the start.
    marker = f"\n[... {len(text) - ANSWER_LIMIT:,} characters cut ...]\n"
    head = ANSWER_LIMIT // 4
    tail = ANSWER_LIMIT - head - len(marker)
    return f"{text[:head]}{marker}{text[-tail:]}"


def _short(value: Any) -> str:
    try:
        return _cut(str(value), 80)
    except (ValueError, RecursionError):  # e.g. an int too long to convert to text
        return f"<a {type(value).__name__} too large to show>"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f" [... {len(text) - limit:,} characters cut]"
    return text[: max(0, limit - len(marker))] + marker

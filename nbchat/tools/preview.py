"""The text of a preview: one value's one-line summary, its bounded repr, an array's statistics,
a DataFrame's head, an exception's traceback; each cut to a size, none copying a big value.

These run inside a bounded call (nbchat.tools.isolation), which bounds the user code they reach
(a `repr`, pandas' formatting, `str()` of an exception). They still reach as little as they can:
a value's type is read with `type()` and `issubclass`, never `isinstance` (which asks the value
for its `__class__`, a property a class can override); builtins get their own base methods
(`int.__repr__`, not a subclass's `__str__`); numpy and pandas values are recognised by their
real classes, taken from `sys.modules`, not by the module a type claims; a big `bytes`, string,
dict or array is sliced or sampled, never copied whole or sorted.

Values under secret-looking names (the variable's, or a dict key's) are replaced by a marker;
the caller masks what looks like a secret in the finished text (nbchat.tools.masking).

Must not: import numpy or pandas (a value of theirs means they are imported already), or know
about tools and namespaces.
"""

from __future__ import annotations

import builtins
import itertools
import reprlib
import sys
import traceback
import types
from typing import Any

from nbchat.tools.masking import NAME_MARK, is_secret_name, mask_secrets

__all__ = ["cut", "format_error", "preview_value", "summarise_value"]

TEXT_LIMIT = 4000  # characters of one repr or message
ITEMS = 30  # items of a list, dict or set shown
SAMPLE_LIMIT = 100_000  # array elements the statistics are computed over at most
BIG_INT_BITS = 14_000  # ints above this (about 4,200 digits) are described, not converted
MARGIN = 256  # characters read past a cut, so a secret across it is still recognised whole
FRAMES = 30  # traceback frames kept from the end of each exception in a chain
CHAIN = 100  # exceptions followed through __cause__ and __context__
BUDGET = 2 * TEXT_LIMIT  # characters one repr makes before the rest is shown as "..."
CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
SIZED = (list, tuple, dict, set, frozenset, str, bytes, bytearray)
NUMBERS = (bool, int, float, complex)
CODE = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def type_name(kind: type) -> str:
    """A type's own `__name__` (not a metaclass property's idea of it)."""
    name = type.__dict__["__name__"].__get__(kind)
    return name if type(name) is str else "?"


def summarise_value(value: Any, *, secret: bool = False) -> str:
    """One cheap line: the type, and a length, shape, dtype, columns or (unless `secret`) the
    number, where the type is known."""
    kind = type(value)
    name = type_name(kind)
    if kind in SIZED:  # the exact builtin: a subclass's __len__ is user code
        return f"{name}, length {len(value):,}"
    if value is None or issubclass(kind, NUMBERS):
        return f"{name} = {NAME_MARK if secret else _number(value)}"
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    if numpy is not None and issubclass(kind, numpy.ndarray):
        shape = numpy.ndarray.shape.__get__(value)
        dtype = numpy.ndarray.dtype.__get__(value)
        return f"{name}, shape {_shape(shape)}, dtype {cut(str(dtype), 60)}"
    if pandas is not None and issubclass(kind, pandas.DataFrame | pandas.Series):
        parts = [name, f"shape {_shape(value.shape)}"]
        if issubclass(kind, pandas.DataFrame):
            labels = [_label(label) for label in itertools.islice(value.columns, 8)]
            more = len(value.columns) - len(labels)
            parts.append(f"columns {', '.join(labels)}" + (f" (+{more:,} more)" if more else ""))
        else:
            parts.append(f"dtype {value.dtype}")
        return ", ".join(parts)
    return name


def preview_value(value: Any, *, secret: bool = False) -> str:
    """A bounded look inside a value: a DataFrame's dtypes and head(), an array's statistics,
    anything else's repr, cut; only a marker under a secret-looking name."""
    kind = type(value)
    if secret and not issubclass(kind, CODE):
        return NAME_MARK
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    if pandas is not None and issubclass(kind, pandas.DataFrame | pandas.Series):
        head = value.head(5).to_string(max_cols=20, max_colwidth=40)
        dtypes = value.dtypes.head(30).to_string() if issubclass(kind, pandas.DataFrame) else ""
        return (f"dtypes:\n{dtypes}\n" if dtypes else "") + f"head():\n{head}"
    if numpy is not None and issubclass(kind, numpy.ndarray):
        return _array_statistics(value)
    return _BoundedRepr().repr(value)


def format_error(error: BaseException, limit: int, *, messages: bool = True) -> str:
    """The traceback of `error` and its causes, as Python prints it, in at most `limit`
    characters: each message and source line is cut before it is joined, so a 100 MB message
    is never copied, and the end (the error itself) is kept over the start. Without
    `messages`, only each exception's type is named (`str()` of an exception is user code)."""
    parts: list[str] = []
    for current, after in _chain(error):
        frames = traceback.extract_tb(current.__traceback__, limit=-FRAMES)
        if frames:
            parts.append("Traceback (most recent call last):\n")
            parts += [cut(line, 400) + "\n" for line in traceback.format_list(frames)]
        line = _error_line(current) if messages else _qualified_name(type(current))
        parts += [line, "\n", after]
    return cut_middle(mask_secrets("".join(parts)), limit)


def cut(text: str, limit: int) -> str:
    """`text`, or its start and a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    marker = f" [... {len(text) - limit:,} characters cut]"
    return text[: max(0, limit - len(marker))] + marker


def cut_middle(text: str, limit: int) -> str:
    """`text`, or a quarter of `limit` from its start and the rest from its end: the end of a
    traceback names the error and where it was raised."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit:,} characters cut ...]\n"
    head = limit // 4
    return f"{text[:head]}{marker}{text[-(limit - head - len(marker)) :]}"


def _number(value: Any) -> str:
    """A number's text by its base type's repr (a subclass's __str__ is user code)."""
    kind = type(value)
    if value is None or kind is bool:
        return builtins.repr(value)
    if issubclass(kind, int):
        bits = int.bit_length(value)
        return f"<an int of {bits:,} bits>" if bits > BIG_INT_BITS else cut(int.__repr__(value), 80)
    base = float if issubclass(kind, float) else complex
    return cut(base.__repr__(value), 80)


def _shape(shape: Any) -> str:
    return "×".join(f"{n:,}" if type(n) is int else "?" for n in tuple(shape)[:8])


def _label(label: Any) -> str:
    """A column label as text when it is a plain string or number, else its type."""
    if type(label) is str:
        return cut(label, 40)
    if type(label) in NUMBERS:
        return _number(label)
    return f"<{type_name(type(label))}>"


def _array_statistics(array: Any) -> str:
    """min, max and mean over at most SAMPLE_LIMIT elements taken at a stride through the
    array's flat iterator: a sample is copied, never the array (ravel() copies a transposed
    one whole)."""
    flat = array.flat
    size = int(array.size)
    if size == 0 or array.dtype.kind not in "biuf":
        return f"first elements: {_BoundedRepr().repr(flat[:10].tolist())}"
    step = max(1, size // SAMPLE_LIMIT)
    sample = flat[::step]
    scope = "all" if step == 1 else f"every {step:,}th of the {size:,}"
    return (
        f"statistics over {scope} elements: min {sample.min()}, max {sample.max()}, "
        f"mean {sample.mean():.6g}\nfirst elements: {reprlib.repr(flat[:10].tolist())}"
    )


def _chain(error: BaseException) -> list[tuple[BaseException, str]]:
    """The exceptions Python prints for `error`, its first cause first, each with the sentence
    printed after it (the link to the next)."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    after = ""
    while current is not None and id(current) not in seen and len(chain) < CHAIN:
        seen.add(id(current))
        chain.append((current, after))
        if current.__cause__ is not None:
            current, after = current.__cause__, CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, after = current.__context__, CONTEXT
        else:
            current = None
    return chain[::-1]


def _error_line(error: BaseException) -> str:
    """`module.Type: message`, the message cut (and masked) before it is joined."""
    qualified = _qualified_name(type(error))
    message = str(error)
    shown = mask_secrets(message[: TEXT_LIMIT + MARGIN])[:TEXT_LIMIT]
    if len(message) > TEXT_LIMIT:
        shown += f" [... {len(message) - TEXT_LIMIT:,} characters of the message cut]"
    return f"{qualified}: {shown}" if message else qualified


def _qualified_name(kind: type) -> str:
    """`module.Type` as a traceback names an exception's type (builtins' without module)."""
    module = type.__dict__["__module__"].__get__(kind)
    name = type_name(kind)
    return name if module in ("builtins", "__main__") else f"{module}.{name}"


class _BoundedRepr(reprlib.Repr):
    """reprlib's bounded repr, with what it lacks: bytes are sliced (not copied and quadrupled),
    dicts and sets are not sorted (a copy of every key), huge ints are described, a `repr`
    that raises is reported (not disguised as `<X instance at 0x…>`), and a dict entry under a
    secret-looking key shows a marker."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = TEXT_LIMIT
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = ITEMS
        self.spent = 0

    def repr1(self, x: Any, level: int) -> str:
        if self.spent > BUDGET:  # a wide, deep or shared structure: enough has been shown
            return "..."
        shown = super().repr1(x, level)
        self.spent += len(shown)
        return shown

    def repr_str(self, x: str, level: int) -> str:
        shown = mask_secrets(x[: self.maxstring + MARGIN])[: self.maxstring]
        return builtins.repr(shown) + _rest(len(x), "characters")

    def repr_bytes(self, x: bytes, level: int) -> str:
        return builtins.repr(x[: self.maxstring]) + _rest(len(x), "bytes")

    def repr_bytearray(self, x: bytearray, level: int) -> str:
        return builtins.repr(x[: self.maxstring]) + _rest(len(x), "bytes")

    def repr_int(self, x: int, level: int) -> str:
        return _number(x)

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        entries = []
        for key, value in itertools.islice(x.items(), self.maxdict):
            secret = type(key) is str and is_secret_name(key)
            shown = f"'{NAME_MARK}'" if secret else self.repr1(value, level - 1)
            entries.append(f"{self.repr1(key, level - 1)}: {shown}")
        more = ", ..." if len(x) > self.maxdict else ""
        return "{" + ", ".join(entries) + more + "}"

    def repr_set(self, x: set[Any], level: int) -> str:
        return self._unsorted(x, level, "{", "}") if x else "set()"

    def repr_frozenset(self, x: frozenset[Any], level: int) -> str:
        return self._unsorted(x, level, "frozenset({", "})") if x else "frozenset()"

    def _unsorted(self, x: set[Any] | frozenset[Any], level: int, left: str, right: str) -> str:
        if level <= 0:
            return left + "..." + right
        items = [self.repr1(item, level - 1) for item in itertools.islice(x, self.maxset)]
        return left + ", ".join(items) + (", ..." if len(x) > self.maxset else "") + right

    def repr_instance(self, x: Any, level: int) -> str:
        return cut(builtins.repr(x), self.maxother)


def _rest(size: int, unit: str) -> str:
    """How much of a long string or bytes value the preview leaves out."""
    return f" [... {size - TEXT_LIMIT:,} more {unit}]" if size > TEXT_LIMIT else ""

"""Python expressions in the user's words, evaluated by a restricted interpreter for a small
model to state.

Asked what `len([1, 2, 3])` returns, a 1.5B model answered 4: it recalls what code gives, it
does not run it. So, as the arithmetic in a message is worked out (`nbchat.tools.arithmetic`),
an expression the user asks about ("what does `sorted('banana')` give", "what is
[1, 2, 3][::-1] in python") is evaluated here and its value, or the exception it raises, told to
the model before it answers ("Evaluated by code: len([1, 2, 3]) → 3").

Nothing of the user's runs and nothing is imported: the expression is parsed (`ast`, at most
`MAX_CHARS` characters) and walked by this module, which knows literals (numbers, strings,
lists, tuples, sets, dicts), operators, comparisons, indexing and slicing, a fixed set of pure
builtins (`FUNCTIONS`) and of methods of str, list and dict (`METHODS`). A name it does not know,
an attribute, a lambda, a comprehension: not evaluated. Every value made is bounded
(`MAX_ITEMS` items in all, strings of `MAX_ITEMS` characters, integers of `MAX_INT_BITS` bits,
powers up to `MAX_EXPONENT`), checked before the operation that would make it larger, so no
expression takes long or much memory.

What counts as an expression asked about: the text in backticks, or what follows "what does",
"what is", "what's", "what would", "evaluate", "the result of", "the output of" up to "return",
"give", "evaluate to", "print", "output", "be", "in python" or the question mark; and only one
that holds Python beyond arithmetic (a call, a bracket, a quote, `//`, `%`, `**`, a comparison),
since plain arithmetic is `nbchat.tools.arithmetic`'s. One linear scan of the message's first
`MESSAGE_SCAN` characters.

Pure: no I/O.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Collection
from typing import Any, cast

__all__ = ["evaluate_asked"]

MESSAGE_SCAN = 2_000
MAX_CHARS = 200  # of one expression
MAX_FOUND = 2
MAX_ITEMS = 10_000  # items of all containers in one value, or characters of one string
MAX_INT_BITS = 4_000
MAX_EXPONENT = 1_000
MAX_DEPTH = 40  # of the expression's tree
SHOWN_CHARS = 300  # of a value's repr, told

BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
ASKED = re.compile(
    r"\b(?:what\s+(?:does|do|is|would|will)|what['’]?s|evaluate|(?:the\s+)?(?:result|output|value)"
    r"\s+of)\s+(?P<expression>[^?\n]{1,200}?)"
    r"(?=\s+(?:return|returns|give|gives|evaluate|evaluates|print|prints|output|outputs|be|equal|"
    r"equals|do|produce|produces)\b|\s+in\s+python\b|\s*\?|\s*$)",
    re.IGNORECASE,
)
# Python beyond arithmetic: a call, a bracket, a quote, `//`, `%`, `**`, a comparison.
PYTHON_SYNTAX = re.compile(r"[\[\]{}'\"]|\w\(|//|%|\*\*|==|!=|<=|>=|\bin\b|\bnot\b")


class _NotEvaluated(Exception):
    """The expression uses what this interpreter does not know, or would grow past a bound."""


class _Raised(Exception):
    """An operation of the expression raised, as Python itself would: `error` is what."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _apply(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`function(*args, **kwargs)`, an operation of the expression: what it raises is the
    expression's own error (`_Raised`), told as such; anything else this module raises is not."""
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        raise _Raised(exc) from exc


def evaluate_asked(text: str) -> list[str]:
    """ "len([1, 2, 3]) → 3" (or "… raises IndexError: list index out of range") for each
    expression `text` asks about that this interpreter can evaluate, at most `MAX_FOUND`."""
    scanned = text[:MESSAGE_SCAN]
    candidates = [m.group(1) for m in BACKTICKED.finditer(scanned)]
    candidates += [m.group("expression") for m in ASKED.finditer(scanned)]
    told: list[str] = []
    for candidate in dict.fromkeys(c.strip().strip("`").rstrip(".,;:") for c in candidates):
        if PYTHON_SYNTAX.search(candidate) is None:
            continue
        said = _evaluated(candidate)
        if said:
            told.append(said)
        if len(told) == MAX_FOUND:
            break
    return told


def _evaluated(source: str) -> str:
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    if _depth(tree) > MAX_DEPTH:
        return ""
    try:
        value = _Interpreter().run(tree.body)
    except _Raised as raised:  # the expression's own error, as Python raises it
        error = raised.error
        return f"{source} raises {type(error).__name__}: {error}"[: SHOWN_CHARS + len(source)]
    except Exception:  # _NotEvaluated, or a case this interpreter does not handle: say nothing
        return ""
    shown = repr(value)
    if len(shown) > SHOWN_CHARS:
        shown = shown[:SHOWN_CHARS] + "…"
    return f"{source} → {shown}"


def _depth(node: ast.AST, depth: int = 0) -> int:
    if depth > MAX_DEPTH:
        return depth
    children = list(ast.iter_child_nodes(node))
    return max((_depth(child, depth + 1) for child in children), default=depth)


BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
# The values this interpreter makes and takes: nothing with a method of the user's.
VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))
COLLECTIONS: tuple[type, ...] = (list, tuple, set, frozenset, *VIEWS)
PLAIN: tuple[type, ...] = (int, float, complex, str, bool, type(None), dict, range, *COLLECTIONS)
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "sum": sum,
    "min": min,
    "max": max,
    "sorted": sorted,
    "reversed": lambda value: list(reversed(value)),
    "abs": abs,
    "round": round,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "list": list,
    "tuple": tuple,
    "set": set,
    "dict": dict,
    "range": range,
    "any": any,
    "all": all,
    "enumerate": lambda *args: list(enumerate(*args)),
    "zip": lambda *args: list(zip(*args, strict=False)),
    "divmod": divmod,
    "chr": chr,
    "ord": ord,
    "bin": bin,
    "hex": hex,
    "oct": oct,
    "repr": repr,
}
_STR_METHODS = """
upper lower title capitalize swapcase casefold strip lstrip rstrip split rsplit splitlines join
replace startswith endswith find rfind count index rindex isdigit isalpha isalnum isspace isupper
islower istitle isnumeric isdecimal zfill center ljust rjust partition rpartition removeprefix
removesuffix
"""
METHODS: dict[type, frozenset[str]] = {
    str: frozenset(_STR_METHODS.split()),
    list: frozenset({"index", "count", "copy"}),
    tuple: frozenset({"index", "count"}),
    dict: frozenset({"keys", "values", "items", "get", "copy"}),
}
# Arguments that say how large a result is: bounded before the call.
WIDTH_METHODS = frozenset({"zfill", "center", "ljust", "rjust"})


class _Interpreter:
    def run(self, node: ast.expr) -> Any:
        value = self._value(node)
        _check(value)
        return value

    def _value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, PLAIN):
                raise _NotEvaluated
            return node.value
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = [self.run(item) for item in node.elts if not isinstance(item, ast.Starred)]
            if len(items) != len(node.elts):
                raise _NotEvaluated
            made = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
            return self._checked(made)
        if isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):
                raise _NotEvaluated
            pairs = [
                (self.run(key), self.run(value))
                for key, value in zip(node.keys, node.values, strict=True)
                if key is not None
            ]
            return self._checked(dict(pairs))
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            left, right = self.run(node.left), self.run(node.right)
            _before_binary(node.op, left, right)
            return self._checked(_apply(BINARY[type(node.op)], left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
            return self._checked(_apply(UNARY[type(node.op)], self.run(node.operand)))
        if isinstance(node, ast.BoolOp):
            result = self.run(node.values[0])
            for value in node.values[1:]:
                if isinstance(node.op, ast.And) and not result:
                    break
                if isinstance(node.op, ast.Or) and result:
                    break
                result = self.run(value)
            return result
        if isinstance(node, ast.Compare):
            left = self.run(node.left)
            for comparison, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.run(right_node)
                if type(comparison) not in COMPARE:
                    raise _NotEvaluated
                if not _apply(COMPARE[type(comparison)], left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.run(node.body if self.run(node.test) else node.orelse)
        if isinstance(node, ast.Subscript):
            value, index = self.run(node.value), self._index(node.slice)
            return self._checked(_apply(operator.getitem, value, index))
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Name) and node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        raise _NotEvaluated

    def _index(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return _apply(slice, *(None if part is None else self.run(part) for part in parts))
        return self.run(node)

    def _call(self, node: ast.Call) -> Any:
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise _NotEvaluated
        args = [self.run(arg) for arg in node.args]
        if any(keyword.arg is None for keyword in node.keywords):
            raise _NotEvaluated
        kwargs = {str(keyword.arg): self.run(keyword.value) for keyword in node.keywords}
        if isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
            if node.func.id == "range" and len(_apply(range, *args)) > MAX_ITEMS:
                raise _NotEvaluated
            return self._checked(_apply(FUNCTIONS[node.func.id], *args, **kwargs))
        if isinstance(node.func, ast.Attribute):
            owner = self.run(node.func.value)
            name = node.func.attr
            if name not in METHODS.get(type(owner), frozenset()):
                raise _NotEvaluated
            _before_method(owner, name, args)
            return self._checked(_apply(getattr(owner, name), *args, **kwargs))
        raise _NotEvaluated

    @staticmethod
    def _checked(value: Any) -> Any:
        _check(value)
        return value


def _before_method(owner: Any, name: str, args: list[Any]) -> None:
    """Refuse a method call whose result would pass a bound, before it is made: a padding
    wider than `MAX_ITEMS`, a join or a replace longer."""
    if name in WIDTH_METHODS and any(isinstance(arg, int) and arg > MAX_ITEMS for arg in args):
        raise _NotEvaluated
    if name == "join" and args and isinstance(args[0], list | tuple | str):
        pieces = list(args[0])
        made = len(owner) * len(pieces) + sum(len(p) for p in pieces if isinstance(p, str))
        if made > MAX_ITEMS:
            raise _NotEvaluated
    if (
        name == "replace"
        and len(args) >= 2
        and isinstance(args[0], str)
        and isinstance(args[1], str)
    ):
        grows = owner.count(args[0]) * max(len(args[1]) - len(args[0]), 0)
        if len(owner) + grows > MAX_ITEMS:
            raise _NotEvaluated


def _before_binary(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse an operation whose result would pass a bound, before it is made."""
    if isinstance(op, ast.Pow) and isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
        raise _NotEvaluated
    growing = isinstance(left, int) and isinstance(right, int) and right > 0
    if isinstance(op, ast.Pow) and growing and left.bit_length() * right > MAX_INT_BITS:
        raise _NotEvaluated
    if isinstance(op, ast.Mod) and isinstance(left, str):
        raise _NotEvaluated  # printf-style formatting: "%0100000d" makes a long string
    if isinstance(op, ast.Mult):
        for sequence, times in ((left, right), (right, left)):
            repeated = isinstance(sequence, str | list | tuple) and isinstance(times, int)
            if repeated and len(sequence) * max(times, 0) > MAX_ITEMS:
                raise _NotEvaluated
    joined = isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple)
    if isinstance(op, ast.Add) and joined and len(left) + len(right) > MAX_ITEMS:
        raise _NotEvaluated


def _check(value: Any) -> None:
    """Raise `_NotEvaluated` when `value` is no plain value or is larger than the bounds."""
    budget = [MAX_ITEMS]

    def walk(item: Any, depth: int) -> None:
        if depth > MAX_DEPTH or not isinstance(item, PLAIN):
            raise _NotEvaluated
        if isinstance(item, int) and not isinstance(item, bool):
            if item.bit_length() > MAX_INT_BITS:
                raise _NotEvaluated
            return
        if isinstance(item, str | range):
            budget[0] -= len(item)
        elif isinstance(item, dict):
            budget[0] -= len(item)
            if budget[0] < 0:
                raise _NotEvaluated
            for key, inner in item.items():
                walk(key, depth + 1)
                walk(inner, depth + 1)
        elif isinstance(item, COLLECTIONS):
            items = cast(Collection[Any], item)
            budget[0] -= len(items)
            if budget[0] < 0:
                raise _NotEvaluated
            for inner in items:
                walk(inner, depth + 1)
        if budget[0] < 0:
            raise _NotEvaluated

    walk(value, 0)

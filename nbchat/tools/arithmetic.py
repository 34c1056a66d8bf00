"""Arithmetic in the user's words, worked out by code for a small model to state.

A 1.5B model answers "125x64" with 7500 and a 0.5B one "17 × 23" with 401 (issue 19): they
recall products, they do not compute them. So before a small model answers, the expressions in
the user's message are found and worked out here, exactly (`fractions.Fraction`), and handed to
it as a note ("Worked out by code: 125 × 64 = 8000"); the model words the answer. Like the
facts a compaction keeps, what code can know is not left to the model.

What counts as an expression, so that nothing else reads as one: numbers joined by operators
written as symbols (`+ * × x / ÷ ^ **`, `-` only with spaces around it, so dates and ranges stay
out) or words ("plus", "minus", "times", "multiplied by", "divided by", "to the power of",
"% of", "percent of", "square root of"), with parentheses. Versions (`3.11.2`) and numbers glued
to letters are not numbers. Bounded: one linear scan of at most `MAX_CHARS` of the message,
numbers of at most `MAX_DIGITS` digits, powers up to `MAX_EXPONENT`, at most `MAX_FOUND`
expressions; an expression whose value would be larger is left to the model.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from math import isqrt

__all__ = ["MAX_FOUND", "work_out"]

MAX_CHARS = 4_000  # the part of a message read for expressions (a question is shorter)
MAX_DIGITS = 30
MAX_EXPONENT = 64
MAX_RESULT_DIGITS = 60
MAX_FOUND = 3
# One piece at a time, in one pass: a run of letters, digits, dots and commas (a number, a
# word, "125x64"), an operator symbol (a minus only between spaces), or anything else.
PIECE = re.compile(
    r"(?P<run>[\w.,]+)|(?P<op>\*\*|[+*×/÷^()%]|(?<=\s)-(?=\s)|(?<![\w)])-(?=\d))|(?P<other>\S)"
)
NUMBER = re.compile(r"\d{1,30}(?:,\d{3})*(?:\.\d{1,30})?")
PRODUCT = re.compile(r"(\d{1,30})[xX](\d{1,30})")  # "125x64"
# Operators written as words, longest first: (the words, the operator).
PHRASES = (
    (("multiplied", "by"), "*"),
    (("divided", "by"), "/"),
    (("to", "the", "power", "of"), "^"),
    (("square", "root", "of"), "sqrt"),
    (("percent", "of"), "%of"),
    (("plus",), "+"),
    (("minus",), "-"),
    (("times",), "*"),
    (("x",), "*"),
    (("sqrt",), "sqrt"),
    (("of",), "of"),
)
SYMBOLS = {"×": "*", "÷": "/", "**": "^"}
SHOWN = {"*": "×", "/": "÷", "^": "^", "+": "+", "-": "−"}


class NotAnExpressionError(Exception):
    """The tokens at hand are no expression code should work out (internal to this module)."""


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", an operator, "(", ")", "sqrt", "%of", "of", or "other"
    value: Fraction | None = None
    text: str = ""


def work_out(text: str) -> list[str]:
    """Each expression in `text` with its value ("125 × 64 = 8000"), at most `MAX_FOUND`."""
    tokens = list(_tokens(text[:MAX_CHARS]))
    found: list[str] = []
    start = 0
    while start < len(tokens) and len(found) < MAX_FOUND:
        parsed = _longest_expression(tokens, start)
        if parsed is None:
            start += 1
            continue
        end, value, shown = parsed
        found.append(f"{shown} = {_format(value)}")
        start = end
    return found


def _tokens(text: str) -> Iterator[_Token]:
    words: list[str] = []  # lower-cased words not yet known to be an operator or not
    for match in PIECE.finditer(text):
        run, op = match.group("run"), match.group("op")
        if run is not None and not run[0].isdigit():
            words.append(run.lower())
            yield from _phrases(words, final=False)
            continue
        yield from _phrases(words, final=True)
        if run is not None:
            yield from _numbers(run.rstrip(".,"))
        elif op is not None:
            negative = op == "-" and text[match.end() : match.end() + 1].isdigit()
            kind = "neg" if negative else SYMBOLS.get(op, op)
            yield _Token(kind, None, op)
        else:
            yield _Token("other")
    yield from _phrases(words, final=True)


def _phrases(words: list[str], *, final: bool) -> Iterator[_Token]:
    """Operators written as words, from the start of `words` (consumed as they are read);
    a word that can still begin a longer phrase waits unless `final`."""
    while words:
        for phrase, kind in PHRASES:
            if tuple(words[: len(phrase)]) == phrase:
                del words[: len(phrase)]
                yield _Token(kind, None, " ".join(phrase))
                break
        else:
            if not final and any(p[: len(words)] == tuple(words) for p, _ in PHRASES):
                return  # "divided" may become "divided by"
            words.pop(0)
            yield _Token("other")


def _numbers(run: str) -> Iterator[_Token]:
    if NUMBER.fullmatch(run):
        plain = run.replace(",", "")
        yield _Token("number", Fraction(plain), plain)
    elif product := PRODUCT.fullmatch(run):
        yield _Token("number", Fraction(product.group(1)), product.group(1))
        yield _Token("*", None, "x")
        yield _Token("number", Fraction(product.group(2)), product.group(2))
    else:
        yield _Token("other")  # a version, a date, a name with digits


def _longest_expression(tokens: list[_Token], start: int) -> tuple[int, Fraction, str] | None:
    """The expression starting at `start` when it holds an operation: (end, value, text)."""
    if tokens[start].kind not in ("number", "(", "sqrt", "neg"):
        return None
    parser = _Parser(tokens, start)
    try:
        value, shown = parser.expression()
    except (NotAnExpressionError, ZeroDivisionError, OverflowError):
        return None
    if parser.operations == 0:
        return None
    return parser.position, value, shown


class _Parser:
    """Recursive descent over the tokens: expression := term (("+"|"-") term)*;
    term := power (("*"|"/") power)*; power := unary ("^" power)?;
    unary := ("sqrt" | "-") unary | "(" expression ")" | number ("%" "of" unary)?."""

    def __init__(self, tokens: list[_Token], position: int) -> None:
        self.tokens = tokens
        self.position = position
        self.operations = 0
        self.depth = 0

    def peek(self) -> str:
        return self.tokens[self.position].kind if self.position < len(self.tokens) else ""

    def take(self) -> _Token:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def expression(self) -> tuple[Fraction, str]:
        value, shown = self.term()
        while self.peek() in ("+", "-") and self._operand_follows():
            op = self.take().kind
            right, right_shown = self.term()
            value = value + right if op == "+" else value - right
            shown, self.operations = f"{shown} {SHOWN[op]} {right_shown}", self.operations + 1
        return _bounded(value), shown

    def term(self) -> tuple[Fraction, str]:
        value, shown = self.power()
        while self.peek() in ("*", "/") and self._operand_follows():
            op = self.take().kind
            right, right_shown = self.power()
            value = value * right if op == "*" else value / right
            shown, self.operations = f"{shown} {SHOWN[op]} {right_shown}", self.operations + 1
        return _bounded(value), shown

    def power(self) -> tuple[Fraction, str]:
        base, shown = self.unary()
        if self.peek() == "^" and self._operand_follows():
            self.take()
            exponent, exponent_shown = self.power()
            if exponent.denominator != 1 or abs(exponent) > MAX_EXPONENT:
                raise NotAnExpressionError
            self.operations += 1
            return _bounded(base ** int(exponent)), f"{shown}^{exponent_shown}"
        return base, shown

    def unary(self) -> tuple[Fraction, str]:
        kind = self.peek()
        self.depth += 1
        if self.depth > MAX_DIGITS:  # nesting as deep as a number is long: not arithmetic
            raise NotAnExpressionError
        try:
            if kind == "sqrt":
                self.take()
                value, shown = self.unary()
                return self._root(value), f"√{shown}"
            if kind == "neg":
                self.take()
                value, shown = self.unary()
                return -value, f"-{shown}"
            if kind == "(":
                self.take()
                value, shown = self.expression()
                if self.peek() != ")":
                    raise NotAnExpressionError
                self.take()
                return value, f"({shown})"
            if kind != "number":
                raise NotAnExpressionError
            token = self.take()
            assert token.value is not None
            return self._percent(token.value, token.text)
        finally:
            self.depth -= 1

    def _percent(self, value: Fraction, shown: str) -> tuple[Fraction, str]:
        if self.peek() == "%of" or (self.peek() == "%" and self._next_is("of")):
            self.position += 1 if self.peek() == "%of" else 2
            whole, whole_shown = self.unary()
            self.operations += 1
            return value * whole / 100, f"{shown}% of {whole_shown}"
        return value, shown

    def _root(self, value: Fraction) -> Fraction:
        if value < 0 or value.denominator != 1 or isqrt(int(value)) ** 2 != value:
            raise NotAnExpressionError  # an exact root only: the model can say "about …"
        self.operations += 1
        return Fraction(isqrt(int(value)))

    def _operand_follows(self) -> bool:
        return self._next_is("number", "(", "sqrt", "neg")

    def _next_is(self, *kinds: str) -> bool:
        following = self.position + 1
        return following < len(self.tokens) and self.tokens[following].kind in kinds


def _bounded(value: Fraction) -> Fraction:
    if len(str(abs(value.numerator))) > MAX_RESULT_DIGITS:
        raise OverflowError("too large to show")
    return value


def _format(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    decimal = f"{float(value):.10g}"
    return f"{value.numerator}/{value.denominator} ≈ {decimal}"

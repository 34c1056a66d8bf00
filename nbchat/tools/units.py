"""Unit conversions in the user's words, worked out by code for a small model to state.

Asked to turn a temperature in Fahrenheit into Celsius, a 1.5B model wrote out the formula and
stopped short of the number: like products (`nbchat.tools.arithmetic`), it recalls how a
conversion goes and does not carry it out. So a message holding a quantity ("100 fahrenheit",
"10km", "5 ft") and the name of another unit of the same kind ("to celsius", "in miles", "how
many cm") gets the quantity converted here, handed to the model with the arithmetic
("100 °F ≈ 37.78 °C").

Units: temperature (Celsius, Fahrenheit, Kelvin), length, mass, volume (US gallons and cups)
and speed, by name, plural or abbreviation; a name of five letters or more also with one slip
of typing (a letter left out, added or changed, or two neighbours swapped). A one-letter
abbreviation counts only right after a number or a degree sign ("100F", "20 °C"), never as
the unit asked for ("c" is also a language). One quantity and one unit to convert it to per
message: none when the message names two such units, or none.

Bounded: one linear scan of at most `MAX_CHARS` characters; each word (at most `WORD_CHARS`
letters) compared with a fixed set of names.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["MAX_CHARS", "convert_units"]

MAX_CHARS = 4_000  # the part of a message read (a question is shorter)
WORD_CHARS = 24  # a longer word is no unit's name, slipped or not
SLIP_LENGTH = 5  # names this long or longer are also recognised with one slip
# A number (at most 15 digits, 10 decimals), or a word, possibly after a degree sign, possibly
# a speed ("km/h"). Each alternative is a run of one class: no backtracking.
PIECE = re.compile(r"(?P<number>-?\d{1,15}(?:\.\d{1,10})?)|(?P<word>[°º]?[a-z]+(?:/[a-z]+)?)")
DEGREES = frozenset({"degree", "degrees", "deg"})


@dataclass(frozen=True)
class Unit:
    """A unit: its kind, the symbol it is shown with, and its value in the kind's base unit
    (`to_base`) and back (`from_base`)."""

    kind: str
    symbol: str
    to_base: Callable[[Fraction], Fraction]
    from_base: Callable[[Fraction], Fraction]


def _scaled(kind: str, symbol: str, factor: str) -> Unit:
    size = Fraction(factor)
    return Unit(kind, symbol, lambda value: value * size, lambda value: value / size)


KELVIN_OFFSET = Fraction("273.15")
CELSIUS = Unit("temperature", "°C", lambda c: c, lambda c: c)
FAHRENHEIT = Unit(
    "temperature",
    "°F",
    lambda f: (f - 32) * Fraction(5, 9),
    lambda c: c * Fraction(9, 5) + 32,
)
KELVIN = Unit("temperature", "K", lambda k: k - KELVIN_OFFSET, lambda c: c + KELVIN_OFFSET)

# Each unit by its names: full names (recognised with a slip when long enough), plurals,
# abbreviations of two letters or more. Gallons and cups are US ones.
UNITS: dict[str, Unit] = {}
for _names, _unit in (
    (("celsius", "centigrade", "°c", "ºc"), CELSIUS),
    (("fahrenheit", "°f", "ºf"), FAHRENHEIT),
    (("kelvin", "kelvins"), KELVIN),
    (
        ("millimeter", "millimeters", "millimetre", "millimetres", "mm"),
        _scaled("length", "mm", "0.001"),
    ),
    (
        ("centimeter", "centimeters", "centimetre", "centimetres", "cm"),
        _scaled("length", "cm", "0.01"),
    ),
    (("meter", "meters", "metre", "metres"), _scaled("length", "m", "1")),
    (
        ("kilometer", "kilometers", "kilometre", "kilometres", "km", "kms"),
        _scaled("length", "km", "1000"),
    ),
    (("inch", "inches"), _scaled("length", "in", "0.0254")),
    (("foot", "feet", "ft"), _scaled("length", "ft", "0.3048")),
    (("yard", "yards", "yd", "yds"), _scaled("length", "yd", "0.9144")),
    (("mile", "miles", "mi"), _scaled("length", "mi", "1609.344")),
    (("milligram", "milligrams", "mg"), _scaled("mass", "mg", "0.000001")),
    (("gram", "grams"), _scaled("mass", "g", "0.001")),
    (("kilogram", "kilograms", "kilo", "kilos", "kg", "kgs"), _scaled("mass", "kg", "1")),
    (("ounce", "ounces", "oz"), _scaled("mass", "oz", "0.028349523125")),
    (("pound", "pounds", "lb", "lbs"), _scaled("mass", "lb", "0.45359237")),
    (
        ("milliliter", "milliliters", "millilitre", "millilitres", "ml"),
        _scaled("volume", "ml", "0.001"),
    ),
    (("liter", "liters", "litre", "litres"), _scaled("volume", "l", "1")),
    (("gallon", "gallons", "gal"), _scaled("volume", "US gal", "3.785411784")),
    (("cup", "cups"), _scaled("volume", "US cup", "0.2365882365")),
    (("mph",), _scaled("speed", "mph", "0.44704")),
    (("km/h", "kph", "kmh"), _scaled("speed", "km/h", "0.2777777777777777777777777778")),
    (("m/s",), _scaled("speed", "m/s", "1")),
):
    for _name in _names:
        UNITS[_name] = _unit
# One letter, only right after a number (or after a degree sign, which `UNITS` holds).
LETTERS: dict[str, Unit] = {
    "c": CELSIUS,
    "f": FAHRENHEIT,
    "k": KELVIN,
    "m": UNITS["meter"],
    "g": UNITS["gram"],
    "l": UNITS["liter"],
}
SLIPPABLE = tuple(name for name in UNITS if len(name) >= SLIP_LENGTH and name.isalpha())


def convert_units(text: str) -> list[str]:
    """The first quantity in `text` converted to the one other unit of its kind the text
    names ("100 °F ≈ 37.78 °C"), as a list of at most one line; empty when there is none."""
    pieces = [
        (match.lastgroup, match.group())
        for match in PIECE.finditer(text[:MAX_CHARS].lower())
        if match.lastgroup == "number" or len(match.group()) <= WORD_CHARS
    ]
    for at, (kind, piece) in enumerate(pieces):
        if kind != "number":
            continue
        found = _quantity_unit(pieces, at)
        if found is None:
            continue
        unit, unit_at = found
        targets = {
            id(other): other
            for where, (what, word) in enumerate(pieces)
            if what == "word"
            and where != unit_at
            and not (where > 0 and pieces[where - 1][0] == "number")
            and (other := _unit_named(word)) is not None
            and other.kind == unit.kind
            and other is not unit
        }
        if len(targets) != 1:
            return []
        (target,) = targets.values()
        value = target.from_base(unit.to_base(Fraction(piece)))
        return [f"{piece} {unit.symbol} {_shown(value)} {target.symbol}"]
    return []


def _quantity_unit(pieces: list[tuple[str | None, str]], at: int) -> tuple[Unit, int] | None:
    """The unit right after the number at `at` ("degrees" between them allowed), and where."""
    after = at + 1
    if after < len(pieces) and pieces[after][1] in DEGREES:
        after += 1
    if after >= len(pieces) or pieces[after][0] != "word":
        return None
    word = pieces[after][1]
    unit = LETTERS.get(word) or _unit_named(word)
    return None if unit is None else (unit, after)


def _unit_named(word: str) -> Unit | None:
    """The unit `word` names: one of its names, or a long name typed with one slip."""
    unit = UNITS.get(word)
    if unit is not None or len(word) < SLIP_LENGTH - 1:
        return unit
    for name in SLIPPABLE:
        if _one_slip(word, name):
            return UNITS[name]
    return None


def _one_slip(word: str, name: str) -> bool:
    """Whether `word` is `name` with one letter left out, added or changed, or two
    neighbouring letters swapped."""
    if abs(len(word) - len(name)) > 1 or word == name:
        return False
    if len(word) == len(name):
        differ = [at for at in range(len(word)) if word[at] != name[at]]
        if len(differ) == 1:
            return True
        first = differ[0]
        return (
            len(differ) == 2
            and differ[1] == first + 1
            and word[first] == name[first + 1]
            and word[first + 1] == name[first]
        )
    shorter, longer = (word, name) if len(word) < len(name) else (name, word)
    at = 0
    while at < len(shorter) and shorter[at] == longer[at]:
        at += 1
    return shorter[at:] == longer[at + 1 :]


def _shown(value: Fraction) -> str:
    """`= 212`, `= 152.4` for a value of at most two decimals, else `≈` and two decimals (four
    significant digits below one)."""
    for places in range(3):
        scaled = value * 10**places
        if scaled.denominator == 1:
            whole = f"{abs(scaled.numerator):0{places + 1}d}"
            digits = whole if not places else f"{whole[:-places]}.{whole[-places:]}"
            return f"= {'-' if value < 0 else ''}{digits}"
    number = float(value)
    text = f"{number:.2f}" if abs(number) >= 1 else f"{number:.4g}"
    return f"≈ {text}"

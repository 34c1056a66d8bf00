"""Unit conversions in the user's words worked out by code for a small model (issue 19): what
counts as a quantity and a unit asked for and what does not, exact and rounded values, names
typed with a slip, bounds. The note the model gets is tested with the arithmetic's
(`tests/test_arithmetic.py`)."""

from __future__ import annotations

import pytest

from nbchat.tools.units import MAX_CHARS, convert_units


@pytest.mark.parametrize(
    ("text", "converted"),
    [
        ("turn 212 fahrenheit into celsius", ["212 °F = 100 °C"]),
        ("what's 30 degrees celsius in fahrenheit?", ["30 °C = 86 °F"]),
        ("-40°F in celsius", ["-40 °F = -40 °C"]),
        ("is 300 kelvin warm? in celsius please", ["300 K = 26.85 °C"]),
        ("98.6 F to celsius", ["98.6 °F = 37 °C"]),
        ("how many miles is a 42 km run", ["42 km ≈ 26.10 mi"]),
        ("6 ft in cm", ["6 ft = 182.88 cm"]),
        ("3 inches in millimetres", ["3 in = 76.2 mm"]),
        ("how many pounds is 70kg", ["70 kg ≈ 154.32 lb"]),
        ("2 cups in ml", ["2 US cup ≈ 473.18 ml"]),
        ("a gallon is how many liters? say 1 gallon", ["1 US gal ≈ 3.79 l"]),
        ("65 mph in km/h", ["65 mph ≈ 104.61 km/h"]),
        ("1 mm in miles", ["1 mm ≈ 6.214e-07 mi"]),
        # A long name typed with one slip: a letter left out, added, changed, or swapped.
        ("50 farenheit to celsius", ["50 °F = 10 °C"]),
        ("50 fahrenheit to celcius", ["50 °F = 10 °C"]),
        ("5 kilometers to mlies", ["5 km ≈ 3.11 mi"]),
        ("5 kilommeters to miles", ["5 km ≈ 3.11 mi"]),
    ],
)
def test_a_quantity_is_converted_to_the_unit_the_message_asks_for(
    text: str, converted: list[str]
) -> None:
    assert convert_units(text) == converted


@pytest.mark.parametrize(
    "text",
    [
        "I ran 5 km today",  # no other unit asked for
        "10 km to miles and feet",  # two asked for: which one is not guessed
        "100F to C",  # a one-letter unit is never the one asked for ("c" is a language)
        "python 3.11 in c",
        "10 pounds in dollars",  # not a unit of the same kind
        "5 kg in km",
        "convert celsius to fahrenheit",  # no quantity
        "what is 2 + 2",
        "the server listens on port 8042 in the config",
        "10 km to km",  # the same unit
    ],
)
def test_no_conversion_unless_one_quantity_and_one_unit_of_its_kind(text: str) -> None:
    assert convert_units(text) == []


def test_only_the_start_of_a_message_is_read() -> None:
    assert convert_units("x " * MAX_CHARS + "100 fahrenheit in celsius") == []
    assert convert_units("1 kg in " + "y" * 10_000_000) == []

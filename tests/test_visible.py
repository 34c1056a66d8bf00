"""Text shown exactly: what an approval card displays decodes back to exactly what runs, and no
invisible or bidi character reaches the HTML."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nbchat.ui.render import render_approval, render_tool_call
from nbchat.ui.visible import needs_escape, visible_json, visible_text

# Every code point, surrogates and unassigned ones included.
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
ARGUMENTS = st.dictionaries(
    ANY_TEXT,
    st.one_of(ANY_TEXT, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none()),
    max_size=4,
)


def hidden_characters(text: str) -> list[str]:
    """Characters in `text` that `needs_escape` says must not be shown raw (line breaks aside)."""
    return [
        c for i, c in enumerate(text) if c != "\n" and needs_escape(c, text[i - 1] if i else "")
    ]


def shown_arguments(markup: str) -> Any:
    [shown] = re.findall(r'<pre class="nbchat-exact">(.*?)</pre>', markup, re.DOTALL)
    return json.loads(html.unescape(shown))


@given(ARGUMENTS)
def test_what_is_shown_decodes_back_to_exactly_the_arguments(arguments: dict[str, Any]) -> None:
    markup = render_approval("run_shell", arguments, "reason")
    assert shown_arguments(markup) == arguments
    assert hidden_characters(markup) == []


@given(ANY_TEXT)
def test_labels_and_tool_call_cards_show_no_hidden_character(text: str) -> None:
    assert hidden_characters(visible_text(text)) == []
    assert hidden_characters(render_tool_call(text, json.dumps({"a": text}))) == []
    assert hidden_characters(render_approval(text, {}, text)) == []


def test_the_trojan_source_command_is_shown_with_its_controls_spelled_out() -> None:
    command = "echo ok \u202e; touch PWNED #\u202c"
    shown = visible_json({"command": command})
    assert shown == '{\n  "command": "echo ok \\u202e; touch PWNED #\\u202c"\n}'


def test_each_kind_of_hidden_character_is_escaped() -> None:
    cases = {
        "\u200b": "Cf zero width space",
        "\u2066": "Cf left-to-right isolate",
        "\u00ad": "Cf soft hyphen",
        "\U000e0041": "Cf tag letter",
        "\x1b": "Cc escape",
        "\x85": "Cc next line",
        "\u2028": "Zl line separator",
        "\u2029": "Zp paragraph separator",
        "\u00a0": "Zs no-break space",
        "\u3000": "Zs ideographic space",
        "\ue000": "Co private use",
        "\U0010ffff": "Cn unassigned",
        "\u3164": "Lo Hangul filler",
        "\ufe0f": "Mn variation selector",
    }
    for character, kind in cases.items():
        shown = visible_json({"x": f"a{character}b"})
        assert character not in shown, kind
        assert json.loads(shown) == {"x": f"a{character}b"}, kind


def test_writing_in_other_scripts_stays_readable() -> None:
    text = "echo 'naïve café' 'नमस्ते' 'שלום' '日本語' 😀"
    assert visible_text(text) == text
    assert visible_text(unicodedata.normalize("NFD", "é")) == "e\\u0301"  # a mark on ASCII


def test_a_combining_mark_after_an_escaped_character_is_escaped_too() -> None:
    # The escape ends in an ASCII digit: the mark would be drawn over it.
    assert visible_text("\ud7fc\u0afa") == "\\ud7fc\\u0afa"
    assert visible_text("\u0915\u0afa") == "\u0915\u0afa"  # on a letter of its own script: kept

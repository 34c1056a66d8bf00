"""The cards' icons render without an emoji font: shapes painted in the text colour, no emoji
glyph anywhere in the widget or the transcript (Debian's chromium, with no colour emoji font,
showed the compaction card's 🗜 as a blank box)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_render import executable_parts

from nbchat.history import Row
from nbchat.ui import render as icons
from nbchat.ui.render import STYLE, render_compacted, render_tool_call
from nbchat.ui.transcript import render_transcript

UI = Path(icons.__file__).parent
# Emoji blocks: symbols and pictographs, emoticons, transport, supplemental symbols; the
# miscellaneous symbols and dingbats that fonts draw as emoji; the emoji presentation selector.
EMOJI_RANGES = ((0x1F000, 0x1FAFF), (0x2600, 0x26FF), (0x2B50, 0x2B55), (0xFE0F, 0xFE0F))


def emoji_in(text: str) -> list[str]:
    return [c for c in text if any(low <= ord(c) <= high for low, high in EMOJI_RANGES)]


def test_no_source_file_of_the_widget_holds_an_emoji_glyph() -> None:
    found = {p.name: emoji_in(p.read_text()) for p in sorted(UI.glob("*.py"))}
    assert {name: chars for name, chars in found.items() if chars} == {}


@pytest.mark.parametrize("icon", [icons.TOOL_ICON, icons.COMPACTED_ICON])
def test_each_icon_is_an_empty_span_with_nothing_executable(icon: str) -> None:
    assert icon.startswith('<span class="nbchat-icon nbchat-icon-')
    assert icon.endswith('" aria-hidden="true"></span>')
    assert executable_parts(icon) == []


@pytest.mark.parametrize("name", ["tool", "compacted"])
def test_the_stylesheet_paints_each_icon_with_a_well_formed_svg_mask(name: str) -> None:
    rule = re.search(rf"\.nbchat-icon-{name} \{{(.*)\}}", icons.ICON_STYLE)
    assert rule is not None
    urls = re.findall(r'url\("data:image/svg\+xml,([^"]*)"\)', rule.group(1))
    assert len(urls) == 2 and urls[0] == urls[1]  # -webkit-mask and mask
    svg = ET.fromstring(unquote(urls[0]))
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert len(svg.findall("{http://www.w3.org/2000/svg}path")) == 1
    assert "background-color: currentColor" in icons.ICON_STYLE
    assert icons.ICON_STYLE in STYLE


def test_a_tool_card_and_a_compaction_card_show_their_icon_and_no_emoji() -> None:
    tool = render_tool_call("describe_variable", '{"name": "sales"}')
    compacted = render_compacted("## Goal\nsales", rows_replaced=4)
    assert tool.startswith(f'<div class="nbchat-card"><details><summary>{icons.TOOL_ICON} <b>')
    assert f"<summary>{icons.COMPACTED_ICON} Earlier conversation compacted" in compacted
    assert emoji_in(tool + compacted) == []


def test_the_transcript_shows_the_same_icons() -> None:
    rows = [
        (Row(role="compacted", content="## Goal\nsales"), None),
        (Row(role="user", content="hi"), None),
    ]
    html = render_transcript(rows)
    assert icons.COMPACTED_ICON in html
    assert emoji_in(html) == []

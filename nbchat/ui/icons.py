"""The cards' icons: empty spans that the chat's stylesheet paints as shapes.

Emoji glyphs need a colour emoji font, which many machines lack (Debian's chromium showed the
compaction card's emoji as a blank box), so the cards carry `<span class="nbchat-icon ...">`
instead, and `ICON_STYLE` (part of `render.STYLE`) paints each one in the text colour through a
CSS mask holding a small SVG shape. The markup itself stays plain HTML with no SVG, style
attribute or URL in it (what the sanitiser tests require of every card); where the stylesheet
is absent (the static transcript in a notebook viewer) the span is empty and the card's text
says the same.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["COMPACTED_ICON", "ICON_STYLE", "TOOL_ICON"]

TOOL_ICON = '<span class="nbchat-icon nbchat-icon-tool" aria-hidden="true"></span>'
COMPACTED_ICON = '<span class="nbchat-icon nbchat-icon-compacted" aria-hidden="true"></span>'

# A wrench: a tool call.
_WRENCH = (
    '<path d="M10.8 1a4.2 4.2 0 0 0-4 5.5L1.4 11.9a1.4 1.4 0 0 0 0 2l.7.7a1.4 1.4 0 0 0 2 0'
    'l5.4-5.4A4.2 4.2 0 0 0 15 5.2l-2.4 2.4-2.2-.6-.6-2.2L12.2 1.2A4.2 4.2 0 0 0 10.8 1z"/>'
)
# Two arrows pressing onto a line: the conversation compacted.
_PRESSED = (
    '<path fill="none" stroke="black" stroke-width="1.6" stroke-linecap="round" '
    'stroke-linejoin="round" d="M8 1v4.5M5.5 3L8 5.5 10.5 3M8 15v-4.5M5.5 13L8 10.5 10.5 13'
    'M2 8h12"/>'
)


def _mask(shape: str) -> str:
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">{shape}</svg>'
    url = f'url("data:image/svg+xml,{quote(svg)}")'
    return (
        f"-webkit-mask: {url} center / contain no-repeat; mask: {url} center / contain no-repeat;"
    )


ICON_STYLE = (
    ".nbchat-icon { display: inline-block; width: 1em; height: 1em; vertical-align: -0.125em;"
    " background-color: currentColor; }\n"
    f".nbchat-icon-tool {{ {_mask(_WRENCH)} }}\n"
    f".nbchat-icon-compacted {{ {_mask(_PRESSED)} }}\n"
)

"""Model output → safe HTML: markdown, code, tool cards, summaries, notices, and the cards' icons.

Everything the model (or a tool) wrote is untrusted. Markdown is rendered by markdown-it-py with
raw HTML disabled, so any tag in the text arrives escaped; link targets must be http(s), mailto
or relative; images become plain links (no request leaves the page because a model said so);
math spans are set aside before markdown and put back escaped, so MathJax (HTMLMath) can
typeset them. The only scripting in the output is the copy button nbchat itself adds to code
blocks, with a fixed handler that never contains model text (`COPY_BUTTON`).

`split_stable_blocks` lets a streaming message render finished blocks once and re-render only
the live tail. Colours come from JupyterLab's theme variables, so dark themes work; each has a
fallback that reads on light and dark backgrounds alike (translucent greys, `inherit`), for front
ends without them. STYLE only relies on ipywidgets 8 and those variables, and hides the static
transcript (`nbchat.ui.transcript`) in an output area where the live widget shows.

The cards' icons are empty spans that the stylesheet paints as shapes. Emoji glyphs need a
colour emoji font, which many machines lack (Debian's chromium showed the compaction card's
emoji as a blank box), so the cards carry `<span class="nbchat-icon ...">` instead, and
`ICON_STYLE` (part of `STYLE`) paints each one in the text colour through a CSS mask holding a
small SVG shape. The markup itself stays plain HTML with no SVG, style attribute or URL in it
(what the sanitiser tests require of every card); where the stylesheet is absent (the static
transcript in a notebook viewer) the span is empty and the card's text says the same.

Pure: no widgets, no I/O.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from markdown_it import MarkdownIt
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from nbchat.ui.visible import math_spans, visible_json, visible_text, visible_text_lines

__all__ = [
    "COMPACTED_ICON",
    "COPY_BUTTON",
    "ICON_STYLE",
    "STYLE",
    "TOOL_ICON",
    "checkpoint_sections",
    "destination_badge",
    "render_approval",
    "render_checkpoint",
    "render_compacted",
    "render_label",
    "render_markdown",
    "render_notice",
    "render_tool_call",
    "render_tool_result",
    "set_math_aside",
    "split_stable_blocks",
]


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


SAFE_SCHEMES = ("http:", "https:", "mailto:")
COPY_HANDLER = (
    "navigator.clipboard.writeText(this.parentElement.querySelector('code').innerText);"
    "this.textContent='Copied';"
)
COPY_BUTTON = (
    f'<button class="nbchat-copy" title="Copy code" onclick="{COPY_HANDLER}">Copy</button>'
)
ROLE_LABELS = {"user": "You", "assistant": "Assistant"}
# A checkpoint's section longer than this many lines is shown folded under its title.
FOLD_LINES = 6
MARK_OPEN, MARK_CLOSE = "\ue000", "\ue001"
MARK_PATTERN = re.compile("\ue000([0-9]+)\ue001")
FENCE_PATTERN = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
STYLE = (
    """
<style>
.nbchat-msg { font-size: var(--jp-content-font-size1, 14px);
  color: var(--jp-content-font-color1, inherit); line-height: 1.5; overflow-wrap: anywhere; }
.nbchat-msg > :first-child { margin-top: 0; }
.nbchat-msg > :last-child { margin-bottom: 0; }
/* the right padding keeps the end of a code line clear of the Copy button */
.nbchat-msg pre { position: relative; overflow-x: auto; padding: 6px 4.5em 6px 8px;
  background: var(--jp-cell-editor-background, rgba(127, 127, 127, 0.08));
  border: 1px solid var(--jp-border-color2, rgba(127, 127, 127, 0.3)); }
.nbchat-copy { position: absolute; top: 2px; right: 2px; font-size: 11px; opacity: 0.7;
  background: var(--jp-layout-color2, transparent); color: var(--jp-ui-font-color1, inherit);
  border: 1px solid var(--jp-border-color2, rgba(127, 127, 127, 0.3)); cursor: pointer; }
.nbchat-msg table { border-collapse: collapse; }
.nbchat-msg th, .nbchat-msg td { padding: 2px 6px;
  border: 1px solid var(--jp-border-color2, rgba(127, 127, 127, 0.3)); }
.nbchat-messages .widget-html, .nbchat-messages .widget-htmlmath { margin-top: 0;
  margin-bottom: 0; min-height: 0; }
.nbchat-messages .nbchat-user, .nbchat-messages .nbchat-assistant { box-sizing: border-box;
  margin: 8px 0 2px 0; padding: 4px 10px;
  border-left: 3px solid var(--jp-border-color1, rgba(127, 127, 127, 0.45)); }
.nbchat-messages .nbchat-user { background: var(--jp-layout-color2, rgba(127, 127, 127, 0.1));
  border-left-color: var(--jp-brand-color1, #1976d2); }
.nbchat-label { font-size: var(--jp-ui-font-size0, 11px); font-weight: 600; line-height: 1.6;
  color: var(--jp-ui-font-color2, inherit); }
.nbchat-card { border-left: 3px solid var(--jp-brand-color1, #1976d2); padding: 2px 8px;
  margin: 2px 0; background: var(--jp-layout-color1, transparent); }
.nbchat-card.nbchat-failed { border-left-color: var(--jp-error-color1, #d32f2f); }
.nbchat-card.nbchat-compacted { border-left-color: var(--jp-warn-color1, #f57c00); }
/* A checkpoint reads at the chat's type scale: its headings are labels, not page titles. */
.nbchat-checkpoint { font-size: var(--jp-content-font-size1, 14px); line-height: 1.45; }
.nbchat-checkpoint h1, .nbchat-checkpoint h2, .nbchat-checkpoint h3, .nbchat-checkpoint h4,
.nbchat-checkpoint h5, .nbchat-checkpoint h6 { font-size: 1em; font-weight: 600;
  margin: 4px 0 2px 0; }
.nbchat-checkpoint details { margin: 2px 0; }
.nbchat-checkpoint summary { font-weight: 600; cursor: pointer; }
.nbchat-checkpoint .nbchat-msg p { margin: 2px 0; }
.nbchat-checkpoint .nbchat-msg ul, .nbchat-checkpoint .nbchat-msg ol { margin: 2px 0;
  padding-left: 1.4em; }
.nbchat-checkpoint blockquote { margin: 2px 0 2px 4px; padding-left: 6px;
  border-left: 2px solid var(--jp-border-color2, rgba(127, 127, 127, 0.3)); }
.nbchat-failed .nbchat-result { color: var(--jp-error-color1, #d32f2f); }
.nbchat-exact { unicode-bidi: bidi-override; direction: ltr; text-align: left;
  white-space: pre-wrap; overflow-wrap: anywhere; max-height: 24em; overflow: auto;
  background: var(--jp-cell-editor-background, rgba(127, 127, 127, 0.08)); padding: 4px 6px;
  margin: 4px 0; }
.nbchat-notice { font-size: var(--jp-ui-font-size0, 12px); color: var(--jp-ui-font-color2, inherit);
  margin: 2px 0 2px 13px; }
.nbchat-notice.nbchat-error { color: var(--jp-error-color1, #d32f2f); }
.nbchat-reasoning { color: var(--jp-ui-font-color2, inherit); font-size: 12px; }
.nbchat-msg .k, .nbchat-msg .kn, .nbchat-msg .kd, .nbchat-msg .kc
  { color: var(--jp-mirror-editor-keyword-color, #008000); font-weight: bold; }
.nbchat-msg .s, .nbchat-msg .s1, .nbchat-msg .s2, .nbchat-msg .sd
  { color: var(--jp-mirror-editor-string-color, #ba2121); }
.nbchat-msg .c, .nbchat-msg .c1, .nbchat-msg .cm
  { color: var(--jp-mirror-editor-comment-color, #408080); font-style: italic; }
.nbchat-msg .m, .nbchat-msg .mi, .nbchat-msg .mf
  { color: var(--jp-mirror-editor-number-color, #080); }
.nbchat-msg .nf, .nbchat-msg .nc { color: var(--jp-mirror-editor-def-color, #00f); }
.nbchat-msg .nb, .nbchat-msg .bp { color: var(--jp-mirror-editor-builtin-color, #008000); }
.nbchat-msg .o, .nbchat-msg .ow { color: var(--jp-mirror-editor-operator-color, #aa22ff); }
.nbchat-badge { font-size: 11px; padding: 1px 7px; border-radius: 9px; align-self: center;
  border: 1px solid var(--jp-border-color2, rgba(127, 127, 127, 0.3));
  color: var(--jp-ui-font-color2, inherit); }
.nbchat-badge.nbchat-local { border-color: var(--jp-success-color1, #388e3c);
  color: var(--jp-success-color1, #388e3c); }
.nbchat-request-link { align-self: flex-start; height: auto; line-height: 1.4; padding: 0 6px;
  margin: 0 0 4px 8px; font-size: var(--jp-ui-font-size0, 11px); background: transparent;
  border: none; box-shadow: none; color: var(--jp-content-link-color, #1976d2); }
.nbchat-diff .nbchat-add { color: var(--jp-success-color1, #2e7d32); display: block;
  background: var(--jp-success-color3, rgba(46, 125, 50, 0.08)); }
.nbchat-diff .nbchat-del { color: var(--jp-error-color1, #c62828); display: block;
  background: var(--jp-error-color3, rgba(198, 40, 40, 0.08)); }
.nbchat-diff .nbchat-hunk { color: var(--jp-ui-font-color2, #666); display: block; }
.nbchat-msg .gd { color: var(--jp-error-color1, #c62828); }
.nbchat-msg .gi { color: var(--jp-success-color1, #2e7d32); }
.jp-OutputArea:has(.nbchat) .nbchat-transcript,
.jp-OutputArea:has(.nbchat) .jp-OutputArea-child:has(.nbchat-transcript),
.output:has(.nbchat) .nbchat-transcript { display: none; }
"""
    + ICON_STYLE
    + "</style>\n"
)


def _validate_link(url: str) -> bool:
    target = url.strip().lower()
    if target.startswith(("//", "\\\\")):
        return False  # protocol-relative: an external host in disguise
    scheme = re.match(r"^[a-z][a-z0-9+.-]*:", target)
    return scheme is None or target.startswith(SAFE_SCHEMES)


@functools.lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    try:
        return get_lexer_by_name(language)
    except ClassNotFound:
        return None


@functools.lru_cache(maxsize=512)
def _css_class(token_type: Any) -> str:
    while token_type not in STANDARD_TYPES:
        token_type = token_type.parent
    return str(STANDARD_TYPES[token_type])


def _highlight(code: str, language: str, _attrs: Any) -> str:
    """Code as pygments tokens in spans with pygments' short class names (coloured by STYLE).

    Written out here rather than with `HtmlFormatter`, which costs as much again as the lexing.
    """
    lexer = _lexer(language.split()[0]) if language.strip() else None
    if lexer is None:
        return ""  # markdown-it then escapes the code itself
    parts = []
    for token_type, value in lexer.get_tokens(code):
        css, text = _css_class(token_type), html.escape(value, quote=False)
        parts.append(f'<span class="{css}">{text}</span>' if css else text)
    return "".join(parts)


def _make_parser(*, highlight: bool) -> MarkdownIt:
    options = {"html": False, "linkify": False, "highlight": _highlight if highlight else None}
    parser = MarkdownIt("commonmark", options)
    parser.enable(["table", "strikethrough"])
    parser.validateLink = _validate_link  # type: ignore[method-assign]
    rules = parser.add_render_rule

    def render_fence(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        inner = str(self.fence(tokens, idx, options, env))  # default <pre><code>…</code></pre>
        return inner.replace("<pre>", f"<pre>{COPY_BUTTON}", 1)

    def render_image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        src = html.escape(str(token.attrGet("src") or ""), quote=True)
        alt = html.escape(token.content or "image")
        return f'<a href="{src}" target="_blank" rel="noopener noreferrer">[image: {alt}]</a>'

    def render_link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("target", "_blank")
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return str(self.renderToken(tokens, idx, options, env))

    rules("fence", render_fence)
    rules("code_block", render_fence)
    rules("image", render_image)
    rules("link_open", render_link_open)
    return parser


_PARSER = _make_parser(highlight=True)
_PLAIN_PARSER = _make_parser(highlight=False)


def render_markdown(text: str, *, highlight: bool = True) -> str:
    """Safe HTML for untrusted markdown, math kept for MathJax, inside a message div.

    `highlight=False` leaves code uncoloured: for a streaming tail, re-rendered many times.
    """
    marked, spans = set_math_aside(text)
    parser = _PARSER if highlight else _PLAIN_PARSER
    rendered = parser.render(marked)
    # One pass puts every span back (a replace per span was quadratic in the spans).
    rendered = MARK_PATTERN.sub(lambda match: html.escape(spans[int(match.group(1))]), rendered)
    return f'<div class="nbchat-msg">{rendered}</div>'


def set_math_aside(text: str) -> tuple[str, list[str]]:
    """`text` with each math span replaced by a numbered marker, and the spans in order."""
    # Private-use markers survive markdown-it untouched; any in the input are neutralised first.
    text = text.replace(MARK_OPEN, "\ufffd").replace(MARK_CLOSE, "\ufffd")
    spans: list[str] = []
    pieces: list[str] = []
    end = 0
    for start, stop in math_spans(text):
        pieces += (text[end:start], f"{MARK_OPEN}{len(spans)}{MARK_CLOSE}")
        spans.append(text[start:stop])
        end = stop
    pieces.append(text[end:])
    return "".join(pieces), spans


def split_stable_blocks(text: str) -> tuple[str, str]:
    """Split streaming markdown into (finished part, live tail) at the last safe blank line.

    A blank line inside an open code fence is not a boundary, so a half-streamed code block
    always stays in the tail.
    """
    boundary = -1
    fence: str | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        marker = FENCE_PATTERN.match(line)
        if marker:
            run = marker.group(1)
            if fence is None:
                fence = run
            elif run[0] == fence[0] and len(run) >= len(fence):
                fence = None
        offset += len(line)
        if fence is None and not line.strip() and line.endswith("\n"):
            boundary = offset
    if boundary <= 0:
        return "", text
    return text[:boundary], text[boundary:]


def render_tool_call(name: str, arguments: str) -> str:
    """A tool call's name and pretty-printed arguments (escaped)."""
    try:
        pretty = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = arguments
    return (
        f'<div class="nbchat-card"><details><summary>{TOOL_ICON} '
        f"<b>{html.escape(visible_text(name))}</b>"
        f'</summary><pre class="nbchat-exact">{html.escape(visible_text_lines(pretty))}</pre>'
        "</details></div>"
    )


def render_approval(name: str, arguments: Mapping[str, Any], reason: str = "") -> str:
    """The question on an approval card: the tool, why it asks, and the exact arguments.

    Nothing is folded away: the arguments are shown in full (a long value scrolls), left to
    right, with every invisible or bidi character as a visible escape; the JSON shown decodes
    back to exactly the arguments that run (see `nbchat.ui.visible`).
    """
    why = f" {html.escape(visible_text(reason))}" if reason else ""
    return (
        f'<div class="nbchat-card">Allow <b>{html.escape(visible_text(name))}</b>?{why}'
        f'<pre class="nbchat-exact">{html.escape(visible_json(arguments))}</pre></div>'
    )


def render_tool_result(name: str, content: str, *, ok: bool = True, limit: int = 4000) -> str:
    """A tool's result, capped for display (the full text stays in the store)."""
    shown = content
    if len(content) > limit:
        half = limit // 2
        cut = len(content) - 2 * half
        shown = f"{content[:half]}\n[... {cut:,} characters not shown ...]\n{content[-half:]}"
    status = "" if ok else " nbchat-failed"
    label = "result" if ok else "failed"
    return (
        f'<div class="nbchat-card{status}"><details><summary>{html.escape(name)} · {label} '
        f'({len(content):,} chars)</summary><pre class="nbchat-result">'
        f"{html.escape(shown)}</pre></details></div>"
    )


def render_checkpoint(text: str) -> str:
    """A checkpoint (a summary, its facts) as one folding section per heading (`# ` or `## `),
    at the chat's type scale: a section of at most FOLD_LINES lines shows open, a longer one
    folded under its title. Titles are escaped; bodies go through `render_markdown`."""
    parts = []
    for title, body in checkpoint_sections(text):
        inner = render_markdown(body) if body.strip() else ""
        if not title:
            parts.append(inner)
            continue
        shown = " open" if len(body.strip().splitlines()) <= FOLD_LINES else ""
        parts.append(f"<details{shown}><summary>{html.escape(title)}</summary>{inner}</details>")
    return f'<div class="nbchat-checkpoint">{"".join(parts)}</div>'


def checkpoint_sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for each `# `/`## ` heading of `text` outside code fences; a body before
    the first heading comes with the title ""."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    fence = ""
    for line in text.splitlines():
        opened = FENCE_PATTERN.match(line)
        if opened and (not fence or opened.group(1).startswith(fence)):
            fence = "" if fence else opened.group(1)
        heading = line.startswith(("# ", "## ")) and not fence
        if heading:
            sections.append((line.lstrip("#").strip(), []))
        else:
            sections[-1][1].append(line)
    return [(title, "\n".join(body)) for title, body in sections if title or "".join(body).strip()]


def render_compacted(
    summary: str,
    *,
    rows_replaced: int | None = None,
    tokens_before: int | None = None,
    tokens_after: int | None = None,
) -> str:
    """The compacted summary as a distinct collapsible card saying what it replaced."""
    facts = []
    if rows_replaced is not None:
        facts.append(f"{rows_replaced} rows")
    if tokens_before is not None and tokens_after is not None:
        facts.append(f"~{tokens_before:,} → ~{tokens_after:,} tokens")
    detail = f" ({', '.join(facts)})" if facts else ""
    return (
        f'<div class="nbchat-card nbchat-compacted"><details><summary>{COMPACTED_ICON} '
        f"Earlier conversation compacted{html.escape(detail)}</summary>"
        f"{render_checkpoint(summary)}</details></div>"
    )


def destination_badge(destination: str) -> str:
    """The header's badge saying where requests go: "local" (this machine) or the host."""
    local = destination == "local"
    title = (
        "Requests go to a model server on this machine"
        if local
        else f"Requests go to {destination}"
    )
    kind = " nbchat-local" if local else ""
    return (
        f'<span class="nbchat-badge{kind}" title="{html.escape(title)}">'
        f"{html.escape(destination)}</span>"
    )


def render_label(role: str) -> str:
    """Whose message this is: "You" above the user's, "Assistant" above the model's."""
    return f'<div class="nbchat-label">{ROLE_LABELS.get(role, html.escape(role))}</div>'


def render_notice(text: str, *, error: bool = False, traceback: str = "") -> str:
    """A one-line notice or error that says what to do; a traceback folded beneath it."""
    kind = " nbchat-error" if error else ""
    folded = ""
    if traceback:
        folded = f"<details><summary>Details</summary><pre>{html.escape(traceback)}</pre></details>"
    return f'<div class="nbchat-notice{kind}">{html.escape(text)}{folded}</div>'

"""How the chat shows what the assistant does to the notebook: the approval card's question for
an edit (the diff) or a run (exactly the code), and the acting tools' results as open cards.

The question is exact text, as the plain approval card's arguments are (`nbchat.ui.visible`:
every invisible or bidi character shown as an escape), so what is approved is what runs or
lands; a diff's lines are coloured by their first character. A result (inserted, edited, the
run's output, or the code to copy where there is no notebook document) is rendered as markdown,
open, its code blocks with the widget's Copy button (the diff's colours are in `render.STYLE`).
No SQL, HTTP or prompt text.
"""

from __future__ import annotations

import html

from nbchat.tools.acting import ACTING_TOOLS
from nbchat.tools.registry import Review
from nbchat.ui.icons import TOOL_ICON
from nbchat.ui.render import render_markdown
from nbchat.ui.visible import visible_text, visible_text_lines

__all__ = [
    "is_acting_tool",
    "render_acting_result",
    "render_review",
]

WHY_EDIT = "Nothing changes in the notebook until you accept (the tool policy is 'ask')."
WHY_RUN = (
    "It runs in your kernel, with your variables, only if you say so (the tool policy is 'ask')."
)
# How an acting tool's failed result starts (`nbchat.tools.kernelrun`, the executor).
FAILED = ("Error", "Refused", "Denied", "Not run", "Unknown tool", "Timed out", "Invalid", "No ")


def is_acting_tool(name: str) -> bool:
    """Whether `name` is one of the tools that act on the notebook (their own cards)."""
    return name in ACTING_TOOLS


def render_review(name: str, review: Review) -> str:
    """The approval card's question: what it touches, why it asks, and the diff or the code,
    exactly."""
    verb = {"edit_cell": "Accept this edit", "run_cell": "Run this cell"}.get(name, "Run this code")
    why = f" {WHY_EDIT if review.kind == 'diff' else WHY_RUN}"
    note = f" ({html.escape(visible_text(review.note))})" if review.note else ""
    if review.kind == "diff":
        body = _diff_html(review.text)
        kind = "nbchat-exact nbchat-diff"
    else:
        body = html.escape(visible_text_lines(review.text))
        kind = "nbchat-exact"
    return (
        f'<div class="nbchat-card">{verb}?{note}<span class="nbchat-notice">{why}</span>'
        f'<pre class="{kind}">{body}</pre></div>'
    )


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        text = html.escape(visible_text(line)) or " "
        if line.startswith(("+++", "---")):
            lines.append(f'<span class="nbchat-hunk">{text}</span>')
        elif line.startswith("+"):
            lines.append(f'<span class="nbchat-add">{text}</span>')
        elif line.startswith("-"):
            lines.append(f'<span class="nbchat-del">{text}</span>')
        elif line.startswith("@@"):
            lines.append(f'<span class="nbchat-hunk">{text}</span>')
        else:
            lines.append(f"<span>{text}</span>\n")
    return "".join(lines)


def render_acting_result(name: str, content: str, *, ok: bool | None = None) -> str:
    """An acting tool's result as an open card: its text as markdown (the diff, the output,
    the code to copy)."""
    failed = content.startswith(FAILED) if ok is None else not ok
    status = " nbchat-failed" if failed else ""
    label = "failed" if failed else "result"
    return (
        f'<div class="nbchat-card nbchat-acting{status}"><details open><summary>{TOOL_ICON} '
        f"<b>{html.escape(name)}</b> · {label}</summary>"
        f"{render_markdown(content)}</details></div>"
    )

"""What the renderer's math handling costs on top of markdown-it (issue 11, item 11).

`render_markdown` sets math spans aside before markdown-it runs and puts them back after; that
used to be quadratic (20,000 unclosed `\\(` took 18.6 s, 25,000 closed `$$…$$` spans 8.6 s).
For each text below: the median time of `render_markdown(text, highlight=False)` against
markdown-it's own render of the same text (commonmark + tables + strikethrough, as the renderer
configures it), same process, interleaved repetitions, CPU time. Markdown-it alone can be the
slower of the two (it parses `_`, `*` and `\\(` inside the math that nbchat sets aside), so each
text also gets nbchat's own share: its time minus markdown-it's on the text as nbchat hands it
over (math replaced by markers); the issue's target is well under a second for a 1 MB reply.
`main()` returns the table rows as dicts for `bench/run_all.py`. Figures only, never an
assertion.

    python bench/render_math.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import harness
from harness import Figure
from markdown_it import MarkdownIt

from nbchat.ui.render import render_markdown, set_math_aside

UNCLOSED_REPEATS = 20_000
CLOSED_SPANS = 25_000
REPLY_CHARS = 1_000_000
REPEATS = 5
TARGET_RATIO = 2.0
TARGET_EXTRA_SECONDS = 0.5


def texts() -> dict[str, str]:
    """The texts measured, by name."""
    paragraph = (
        "The energy is $E = mc^2$ and the sum $$\\sum_{i=1}^{n} x_i$$ converges when "
        "\\(|x| < 1\\); costs rose from $5 to $10 while \\[a^2 + b^2 = c^2\\] still holds.\n\n"
    )
    reply = (paragraph * (REPLY_CHARS // len(paragraph) + 1))[:REPLY_CHARS]
    return {
        f"{UNCLOSED_REPEATS:,} unclosed \\(": "\\( x " * UNCLOSED_REPEATS,
        f"{CLOSED_SPANS:,} closed $$…$$": " ".join(
            f"$$x_{{{index}}}$$" for index in range(CLOSED_SPANS)
        ),
        "a reply with math": reply,
    }


def markdown_it() -> MarkdownIt:
    """markdown-it as the renderer configures it, without nbchat's math handling."""
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def interleaved_medians(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The median seconds of each run, the runs taking turns so drift hits them alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.process_time()
            run()
            times[name].append(time.process_time() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def measure(name: str, text: str) -> list[Figure]:
    parser = markdown_it()
    marked, _spans = set_math_aside(text)
    medians = interleaved_medians(
        {
            "nbchat": lambda: render_markdown(text, highlight=False),
            "same text": lambda: parser.render(text),
            "as handed over": lambda: parser.render(marked),
        },
        REPEATS,
    )
    ours, same = medians["nbchat"], medians["same text"]
    extra = ours - medians["as handed over"]
    ratio = ours / max(same, 1e-9)
    return [
        Figure(
            f"render_markdown, {name} ({len(text):,} chars)",
            f"{ours:.3f} s CPU",
            f"{same:.3f} s markdown-it on the same text",
            f"{ratio:.2f}",
            f"<= {TARGET_RATIO}",
            ratio <= TARGET_RATIO,
        ),
        Figure(
            f"render_markdown, {name}: CPU beyond markdown-it's own",
            f"{extra:.3f} s",
            f"{medians['as handed over']:.3f} s markdown-it on the text as handed to it",
            target=f"< {TARGET_EXTRA_SECONDS} s",
            met=extra < TARGET_EXTRA_SECONDS,
        ),
    ]


def main() -> list[dict[str, Any]]:
    figures = [figure for name, text in texts().items() for figure in measure(name, text)]
    return [figure.as_dict() for figure in figures]


if __name__ == "__main__":
    harness.print_figures("Math in the renderer against markdown-it", main())

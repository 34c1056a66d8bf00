"""A session's token usage as a chart: prompt tokens per request, with its compactions marked.

`usage_chart(requests, compactions, trigger=...)` takes the store's records
(`Store.list_requests`, `Store.list_compactions`) and returns a `UsageChart`, which a notebook
shows as an inline SVG and whose text form lists the same figures. The SVG is written here, as
text, rather than drawn with matplotlib: nbchat needs no plotting library at run time (a user of
`scripts/run` has none), the same records always give the same bytes (so nbval can compare the
output strictly), and it renders in JupyterLab, a static notebook viewer and a browser alike.

Each compaction is placed after the last request made before it (by the records' timestamps) and
drawn as a dashed line labelled with its kind; retries and edits, which the store records beside
compactions, are not compactions and are left out.

Pure: records in, text out. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = ["CompactionMark", "UsageChart", "usage_chart"]

COMPACTION_KINDS = ("prune", "summary", "chunked")
WIDTH, HEIGHT = 640, 280
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 36, 40
Y_TICKS = 4
BAR_COLOUR = "#4c78a8"
MARK_COLOUR = "#d62728"
TRIGGER_COLOUR = "#f58518"
TEXT_COLOUR = "#333"


@dataclass(frozen=True)
class CompactionMark:
    """A compaction that happened after request number `after` (1-based; 0: before any)."""

    after: int
    kind: str
    tokens_before: int
    tokens_after: int
    rows_replaced: int


@dataclass(frozen=True)
class UsageChart:
    """Prompt tokens per request (None where the server did not say) and the compactions."""

    prompt_tokens: tuple[int | None, ...]
    marks: tuple[CompactionMark, ...]
    trigger: int | None = None
    title: str = "Prompt tokens per request"

    def __repr__(self) -> str:
        known = [tokens for tokens in self.prompt_tokens if tokens is not None]
        peak = f"peak {max(known):,}" if known else "no usage reported"
        trigger = f", trigger {self.trigger:,}" if self.trigger is not None else ""
        lines = [f"{self.title}: {len(self.prompt_tokens)} requests, {peak}{trigger}"]
        for mark in self.marks:
            lines.append(
                f"  {mark.kind} after request {mark.after}: {mark.rows_replaced} rows, "
                f"{mark.tokens_before:,} → {mark.tokens_after:,} tokens"
            )
        return "\n".join(lines)

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def to_svg(self) -> str:
        """The chart as a standalone SVG document."""
        top = _axis_top(
            [t for t in self.prompt_tokens if t is not None]
            + ([self.trigger] if self.trigger is not None else [])
        )
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}">',
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
            _text(LEFT, 20, self.title, size=13),
            *_axes(top, len(self.prompt_tokens)),
            *_bars(self.prompt_tokens, top),
        ]
        if self.trigger is not None:
            parts.extend(_trigger_line(self.trigger, top))
        for mark in self.marks:
            parts.extend(_mark_line(mark, len(self.prompt_tokens)))
        parts.append("</svg>")
        return "\n".join(parts)


def usage_chart(
    requests: Sequence[Mapping[str, Any]],
    compactions: Sequence[Mapping[str, Any]] = (),
    *,
    trigger: int | None = None,
    title: str = "Prompt tokens per request",
) -> UsageChart:
    """A chart of the store's request records, with the compaction records marked."""
    tokens = tuple(_optional_int(request.get("prompt_tokens")) for request in requests)
    stamps = [str(request.get("created") or "") for request in requests]
    marks = tuple(
        CompactionMark(
            after=sum(1 for stamp in stamps if stamp <= str(record.get("created") or "")),
            kind=str(record["kind"]),
            tokens_before=int(record.get("tokens_before") or 0),
            tokens_after=int(record.get("tokens_after") or 0),
            rows_replaced=int(record.get("rows_replaced") or 0),
        )
        for record in compactions
        if record.get("kind") in COMPACTION_KINDS
    )
    return UsageChart(tokens, marks, trigger, title)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _axis_top(values: Sequence[int]) -> int:
    """A round upper end for the y axis, a little above the largest value."""
    largest = max([*values, 1])
    step = 10 ** max(0, len(str(largest)) - 1)
    for multiple in (1, 2, 2.5, 5, 10):
        size = int(step * multiple)
        if size * Y_TICKS >= largest * 1.05:
            return size * Y_TICKS
    return int(step * 10 * Y_TICKS)


def _plot_width() -> int:
    return WIDTH - LEFT - RIGHT


def _plot_height() -> int:
    return HEIGHT - TOP - BOTTOM


def _y(value: float, top: int) -> float:
    return TOP + _plot_height() * (1 - value / top)


def _slot(count: int) -> float:
    return _plot_width() / max(count, 1)


def _axes(top: int, count: int) -> list[str]:
    lines = []
    for tick in range(Y_TICKS + 1):
        value = top * tick // Y_TICKS
        y = _y(value, top)
        lines.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        lines.append(_text(LEFT - 6, y + 4, f"{value:,}", anchor="end"))
    label_y = HEIGHT - BOTTOM + 16
    for number in _x_labels(count):
        x = LEFT + _slot(count) * (number - 0.5)
        lines.append(_text(x, label_y, str(number), anchor="middle"))
    lines.append(_text(LEFT + _plot_width() / 2, HEIGHT - 6, "request", anchor="middle"))
    return lines


def _x_labels(count: int) -> list[int]:
    """Request numbers to label: all of them when few, else about ten evenly spaced."""
    every = max(1, -(-count // 10))
    return [number for number in range(1, count + 1) if (number - 1) % every == 0]


def _bars(tokens: Sequence[int | None], top: int) -> list[str]:
    slot = _slot(len(tokens))
    width = max(1.0, slot * 0.7)
    bars = []
    for index, value in enumerate(tokens):
        if value is None:
            continue  # the server did not report this request's size: a gap, not a zero
        x = LEFT + slot * index + (slot - width) / 2
        y = _y(value, top)
        bars.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
            f'height="{TOP + _plot_height() - y:.1f}" fill="{BAR_COLOUR}">'
            f"<title>request {index + 1}: {value:,} prompt tokens</title></rect>"
        )
    return bars


def _trigger_line(trigger: int, top: int) -> list[str]:
    y = _y(trigger, top)
    return [
        f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
        f'stroke="{TRIGGER_COLOUR}" stroke-dasharray="6 3"/>',
        # At the left, where a session's first requests are usually still under the trigger.
        _text(LEFT + 4, y - 4, f"trigger {trigger:,}", fill=TRIGGER_COLOUR),
    ]


def _mark_line(mark: CompactionMark, count: int) -> list[str]:
    x = LEFT + _slot(count) * mark.after
    label = f"{mark.kind}: {mark.tokens_before:,} → {mark.tokens_after:,}"
    # The label goes on the side with more room, so it stays inside the chart.
    right_half = x > LEFT + _plot_width() / 2
    label_x, anchor = (x - 4, "end") if right_half else (x + 4, "start")
    return [
        f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + _plot_height()}" '
        f'stroke="{MARK_COLOUR}" stroke-width="2" stroke-dasharray="4 3"/>',
        _text(label_x, TOP + 12, label, anchor=anchor, fill=MARK_COLOUR),
    ]


def _text(
    x: float,
    y: float,
    content: str,
    *,
    anchor: str = "start",
    size: int = 11,
    fill: str = TEXT_COLOUR,
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-family="sans-serif" '
        f'font-size="{size}" fill="{fill}">{escape(content)}</text>'
    )

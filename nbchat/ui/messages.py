"""The message list: one widget per message, streaming without re-sending what is finished.

`StreamingText` renders a growing markdown text as a list of frozen block widgets (each sent
once) plus one live tail widget: only the tail is re-sent while the reply streams, at most
`max_rate` times a second. `MessageList` holds every message of the session but keeps widgets
only for the newest `live_limit` of them; older ones are built on demand by "Show earlier".

Widgets only: the HTML comes from `render`, the events from the worker. No SQL, HTTP or prompts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ipywidgets as widgets
from ipywidgets.widgets.widget_string import HTMLMathStyle

from nbchat.ui.render import render_markdown, split_stable_blocks

__all__ = ["MessageList", "StreamingText"]

# A live tail longer than this is cut at a line break into a provisional block, so one long
# paragraph is not re-sent whole on every update; when the paragraph ends it is rendered whole.
TAIL_SPLIT_AT = 2000


@dataclass
class _Block:
    source: str
    widget: widgets.HTMLMath
    provisional: bool


class StreamingText:
    """A markdown text that grows: frozen blocks + a throttled live tail."""

    def __init__(self, *, max_rate: float = 15.0, label: str = "") -> None:
        self.box = widgets.VBox(layout=widgets.Layout(width="100%"))
        # Whose message it is, above the text (`render_label`): never re-sent while it streams.
        self._head = (widgets.HTML(value=label),) if label else ()
        self._parts: list[str] = []  # joined at each flush: `+=` would copy the text per delta
        self.updates = 0  # widget updates sent, for the tests and the benchmark
        self._rendered_upto = 0  # characters of `text` that live in blocks
        self._blocks: list[_Block] = []
        # Every block shares one layout and one style: a new block then costs one message to the
        # browser instead of three (ipywidgets gives each widget its own by default).
        self._layout = widgets.Layout()
        self._style = HTMLMathStyle()
        self._tail = self._html("")
        self.box.children = (*self._head, self._tail)
        self._interval = 1.0 / max_rate
        self._last_flush = -1e9

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def append(self, delta: str, *, now: float | None = None) -> None:
        """Add streamed text; re-renders only when the throttle interval has passed."""
        self._parts.append(delta)
        moment = time.monotonic() if now is None else now
        if moment - self._last_flush >= self._interval:
            self.flush(now=moment)

    def flush(self, *, now: float | None = None) -> None:
        """Render what arrived since the last flush: new finished blocks, then the tail."""
        self._last_flush = time.monotonic() if now is None else now
        finished, tail = split_stable_blocks(self.text[self._rendered_upto :])
        if finished:
            self._add_block(self._take_provisional() + finished, provisional=False)
        if len(tail) > TAIL_SPLIT_AT and "\n" in tail[: -TAIL_SPLIT_AT // 2]:
            cut = tail.rindex("\n", 0, len(tail) - TAIL_SPLIT_AT // 2) + 1
            self._add_block(tail[:cut], provisional=True)
            tail = tail[cut:]
        self._show_tail(tail)

    def finish(self) -> None:
        """The message is complete: render the rest once; nothing is sent after this."""
        self.flush()
        self._take_provisional()  # re-rendered whole below, with the rest
        rest = self.text[self._rendered_upto :]
        if rest:
            self._add_block(rest, provisional=False)
        self._show_tail("")
        self.box.children = (*self._head, *[block.widget for block in self._blocks])

    def _take_provisional(self) -> str:
        """Remove the trailing provisional blocks and return their text (to render it whole)."""
        taken = ""
        while self._blocks and self._blocks[-1].provisional:
            block = self._blocks.pop()
            taken = block.source + taken
            self._rendered_upto -= len(block.source)
        return taken

    def _add_block(self, source: str, *, provisional: bool) -> None:
        block = _Block(source, self._html(render_markdown(source)), provisional)
        self._blocks.append(block)
        self._rendered_upto += len(source)
        self.box.children = (*self._head, *[b.widget for b in self._blocks], self._tail)
        self.updates += 1

    def _html(self, value: str) -> widgets.HTMLMath:
        return widgets.HTMLMath(value=value, layout=self._layout, style=self._style)

    def _show_tail(self, tail: str) -> None:
        html = render_markdown(tail, highlight=False) if tail else ""  # coloured once frozen
        if self._tail.value != html:
            self._tail.value = html
            self.updates += 1


class MessageList:
    """Every message of the session; widgets for the newest `live_limit` only.

    Each message is added as a factory that builds its widget, so an old message costs nothing
    until "Show earlier" asks for it.
    """

    def __init__(self, *, live_limit: int = 200) -> None:
        self.live_limit = live_limit
        self.box = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.box.add_class("nbchat-messages")
        self._factories: list[Callable[[], widgets.Widget]] = []
        self._built: dict[int, widgets.Widget] = {}
        self._shown_from = 0
        self._earlier = widgets.Button(description="Show earlier", layout={"width": "auto"})
        self._earlier.on_click(self._on_earlier_click)

    def __len__(self) -> int:
        return len(self._factories)

    def clear(self) -> None:
        self._factories, self._built, self._shown_from = [], {}, 0
        self.box.children = ()

    def extend(self, factories: Sequence[Callable[[], widgets.Widget]]) -> None:
        """Add many messages at once (a loaded session), building only the newest."""
        self._factories.extend(factories)
        self._shown_from = max(self._shown_from, len(self._factories) - self.live_limit)
        self._refresh()

    def add(self, widget: widgets.Widget) -> widgets.Widget:
        """Add one message at the end; the oldest live one is dropped past the limit."""
        self._factories.append(lambda: widget)
        self._built[len(self._factories) - 1] = widget
        self._shown_from = max(self._shown_from, len(self._factories) - self.live_limit)
        self._refresh()
        return widget

    def show_earlier(self, count: int | None = None) -> None:
        """Build and show up to `count` (default `live_limit`) older messages."""
        self._shown_from = max(0, self._shown_from - (count or self.live_limit))
        self._refresh()

    def _on_earlier_click(self, _button: widgets.Button) -> None:
        self.show_earlier()

    def _refresh(self) -> None:
        for index in list(self._built):
            if index < self._shown_from:
                del self._built[index]  # released: rebuilt if shown again
        shown = []
        for index in range(self._shown_from, len(self._factories)):
            if index not in self._built:
                self._built[index] = self._factories[index]()
            shown.append(self._built[index])
        if self._shown_from > 0:
            self._earlier.description = f"Show earlier ({self._shown_from} more)"
            shown.insert(0, self._earlier)
        self.box.children = tuple(shown)

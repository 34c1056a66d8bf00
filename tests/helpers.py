"""What several test files (and the benchmarks) need alike: recognising a summary request,
running a turn, reading back what a widget shows, recording what widgets would send, telling
whether a check's time grows linearly with its text."""

from __future__ import annotations

import collections
import html
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import comm
import ipywidgets as widgets
from comm.base_comm import BaseComm
from fakeserver import Reply

from nbchat.compaction.prompts import SUMMARY_SYSTEM_PROMPT
from nbchat.conversation.events import Event, RowSaved
from nbchat.conversation.loop import Conversation
from nbchat.history import Row
from nbchat.store.rowsql import check_row


def is_summary_request(body: dict[str, Any]) -> bool:
    """Whether a request the test server received came from the summariser."""
    first = (body.get("messages") or [{}])[0]
    return "response_format" in body or first.get("content") == SUMMARY_SYSTEM_PROMPT


def run(chat: Conversation, text: str, stop: threading.Event | None = None) -> list[Event]:
    """Every event of one turn."""
    return list(chat.send(text, stop))


def saved(events: list[Event]) -> list[Row]:
    """The rows a turn stored, in order."""
    return [event.row for event in events if isinstance(event, RowSaved)]


def is_loadable(row: Row) -> bool:
    """Whether the store would accept (and read back) the row."""
    try:
        check_row(row)
    except ValueError:
        return False
    return True


def shown_text(root: widgets.Widget) -> str:
    """Every string value under `root` (HTML unescaped), in order."""
    found: list[str] = []

    def walk(widget: widgets.Widget) -> None:
        value = getattr(widget, "value", None)
        if isinstance(value, str):
            found.append(value)
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(root)
    return html.unescape("\n".join(found))


def buttons(root: widgets.Widget) -> list[widgets.Button]:
    """Every button under `root`, in order."""
    found = [root] if isinstance(root, widgets.Button) else []
    for child in getattr(root, "children", ()):
        found.extend(buttons(child))
    return found


class RecordingComm(BaseComm):
    """A comm that serialises each message as a kernel would and records (time, comm, bytes);
    and, in `custom`, each custom message's content (a widget's `send`) with its comm."""

    sent: list[tuple[float, str, int]] = []
    custom: list[tuple[str, Any]] = []
    lock = threading.Lock()

    def publish_msg(
        self,
        msg_type: str,
        data: Any = None,
        metadata: Any = None,
        buffers: Any = None,
        **keys: Any,
    ) -> None:
        size = len(json.dumps(data, default=str))
        with RecordingComm.lock:
            RecordingComm.sent.append((time.monotonic(), self.comm_id, size))
            if isinstance(data, dict) and data.get("method") == "custom":
                RecordingComm.custom.append((self.comm_id, data["content"]))


@contextmanager
def recording_comms() -> Iterator[list[tuple[float, str, int]]]:
    """Widgets created inside get a `RecordingComm`; the original factory is put back."""
    original = comm.create_comm
    RecordingComm.sent = []
    RecordingComm.custom = []
    comm.create_comm = lambda *args, **kwargs: RecordingComm(*args, **kwargs)
    try:
        yield RecordingComm.sent
    finally:
        comm.create_comm = original


def from_front_end(widget: widgets.Widget, content: dict[str, Any]) -> None:
    """`content` arrives at the widget as its front-end code's `model.send(content)` would."""
    message = {"content": {"data": {"method": "custom", "content": content}}, "buffers": []}
    widget.comm.handle_msg(message)


def transcript_bytes(outputs: list[dict[str, Any]], display_id: str, comm_id: str) -> int:
    """The bytes a transcript sent so far, as JSON: its displays and display updates among
    `outputs` (a `CapturingDisplayPublisher`'s), and its saved copy's comm messages."""
    shown = [
        {key: output[key] for key in ("data", "metadata", "transient")}
        for output in outputs
        if (output.get("transient") or {}).get("display_id") == display_id
    ]
    displays = sum(len(json.dumps(output)) for output in shown)
    with RecordingComm.lock:
        return displays + sum(size for _, sent_on, size in RecordingComm.sent if sent_on == comm_id)


class Script:
    """A test server's responder: summary requests get `summary(body)` (by default the given
    summary text), chat requests the next scripted reply (or "ok"), so a test scripts the
    conversation without counting summary requests."""

    def __init__(self, summary_text: str) -> None:
        self.chat: collections.deque[Reply] = collections.deque()
        self.summary: Callable[[dict[str, Any]], Reply] = lambda body: Reply(text=summary_text)

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return self.summary(body)
        return self.chat.popleft() if self.chat else Reply(text="ok")


def grows_linearly(check: Callable[[str], object], piece: str) -> bool:
    """Whether `check` over `piece` repeated to 10 MB takes under 30 times as long as over
    1 MB: ten times the text, about ten times the time (a rule that backtracks grows with its
    square). One run first warms the pattern."""

    def seconds(size: int) -> float:
        text = piece * (size // len(piece))
        started = time.process_time()
        check(text)
        return time.process_time() - started

    seconds(100_000)
    small, large = seconds(1_000_000), seconds(10_000_000)
    return large / max(small, 1e-4) < 30

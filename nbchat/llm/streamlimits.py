"""The limits a streamed reply is held to, outside the SSE decoder: a stream that sends only keep-
alives is given up (`IdleWatch`), and one event past its byte bound is refused (`bound_events`).

`IdleWatch`: ends a streamed reply that sends no data for too long.

httpx's read timeout is per socket read, so a server that sends only SSE keep-alive comments
(`: ping`) resets it forever while the reply never moves. The reader calls `touch()` at every
data chunk; a watcher thread calls `on_idle` (which shuts the stream's socket, so the blocked
read ends) once `timeout` seconds pass without one, and `fired` tells the reader why it ended.

Must not: read the stream or classify errors; `nbchat.client` does both.

The bound on one server-sent event's size, enforced on the HTTP body before the SSE decoder.

openai's SSE decoder keeps a line, and an event's data lines, in memory until they end, with no
limit of its own. A server that sends one line without an end for hundreds of megabytes (broken,
or hostile) would make the kernel hold all of it. `bound_events` swaps a streamed response's byte
stream for one that counts the bytes of the event being received (since the last blank line,
which ends an SSE event) and raises a `ServerError` once they pass the limit, so at most the limit
plus one network read is ever buffered. What the decoder had already turned into chunks was
delivered before, so the reply so far is kept like any other broken stream's.

The limit follows the reply's own bound: one event can carry at most the whole reply's
characters, each at most `MAX_BYTES_PER_CHAR` bytes once JSON-escaped, plus its envelope.

Chat requests ask for an uncompressed body (`IDENTITY`): the bound counts the bytes that reach the
decoder, which is only true when nothing inflates them on the way.

Must not: parse events, or know about replies beyond their character bound.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType

import httpx2

from nbchat.errors import ServerError

__all__ = ["BoundedEvents", "IDENTITY", "IdleWatch", "bound_events", "event_byte_limit"]


class IdleWatch:
    """Call `on_idle` once when `touch()` was not called for `timeout` seconds (None: never)."""

    def __init__(self, timeout: float | None, on_idle: Callable[[], None]) -> None:
        self.timeout = timeout
        self.fired = False
        self._on_idle = on_idle
        self._last = time.monotonic()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def touch(self) -> None:
        """Data arrived: the idle time starts again (one float store, cheap on every chunk)."""
        self._last = time.monotonic()

    def __enter__(self) -> IdleWatch:
        if self.timeout is not None and self.timeout > 0:
            self._last = time.monotonic()
            self._thread = threading.Thread(target=self._watch, name="nbchat-idle", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        assert self.timeout is not None
        while True:
            left = self._last + self.timeout - time.monotonic()
            if left <= 0:
                self.fired = True
                self._on_idle()
                return
            if self._done.wait(left):
                return


# A character JSON-escaped as a surrogate pair ("\ud83d\ude00") takes 12 bytes.
MAX_BYTES_PER_CHAR = 12
ENVELOPE_BYTES = 65_536  # id, model, usage, timings: what an event carries besides the reply
IDENTITY = {"Accept-Encoding": "identity"}
LINE_END = re.compile(rb"[\r\n]")


def event_byte_limit(reply_chars: int) -> int:
    """The most bytes one SSE event may take for a reply bounded at `reply_chars` characters."""
    return reply_chars * MAX_BYTES_PER_CHAR + ENVELOPE_BYTES


class BoundedEvents(httpx2.SyncByteStream):
    """A response body that refuses an SSE event (or line) longer than `limit` bytes."""

    def __init__(
        self,
        inner: httpx2.SyncByteStream,
        *,
        limit: int,
        url: str,
        note: Callable[[], str] = lambda: "",
    ) -> None:
        self.inner = inner
        self.limit = limit
        self.url = url
        self.note = note  # what became of the reply so far, said at the end of the message
        self.pending = 0  # bytes of the event being received
        self.line = 0  # bytes of the line being received (0: at the start of a line)
        self.after_cr = False  # the last byte was a CR: an LF right after it ends nothing

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self._count(chunk)
            yield chunk

    def close(self) -> None:
        self.inner.close()

    def _count(self, chunk: bytes) -> None:
        start = 0
        for match in LINE_END.finditer(chunk):
            end = match.start()
            crlf = self.after_cr and end == start and chunk[end] == 10
            self.after_cr = chunk[end] == 13
            if crlf:
                start = end + 1
                continue
            self.line += end - start
            # An empty line ends the event; a line's end itself counts as one byte of it.
            self.pending = 0 if self.line == 0 else self.pending + self.line + 1
            self.line, start = 0, end + 1
        if start < len(chunk):
            self.after_cr = False
            self.line += len(chunk) - start
        if self.pending + self.line > self.limit:
            raise ServerError(
                f"The model server at {self.url} sent more than {self.limit:,} bytes in one "
                "server-sent event without ending it, far more than one reply may take, so the "
                "stream was given up before it could fill this kernel's memory. Check the "
                f"server (or a proxy in front of it): its stream is broken. {self.note()}".strip()
            )


def bound_events(
    response: httpx2.Response, *, limit: int, url: str, note: Callable[[], str]
) -> None:
    """Make `response`'s body refuse events over `limit` bytes (call before reading it);
    `note()` says what became of the reply so far."""
    if isinstance(response.stream, httpx2.SyncByteStream):
        response.stream = BoundedEvents(response.stream, limit=limit, url=url, note=note)

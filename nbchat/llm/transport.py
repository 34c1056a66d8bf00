"""The HTTP layer under the openai client: a request's sockets can be shut from another thread
whatever phase it is in, and a streamed body is held to its limits (no data for too long, one
event past its byte bound).

Sockets shut from another thread: Stop (and a background job's cancel, and `close()`) must free the
server at once. Once a streamed response exists its socket is at hand, but before that (connecting,
sending the body, waiting for the response headers, which llama.cpp sends only once it has read the
whole prompt) httpx2 offers no handle on it, and a close from another thread does not wake a blocked
`recv()`. So `http_client` builds an `httpx2.Client` whose connection pool opens its sockets through
`WatchedBackend`: each connection is handed, when a request writes to it, to the `Release` the
request runs under (`releasing(release)`; httpx2's sync client does the whole request in the calling
thread, so a context variable carries it to the pool). `release()` shuts those sockets down: a
blocked read or write returns at once, the server sees the connection closed, and the request raises
`RequestCancelledError`, which the openai SDK lets through without retrying. A connection another
request reuses is handed to that request, so a release never touches a socket it no longer owns.

The limits a streamed reply is held to, outside the SSE decoder. `IdleWatch` ends a streamed reply
that sends no data for too long: httpx's read timeout is per socket read, so a server that sends
only SSE keep-alive comments (`: ping`) resets it forever while the reply never moves. The reader
calls `touch()` at every data chunk; a watcher thread calls `on_idle` (which shuts the stream's
socket, so the blocked read ends) once `timeout` seconds pass without one, and `fired` tells the
reader why it ended.

The bound on one server-sent event's size is enforced on the HTTP body before the SSE decoder.
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

Must not: know about chat requests or rows, who fires the release, or replies beyond their
character bound; parse events, read the stream or classify errors (`nbchat.llm.client` does).
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import re
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
from httpcore2 import NetworkBackend, NetworkStream

from nbchat.errors import NbchatError, ServerError

__all__ = [
    "BoundedEvents",
    "IDENTITY",
    "IdleWatch",
    "Release",
    "RequestCancelledError",
    "WatchedBackend",
    "bound_events",
    "event_byte_limit",
    "http_client",
    "releasing",
    "shut_down",
]


SocketOption = Any  # httpcore2's socket option tuples, handed through untouched

_current: contextvars.ContextVar[Release | None] = contextvars.ContextVar(
    "nbchat_release", default=None
)


class RequestCancelledError(NbchatError):
    """The request's sockets were shut by its `Release` (Stop, a cancel, close)."""


class Release:
    """One request's hold on the sockets it uses; `release()` may be called from any thread.

    `close()` ends the hold when the request is over: its connection may then serve another
    request, and a late `release()` must leave it alone.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: list[_WatchedStream] = []
        self._others: list[Callable[[], None]] = []
        self._closed = False
        self.released = False

    def adopt(self, stream: _WatchedStream) -> None:
        """`stream` now carries this request (shut at once if it was released already)."""
        with self._lock:
            if self._closed:  # over: the stream carries a request nobody can release
                stream.owner = None
                return
            stream.owner = self
            self._streams.append(stream)
            released = self.released
        if released:
            shut_down(stream.get_extra_info("socket"))

    def hold_response(self, response: httpx2.Response) -> None:
        """Also end `response` on release. Only a client built without `http_client` (a
        caller's own `openai.OpenAI`) needs this, and for it the phase before the response
        stays out of reach."""
        network = response.extensions.get("network_stream")
        if isinstance(network, _WatchedStream):
            return  # ours: this request has owned it since its first write
        sock = network.get_extra_info("socket") if network is not None else None

        def end() -> None:
            if isinstance(sock, socket.socket):
                shut_down(sock)
            else:
                response.close()

        with self._lock:
            if not self._closed:
                self._others.append(end)
            released = self.released and not self._closed
        if released:
            end()

    def release(self) -> None:
        """Shut down every socket this request still owns; later ones are shut as they open."""
        with self._lock:
            if self._closed or self.released:
                return
            self.released = True
            owned = [s.get_extra_info("socket") for s in self._streams if s.owner is self]
            others = list(self._others)
        for sock in owned:
            shut_down(sock)
        for end in others:
            end()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._streams.clear()
            self._others.clear()


@contextlib.contextmanager
def releasing(release: Release) -> Iterator[Release]:
    """Requests made in this block, in this thread, use sockets `release` can shut."""
    token = _current.set(release)
    try:
        yield release
    finally:
        _current.reset(token)


def shut_down(sock: object) -> None:
    # Closing a socket from another thread does not wake a recv() blocked on it; shutting it
    # down does (the reader sees EOF), and the reading thread then closes it itself.
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):  # already closed: the read it would release is over
            sock.shutdown(socket.SHUT_RDWR)


class _WatchedStream(NetworkStream):
    """A connection's stream that knows which request it carries and whether it was released."""

    def __init__(self, inner: NetworkStream) -> None:
        self.inner = inner
        self.owner: Release | None = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with self._cancellation():
            data = self.inner.read(max_bytes, timeout)
        if not data:  # a shut-down socket reads as the server's EOF: say what it really is
            self._raise_if_released(None)
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _hand_to_current(self)  # a request starts by writing: this connection is now its own
        self._raise_if_released(None)
        with self._cancellation():
            self.inner.write(buffer, timeout)

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> NetworkStream:
        with self._cancellation():
            wrapped = _WatchedStream(self.inner.start_tls(ssl_context, server_hostname, timeout))
        _hand_to_current(wrapped)
        return wrapped

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)

    @contextlib.contextmanager
    def _cancellation(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            self._raise_if_released(exc)
            raise

    def _raise_if_released(self, cause: Exception | None) -> None:
        owner = self.owner
        if owner is not None and owner.released:
            raise RequestCancelledError(
                "The request was cancelled before it was complete; the server was told at once."
            ) from cause


def _hand_to_current(stream: _WatchedStream) -> None:
    release = _current.get()
    if release is None:
        stream.owner = None  # a request nobody can release: no earlier owner may shut it
    else:
        release.adopt(stream)


class WatchedBackend(NetworkBackend):
    """httpcore2's network backend, with every stream it opens watched (see the module)."""

    def __init__(self, inner: NetworkBackend) -> None:
        self.inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> NetworkStream:
        _refuse_if_released()
        stream = self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _watched(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> NetworkStream:
        _refuse_if_released()
        return _watched(self.inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def _refuse_if_released() -> None:
    release = _current.get()
    if release is not None and release.released:
        raise RequestCancelledError("The request was cancelled before it was sent.")


def _watched(stream: NetworkStream) -> _WatchedStream:
    watched = _WatchedStream(stream)
    _hand_to_current(watched)  # a connect that outlived a release is shut here
    return watched


def http_client(base_url: str) -> httpx2.Client:
    """The `httpx2.Client` for an `openai.OpenAI` talking to `base_url`: the SDK's defaults,
    with sockets a `Release` can shut, and the proxy the environment names for `base_url`."""
    transport = httpx2.HTTPTransport(
        proxy=_proxy_for(base_url), limits=openai.DEFAULT_CONNECTION_LIMITS
    )
    # httpx2 takes no network backend, but its pool does (httpcore2's public parameter); the
    # pool is built inside the transport, so its backend is wrapped in place.
    pool = transport._pool
    pool._network_backend = WatchedBackend(pool._network_backend)
    return _Client(transport=transport)


class _Client(openai.DefaultHttpxClient):
    """openai's default client; like the one openai builds itself, it closes its connections
    when it is dropped without `close()`."""

    def __del__(self) -> None:
        if not self.is_closed:
            with contextlib.suppress(Exception):  # at interpreter exit its modules may be gone
                self.close()


def _proxy_for(base_url: str) -> str | None:
    # A client given its own transport ignores the environment's proxies, so they are read
    # here, as httpx2 reads them for its own: HTTP(S)_PROXY or ALL_PROXY, unless NO_PROXY
    # names the host (the standard library parses both). A server on this machine (the
    # embedded one listens on 127.0.0.1 only) is never reached through a proxy.
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if not host or _is_loopback(host) or urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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

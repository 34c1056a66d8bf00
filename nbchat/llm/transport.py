"""The HTTP transport of nbchat's clients: a request's sockets can be shut from another thread,
whatever phase the request is in.

Stop (and a background job's cancel, and `close()`) must free the server at once. Once a
streamed response exists its socket is at hand, but before that (connecting, sending the body,
waiting for the response headers, which llama.cpp sends only once it has read the whole
prompt) httpx2 offers no handle on it, and a close from another thread does not wake a blocked
`recv()`. So `http_client` builds an `httpx2.Client` whose connection pool opens its sockets
through `WatchedBackend`: each connection is handed, when a request writes to it, to the
`Release` the request runs under (`releasing(release)`; httpx2's sync client does the whole
request in the calling thread, so a context variable carries it to the pool). `release()`
shuts those sockets down: a blocked read or write returns at once, the server sees the
connection closed, and the request raises `RequestCancelledError`, which the openai SDK lets
through without retrying. A connection another request reuses is handed to that request, so a
release never touches a socket it no longer owns.

Must not: know about chat requests, rows or who fires the release.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import socket
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
from httpcore2 import NetworkBackend, NetworkStream

from nbchat.errors import NbchatError

__all__ = [
    "Release",
    "RequestCancelledError",
    "WatchedBackend",
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

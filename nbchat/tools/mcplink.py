"""`McpLink`: one MCP server's client session (the official `mcp` SDK), on an event loop of its
own in a background thread, and what the rest of nbchat needs of it in plain synchronous calls.

The SDK is async (anyio) and a session must be entered and left by one task, while nbchat runs
tools on its worker thread. So each server gets a daemon thread running a private asyncio loop
(started by `begin`, never at import and never in the kernel's thread). One task there opens
the transport (a child process over stdio, or streamable HTTP with the server's headers),
holds the session, says the MCP handshake, lists the tools and then waits to be closed; each
call is submitted to that loop and waited for under a deadline and the Stop signal, and
cancelled on the loop when either comes first. A stdio server's stderr is kept as a short tail,
to say why it failed.

Everything that leaves this module (an error, a notice, a tool result) has the server's secrets
(env and header values, a URL with a token) replaced first (`McpServer.redactions`). A server's
process gets only its own `env` over a minimal environment (PATH, HOME, ...: the SDK's default),
never nbchat's or the kernel's other variables. What a call sends and returns is shaped in
`nbchat.tools.mcpcall`.

Must not: know about the registry, approval or the chat (nbchat.tools.mcp does); be imported
unless a server is configured (the SDK is an optional extra).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from nbchat.errors import McpError, ToolError
from nbchat.mcpconfig import McpServer, expand, unset_variables
from nbchat.stopping import StopSignal
from nbchat.tools.context import ToolContext
from nbchat.tools.mcpcall import result_text

__all__ = ["ListedTool", "McpLink"]

CLOSE_SECONDS = 8.0  # the SDK's stdio shutdown: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL
POLL_SECONDS = 0.1  # how often a plain Event is checked; a StopSignal wakes at once
STDERR_LINES = 4
STDERR_LINE_CHARS = 300
STDERR_SETTLE_SECONDS = 0.5
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's own: a response may stream long
MAX_PAGES = 100  # tools/list pages: a server whose cursor never ends cannot hang the start
CLOSED_MESSAGE = "Connection closed"  # the SDK's dispatcher, when its connection ends
_live: set[McpLink] = set()  # closed at the interpreter's exit
_exit_hook = threading.Lock()
_hooked = False


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server lists it: its own name, description and input schema."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass
class _Stderr:
    """The last lines a stdio server wrote on stderr (bounded), read by a small thread."""

    lines: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))

    reader: threading.Thread | None = None

    def open(self) -> TextIO:
        """The write end for the server's process (close it once the process has it)."""
        reading, writing = os.pipe()
        self.reader = threading.Thread(target=self._drain, args=(reading,), daemon=True)
        self.reader.start()
        return os.fdopen(writing, "w")

    def settle(self) -> None:
        """Wait briefly for what a process that ended wrote last (its pipe then closes)."""
        if self.reader is not None:
            self.reader.join(STDERR_SETTLE_SECONDS)

    def _drain(self, fd: int) -> None:
        pending = b""
        with os.fdopen(fd, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                *complete, pending = (pending + chunk).split(b"\n")
                pending = pending[-STDERR_LINE_CHARS:]
                self.lines.extend(
                    text for line in complete if (text := _line(line)) and not text.isspace()
                )
        if pending.strip():
            self.lines.append(_line(pending))

    def tail(self) -> str:
        return " | ".join(self.lines)


class McpLink:
    """One server's session. `begin()` starts it in the background, `tools()` waits for its
    listing, `call()` runs a tool, `close()` ends it (and its process). `failure` says why it
    is down once it is."""

    def __init__(self, server: McpServer, *, workspace: Path, start_timeout: float) -> None:
        self.server = server
        self.workspace = workspace
        self.start_timeout = start_timeout
        self.failure = ""
        self._ready: concurrent.futures.Future[tuple[ListedTool, ...]] = concurrent.futures.Future()
        self._stderr = _Stderr()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scope: anyio.CancelScope | None = None
        self._session: ClientSession | None = None
        self._thread: threading.Thread | None = None
        self._odd_output = ""
        self._http_status = 0  # the last HTTP error status (the SDK's error does not say it)
        self._began = 0.0
        self._lock = threading.Lock()  # `close` and the loop's scope, which may come first
        self._closed = False

    def __repr__(self) -> str:
        return f"McpLink({self.server.name!r})"

    def redact(self, text: str) -> str:
        """`text` with the server's secrets replaced (every message goes through this)."""
        for secret, shown in self.server.redactions():
            text = text.replace(secret, shown)
        return text

    def begin(self) -> None:
        """Start the session's thread (once); it starts the server and lists its tools."""
        if self._thread is not None:
            return
        _hook_exit()
        _live.add(self)
        self._began = time.monotonic()  # servers started together share one deadline
        self._thread = threading.Thread(
            target=self._run, name=f"nbchat-mcp-{self.server.name}", daemon=True
        )
        self._thread.start()

    def tools(self, stop: threading.Event | None = None) -> tuple[ListedTool, ...] | None:
        """The listed tools, waiting for the start at most `start_timeout`; None when Stop
        came first (the start goes on). McpError naming the server when it did not start."""
        self.begin()
        state = _wait(self._ready, self._began + self.start_timeout, stop)
        if state == "stopped":
            return None
        if state == "timed out":
            self.close(wait=0.0)
            raise McpError(self._timed_out_message())
        error = self._ready.exception()
        if error is not None:
            raise McpError(self.redact(str(error))) from None
        return self._ready.result()

    def call(self, name: str, arguments: Mapping[str, Any], context: ToolContext) -> str:
        """Run tool `name` and return its result as text; ToolError (for the model) when it
        cannot, cancelling the call on the loop at the deadline or on Stop."""
        loop, session = self._loop, self._session
        if self.failure or loop is None or session is None:
            raise ToolError(self._down_message())
        future = asyncio.run_coroutine_threadsafe(session.call_tool(name, dict(arguments)), loop)
        deadline = context.deadline or time.monotonic() + context.timeout
        state = _wait(future, deadline, context.stop)
        if state != "done":
            future.cancel()
            raise self._abandoned(name, state, context.timeout)
        try:
            result = future.result()
        except MCPError as exc:
            raise ToolError(self._error_message(name, exc)) from None
        except Exception as exc:
            raise ToolError(self._garbled_message(name, exc)) from None
        if not isinstance(result, types.CallToolResult):
            raise ToolError(self._garbled_message(name, TypeError(type(result).__name__)))
        text = self.redact(result_text(result))
        if result.is_error:
            raise ToolError(f"{name!r} of the MCP server {self.server.name!r} failed: {text}")
        return text

    def close(self, wait: float = CLOSE_SECONDS) -> None:
        """End the session and its process; waits up to `wait` seconds for the SDK's shutdown."""
        _live.discard(self)
        with self._lock:
            self._closed = True
            self.failure = self.failure or "closed"
            loop, scope, thread = self._loop, self._scope, self._thread
        if loop is not None and scope is not None and not loop.is_closed():
            # RuntimeError: the loop ended meanwhile, so there is nothing left to cancel.
            with suppress(RuntimeError):
                loop.call_soon_threadsafe(scope.cancel)
        if thread is not None and wait > 0:
            thread.join(wait)

    # On the session's own thread

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        with self._lock:
            self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        try:
            with anyio.CancelScope() as scope:
                with self._lock:
                    self._scope = scope
                    if self._closed:
                        scope.cancel()
                async with AsyncExitStack() as stack:
                    session = await self._open(stack)
                    listed = await _list_tools(session)
                    self._session = session
                    self._ready.set_result(listed)
                    await anyio.sleep_forever()
        except BaseException as exc:  # every way a session ends is reported, none raised
            reason = self._start_failure(exc)
            if not self._ready.done():
                self._ready.set_exception(McpError(reason))
            self.failure = self.failure or reason
        if not self._ready.done():  # closed before it was ready
            self._ready.set_exception(McpError(f"The MCP server {self.server.name!r} was closed."))
        self.failure = self.failure or "closed"

    async def _open(self, stack: AsyncExitStack) -> ClientSession:
        server = self.server
        missing = unset_variables(server)
        if missing:
            raise McpError(
                f"The MCP server {server.name!r} was not started: its configuration names "
                f"${{{missing[0]}}}, which is not set in the environment (from {server.origin})."
            )
        if server.transport == "http":
            headers = {name: expand(value) for name, value in server.headers}
            client = httpx2.AsyncClient(
                headers=headers,
                timeout=HTTP_TIMEOUT,
                event_hooks={"response": [self._on_response]},
            )
            await stack.enter_async_context(client)
            read, write = await stack.enter_async_context(
                streamable_http_client(server.url, http_client=client)
            )
        else:
            parameters = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env={name: expand(value) for name, value in server.env},
                cwd=self.workspace / server.cwd if server.cwd else self.workspace,
            )
            errlog = self._stderr.open()
            try:
                read, write = await stack.enter_async_context(stdio_client(parameters, errlog))
            finally:
                errlog.close()  # the process holds its own copy: the pipe ends when it does
        session = ClientSession(read, write, message_handler=self._on_message)
        await stack.enter_async_context(session)
        await session.initialize()
        return session

    async def _on_message(self, message: Any) -> None:
        # A line on stdout that is not JSON-RPC: kept, to explain a handshake that never came.
        if isinstance(message, Exception) and not self._odd_output:
            errors = getattr(message, "errors", None)
            found = errors()[0].get("input") if callable(errors) and errors() else message
            self._odd_output = _clip(repr(found) if isinstance(found, str) else str(found), 120)

    async def _on_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._http_status = response.status_code

    # Messages (each redacted)

    def _start_failure(self, exc: BaseException) -> str:
        error = _leaf(exc)
        name, server = self.server.name, self.server
        if isinstance(error, McpError):
            return self.redact(str(error))
        if isinstance(error, anyio.get_cancelled_exc_class()):
            return f"The MCP server {name!r} was closed."
        if isinstance(error, FileNotFoundError) and server.transport == "stdio":
            return self.redact(
                f"The MCP server {name!r} did not start: its command {server.command!r} was "
                f"not found. Install it, or fix command (from {server.origin})."
            )
        said = self._said()
        if isinstance(error, MCPError) and _is_closed(error):
            what = "stopped" if self._ready.done() else "closed the connection before the handshake"
            return self.redact(f"The MCP server {name!r} {what}{said}.")
        where = f" at {server.address()}" if server.transport == "http" else ""
        return self.redact(
            f"The MCP server {name!r}{where} failed: {type(error).__name__}: {error}{said}. "
            "Check that it runs and its configuration (from " + server.origin + ")."
        )

    def _said(self) -> str:
        self._stderr.settle()
        parts = []
        if self._stderr.lines:
            parts.append(f"it said: {self._stderr.tail()}")
        if self._odd_output:
            parts.append(f"it wrote something that is not MCP: {self._odd_output}")
        if self._http_status:
            parts.append(f"it answered HTTP {self._http_status}")
        return f" ({'; '.join(parts)})" if parts else ""

    def _timed_out_message(self) -> str:
        return self.redact(
            f"The MCP server {self.server.name!r} did not finish its start (the MCP handshake "
            f"and the list of its tools) within {self.start_timeout:g} s{self._said()}. Check "
            "that it runs, or raise NBCHAT_MCP_START_TIMEOUT."
        )

    def _down_message(self) -> str:
        reason = self.failure if self.failure != "closed" else "it was closed"
        return self.redact(
            f"The MCP server {self.server.name!r} is not running: {reason}. Its tools cannot "
            "be called; tell the user, or do without them."
        )

    def _abandoned(self, name: str, state: str, timeout: float) -> ToolError:
        if state == "stopped":
            return ToolError(
                f"{name!r} of the MCP server {self.server.name!r} was stopped by the user."
            )
        return ToolError(
            f"{name!r} of the MCP server {self.server.name!r} did not answer within "
            f"{timeout:g} s, so the call was cancelled. Ask for less at once, or raise "
            "NBCHAT_TOOL_TIMEOUT."
        )

    def _error_message(self, name: str, error: MCPError) -> str:
        if _is_closed(error):
            self.failure = self.redact(f"it stopped during a call of {name!r}{self._said()}")
            return self.redact(
                f"The MCP server {self.server.name!r} stopped while running {name!r}"
                f"{self._said()}. Its tools are no longer offered; tell the user."
            )
        return self.redact(
            f"{name!r} of the MCP server {self.server.name!r} failed: {error.message} "
            f"(MCP error {error.code})."
        )

    def _garbled_message(self, name: str, error: Exception) -> str:
        return self.redact(
            f"The MCP server {self.server.name!r} answered {name!r} with something that is not "
            f"a tool result nbchat can read ({type(error).__name__}: {_clip(str(error))})."
        )


async def _list_tools(session: ClientSession) -> tuple[ListedTool, ...]:
    listed: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        listed += [
            ListedTool(tool.name, tool.description or "", dict(tool.input_schema))
            for tool in page.tools
        ]
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(listed)


def _wait(
    future: concurrent.futures.Future[Any], deadline: float, stop: threading.Event | None
) -> str:
    """ "done", "timed out" or "stopped": whichever comes first."""
    wake = threading.Event()
    future.add_done_callback(lambda _: wake.set())
    forget = stop.add_callback(wake.set) if isinstance(stop, StopSignal) else (lambda: None)
    try:
        while not future.done():
            if stop is not None and stop.is_set():
                return "stopped"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timed out"
            wake.wait(min(remaining, POLL_SECONDS))
        return "done"
    finally:
        forget()


def _is_closed(error: MCPError) -> bool:
    """The session's connection ended (the process exited, the stream closed), as opposed to
    one request failing (an SSE event too large gets the same code with its own message)."""
    return error.code == CONNECTION_CLOSED and error.message == CLOSED_MESSAGE


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups."""
    while getattr(error, "exceptions", None):
        error = error.exceptions[0]  # type: ignore[attr-defined]
    return error


def _line(raw: bytes) -> str:
    return _clip(raw.decode("utf-8", "replace").strip(), STDERR_LINE_CHARS)


def _clip(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _hook_exit() -> None:
    """Close every live session when the interpreter (the kernel) exits: registered once, on
    the first start, not at import."""
    global _hooked
    with _exit_hook:
        if not _hooked:
            atexit.register(_close_all)
            # The SDK logs a server's stray output with logging's last resort, which prints it
            # in whatever cell runs; nbchat reports the failure itself, naming the server.
            logging.getLogger("mcp").addHandler(logging.NullHandler())
            _hooked = True


def _close_all() -> None:
    links = list(_live)
    for link in links:
        link.close(wait=0.0)
    deadline = time.monotonic() + CLOSE_SECONDS
    for link in links:
        if link._thread is not None:
            link._thread.join(max(0.0, deadline - time.monotonic()))

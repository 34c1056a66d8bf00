"""`McpTools`: the tools of the user's MCP servers, beside the built-ins in a chat's registry.

A chat owns one `McpTools`. Nothing starts when it is made: `start(registry)` is called on the
chat's worker at the top of each round of a turn (`nbchat.conversation.turn`), so the
servers start when their tools are first needed, the first request of the first turn, and never
on the kernel's thread (a chat opened only to read a session starts nothing). Each server starts
in the background, all at once, each within `mcp_start_timeout`; its tools are registered as
`<server>__<tool>` (OpenAI's name rule: letters, digits, `_`, `-`, at most 64), described as the
server describes them plus its name, with the server's input schema (arguments checked against
it: `nbchat.tools.mcplink.SchemaCheck`). Every MCP tool is `dangerous` (the approval policy
applies) unless `mcp_allow` names its server or the tool. Results are text, capped by the
executor like any tool's; the time limit and Stop cancel the call on the server's loop.

A server that does not start, stops, or answers garbage gives one notice naming it (returned
by `start`, posted by the caller in the transcript); its tools are then no longer offered and
the chat goes on with the rest. `close()` ends every server (and the kernel's exit does, see
`mcplink`). `check_servers` is what `nbchat doctor` asks.

Must not: import the MCP SDK before a server starts (it is an optional extra: `nbchat[mcp]`),
or know about the chat loop, rows or widgets.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from nbchat.config import Settings
from nbchat.errors import McpError
from nbchat.mcpconfig import McpServer, configured_servers
from nbchat.tools.context import ToolContext
from nbchat.tools.registry import Tool, ToolRegistry

if TYPE_CHECKING:  # the SDK is imported with the first server that starts
    from nbchat.tools.mcpcall import SchemaCheck
    from nbchat.tools.mcplink import ListedTool, McpLink

__all__ = ["McpTools", "check_servers", "tool_name"]

SEPARATOR = "__"
NAME_LIMIT = 64
NOT_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")  # one character class: linear
INSTALL_HINT = "pip install 'nbchat[mcp]'"

State = Literal["waiting", "starting", "ready", "failed", "stopped"]


@dataclass
class _Server:
    """One configured server, its session once started, and the tools it added."""

    config: McpServer
    state: State = "waiting"
    link: McpLink | None = None
    names: list[str] = field(default_factory=list)
    reason: str = ""


class McpTools:
    """The MCP servers of one chat (`settings.mcp_servers` and `settings.mcp_config`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._servers: dict[str, _Server] | None = None  # read on the first start
        self._problems: list[str] = []
        self._closed = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        servers = self._servers or {}
        shown = ", ".join(f"{name}: {s.state}" for name, s in servers.items())
        return f"McpTools({shown or 'not started'})"

    @property
    def configured(self) -> bool:
        """Whether any server is configured (without reading the shared file)."""
        return bool(self.settings.mcp_servers or self.settings.mcp_config)

    def start(self, registry: ToolRegistry, stop: threading.Event | None = None) -> list[str]:
        """Start the servers not started yet, register their tools in `registry`, and drop the
        tools of servers that stopped; returns the notices to show (each said once). Returns
        early on Stop (a server still starting is picked up by the next call)."""
        if not self.configured or self._closed:
            return []
        notices = self._configure()
        servers = self._begin_waiting()
        for server in servers.values():
            if server.state == "starting" and server.link is not None:
                try:
                    listed = server.link.tools(stop)
                except McpError as exc:
                    notices.append(self._fail(server, str(exc)))
                    continue
                if listed is None:  # Stop: the rest waits for the next round
                    break
                notices += self._register(server, listed, registry)
        return notices + self._drop_stopped(registry)

    def status(self) -> list[str]:
        """One line per configured server: its tools, or why it has none (for /help)."""
        if self._servers is None:
            lines = [f"{s.name}: starts with your next message" for s in self.settings.mcp_servers]
            if self.settings.mcp_config is not None:
                lines.append(f"those in {self.settings.mcp_config}: start with your next message")
            return lines
        lines = [f"not used: {problem}" for problem in self._problems]
        for name, server in self._servers.items():
            if server.state == "ready":
                lines.append(f"{name}: {len(server.names)} tools ({', '.join(server.names)})")
            elif server.state in ("waiting", "starting"):
                lines.append(f"{name}: starting")
            else:
                lines.append(f"{name}: {server.state}: {server.reason}")
        return lines

    def report(self) -> list[tuple[bool, str]]:
        """(answers?, line) for each configured server and each entry that could not be used."""
        lines = [(False, problem) for problem in self._problems]
        for name, server in (self._servers or {}).items():
            config = server.config
            where = config.address() if config.transport == "http" else config.command
            if server.state == "ready":
                tools = f"{len(server.names)} tools"
                lines.append((True, f"MCP server {name} ({where}) answers: {tools}"))
            else:
                lines.append((False, server.reason or f"MCP server {name} ({where}): not started"))
        return lines

    def close(self) -> None:
        """End every server's session and process (waiting for them together, bounded)."""
        with self._lock:
            self._closed = True
            links = [s.link for s in (self._servers or {}).values() if s.link is not None]
        for link in links:
            link.close(wait=0.0)
        for link in links:
            link.close()

    # Steps of `start`

    def _configure(self) -> list[str]:
        """Read the servers once: nbchat's own, and the shared file's (whose problems are
        the first notices)."""
        with self._lock:
            if self._servers is not None:
                return []
            servers, problems = configured_servers(
                self.settings.mcp_servers, self.settings.mcp_config
            )
            self._servers = {server.name: _Server(server) for server in servers}
            self._problems = problems
        if self._servers and importlib.util.find_spec("mcp") is None:
            names = ", ".join(self._servers)
            reason = f"the mcp package is not installed: {INSTALL_HINT}"
            for server in self._servers.values():
                server.state, server.reason = "failed", reason
            return [*problems, f"MCP servers are configured ({names}) but {reason}."]
        return list(problems)

    def _begin_waiting(self) -> dict[str, _Server]:
        """Start every server not started yet (under the lock `close` takes, so a chat being
        closed starts nothing more)."""
        with self._lock:
            servers = {} if self._closed else self._servers or {}
            for server in servers.values():
                if server.state == "waiting":
                    server.link = self._link(server.config)
                    server.link.begin()
                    server.state = "starting"
        return servers

    def _link(self, server: McpServer) -> McpLink:
        from nbchat.tools.mcplink import McpLink  # the SDK, now that a server starts

        return McpLink(
            server,
            workspace=self.settings.workspace,
            start_timeout=self.settings.mcp_start_timeout,
        )

    def _fail(self, server: _Server, reason: str) -> str:
        server.state, server.reason = "failed", reason
        return f"{reason} The chat goes on without its tools."

    def _register(
        self, server: _Server, listed: tuple[ListedTool, ...], registry: ToolRegistry
    ) -> list[str]:
        from nbchat.tools.mcpcall import SchemaCheck

        assert server.link is not None
        notices = []
        for listing in listed:
            name = tool_name(server.config.name, listing.name)
            refused = ""
            if not listing.name:
                refused = "it has no name"
            elif name in registry:
                refused = f"a tool named {name} exists already"
            try:
                check = SchemaCheck.of(listing.schema)
            except McpError as exc:
                refused = refused or str(exc)
            if refused:
                notices.append(
                    f"The tool {listing.name!r} of the MCP server {server.config.name!r} is not "
                    f"offered: {refused}."
                )
                continue
            registry.register(self._tool(server, listing, name=name, check=check))
            server.names.append(name)
        server.state = "ready"
        return notices

    def _tool(self, server: _Server, listing: ListedTool, *, name: str, check: SchemaCheck) -> Tool:
        link, remote = server.link, listing.name
        assert link is not None

        def call(*, arguments: dict[str, Any], context: ToolContext) -> str:
            return link.call(remote, arguments, context)

        origin = f"the MCP server {server.config.name!r}"
        allowed = {server.config.name, name} & set(self.settings.mcp_allow)
        text = " ".join(listing.description.split())
        return Tool(
            name,
            f"{text} (from {origin})" if text else f"The tool {remote!r} of {origin}.",
            listing.schema,
            call,
            dangerous=not allowed,
            described=check,
            origin=origin,
        )

    def _drop_stopped(self, registry: ToolRegistry) -> list[str]:
        """The tools of servers that stopped since, unregistered; one notice each."""
        notices = []
        for name, server in (self._servers or {}).items():
            failure = server.link.failure if server.link is not None else ""
            if server.state != "ready" or not failure:
                continue
            for tool in server.names:
                if tool in registry:
                    registry.unregister(tool)
            server.state, server.reason = "stopped", failure
            notices.append(
                f"The MCP server {name!r} is no longer running: {failure}. Its tools are no "
                "longer offered in this chat."
            )
        return notices


def tool_name(server: str, tool: str) -> str:
    """The name the model calls: `<server>__<tool>`, with any character OpenAI's rule does not
    allow made `_`, and a name longer than 64 cut and told apart by a short hash."""
    name = NOT_NAME_CHARACTERS.sub("_", f"{server}{SEPARATOR}{tool}")
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: NAME_LIMIT - len(digest) - 1]}_{digest}"


def check_servers(settings: Settings) -> list[tuple[bool, str]]:
    """Start each configured server, list its tools and close it: (answers?, line) each."""
    servers = McpTools(settings)
    try:
        servers.start(ToolRegistry())
    finally:
        servers.close()
    return servers.report()

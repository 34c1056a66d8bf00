"""MCP servers as the user configures them: one `McpServer` value per server, read from the
`[mcp_servers.NAME]` tables of `<home>/config.toml` (or an argument) and from the JSON file other
apps share (`{"mcpServers": {NAME: {...}}}`, named by `mcp_config` / NBCHAT_MCP_CONFIG).

A server runs as a command (`command`, `args`, `env`, `cwd`: stdio) or answers at a URL (`url`,
`headers`: streamable HTTP). nbchat's own table is strict: a bad entry or an unknown field is a
`ConfigError` naming the server and the field, as for every other setting. The shared file is
read entry by entry: other apps write fields nbchat does not use (`autoApprove`, `timeout`), so
those are ignored, and an entry nbchat cannot use becomes one problem naming it while the other
servers still start.

Values in `env` and `headers` are secrets: they are left out of `repr` and of `public()` (what is
stored with a session, shown by `nbchat doctor` and exported), and `${NAME}` in them is filled
from the environment only when the server starts (`expand`), so a token can stay out of the
files. `args` and a URL's path and query are left out of `public()` too: connection strings
with passwords travel in args, and hosted servers put their token in the URL.

Must not: start servers, open the network, or import the MCP SDK (nbchat.tools.mcp does).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from nbchat.errors import ConfigError

__all__ = [
    "McpServer",
    "configured_servers",
    "expand",
    "read_mcp_file",
    "servers_from",
    "unset_variables",
]

Transport = Literal["stdio", "http"]
# The names other apps give the two transports nbchat speaks ("type" in their files).
TRANSPORT_NAMES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
}
STDIO_FIELDS = frozenset({"command", "args", "env", "cwd"})
HTTP_FIELDS = frozenset({"url", "headers"})
COMMON_FIELDS = frozenset({"type", "disabled"})
KNOWN_FIELDS = STDIO_FIELDS | HTTP_FIELDS | COMMON_FIELDS
SHOWN_VALUE_CHARS = 60
Fail = Callable[[str], ConfigError]


@dataclass(frozen=True)
class McpServer:
    """One configured MCP server. `env` and `headers` are (name, value) pairs (a frozen,
    hashable value); `origin` says where it was configured, for messages."""

    name: str
    command: str = ""
    args: tuple[str, ...] = field(default=(), repr=False)
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    cwd: str = ""
    url: str = field(default="", repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    origin: str = field(default="argument", compare=False)

    @property
    def transport(self) -> Transport:
        return "http" if self.url else "stdio"

    def address(self) -> str:
        """The URL as it may be shown: scheme, host and port only (hosted servers often carry
        their token in the URL's path or query)."""
        parts = urlsplit(self.url)
        return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], "", "", ""))

    def redactions(self) -> tuple[tuple[str, str], ...]:
        """(secret, what shows instead) for every value that must never be stored, shown or
        logged: env and header values, as written and as expanded now, and the full URL;
        longest first, so a replacement never leaves a part of a longer secret behind."""
        values = {value for _, value in (*self.env, *self.headers)}
        pairs = {(v, "***") for v in values | {expand(value) for value in values} if v}
        if self.url and self.url.rstrip("/") != self.address():
            pairs.add((self.url, f"{self.address()}/..."))
        return tuple(sorted(pairs, key=lambda pair: len(pair[0]), reverse=True))

    def public(self) -> dict[str, Any]:
        """What may be stored, shown or exported: the command or the URL's address, and only
        the *names* of env variables and headers (args are left out too: connection strings
        with passwords travel there)."""
        if self.transport == "http":
            return {"url": self.address(), "headers": sorted(name for name, _ in self.headers)}
        return {"command": self.command, "env": sorted(name for name, _ in self.env)}


def servers_from(table: Any, *, origin: str) -> tuple[McpServer, ...]:
    """nbchat's own servers (a config.toml table, an argument): a mapping of name to entry (a
    table or an `McpServer`), or `McpServer`s. Strict: the first problem is a ConfigError."""
    if isinstance(table, tuple | list) and all(isinstance(item, McpServer) for item in table):
        return _unique(tuple(table), origin)
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"mcp_servers must be a table of servers ([mcp_servers.NAME] with command or url), "
            f"got {_shown(table)} (from {origin})."
        )
    servers = []
    for name, entry in table.items():
        if isinstance(entry, McpServer):
            servers.append(entry)
            continue
        server = parse_server(str(name), entry, origin=origin, strict=True)
        if server is not None:
            servers.append(server)
    return _unique(tuple(servers), origin)


def read_mcp_file(path: Path) -> tuple[tuple[McpServer, ...], list[str]]:
    """The servers of a shared `{"mcpServers": {...}}` file, and one problem per entry (or for
    the whole file) that nbchat cannot use."""
    origin = f"the MCP configuration file {path}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = "it does not exist" if isinstance(exc, FileNotFoundError) else str(exc)
        return (), [f"Cannot read {origin} ({reason}); fix it or unset NBCHAT_MCP_CONFIG."]
    table = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        return (), [f'{origin} has no "mcpServers" object, so it configures no server.']
    servers, problems = [], []
    for name, entry in table.items():
        try:
            server = parse_server(str(name), entry, origin=origin, strict=False)
        except ConfigError as exc:
            problems.append(f"{exc} That server is not started.")
            continue
        if server is not None:
            servers.append(server)
    return tuple(servers), problems


def parse_server(name: str, entry: Any, *, origin: str, strict: bool) -> McpServer | None:
    """One entry as an `McpServer` (None when it says `disabled = true`); ConfigError naming
    the server and the field. `strict` refuses fields nbchat does not know."""

    def fail(rule: str) -> ConfigError:
        return ConfigError(f"MCP server {name!r} {rule} (from {origin}).")

    if not name.strip():
        raise fail("needs a name")
    if not isinstance(entry, Mapping):
        raise fail(f"must be a table with command or url, got {_shown(entry)}")
    unknown = sorted(set(entry) - KNOWN_FIELDS)
    if strict and unknown:
        raise fail(
            f"has unknown field(s) {', '.join(unknown)}; a server takes command, args, env "
            "and cwd, or url and headers"
        )
    if _flag(entry.get("disabled", False), fail):
        return None
    transport = _transport(entry, fail)
    if transport == "http":
        return McpServer(
            name,
            url=_url(entry.get("url"), fail),
            headers=_pairs(entry, "headers", fail),
            origin=origin,
        )
    return McpServer(
        name,
        command=_text(entry.get("command"), "command", fail),
        args=_strings(entry.get("args", []), fail),
        env=_pairs(entry, "env", fail),
        cwd=_text(entry["cwd"], "cwd", fail) if "cwd" in entry else "",
        origin=origin,
    )


def configured_servers(
    own: tuple[McpServer, ...], shared_file: Path | None
) -> tuple[tuple[McpServer, ...], list[str]]:
    """Every server to start: the shared file's, then nbchat's own (which win over a server of
    the same name there), with the problems of the shared file's entries."""
    shared, problems = read_mcp_file(shared_file) if shared_file is not None else ((), [])
    mine = {server.name for server in own}
    return (*(s for s in shared if s.name not in mine), *own), problems


def expand(value: str) -> str:
    """`value` with each `${NAME}` replaced by the environment variable NAME (an unset one by
    ""). One pass, left to right: linear in the length of `value`."""
    parts, start = [], 0
    for opening, closing, variable in _references(value):
        parts += [value[start:opening], os.environ.get(variable, "")]
        start = closing + 1
    return "".join(parts) + value[start:]


def unset_variables(server: McpServer) -> list[str]:
    """The `${NAME}`s in `server`'s env and header values whose variable is not set."""
    named = (ref[2] for _, value in (*server.env, *server.headers) for ref in _references(value))
    return sorted({variable for variable in named if variable not in os.environ})


def _references(value: str) -> Iterator[tuple[int, int, str]]:
    """Each `${NAME}` in `value`: where it opens, where it closes, and NAME."""
    start = 0
    while (opening := value.find("${", start)) != -1:
        closing = value.find("}", opening + 2)
        if closing == -1:
            return
        yield opening, closing, value[opening + 2 : closing]
        start = closing + 1


def _transport(entry: Mapping[str, Any], fail: Fail) -> Transport:
    kind = entry.get("type")
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in TRANSPORT_NAMES:
            sse = isinstance(kind, str) and kind.lower() == "sse"
            hint = "; nbchat speaks stdio and streamable HTTP, not SSE" if sse else ""
            raise fail(f"has type {_shown(kind)}: use stdio or http{hint}")
        wanted = TRANSPORT_NAMES[kind.lower()]
    else:
        wanted = "http" if "url" in entry else "stdio"
    given = STDIO_FIELDS & set(entry) if wanted == "http" else HTTP_FIELDS & set(entry)
    if given or ("command" not in entry and "url" not in entry):
        raise fail(
            "needs either command (and args, env, cwd) to run it, or url (and headers) to "
            "reach it"
            + (f"; {', '.join(sorted(given))} does not go with the other" if given else "")
        )
    return wanted


def _url(raw: Any, fail: Fail) -> str:
    url = _text(raw, "url", fail)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(f"has url {_shown(url)}: use an http:// or https:// address")
    if "@" in parts.netloc:
        raise fail("has a user name or password in its url: send them in headers instead")
    return url


def _text(raw: Any, name: str, fail: Fail) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise fail(f"needs {name} as a non-empty string, got {_shown(raw)}")
    return raw


def _strings(raw: Any, fail: Fail) -> tuple[str, ...]:
    if not isinstance(raw, list | tuple) or not all(isinstance(item, str) for item in raw):
        # Not shown: an argument may be a connection string with a password in it.
        raise fail("needs args as a list of strings")
    return tuple(raw)


def _pairs(entry: Mapping[str, Any], name: str, fail: Fail) -> tuple[tuple[str, str], ...]:
    raw = entry.get(name, {})
    if not isinstance(raw, Mapping) or not all(
        isinstance(key, str) and key and isinstance(value, str) for key, value in raw.items()
    ):
        # The values are secrets: the message names the field, never what it holds.
        raise fail(f"needs {name} as a table of names to string values")
    return tuple(sorted(raw.items()))


def _flag(raw: Any, fail: Fail) -> bool:
    if not isinstance(raw, bool):
        raise fail(f"has disabled {_shown(raw)}: use true or false")
    return raw


def _unique(servers: tuple[McpServer, ...], origin: str) -> tuple[McpServer, ...]:
    counts = Counter(server.name for server in servers)
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:
        raise ConfigError(f"MCP server {repeated[0]!r} is configured twice (from {origin}).")
    return servers


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."

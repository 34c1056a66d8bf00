"""MCP servers as configured: config.toml's `[mcp_servers.NAME]`, the shared `mcpServers` file
named by NBCHAT_MCP_CONFIG, one exact message per bad entry, and secrets kept out of what is
stored or shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbchat.config import Settings, known_variables
from nbchat.errors import ConfigError
from nbchat.mcpconfig import (
    McpServer,
    configured_servers,
    expand,
    read_mcp_file,
    servers_from,
    unset_variables,
)


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_toml_servers_are_read_with_where_they_came_from(home: Path) -> None:
    path = write_config(
        home,
        """
mcp_allow = ["docs", "github__search"]
[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
env = { GITHUB_TOKEN = "ghp-secret-1" }
[mcp_servers.docs]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer docs-secret-2" }
""",
    )
    settings = Settings.load()
    github, docs = settings.mcp_servers
    assert github == McpServer(
        "github",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-github"),
        env=(("GITHUB_TOKEN", "ghp-secret-1"),),
    )
    assert github.transport == "stdio" and docs.transport == "http"
    assert docs.headers == (("Authorization", "Bearer docs-secret-2"),)
    assert github.origin == str(path) and settings.source_of("mcp_servers") == str(path)
    assert settings.mcp_allow == ("docs", "github__search")


def test_secrets_stay_out_of_repr_and_the_public_settings(home: Path) -> None:
    write_config(
        home,
        """
[mcp_servers.db]
command = "db-server"
args = ["postgresql://user:pw-in-args@host/db"]
env = { DB_PASSWORD = "env-secret" }
[mcp_servers.hosted]
url = "https://mcp.example.com/t/url-secret/mcp?key=query-secret"
headers = { "X-Api-Key" = "header-secret" }
""",
    )
    settings = Settings.load()
    shown = repr(settings) + json.dumps(settings.to_public_dict())
    for secret in ("env-secret", "pw-in-args", "url-secret", "query-secret", "header-secret"):
        assert secret not in shown
    assert settings.to_public_dict()["mcp_servers"] == {
        "db": {"command": "db-server", "env": ["DB_PASSWORD"]},
        "hosted": {"url": "https://mcp.example.com", "headers": ["X-Api-Key"]},
    }


def test_nbchat_mcp_config_is_a_known_variable_and_names_the_shared_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "claude.json"
    shared.write_text(json.dumps({"mcpServers": {"fs": {"command": "fs-server"}}}))
    monkeypatch.setenv("NBCHAT_MCP_CONFIG", str(shared))
    settings = Settings.load()
    assert "NBCHAT_MCP_CONFIG" in known_variables()
    assert "NBCHAT_MCP_SERVERS" not in known_variables()  # a table does not fit a variable
    assert settings.mcp_config == shared.resolve()
    assert settings.source_of("mcp_config") == "environment variable NBCHAT_MCP_CONFIG"
    servers, problems = configured_servers(settings.mcp_servers, settings.mcp_config)
    assert [s.name for s in servers] == ["fs"] and problems == []


def test_the_shared_file_keeps_the_other_apps_fields_and_skips_what_nbchat_cannot_use(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "mcp.json"
    entries: dict[str, Any] = {
        "fs": {"command": "fs-server", "args": ["/data"], "autoApprove": ["read"], "timeout": 9},
        "web": {"type": "streamable-http", "url": "http://127.0.0.1:3000/mcp"},
        "old": {"type": "sse", "url": "http://127.0.0.1:3001/sse"},
        "off": {"command": "unused", "disabled": True},
        "odd": ["not", "a", "table"],
    }
    shared.write_text(json.dumps({"mcpServers": entries}))
    servers, problems = read_mcp_file(shared)
    assert [(s.name, s.transport) for s in servers] == [("fs", "stdio"), ("web", "http")]
    origin = f"from the MCP configuration file {shared}"
    assert problems == [
        f"MCP server 'old' has type 'sse': use stdio or http; nbchat speaks stdio and "
        f"streamable HTTP, not SSE ({origin}). That server is not started.",
        f"MCP server 'odd' must be a table with command or url, got ['not', 'a', 'table'] "
        f"({origin}). That server is not started.",
    ]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "it does not exist"),
        (
            "{not json",
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
    ],
)
def test_an_unreadable_shared_file_is_one_problem(
    tmp_path: Path, content: str | None, reason: str
) -> None:
    shared = tmp_path / "mcp.json"
    if content is not None:
        shared.write_text(content)
    problem = (
        f"Cannot read the MCP configuration file {shared} ({reason}); fix it or unset "
        "NBCHAT_MCP_CONFIG."
    )
    assert read_mcp_file(shared) == ((), [problem])


def test_nbchats_own_servers_win_over_the_shared_file(tmp_path: Path) -> None:
    shared = tmp_path / "mcp.json"
    shared.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}))
    own = servers_from({"b": {"command": "mine"}}, origin="argument")
    servers, _ = configured_servers(own, shared)
    assert [(s.name, s.command) for s in servers] == [("a", "x"), ("b", "mine")]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"s": {"command": "x", "colour": "red"}},
            "MCP server 's' has unknown field(s) colour; a server takes command, args, env and "
            "cwd, or url and headers",
        ),
        (
            {"s": {"command": "x", "url": "http://127.0.0.1/mcp"}},
            "MCP server 's' needs either command (and args, env, cwd) to run it, or url (and "
            "headers) to reach it; command does not go with the other",
        ),
        (
            {"s": {"args": ["a"]}},
            "MCP server 's' needs either command (and args, env, cwd) to run it, or url (and "
            "headers) to reach it",
        ),
        ({"s": {"command": ""}}, "MCP server 's' needs command as a non-empty string, got ''"),
        ({"s": {"command": "x", "args": "a b"}}, "MCP server 's' needs args as a list of strings"),
        (
            {"s": {"command": "x", "env": {"TOKEN": 12345}}},
            "MCP server 's' needs env as a table of names to string values",
        ),
        (
            {"s": {"url": "ftp://example.com"}},
            "MCP server 's' has url 'ftp://example.com': use an http:// or https:// address",
        ),
        (
            {"s": {"url": "https://me:pw@example.com/mcp"}},
            "MCP server 's' has a user name or password in its url: send them in headers instead",
        ),
        (
            {"s": {"url": "https://example.com/mcp", "headers": {"A": ["secret"]}}},
            "MCP server 's' needs headers as a table of names to string values",
        ),
        (
            {"s": {"command": "x", "disabled": "no"}},
            "MCP server 's' has disabled 'no': use true or false",
        ),
        (
            {"s": "npx server"},
            "MCP server 's' must be a table with command or url, got 'npx server'",
        ),
    ],
)
def test_a_bad_entry_in_config_toml_names_the_server_and_the_field(
    home: Path, table: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.load(mcp_servers=table)
    assert str(raised.value) == f"{message} (from argument)."
    assert "secret" not in str(raised.value) and "12345" not in str(raised.value)


def test_a_bad_config_toml_entry_says_which_file(home: Path) -> None:
    path = write_config(home, '[mcp_servers.s]\ncommand = "x"\ncolor = 1\n')
    with pytest.raises(ConfigError, match=f"MCP server 's' has unknown field.*from {path}"):
        Settings.load()


def test_mcp_servers_is_not_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBCHAT_MCP_ALLOW", "github, docs__search")
    settings = Settings.load()
    assert settings.mcp_servers == () and settings.mcp_allow == ("github", "docs__search")


def test_variables_are_filled_in_when_the_server_starts_not_when_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (server,) = servers_from(
        {"s": {"command": "x", "env": {"TOKEN": "${MY_TOKEN}", "PLAIN": "a${"}}},
        origin="argument",
    )
    assert server.env == (("PLAIN", "a${"), ("TOKEN", "${MY_TOKEN}"))  # kept as written
    assert unset_variables(server) == ["MY_TOKEN"]
    monkeypatch.setenv("MY_TOKEN", "tok-value")
    assert unset_variables(server) == []
    assert expand("Bearer ${MY_TOKEN}!") == "Bearer tok-value!"
    assert expand("${MISSING}x${") == "x${"
    assert ("tok-value", "***") in server.redactions()


def test_expanding_a_long_hostile_value_takes_one_pass() -> None:
    value = "${" * 50_000 + "}" + "$" * 50_000
    assert expand(value) == "$" * 50_000  # one reference, named by all the rest: unset

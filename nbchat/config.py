"""Settings: every knob nbchat has, where each value came from, and the API key lookup.

`Settings.load(**overrides)` layers, highest first: explicit arguments > `NBCHAT_<NAME>`
environment variables > `<home>/config.toml` > defaults, validates every value and remembers
where each one came from so an error (or `nbchat doctor`) can say so. `Settings(...)` called
directly takes exactly the values given plus defaults, with the same validation. An NBCHAT_*
variable that nothing reads (a misspelling, usually) gets an `UnknownVariableWarning` naming the
closest real one; `known_variables()` is the one list of those nbchat reads.

The API key is never stored here unless passed explicitly, and never shown: it is looked
up by `resolve_api_key()` (NBCHAT_API_KEY, then OPENAI_API_KEY, else a placeholder local servers
accept) at the moment a client is built; `repr` and `to_public_dict()` leave it out.

This module reads the environment and one file; it must not open the DB or the network.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import types
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from nbchat.errors import ConfigError
from nbchat.mcpconfig import McpServer, servers_from

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "API_KEY_PLACEHOLDER",
    "Settings",
    "ToolPolicy",
    "UnknownVariableWarning",
    "default_home",
    "known_variables",
    "unknown_variables",
    "public_url",
]

ToolPolicy = Literal["ask", "allow", "deny"]
TOOL_POLICIES: tuple[str, ...] = ("ask", "allow", "deny")
API_KEY_PLACEHOLDER = "sk-no-key-required"
API_KEY_VARIABLES = ("NBCHAT_API_KEY", "OPENAI_API_KEY")
ENV_PREFIX = "NBCHAT_"
CONFIG_FILE_NAME = "config.toml"
# The name the embedded server answers under for the model `auto` picks where the machine can run
# it (`nbchat.embedded.modelfiles`); where another model answers, the chat records that one's name
# (`nbchat.llm.endpoint`).
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
DEFAULT_THRESHOLD = 10_000
# The defaults below are written here only; the compaction engine and the summary writer
# import them for callers that construct those without a `Settings`.
DEFAULT_TRIGGER_FACTOR = 0.75
DEFAULT_MAX_TOKENS = 1024
DEFAULT_PREPARE_MARK = 0.6
DEFAULT_SUMMARY_MAX_TOKENS = 1024
# The embedded server's window (also the summariser's when none is known). The KV cache costs
# 28 KiB a token on Qwen2.5-Coder-1.5B (28 layers, 2 KV heads of 128, f16) and 12 KiB on the
# 0.5B: at 8k tokens 224 MiB and 96 MiB, in a server of 2.0 GB and 0.7 GB resident (measured
# with xllamacpp), which still answers quickly on two cores; callers that need more pass n_ctx.
DEFAULT_N_CTX = 8192
# The system prompt and the tools' schemas take about 1,100 tokens, and a reply needs room too:
# a smaller window refuses even "What is 2+2?" once tools are offered.
MIN_N_CTX = 2048
# Short, for a small model as much as a large one. Its middle sentence is the rule an answer
# must keep: what the user's files, machine and notebook hold comes from a tool result or is
# not stated (issue 19). On the embedded model the tools are not described here (its first
# step is asked apart, `nbchat.tools.offer`): told of tools, a 1.5B model answered "you can
# use read_file" instead of answering. The last sentence keeps larger models, offered tools
# always, from calling one for a greeting.
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant working inside a Jupyter notebook. Answer concisely. "
    "Never state what the user's files, machine or notebook hold unless a tool result in this "
    "conversation shows it; if nothing here shows it, say you have not looked. "
    "File paths are relative to the workspace. "
    "Answer greetings and general questions directly."
)
# The embedded model is small: greedy decoding keeps it on the likeliest answer instead of
# sampling its way into an invented tool call (issue 12).
EMBEDDED_TEMPERATURE = 0.0
# Fields that are not settings a user writes (bookkeeping) or that cannot come from the file.
NOT_FROM_FILE = frozenset({"home"})
# A table of servers does not fit in a variable: NBCHAT_MCP_CONFIG names a file that holds them.
NOT_FROM_ENV = frozenset({"mcp_servers"})
BOOKKEEPING = frozenset({"api_key", "sources"})
# NBCHAT_* variables read elsewhere than through a setting: the API key lookup above, and
# scripts/run. With the settings' own this is the one list of the variables nbchat reads;
# tests/test_config.py checks that every NBCHAT_ name in nbchat/ and scripts/ is on it.
OTHER_VARIABLES = ("NBCHAT_API_KEY", "NBCHAT_RUN_SKIP_INSTALL")
# Names longer than this are not compared for a suggestion (the comparison grows with length).
LONGEST_SUGGESTED = 64


class UnknownVariableWarning(UserWarning):
    """An NBCHAT_* environment variable that nbchat does not read; it has no effect."""


def default_home() -> Path:
    """The per-user data directory: XDG on Linux, the platform's usual place elsewhere."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "nbchat"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local")) / "nbchat"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "nbchat"


@dataclass(frozen=True)
class Settings:
    """Every setting, validated. Paths are absolute; `summary_model` defaults to `model`.

    `base_url=None` means the embedded local model server (`nbchat.embedded.server`).
    `context_token_threshold=None` means: the embedded server's window minus `max_tokens`, or
    10,000 for any other server (see `threshold_for`).
    """

    base_url: str | None = None
    model: str = DEFAULT_MODEL
    summary_model: str = ""
    context_token_threshold: int | None = None
    # 4 on purpose: the original design's chat default. `CompactionEngine(threshold)` keeps the
    # original design's own default of 5 for cells that drive it; `from_settings` passes this.
    tail_messages: int = 4
    trigger_factor: float = DEFAULT_TRIGGER_FACTOR
    # Past this share of the trigger the widget prepares the next summary while the user
    # reads (`nbchat.conversation.prepare`); 0 turns that off.
    prepare_mark: float = DEFAULT_PREPARE_MARK
    max_tool_turns: int = 100
    max_tokens: int = DEFAULT_MAX_TOKENS
    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    summariser_context: int | None = None
    temperature: float | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    home: Path = field(default_factory=default_home)
    db_path: Path | None = None
    workspace: Path = field(default_factory=Path.cwd)
    tool_policy: ToolPolicy = "ask"
    tool_timeout: float = 60.0
    tool_output_limit: int = 20_000
    tool_env_allow: tuple[str, ...] = ()
    json_tool_fallback: bool | None = None
    tools_on_request: bool | None = None
    workspace_overview: bool | None = None  # None: on for the embedded model only
    request_timeout: float = 600.0
    connect_timeout: float = 10.0
    autostart: bool = False
    notebook_tools: bool = True
    # The tools that act on the notebook (insert, edit and run cells, run code in the kernel;
    # `nbchat.tools.acting`); editing and running are dangerous, so `tool_policy` applies.
    notebook_acting: bool = True
    local_model: str = "auto"  # qwen-1.5b where the machine can run it, else qwen-0.5b
    local_n_ctx: int = DEFAULT_N_CTX
    local_idle_timeout: float = 1800.0  # seconds without a request before the server stops
    # MCP servers whose tools join the built-ins (`nbchat.mcpconfig`): nbchat's own table, the
    # shared `{"mcpServers": ...}` file, the servers and tools that run without asking, and how
    # long a server may take to start and list its tools.
    mcp_servers: tuple[McpServer, ...] = ()
    mcp_config: Path | None = None
    mcp_allow: tuple[str, ...] = ()
    mcp_start_timeout: float = 60.0
    api_key: str | None = field(default=None, repr=False, compare=False)
    sources: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_value = object.__setattr__  # frozen: normalise once, here
        set_value(self, "home", Path(self.home).expanduser().resolve())
        set_value(self, "workspace", Path(self.workspace).expanduser().resolve())
        db = self.home / "nbchat.db" if self.db_path is None else Path(self.db_path)
        set_value(self, "db_path", db.expanduser().resolve())
        set_value(self, "summary_model", self.summary_model or self.model)
        set_value(self, "tool_env_allow", tuple(self.tool_env_allow))
        set_value(self, "mcp_allow", tuple(self.mcp_allow))
        origin = self.sources.get("mcp_servers", "argument")  # Settings(...) takes arguments
        servers = servers_from(self.mcp_servers, origin=origin)
        set_value(self, "mcp_servers", servers)
        if self.mcp_config is not None:
            set_value(self, "mcp_config", Path(self.mcp_config).expanduser().resolve())
        set_value(self, "sources", types.MappingProxyType(dict(self.sources)))
        _validate(self)

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Settings from arguments > NBCHAT_* env vars > `<home>/config.toml` > defaults."""
        unknown = sorted(set(overrides) - {f.name for f in _user_fields()} - {"api_key"})
        if unknown:
            raise ConfigError(f"Unknown setting(s): {', '.join(unknown)}.")
        for notice in unknown_variables(os.environ):
            warnings.warn(notice, UnknownVariableWarning, stacklevel=2)
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        env_home = os.environ.get(ENV_PREFIX + "HOME")
        home = Path(overrides.get("home") or env_home or default_home()).expanduser()
        file_path = home / CONFIG_FILE_NAME
        for name, raw in _read_file(file_path).items():
            values[name] = _parse(name, raw, origin=f"{file_path}")
            sources[name] = str(file_path)
        for f in _user_fields():
            variable = ENV_PREFIX + f.name.upper()
            if variable in os.environ and f.name not in NOT_FROM_ENV:
                origin = f"environment variable {variable}"
                values[f.name] = _parse(f.name, os.environ[variable], origin=origin)
                sources[f.name] = origin
        for name, raw in overrides.items():
            if raw is not None or name in ("base_url", "context_token_threshold"):
                values[name] = _parse(name, raw, origin="argument") if name != "api_key" else raw
                sources[name] = "argument"
        return cls(**values, sources=sources)

    @property
    def database_path(self) -> Path:
        """`db_path`, which `__post_init__` always resolves (the field allows None as "default")."""
        assert self.db_path is not None
        return self.db_path

    @property
    def is_embedded(self) -> bool:
        """True when nbchat runs its own local model server instead of a configured URL."""
        return self.base_url is None

    def threshold_for(self, n_ctx: int | None) -> int:
        """The token budget: explicit, else the server's window minus the reply (at least half
        the window), else 10,000."""
        if self.context_token_threshold is not None:
            return self.context_token_threshold
        if n_ctx is not None:
            # A reply reserve larger than half the window would leave no room to talk in.
            return max(n_ctx - self.max_tokens, n_ctx // 2)
        return DEFAULT_THRESHOLD

    def offline_threshold(self) -> int:
        """The budget known before any server is asked: on the embedded model, for the window
        it is started with (`local_n_ctx`; a running server's own is read once connected), not
        the 10,000 of an unknown server."""
        return self.threshold_for(self.local_n_ctx if self.is_embedded else None)

    def shows_workspace_overview(self) -> bool:
        """Whether a request offering tools names the workspace's top-level entries: by default
        only on the embedded model (it helps a small one name real paths, and file names are not
        sent to a remote server unless asked)."""
        return self.is_embedded if self.workspace_overview is None else self.workspace_overview

    def offers_tools_on_request(self) -> bool:
        """Offer the tools only when the user's message asks for workspace work? By default only
        on the embedded model, whose 0.5B default otherwise calls tools for plain questions."""
        return self.is_embedded if self.tools_on_request is None else self.tools_on_request

    def reply_temperature(self) -> float | None:
        """The temperature to ask for: the setting, else 0 on the embedded model, else None
        (the server's own default)."""
        if self.temperature is None and self.is_embedded:
            return EMBEDDED_TEMPERATURE
        return self.temperature

    def resolve_api_key(self) -> str:
        """The API key, looked up now: explicit, NBCHAT_API_KEY, OPENAI_API_KEY or a placeholder."""
        if self.api_key:
            return self.api_key
        for variable in API_KEY_VARIABLES:
            if os.environ.get(variable):
                return os.environ[variable]
        return API_KEY_PLACEHOLDER

    def source_of(self, name: str) -> str:
        """Where a setting's value came from: "argument", an env var, the TOML file or "default"."""
        return self.sources.get(name, "default")

    def replace(self, **changes: Any) -> Settings:
        """A copy with some values changed (recorded as explicit arguments)."""
        sources = {**self.sources, **dict.fromkeys(changes, "argument")}
        return dataclasses.replace(self, **changes, sources=sources)

    def to_public_dict(self) -> dict[str, Any]:
        """Every setting as JSON-ready values, without the API key (safe to store or show)."""
        public: dict[str, Any] = {}
        for f in _user_fields():
            value = getattr(self, f.name)
            public[f.name] = str(value) if isinstance(value, Path) else value
        public["tool_env_allow"] = list(self.tool_env_allow)
        public["mcp_allow"] = list(self.mcp_allow)
        # Names, commands and addresses only: env and header values are secrets.
        public["mcp_servers"] = {server.name: server.public() for server in self.mcp_servers}
        return public


def known_variables() -> frozenset[str]:
    """Every NBCHAT_* environment variable nbchat reads."""
    fields = (ENV_PREFIX + f.name.upper() for f in _user_fields() if f.name not in NOT_FROM_ENV)
    return frozenset((*fields, *OTHER_VARIABLES))


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A sentence for each NBCHAT_* variable in `environ` that nbchat does not read, naming the
    closest one it does."""
    known = known_variables()
    # Compared without the prefix, which every name shares and would make any two look alike.
    suffixes = sorted(name.removeprefix(ENV_PREFIX) for name in known)
    notes = []
    for name in sorted(n for n in environ if n.startswith(ENV_PREFIX) and n not in known):
        close = []
        if len(name) <= LONGEST_SUGGESTED:
            close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=1)
        hint = (
            f"did you mean {ENV_PREFIX}{close[0]}?"
            if close
            else "the README's configuration table lists those it reads."
        )
        notes.append(f"{name} is not a variable nbchat reads, so it has no effect; {hint}")
    return notes


def _user_fields() -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(Settings) if f.name not in BOOKKEEPING]


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"Cannot read the settings file {path}: {exc}. Fix or remove it."
        ) from exc
    if "api_key" in data:
        raise ConfigError(f"{path} must not hold an API key; set NBCHAT_API_KEY instead.")
    known = {f.name for f in _user_fields()} - NOT_FROM_FILE
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"Unknown setting(s) {', '.join(unknown)} in {path}.")
    return data


def _parse(name: str, raw: Any, *, origin: str) -> Any:
    """Convert a raw value (env string, TOML value or argument) to the field's type."""
    hint = typing.get_type_hints(Settings)[name]
    is_union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    allows_none = is_union and type(None) in typing.get_args(hint)
    base = next(a for a in typing.get_args(hint) if a is not type(None)) if is_union else hint
    if name == "mcp_servers":
        return servers_from(raw, origin=origin)
    if raw is None or (isinstance(raw, str) and raw.strip() == "" and allows_none):
        if allows_none:
            return None
        raise ConfigError(f"{name} must be set (from {origin}).")
    try:
        return _convert(base, raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} has an invalid value {raw!r} (from {origin}): {exc}.") from exc


def _convert(base: Any, raw: Any) -> Any:
    if base is bool:
        return _to_bool(raw)
    if base is int:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError("expected a whole number")
        return int(raw)
    if base is float:
        if isinstance(raw, bool):
            raise ValueError("expected a number")
        return float(raw)
    if base is Path:
        return Path(str(raw))
    if typing.get_origin(base) is tuple:
        items = raw.split(",") if isinstance(raw, str) else list(raw)
        return tuple(str(item).strip() for item in items if str(item).strip())
    return str(raw)


def _to_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true/false, 1/0, yes/no or on/off")


def public_url(url: str) -> str:
    """`url` as it may be stored, shown or logged: without a `user:password@` part (and without
    a trailing slash). Every place nbchat keeps or shows a server's URL goes through this."""
    parts = urlsplit(url.rstrip("/"))
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=netloc))


def _check_url_credentials(settings: Settings) -> None:
    """Refuse a base_url that carries a user name or password: it would be kept with every
    session and shown, and the HTTP client would send it as Basic auth instead of the key."""
    url = settings.base_url
    if url is None or "@" not in urlsplit(url).netloc:
        return
    raise ConfigError(
        f"base_url must not hold a user name or password (from {settings.source_of('base_url')}):"
        " nbchat would store it with every session and the server would get it instead of "
        f"your API key. Set base_url to {public_url(url)} and the key in NBCHAT_API_KEY."
    )


def _validate(settings: Settings) -> None:
    def fail(name: str, rule: str) -> None:
        value = getattr(settings, name)
        shown = public_url(value) if name == "base_url" else value  # never echo a password
        raise ConfigError(f"{name} {rule}, got {shown!r} (from {settings.source_of(name)}).")

    threshold = settings.context_token_threshold
    if threshold is not None and threshold <= 0:
        fail("context_token_threshold", "must be a positive number of tokens")
    for name in (
        "tail_messages",
        "max_tool_turns",
        "max_tokens",
        "summary_max_tokens",
        "tool_output_limit",
    ):
        if getattr(settings, name) < 1:
            fail(name, "must be at least 1")
    if settings.local_n_ctx != 0 and settings.local_n_ctx < MIN_N_CTX:
        fail(
            "local_n_ctx",
            f"must be 0 (the model's own window) or at least {MIN_N_CTX} tokens, room for the "
            "system prompt, the tools' schemas (about 1,100 tokens) and a reply",
        )
    if settings.summariser_context is not None and settings.summariser_context < 256:
        fail("summariser_context", "must be at least 256 tokens")
    if not 0 < settings.trigger_factor <= 1:
        fail("trigger_factor", "must be above 0 and at most 1")
    if not 0 <= settings.prepare_mark < 1:
        fail("prepare_mark", "must be 0 (off) or a share of the trigger below 1, such as 0.6")
    if settings.local_idle_timeout < 0:
        fail("local_idle_timeout", "must be 0 (keep the server running) or a number of seconds")
    for name in ("tool_timeout", "request_timeout", "connect_timeout", "mcp_start_timeout"):
        if not getattr(settings, name) > 0:  # NaN too: a deadline that never comes
            fail(name, "must be a positive number of seconds")
    if settings.tool_policy not in TOOL_POLICIES:
        fail("tool_policy", "must be one of ask, allow, deny")
    if settings.base_url is not None and not _is_http_url(settings.base_url):
        fail("base_url", "must be an http:// or https:// URL such as http://127.0.0.1:8080/v1")
    _check_url_credentials(settings)
    if not settings.model:
        fail("model", "must not be empty")


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)

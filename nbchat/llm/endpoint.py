"""Which model server a conversation talks to, how big its window is, and whether the configured
model name is one it serves.

The model check: `served_models(client)` reads `GET /v1/models` (None when the server has no such
list); `check_model(settings, served, base_url=...)` compares the `model` setting with it. llama.cpp
(and so the embedded server) answers with its one loaded model whatever name a request gives, so a
wrong name there still works but would be recorded in every session: the verdict then names the
model really served, which the chat records instead (silently when the name was nbchat's default,
which only guesses what the embedded server runs). Any other server refuses a name it does not list,
so that is a problem to fix. Messages say what to change where the value was set.

The connection: `connect(settings)` turns settings into a `Connection`: the configured `base_url`,
or, when none is set, the embedded llama.cpp server (`nbchat.embedded.server`) already running for
this user — started only when asked (`start=True`, or `NBCHAT_AUTOSTART=1`). The window size
(`n_ctx`) is asked from the server only when the threshold is not set, because only then does it
decide the budget. The models the server lists are read once (the model check above), so a UI can
say when the configured name is not one of them.

Must not: keep state, start a server unasked, change settings, fail a connection because the
list of models could not be read, or know about rows.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import openai

from nbchat.config import DEFAULT_MODEL, Settings, public_url
from nbchat.embedded import server as local
from nbchat.embedded.runtime import read_stop_note
from nbchat.errors import ServerUnavailableError
from nbchat.llm.client import build_client, server_context_size

__all__ = [
    "Connection",
    "LOCAL",
    "ModelCheck",
    "Served",
    "check_model",
    "connect",
    "destination_of",
    "how_to_set",
    "sentence",
    "served_from",
    "served_models",
    "unreachable",
]


LIST_TIMEOUT = 5.0
SHOWN_NAMES = 8
LLAMA_CPP_OWNER = "llamacpp"  # what llama.cpp's server puts in each model's `owned_by`


@dataclass(frozen=True)
class Served:
    """The model ids a server lists, and whether it answers under any name (llama.cpp)."""

    names: tuple[str, ...]
    any_name: bool


@dataclass(frozen=True)
class ModelCheck:
    """`model`: the name to record (the served one on llama.cpp); `ok`: the configured name
    is served (or nothing is known); `message`: what to tell the user, "" when all is well."""

    model: str
    ok: bool
    message: str = ""


def served_models(client: openai.OpenAI, *, embedded: bool = False) -> Served | None:
    """The server's model list, or None when it cannot be read (not every server has one)."""
    try:
        # One request at connect time: no idle keep-alive connection is left behind for it.
        quick = client.with_options(timeout=LIST_TIMEOUT, max_retries=0)
        page = quick.models.list(extra_headers={"Connection": "close"})
    except openai.OpenAIError:
        return None
    return served_from(page.data, embedded=embedded)


def served_from(models: Sequence[Any], *, embedded: bool) -> Served:
    """`Served` from the entries of a `/v1/models` answer."""
    names = tuple(str(model.id) for model in models)
    owners = {getattr(model, "owned_by", "") for model in models}
    return Served(names, any_name=embedded or LLAMA_CPP_OWNER in owners)


def check_model(settings: Settings, served: Served | None, *, base_url: str) -> ModelCheck:
    """The verdict on `settings.model` against what the server at `base_url` lists."""
    model, base_url = settings.model, base_url.rstrip("/")
    if served is None or not served.names or model in served.names:
        return ModelCheck(model, ok=True)
    where = f"model {model!r} (from {settings.source_of('model')})"
    if served.any_name:
        real = served.names[0]
        if model == DEFAULT_MODEL and settings.source_of("model") == "default":
            # nbchat's guess at what the embedded server runs, not the user's choice: a smaller
            # machine's model, or another kernel's server, answers under its own name, which
            # the chat then records.
            return ModelCheck(real, ok=True)
        return ModelCheck(
            real,
            ok=False,
            message=(
                f"The server at {base_url} serves {real!r}, not {where}. llama.cpp answers "
                f"with its one model whatever the name, so sessions record {real!r}. "
                f"{sentence(how_to_set(settings, 'model', real))}."
            ),
        )
    listed = ", ".join(served.names[:SHOWN_NAMES]) + (
        ", …" if len(served.names) > SHOWN_NAMES else ""
    )
    return ModelCheck(
        model,
        ok=False,
        message=(
            f"The server at {base_url} does not serve {where}; it serves {listed}. "
            f"{sentence(how_to_set(settings, 'model', 'one of them'))}."
        ),
    )


def how_to_set(settings: Settings, name: str, value: str) -> str:
    """Advice to change setting `name` where its value comes from now ("set NBCHAT_X to …")."""
    source = settings.source_of(name)
    if source == "argument":
        return f"give {name} as {value} instead"
    if source == "default":
        return f"set NBCHAT_{name.upper()} to {value}"
    if source.startswith("environment variable"):
        return f"change NBCHAT_{name.upper()} to {value}"
    return f"change {name} in {source} to {value}"


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


LOCAL = "local"


@dataclass(frozen=True)
class Connection:
    """A ready client, the URL it talks to, the server's window when known, and the budget."""

    client: openai.OpenAI
    base_url: str
    n_ctx: int | None
    threshold: int
    embedded: bool
    served: Served | None = None

    @property
    def is_llama_cpp(self) -> bool:
        """The embedded server, or one whose model list says llama.cpp serves it: it takes a
        `grammar`, a JSON-schema `response_format` and an opened assistant reply."""
        return self.embedded or (self.served is not None and self.served.any_name)

    def check_model(self, settings: Settings) -> ModelCheck:
        """Does this server serve `settings.model`? (See `nbchat.llm.endpoint`.)"""
        return check_model(settings, self.served, base_url=self.base_url)


def connect(
    settings: Settings,
    *,
    client: openai.OpenAI | None = None,
    start: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> Connection:
    """A connection for `settings`; raises `ServerUnavailableError` saying what to do."""
    embedded = client is None and settings.is_embedded
    if client is None:
        base_url = _embedded_url(settings, start, progress) if embedded else settings.base_url
        client = build_client(settings, base_url=base_url)
    n_ctx = server_context_size(client) if settings.context_token_threshold is None else None
    return Connection(
        client=client,
        base_url=public_url(str(client.base_url)),  # shown in notices; a client may hold a password
        n_ctx=n_ctx,
        threshold=settings.threshold_for(n_ctx),
        embedded=embedded,
        served=served_models(client, embedded=embedded),
    )


def _embedded_url(
    settings: Settings, start: bool | None, progress: Callable[[str], None] | None
) -> str:
    running = local.find_running(home=settings.home)
    if running is not None:
        return running.base_url
    stopped = read_stop_note(settings.home)  # why the last one went, when it stopped itself
    if not (settings.autostart if start is None else start):
        raise ServerUnavailableError(
            (f"{stopped} " if stopped else "")
            + "No model server is configured and the embedded one is not running. Start it with "
            "`nbchat serve-model` (or the Start button in the chat), set NBCHAT_AUTOSTART=1 to "
            "start it automatically, or point NBCHAT_BASE_URL at an OpenAI-compatible server."
        )
    if stopped is not None and progress is not None:
        progress(f"{stopped} Starting it again…")
    server = local.ensure_server(
        settings.local_model,
        home=settings.home,
        n_ctx=settings.local_n_ctx,
        progress=progress,
        idle_timeout=settings.local_idle_timeout,
    )
    return server.base_url


def destination_of(base_url: str | None) -> str:
    """Where requests to `base_url` go, for the user to see: "local" for this machine (the
    embedded server when None, a loopback address, localhost or a Unix socket), else the host.
    Decided from the URL alone: no name is looked up."""
    if base_url is None:
        return LOCAL
    parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
    if "unix" in parts.scheme:
        return LOCAL
    host = (parts.hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return LOCAL
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or base_url
    mapped = getattr(address, "ipv4_mapped", None)
    return LOCAL if (mapped or address).is_loopback else host


def unreachable(settings: Settings, url: str) -> str:
    """Nothing answers at `url`, the configured base_url: where that was set and what to do
    (the one wording of the chat and `nbchat doctor`; "start `nbchat serve-model`" cannot help
    while base_url points elsewhere)."""
    return (
        f"nothing answers at {url} (base_url, from {settings.source_of('base_url')}). Start that "
        f"server, or {how_to_set(settings, 'base_url', 'its right address')}."
    )

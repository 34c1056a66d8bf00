"""Which model server a conversation talks to, and how big its window is.

`connect(settings)` turns settings into a `Connection`: the configured `base_url`, or, when none
is set, the embedded llama.cpp server (`nbchat.embedded.server`) already running for this user —
started only when asked (`start=True`, or `NBCHAT_AUTOSTART=1`). The window size (`n_ctx`) is asked
from the server only when the threshold is not set, because only then does it decide the budget.
The models the server lists are read once (`nbchat.llm.modelcheck`), so a UI can say when the
configured name is not one of them.

Must not: keep state, start a server unasked, or know about rows.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import openai

from nbchat.config import Settings, public_url
from nbchat.embedded import server as local
from nbchat.embedded.runtime import read_stop_note
from nbchat.errors import ServerUnavailableError
from nbchat.llm.client import build_client, server_context_size
from nbchat.llm.modelcheck import ModelCheck, Served, check_model, how_to_set, served_models

__all__ = ["LOCAL", "Connection", "connect", "destination_of", "unreachable"]

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
        """Does this server serve `settings.model`? (See `nbchat.llm.modelcheck`.)"""
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

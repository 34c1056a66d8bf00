"""`nbchat doctor`: check settings, database, model server, the model name, window and the
embedded model's pieces (and which model `auto` picks, and why, and where its saved prompts are),
and each configured MCP server (started, asked for its tools, stopped), one ✓/✗ line each, saying
what to fix where the value was set; NBCHAT_* variables nbchat does not read are listed.

Must not: print the API key (only whether one is set and from which variable), import
xllamacpp (it is looked for with `find_spec`), or change anything it checks.
"""

from __future__ import annotations

import argparse
import ctypes.util
import importlib.util
import os
import warnings
from collections.abc import Sequence
from contextlib import closing
from typing import TYPE_CHECKING

from nbchat.config import API_KEY_VARIABLES, Settings, UnknownVariableWarning, unknown_variables
from nbchat.embedded.modelfiles import (
    AUTO,
    MODELS,
    choose_model,
    missing_requirements,
    model_key,
    model_path,
    read_machine,
)
from nbchat.embedded.server import find_running
from nbchat.embedded.slots import MAX_BYTES, MAX_FILES, kept_sizes, slot_dir
from nbchat.errors import ConfigError, NbchatError, ServerUnavailableError
from nbchat.store.store import Store

if TYPE_CHECKING:  # openai takes ~0.4 s to import and only the server check needs it
    import openai

    from nbchat.llm.endpoint import Served

__all__ = ["clip", "run_doctor"]

DOCTOR_TIMEOUT = 5.0
LIBGOMP_HINT = "install it (Debian/Ubuntu: apt-get install libgomp1)"
LOCAL_HINT = "pip install 'nbchat[local]'"


def clip(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class Doctor:
    """Prints one ✓/✗ line per check (details indented below) and remembers any failure."""

    def __init__(self) -> None:
        self.failed = False

    def report(self, ok: bool, text: str, details: Sequence[str] = ()) -> None:
        self.failed = self.failed or not ok
        print(f"{'✓' if ok else '✗'} {text}", flush=True)
        for line in details:
            print(f"    {line}")


def run_doctor(args: argparse.Namespace) -> int:
    doctor = Doctor()
    _check_variables(doctor)
    try:
        with warnings.catch_warnings():  # listed by the line above instead
            warnings.simplefilter("ignore", UnknownVariableWarning)
            settings = Settings.load()
    except ConfigError as error:
        doctor.report(False, f"Settings: {error}")
        return 1
    doctor.report(True, f"Settings load (home {settings.home})", _setting_sources(settings))
    doctor.report(True, _api_key_line(settings))
    _check_database(doctor, settings)
    client = _check_server(doctor, settings)
    if client is not None:
        _check_window(doctor, settings, client)
    if settings.is_embedded:
        _check_embedded(doctor, settings)
    else:
        doctor.report(True, f"Embedded model: not used (base_url {settings.source_of('base_url')})")
    _check_mcp(doctor, settings)
    return 1 if doctor.failed else 0


def _check_variables(doctor: Doctor) -> None:
    """A ✗ line listing the NBCHAT_* variables nbchat does not read (none: no line)."""
    notes = unknown_variables(os.environ)
    if notes:
        doctor.report(False, "Environment: unknown NBCHAT_* variables", notes)


def _setting_sources(settings: Settings) -> list[str]:
    lines = []
    for name, value in settings.to_public_dict().items():
        source = settings.source_of(name)
        if source != "default":
            lines.append(f"{name} = {clip(str(value), 60)}  (from {source})")
    return lines


def _api_key_line(settings: Settings) -> str:
    if settings.api_key:
        return "API key: given as an argument"
    found = next((name for name in API_KEY_VARIABLES if os.environ.get(name)), None)
    if found is not None:
        return f"API key: set (from {found})"
    return "API key: not set (fine for local servers; set NBCHAT_API_KEY for hosted ones)"


def _check_database(doctor: Doctor, settings: Settings) -> None:
    """✓ only for a database the chat can write: one it can only read fails, in the words the
    chat uses when it tries to save."""
    try:
        with closing(Store(settings.database_path)) as store:
            count = len(store.list_sessions())
            cannot_write = store.read_only_message("save a chat") if store.read_only else ""
    except NbchatError as error:
        doctor.report(False, f"Session database: {error}")
        return
    if cannot_write:
        doctor.report(False, f"Session database: {cannot_write}")
        return
    doctor.report(True, f"Session database {store.path} opens and is migrated ({count} sessions)")


def _check_server(doctor: Doctor, settings: Settings) -> openai.OpenAI | None:
    """Does a model server answer `/v1/models`, and does it serve the model? Its client, or None."""
    from nbchat.llm.client import build_client
    from nbchat.llm.endpoint import check_model

    url, which = settings.base_url, ""
    if url is None:
        running = find_running(home=settings.home)
        if running is None:
            doctor.report(*_embedded_not_running(settings))
            return None
        url, which = running.base_url, f" (the embedded {running.model}, pid {running.pid})"
    client = build_client(settings, base_url=url).with_options(
        timeout=DOCTOR_TIMEOUT, max_retries=0
    )
    served = _list_models(doctor, settings, client, url)
    if served is None:
        return None
    listed = ", ".join(served.names) or "none listed"
    doctor.report(True, f"Model server at {url}{which} answers /v1/models (models: {listed})")
    check = check_model(settings, served, base_url=url)
    if check.message:
        doctor.report(check.ok, f"Model: {check.message}")
    elif served.names:
        doctor.report(True, f"Model: {settings.model} ({_model_note(settings, served)})")
    return client


def _list_models(
    doctor: Doctor, settings: Settings, client: openai.OpenAI, url: str
) -> Served | None:
    import openai

    from nbchat.llm.endpoint import served_from, unreachable
    from nbchat.llm.servererrors import translate_error

    try:
        page = client.models.list()
    except openai.OpenAIError as exc:
        error = translate_error(exc, base_url=url)
        if settings.base_url is not None and isinstance(error, ServerUnavailableError):
            # Not "set NBCHAT_BASE_URL": it is set, to an address where nothing answers.
            doctor.report(False, f"Model server: {unreachable(settings, url)}")
        else:
            where = (
                f" (base_url from {settings.source_of('base_url')})" if settings.base_url else ""
            )
            doctor.report(False, f"Model server: {error}{where}")
        return None
    return served_from(page.data, embedded=settings.is_embedded)


def _model_note(settings: Settings, served: Served) -> str:
    if settings.model in served.names:
        return "served"
    return f"nbchat's default name; the chat records {served.names[0]}, the model served"


def _embedded_not_running(settings: Settings) -> tuple[bool, str]:
    if settings.autostart:
        return True, (
            "Model server: the embedded one is not running; the chat starts it on first use "
            f"(autostart, from {settings.source_of('autostart')})."
        )
    return False, (
        "Model server: the embedded one is not running. Start it with `nbchat serve-model "
        "--detach` (or set NBCHAT_AUTOSTART=1 so the chat starts it), or point NBCHAT_BASE_URL "
        "at an OpenAI-compatible server."
    )


def _check_window(doctor: Doctor, settings: Settings, client: openai.OpenAI) -> None:
    from nbchat.llm.client import server_context_size

    n_ctx = server_context_size(client)
    if n_ctx is None:
        doctor.report(True, "Context window: not reported by the server (it has no /props)")
    else:
        doctor.report(True, f"Context window: {n_ctx:,} tokens (from the server's /props)")
    threshold = settings.threshold_for(n_ctx)
    trigger = int(threshold * settings.trigger_factor)
    if settings.context_token_threshold is not None:
        origin = f"context_token_threshold, from {settings.source_of('context_token_threshold')}"
    elif n_ctx is not None and n_ctx > settings.max_tokens:
        origin = f"the window minus max_tokens {settings.max_tokens:,}"
    else:
        origin = "the default; set NBCHAT_CONTEXT_TOKEN_THRESHOLD to fit the model"
    text = f"Compaction: threshold {threshold:,} tokens ({origin}), triggers at {trigger:,}"
    if n_ctx is None or threshold + settings.max_tokens <= n_ctx:
        doctor.report(True, text)
        return
    room = n_ctx - settings.max_tokens
    fix = (
        f"Set NBCHAT_CONTEXT_TOKEN_THRESHOLD to at most {room:,}."
        if room > 0
        else "Lower NBCHAT_MAX_TOKENS or serve the model with a larger --n-ctx."
    )
    doctor.report(
        False,
        f"{text}; with max_tokens {settings.max_tokens:,} a request may not fit the "
        f"{n_ctx:,}-token window. {fix}",
    )


def _check_mcp(doctor: Doctor, settings: Settings) -> None:
    """One line per configured MCP server: does it start and list its tools? (Each is started
    and stopped again; its env and header values are never printed.)"""
    if not (settings.mcp_servers or settings.mcp_config):
        doctor.report(True, "MCP servers: none configured")
        return
    from nbchat.tools.mcp import check_servers  # the tools (pydantic) only when needed

    for ok, line in check_servers(settings):
        doctor.report(ok, line)


def _check_embedded(doctor: Doctor, settings: Settings) -> None:
    runtime = importlib.util.find_spec("xllamacpp") is not None
    state = "is installed" if runtime else f"is missing: {LOCAL_HINT}"
    doctor.report(runtime, f"xllamacpp (the embedded llama.cpp server) {state}")
    name = settings.local_model
    if name == AUTO:
        choice = choose_model(read_machine())
        doctor.report(True, f"Model choice: auto picks {choice.key} here ({choice.reason})")
        name = choice.key
    doctor.report(*_model_files(name, settings))
    gomp = ctypes.util.find_library("gomp")
    state = f"found ({gomp})" if gomp else f"(needed by llama.cpp) is missing: {LIBGOMP_HINT}"
    doctor.report(gomp is not None, f"libgomp {state}")
    doctor.report(True, _saved_prompts_line(settings))


def _saved_prompts_line(settings: Settings) -> str:
    """Where the embedded server keeps what it read of your prompts, and how to clear it."""
    sizes = kept_sizes(settings.home)
    bound = f"at most {MAX_FILES} files, {MAX_BYTES // 2**20} MiB"
    if not sizes:
        return f"Saved prompts: none yet (kept in {slot_dir(settings.home)}, {bound})"
    return (
        f"Saved prompts: {len(sizes)} in {slot_dir(settings.home)} ({sum(sizes) / 2**20:.0f} MiB, "
        f"{bound}): what the model read of your prompts, so the first reply after a restart "
        "is quick; only you can read them, and deleting the folder clears them"
    )


def _model_files(name: str, settings: Settings) -> tuple[bool, str]:
    """Whether the file for model `name` is there, without assembling anything."""
    key = model_key(name)
    known = MODELS.get(key)
    if known is not None and known.is_assembled:
        # The packages, not the cached file: a cache is rebuilt from them when it goes bad.
        missing = missing_requirements(known)
        if missing:
            return False, f"Model {key}: {', '.join(missing)} missing: {LOCAL_HINT}"
        return True, (
            f"Model {key} ({known.display}): its {len(known.parts)} chunk packages are "
            "installed (joined and checked on first start)"
        )
    try:
        path = model_path(name, home=settings.home)
    except ConfigError as error:
        return False, f"Model {name}: {error}"
    return True, f"Model {key}: {path}"

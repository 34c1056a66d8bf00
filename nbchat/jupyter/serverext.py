"""The Jupyter server extension: authenticated REST endpoints under `<base_url>nbchat/api/`.

Enabled by `jupyter-config/jupyter_server_config.d/nbchat.json` (`"nbchat.jupyter.serverext":
true`),
which pip installs into `<prefix>/etc/jupyter/`. Endpoints, all behind Jupyter's token or login:

    GET  sessions                     every session (id, title, model, created, updated, rows)
    GET  sessions/<id>/export?format=md|json   one session's full transcript
    GET  model                        the embedded model server: running?, url, pid, model, n_ctx
    POST model/start   {"model": "qwen", "n_ctx": 8192}  (both optional) start or reuse it
    POST model/stop                   stop the recorded embedded server

The embedded server is shared by every kernel of the user, so the extension stops only a server
it started itself, when Jupyter exits. Jupyter (2.21) calls shutdown hooks only for
`ExtensionApp`s, not for plain module extensions like this one, so that is an `atexit` hook; it
runs after the server's loop has stopped, whether by Ctrl-C, SIGTERM or `/api/shutdown`.

Settings come from `Settings.load()` on each request (so `NBCHAT_HOME` and `config.toml` apply);
the store is opened on first use. Blocking work (SQLite, starting or probing the model server)
runs in the loop's thread executor, never on the tornado loop.

Must not: do any work at import, serve anything unauthenticated, or hold chat or UI state.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import threading
from collections.abc import Callable
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from nbchat.config import Settings
from nbchat.embedded.server import LocalServer, ensure_server, find_running
from nbchat.errors import ConfigError, NbchatError, ServerUnavailableError
from nbchat.store.store import Store

if TYPE_CHECKING:  # importing the server app itself is slow and not needed at run time
    from jupyter_server.serverapp import ServerApp

__all__ = [
    "__version__",
    "_jupyter_server_extension_points",
    "_load_jupyter_server_extension",
]

# Jupyter shows it in `jupyter server extension list`; read from the installed metadata, because
# importing the package root from here would pull every part in.
__version__ = metadata.version("nbchat")

T = TypeVar("T")
AUTH_RESOURCE = "nbchat"
EXPORT_FORMATS = {"md": "text/markdown; charset=UTF-8", "json": "application/json"}


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "nbchat.jupyter.serverext"}]


def _load_jupyter_server_extension(serverapp: ServerApp) -> None:
    """Register the handlers and the exit hook; opens nothing until the first request."""
    extension = Extension(log=serverapp.log.info)
    base = url_path_join(serverapp.web_app.settings["base_url"], "nbchat", "api")
    options = {"extension": extension}
    handlers: list[tuple[str, type[APIHandler], dict[str, Any]]] = [
        (url_path_join(base, "sessions"), SessionsHandler, options),
        (url_path_join(base, "sessions", "([^/]+)", "export"), ExportHandler, options),
        (url_path_join(base, "model"), ModelHandler, options),
        (url_path_join(base, "model", "(start|stop)"), ModelActionHandler, options),
    ]
    # jupyter_server overrides add_handlers without annotations; tornado's signature applies.
    serverapp.web_app.add_handlers(".*$", handlers)  # type: ignore[no-untyped-call]
    atexit.register(extension.shutdown)
    serverapp.log.info("nbchat: REST endpoints at %s", base)


class Extension:
    """What outlives a request: the open stores and the model server this extension started."""

    def __init__(self, *, log: Callable[[str], None]) -> None:
        self.log = log
        self.started: LocalServer | None = None
        self._stores: dict[Path, Store] = {}
        self._lock = threading.Lock()

    def store(self, settings: Settings) -> Store:
        """The store at the settings' DB path (`Store` keeps one connection per thread)."""
        with self._lock:
            path = settings.database_path
            if path not in self._stores:
                self._stores[path] = Store(path)
            return self._stores[path]

    def model_status(self, home: Path) -> dict[str, Any]:
        return self._status(find_running(home=home))

    def start_model(self, settings: Settings, *, model: str, n_ctx: int) -> dict[str, Any]:
        """Start the embedded server, or reuse the one running for `model`."""
        messages: list[str] = []

        def progress(message: str) -> None:
            messages.append(message)
            self.log(f"nbchat: {message}")

        server = ensure_server(model, home=settings.home, n_ctx=n_ctx, progress=progress)
        # ensure_server reports progress only on the path that starts a server, so silence
        # means it reused one that some kernel or `nbchat serve-model` started: not ours to stop.
        if messages:
            with self._lock:
                self.started = server
        return self._status(server)

    def stop_model(self, home: Path) -> dict[str, Any]:
        server = find_running(home=home)
        if server is not None:
            server.stop()
            self.log(f"nbchat: stopped the embedded model server at {server.url}")
        with self._lock:
            if self.started is not None and server is not None and self.started.pid == server.pid:
                self.started = None
        return self._status(None)

    def shutdown(self) -> None:
        """At exit: stop the server this extension started (if it still runs), close stores."""
        with self._lock:
            started, self.started = self.started, None
            stores, self._stores = list(self._stores.values()), {}
        if started is not None and started.is_alive():
            started.stop()
        for store in stores:
            store.close()

    def _status(self, server: LocalServer | None) -> dict[str, Any]:
        if server is None:
            empty = dict.fromkeys(("url", "base_url", "pid", "model", "n_ctx"))
            return {"running": False, **empty, "started_here": False}
        with self._lock:
            ours = self.started is not None and self.started.pid == server.pid
        return {
            "running": True,
            "url": server.url,
            "base_url": server.base_url,
            "pid": server.pid,
            "model": server.model,
            "n_ctx": server.n_ctx,
            "started_here": ours,
        }


class BaseHandler(APIHandler):
    """Shared by every endpoint: the extension, blocking calls off the loop, JSON errors."""

    auth_resource = AUTH_RESOURCE
    extension: Extension

    def initialize(self, extension: Extension) -> None:
        self.extension = extension

    async def blocking(self, function: Callable[[], T]) -> T:
        """Run `function` in the loop's thread executor; NbchatErrors become JSON errors."""
        try:
            return await asyncio.get_running_loop().run_in_executor(None, function)
        except NbchatError as error:
            raise _HTTPFailure(_status_for(error), str(error)) from error

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc_info = kwargs.get("exc_info")
        failure = exc_info[1] if exc_info else None
        if not isinstance(failure, _HTTPFailure):
            super().write_error(status_code, **kwargs)
            return
        # Written here rather than by APIHandler: tornado %-formats an HTTPError's log_message,
        # and a message that names a path or a model may hold a "%".
        self.finish(json.dumps({"message": failure.message}))

    def settings_now(self) -> Settings:
        try:
            return Settings.load()
        except ConfigError as error:
            raise _HTTPFailure(500, str(error)) from error


class SessionsHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        settings = self.settings_now()
        store = self.extension.store(settings)
        sessions = await self.blocking(store.list_sessions)
        self.finish(json.dumps([asdict(info) for info in sessions]))


class ExportHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self, session_id: str) -> None:
        kind = self.get_argument("format", "md")
        if kind not in EXPORT_FORMATS:
            raise _HTTPFailure(400, f"format must be md or json, not {kind!r}.")
        store = self.extension.store(self.settings_now())

        export = store.export_json if kind == "json" else store.export_markdown

        def export_if_known() -> str | None:
            known = {info.id for info in store.list_sessions()}
            return export(session_id) if session_id in known else None

        text = await self.blocking(export_if_known)
        if text is None:
            raise _HTTPFailure(
                404, f"No session {session_id!r}. GET nbchat/api/sessions lists them."
            )
        self.finish(text, set_content_type=EXPORT_FORMATS[kind])


class ModelHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        home = self.settings_now().home
        self.finish(json.dumps(await self.blocking(lambda: self.extension.model_status(home))))


class ModelActionHandler(BaseHandler):
    @web.authenticated
    @authorized
    async def post(self, action: str) -> None:
        settings = self.settings_now()
        if action == "stop":
            status = await self.blocking(lambda: self.extension.stop_model(settings.home))
        else:
            model, n_ctx = _start_arguments(self.request.body, settings)
            status = await self.blocking(
                lambda: self.extension.start_model(settings, model=model, n_ctx=n_ctx)
            )
        self.finish(json.dumps(status))


class _HTTPFailure(web.HTTPError):
    """An HTTP error whose JSON body is `{"message": message}`, the message kept verbatim."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status)
        self.message = message


def _start_arguments(body: bytes, settings: Settings) -> tuple[str, int]:
    """`model` and `n_ctx` from the optional JSON body, defaulting to the settings."""
    try:
        request = json.loads(body) if body.strip() else {}
    except ValueError as error:
        raise _HTTPFailure(
            400, f'The body must be JSON such as {{"model": "qwen"}}: {error}.'
        ) from error
    if not isinstance(request, dict):
        raise _HTTPFailure(400, 'The body must be a JSON object such as {"model": "qwen"}.')
    model = request.get("model", settings.local_model)
    n_ctx = request.get("n_ctx", settings.local_n_ctx)
    if not isinstance(model, str) or not model:
        raise _HTTPFailure(400, "model must be 'qwen', 'smollm' or the path of a .gguf file.")
    if not isinstance(n_ctx, int) or isinstance(n_ctx, bool) or n_ctx < 0:
        raise _HTTPFailure(400, "n_ctx must be 0 (the model's own) or a positive number.")
    return model, n_ctx


def _status_for(error: NbchatError) -> int:
    if isinstance(error, ServerUnavailableError):
        return 503
    if isinstance(error, ConfigError):
        return 400
    return 500

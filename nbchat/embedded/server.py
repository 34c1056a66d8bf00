"""The embedded default model server: start, find, reuse and stop a llama.cpp server on 127.0.0.1.

The server is xllamacpp's llama.cpp server, which has no command line of its own, so it runs in a
child process this module starts (`python -m nbchat.embedded.child serve …`, see
`nbchat.embedded.child`). The child gets its own session, so interrupting a kernel does not kill
it and it outlives the kernel that started it; it prints one JSON line (url, pid, n_ctx, model)
once the model is loaded and stops cleanly on SIGTERM, SIGINT or SIGHUP. Its log goes to
`<home>/run/model-server.log`.

Kernels share one server through `<home>/run/model-server.json` (url, pid, model, n_ctx,
idle_timeout, started);
`<home>/run/model-server.lock` (flock) lets only one process at a time start, replace or forget it.
A server counts as running when its process is alive AND `/health` answers ok quickly; anything
else is stale and its runtime file is removed. Replacing a running server checks everything a start
needs (arguments, port, xllamacpp, the model file, assembled if need be) before stopping it. The
files themselves and the process checks live in
`nbchat.embedded.runtime`; finding and assembling the model files lives in
`nbchat.embedded.modelfiles`.

Must not: import xllamacpp (only the child does); take `Settings`
(callers pass `home` and the rest explicitly); listen anywhere but 127.0.0.1. POSIX only (flock,
signals, sessions).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import selectors
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbchat.config import DEFAULT_N_CTX
from nbchat.embedded import runtime as localrun
from nbchat.embedded.child import DEFAULT_MODEL, LOCAL_EXTRA_HINT
from nbchat.embedded.modelfiles import Progress, model_key, model_path
from nbchat.errors import ConfigError, ServerUnavailableError

__all__ = [
    "DEFAULT_MODEL",
    "LocalServer",
    "Wanted",
    "ensure_server",
    "find_running",
    "model_path",
    "start_server",
]

DEFAULT_TIMEOUT = 120.0
STOP_GRACE = 10.0
HEALTH_TIMEOUT = 2.0
PROGRESS_EVERY = 5.0
START_HINT = "Start it again with `nbchat serve-model`."

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalServer:
    """A running embedded server. `home` (when known) is where its runtime file lives."""

    url: str
    pid: int
    model: str
    n_ctx: int
    idle_timeout: float | None = field(default=None, compare=False)  # None: not recorded
    home: Path | None = field(default=None, compare=False)

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, for `openai.OpenAI(base_url=...)`."""
        return self.url + "/v1"

    def is_alive(self, *, timeout: float = HEALTH_TIMEOUT) -> bool:
        """True when the process runs and `/health` answers ok within `timeout` seconds."""
        return localrun.is_running(self.pid) and localrun.is_healthy(self.url, timeout=timeout)

    def stop(self, *, grace: float = STOP_GRACE) -> None:
        """SIGTERM, SIGKILL after `grace` seconds, then forget the runtime file if it names us."""
        localrun.terminate(self.pid, grace=grace)
        if self.home is not None:
            with localrun.lock(self.home):
                localrun.forget_record(self.home, pid=self.pid)


@dataclass(frozen=True)
class Wanted:
    """What a running server must have to be reused as it is; None accepts any value, and
    n_ctx 0 (the model's own window) any window."""

    n_ctx: int | None = None
    idle_timeout: float | None = None

    def differences(self, server: LocalServer) -> dict[str, str]:
        """Each setting `server` does not have, with a phrase saying so ("n_ctx 8192, not 4096")."""
        found = {}
        if self.n_ctx and server.n_ctx != self.n_ctx:
            found["n_ctx"] = f"n_ctx {server.n_ctx}, not {self.n_ctx}"
        if self.idle_timeout is not None and server.idle_timeout != self.idle_timeout:
            now = "unknown" if server.idle_timeout is None else f"{server.idle_timeout:g} s"
            found["idle_timeout"] = f"idle timeout {now}, not {self.idle_timeout:g} s"
        return found


def find_running(*, home: Path) -> LocalServer | None:
    """The live server recorded under `home`, or None (a stale record is removed)."""
    if not localrun.has_record(home):
        return None  # the common "nothing started yet" case creates no directories
    with localrun.lock(home):
        return _find_running_locked(home)


def start_server(
    model: str = DEFAULT_MODEL,
    *,
    home: Path,
    port: int = 0,
    n_ctx: int = DEFAULT_N_CTX,
    timeout: float = DEFAULT_TIMEOUT,
    progress: Progress | None = None,
    idle_timeout: float = 0.0,
) -> LocalServer:
    """Start a server for `model` (`auto`, a key of `MODELS` or a .gguf path) and record it
    under `home`.

    With `idle_timeout` > 0 it stops itself after that many seconds without a request.
    Raises ConfigError when one is already running there (use `ensure_server` to share it).
    """
    with localrun.lock(home):
        running = _find_running_locked(home)
        if running is not None:
            raise ConfigError(
                f"An embedded model server is already running at {running.url} "
                f"(pid {running.pid}, model {running.model}); reuse it with ensure_server() "
                "or stop it first."
            )
        return _start_locked(
            model,
            home=home,
            port=port,
            n_ctx=n_ctx,
            timeout=timeout,
            progress=progress,
            idle_timeout=idle_timeout,
        )


def ensure_server(
    model: str = DEFAULT_MODEL,
    *,
    home: Path,
    port: int = 0,
    n_ctx: int = DEFAULT_N_CTX,
    timeout: float = DEFAULT_TIMEOUT,
    replace: bool = False,
    progress: Progress | None = None,
    idle_timeout: float = 0.0,
    wanted: Wanted = Wanted(),
) -> LocalServer:
    """The live server for `model` under `home`, started when there is none.

    A running server of that model is reused whatever its n_ctx (read `.n_ctx`) unless `wanted`
    says what it must have. One running another model, or lacking what `wanted` asks, is
    replaced only when `replace` is true, since other kernels may be using it; everything a start
    needs is checked before it is stopped.
    """
    key = model_key(model)
    with localrun.lock(home):
        running = _find_running_locked(home)
        problem = "" if running is None else _mismatch(running, key, wanted)
        if running is not None and not problem:
            return running
        if running is not None and not replace:
            raise ConfigError(
                f"The embedded model server at {running.url} (pid {running.pid}) runs "
                f"{problem}; stop it first or pass replace=True."
            )
        return _start_locked(
            key,
            home=home,
            port=port,
            n_ctx=n_ctx,
            timeout=timeout,
            progress=progress,
            idle_timeout=idle_timeout,
            replacing=running,
        )


def _mismatch(running: LocalServer, key: str, wanted: Wanted) -> str:
    """Why `running` will not do for `key` and `wanted` ("" when it will)."""
    if running.model != key:
        return f"{running.model}, not {key}"
    differences = wanted.differences(running)
    return f"{key} with {', '.join(differences.values())}" if differences else ""


def _find_running_locked(home: Path) -> LocalServer | None:
    record = localrun.read_record(home)
    if record is None:
        return None
    # Older runtime files say `qwen` for what is now `qwen-0.5b`.
    server = LocalServer(**{**record, "model": model_key(record["model"])}, home=home)
    if server.is_alive():
        return server
    # A process that still runs but does not answer /health is hung: stop it rather than leave
    # an unreachable server holding the model in memory.
    localrun.terminate(server.pid, grace=STOP_GRACE)
    localrun.forget_record(home, pid=server.pid)
    return None


def _start_locked(
    model: str,
    *,
    home: Path,
    port: int,
    n_ctx: int,
    timeout: float,
    progress: Progress | None,
    idle_timeout: float,
    replacing: LocalServer | None = None,
) -> LocalServer:
    """Start a server for `model` (stopping `replacing` first, once all is known to be ready)."""
    key = model_key(model)
    _check_start_arguments(port=port, n_ctx=n_ctx, timeout=timeout)
    _prepare(key, home=home, port=port, progress=progress, replacing=replacing)
    if replacing is not None:
        localrun.terminate(replacing.pid, grace=STOP_GRACE)
        localrun.forget_record(home, pid=replacing.pid)
    _report(progress, f"Starting the embedded model server ({key}, n_ctx={n_ctx})…")
    log = localrun.run_dir(home) / localrun.LOG_FILE
    started = time.monotonic()
    proc = _spawn(key, home=home, port=port, n_ctx=n_ctx, log=log, idle_timeout=idle_timeout)
    try:
        ready = _wait_ready(proc, key, deadline=started + timeout, log=log, progress=progress)
    except BaseException:
        # Includes KeyboardInterrupt: a half-started server nobody has recorded must not linger.
        localrun.terminate(proc.pid, grace=1.0)
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    server = LocalServer(
        url=str(ready["url"]),
        pid=proc.pid,
        model=key,
        n_ctx=int(ready["n_ctx"]),
        idle_timeout=idle_timeout,
        home=home,
    )
    _record(server, log=log)
    _report(progress, f"Model server ready at {server.url} in {time.monotonic() - started:.1f} s.")
    return server


def _record(server: LocalServer, *, log: Path) -> None:
    assert server.home is not None
    record = {"url": server.url, "pid": server.pid, "model": server.model, "n_ctx": server.n_ctx}
    localrun.write_record(
        server.home, {**record, "idle_timeout": server.idle_timeout, "log": str(log)}
    )


def _prepare(
    key: str,
    *,
    home: Path,
    port: int,
    progress: Progress | None,
    replacing: LocalServer | None,
) -> None:
    """Check what else a start needs (xllamacpp, a free port, the model file) and assemble the
    model here, where progress is visible: all before `replacing` is stopped."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise ConfigError(LOCAL_EXTRA_HINT)
    if port and not (replacing is not None and replacing.url.endswith(f":{port}")):
        _check_port_free(port)
    model_path(key, home=home, progress=progress)


def _check_port_free(port: int) -> None:
    with socket.socket() as probe:
        # As the server binds (SO_REUSEADDR): a port a closed connection still waits on is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise ConfigError(
                f"Port {port} on 127.0.0.1 is not free ({error.strerror or error}); choose "
                "another port, or 0 for any free one."
            ) from error


def _check_start_arguments(*, port: int, n_ctx: int, timeout: float) -> None:
    if not 0 <= port <= 65535:
        raise ConfigError(f"port must be 0 (any free port) or 1-65535, not {port}.")
    if n_ctx < 0:
        raise ConfigError(f"n_ctx must be 0 (the model's own) or a positive size, not {n_ctx}.")
    if timeout <= 0:
        raise ConfigError(f"timeout must be a positive number of seconds, not {timeout}.")


def _spawn(
    key: str, *, home: Path, port: int, n_ctx: int, log: Path, idle_timeout: float
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "nbchat.embedded.child",
        "serve",
        "--model",
        key,
        "--home",
        str(home),
    ]
    command += ["--port", str(port), "--n-ctx", str(n_ctx), "--idle-timeout", str(idle_timeout)]
    # The child imports this very copy of nbchat, installed or not: the folder above the package.
    source_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source_root, env.get("PYTHONPATH")]))
    # llama.cpp's OpenMP threads spin at every barrier by default; on a busy two-core machine
    # that made one SmolLM2 request 5-7x slower (37 s against 6.5 s, measured side by side).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with log.open("wb") as log_handle:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_handle,
            start_new_session=True,
            env=env,
            cwd=home,
        )
    localrun.register_child(proc)
    return proc


def _wait_ready(
    proc: subprocess.Popen[bytes],
    key: str,
    *,
    deadline: float,
    log: Path,
    progress: Progress | None,
) -> dict[str, Any]:
    """The child's ready line, read with a deadline; its log tail in the error if it dies."""
    assert proc.stdout is not None
    buffer = b""
    next_note = time.monotonic() + PROGRESS_EVERY
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            now = time.monotonic()
            if now >= deadline:
                raise ServerUnavailableError(
                    f"The embedded model server (pid {proc.pid}) did not load {key} in time; it "
                    f"was stopped. Last log lines:\n{localrun.log_tail(log)}\nTry a longer timeout."
                )
            if not selector.select(timeout=min(1.0, deadline - now)):
                if now >= next_note:
                    _report(progress, f"Still loading {key}…")
                    next_note = now + PROGRESS_EVERY
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                raise _exited_error(proc, key, log=log)
            buffer += chunk
    try:
        ready: dict[str, Any] = json.loads(buffer.split(b"\n", 1)[0])
        return {"url": str(ready["url"]), "n_ctx": int(ready["n_ctx"])}
    except (ValueError, KeyError, TypeError) as error:
        raise ServerUnavailableError(
            f"The embedded model server (pid {proc.pid}) printed {buffer[:200]!r} instead of its "
            f"ready line. Log: {log}. {START_HINT}"
        ) from error


def _exited_error(proc: subprocess.Popen[bytes], key: str, *, log: Path) -> ServerUnavailableError:
    try:
        code: int | None = proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        code = None
    return ServerUnavailableError(
        f"The embedded model server (pid {proc.pid}) exited with code {code} while loading "
        f"{key}:\n{localrun.log_tail(log)}\nFull log: {log}. {START_HINT}"
    )


def _report(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


if __name__ == "__main__":
    # The child's entry point moved to `nbchat.embedded.child`; the old command keeps working.
    from nbchat.embedded.child import main

    sys.exit(main())

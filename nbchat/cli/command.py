"""The `nbchat` command: run the embedded model server, list and export sessions, check the setup.

    nbchat serve-model [--model auto|qwen-1.5b|qwen-0.5b|smollm|PATH] [--port N] [--n-ctx N]
                       [--detach] [--replace] [--idle-timeout SECONDS]
    nbchat stop-model
    nbchat sessions [--json]
    nbchat export ID [--format md|json] [--output FILE] [--requests]
    nbchat undo-compact ID [--force]
    nbchat doctor
    nbchat --version

Everything reads `Settings.load()` (so NBCHAT_HOME, the other NBCHAT_* variables and
`<home>/config.toml` apply). Results go to stdout, progress to stderr; an `NbchatError` becomes one
`nbchat: …` message on stderr and exit code 1 (argparse's usage errors exit 2).

Must not: print the API key (the doctor says only whether one is set and where from), import
xllamacpp (the doctor looks for it with `find_spec`), or hold logic the library modules own.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import asdict, replace
from datetime import datetime
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from nbchat.cli.doctor import clip, run_doctor
from nbchat.config import Settings, UnknownVariableWarning
from nbchat.conversation.requestview import export_requests
from nbchat.conversation.steer import undo_outcome
from nbchat.embedded.modelfiles import model_key
from nbchat.embedded.runtime import LOG_FILE, is_running
from nbchat.embedded.server import LocalServer, Wanted, ensure_server, find_running
from nbchat.errors import ConfigError, NbchatError, ServerUnavailableError
from nbchat.history import request_overhead_tokens
from nbchat.store.catalog import requests_to_markdown
from nbchat.store.store import Store

if TYPE_CHECKING:  # openai takes ~0.4 s to import and only the doctor needs it
    pass

__all__ = ["main"]

# How often a foreground `serve-model` checks that its server still answers: nothing notifies
# us when another process's server dies, so this is a watchdog, not a wait for an event.
WATCH_SECONDS = 2.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
FLAGS = {"n_ctx": "--n-ctx", "idle_timeout": "--idle-timeout"}
Handler = Callable[[int, FrameType | None], None]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; returns the exit code (argparse exits 2 itself on usage errors)."""
    args = build_parser().parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        with _plain_warnings():
            return command(args)
    except NbchatError as error:
        print(f"nbchat: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_left()


def _reader_left() -> int:
    """Whoever read stdout stopped (`nbchat sessions | head -3`): not an error to report.
    stdout is pointed at /dev/null so the interpreter's last flush fails no more; the exit
    code is the shell's for a writer that SIGPIPE ended."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


@contextmanager
def _plain_warnings() -> Iterator[None]:
    """Settings warnings (an NBCHAT_* variable nbchat does not read) as one `nbchat: …` line on
    stderr when they happen, not in Python's file-and-line form; others as Python shows them."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", UnknownVariableWarning)
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, UnknownVariableWarning):
                print(f"nbchat: {message}", file=sys.stderr, flush=True)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nbchat", description="nbchat's command line.")
    version = f"nbchat {metadata.version('nbchat')}"
    parser.add_argument("--version", action="version", version=version)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    serve = commands.add_parser("serve-model", help="run the embedded llama.cpp model server")
    serve.add_argument(
        "--model",
        help="auto, qwen-1.5b, qwen-0.5b, smollm or a .gguf path (default: local_model)",
    )
    serve.add_argument("--port", type=int, default=0, help="default: any free port")
    serve.add_argument("--n-ctx", type=int, help="context window (default: local_n_ctx)")
    serve.add_argument("--detach", action="store_true", help="start it, leave it running, return")
    serve.add_argument(
        "--idle-timeout",
        type=float,
        help="stop after this many seconds without a request; 0 never (default: "
        "local_idle_timeout with --detach, 0 in the foreground)",
    )
    serve.add_argument(
        "--replace",
        action="store_true",
        help="replace a running server of another model, n_ctx or idle timeout",
    )
    serve.set_defaults(command=serve_model)
    stop = commands.add_parser("stop-model", help="stop the embedded model server")
    stop.set_defaults(command=stop_model)
    sessions = commands.add_parser("sessions", help="list sessions, newest first")
    sessions.add_argument("--json", action="store_true", help="print JSON")
    sessions.set_defaults(command=list_sessions)
    export = commands.add_parser("export", help="export one session's full transcript")
    export.add_argument("session_id", metavar="ID")
    export.add_argument("--format", choices=("md", "json"), default="md")
    export.add_argument("--output", type=Path, metavar="FILE", help="default: stdout")
    export.add_argument(
        "--requests", action="store_true", help="also every request exactly as it was sent"
    )
    export.set_defaults(command=export_session)
    undo = commands.add_parser("undo-compact", help="undo a session's latest compaction")
    undo.add_argument("session_id", metavar="ID")
    undo.add_argument(
        "--force", action="store_true", help="undo even if the history is then over the trigger"
    )
    undo.set_defaults(command=undo_compaction)
    doctor = commands.add_parser("doctor", help="check the setup and say what to fix")
    doctor.set_defaults(command=run_doctor)
    return parser


# serve-model / stop-model


def serve_model(args: argparse.Namespace) -> int:
    settings = _serve_settings(args)
    model = model_key(args.model or settings.local_model)
    # SIGTERM and SIGHUP end a foreground server like Ctrl-C, so every exit path cleans up.
    with _handling(STOP_SIGNALS, _interrupt):
        server, started = _start_or_reuse(settings, model, args=args)
        try:
            _announce(server, started, settings=settings, detach=args.detach)
            if not args.detach:
                _watch(server)
        except KeyboardInterrupt:
            pass  # Ctrl-C or SIGTERM: the normal way to end a foreground server
        finally:
            if started and not args.detach:
                _stop_started(server)
    return 0


def _serve_settings(args: argparse.Namespace) -> Settings:
    """The settings with --n-ctx and --idle-timeout in them, so the flags get the same checks."""
    flags = {"local_n_ctx": args.n_ctx, "local_idle_timeout": args.idle_timeout}
    return Settings.load().replace(**{k: v for k, v in flags.items() if v is not None})


def _start_or_reuse(
    settings: Settings, model: str, *, args: argparse.Namespace
) -> tuple[LocalServer, bool]:
    running = find_running(home=settings.home)
    wanted = Wanted(n_ctx=args.n_ctx, idle_timeout=args.idle_timeout)
    if running is not None and not args.replace:
        _check_reusable(running, model, wanted)
    started: list[str] = []

    def progress(message: str) -> None:
        started.append(message)
        print(message, file=sys.stderr, flush=True)

    # A foreground server ends with Ctrl-C; a detached one bounds itself unless told otherwise.
    explicit = args.detach or args.idle_timeout is not None
    server = ensure_server(
        model,
        home=settings.home,
        port=args.port,
        n_ctx=settings.local_n_ctx,
        replace=args.replace,
        progress=progress,
        idle_timeout=settings.local_idle_timeout if explicit else 0.0,
        wanted=wanted,
    )
    # ensure_server reports progress only when it starts a server; silence means it reused one.
    return server, bool(started)


def _check_reusable(running: LocalServer, model: str, wanted: Wanted) -> None:
    """Refuse to pass off `running` as the server asked for when it is not (--replace would
    restart it, which other kernels using it notice)."""
    where = f"The embedded model server at {running.url} (pid {running.pid})"
    if running.model != model:
        raise ConfigError(
            f"{where} runs {running.model}, not {model}. Stop it with `nbchat stop-model`, or "
            "pass --replace."
        )
    differences = wanted.differences(running)
    if differences:
        flags = " and ".join(FLAGS[name] for name in differences)
        raise ConfigError(
            f"{where} already runs {model} with {', '.join(differences.values())}. Other "
            f"kernels may be using it: pass --replace to restart it as asked, or leave out "
            f"{flags} to use it as it is."
        )


def _announce(server: LocalServer, started: bool, *, settings: Settings, detach: bool) -> None:
    verb = "Started" if started else "Reusing the already running"
    print(f"{verb} embedded model server: {server.model}, n_ctx {server.n_ctx}, pid {server.pid}.")
    print(f"URL: {server.url}")
    print(f"To use it elsewhere: NBCHAT_BASE_URL={server.base_url}")
    if settings.base_url is not None:
        where = settings.source_of("base_url")
        print(f"Note: base_url is set to {settings.base_url} ({where}); nbchat uses that server.")
    if detach:
        print(
            "It keeps running for every kernel (JupyterLab's exit included) until `nbchat "
            "stop-model`, or until local_idle_timeout passes without a request."
        )
    elif started:
        print("Serving; press Ctrl-C to stop it.", flush=True)
    else:
        print("Ctrl-C leaves it running: it was started elsewhere.", flush=True)


def _watch(server: LocalServer) -> None:
    """Return never: wait for Ctrl-C/SIGTERM (KeyboardInterrupt) while the server answers."""
    while server.is_alive():
        time.sleep(WATCH_SECONDS)
    log = server.home / "run" / LOG_FILE if server.home else LOG_FILE
    raise ServerUnavailableError(
        f"The embedded model server at {server.url} (pid {server.pid}) stopped answering; see "
        f"{log}. Start it again with `nbchat serve-model`."
    )


def _stop_started(server: LocalServer) -> None:
    was_running = is_running(server.pid)
    # A second Ctrl-C must not cut the stop half-way (the record would outlive the server).
    with _handling((signal.SIGINT, *STOP_SIGNALS), signal.SIG_IGN):
        server.stop()
    if was_running:
        print(f"Stopped the embedded model server (pid {server.pid}).")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def _handling(
    signals: Sequence[signal.Signals], handler: signal.Handlers | Handler
) -> Iterator[None]:
    """Install `handler` for `signals` while the block runs, then put the old ones back."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def stop_model(args: argparse.Namespace) -> int:
    home = Settings.load().home
    server = find_running(home=home)
    if server is None:
        print(f"No embedded model server is running (home {home}).")
        return 0
    server.stop()
    print(f"Stopped the embedded model server at {server.url} (pid {server.pid}).")
    return 0


# sessions / export


def list_sessions(args: argparse.Namespace) -> int:
    with _store(Settings.load()) as store:
        sessions = store.list_sessions()
    if args.json:
        print(json.dumps([asdict(info) for info in sessions], indent=2, ensure_ascii=False))
    elif not sessions:
        print(f"No sessions yet in {store.path}.")
    else:
        print(f"{'ID':<12}  {'TITLE':<40}  {'ROWS':>9}  UPDATED")
        for info in sessions:
            rows = f"{info.active_rows}/{info.total_rows}"
            print(f"{info.id:<12}  {clip(info.title, 40):<40}  {rows:>9}  {_local(info.updated)}")
    return 0


def export_session(args: argparse.Namespace) -> int:
    with _store(Settings.load()) as store:
        export = store.export_json if args.format == "json" else store.export_markdown
        text = export(args.session_id)
        if args.requests:
            text = _with_requests(text, export_requests(store, args.session_id), args.format)
    text = text if text.endswith("\n") else text + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as error:
        raise NbchatError(
            f"Cannot write {args.output}: {error.strerror or error}. Choose another --output."
        ) from error
    print(f"Wrote session {args.session_id} ({args.format}) to {args.output}.")
    return 0


def undo_compaction(args: argparse.Namespace) -> int:
    """Undo the session's latest compaction; over the trigger afterwards only with --force."""
    settings = Settings.load()
    with _store(settings) as store:
        undo = store.plan_undo(args.session_id)
        overhead = request_overhead_tokens(settings.system_prompt, ())
        check = undo_outcome(
            undo, settings, overhead=overhead, threshold=settings.offline_threshold()
        )
        if check.warning and not args.force:
            raise NbchatError(f"{check.warning} Nothing was changed; pass --force to undo anyway.")
        store.undo_compaction(args.session_id, undo.record_id)
    print(replace(check, done=True).message)
    return 0


def _with_requests(text: str, requests: list[dict[str, Any]], kind: str) -> str:
    if kind == "json":
        document = {**json.loads(text), "sent_requests": requests}
        return json.dumps(document, indent=2, ensure_ascii=False)
    return text.rstrip("\n") + "\n\n" + requests_to_markdown(requests)


def _store(settings: Settings) -> closing[Store]:
    return closing(Store(settings.database_path))


def _local(stamp: str) -> str:
    """A stored UTC timestamp in the reader's local time, to the minute."""
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp

"""The embedded server's lifetime across kernels: its run directory and process record, and when it
has gone unused long enough to stop itself.

The run directory and the process it records (helpers for `nbchat.embedded.server`):
`<home>/run/` holds `model-server.stopped` (why the last server stopped itself, when it did),
`model-server.json` (the record other kernels read: url, pid, model, n_ctx, idle_timeout,
started, log), `model-server.lock` (flock: one process at a time starts, replaces or forgets the
server) and `model-server.log` (the child's stderr). This module reads and writes those files and
answers "is that process still our server, and is it healthy", and ends it.

The self-stop: when the server has gone unused for `local_idle_timeout`. The server outlives the
kernels and JupyterLab that started it (by design: kernels share it), so without a bound it
would hold ~800 MB until someone runs `nbchat stop-model`. `wait_for_stop` is the server
process's main wait: a stop signal ends it at once, and with an idle timeout it also wakes every
few seconds to read llama.cpp's `/metrics` counters (tokens read and generated, requests in
flight). Counters unchanged and nothing in flight for the whole timeout means no client used it:
the wait returns "idle" and the caller stops the server (the wait stops nothing itself, and
never counts a failed `/metrics` read as idleness).

Must not: decide when to start or reuse a server (`nbchat.embedded.server` does), or send a signal
to a pid it cannot tie to nbchat (a recycled pid belongs to someone else).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nbchat.errors import ConfigError

__all__ = [
    "LOG_FILE",
    "activity",
    "fetch_json",
    "fetch_text",
    "forget_record",
    "has_record",
    "idle_message",
    "is_healthy",
    "is_running",
    "lock",
    "log_tail",
    "metric_values",
    "parse_metrics",
    "post_json",
    "read_record",
    "read_stop_note",
    "register_child",
    "run_dir",
    "terminate",
    "wait_exit",
    "wait_for_stop",
    "write_record",
    "write_stop_note",
]


RECORD_FILE = "model-server.json"
LOCK_FILE = "model-server.lock"
LOG_FILE = "model-server.log"
STOP_NOTE_FILE = "model-server.stopped"
RECORD_FIELDS = {"url": str, "pid": int, "model": str, "n_ctx": int}
# Recorded since servers say how long they stay; a record written before that has none.
OPTIONAL_FIELDS = {"idle_timeout": float}

# Servers this interpreter started, so that terminate() can reap them (no zombie left behind) and
# so that their Popen objects are not garbage-collected while the process runs, which would warn.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
# Requests go straight to 127.0.0.1, never through an HTTP proxy taken from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def has_record(home: Path) -> bool:
    return (home / "run" / RECORD_FILE).is_file()


def run_dir(home: Path) -> Path:
    run = home / "run"
    try:
        run.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            f"Cannot create {run}: {error}. Point NBCHAT_HOME at a directory you can write."
        ) from error
    return run


@contextmanager
def lock(home: Path) -> Iterator[None]:
    """Hold the per-home lock; the kernel releases a flock even if this process dies."""
    with (run_dir(home) / LOCK_FILE).open("a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_record(home: Path, record: dict[str, Any]) -> None:
    """Write the record atomically (readers see the old one or the new one, never half)."""
    stamped = {**record, "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    target = run_dir(home) / RECORD_FILE
    temp = target.with_suffix(".tmp")
    temp.write_text(json.dumps(stamped, indent=1) + "\n", encoding="utf-8")
    os.replace(temp, target)
    (target.parent / STOP_NOTE_FILE).unlink(missing_ok=True)  # that stop is old news now


def read_record(home: Path) -> dict[str, Any] | None:
    """The record's url, pid, model, n_ctx and idle_timeout (None when not recorded), or None;
    an unreadable file is removed."""
    target = run_dir(home) / RECORD_FILE
    try:
        record = json.loads(target.read_text(encoding="utf-8"))
        fields = {name: kind(record[name]) for name, kind in RECORD_FIELDS.items()}
        optional = {
            name: None if record.get(name) is None else kind(record[name])
            for name, kind in OPTIONAL_FIELDS.items()
        }
        return {**fields, **optional}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        target.unlink(missing_ok=True)  # as good as stale
        return None


def forget_record(home: Path, *, pid: int) -> None:
    """Remove the record if it still names `pid` (a newer server may have replaced it)."""
    current = read_record(home)
    if current is not None and current["pid"] == pid:
        (run_dir(home) / RECORD_FILE).unlink(missing_ok=True)


def log_tail(log: Path, *, lines: int = 12) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"


def register_child(proc: subprocess.Popen[bytes]) -> None:
    _CHILDREN[proc.pid] = proc


def is_running(pid: int) -> bool:
    """True when `pid` is a live (not zombie) nbchat process."""
    proc = _CHILDREN.get(pid)
    if proc is not None:
        return proc.poll() is None  # also reaps our own child once it has exited
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists but belongs to another user; /health decides
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc on this system: trust kill(0)
    state = stat.rpartition(")")[2].split()[:1]
    return state != ["Z"] and b"nbchat" in cmdline


def fetch_json(url: str, *, timeout: float) -> Any:
    """GET `url` and parse its JSON body; OSError or ValueError when that fails."""
    return json.loads(fetch_text(url, timeout=timeout))


def fetch_text(url: str, *, timeout: float) -> str:
    """GET `url`'s body as text; OSError when that fails."""
    with _OPENER.open(url, timeout=timeout) as response:
        body: bytes = response.read()
    return body.decode("utf-8", errors="replace")


def post_json(url: str, body: dict[str, Any], *, timeout: float) -> Any:
    """POST `body` as JSON to `url` and parse the JSON answer; OSError (an error status too:
    urllib's HTTPError is one) or ValueError when that fails."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with _OPENER.open(request, timeout=timeout) as response:
        return json.loads(response.read())


def write_stop_note(home: Path, text: str) -> None:
    """Say why the server stopped by itself, for the next kernel that looks for it."""
    (run_dir(home) / STOP_NOTE_FILE).write_text(text + "\n", encoding="utf-8")


def read_stop_note(home: Path) -> str | None:
    """The note an idle stop left, or None (a newer server removes it when it starts)."""
    try:
        return (home / "run" / STOP_NOTE_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def is_healthy(url: str, *, timeout: float) -> bool:
    """True when the server's `/health` answers `{"status": "ok"}` within `timeout` seconds."""
    try:
        body = fetch_json(url + "/health", timeout=timeout)
    except (OSError, ValueError):
        return False
    return isinstance(body, dict) and body.get("status") == "ok"


def terminate(pid: int, *, grace: float) -> None:
    """SIGTERM `pid`, SIGKILL it after `grace` seconds, and wait until it is gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not is_running(pid):
            break
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        if _wait_exit(pid, timeout=wait):
            break
    _CHILDREN.pop(pid, None)


def wait_exit(pid: int, *, timeout: float) -> bool:
    """Wait until `pid` has exited (its own end, or a signal); False if `timeout` passed."""
    done = _wait_exit(pid, timeout=timeout)
    if done:
        _CHILDREN.pop(pid, None)
    return done


def _wait_exit(pid: int, *, timeout: float) -> bool:
    proc = _CHILDREN.get(pid)
    if proc is not None:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    # Not our child, so there is nothing to wait on: look every 50 ms.
    deadline = time.monotonic() + timeout
    while is_running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# Counters that move whenever a client asks for anything, and the gauge of requests running.
COUNTERS = (
    "llamacpp:prompt_tokens_total",
    "llamacpp:tokens_predicted_total",
    "llamacpp:n_decode_total",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
)
LONGEST_NAP = 30.0
METRICS_TIMEOUT = 5.0


def metric_values(text: str, names: Iterable[str]) -> dict[str, float]:
    """The metrics among `names` that a Prometheus text answer gives a number (a missing one, or
    one whose value is not a number, is left out)."""
    wanted = set(names)
    values: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            try:
                values[name] = float(value.split()[0])
            except (ValueError, IndexError):
                continue
    return values


def parse_metrics(text: str) -> tuple[float, ...]:
    """The `COUNTERS` from a Prometheus text answer (0 for any that is missing)."""
    values = metric_values(text, COUNTERS)
    return tuple(values.get(name, 0.0) for name in COUNTERS)


def activity(url: str) -> tuple[float, ...] | None:
    """The server's activity counters now, or None when `/metrics` cannot be read."""
    try:
        return parse_metrics(fetch_text(url + "/metrics", timeout=METRICS_TIMEOUT))
    except OSError:
        return None


def wait_for_stop(url: str, *, idle_timeout: float, signals: Iterable[signal.Signals]) -> str:
    """Block until one of `signals` arrives ("signal") or, when `idle_timeout` > 0, until the
    server at `url` has had no request for that many seconds ("idle").

    The signals must already be blocked in every thread (they are collected here)."""
    wanted = set(signals)
    if idle_timeout <= 0:
        signal.sigwait(wanted)
        return "signal"
    nap = min(LONGEST_NAP, max(0.1, idle_timeout / 5))
    last, quiet_since = activity(url), time.monotonic()
    while signal.sigtimedwait(wanted, nap) is None:
        now = activity(url)
        busy = now is None or now != last or now[3] > 0
        if busy:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= idle_timeout:
            return "idle"
    return "signal"


def idle_message(idle_timeout: float) -> str:
    """The note an idle stop leaves for the next kernel (see `write_stop_note`)."""
    stamp = time.strftime("%H:%M", time.localtime())
    return (
        f"The embedded model server stopped itself at {stamp} after {_duration(idle_timeout)} "
        "without a request (local_idle_timeout; 0 keeps it running)."
    )


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"

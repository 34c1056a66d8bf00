"""When the embedded server has gone unused long enough to stop itself (`local_idle_timeout`).

The server outlives the kernels and JupyterLab that started it (by design: kernels share it), so
without a bound it would hold ~800 MB until someone runs `nbchat stop-model`. `wait_for_stop`
is the server process's main wait: a stop signal ends it at once, and with an idle timeout it
also wakes every few seconds to read llama.cpp's `/metrics` counters (tokens read and generated,
requests in flight). Counters unchanged and nothing in flight for the whole timeout means no
client used it: the wait returns "idle" and the caller stops the server.

Must not: stop anything itself, or count a failed `/metrics` read as idleness.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable

from nbchat.embedded import runtime

__all__ = ["activity", "idle_message", "parse_metrics", "wait_for_stop"]

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


def parse_metrics(text: str) -> tuple[float, ...]:
    """The `COUNTERS` from a Prometheus text answer (0 for any that is missing)."""
    values = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in values:
            try:
                values[name] = float(value.split()[0])
            except (ValueError, IndexError):
                continue
    return tuple(values.values())


def activity(url: str) -> tuple[float, ...] | None:
    """The server's activity counters now, or None when `/metrics` cannot be read."""
    try:
        return parse_metrics(runtime.fetch_text(url + "/metrics", timeout=METRICS_TIMEOUT))
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
    """The note an idle stop leaves for the next kernel (see `runtime.write_stop_note`)."""
    stamp = time.strftime("%H:%M", time.localtime())
    return (
        f"The embedded model server stopped itself at {stamp} after {_duration(idle_timeout)} "
        "without a request (local_idle_timeout; 0 keeps it running)."
    )


def _duration(seconds: float) -> str:
    if seconds >= 120:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"

"""The replay's model: the test server in a child process, answered by `ScriptedModel`.

`tests/fakeserver.py` can be scripted from another process only with queued replies; the
replay needs a responder (summary requests come whenever the engine decides), so this script
runs the same `FakeServer` with `replay_scenario.ScriptedModel` as its responder. Running it
in its own process keeps the server off the benchmark's GIL.

    python bench/replay_server.py --port 0    # prints its URL first, stops on SIGTERM
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
from pathlib import Path

import harness  # noqa: F401 - puts tests/ on sys.path
from fakeserver import FakeServer
from fakeserver_remote import FakeServerProcess
from replay_scenario import ScriptedModel

SCRIPT = Path(__file__).resolve()
# Enough for every request of one replay (about 60), so the whole run can be measured.
MAX_RECORDED = 2_000


def start_replay_server() -> FakeServerProcess:
    """Run this script as a child process and return once it listens."""
    command = [sys.executable, str(SCRIPT), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None  # stdout=PIPE; narrows the type
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        process.wait()
        process.stdout.close()
        raise RuntimeError(f"the replay server did not start (printed {url!r})")
    return FakeServerProcess(process, url)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The replay's scripted model server.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    model = ScriptedModel()
    server = FakeServer(port=args.port, responder=model.respond, max_recorded=MAX_RECORDED)
    with server:
        print(server.url, flush=True)
        stopped.wait()


if __name__ == "__main__":
    main()

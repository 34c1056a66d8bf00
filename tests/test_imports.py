"""Importing nbchat does no work: no client, DB, thread or socket; no ipywidgets below the UI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, socket, sqlite3, sys, threading
opened = []
real_socket_init = socket.socket.__init__
def spy_socket(self, *a, **k):
    opened.append("socket")
    real_socket_init(self, *a, **k)
socket.socket.__init__ = spy_socket
real_connect = sqlite3.connect
def spy_connect(*a, **k):
    opened.append("sqlite")
    return real_connect(*a, **k)
sqlite3.connect = spy_connect
threads_before = threading.active_count()
import importlib
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({
    "opened": opened,
    "threads": threading.active_count() - threads_before,
    "loaded": sorted(m for m in ("ipywidgets", "openai", "playwright", "xllamacpp",
                                 "markdown_it") if m in sys.modules),
}))
"""


def probe(*modules: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


def test_import_nbchat_does_no_work() -> None:
    assert probe("nbchat") == {"opened": [], "threads": 0, "loaded": []}


@pytest.mark.parametrize(
    "module", ["nbchat.history", "nbchat.store", "nbchat.config", "nbchat.errors", "nbchat.export"]
)
def test_core_and_edge_modules_do_not_load_widgets(module: str) -> None:
    found = probe(module)
    assert found["opened"] == [] and found["threads"] == 0
    assert "ipywidgets" not in found["loaded"]  # type: ignore[operator]

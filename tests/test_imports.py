"""Importing nbchat does no work: no client, DB, thread or socket; no ipywidgets below the UI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

GROUND = {"errors", "config", "mcpconfig", "history", "stopping"}

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
    "nbchat": sorted(m for m in sys.modules if m.startswith("nbchat.")),
}))
"""


def probe(*modules: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


def test_import_nbchat_does_no_work() -> None:
    assert probe("nbchat") == {"opened": [], "threads": 0, "loaded": [], "nbchat": []}


def test_the_http_edge_loads_no_tools_store_compaction_or_widgets() -> None:
    found = probe(
        "nbchat.llm.client", "nbchat.llm.reader", "nbchat.llm.textcalls", "nbchat.llm.endpoint"
    )
    loaded = found["nbchat"]
    assert isinstance(loaded, list)
    assert [m for m in loaded if m.split(".")[1] not in GROUND | {"llm", "embedded"}] == []
    assert "ipywidgets" not in found["loaded"]  # type: ignore[operator]


def test_the_tools_load_no_http_edge() -> None:
    loaded = probe("nbchat.tools")["nbchat"]
    assert isinstance(loaded, list)
    assert [m for m in loaded if m.split(".")[1] not in GROUND | {"tools"}] == []


def test_import_contracts_hold() -> None:
    """The floors in pyproject.toml's [tool.importlinter]: a backwards import or a cycle fails
    here with import-linter's own message naming the import."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    "module",
    [
        "nbchat.history",
        "nbchat.store.store",
        "nbchat.config",
        "nbchat.errors",
        "nbchat.store.catalog",
    ],
)
def test_core_and_edge_modules_do_not_load_widgets(module: str) -> None:
    found = probe(module)
    assert found["opened"] == [] and found["threads"] == 0
    assert "ipywidgets" not in found["loaded"]  # type: ignore[operator]

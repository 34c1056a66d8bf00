"""Shared fixtures: a temp home and store, and settings pointing at them (factories.py: rows).

Also what keeps the checkout as the session found it: Hypothesis keeps its examples and caches
outside it, and `checkout` fails the session when a test changed it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import checkout
import pytest
from hypothesis import HealthCheck, settings

from nbchat.config import Settings
from nbchat.store.store import Store

# Hypothesis keeps its example database and caches in ./.hypothesis unless told otherwise: in
# the workspace, where the model's own file tools would read them. The user's cache instead
# (read when Hypothesis first needs it, which is after this; child processes inherit it).
os.environ.setdefault(
    "HYPOTHESIS_STORAGE_DIRECTORY",
    str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nbchat" / "hypothesis"),
)
# CI runs more examples and never fails on slow generation; locally it stays quick.
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("checkout"):  # `-p checkout` registers it itself
        config.pluginmanager.register(checkout, "checkout")


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads the developer's real settings, keys or database."""
    home = tmp_path / "nbchat-home"
    for name in list(os.environ):
        if name.startswith("NBCHAT_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    monkeypatch.setenv("NBCHAT_HOME", str(home))
    return home


@pytest.fixture
def home(isolated_environment: Path) -> Path:
    return isolated_environment


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "test.db")
    yield db
    db.close()


@pytest.fixture
def make_settings(home: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Settings with the home, DB and workspace under tmp_path; pass overrides as keywords."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)

    def build(**overrides: object) -> Settings:
        values: dict[str, object] = {
            "home": home,
            "workspace": workspace,
            "base_url": "http://127.0.0.1:9/v1",
        }
        values.update(overrides)
        return Settings(**values)  # type: ignore[arg-type]

    return build


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A real IPython shell whose display publisher (a `CapturingDisplayPublisher`) records
    each output and update, as a kernel would send them."""
    # Imported here: most tests never need IPython.
    from IPython.core.displaypub import CapturingDisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    instance = InteractiveShell.instance()
    publisher = CapturingDisplayPublisher()
    instance.display_pub = publisher
    try:
        yield publisher
    finally:
        InteractiveShell.clear_instance()

"""The embedded server's lifetime is bounded: with `local_idle_timeout` it stops itself after
that long without a request, unlists itself and leaves a note the next kernel shows.

The model test runs the real server (SmolLM2, a 256-token window) with a one-second timeout and
waits for its process to end on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import buttons, shown_text

from nbchat.config import Settings
from nbchat.embedded import runtime
from nbchat.embedded.runtime import COUNTERS, parse_metrics
from nbchat.embedded.server import find_running, start_server
from nbchat.errors import ConfigError, ServerUnavailableError
from nbchat.llm.endpoint import connect
from nbchat.ui import ChatUI
from nbchat.ui.chatui import ready_status

METRICS = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 120
llamacpp:tokens_predicted_total 16
llamacpp:requests_processing 1
llamacpp:n_busy_slots_per_decode 1
"""


def test_the_activity_counters_are_read_from_llama_cpp_metrics() -> None:
    values = dict(zip(COUNTERS, parse_metrics(METRICS), strict=True))
    assert values == {
        "llamacpp:prompt_tokens_total": 120.0,
        "llamacpp:tokens_predicted_total": 16.0,
        "llamacpp:n_decode_total": 0.0,
        "llamacpp:requests_processing": 1.0,
        "llamacpp:requests_deferred": 0.0,
    }


def test_the_idle_timeout_is_a_setting_and_0_keeps_the_server(home: Path) -> None:
    assert Settings.load().local_idle_timeout == 1800.0
    assert Settings.load(local_idle_timeout=0).local_idle_timeout == 0.0
    with pytest.raises(ConfigError, match="local_idle_timeout must be 0"):
        Settings.load(local_idle_timeout=-1)


@pytest.fixture
def server_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    yield home
    running = find_running(home=home)
    if running is not None:
        running.stop()


@pytest.mark.slow
@pytest.mark.model
def test_an_unused_embedded_server_stops_itself_and_says_so(server_home: Path) -> None:
    server = start_server("smollm", home=server_home, n_ctx=256, timeout=60, idle_timeout=1.0)
    models = httpx.get(server.base_url + "/models", trust_env=False, timeout=10)
    assert models.status_code == 200  # a request, then nothing: the timer starts again
    assert runtime.wait_exit(server.pid, timeout=60)
    assert find_running(home=server_home) is None
    note = runtime.read_stop_note(server_home)
    assert note is not None
    assert "stopped itself" in note and "after 1 seconds without a request" in note
    assert note in (server_home / "run" / runtime.LOG_FILE).read_text(encoding="utf-8")
    settings = Settings(home=server_home, base_url=None, autostart=False)
    with pytest.raises(ServerUnavailableError) as caught:
        connect(settings)
    assert str(caught.value).startswith(note + " No model server is configured")


def test_the_widget_says_the_server_stopped_itself_and_offers_to_start_it(home: Path) -> None:
    note = "The embedded model server stopped itself at 05:40 after 30 minutes without a request"
    runtime.write_stop_note(home, note + ".")
    ui = ChatUI(Settings(home=home, base_url=None, autostart=False))
    try:
        assert ui.wait(timeout=30) is False
        shown = shown_text(ui.messages.box)
        assert note + ". No model server is configured" in shown
        assert [b.description for b in buttons(ui.messages.box)] == ["Start local model"]
    finally:
        ui.close()


def test_the_ready_status_says_how_long_the_embedded_server_stays() -> None:
    assert ready_status(Settings(local_idle_timeout=1800)) == (
        "ready (the embedded model server stops itself after 30 minutes without a request)"
    )
    assert ready_status(Settings(local_idle_timeout=0)) == (
        "ready (the embedded model server keeps running until `nbchat stop-model`)"
    )

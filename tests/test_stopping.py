"""StopSignal runs its callbacks when set, so a blocked read can be released."""

from __future__ import annotations

import threading

from nbchat.stopping import StopSignal


def test_set_runs_each_callback_once() -> None:
    calls: list[str] = []
    signal = StopSignal()
    signal.add_callback(lambda: calls.append("a"))
    remove = signal.add_callback(lambda: calls.append("b"))
    remove()
    signal.set()
    signal.set()
    assert calls == ["a"]
    assert signal.is_set()


def test_a_callback_added_after_set_runs_at_once() -> None:
    calls: list[str] = []
    signal = StopSignal()
    signal.set()
    signal.add_callback(lambda: calls.append("late"))
    assert calls == ["late"]


def test_a_failing_callback_does_not_stop_the_others(caplog) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []
    signal = StopSignal()
    signal.add_callback(lambda: 1 / 0)
    signal.add_callback(lambda: calls.append("ran"))
    signal.set()
    assert calls == ["ran"]
    assert "a stop callback failed" in caplog.text


def test_set_from_another_thread_releases_a_waiter() -> None:
    signal = StopSignal()
    released = threading.Event()
    signal.add_callback(released.set)
    threading.Thread(target=signal.set).start()
    assert released.wait(5)

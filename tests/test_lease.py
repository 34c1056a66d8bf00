"""The writer lease across real processes: a live writer keeps it (heartbeat), a writer that
lost it stops writing and says so, a takeover reloads, and a lease names its process by PID and
start time. Real child processes on a real SQLite file, over real HTTP to the test server;
waits are on pipes, queues, joins and `waitid`, never on sleeps.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from factories import assistant, user
from fakeserver import FakeServer
from helpers import run
from test_bench import assert_table_rows, load

from nbchat.config import Settings
from nbchat.conversation.events import Done, Failed, Notice
from nbchat.conversation.loop import Conversation
from nbchat.conversation.session import READ_ONLY_MESSAGE, SAME_KERNEL_MESSAGE
from nbchat.errors import LeaseLostError
from nbchat.store import lease
from nbchat.store.store import Store

KERNEL = r"""
import json, logging, sys
import openai
from nbchat.conversation.loop import Conversation
from nbchat.config import Settings
from nbchat.store.store import Store

path, session_id, url, home, workspace, lease_seconds = sys.argv[1:7]
logging.basicConfig(stream=sys.stderr, format="%(name)s %(message)s")
logging.getLogger("nbchat.store.lease").setLevel(logging.DEBUG)
settings = Settings(base_url=url + "/v1", home=home, workspace=workspace,
                    context_token_threshold=50000)
client = openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
options = {} if lease_seconds == "default" else {"lease_seconds": float(lease_seconds)}
store = Store(path, **options)
chat = Conversation(settings, store, session_id, client=client)
print("read-only" if chat.read_only else "writing", flush=True)
for line in sys.stdin:
    command, _, text = line.strip().partition(" ")
    if command == "send":
        last = list(chat.send(text))[-1]
        answer = {"event": type(last).__name__, "message": getattr(last, "message", "")}
    else:
        chat.close()
        answer = {"event": "closed", "message": ""}
    print(json.dumps(answer), flush=True)
"""


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


@pytest.fixture
def settings(make_settings: Any, server: FakeServer) -> Settings:
    return make_settings(base_url=server.url + "/v1", context_token_threshold=50_000)


class Kernel:
    """Another kernel: a child process with a `Conversation` on the same file and session."""

    def __init__(
        self, store: Store, session_id: str, server: FakeServer, settings: Settings, **options: str
    ) -> None:
        command = [sys.executable, "-c", KERNEL, str(store.path), session_id, server.url]
        command += [str(settings.home), str(settings.workspace)]
        command += [options.get("lease_seconds", "default")]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        self.first_line = self._read()

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.put(line.strip())

    def _read(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def ask(self, command: str) -> dict[str, str]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer: dict[str, str] = json.loads(self._read())
        return answer

    def renewed_after(self, moment: float, *, timeout: float = 30.0) -> float:
        """Wait for the child's heartbeat to renew its lease later than `moment`."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.log.get(timeout=max(0.0, deadline - time.monotonic()))
            if line.startswith("nbchat.store.lease") and "renewed=True" in line:
                renewed_at = float(line.rsplit(" at ", 1)[1])
                if renewed_at > moment:
                    return renewed_at

    def freeze(self) -> None:
        """SIGSTOP: the kernel hangs (no Python runs in it, its heartbeat neither)."""
        os.kill(self.process.pid, signal.SIGSTOP)
        os.waitid(os.P_PID, self.process.pid, os.WSTOPPED | os.WNOWAIT)

    def thaw(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def end(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(20)
        self.process.stdout.close()
        self._reader.join(20)
        assert self.process.stderr is not None
        self.process.stderr.close()


def conversation(
    server: FakeServer, path: Path, settings: Settings, session_id: str
) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, Store(path), session_id, client=client)


def lease_until(store: Store, session_id: str) -> float:
    found = store.db.execute("SELECT lease_until FROM sessions WHERE id = ?", [session_id])
    return float(found.fetchone()[0])


def last_request_texts(server: FakeServer) -> list[str]:
    return [m["content"] for m in server.chat_requests()[-1]["messages"] if m["role"] == "user"]


# A live writer keeps its lease


@pytest.mark.timeout(90)
def test_a_live_writer_keeps_its_lease_past_its_expiry_and_no_second_kernel_writes(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session_id = store.create_session("shared")
    first = Kernel(store, session_id, server, settings, lease_seconds="1.0")
    try:
        assert first.first_line == "writing"
        assert first.ask("send A1")["event"] == "Done"
        expiry = lease_until(store, session_id)  # where the lease ran out before heartbeats
        first.renewed_after(expiry)  # the idle kernel's heartbeat renewed it after that
        second = conversation(server, store.path, settings, session_id)
        assert second.read_only
        refused = run(second, "B1")[-1]
        assert isinstance(refused, Failed)
        assert (refused.message, refused.unsent_text) == (READ_ONLY_MESSAGE, "B1")
        assert first.ask("send A2")["event"] == "Done"
        second.close()
    finally:
        first.end()
    assert store.load_active(session_id) == [
        user("A1"),
        assistant("ok"),
        user("A2"),
        assistant("ok"),
    ]


# A writer that lost its lease stops writing and says so; a takeover reloads


@pytest.mark.timeout(90)
def test_a_hung_writer_that_lost_its_lease_never_interleaves_its_rows(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session_id = store.create_session("shared")
    first = Kernel(store, session_id, server, settings)
    try:
        assert first.first_line == "writing"
        assert first.ask("send A1")["event"] == "Done"
        first.freeze()
        # It stays hung past its lease's expiry (written here rather than waited for).
        store.db.execute("UPDATE sessions SET lease_until = ? WHERE id = ?", [1.0, session_id])
        store.db.conn.commit()
        second = conversation(server, store.path, settings, session_id)
        assert not second.read_only  # taken over
        assert run(second, "B1")[-1] == Done()
        first.thaw()
        lost = first.ask("send A2")
        assert lost == {
            "event": "Failed",
            "message": f"This session was taken over by another kernel (pid {os.getpid()}); "
            "your message was not saved here. Close the session there and send again (this "
            "kernel first loads what was written there), or start a new session with /new.",
        }
        assert first.ask("send A3") == {"event": "Failed", "message": READ_ONLY_MESSAGE}
        second.close()
        assert first.ask("send A4")["event"] == "Done"  # the lease is free: A takes it back
        assert last_request_texts(server) == ["A1", "B1", "A4"]  # ... after reloading B's rows
    finally:
        first.end()
    assert store.load_active(session_id) == [
        user("A1"),
        assistant("ok"),
        user("B1"),
        assistant("ok"),
        user("A4"),
        assistant("ok"),
    ]


@pytest.mark.timeout(90)
def test_a_read_only_kernel_that_takes_the_lease_over_reloads_first(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session_id = store.create_session("shared")
    first = Kernel(store, session_id, server, settings)
    try:
        assert first.first_line == "writing"
        assert first.ask("send A1")["event"] == "Done"
        second = conversation(server, store.path, settings, session_id)
        assert second.read_only
        assert second.history.rows == [user("A1"), assistant("ok")]
        assert first.ask("send A2")["event"] == "Done"  # written while the second only reads
        assert first.ask("close")["event"] == "closed"
    finally:
        first.end()
    events = run(second, "B1")
    assert events[-1] == Done()
    assert last_request_texts(server) == ["A1", "A2", "B1"]
    assert Notice(RELOADED.format(rows=4)) in events
    expected = [
        user("A1"),
        assistant("ok"),
        user("A2"),
        assistant("ok"),
        user("B1"),
        assistant("ok"),
    ]
    assert second.history.rows == expected
    assert store.load_active(session_id) == expected
    second.close()


def test_two_chats_on_one_store_in_one_kernel_are_kept_apart_like_two_kernels(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    first = Conversation(settings, store, client=client)
    assert run(first, "A1")[-1] == Done()
    session_id = first.session_id
    assert session_id is not None
    second = Conversation(settings, store, session_id, client=client)
    assert second.read_only
    assert second.session.read_only_reason == SAME_KERNEL_MESSAGE
    refused = run(second, "B1")
    assert isinstance(refused[-1], Failed)
    assert refused[-1].message == SAME_KERNEL_MESSAGE
    second.close()  # the read-only chat closing leaves the writer's lease as it was
    assert store.holds_lease(session_id)
    assert run(first, "A2")[-1] == Done()
    first.close()
    events = run(second, "B2")
    assert events[-1] == Done()
    assert Notice(RELOADED.format(rows=4)) in events
    assert store.load_active(session_id) == [
        user("A1"),
        assistant("ok"),
        user("A2"),
        assistant("ok"),
        user("B2"),
        assistant("ok"),
    ]
    assert last_request_texts(server) == ["A1", "A2", "B2"]
    second.close()


RELOADED = (
    "This kernel writes this session now. It first loaded what another kernel wrote "
    "meanwhile ({rows} active rows), so the model sees it; choose the session again in the "
    "list to show it here."
)


# A lease is tied to the process's identity, not its PID alone


@pytest.fixture
def live_process() -> Iterator[subprocess.Popen[str]]:
    """Some other running process (it waits for its stdin to close)."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, text=True
    )
    yield process
    assert process.stdin is not None
    process.stdin.close()
    process.wait(20)


def hand_lease(store: Store, session_id: str, *, pid: int, process: str | None) -> None:
    """Record a lease held by `pid` on this host, valid for another hour."""
    store.db.execute(
        "UPDATE sessions SET lease_owner = 'another kernel', lease_pid = ?, lease_host = ?, "
        "lease_process = ?, lease_until = ? WHERE id = ?",
        [pid, socket.gethostname(), process, time.time() + 3600, session_id],
    )
    store.db.conn.commit()


def test_a_lease_whose_pid_now_belongs_to_another_process_is_taken_over_at_once(
    store: Store, live_process: subprocess.Popen[str]
) -> None:
    session_id = store.create_session("shared")
    identity = lease.process_identity(live_process.pid)
    assert identity is not None
    boot, started = identity.rsplit(":", 1)
    # The dead holder ran under the same PID, but started at another time.
    hand_lease(store, session_id, pid=live_process.pid, process=f"{boot}:{int(started) - 1}")
    assert store.acquire_lease(session_id)
    holder = store.lease_holder(session_id)
    assert holder is not None and holder.pid == os.getpid()


def test_a_lease_held_by_a_running_process_is_respected(
    store: Store, live_process: subprocess.Popen[str]
) -> None:
    session_id = store.create_session("shared")
    identity = lease.process_identity(live_process.pid)
    hand_lease(store, session_id, pid=live_process.pid, process=identity)
    assert not store.acquire_lease(session_id)


def test_a_lease_held_by_a_zombie_is_taken_over(store: Store) -> None:
    session_id = store.create_session("shared")
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"])
    hand_lease(store, session_id, pid=process.pid, process=lease.process_identity(process.pid))
    process.kill()
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # dead, not yet reaped
    assert store.acquire_lease(session_id)
    process.wait(20)


def test_a_process_identity_is_its_boot_and_start_time() -> None:
    identity = lease.process_identity(os.getpid())
    assert identity is not None
    boot, started = identity.rsplit(":", 1)
    assert boot == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    assert started == stat[stat.rfind(")") + 2 :].split()[19]
    assert lease.process_identity(2**22 + 1) is None  # above pid_max: never running


# The heartbeat runs only while a lease is held


def heartbeats() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "nbchat-lease-heartbeat"]


def test_the_heartbeat_runs_while_a_lease_is_held_and_stops_with_the_last(store: Store) -> None:
    first, second = store.create_session("a"), store.create_session("b")
    assert heartbeats() == []
    assert store.acquire_lease(first) and store.acquire_lease(second)
    assert len(heartbeats()) == 1
    store.release_lease(first)
    assert len(heartbeats()) == 1
    store.release_lease(second)
    assert heartbeats() == []
    assert store.acquire_lease(first)
    store.close()
    assert heartbeats() == []


def test_a_write_after_the_lease_was_taken_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    mine, theirs = Store(path), Store(path)
    session_id = mine.create_session("shared")
    assert mine.acquire_lease(session_id)
    mine.append_rows(session_id, [user("mine")])
    theirs.db.execute("UPDATE sessions SET lease_until = 1.0 WHERE id = ?", [session_id])
    theirs.db.conn.commit()
    assert theirs.acquire_lease(session_id)
    with pytest.raises(LeaseLostError) as caught:
        mine.append_rows(session_id, [user("lost")])
    assert str(caught.value).startswith(
        f"This session was taken over by another kernel (pid {os.getpid()}); your message was "
        "not saved here."
    )
    assert theirs.load_active(session_id) == [user("mine")]
    mine.close()
    theirs.close()


def test_the_lease_bench_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("lease_bench", monkeypatch, ROWS=20, REPEATS=1)
    assert_table_rows(module.main())

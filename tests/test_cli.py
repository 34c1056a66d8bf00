"""The `nbchat` command: each subcommand through `main([...])`, the real model ones marked `model`.

The conftest fixture points NBCHAT_HOME at a temp directory and clears NBCHAT_* and
OPENAI_API_KEY, so `Settings.load()` here reads only what a test sets.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from factories import assistant, user
from fakeserver import FakeServer
from fakeserver_replies import MODEL_NAME
from fixtures_server import Canned, ScriptedServer, pretend_embedded_server

from nbchat.cli import doctor as doctor_module
from nbchat.cli.command import main
from nbchat.embedded.modelfiles import Machine
from nbchat.embedded.runtime import is_running
from nbchat.embedded.server import find_running
from nbchat.store.rowsql import CompactionRecord
from nbchat.store.store import Store
from nbchat.ui import ChatUI

MARKER = "sk-marker-never-printed-7f3a"
NBCHAT = Path(sys.executable).with_name("nbchat")


@pytest.fixture
def db(home: Path) -> Iterator[Store]:
    store = Store(home / "nbchat.db")
    yield store
    store.close()


@pytest.fixture
def two_sessions(db: Store) -> tuple[str, str]:
    """An older session of two rows, then a newer one whose first rows were compacted."""
    older = db.create_session("Older chat")
    db.append_rows(older, [user("hello"), assistant("hi")])
    newer = db.create_session("Newer chat")
    db.append_rows(newer, [user("a"), assistant("b"), user("c"), assistant("d")])
    compacted = ("compacted", "summary of a and b", "", "", "")
    db.replace_with_compacted(
        newer, compacted, keep_tail=2, expected_active=4, record=CompactionRecord(kind="summary")
    )
    return older, newer


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound but not listening: connecting to it is refused, and nobody else takes it."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield int(holder.getsockname()[1])


def test_sessions_lists_newest_first_with_active_and_total_rows(
    two_sessions: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    older, newer = two_sessions
    assert main(["sessions"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "TITLE", "ROWS", "UPDATED"]
    assert [line.split()[:4] for line in lines] == [
        [newer, "Newer", "chat", "3/5"],
        [older, "Older", "chat", "2/2"],
    ]


def test_sessions_json_is_every_session_as_stored(
    two_sessions: tuple[str, str], db: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [
        {
            "id": info.id,
            "title": info.title,
            "model": info.model,
            "created": info.created,
            "updated": info.updated,
            "active_rows": info.active_rows,
            "total_rows": info.total_rows,
        }
        for info in db.list_sessions()
    ]
    assert [item["id"] for item in listed] == [two_sessions[1], two_sessions[0]]


def test_sessions_says_when_there_are_none(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions"]) == 0
    assert capsys.readouterr().out == f"No sessions yet in {home / 'nbchat.db'}.\n"


def test_export_writes_markdown_to_stdout_by_default(
    two_sessions: tuple[str, str], db: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = two_sessions[1]
    assert main(["export", newer]) == 0
    out = capsys.readouterr().out
    assert out.rstrip("\n") == db.export_markdown(newer).rstrip("\n")
    assert "summary of a and b" in out


def test_export_json_holds_the_full_transcript(
    two_sessions: tuple[str, str], db: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = two_sessions[1]
    assert main(["export", newer, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == json.loads(db.export_json(newer))
    assert [row["content"] for row in document["rows"]] == [
        "a",
        "b",
        "summary of a and b",
        "c",
        "d",
    ]


@pytest.mark.parametrize("kind", ["md", "json"])
def test_export_to_a_file_writes_it_and_says_where(
    kind: str,
    two_sessions: tuple[str, str],
    db: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    older = two_sessions[0]
    target = tmp_path / f"out.{kind}"
    assert main(["export", older, "--format", kind, "--output", str(target)]) == 0
    expected = db.export_json(older) if kind == "json" else db.export_markdown(older)
    assert target.read_text(encoding="utf-8").rstrip("\n") == expected.rstrip("\n")
    assert capsys.readouterr().out == f"Wrote session {older} ({kind}) to {target}.\n"


def test_export_of_an_unknown_session_is_one_line_and_exit_1(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "nope"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"nbchat: No session 'nope' in {home / 'nbchat.db'}. List them with `nbchat sessions`.\n"
    )


def test_export_into_a_missing_directory_says_to_choose_another_output(
    two_sessions: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "out.md"
    assert main(["export", two_sessions[0], "--output", str(target)]) == 1
    assert capsys.readouterr().err == (
        f"nbchat: Cannot write {target}: No such file or directory. Choose another --output.\n"
    )


def test_a_missing_argument_is_a_usage_error_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["export"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "nbchat export: error: the following arguments are required: ID"
    )


def test_doctor_passes_against_a_reachable_server_and_never_prints_the_key(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("tail_messages = 6\n", encoding="utf-8")
    monkeypatch.setenv("NBCHAT_API_KEY", MARKER)
    monkeypatch.setenv("NBCHAT_MODEL", MODEL_NAME)
    with FakeServer() as server:
        monkeypatch.setenv("NBCHAT_BASE_URL", server.url + "/v1")
        code = main(["doctor"])
        sent = [request.headers.get("authorization") for request in server.requests]
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert code == 0
    assert f"Bearer {MARKER}" in sent  # the key was used, just never shown
    assert MARKER not in out + err
    assert not [line for line in lines if line.startswith("✗")]
    assert f"    base_url = {server.url}/v1  (from environment variable NBCHAT_BASE_URL)" in lines
    assert f"    tail_messages = 6  (from {home / 'config.toml'})" in lines
    assert "✓ API key: set (from NBCHAT_API_KEY)" in lines
    assert f"✓ Session database {home / 'nbchat.db'} opens and is migrated (0 sessions)" in lines
    assert f"✓ Model server at {server.url}/v1 answers /v1/models (models: {MODEL_NAME})" in lines
    assert f"✓ Model: {MODEL_NAME} (served)" in lines
    assert "✓ Context window: not reported by the server (it has no /props)" in lines
    assert (
        "✓ Compaction: threshold 10,000 tokens (the default; set "
        "NBCHAT_CONTEXT_TOKEN_THRESHOLD to fit the model), triggers at 7,500"
    ) in lines


def test_doctor_fails_when_the_configured_server_is_unreachable(
    closed_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{closed_port}/v1"
    monkeypatch.setenv("NBCHAT_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", MARKER)
    assert main(["doctor"]) == 1
    out, err = capsys.readouterr()
    assert MARKER not in out + err
    assert (
        f"✗ Model server: nothing answers at {url} (base_url, from environment variable "
        "NBCHAT_BASE_URL). Start that server, or change NBCHAT_BASE_URL to its right address."
    ) in out.splitlines()


def test_the_chat_and_doctor_say_the_same_for_a_configured_server_that_is_down(
    closed_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not "start one with nbchat serve-model": that cannot help while base_url points elsewhere.
    url = f"http://127.0.0.1:{closed_port}/v1"
    monkeypatch.setenv("NBCHAT_BASE_URL", url)
    ui = ChatUI(notebook_tools=False)
    ui.send("hi")
    assert ui.wait(30) is False
    ui.close()
    printed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("nbchat")]
    advice = (
        f"nothing answers at {url} (base_url, from environment variable NBCHAT_BASE_URL). "
        "Start that server, or change NBCHAT_BASE_URL to its right address."
    )
    assert printed == [f"nbchat: N{advice[1:]}"]
    assert main(["doctor"]) == 1
    assert f"✗ Model server: {advice}" in capsys.readouterr().out.splitlines()


def test_version_prints_the_packages_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"nbchat {metadata.version('nbchat')}\n"


@pytest.mark.parametrize("command", [["sessions"], ["sessions", "--json"]])
def test_a_reader_that_stops_early_ends_the_command_quietly(
    two_sessions: tuple[str, str], command: list[str]
) -> None:
    # `nbchat sessions | head -3`: the reader is gone before anything is written.
    script = "import sys; from nbchat.cli.command import main; sys.exit(main(sys.argv[1:]))"
    child = subprocess.Popen(
        [sys.executable, "-c", script, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    errors = child.stderr.read().decode()
    child.stderr.close()
    assert (child.wait(timeout=60), errors) == (128 + signal.SIGPIPE, "")


def test_doctor_flags_a_model_name_the_server_does_not_serve(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NBCHAT_MODEL", "gpt-4o-mini-typo")
    with FakeServer() as server:
        monkeypatch.setenv("NBCHAT_BASE_URL", server.url + "/v1")
        code = main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert (
        f"✗ Model: The server at {server.url}/v1 does not serve model 'gpt-4o-mini-typo' (from "
        f"environment variable NBCHAT_MODEL); it serves {MODEL_NAME}. Change NBCHAT_MODEL to "
        "one of them."
    ) in lines


def test_doctor_names_the_model_a_llama_cpp_server_really_serves(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text('model = "gpt-4o-mini-typo"\n', encoding="utf-8")
    llama = {"id": "qwen", "object": "model", "owned_by": "llamacpp"}
    with ScriptedServer() as server:
        server.add("/v1/models", Canned(body={"object": "list", "data": [llama]}))
        monkeypatch.setenv("NBCHAT_BASE_URL", server.url + "/v1")
        code = main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert (
        f"✗ Model: The server at {server.url}/v1 serves 'qwen', not model 'gpt-4o-mini-typo' "
        f"(from {home / 'config.toml'}). llama.cpp answers with its one model whatever the name, "
        f"so sessions record 'qwen'. Change model in {home / 'config.toml'} to qwen."
    ) in lines


def test_doctor_is_content_when_autostart_will_start_the_embedded_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NBCHAT_AUTOSTART", "1")
    main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    assert (
        "✓ Model server: the embedded one is not running; the chat starts it on first use "
        "(autostart, from environment variable NBCHAT_AUTOSTART)."
    ) in lines
    assert not [line for line in lines if "NBCHAT_AUTOSTART=1" in line]


def test_doctor_says_where_the_saved_prompts_are_and_how_to_clear_them(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["doctor"])
    folder = home / "run" / "slots"
    assert f"✓ Saved prompts: none yet (kept in {folder}, at most 8 files, 256 MiB)" in (
        capsys.readouterr().out.splitlines()
    )
    folder.mkdir(parents=True)
    for name in ("a", "b"):
        (folder / f"{name}.slot").write_bytes(b"x" * 2**20)
    main(["doctor"])
    assert (
        f"✓ Saved prompts: 2 in {folder} (2 MiB, at most 8 files, 256 MiB): what the model read "
        "of your prompts, so the first reply after a restart is quick; only you can read them, "
        "and deleting the folder clears them"
    ) in capsys.readouterr().out.splitlines()


def test_doctor_fails_when_no_base_url_is_set_and_no_embedded_server_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert (
        "✗ Model server: the embedded one is not running. Start it with `nbchat serve-model "
        "--detach` (or set NBCHAT_AUTOSTART=1 so the chat starts it), or point NBCHAT_BASE_URL "
        "at an OpenAI-compatible server."
    ) in lines
    assert (
        "✓ API key: not set (fine for local servers; set NBCHAT_API_KEY for hosted ones)" in lines
    )


def test_doctor_flags_a_threshold_larger_than_the_servers_window(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer() as server:
        server.add("/v1/models", Canned(body={"object": "list", "data": []}))
        server.add("/props", Canned(body={"default_generation_settings": {"n_ctx": 4096}}))
        monkeypatch.setenv("NBCHAT_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("NBCHAT_CONTEXT_TOKEN_THRESHOLD", "8000")
        code = main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert "✓ Context window: 4,096 tokens (from the server's /props)" in lines
    assert (
        "✗ Compaction: threshold 8,000 tokens (context_token_threshold, from environment variable "
        "NBCHAT_CONTEXT_TOKEN_THRESHOLD), triggers at 6,000; with max_tokens 1,024 a request may "
        "not fit the 4,096-token window. Set NBCHAT_CONTEXT_TOKEN_THRESHOLD to at most 3,072."
    ) in lines


def test_doctor_reports_an_invalid_setting_with_its_source(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NBCHAT_TAIL_MESSAGES", "0")
    assert main(["doctor"]) == 1
    assert capsys.readouterr().out == (
        "✗ Settings: tail_messages must be at least 1, got 0 "
        "(from environment variable NBCHAT_TAIL_MESSAGES).\n"
    )


def test_stop_model_with_nothing_running_says_so(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stop-model"]) == 0
    assert capsys.readouterr().out == f"No embedded model server is running (home {home}).\n"


def test_serve_model_with_a_missing_file_says_what_to_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.gguf"
    assert main(["serve-model", "--model", str(missing), "--detach"]) == 1
    assert capsys.readouterr().err == (
        f"nbchat: Unknown model '{missing}': use 'auto', 'qwen-1.5b', 'qwen-0.5b', 'smollm' or the "
        "path of an existing .gguf file.\n"
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--model", "{missing}"],
            "Unknown model '{missing}': use 'auto', 'qwen-1.5b', 'qwen-0.5b', 'smollm' or the path "
            "of an existing .gguf file.",
        ),
        (
            ["--model", "smollm", "--n-ctx", "100"],
            "local_n_ctx must be 0 (the model's own window) or at least 2048 tokens, room for the "
            "system prompt, the tools' schemas (about 1,100 tokens) and a reply, got 100 (from "
            "argument).",
        ),
        (
            ["--model", "smollm", "--port", "{port}"],
            "Port {port} on 127.0.0.1 is not free (Address already in use); choose another "
            "port, or 0 for any free one.",
        ),
    ],
    ids=["no such model", "window too small", "port taken"],
)
def test_serve_model_replace_checks_everything_before_stopping_the_running_server(
    flags: list[str],
    message: str,
    server_home: Path,
    tmp_path: Path,
    busy_port: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = {"missing": str(tmp_path / "nonexistent.gguf"), "port": str(busy_port)}
    flags = [flag.format(**values) for flag in flags]
    with pretend_embedded_server(server_home, model="qwen-0.5b") as running:
        assert main(["serve-model", "--detach", "--replace", *flags]) == 1
        assert capsys.readouterr().err == f"nbchat: {message.format(**values)}\n"
        assert running.poll() is None  # still serving the other kernels
        still = find_running(home=server_home)
        assert still is not None and still.pid == running.pid


@pytest.mark.parametrize(
    ("flags", "recorded_idle", "difference", "left_out"),
    [
        (["--n-ctx", "4096"], 1800.0, "n_ctx 8192, not 4096", "--n-ctx"),
        (["--idle-timeout", "600"], 1800.0, "idle timeout 1800 s, not 600 s", "--idle-timeout"),
        (["--idle-timeout", "600"], None, "idle timeout unknown, not 600 s", "--idle-timeout"),
        (
            ["--n-ctx", "4096", "--idle-timeout", "0"],
            1800.0,
            "n_ctx 8192, not 4096, idle timeout 1800 s, not 0 s",
            "--n-ctx and --idle-timeout",
        ),
    ],
    ids=["n_ctx", "idle timeout", "idle timeout not recorded", "both"],
)
def test_serve_model_says_when_the_running_server_is_not_the_one_asked_for(
    flags: list[str],
    recorded_idle: float | None,
    difference: str,
    left_out: str,
    server_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pretend_embedded_server(server_home, model="smollm", idle_timeout=recorded_idle) as pid:
        running = find_running(home=server_home)
        assert running is not None
        assert main(["serve-model", "--detach", "--model", "smollm", *flags]) == 1
        assert capsys.readouterr().err == (
            f"nbchat: The embedded model server at {running.url} (pid {running.pid}) already "
            f"runs smollm with {difference}. Other kernels may be using it: pass --replace to "
            f"restart it as asked, or leave out {left_out} to use it as it is.\n"
        )
        assert pid.poll() is None


def test_serve_model_reuses_a_server_that_has_what_was_asked_for(
    server_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pretend_embedded_server(server_home, model="qwen", n_ctx=4096, idle_timeout=600.0):
        running = find_running(home=server_home)
        assert running is not None and running.model == "qwen-0.5b"  # an older record's name
        flags = ["--model", "qwen-0.5b", "--n-ctx", "4096", "--idle-timeout", "600"]
        assert main(["serve-model", "--detach", *flags]) == 0
        assert capsys.readouterr().out.splitlines()[0] == (
            "Reusing the already running embedded model server: qwen-0.5b, n_ctx 4096, "
            f"pid {running.pid}."
        )


def test_doctor_lists_the_nbchat_variables_nothing_reads_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NBCHAT_CONTEXT_TOKENS", "4000")
    monkeypatch.setenv("NBCHAT_AUTOSTART", "1")
    assert main(["doctor"]) == 1
    shown = capsys.readouterr()
    assert shown.out.splitlines()[:2] == [
        "✗ Environment: unknown NBCHAT_* variables",
        "    NBCHAT_CONTEXT_TOKENS is not a variable nbchat reads, so it has no effect; did you "
        "mean NBCHAT_CONTEXT_TOKEN_THRESHOLD?",
    ]
    assert shown.err == ""  # not warned about a second time


def test_a_command_says_in_one_line_that_a_variable_has_no_effect(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NBCHAT_MODLE", "gpt-4o")
    assert main(["sessions"]) == 0
    assert capsys.readouterr().err == (
        "nbchat: NBCHAT_MODLE is not a variable nbchat reads, so it has no effect; did you mean "
        "NBCHAT_MODEL?\n"
    )


@pytest.mark.parametrize(
    ("cores", "gib", "line"),
    [
        (
            2,
            8.0,
            "✓ Model choice: auto picks qwen-1.5b here (2 cores, 8.0 GiB available; the 1.5B "
            "needs 2 cores and 3 GiB available)",
        ),
        (
            1,
            8.0,
            "✓ Model choice: auto picks qwen-0.5b here (only 1 core, 8.0 GiB available; the 1.5B "
            "needs 2 cores and 3 GiB available)",
        ),
    ],
)
def test_doctor_says_which_model_auto_picks_and_why(
    cores: int,
    gib: float,
    line: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    machine = Machine(cores=cores, available=int(gib * 1024**3))
    monkeypatch.setattr(doctor_module, "read_machine", lambda: machine)
    main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    key = line.split("picks ")[1].split()[0]
    assert line in lines
    assert lines[lines.index(line) + 1].startswith(f"✓ Model {key} (Qwen2.5-Coder-")


def leftover_servers(home: Path) -> list[int]:
    """Pids of live `nbchat.embedded.child serve` processes whose command line names `home`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if b"nbchat.embedded.child" in cmdline and os.fsencode(home) in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture
def server_home(home: Path) -> Iterator[Path]:
    """The home, with any model server a failing test left behind killed afterwards."""
    yield home
    for pid in leftover_servers(home):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(120)
def test_serve_model_detached_answers_and_stop_model_ends_it(
    server_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NBCHAT_MAX_TOKENS", "128")
    assert main(["serve-model", "--detach", "--model", "smollm", "--n-ctx", "2048"]) == 0
    started = capsys.readouterr()
    server = find_running(home=server_home)
    assert server is not None
    assert started.out.splitlines() == [
        f"Started embedded model server: smollm, n_ctx 2048, pid {server.pid}.",
        f"URL: {server.url}",
        f"To use it elsewhere: NBCHAT_BASE_URL={server.url}/v1",
        "It keeps running for every kernel (JupyterLab's exit included) until `nbchat "
        "stop-model`, or until local_idle_timeout passes without a request.",
    ]
    assert started.err.splitlines()[0] == "Starting the embedded model server (smollm, n_ctx=2048)…"
    models = httpx.get(server.url + "/v1/models", trust_env=False, timeout=10)
    assert [model["id"] for model in models.json()["data"]] == ["smollm"]

    assert main(["serve-model", "--detach", "--model", "smollm"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"Reusing the already running embedded model server: smollm, n_ctx 2048, pid {server.pid}."
    )
    assert main(["serve-model", "--detach", "--model", "qwen"]) == 1
    assert capsys.readouterr().err == (
        f"nbchat: The embedded model server at {server.url} (pid {server.pid}) runs smollm, not "
        "qwen-0.5b. Stop it with `nbchat stop-model`, or pass --replace.\n"
    )
    # Asked for another window: restarted with it, since --replace says other kernels may lose it.
    flags = ["--model", "smollm", "--n-ctx", "4096", "--idle-timeout", "600", "--replace"]
    assert main(["serve-model", "--detach", *flags]) == 0
    replaced = find_running(home=server_home)
    assert replaced is not None and replaced.pid != server.pid
    assert (replaced.n_ctx, replaced.idle_timeout) == (4096, 600.0)
    assert capsys.readouterr().out.splitlines()[0] == (
        f"Started embedded model server: smollm, n_ctx 4096, pid {replaced.pid}."
    )
    assert not is_running(server.pid)
    server = replaced
    assert main(["doctor"]) == 0
    doctor = capsys.readouterr().out.splitlines()
    assert "✓ Context window: 4,096 tokens (from the server's /props)" in doctor
    assert (
        "✓ Model: qwen2.5-coder-1.5b-instruct (nbchat's default name; the chat records smollm, "
        "the model served)"
    ) in doctor

    assert main(["stop-model"]) == 0
    assert capsys.readouterr().out == (
        f"Stopped the embedded model server at {server.url} (pid {server.pid}).\n"
    )
    assert not is_running(server.pid)
    assert find_running(home=server_home) is None
    assert leftover_servers(server_home) == []


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(120)
def test_serve_model_in_the_foreground_stops_its_server_on_sigterm(server_home: Path) -> None:
    command = [str(NBCHAT), "serve-model", "--model", "smollm", "--n-ctx", "2048"]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert proc.stdout is not None
    lines = []
    # Blocking reads are the wait: the command prints this line once the model answers.
    while not (line := proc.stdout.readline()).startswith("Serving"):
        assert line, f"nbchat serve-model ended early: {proc.communicate()}"
        lines.append(line)
    server = find_running(home=server_home)
    assert server is not None
    assert lines[0] == f"Started embedded model server: smollm, n_ctx 2048, pid {server.pid}.\n"

    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert out == f"Stopped the embedded model server (pid {server.pid}).\n"
    assert not is_running(server.pid)
    assert find_running(home=server_home) is None
    assert leftover_servers(server_home) == []

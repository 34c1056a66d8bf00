"""Saved slots (issue 19 item 7): what the embedded server read of a prompt survives a restart.

Fast: the file names (a hash of the model's identity and the prompt's prefix), the prefixes of
the prompts a turn starts with (the same in every turn), the bounds on the files. Over real HTTP
with a scripted server: a save or restore is sent only when `/metrics` says nothing is
processing or deferred (llama.cpp strands a request deferred behind a slot action). Over real
HTTP with the embedded SmolLM2: a prompt warmed, saved, the server restarted, the slots restored,
and the next turn reads only its own tokens (llama.cpp's `/metrics` counts them); a truncated
file, another model's and one llama.cpp refuses are ignored and removed, the server keeps
serving; the bounds hold on files the server wrote.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from factories import assistant, user
from fakeserver import FakeServer
from fixtures_server import Canned, ScriptedServer

from nbchat.config import Settings
from nbchat.conversation.events import Done
from nbchat.conversation.loop import Conversation
from nbchat.conversation.warmup import opening_prompts
from nbchat.embedded import server as local
from nbchat.embedded import slots
from nbchat.embedded.slots import Manifest, SavedSlots, prune, slot_dir, slot_key
from nbchat.store.store import Store

MODEL_TIMEOUT = pytest.mark.timeout(600)


# File names and bounds


def test_a_slot_file_is_named_by_the_model_and_the_prefix_only() -> None:
    key = slot_key("model A", "the system prompt")
    assert key == slot_key("model A", "the system prompt")
    assert key != slot_key("model B", "the system prompt")
    assert key != slot_key("model A", "the system prompt, edited")
    assert len(key) == 40 and set(key) <= set("0123456789abcdef")  # a name llama.cpp accepts


def test_a_model_file_rebuilt_or_moved_has_another_identity(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" * 100)
    identity = slots.model_identity(model)
    assert slots.model_identity(model) == identity
    os.utime(model, ns=(1, 1))  # rebuilt: same size, another mtime
    assert slots.model_identity(model) != identity
    moved = tmp_path / "other.gguf"
    shutil.copy2(model, moved)
    assert slots.model_identity(moved) != slots.model_identity(model)


def keep(directory: Path, key: str, *, size: int, used: float) -> None:
    """A kept pair (slot and manifest), last used at `used` (seconds since the epoch)."""
    slot = directory / f"{key}.slot"
    slot.write_bytes(b"x" * size)
    Manifest("model", size, "0" * 64, 1).write(directory / f"{key}.json")
    os.utime(slot, (used, used))


def kept(directory: Path) -> list[str]:
    return sorted(path.stem for path in directory.glob("*.slot"))


@pytest.mark.parametrize(
    ("bounds", "left"),
    [
        ({"max_files": 2, "max_bytes": 10_000}, ["c", "d"]),
        ({"max_files": 8, "max_bytes": 250}, ["c"]),  # used last; d (200 bytes) before it
        ({"max_files": 8, "max_bytes": 400}, ["b", "c", "d"]),
        ({"max_files": 8, "max_bytes": 10_000}, ["a", "b", "c", "d"]),
    ],
)
def test_prune_removes_the_least_recently_used_until_within_both_bounds(
    tmp_path: Path, bounds: dict[str, int], left: list[str]
) -> None:
    for key, used in (("a", 100.0), ("b", 200.0), ("d", 300.0), ("c", 400.0)):
        keep(tmp_path, key, size=100, used=used)
    (tmp_path / "d.slot").write_bytes(b"x" * 200)  # now used, and larger
    os.utime(tmp_path / "d.slot", (300.0, 300.0))
    prune(tmp_path, now=1000.0, **bounds)
    assert kept(tmp_path) == left
    assert sorted(path.stem for path in tmp_path.glob("*.json")) == left


def test_prune_removes_stale_parts_and_halves_of_pairs(tmp_path: Path) -> None:
    keep(tmp_path, "whole", size=10, used=900.0)
    (tmp_path / "lonely.slot").write_bytes(b"x")  # its manifest never written
    Manifest("model", 1, "0" * 64, 1).write(tmp_path / "orphan.json")  # its slot removed
    stale, fresh = tmp_path / "s-1.part", tmp_path / "f-2.part"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (0.0, 0.0))
    os.utime(fresh, (990.0, 990.0))  # a save still on its way
    assert sorted(prune(tmp_path, now=1000.0)) == ["lonely", "orphan"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "f-2.part",
        "whole.json",
        "whole.slot",
    ]


def test_a_manifest_is_written_private_and_read_back(tmp_path: Path) -> None:
    manifest = Manifest("model", 12, "ab" * 32, 7)
    manifest.write(tmp_path / "k.json")
    assert Manifest.read(tmp_path / "k.json") == manifest
    assert stat.S_IMODE((tmp_path / "k.json").stat().st_mode) == 0o600
    (tmp_path / "bad.json").write_text("{not json")
    assert Manifest.read(tmp_path / "bad.json") is None
    assert Manifest.read(tmp_path / "missing.json") is None


def test_the_prompts_a_turn_starts_with_keep_their_prefixes_as_the_chat_goes_on(
    make_settings: Callable[..., Settings], store: Store
) -> None:
    # A small model's turn asks its first step on a prompt of its own, then the chat's: both
    # prompts change with every message, their prefixes (which name the saved files) do not.
    settings = make_settings(json_tool_fallback=True, tools_on_request=True)
    with FakeServer() as fake:
        chat = Conversation(settings.replace(base_url=fake.url + "/v1"), store)
        chat.new_session()
        before = opening_prompts(chat)
        chat.session.save([user("Where is greet defined?"), assistant("In src/app.py.")])
        after = opening_prompts(chat)
        chat.close()
    assert len(before) == len(after) == 2  # the first step's, then the chat's
    assert [p.prefix for p in before] == [p.prefix for p in after]
    assert all(b.messages != a.messages for b, a in zip(before, after, strict=True))
    first_step, chat_prompt = after
    assert "Where is greet defined?" not in first_step.prefix
    assert settings.system_prompt in json.loads(chat_prompt.prefix)["system"]


# Slot actions only while the server is idle, over real HTTP with a scripted server


def metrics(*, processing: int, deferred: int, read: int = 1024) -> str:
    """What llama.cpp's `/metrics` answers (its lines, trimmed to a few)."""
    return (
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
        "# TYPE llamacpp:prompt_tokens_total counter\n"
        f"llamacpp:prompt_tokens_total {read}\n"
        "# HELP llamacpp:requests_processing Number of requests processing.\n"
        "# TYPE llamacpp:requests_processing gauge\n"
        f"llamacpp:requests_processing {processing}\n"
        "# HELP llamacpp:requests_deferred Number of requests deferred.\n"
        "# TYPE llamacpp:requests_deferred gauge\n"
        f"llamacpp:requests_deferred {deferred}\n"
    )


IDLE = Canned(text=metrics(processing=0, deferred=0))
COLD_AND_IDLE = Canned(text=metrics(processing=0, deferred=0, read=0))  # read nothing yet
PREFIX = "the system prompt"


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


def slots_on(server: ScriptedServer, home: Path) -> SavedSlots:
    slots.prepare_dir(home)
    return SavedSlots(home, server.url, identity="model", n_ctx=4096)


def paths(server: ScriptedServer) -> list[str]:
    return [path for path, _ in server.requests]


def test_a_slot_is_saved_when_the_server_has_nothing_processing_or_deferred(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    scripted.add("/metrics", IDLE)
    scripted.add("/slots/0", Canned(body={"id_slot": 0, "n_saved": 10, "n_written": 4096}))
    kept_slots = slots_on(scripted, tmp_path)
    # The scripted server writes no file, so nothing is kept: the save was sent, right after
    # the check, and that is what this test is about.
    assert not kept_slots.save(PREFIX, tokens=range(10, 11))
    assert paths(scripted) == ["/metrics", "/slots/0"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (
            Canned(text=metrics(processing=1, deferred=0)),
            "requests_processing 1, requests_deferred 0",
        ),
        (
            Canned(text=metrics(processing=0, deferred=1)),
            "requests_processing 0, requests_deferred 1",
        ),
        (
            Canned(text=metrics(processing=1, deferred=2)),
            "requests_processing 1, requests_deferred 2",
        ),
        (
            Canned(500, {"error": "no"}),
            "its /metrics could not be read: HTTP Error 500: Internal Server Error",
        ),
        (
            None,  # metrics turned off: llama.cpp answers 501, the scripted server 404
            "its /metrics could not be read: HTTP Error 404: Not Found",
        ),
        (
            Canned(text="llamacpp:prompt_tokens_total 1024\n"),
            "its /metrics has no gauge of requests processing or deferred",
        ),
        (
            Canned(text="llamacpp:requests_processing busy\nllamacpp:requests_deferred 0\n"),
            "its /metrics has no gauge of requests processing or deferred",
        ),
    ],
    ids=["processing", "deferred", "both", "error", "no-metrics", "no-gauges", "not-a-number"],
)
def test_no_save_is_sent_while_a_request_is_processing_or_deferred_or_when_unknown(
    scripted: ScriptedServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    answer: Canned | None,
    reason: str,
) -> None:
    if answer is not None:
        scripted.add("/metrics", answer)
    scripted.add("/slots/0", Canned(body={"id_slot": 0, "n_saved": 10, "n_written": 4096}))
    kept_slots = slots_on(scripted, tmp_path)
    caplog.set_level(logging.DEBUG, logger=slots.__name__)
    assert not kept_slots.save(PREFIX, tokens=range(10, 11))
    assert paths(scripted) == ["/metrics"]
    assert [record.getMessage() for record in caplog.records] == [
        f"slot not saved, the server is busy ({reason}); a later warm-up saves it"
    ]
    assert list(slot_dir(tmp_path).iterdir()) == []


def keep_sound(kept_slots: SavedSlots, prefix: str) -> None:
    """A kept file for `prefix` whose manifest matches it (what a restore checks first)."""
    slot = kept_slots.directory / f"{kept_slots.key(prefix)}.slot"
    slot.write_bytes(b"state" * 100)
    manifest = Manifest(kept_slots.identity, slot.stat().st_size, slots._sha256_of(slot), 10)
    manifest.write(slot.with_suffix(".json"))


def test_a_saved_slot_is_restored_when_the_server_is_idle(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    kept_slots = slots_on(scripted, tmp_path)
    keep_sound(kept_slots, PREFIX)
    scripted.add("/metrics", COLD_AND_IDLE, COLD_AND_IDLE)
    scripted.add("/slots/0", Canned(body={"id_slot": 0, "n_restored": 10, "n_read": 500}))
    assert kept_slots.restore([PREFIX]) == 1
    assert paths(scripted) == ["/metrics", "/metrics", "/slots/0"]


def test_no_restore_is_sent_when_a_request_came_while_the_files_were_checked(
    scripted: ScriptedServer, tmp_path: Path
) -> None:
    kept_slots = slots_on(scripted, tmp_path)
    keep_sound(kept_slots, PREFIX)
    # Cold and idle when the restore starts; another chat's first request while the files are
    # read and hashed.
    scripted.add("/metrics", COLD_AND_IDLE, Canned(text=metrics(processing=1, deferred=0, read=0)))
    scripted.add("/slots/0", Canned(body={"id_slot": 0, "n_restored": 10, "n_read": 500}))
    assert kept_slots.restore([PREFIX]) == 0
    assert paths(scripted) == ["/metrics", "/metrics"]
    assert kept_slots.has(PREFIX)  # kept for the next restart


# Over real HTTP with the embedded SmolLM2


@dataclass(frozen=True)
class Counts:
    """What llama.cpp's `/metrics` says it did since it started: prompt tokens it read, and
    prompt tokens it took from its cache instead."""

    read: int
    cached: int

    @classmethod
    def of(cls, url: str) -> Counts:
        text = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=30).text
        values = {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line.startswith("llamacpp:")
        }
        return cls(
            int(values["llamacpp:prompt_tokens_total"]),
            int(values["llamacpp:prompt_tokens_cached_total"]),
        )

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.read - other.read, self.cached - other.cached)


def smollm_settings(home: Path, workspace: Path) -> Settings:
    """SmolLM2 with the defaults of a small model: a first step, then the chat's request."""
    return Settings(
        home=home,
        workspace=workspace,
        local_model="smollm",
        local_n_ctx=2048,
        max_tokens=8,
        temperature=0.0,
        tool_policy="deny",
    )


@dataclass(frozen=True)
class Saved:
    """A home whose server warmed a chat's prompts and saved them, then stopped."""

    home: Path
    workspace: Path
    warmed: Counts  # what the fresh server read to warm them

    def copy_to(self, home: Path) -> Settings:
        shutil.copytree(slot_dir(self.home), slot_dir(home))
        return smollm_settings(home, self.workspace)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Saved]:
    root = tmp_path_factory.mktemp("saved")
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("The meeting is on Tuesday.\n")
    settings = smollm_settings(root / "home", workspace)
    store = Store(settings.database_path)
    chat = Conversation(settings, store)
    try:
        chat.new_session()
        url = chat.connect(start=True).base_url
        assert chat.warmer.pending  # nothing saved yet
        chat.warmer.start(chat.warm_up, grace=0)
        assert chat.warmer.wait(540)
        assert not chat.warmer.pending
        warmed = Counts.of(url)
    finally:
        chat.close()
        store.close()
        stop(root / "home")
    yield Saved(root / "home", workspace, warmed)


def stop(home: Path) -> None:
    running = local.find_running(home=home)
    if running is not None:
        running.stop()


@pytest.fixture
def chat_in(tmp_path: Path) -> Iterator[Callable[[Settings], Conversation]]:
    """Conversations whose servers and stores are closed after the test."""
    made: list[tuple[Conversation, Store]] = []

    def make(settings: Settings) -> Conversation:
        store = Store(settings.database_path)
        conversation = Conversation(settings, store)
        conversation.new_session()
        made.append((conversation, store))
        return conversation

    yield make
    for conversation, store in made:
        conversation.close()
        store.close()
        stop(conversation.settings.home)


@pytest.mark.slow
@pytest.mark.model
@MODEL_TIMEOUT
def test_a_prompt_warmed_before_a_restart_is_read_from_its_saved_slot(
    saved: Saved, chat_in: Callable[[Settings], Conversation], tmp_path: Path
) -> None:
    directory = slot_dir(saved.home)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(directory.glob("*.slot"))
    assert len(files) == 2  # the first step's prompt and the chat's
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in files)

    chat = chat_in(saved.copy_to(tmp_path / "home"))
    url = chat.connect(start=True).base_url  # a new server: nothing read yet, so it restores
    restored = Counts.of(url)
    assert restored.read <= 1  # only the one token that moved a slot on into the RAM cache
    events = list(chat.send("Hi there, what is 2+2?"))
    assert events[-1] == Done()
    turn = Counts.of(url) - restored
    # The turn's two requests (first step, then the reply) found both prompts' prefixes in the
    # cache, as a warm server would have them, and read only the message's own tokens.
    assert turn.cached >= 0.9 * saved.warmed.read
    assert turn.read <= 0.1 * saved.warmed.read
    assert not chat.warmer.pending  # both prompts are kept: nothing to save again


def truncate(slot: Path) -> None:
    """Half a file: the manifest still says its full size (llama.cpp aborts on such a file)."""
    slot.write_bytes(slot.read_bytes()[: slot.stat().st_size // 2])


def from_another_model(slot: Path) -> None:
    """The very same bytes said to come from another model file (one of the same shape, which
    llama.cpp would load as its own)."""
    path = slot.with_suffix(".json")
    manifest = Manifest.read(path)
    assert manifest is not None
    other = json.dumps({"path": "/models/other.gguf", "size": 1, "mtime_ns": 1})
    Manifest(other, manifest.size, manifest.sha256, manifest.tokens).write(path)


def refused_by_the_server(slot: Path) -> None:
    """A file whose manifest matches it, but which is no state file: llama.cpp refuses it."""
    slot.write_bytes(b"not a llama.cpp state file" * 100)
    manifest = Manifest.read(slot.with_suffix(".json"))
    assert manifest is not None
    size, digest = slot.stat().st_size, slots._sha256_of(slot)
    Manifest(manifest.identity, size, digest, manifest.tokens).write(slot.with_suffix(".json"))


@pytest.mark.slow
@pytest.mark.model
@MODEL_TIMEOUT
@pytest.mark.parametrize("damage", [truncate, from_another_model, refused_by_the_server])
def test_a_damaged_or_foreign_saved_slot_is_ignored_and_removed(
    saved: Saved, tmp_path: Path, store: Store, damage: Callable[[Path], None]
) -> None:
    settings = saved.copy_to(tmp_path / "home")
    for slot in slot_dir(settings.home).glob("*.slot"):
        damage(slot)
    # The chat never connects, so no warm-up reads anything beside the requests below.
    prompts = opening_prompts(Conversation(settings, store))
    server = local.start_server("smollm", home=settings.home, n_ctx=2048)
    try:
        kept_slots = SavedSlots.of(settings.home, server.url)
        assert kept_slots is not None
        assert kept_slots.restore([prompt.prefix for prompt in reversed(prompts)]) == 0
        assert list(slot_dir(settings.home).glob("*.slot")) == []
        assert not any(kept_slots.has(prompt.prefix) for prompt in prompts)
        # The server still serves, from an empty slot: the chat's prompt is read whole.
        body = {"model": "smollm", "messages": prompts[-1].messages, "max_tokens": 1}
        reply = httpx.post(server.base_url + "/chat/completions", json=body, timeout=300).json()
        assert reply["timings"]["cache_n"] == 0
        assert reply["timings"]["prompt_n"] > 20
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.model
@MODEL_TIMEOUT
def test_saved_slots_stay_within_their_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    server = local.start_server("smollm", home=home, n_ctx=2048)
    try:
        kept_slots = SavedSlots.of(home, server.url)
        assert kept_slots is not None

        def read_and_save(prefix: str) -> bool:
            message = {"role": "user", "content": prefix}
            body = {"model": "smollm", "messages": [message], "max_tokens": 1}
            httpx.post(server.base_url + "/chat/completions", json=body, timeout=120)
            return kept_slots.save(prefix)

        monkeypatch.setattr(slots, "MAX_FILES", 2)
        assert all(read_and_save(f"Say {word}.") for word in ("one", "two", "three"))
        assert kept(slot_dir(home)) == sorted(
            kept_slots.key(f"Say {word}.") for word in ("two", "three")
        )
        size = max(path.stat().st_size for path in slot_dir(home).glob("*.slot"))
        monkeypatch.setattr(slots, "MAX_BYTES", size + size // 2)  # room for one
        assert read_and_save("Say four.")
        assert kept(slot_dir(home)) == [kept_slots.key("Say four.")]
        monkeypatch.setattr(slots, "MAX_FILE_BYTES", size // 2)  # too big to keep at all
        assert not read_and_save("Say five, and then a little more.")
        assert kept(slot_dir(home)) == [kept_slots.key("Say four.")]
        assert list(slot_dir(home).glob("*.part")) == []
        # A slot that holds another count of tokens than asked (another request came between).
        monkeypatch.setattr(slots, "MAX_FILE_BYTES", 2**30)
        assert not kept_slots.save("Say six.", tokens=range(10**6, 10**6 + 1))
        assert not kept_slots.has("Say six.")
    finally:
        server.stop()

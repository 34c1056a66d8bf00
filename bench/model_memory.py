"""How much memory the embedded model server holds, for each default model (what `auto` weighs).

`local_model = auto` picks the 1.5B only where 3 GiB are available (`nbchat.embedded.modelfiles`),
and the docs say what each model holds once running; those figures are measured here. For each
model, one server starts in a temporary home with the default window, a chat connects, lets its
warm-up finish and sends a plain question and a workspace request (so the server has read its
prompts and written replies), then the server process's memory is read from
`/proc/<pid>/status`:

- peak resident memory (`VmHWM`) and resident memory at the end (`VmRSS`);
- of that, what is mapped from files (`RssFile`: the model file and libraries, which the page
  cache can drop and re-read) and the server's own memory (`RssAnon`: the KV cache, compute
  buffers, the Python process that hosts llama.cpp), which only the process's end gives back;

beside the model file's size. Figures only (Linux), never an assertion; about a minute a model.

    python bench/model_memory.py [--models qwen-1.5b qwen-0.5b] [--write]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import harness
import results
from default_model_eval import make_workspace
from harness import Figure, temporary_directory

from nbchat.config import DEFAULT_N_CTX, Settings
from nbchat.conversation.loop import Conversation
from nbchat.embedded.modelfiles import model_key, model_path
from nbchat.embedded.server import ensure_server
from nbchat.store.store import Store

SECTION = "model-memory"
MODELS = ("qwen-1.5b", "qwen-0.5b")
N_CTX = DEFAULT_N_CTX
MESSAGES = ("What is the capital of France?", "List the files in this workspace.")
MIB = 1024 * 1024
# The lines of /proc/<pid>/status read, in kB.
STATUS_FIELDS = ("VmHWM", "VmRSS", "RssAnon", "RssFile")


def read_status(pid: int) -> dict[str, int]:
    """`STATUS_FIELDS` of process `pid`, in bytes (an empty dict where /proc is not there)."""
    found: dict[str, int] = {}
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        name, _, value = line.partition(":")
        if name in STATUS_FIELDS and value.split():
            found[name] = int(value.split()[0]) * 1024
    return found


def chat_settings(home: Path, model: str) -> Settings:
    """The user's defaults on `model` (tools denied, short replies)."""
    return Settings(
        home=home,
        workspace=make_workspace(home),
        local_model=model,
        local_n_ctx=N_CTX,
        max_tokens=64,
        max_tool_turns=1,
        temperature=0.0,
        tool_policy="deny",
    )


def measure(model: str) -> tuple[dict[str, int], int]:
    """The server's memory (`read_status`) after a chat's warm-up and `MESSAGES`, and the
    model file's size, in a temporary home."""
    with temporary_directory("nbchat-memory-") as home:
        server = ensure_server(model, home=home, n_ctx=N_CTX, timeout=900)
        store = Store(home / "bench.db")
        try:
            chat = Conversation(chat_settings(home, model), store)
            try:
                chat.new_session("memory")
                chat.connect()
                chat.warmer.wait()
                for text in MESSAGES:
                    for _event in chat.send(text):
                        pass
            finally:
                chat.close()
                chat.warmer.wait()
            status = read_status(server.pid)
            return status, model_path(model, home=home).stat().st_size
        finally:
            store.close()
            server.stop()


def figures(models: Sequence[str]) -> list[Figure]:
    rows = []
    for model in models:
        status, size = measure(model)
        if not status:
            rows.append(Figure(f"{model_key(model)}: memory", "not measured (no /proc)"))
            continue
        name = model_key(model)
        rows += [
            Figure(f"{name}: peak resident memory", f"{status['VmHWM'] / MIB:,.0f} MiB"),
            Figure(f"{name}: resident at the end", f"{status['VmRSS'] / MIB:,.0f} MiB"),
            Figure(
                f"{name}: of which mapped from files (the model, libraries)",
                f"{status['RssFile'] / MIB:,.0f} MiB",
                f"{size / MIB:,.0f} MiB file",
            ),
            Figure(
                f"{name}: of which the server's own memory", f"{status['RssAnon'] / MIB:,.0f} MiB"
            ),
        ]
    return rows


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--models", nargs="+", default=None, help="qwen-1.5b, qwen-0.5b, …")
    parser.add_argument(
        "--write", action="store_true", help=f"write the table into {results.RESULTS.name}"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] = ()) -> list[dict[str, Any]]:
    args = parse(argv)
    load_start = os.getloadavg()
    started = time.monotonic()
    rows = [row.as_dict() for row in figures(args.models or MODELS)]
    if args.write:
        took = f"Window {N_CTX:,} tokens. Took {time.monotonic() - started:.0f} s."
        results.write_section(
            SECTION,
            f"{results.figures_table(rows)}\n\n{took}",
            command=" ".join(["python bench/model_memory.py", *argv]),
            load_start=load_start,
            load_end=os.getloadavg(),
        )
    return rows


if __name__ == "__main__":
    harness.print_figures("Memory of the embedded model server", main(sys.argv[1:]))

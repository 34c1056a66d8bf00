"""The stall a user feels when a chat compacts: each turn's wall time through `ChatUI`.

A multi-turn chat is driven through the real widget, headless (`ui.send`, `ui.wait`), on the
embedded Qwen2.5-Coder-0.5B (llama.cpp in its own process, `ensure_server`), with a budget small
enough that it compacts every few turns, and a pause between turns as a reader would take
(`--pause`, 20 s by default; 0 for none). Each turn's wall time is from `send` to `wait`
returning: the reply, plus any compaction the turn ran, plus re-reading a new prefix.

Two scenarios (`--scenario`): "budget" (issue 13): the 0.5B with a 1,600-token budget, ~250-token
replies, no tools; "window" (issue 22): the default model (`auto`: the 1.5B where the machine can
run it) with a 4,096-token window and the budget it implies, replies up to 96 tokens, the
default tools (denied), sixteen turns of explain-this-code questions (twelve snippets of 10-20
lines: the trigger comes after about twelve turns).

Two modes in the same process, each in a new session (its own database): "today" with
`prepare_mark=0` (no background preparation: a compacting turn summarises in the foreground)
and "after" with the default mark (the widget prepares the next compaction while the user
reads, applies it at once at the trigger, and warms the new prefix). The figure is the slowest
turn over the median turn, per mode; the goal (issue 13) is at most 1.5 with pauses.
Figures only, never an assertion. Slow: minutes per mode on two cores.

`--server-log FILE` keeps llama.cpp's log, whose `print_timing` lines give each request's
prompt tokens computed, the cached part and the tokens generated (where a compacting turn's
seconds go: the instruction, the summary, the re-read of the new prefix, the reply).

    python bench/compaction_stall.py [--scenario budget|window] [--turns 8] [--pause 20]
                                     [--modes today after] [--write]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
import results
from harness import Figure, temporary_directory

from nbchat.config import DEFAULT_PREPARE_MARK, Settings
from nbchat.embedded.modelfiles import choose_model, read_machine
from nbchat.embedded.server import ensure_server
from nbchat.tools import ToolRegistry
from nbchat.ui import ChatUI

MODEL = "qwen"
N_CTX = 4_096
# Trigger 1,200: with ~250-token replies the chat compacts every few turns, and the kept tail
# (4 rows) still fits beside a 150-token summary. No tools: their ~1,100 tokens of schemas would
# leave a window this small nothing to keep (the default tools are not offered for questions
# like these on the embedded model anyway).
THRESHOLD = 1_600
MAX_TOKENS = 256
SUMMARY_MAX_TOKENS = 150
TURNS = 10
PAUSE = 20.0
GOAL = 1.5
MODES = {"today": 0.0, "after": DEFAULT_PREPARE_MARK}
QUESTIONS = tuple(
    f"Explain {topic} in one short paragraph with a small example."
    for topic in (
        "Python list comprehensions",
        "how a dict differs from a list",
        "the `with` statement",
        "generators",
        "virtual environments",
        "decorators",
        "`*args` and `**kwargs`",
        "dataclasses",
        "f-string number formatting",
        "the GIL",
        "`pathlib` against `os.path`",
        "context variables",
    )
)


# Twelve snippets of 10-20 lines (~100-250 tokens each), so that with the replies the chat
# reaches the window's trigger within the twelve turns, as in the run.
SNIPPETS = (
    """import csv
from collections import defaultdict

def totals_by_region(path):
    totals = defaultdict(float)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                totals[row["region"]] += float(row["amount"])
            except (KeyError, ValueError):
                continue
    return dict(sorted(totals.items(), key=lambda kv: kv[1], reverse=True))""",
    """import functools
import time

def retry(times=3, delay=0.5, exceptions=(Exception,)):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for attempt in range(1, times + 1):
                try:
                    return func(*args, **kwargs)
                except exceptions:
                    if attempt == times:
                        raise
                    time.sleep(delay * attempt)
        return wrapper
    return decorate""",
    """class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = {}

    def get(self, key):
        if key not in self.items:
            return None
        value = self.items.pop(key)
        self.items[key] = value
        return value

    def put(self, key, value):
        self.items.pop(key, None)
        self.items[key] = value
        if len(self.items) > self.capacity:
            self.items.pop(next(iter(self.items)))""",
    """import re
from pathlib import Path

TODO = re.compile(r"#\\s*TODO[:\\s]+(.*)")

def find_todos(root):
    found = []
    for path in Path(root).rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            match = TODO.search(line)
            if match:
                found.append((str(path), number, match.group(1).strip()))
    return sorted(found)""",
    """def merge_intervals(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [tuple(pair) for pair in merged]

def total_covered(intervals):
    return sum(end - start for start, end in merge_intervals(intervals))""",
    """import json
from dataclasses import dataclass, asdict, field

@dataclass
class Task:
    title: str
    done: bool = False
    tags: list = field(default_factory=list)

def save(tasks, path):
    with open(path, "w") as f:
        json.dump([asdict(t) for t in tasks], f, indent=2)

def load(path):
    with open(path) as f:
        return [Task(**item) for item in json.load(f)]""",
    """import threading
import queue

def run_workers(jobs, work, count=4):
    tasks, results = queue.Queue(), queue.Queue()
    for job in jobs:
        tasks.put(job)
    def worker():
        while True:
            try:
                job = tasks.get_nowait()
            except queue.Empty:
                return
            results.put((job, work(job)))
    threads = [threading.Thread(target=worker) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return dict(results.queue)""",
    """def binary_search(items, target):
    low, high = 0, len(items) - 1
    while low <= high:
        middle = (low + high) // 2
        if items[middle] == target:
            return middle
        if items[middle] < target:
            low = middle + 1
        else:
            high = middle - 1
    return -1

def count_below(items, value):
    return sum(1 for item in items if item < value)""",
    """import sqlite3
from contextlib import closing

QUERY = (
    "SELECT customer, COUNT(*) AS orders, SUM(total) AS spent "
    "FROM orders WHERE status = 'paid' "
    "GROUP BY customer ORDER BY spent DESC LIMIT ?"
)

def top_customers(db, limit=5):
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(QUERY, (limit,)).fetchall()""",
    """from itertools import islice

def windows(iterable, size):
    iterator = iter(iterable)
    window = list(islice(iterator, size))
    if len(window) == size:
        yield tuple(window)
    for item in iterator:
        window = window[1:] + [item]
        yield tuple(window)

def moving_average(values, size=3):
    return [sum(w) / size for w in windows(values, size)]""",
    """import argparse

def parse(argv=None):
    parser = argparse.ArgumentParser(description="Resize images")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--width", type=int, default=800)
    parser.add_argument("--quality", type=int, choices=range(1, 101), default=85)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if args.width <= 0:
        parser.error("--width must be positive")
    return args""",
    """import asyncio

async def fetch_all(urls, fetch, limit=5):
    semaphore = asyncio.Semaphore(limit)
    async def one(url):
        async with semaphore:
            try:
                return url, await fetch(url)
            except Exception as exc:
                return url, exc
    pairs = await asyncio.gather(*(one(u) for u in urls))
    return {url: result for url, result in pairs}""",
)
CODE_QUESTIONS = tuple(
    f"Explain what this code does, briefly:\n```python\n{code}\n```" for code in SNIPPETS
)


@dataclass(frozen=True)
class Scenario:
    """One chat to measure: the model, its window and budget, the reply cap, the questions, and
    whether the default tools are offered (denied when asked)."""

    model: str
    n_ctx: int
    threshold: int | None  # None: the window's own (n_ctx minus the reply's max_tokens)
    max_tokens: int
    summary_max_tokens: int | None
    turns: int
    tools: bool
    questions: tuple[str, ...] = field(default=QUESTIONS, repr=False)


def scenarios() -> dict[str, Scenario]:
    """The scenarios, read at call time (a test narrows MODEL, MAX_TOKENS and TURNS)."""
    return {
        "budget": Scenario(MODEL, N_CTX, THRESHOLD, MAX_TOKENS, SUMMARY_MAX_TOKENS, TURNS, False),
        "window": Scenario("auto", 4_096, None, 96, None, 16, True, CODE_QUESTIONS),
    }


@dataclass(frozen=True)
class Turn:
    seconds: float
    compacted: bool  # during the turn
    before: bool = False  # in the pause before it (the widget's idle work)


def settings_for(home: Path, mode: str, pause: float, scenario: Scenario) -> Settings:
    summary = (
        {}
        if scenario.summary_max_tokens is None
        else {"summary_max_tokens": scenario.summary_max_tokens}
    )
    return Settings(
        home=home,
        workspace=home,
        db_path=home / f"{mode}-{pause:g}.db",  # a new session, nothing shared but the server
        local_model=scenario.model,
        local_n_ctx=scenario.n_ctx,
        context_token_threshold=scenario.threshold,
        max_tokens=scenario.max_tokens,
        prepare_mark=MODES[mode],
        notebook_tools=False,
        tool_policy="deny",
        **summary,
    )


def chat(home: Path, mode: str, *, turns: int, pause: float, scenario: Scenario) -> list[Turn]:
    """One session of `turns` questions; each turn's wall time and whether it compacted."""
    tools = None if scenario.tools else ToolRegistry()  # None: the default tools
    ui = ChatUI(settings_for(home, mode, pause, scenario), tools=tools)
    measured: list[Turn] = []
    try:
        ui.send("Hi")  # not measured: the first reply reads the system prompt and tools
        ui.wait()
        ui.background.wait()
        done = compactions(ui)
        for number in range(turns):
            before = compactions(ui)
            started = time.monotonic()
            ui.send(scenario.questions[number % len(scenario.questions)])
            ui.wait()
            done, idle = compactions(ui), before > done
            measured.append(Turn(time.monotonic() - started, done > before, idle))
            print(f"{mode}, {pause:g} s pauses, turn {number + 1}: {measured[-1]}", file=sys.stderr)
            if pause:
                time.sleep(pause)  # the reader; the widget's idle work runs meanwhile
    finally:
        ui.close()
    return measured


def compactions(ui: ChatUI) -> int:
    session_id = ui.conversation.session_id
    if session_id is None:
        return 0
    records = ui.store.list_compactions(session_id)
    return sum(1 for record in records if record["kind"] in ("summary", "chunked"))


def stall_of(turns: Sequence[Turn]) -> float:
    return max(t.seconds for t in turns) / statistics.median(t.seconds for t in turns)


def figure_for(mode: str, pause: float, turns: Sequence[Turn]) -> Figure:
    times = ", ".join(
        f"{'+' if t.before else ''}{t.seconds:.0f}{'*' if t.compacted else ''}" for t in turns
    )
    ratio = stall_of(turns)
    return Figure(
        f"Qwen chat, {len(turns)} turns, {pause:g} s pauses, {mode} (prepare_mark "
        f"{MODES[mode]:g}): turn seconds (* compacted in the turn, + in the pause before it)",
        f"{times}; slowest {max(t.seconds for t in turns):.0f} s",
        f"median {statistics.median(t.seconds for t in turns):.0f} s",
        f"{ratio:.2f}",
        f"<= {GOAL}" if pause and mode == "after" else "",
        ratio <= GOAL if pause and mode == "after" else None,
    )


def main(
    turns: int | None = None,
    pauses: Sequence[float] = (PAUSE,),
    modes: Sequence[str] = tuple(MODES),
    *,
    server_log: Path | None = None,
    scenario: str = "budget",
) -> list[dict[str, Any]]:
    """Start the scenario's model in a temporary home, chat in each mode at each pause, stop
    it; `server_log` keeps a copy of llama.cpp's log (its per-request timings: prompt, cached,
    generated)."""
    chosen = scenarios()[scenario]
    turns = chosen.turns if turns is None else turns
    model = choose_model(read_machine()).key if chosen.model == "auto" else chosen.model
    figures: list[Figure] = [Figure(f"scenario {scenario}", f"{chosen}, model {model}")]
    with temporary_directory("nbchat-stall-") as home:
        server = ensure_server(model, home=home, n_ctx=chosen.n_ctx, timeout=600)
        try:
            results: dict[tuple[str, float], list[Turn]] = {}
            for pause in pauses:
                for mode in modes:
                    results[mode, pause] = chat(
                        home, mode, turns=turns, pause=pause, scenario=chosen
                    )
                    figures.append(figure_for(mode, pause, results[mode, pause]))
                figures.extend(comparison(results, pause))
        finally:
            server.stop()
            if server_log is not None:
                shutil.copyfile(home / "run" / "model-server.log", server_log)
    return [figure.as_dict() for figure in figures]


def comparison(results: dict[tuple[str, float], list[Turn]], pause: float) -> list[Figure]:
    """The slowest turn after against today's, at one pause."""
    today, after = results.get(("today", pause)), results.get(("after", pause))
    if not today or not after:
        return []
    slowest_today = max(t.seconds for t in today)
    slowest_after = max(t.seconds for t in after)
    return [
        Figure(
            f"Qwen chat, {pause:g} s pauses: slowest turn after / today",
            f"{slowest_after:.0f} s",
            f"{slowest_today:.0f} s",
            f"{slowest_after / slowest_today:.2f}",
        )
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", choices=("budget", "window"), default="budget")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--pause", type=float, nargs="+", default=[PAUSE])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--server-log", type=Path, default=None, help="keep llama.cpp's log")
    parser.add_argument("--write", action="store_true", help="fill compaction_stall/SCENARIO")
    args = parser.parse_args()
    load_start = os.getloadavg()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    begun = time.monotonic()
    figures = main(
        args.turns, args.pause, args.modes, server_log=args.server_log, scenario=args.scenario
    )
    harness.print_figures("The stall a compaction makes, through ChatUI on Qwen", figures)
    print(f"\n(took {time.monotonic() - begun:.0f} s; load {os.getloadavg()})")
    if args.write:
        results.write_section(
            f"compaction_stall/{args.scenario}",
            results.figures_table(figures),
            command=" ".join(["python bench/compaction_stall.py", *sys.argv[1:]]),
            load_start=load_start,
            load_end=os.getloadavg(),
        )

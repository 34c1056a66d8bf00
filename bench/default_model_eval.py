"""How well does the embedded default model answer? 45 prompts with machine-checkable answers.

Drives the real `Conversation` (public API only) against the embedded llama.cpp server
(`nbchat.local.ensure_server`, started in a temporary home and stopped afterwards) at
temperature 0, with the tools under policy "deny" in a scratch workspace holding real files:
reading tools run on those files, writing and shell tools are refused, so nothing harmful runs.

Each case is one of:

- plain (general knowledge, arithmetic, short coding questions, follow-ups that need only the
  conversation): right when the model answers without calling a tool; a key fact in the answer
  is counted separately;
- tool (read, list or search files, run a command, write a file): right when the first call
  names an expected tool with arguments that validate against its schema and hold the expected
  value: `path` must name the expected workspace entry (`notes.txt`, `./notes.txt` or its
  absolute path in the workspace; `/path/to/notes.txt` does not), and a list or search call
  naming no folder must search the workspace itself; other arguments must contain the text.

A follow-up carries the earlier messages of its session (`before`), sent first and not scored.
Reported: share answered directly when no tool is needed (goal >= 90%), share of correct tool
calls when one is (goal >= 70%), answers holding their key fact, median and p90 time to the first
visible token and to the end of the turn, the first reply after the server started, replies that
hit `max_tokens`, and replies that are fake tool-call JSON (goal: none).

    python bench/default_model_eval.py [--limit N] [--only plain|tool] [--model qwen|smollm|PATH]
                                       [--tool-rounds 1|2] [--no-overview] [--verbose]
    python bench/default_model_eval.py --base-url http://127.0.0.1:PORT/v1   # a running server

`main()` returns the table rows as dicts (for `bench/run_all.py`); figures only, no assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from eval_cases import FILES, Case, plain, tool  # noqa: F401 - the case API, for callers
from eval_split_dev import CASES
from harness import Figure, temporary_directory

from nbchat.config import Settings
from nbchat.conversation.events import (
    Done,
    Failed,
    Notice,
    ReasoningDelta,
    RowSaved,
    TextDelta,
    ToolStarted,
)
from nbchat.conversation.loop import Conversation
from nbchat.embedded.server import LocalServer, ensure_server
from nbchat.store.store import Store
from nbchat.tools import default_registry

MODEL = "qwen"
N_CTX = 8_192
# Long enough for every expected answer; a runaway reply stops here instead of at 1,024.
MAX_TOKENS = 256
# 2: the tool runs and the model answers from its result (key facts of tool cases are scored);
# 1: the turn ends after the first call (faster; only the call is scored).
TOOL_ROUNDS = 2
OVERVIEW = True  # the workspace's top-level names in the system prompt (`workspace_overview`)
LIMIT: int | None = None
BASE_URL: str | None = None
PLAIN_GOAL = 0.90
TOOL_GOAL = 0.70

# Tools whose `path` is a folder: when a case names none, the call must name the workspace.
FOLDER_TOOLS = frozenset({"list_files", "search_files"})
FAKE_CALL = re.compile(r'"name"\s*:\s*"[^"]*"\s*,\s*"(arguments|parameters)"\s*:|<tool_call>')


@dataclass
class Outcome:
    """What one case's turn did, as measured from its events."""

    case: Case
    first_token: float | None = None
    total: float = 0.0
    calls: list[tuple[str, str]] = field(default_factory=list)
    answer: str = ""
    texts: list[str] = field(default_factory=list)
    hit_max_tokens: bool = False
    error: str = ""

    @property
    def fake_json(self) -> bool:
        return any(FAKE_CALL.search(text) for text in self.texts)

    def is_direct(self) -> bool:
        return not self.calls and bool(self.answer.strip()) and not self.fake_json

    def has_fact(self) -> bool:
        answer = self.answer.lower()
        return not self.case.fact or any(fact.lower() in answer for fact in self.case.fact)

    def is_right_call(self, schemas: Mapping[str, dict[str, Any]], workspace: Path) -> bool:
        if not self.calls:
            return False
        name, arguments = self.calls[0]
        expected = self.case.calls.get(name)
        if expected is None or name not in schemas:
            return False
        try:
            values = json.loads(arguments or "{}")
        except ValueError:
            return False
        if not isinstance(values, dict) or not default_registry().accepts(name, values):
            return False
        wanted = dict(expected)
        if name in FOLDER_TOOLS:
            wanted.setdefault("path", ".")  # no folder named: the workspace itself
        return all(
            names_entry(values.get(key, "."), want, workspace)
            if key == "path"
            else want.lower() in str(values.get(key, "")).lower()
            for key, want in wanted.items()
        )


def names_entry(value: object, expected: str, workspace: Path) -> bool:
    """True when `value` names the workspace entry `expected` (a path relative to it): relative
    (`src/app.py`, `./src/app.py`) or absolute inside the workspace. `/path/to/src/app.py`
    names nothing here, so it does not count, though it holds the expected text."""
    if not isinstance(value, str) or not value.strip():
        return False
    text = os.path.normpath(value.strip())
    if os.path.isabs(text):
        for root in {os.path.normpath(workspace), os.path.realpath(workspace)}:
            if text == root or text.startswith(root.rstrip(os.sep) + os.sep):
                text = os.path.relpath(text, root)
                break
        else:
            return False
    return text == os.path.normpath(expected)


def make_workspace(root: Path) -> Path:
    workspace = root / "workspace"
    for name, text in FILES.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return workspace


def eval_settings(
    home: Path, base_url: str | None, tool_rounds: int, *, overview: bool = OVERVIEW
) -> Settings:
    """The user's defaults except: temperature 0, tools denied, a short reply budget."""
    return Settings(
        base_url=base_url,
        home=home,
        workspace=make_workspace(home),
        temperature=0.0,
        tool_policy="deny",
        max_tokens=MAX_TOKENS,
        max_tool_turns=tool_rounds,
        local_model=MODEL,
        local_n_ctx=N_CTX,
        json_tool_fallback=True,
        tools_on_request=True,  # as on the embedded model, also when --base-url names a server
        workspace_overview=overview,
    )


def run_case(settings: Settings, store: Store, case: Case) -> Outcome:
    conversation = Conversation(settings, store)
    conversation.new_session("eval")
    for earlier in case.before:
        for _event in conversation.send(earlier):
            pass
    outcome = Outcome(case)
    started = time.monotonic()
    for event in conversation.send(case.prompt):
        now = time.monotonic() - started
        visible = isinstance(event, TextDelta | ReasoningDelta | ToolStarted)
        if visible and outcome.first_token is None:
            outcome.first_token = now
        record(outcome, event)
    outcome.total = time.monotonic() - started
    conversation.close()
    return outcome


def record(outcome: Outcome, event: object) -> None:
    if isinstance(event, ToolStarted):
        outcome.calls.append((event.call.name, event.call.arguments))
    elif isinstance(event, RowSaved) and event.row.role in ("assistant", "assistant_full"):
        if event.row.content.strip():
            outcome.texts.append(event.row.content)
            outcome.answer = event.row.content
    elif isinstance(event, Notice) and "max_tokens" in event.text:
        outcome.hit_max_tokens = True
    elif isinstance(event, Failed):
        outcome.error = event.message
    elif isinstance(event, Done):
        pass


def warm_up(settings: Settings) -> float:
    """What a ChatUI does while the user types its first message: have the server read the
    system prompt and tool schemas into its prompt cache. Seconds taken."""
    store = Store(settings.database_path)
    started = time.monotonic()
    try:
        conversation = Conversation(settings, store)
        conversation.new_session("warm-up")
        conversation.warm_up()
        conversation.close()
    finally:
        store.close()
    return time.monotonic() - started


def run_cases(settings: Settings, cases: Sequence[Case], verbose: bool) -> Iterator[Outcome]:
    store = Store(settings.database_path)
    try:
        for number, case in enumerate(cases, 1):
            outcome = run_case(settings, store, case)
            if verbose:
                print(describe(number, outcome), file=sys.stderr, flush=True)
            yield outcome
    finally:
        store.close()


def describe(number: int, outcome: Outcome) -> str:
    call = f" call={outcome.calls[0][0]}({outcome.calls[0][1]})" if outcome.calls else ""
    first = f"{outcome.first_token:.1f}" if outcome.first_token is not None else "-"
    answer = outcome.answer.strip().replace("\n", " ")[:100]
    error = f" ERROR {outcome.error}" if outcome.error else ""
    return (
        f"[{number}] {outcome.case.prompt[:50]!r}{call} first={first}s total={outcome.total:.1f}s"
        f"{' FAKE' if outcome.fake_json else ''}{' MAX' if outcome.hit_max_tokens else ''}"
        f"{error} -> {answer!r}"
    )


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def figures(
    outcomes: list[Outcome], schemas: Mapping[str, dict[str, Any]], workspace: Path
) -> list[Figure]:
    plain_cases = [o for o in outcomes if not o.case.needs_tool]
    tool_cases = [o for o in outcomes if o.case.needs_tool]
    direct = sum(o.is_direct() for o in plain_cases)
    right = sum(o.is_right_call(schemas, workspace) for o in tool_cases)
    facts = [o for o in plain_cases if o.case.fact]
    with_fact = sum(o.has_fact() for o in facts)
    rows = [
        share_figure("plain prompts answered without a tool call", direct, plain_cases, PLAIN_GOAL),
        share_figure("tool prompts with a correct first call", right, tool_cases, TOOL_GOAL),
        share_figure("plain answers holding their key fact", with_fact, facts, None),
    ]
    rows += timing_figures(outcomes)
    fake = sum(o.fake_json for o in outcomes)
    rows.append(
        Figure("replies that are fake tool-call JSON", str(fake), target="0", met=fake == 0)
    )
    rows.append(
        Figure(
            f"replies that hit max_tokens ({MAX_TOKENS})",
            str(sum(o.hit_max_tokens for o in outcomes)),
        )
    )
    errors = [o.error for o in outcomes if o.error]
    if errors:
        rows.append(Figure("turns that failed", f"{len(errors)}: {errors[0][:80]}"))
    return rows


def share_figure(name: str, count: int, cases: Sequence[Outcome], goal: float | None) -> Figure:
    share = count / len(cases) if cases else 0.0
    value = f"{count} / {len(cases)} ({share:.0%})"
    if goal is None or not cases:
        return Figure(name, value)
    return Figure(name, value, target=f">= {goal:.0%}", met=share >= goal)


def timing_figures(outcomes: list[Outcome]) -> list[Figure]:
    firsts = [o.first_token for o in outcomes if o.first_token is not None]
    totals = [o.total for o in outcomes]
    rows = []
    for name, values in (("first visible token", firsts), ("end of the turn", totals)):
        if values:
            median, p90 = statistics.median(values), percentile(values, 0.9)
            rows.append(
                Figure(f"time to the {name}: median / p90", f"{median:.2f} s / {p90:.2f} s")
            )
    first = outcomes[0] if outcomes else None
    if first is not None and first.first_token is not None and firsts:
        warm = statistics.median(firsts[1:] or firsts)
        rows.append(
            Figure(
                "first reply after the server started: time to first visible token",
                f"{first.first_token:.2f} s",
                f"{warm:.2f} s median of the others",
                f"{first.first_token / max(warm, 1e-6):.2f}",
            )
        )
    return rows


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python bench/default_model_eval.py")
    parser.add_argument("--limit", type=int, default=LIMIT, help="run only the first N cases")
    parser.add_argument("--model", default=MODEL, help="qwen, smollm or a .gguf path")
    parser.add_argument("--base-url", default=BASE_URL, help="use this server instead")
    parser.add_argument("--tool-rounds", type=int, default=TOOL_ROUNDS, help="1 or 2")
    parser.add_argument(
        "--no-warm", dest="warm", action="store_false", help="skip the prompt-cache warm-up"
    )
    parser.add_argument(
        "--only", choices=("plain", "tool"), default=None, help="run only this kind of case"
    )
    parser.add_argument("--verbose", action="store_true", help="print each case as it ends")
    parser.add_argument(
        "--no-overview",
        dest="overview",
        action="store_false",
        help="leave the workspace's top-level names out of the system prompt",
    )
    return parser.parse_args(argv)


def select(limit: int | None, only: str | None = None) -> list[Case]:
    """The first `limit` cases, taking plain and tool cases alike (all when None); `only`:
    "plain" or "tool" keeps that kind alone."""
    plain_cases = [c for c in CASES if not c.needs_tool]
    tool_cases = [c for c in CASES if c.needs_tool]
    if only is not None:
        chosen = plain_cases if only == "plain" else tool_cases
        return chosen[:limit]
    if limit is None:
        return list(CASES)
    mixed = [c for pair in zip(plain_cases, tool_cases, strict=False) for c in pair]
    return mixed[:limit]


def main(argv: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Start the model in a temporary home (unless --base-url), run the cases, stop it."""
    args = parse(argv)
    global MODEL
    MODEL = args.model
    with temporary_directory("nbchat-eval-") as home:
        server: LocalServer | None = None
        started = time.monotonic()
        if args.base_url is None:
            server = ensure_server(MODEL, home=home, n_ctx=N_CTX, timeout=600)
        start = time.monotonic() - started
        try:
            settings = eval_settings(home, args.base_url, args.tool_rounds, overview=args.overview)
            warm = warm_up(settings) if args.warm else None
            outcomes = list(run_cases(settings, select(args.limit, args.only), args.verbose))
        finally:
            if server is not None:
                server.stop()
    schemas = {
        schema["function"]["name"]: schema["function"]["parameters"]
        for schema in default_registry().schemas()
    }
    rows = [Figure(f"{MODEL} server start, {len(outcomes)} cases", f"{start:.1f} s")]
    if warm is not None:
        rows.append(Figure("prompt cache warm-up (system prompt and tools)", f"{warm:.1f} s"))
    rows += figures(outcomes, schemas, settings.workspace)
    return [row.as_dict() for row in rows]


if __name__ == "__main__":
    args = sys.argv[1:]
    harness.print_figures("Default model eval", main(args))

"""What a compaction keeps, on the five real traces: code facts alone against facts + the model.

Each trace (`tests/data/traces/`, real agent runs) is compacted once, whole, the way the chat
loop compacts (`CompactionEngine.compact`: the prune layer, then the summary), at a 12,000-token
threshold with the chat's tail of 4 rows, as issue 22 measured. Twice: with a summariser that
writes nonsense ("lorem ipsum": only what code keeps can count), and with the embedded model
(`--model`, the default `auto`: Qwen2.5-Coder-1.5B on a machine that can run it, else 0.5B;
llama.cpp in its own process, an 8,192-token window, temperature 0).

What the model would see after the compaction is the compacted row (its checkpoint and the facts
code keeps) and the kept tail. Reported per trace, for each of the two:

- files, instructions, errors: of the truth file's paths read or modified, the user's
  instructions and the distinct error headlines (`error_lines_strict`) that occur in the
  summarised rows, the share that still occurs in what the model sees;
- context: tokens after / before;
- probes: the questions of `probe_questions.py` answered (any expected string, case-insensitive,
  in what the model sees), the test split first (never tuned on), then dev;
- the checkpoint's echoes: the items of the model's summary left out because they copied its
  instruction or repeated an item (`nbchat.compaction.echoes`; "none kept" when the whole
  summary was), and, checked apart from that, the lines of the checkpoint kept that repeat an
  earlier line (headings and "(none)" aside): the issue's "no checkpoint that copies its
  instruction or repeats a line";
- minutes the compaction took, the requests and the prompt and completion tokens.

`--facts-only` runs no model (seconds). `--verbose` prints each unanswered probe and each
checkpoint. `--write` puts the table in `docs/results.md` (section `compaction-probes/<model>`).
Figures only, never an assertion.

    python bench/compaction_probes.py [--model auto] [--facts-only] [--traces NAME ...]
                                      [--verbose] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
import openai
import results
from compaction_strategies import FakeSummariser
from harness import Figure, temporary_directory
from probe_questions import PROBES, Probe

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.facts import strip_facts
from nbchat.compaction.result import CompactionResult, Summariser
from nbchat.compaction.writer import ECHOED, NOT_KEPT
from nbchat.config import DEFAULT_N_CTX, Settings
from nbchat.embedded.modelfiles import choose_model, read_machine
from nbchat.embedded.server import ensure_server
from nbchat.history import History, Row, to_row

TRACES = harness.REPO / "tests" / "data" / "traces"
THRESHOLD = 12_000
TAIL = 4  # Settings.tail_messages: the chat loop's tail
N_CTX = DEFAULT_N_CTX
NONSENSE = "lorem ipsum"
SECTION = "compaction-probes"
SPLITS = ("test", "dev")


@dataclass(frozen=True)
class Trace:
    name: str
    rows: tuple[Row, ...]
    truth: dict[str, Any]


@dataclass
class Outcome:
    """One trace compacted by one summariser: what the model would see, and what it cost."""

    trace: Trace
    result: CompactionResult
    timed: bool = True  # a model wrote the summary: its minutes and tokens count
    seen: str = field(init=False)
    summarised: str = field(init=False)

    def __post_init__(self) -> None:
        self.seen = text_of(self.result.rows)
        self.summarised = text_of(self.trace.rows[: self.result.edit.rows_summarised])

    def kept(self, items: Sequence[str]) -> tuple[int, int]:
        """(kept, due): of `items` that occur in the summarised rows, how many the model sees."""
        due = [item for item in dict.fromkeys(items) if item and item in self.summarised]
        return sum(1 for item in due if item in self.seen), len(due)

    def answered(self, probe: Probe) -> bool:
        seen = self.seen.lower()
        return any(answer.lower() in seen for answer in probe.answers)

    def checkpoint(self) -> str:
        """The model-written part of the compacted row (the facts left out)."""
        row = self.result.edit.summary_row
        return strip_facts(row.content) if row is not None else ""

    def echoes_left_out(self) -> int | None:
        """Items of the model's summary left out as echoes or repeats; None: none of it kept."""
        if NOT_KEPT in self.result.warnings:
            return None
        said = [w for w in self.result.warnings if ECHOED in w]
        return sum(int(w.split(" ", 1)[0]) for w in said)

    def repeated_lines(self) -> int:
        """Lines of the kept checkpoint equal to an earlier one (headings and "(none)" aside)."""
        seen: set[str] = set()
        repeats = 0
        for line in self.checkpoint().splitlines():
            said = line.strip().lstrip("-*0123456789. ").strip().lower()
            if not said or said == "(none)" or line.lstrip().startswith("#"):
                continue
            repeats += said in seen
            seen.add(said)
        return repeats


def echo_cell(outcomes: Sequence[Outcome]) -> str:
    """Echoes left out / repeated lines kept, over `outcomes` ("-" when no model wrote them)."""
    if not all(o.timed for o in outcomes):
        return "-"
    left_out = [o.echoes_left_out() for o in outcomes]
    rejected = sum(n is None for n in left_out)
    dropped = str(sum(n for n in left_out if n is not None))
    shown = dropped + (f" (none kept: {rejected})" if rejected else "")
    return f"{shown} / {sum(o.repeated_lines() for o in outcomes)}"


def text_of(rows: Sequence[Row]) -> str:
    return "\n".join(f"{row.content}\n{row.tool_args}" for row in rows)


def load_traces(names: Sequence[str] | None = None) -> list[Trace]:
    found = sorted(path.name.removesuffix(".truth.json") for path in TRACES.glob("*.truth.json"))
    chosen = [name for name in found if not names or name in names]
    return [
        Trace(
            name,
            tuple(to_row(row) for row in json.loads((TRACES / f"{name}.json").read_text())),
            json.loads((TRACES / f"{name}.truth.json").read_text()),
        )
        for name in chosen
    ]


def compact(trace: Trace, engine: CompactionEngine) -> CompactionResult:
    """The trace compacted as the chat loop would (`duration` is the engine's own timing)."""
    return engine.compact(History(list(trace.rows)))


def facts_engine() -> CompactionEngine:
    summariser: Summariser = FakeSummariser(NONSENSE)
    return CompactionEngine(THRESHOLD, TAIL, summariser=summariser)


def model_engine(base_url: str, model: str, home: Path) -> CompactionEngine:
    client = openai.OpenAI(base_url=base_url, api_key="local", max_retries=0, timeout=3600)
    settings = Settings(home=home, workspace=home, local_model=model, local_n_ctx=N_CTX)
    return CompactionEngine(THRESHOLD, TAIL, None, model, "", client, settings=settings)


def share(kept: int, due: int) -> str:
    return f"{kept}/{due}" if due else "-"


def probe_cells(outcome: Outcome, probes: Sequence[Probe]) -> list[str]:
    cells = []
    for split in SPLITS:
        chosen = [p for p in probes if p.split == split and p.trace == outcome.trace.name]
        cells.append(share(sum(outcome.answered(p) for p in chosen), len(chosen)))
    return cells


def row_cells(outcome: Outcome, probes: Sequence[Probe]) -> list[str]:
    truth, result = outcome.trace.truth, outcome.result
    files = outcome.kept([*truth["files_read"], *truth["files_modified"]])
    usage = result.usage
    return [
        share(*files),
        share(*outcome.kept(truth["user_instructions"])),
        share(*outcome.kept(truth["error_lines_strict"])),
        f"{result.tokens_after / max(1, result.tokens_before):.3f}",
        *probe_cells(outcome, probes),
        echo_cell([outcome]),
        f"{result.duration / 60:.1f}" if outcome.timed else "-",
        f"{usage.requests} / {usage.prompt_tokens:,} / {usage.completion_tokens:,}"
        if outcome.timed
        else "-",
    ]


HEADER = (
    "trace, summariser",
    "rows summarised",
    "files",
    "instructions",
    "errors",
    "context after/before",
    "probes test",
    "probes dev",
    "echoes left out / repeated lines kept",
    "minutes",
    "requests / prompt / completion tokens",
)


def totals(outcomes: Sequence[Outcome], probes: Sequence[Probe]) -> list[str]:
    """The column totals over the traces (files, instructions, errors, probes)."""

    def summed(pairs: Sequence[tuple[int, int]]) -> str:
        return share(sum(k for k, _ in pairs), sum(d for _, d in pairs))

    cells = [
        summed(
            [
                o.kept([*o.trace.truth["files_read"], *o.trace.truth["files_modified"]])
                for o in outcomes
            ]
        ),
        summed([o.kept(o.trace.truth["user_instructions"]) for o in outcomes]),
        summed([o.kept(o.trace.truth["error_lines_strict"]) for o in outcomes]),
        "",
    ]
    for split in SPLITS:
        chosen = [
            (o, p) for o in outcomes for p in probes if p.split == split and p.trace == o.trace.name
        ]
        cells.append(share(sum(o.answered(p) for o, p in chosen), len(chosen)))
    cells.append(echo_cell(outcomes))
    minutes = max((o.result.duration for o in outcomes), default=0.0) / 60
    timed = all(o.timed for o in outcomes)
    cells += [f"{minutes:.1f} (slowest)" if timed else "-", ""]
    return cells


def table(runs: dict[str, list[Outcome]], probes: Sequence[Probe]) -> str:
    body = []
    for label, outcomes in runs.items():
        for outcome in outcomes:
            rows = outcome.result.edit.rows_summarised
            body.append(
                [
                    f"{outcome.trace.name}, {label}",
                    f"{rows} of {len(outcome.trace.rows)}",
                    *row_cells(outcome, probes),
                ]
            )
    for label, outcomes in runs.items():
        body.append([f"all {len(outcomes)}, {label}", "", *totals(outcomes, probes)])
    return results.markdown_table(HEADER, body)


def report_unanswered(label: str, outcomes: Sequence[Outcome], probes: Sequence[Probe]) -> None:
    for outcome in outcomes:
        print(f"\n## {outcome.trace.name}, {label}", file=sys.stderr)
        tail = text_of(outcome.result.rows[1:]).lower()
        for probe in probes:
            if probe.trace != outcome.trace.name:
                continue
            mark = "ok " if outcome.answered(probe) else "NO "
            where = " (in the tail)" if any(a.lower() in tail for a in probe.answers) else ""
            missing = (
                ""
                if any(a.lower() in outcome.summarised.lower() for a in probe.answers)
                else " (NOT IN THE SUMMARISED ROWS)"
            )
            print(
                f"  {mark}[{probe.split} {probe.kind}] {probe.question}{where}{missing}",
                file=sys.stderr,
            )
        print("  checkpoint:\n    " + outcome.checkpoint().replace("\n", "\n    "), file=sys.stderr)
        for warning in outcome.result.warnings:
            print(f"  warning: {warning}", file=sys.stderr)


def resolve_model(model: str) -> str:
    return choose_model(read_machine()).key if model == "auto" else model


def evaluate(args: argparse.Namespace) -> dict[str, list[Outcome]]:
    traces = load_traces(args.traces)
    runs = {"facts alone": [Outcome(t, compact(t, facts_engine()), False) for t in traces]}
    if args.facts_only:
        return runs
    model = resolve_model(args.model)
    with temporary_directory("nbchat-probes-") as home:
        server = ensure_server(model, home=home, n_ctx=N_CTX, timeout=600)
        try:
            outcomes = []
            for trace in traces:
                engine = model_engine(server.base_url, model, home)
                outcomes.append(Outcome(trace, compact(trace, engine)))
                print(f"{trace.name}: {outcomes[-1].result.duration:.0f} s", file=sys.stderr)
            runs[f"facts + {model}"] = outcomes
        finally:
            server.stop()
    return runs


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="auto")
    parser.add_argument("--facts-only", action="store_true")
    parser.add_argument("--traces", nargs="*", default=None)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--write", action="store_true")
    return parser.parse_args(argv)


def run(argv: Sequence[str] = ()) -> str:
    args = parse(argv)
    load_start = os.getloadavg()
    runs = evaluate(args)
    text = table(runs, PROBES)
    if args.verbose:
        for label, outcomes in runs.items():
            report_unanswered(label, outcomes, PROBES)
    if args.write:
        model = "facts" if args.facts_only else resolve_model(args.model)
        results.write_section(
            f"{SECTION}/{model}",
            text,
            command=" ".join(["python bench/compaction_probes.py", *argv]),
            load_start=load_start,
            load_end=os.getloadavg(),
        )
    return text


def main(argv: Sequence[str] = ("--facts-only",)) -> list[dict[str, Any]]:
    """For `run_all.py`: the facts-alone run (no model), one figure per trace."""
    args = parse(argv)
    runs = evaluate(args)
    figures = []
    for label, outcomes in runs.items():
        for outcome in outcomes:
            cells = row_cells(outcome, PROBES)
            figures.append(
                Figure(
                    f"{outcome.trace.name}, {label}: files, instructions, errors, probes "
                    "test / dev",
                    f"{cells[0]}, {cells[1]}, {cells[2]}; probes {cells[4]} / {cells[5]}",
                    ratio=cells[3],
                )
            )
    return [figure.as_dict() for figure in figures]


if __name__ == "__main__":
    begun = time.monotonic()
    print(f"Compaction probes\n{harness.machine_line()}\n\n{run(sys.argv[1:])}")
    print(f"\n(took {time.monotonic() - begun:.0f} s; load {os.getloadavg()})")

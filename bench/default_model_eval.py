"""How well does the embedded default model answer? The eval's two splits, test first.

Drives the real `Conversation` (public API only) against the embedded llama.cpp server
(`nbchat.embedded.server.ensure_server`, started in a temporary home and stopped afterwards) at
temperature 0, with the tools under policy "ask" in a scratch workspace holding real files
(`eval_cases.FILES`). A real IPython shell in this process has run `eval_cases.NOTEBOOK_CELLS`
(In [1] … In [5], the last one raising a KeyError), and the chat gets the notebook tools over it
beside the built-in ones, as the widget does in a kernel. The eval plays the user asked to approve
(`approve_code`): it approves the model's code in that shell (`run_code`), as a user would to get
"the mean price in sales", and refuses the shell, writing, editing and the notebook's cells, so
nothing outside the scratch runs. The code runs on this process's main thread as a kernel's would
(the turn streams in a thread beside it, as in the widget), with the scratch workspace as its
working folder, and each case starts from the notebook as its cells left it (`kept_notebook`).

The cases (`eval_cases` says what a case is) come in two splits: `eval_split_test` (written
before any tuning and never tuned on) and `eval_split_dev`. `--split both` (the default) runs
the test split first and reports the two side by side, test first. What is scored, and how, is
`eval_scoring`'s docstring: plain answered without a tool (goal >= 95%), correct first tool call
(>= 85%), key facts over plain and tool cases (>= 90%), ungrounded claims, fake call JSON and
empty answers after a tool round (goal 0 each), replies that hit `max_tokens`, failed turns, and
the time to the first visible token and to the end of the turn.

    python bench/default_model_eval.py [--split test|dev|both] [--start N] [--limit N]
                                       [--only plain|tool|follow-up|restricted|code]
                                       [--model qwen|smollm|NAME|PATH] [--verbose] [--write]
                                       [--keep FILE]
    python bench/default_model_eval.py --base-url http://127.0.0.1:PORT/v1 --model NAME
    python bench/default_model_eval.py --rescore FILE [--write]

`--start N` leaves out each split's first N cases (to run cases added to the dev split since the
last full run); `--limit N` then runs the first N cases (plain and tool cases in turn).
`--verbose` prints a line a case as it ends, marking what it missed (`WRONG-CALL`,
`TOOL-ON-PLAIN`, `NO-FACT`, `UNGROUNDED`, ...): for the dev split, the one tuned on. `--write`
puts the side-by-side table in `docs/results.md`, section `default-model-eval/<model>`
(`results`), so each model's table sits beside the others'. `main()` returns the rows as dicts for
`bench/run_all.py` (each figure once per split, named `test: …`, `dev: …`); figures only, no
assertion.

`--keep FILE` writes each case's outcome to FILE as one JSON line as the case ends (after a line
naming the run), so a run stopped early, or a scorer that fails, loses no turn: `--rescore FILE`
scores what was kept again, with no model, and writes its table as a run would (`--verbose`: with
each case's line and the ungrounded claims too). SIGTERM stops the run as Ctrl-C does: the model
server it started (which outlives its starter by design) is stopped and the scratch removed.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import copy
import importlib
import io
import json
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import harness
import results
from eval_cases import FILES, NOTEBOOK_CELLS, Case
from eval_scoring import ENTRIES, Outcome, split_figures
from harness import Figure, temporary_directory

from nbchat.config import Settings
from nbchat.conversation.events import (
    Failed,
    Notice,
    ReasoningDelta,
    RowSaved,
    TextDelta,
    TextWithdrawn,
    ToolStarted,
)
from nbchat.conversation.loop import Conversation
from nbchat.embedded.server import LocalServer, ensure_server
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolContext, ToolRegistry, default_registry
from nbchat.tools.acting import acting_tools
from nbchat.tools.asking import forbids_looking, takes_acting_out
from nbchat.tools.cells import NoDocument, kernel_state
from nbchat.tools.kernelrun import KernelQueue, KernelRunner
from nbchat.tools.notebook import IPYTHON_NAMES, Shell, notebook_tools

MODEL = "qwen"
N_CTX = 8_192
# Long enough for every expected answer; a runaway reply stops here instead of at 1,024.
MAX_TOKENS = 256
# The tool runs and the model answers from its result on the second round (the last round is
# sent with tool_choice "none", so it answers in words).
TOOL_ROUNDS = 2
OVERVIEW = True  # the workspace's top-level names in the system prompt (`workspace_overview`)
# Each split's module, in the order `--split both` runs and reports them: test first.
SPLITS = {"test": "eval_split_test", "dev": "eval_split_dev"}
SECTION = "default-model-eval"
# The notebook's own module: the shell's namespace, kept out of `__main__`.
NOTEBOOK_MODULE = "nbchat_eval_notebook"
LAST_ERROR = ("last_type", "last_value", "last_traceback", "last_exc")
# The first line of a file `--keep` writes, so `--rescore` knows one.
KEPT = "nbchat default-model eval outcomes"


def model_label(model: str) -> str:
    """The model's name in a results section: the name as given (`qwen`, `smollm`), or a
    .gguf file's stem, lower case, other characters as "-"."""
    name = Path(model).stem if model.endswith(".gguf") or "/" in model else model
    allowed = "abcdefghijklmnopqrstuvwxyz0123456789._-"
    return "".join(c if c in allowed else "-" for c in name.lower())


def make_workspace(root: Path) -> Path:
    workspace = root / "workspace"
    for name, text in FILES.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return workspace


def eval_settings(home: Path, base_url: str | None, *, overview: bool = OVERVIEW) -> Settings:
    """The user's defaults except: temperature 0, a short reply budget."""
    return Settings(
        base_url=base_url,
        home=home,
        workspace=make_workspace(home),
        temperature=0.0,
        tool_policy="ask",  # the eval's user answers (`approve_code`)
        max_tokens=MAX_TOKENS,
        max_tool_turns=TOOL_ROUNDS,
        local_model=MODEL,
        local_n_ctx=N_CTX,
        json_tool_fallback=True,
        tools_on_request=True,  # as on the embedded model, also when --base-url names a server
        workspace_overview=overview,
    )


@contextlib.contextmanager
def live_notebook(home: Path) -> Iterator[Shell]:
    """A real IPython shell that has run `NOTEBOOK_CELLS` with history (In [1] … In [5]),
    its last cell's KeyError left in `sys.last_value` as a kernel leaves it. Everything it
    changes in this process (IPython's singleton, IPYTHONDIR, sys.last_*) is put back."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    if InteractiveShell.initialized():
        raise SystemExit("The eval makes its own IPython shell: run it as a script, not in one.")
    saved_dir = os.environ.get("IPYTHONDIR")
    saved_last = {name: getattr(sys, name) for name in LAST_ERROR if hasattr(sys, name)}
    os.environ["IPYTHONDIR"] = str(home / "ipython")
    config = Config()
    config.HistoryManager.hist_file = ":memory:"  # In [n] is kept; nothing is written to disk
    try:
        shell = InteractiveShell.instance(
            config=config, user_module=types.ModuleType(NOTEBOOK_MODULE)
        )
        try:
            run_cells(shell)
            yield shell
        finally:
            # What IPython does at exit (end the history session), done while its home exists.
            shell.atexit_operations()  # type: ignore[no-untyped-call]
            atexit.unregister(shell.atexit_operations)
            InteractiveShell.clear_instance()
    finally:
        restore_process(saved_dir, saved_last)


def restore_process(saved_dir: str | None, saved_last: dict[str, Any]) -> None:
    """Put back what `live_notebook` changed outside IPython's own singleton."""
    sys.modules.pop(NOTEBOOK_MODULE, None)
    for name in LAST_ERROR:
        if name in saved_last:
            setattr(sys, name, saved_last[name])
        elif hasattr(sys, name):
            delattr(sys, name)
    if saved_dir is None:
        os.environ.pop("IPYTHONDIR", None)
    else:
        os.environ["IPYTHONDIR"] = saved_dir


def run_cells(shell: Any) -> None:
    """Run the cells as a user would; stop the eval if the notebook is not as the cases
    expect (every cell but the last succeeds; `last_error` then reports the KeyError)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        ran = [shell.run_cell(cell, store_history=True) for cell in NOTEBOOK_CELLS]
    failed = [number for number, result in enumerate(ran, 1) if not result.success]
    last_error = next(t for t in notebook_tools(shell) if t.name == "last_error")
    shown = last_error.invoke({}, ToolContext(Path.cwd()))
    if failed != [len(NOTEBOOK_CELLS)] or "KeyError" not in str(shown):
        raise SystemExit(
            f"The eval's notebook did not run as its cases expect (cells that failed: {failed}; "
            f"the last one should, with a KeyError):\n{printed.getvalue()[-2000:]}"
        )


def kernel_runner(shell: Shell) -> KernelRunner:
    """What runs the model's code in `shell`: through a queue served on this process's main
    thread while a turn streams (`run_case`)."""
    state = kernel_state(shell)  # type: ignore[arg-type]  # a real IPython shell
    return KernelRunner(shell, state, KernelQueue(state))


def eval_registry(shell: Shell, runner: KernelRunner | None = None) -> ToolRegistry:
    """The built-in tools, the notebook tools over `shell` and the acting tools (no notebook
    document: the eval's shell has no page), as `ChatUI` registers them; code runs through
    `runner` (a new one when None)."""
    registry = default_registry()
    for notebook_tool in notebook_tools(shell):
        registry.register(notebook_tool)
    runner = runner if runner is not None else kernel_runner(shell)
    document = NoDocument("the eval's IPython shell has no notebook page.")
    for acting_tool in acting_tools(document, runner, journal=lambda _change: None):
        registry.register(acting_tool)
    return registry


def approve_code(request: ApprovalRequest) -> bool:
    """The eval's user, asked to approve a call: yes to the model's code in the eval's own
    shell (what a user asking for a DataFrame's mean approves), no to the shell, writing,
    editing and the notebook's cells (they reach past the scratch)."""
    return request.name == "run_code"


def run_case(
    settings: Settings,
    store: Store,
    case: Case,
    *,
    tools: ToolRegistry,
    runner: KernelRunner | None = None,
) -> Outcome:
    """One case's turns. With `runner`, they stream in a thread while this (the main) thread
    runs the model's code, as a kernel does beside the widget's streaming."""
    conversation = Conversation(settings, store, None, None, tools, approver=approve_code)
    conversation.new_session("eval")
    outcome = Outcome(case)

    def turns() -> None:
        for earlier in case.before:
            for event in conversation.send(earlier):
                if isinstance(event, RowSaved) and event.row.role == "tool":
                    outcome.tool_results.append(event.row.content)
        started = time.monotonic()
        for event in conversation.send(case.prompt):
            now = time.monotonic() - started
            visible = isinstance(event, TextDelta | ReasoningDelta | ToolStarted)
            if visible and outcome.first_token is None:
                outcome.first_token = now
            record(outcome, event)
        outcome.total = time.monotonic() - started
        outcome.shown = system_prompt(conversation)

    try:
        if runner is None:
            turns()
        else:
            beside_the_kernel(turns, runner.queue)
    finally:
        conversation.close()
    return outcome


def beside_the_kernel(work: Callable[[], None], queue: KernelQueue) -> None:
    """Run `work` in a thread while this thread serves `queue` until it ends; its exception,
    if any, is raised here."""
    failed: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failed.append(exc)
        finally:
            done.set()
            queue.wake()

    thread = threading.Thread(target=run, name="nbchat-eval-turn", daemon=True)
    thread.start()
    queue.serve(done.is_set)  # in slices, so a SIGTERM is handled (`stopping.wait_slice`)
    thread.join()
    if failed:
        raise failed[0]


@contextlib.contextmanager
def kept_notebook(shell: Shell, folder: Path) -> Iterator[None]:
    """Run what is inside in `folder` (a notebook's kernel works in the notebook's folder), then
    put the notebook back as it was: the user's variables (copies of the values its cells left,
    so code that changed `sales` in place changes nothing later), no new names, and the last
    error (`last_error` reports the cells' KeyError in every case)."""
    namespace = shell.user_ns
    saved = {name: _copied(name, value) for name, value in namespace.items()}
    saved_last = {name: getattr(sys, name) for name in LAST_ERROR if hasattr(sys, name)}
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)
        for name in set(namespace) - set(saved):
            del namespace[name]
        namespace.update({name: _copied(name, value) for name, value in saved.items()})
        for name in LAST_ERROR:
            if name in saved_last:
                setattr(sys, name, saved_last[name])


def _copied(name: str, value: Any) -> Any:
    """A deep copy of the user's variable `name`; the value itself for IPython's own names
    (`In`, `_`, `_i3`: its history holds them) and values that have no copy (a module)."""
    if name.startswith("_") or name in IPYTHON_NAMES:
        return value
    if isinstance(value, types.ModuleType) or callable(value):
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - IPython's own objects
        return value


def record(outcome: Outcome, event: object) -> None:
    if isinstance(event, ToolStarted):
        outcome.calls.append((event.call.name, event.call.arguments))
    elif isinstance(event, RowSaved) and event.row.role == "tool":
        outcome.tool_results.append(event.row.content)
        outcome.after_tool = ""  # what the user is told after this result comes next
    elif isinstance(event, RowSaved) and event.row.role in ("assistant", "assistant_full"):
        if event.row.content.strip():
            outcome.texts.append(event.row.content)
            outcome.answer = event.row.content
            if outcome.after_tool is not None:
                outcome.after_tool = event.row.content
    elif isinstance(event, TextWithdrawn):
        outcome.withdrawn += 1
    elif isinstance(event, Notice) and "max_tokens" in event.text:
        outcome.hit_max_tokens = True
    elif isinstance(event, Failed):
        outcome.error = event.message


def system_prompt(conversation: Conversation) -> str:
    """The system prompt of the turn's last request: the workspace overview the model saw."""
    request = conversation.last_request()
    messages = request.body.get("messages", []) if request is not None else []
    return "\n".join(
        str(message.get("content") or "") for message in messages if message["role"] == "system"
    )


def warm_up(settings: Settings, tools: ToolRegistry) -> float:
    """What a ChatUI does while the user types its first message: have the server read the
    system prompt and tool schemas into its prompt cache. Seconds taken."""
    store = Store(settings.database_path)
    started = time.monotonic()
    try:
        conversation = Conversation(settings, store, None, None, tools)
        conversation.new_session("warm-up")
        conversation.warm_up()
        conversation.close()
    finally:
        store.close()
    return time.monotonic() - started


def describe(number: int, outcome: Outcome, workspace: Path, registry: ToolRegistry) -> str:
    """One line a case: its prompt, first call, times, what it missed, its answer's start."""
    call = f" call={outcome.calls[0][0]}({outcome.calls[0][1]})" if outcome.calls else ""
    first = f"{outcome.first_token:.1f}" if outcome.first_token is not None else "-"
    answer = outcome.answer.strip().replace("\n", " ")[:100]
    claims = outcome.claims(ENTRIES, workspace)
    case = outcome.case
    marks = [
        "WRONG-CALL" * (case.needs_tool and not outcome.is_right_call(registry, workspace)),
        "TOOL-ON-PLAIN" * (not case.needs_tool and not outcome.is_direct()),
        "NO-FACT" * (not outcome.has_fact()),
        "FAKE" * outcome.fake_json,
        "MAX" * outcome.hit_max_tokens,
        f"ASKED-AGAIN×{outcome.withdrawn}" * bool(outcome.withdrawn),
        "EMPTY-AFTER-TOOL" * outcome.empty_after_tool,
        f"UNGROUNDED {', '.join(claims)}" * bool(claims),
        f"ERROR {outcome.error}" * bool(outcome.error),
    ]
    return (
        f"[{number}] {outcome.case.prompt[:50]!r}{call} first={first}s total={outcome.total:.1f}s"
        f" {' '.join(mark for mark in marks if mark)} -> {answer!r}"
    )


@dataclass
class Report:
    """One run: the server's start, the warm-up, and each split's figures in run order."""

    model: str
    cases: int
    start: float
    warm: float | None = None
    splits: dict[str, list[Figure]] = field(default_factory=dict)
    # The command line that ran the model (for a rescore, the kept run's, when it was kept).
    command: str | None = None

    def run_rows(self) -> list[Figure]:
        start = f"{self.model} server start, {self.cases} cases"
        rows = [Figure(start, f"{self.start:.1f} s")]
        if self.warm is not None:
            warm = "prompt cache warm-up (system prompt and tools)"
            rows.append(Figure(warm, f"{self.warm:.1f} s"))
        return rows

    def rows(self) -> list[dict[str, Any]]:
        """Flat rows for `run_all`: the run's, then each split's figures named `split: …`."""
        rows = self.run_rows()
        for split, figures in self.splits.items():
            rows += [
                Figure(f"{split}: {f.figure}", f.value, f.baseline, f.ratio, f.target, f.met)
                for f in figures
            ]
        return [row.as_dict() for row in rows]

    def markdown(self) -> str:
        """The splits side by side (in run order, so test first), then the run's own lines."""
        names = list(self.splits)
        header = ["figure", *names, "goal", f"met ({' / '.join(names)})"]
        lines = []
        for index, first in enumerate(next(iter(self.splits.values()), [])):
            figures = [self.splits[name][index] for name in names]
            met = [f.met for f in figures]
            marks = " / ".join("-" if m is None else ("yes" if m else "**no**") for m in met)
            shown = "" if all(m is None for m in met) else marks
            lines.append([first.figure, *(f.value for f in figures), first.target, shown])
        run = "; ".join(f"{row.figure}: {row.value}" for row in self.run_rows())
        return f"{results.markdown_table(header, lines)}\n\n{run}."


def run_split(
    settings: Settings,
    cases: Sequence[Case],
    *,
    tools: ToolRegistry,
    verbose: bool,
    runner: KernelRunner | None = None,
    keep: Callable[[Case, Outcome], None] | None = None,
) -> list[Outcome]:
    """Each case in turn; with `runner`, the model's code runs in its shell, which each case
    finds as the cells left it; `keep` is handed each case's outcome as it ends."""
    store = Store(settings.database_path)
    outcomes = []
    try:
        for number, case in enumerate(cases, 1):
            if runner is None:
                outcome = run_case(settings, store, case, tools=tools)
            else:
                with kept_notebook(runner.shell, settings.workspace):
                    outcome = run_case(settings, store, case, tools=tools, runner=runner)
            if keep is not None:
                keep(case, outcome)
            if verbose:
                line = describe(number, outcome, settings.workspace, tools)
                print(line, file=sys.stderr, flush=True)
            outcomes.append(outcome)
    finally:
        store.close()
    return outcomes


def load_split(name: str) -> tuple[Case, ...]:
    cases: tuple[Case, ...] = importlib.import_module(SPLITS[name]).CASES
    return cases


# What `--only` keeps: a kind of case.
KINDS: dict[str, Callable[[Case], bool]] = {
    "plain": lambda case: not case.needs_tool,
    "tool": lambda case: case.needs_tool,
    "follow-up": lambda case: bool(case.before),  # sent after earlier messages of its session
    # The messages whose first step may use only some tools, or none.
    "restricted": lambda case: forbids_looking(case.prompt) or takes_acting_out(case.prompt),
    "code": lambda case: "run_code" in case.calls,  # may be answered by running code
}


def select(cases: Sequence[Case], limit: int | None, only: str | None = None) -> list[Case]:
    """The first `limit` cases, taking plain and tool cases in turn (all when None); `only`:
    the cases of that kind alone (`KINDS`)."""
    if only is not None:
        return [case for case in cases if KINDS[only](case)][:limit]
    plain_cases = [c for c in cases if not c.needs_tool]
    tool_cases = [c for c in cases if c.needs_tool]
    if limit is None:
        return list(cases)
    mixed = [c for pair in zip(plain_cases, tool_cases, strict=False) for c in pair]
    rest = plain_cases[len(tool_cases) :] + tool_cases[len(plain_cases) :]
    return (mixed + rest)[:limit]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python bench/default_model_eval.py")
    parser.add_argument("--split", choices=("test", "dev", "both"), default="both")
    parser.add_argument(
        "--start", type=int, default=0, help="leave out the first N cases of each split"
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N cases of each split")
    parser.add_argument(
        "--model", default=MODEL, help="qwen, smollm, another name nbchat knows, or a .gguf path"
    )
    parser.add_argument("--base-url", default=None, help="use this server instead")
    parser.add_argument(
        "--no-warm", dest="warm", action="store_false", help="skip the prompt-cache warm-up"
    )
    parser.add_argument(
        "--only",
        choices=tuple(KINDS),
        default=None,
        help="run only this kind of case",
    )
    parser.add_argument("--verbose", action="store_true", help="print each case as it ends")
    parser.add_argument(
        "--no-overview",
        dest="overview",
        action="store_false",
        help="leave the workspace's top-level names out of the system prompt",
    )
    parser.add_argument(
        "--write", action="store_true", help=f"write the table into {results.RESULTS.name}"
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="write each case's outcome to FILE as it ends"
    )
    parser.add_argument(
        "--rescore", type=Path, default=None, help="score the outcomes --keep wrote, no model"
    )
    return parser.parse_args(argv)


def evaluate(args: argparse.Namespace, command: str) -> Report:
    """Start the model in a temporary home (unless --base-url), run the splits, stop it.
    `command`: the command line, kept with the outcomes (`--keep`)."""
    global MODEL
    MODEL = args.model
    names = ["test", "dev"] if args.split == "both" else [args.split]
    chosen = {name: select(load_split(name)[args.start :], args.limit, args.only) for name in names}
    with temporary_directory("nbchat-eval-") as home, live_notebook(home) as shell:
        runner = kernel_runner(shell)
        tools = eval_registry(shell, runner)
        server: LocalServer | None = None
        started = time.monotonic()
        if args.base_url is None:
            server = ensure_server(MODEL, home=home, n_ctx=N_CTX, timeout=600)
        count = sum(map(len, chosen.values()))
        report = Report(model_label(MODEL), count, time.monotonic() - started, command=command)
        try:
            settings = eval_settings(home, args.base_url, overview=args.overview)
            report.warm = warm_up(settings, tools) if args.warm else None
            with Keeper.opened(args.keep, report, settings.workspace) as keeper:
                for index, (name, cases) in enumerate(chosen.items()):
                    outcomes = run_split(
                        settings,
                        cases,
                        tools=tools,
                        verbose=args.verbose,
                        runner=runner,
                        keep=keeper.for_split(name),
                    )
                    report.splits[name] = score_split(
                        name,
                        outcomes,
                        registry=tools,
                        workspace=settings.workspace,
                        first_split=index == 0,
                        verbose=args.verbose,
                    )
        finally:
            if server is not None:
                server.stop()
    return report


class Keeper:
    """Where `--keep` writes: a first line naming the run (`KEPT`, the model, the workspace the
    paths were relative to, the start and warm-up times), then one line a case as it ends
    (its split, its place in the split, its prompt, what it did), each flushed at once."""

    def __init__(self, file: TextIO | None) -> None:
        self.file = file

    @classmethod
    @contextlib.contextmanager
    def opened(cls, path: Path | None, report: Report, workspace: Path) -> Iterator[Keeper]:
        if path is None:
            yield cls(None)
            return
        with path.open("w", encoding="utf-8") as file:
            keeper = cls(file)
            keeper.write(
                {
                    "kept": KEPT,
                    "model": report.model,
                    "workspace": str(workspace),
                    "start": report.start,
                    "warm": report.warm,
                    "command": report.command,
                }
            )
            yield keeper

    def for_split(self, split: str) -> Callable[[Case, Outcome], None] | None:
        if self.file is None:
            return None
        places = {id(case): index for index, case in enumerate(load_split(split))}

        def keep(case: Case, outcome: Outcome) -> None:
            where = {"split": split, "case": places[id(case)], "prompt": case.prompt}
            self.write({**where, "outcome": outcome.as_record()})

        return keep

    def write(self, line: dict[str, Any]) -> None:
        assert self.file is not None
        self.file.write(json.dumps(line) + "\n")
        self.file.flush()


def rescore(path: Path, *, verbose: bool = False) -> Report:
    """The report of the outcomes `--keep` wrote to `path`, scored now as a run scores them
    (`verbose`: with each case's line and each split's ungrounded claims, as a run prints them).
    A last line cut short (a run killed as it wrote) is left out; a case whose prompt is no
    longer the one its split holds at that place stops the scoring (the split changed)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SystemExit(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            if number < len(lines):
                message = f"{path}, line {number}, is not JSON: not a file --keep wrote."
                raise SystemExit(message) from exc
    if not records or not isinstance(records[0], dict) or records[0].get("kept") != KEPT:
        raise SystemExit(f"{path} is not a file --keep wrote (its first line names {KEPT!r}).")
    head, kept = records[0], records[1:]
    by_split: dict[str, list[Outcome]] = {}
    for line in kept:
        case = load_split(line["split"])[line["case"]]
        if case.prompt != line["prompt"]:
            raise SystemExit(
                f"The {line['split']} split's case {line['case']} is no longer {line['prompt']!r}:"
                " the split changed since the run, so its outcomes cannot be scored against it."
            )
        by_split.setdefault(line["split"], []).append(Outcome.from_record(case, line["outcome"]))
    report = Report(
        head["model"], len(kept), head["start"], head["warm"], command=head.get("command")
    )
    with temporary_directory("nbchat-eval-") as home, live_notebook(home) as shell:
        registry = eval_registry(shell)
        workspace = Path(head["workspace"])
        for index, (name, outcomes) in enumerate(by_split.items()):
            if verbose:  # a run prints these as each case ends (`run_split`)
                for number, outcome in enumerate(outcomes, 1):
                    line = describe(number, outcome, workspace, registry)
                    print(line, file=sys.stderr, flush=True)
            report.splits[name] = score_split(
                name,
                outcomes,
                registry=registry,
                workspace=workspace,
                first_split=index == 0,
                verbose=verbose,
            )
    return report


@contextlib.contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """While inside, SIGTERM ends the run as Ctrl-C does, so the `finally` blocks stop the model
    server (it outlives its starter by design: a killed eval left one running until its idle
    timeout) and remove the scratch. Only the main thread can set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"stopped by signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def score_split(
    name: str,
    outcomes: Sequence[Outcome],
    *,
    registry: ToolRegistry,
    workspace: Path,
    first_split: bool,
    verbose: bool,
) -> list[Figure]:
    """One split's figures, as a run and a rescore both give them; `verbose`: its ungrounded
    claims listed first."""
    if verbose:
        list_ungrounded(name, outcomes, workspace)
    return split_figures(outcomes, registry=registry, workspace=workspace, first_split=first_split)


def list_ungrounded(split: str, outcomes: Sequence[Outcome], workspace: Path) -> None:
    found = [(o, o.claims(ENTRIES, workspace)) for o in outcomes]
    lines = [f"  {o.case.prompt[:60]!r}: {', '.join(claims)}" for o, claims in found if claims]
    print(f"{split}: ungrounded claims", *(lines or ["  none"]), sep="\n", file=sys.stderr)


def run(argv: Sequence[str] = ()) -> Report:
    args = parse(argv)
    load_start = os.getloadavg()
    command = " ".join(["python bench/default_model_eval.py", *argv])
    if args.rescore is not None:
        report = rescore(args.rescore, verbose=args.verbose)
        # The section says how the outcomes were made, where the kept file says.
        ran = report.command or "a run that did not record its command"
        command = f"{ran}; its kept outcomes scored by {command}"
    else:
        with stopped_by_sigterm():
            report = evaluate(args, command)
    if args.write:
        results.write_section(
            f"{SECTION}/{report.model}",
            report.markdown(),
            command=command,
            load_start=load_start,
            load_end=os.getloadavg(),
        )
    return report


def main(argv: Sequence[str] = ()) -> list[dict[str, Any]]:
    return run(argv).rows()


if __name__ == "__main__":
    try:
        report = run(sys.argv[1:])
    except KeyboardInterrupt as stop:
        # One sentence, not a traceback: the finally blocks already stopped the server.
        why = stop.args[0] if stop.args else "interrupted"
        raise SystemExit(
            f"The eval {why}: its model server is stopped and its scratch removed;"
            " with --keep FILE, the cases that ended are in FILE (--rescore FILE scores them)."
        ) from None
    print(f"Default model eval\n{harness.machine_line()}\n\n{report.markdown()}")

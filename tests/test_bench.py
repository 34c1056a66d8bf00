"""Each benchmark's `main()` runs (on tiny sizes) and returns table rows; no timing is asserted.

The benchmarks live in `bench/` and import their siblings by name, as they do when run as
scripts, so each test puts `bench/` on `sys.path` first. The two that need the embedded model
are marked `model` and `slow` and use SmolLM2 with the smallest inputs.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakeserver import FakeServer, Reply

from nbchat.tools import ApprovalRequest, ToolContext, default_registry

BENCH = Path(__file__).resolve().parent.parent / "bench"
COLUMNS = {"figure", "value", "baseline", "ratio", "target", "met"}


def load(name: str, monkeypatch: pytest.MonkeyPatch, **constants: Any) -> ModuleType:
    """Import `bench/<name>.py` with some of its module constants replaced for this test."""
    monkeypatch.syspath_prepend(str(BENCH))
    module = importlib.import_module(name)
    for constant, value in constants.items():
        assert hasattr(module, constant), f"{name} has no {constant}"
        monkeypatch.setattr(module, constant, value)
    return module


def assert_table_rows(rows: list[dict[str, Any]]) -> None:
    assert rows
    for row in rows:
        assert set(row) == COLUMNS
        assert row["figure"] and row["value"]


def test_replay_savings_reproduces_the_trace_without_compaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = load("replay_savings", monkeypatch)
    rows = module.main()
    assert_table_rows(rows)
    first_requests = rows[0]
    assert first_requests["met"] is True  # the replay's definition: the trace's sizes exactly
    assert "20,264 / 22,565" in first_requests["value"]


def test_streaming_overhead_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load(
        "streaming_overhead",
        monkeypatch,
        REPLY_TOKENS=300,
        REPEATS=1,
        TRAFFIC_CHARS=1_500,
        TRAFFIC_CHUNKS=300,
    )
    assert_table_rows(module.main())


def test_transcript_bytes_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("transcript_bytes", monkeypatch, TURNS=4, MEASURED=(1, 2, 4))
    rows = module.main()
    assert_table_rows(rows)
    assert rows[3]["figure"] == "transcript bytes: turn 4 against turn 1"


def test_render_math_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load(
        "render_math",
        monkeypatch,
        UNCLOSED_REPEATS=200,
        CLOSED_SPANS=200,
        REPLY_CHARS=2_000,
        REPEATS=1,
    )
    rows = module.main()
    assert_table_rows(rows)
    assert len(rows) == 6


def test_store_bench_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("store_bench", monkeypatch, SIZES=(40, 80), PER_ROW_SIZE=20, REPEATS=1)
    rows = module.main()
    assert_table_rows(rows)
    assert any("replace_with_compacted" in row["figure"] for row in rows)


def test_run_all_prints_one_table_with_the_machine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    load("compaction_overhead", monkeypatch, SIZES=(1_000,), REPEATS=1)
    run_all = load("run_all", monkeypatch)
    run_all.main(["--only", "compaction_overhead"])
    out = capsys.readouterr().out
    assert "| figure | value | baseline | ratio | target | met? |" in out
    assert "cores" in out and "Python" in out
    assert "should_compact after one append, 1,000 rows" in out


def test_run_all_refuses_an_unknown_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    run_all = load("run_all", monkeypatch)
    with pytest.raises(SystemExit, match="unknown benchmark"):
        run_all.main(["--skip", "no_such_bench"])


@pytest.mark.slow
@pytest.mark.model
def test_tokenize_ratio_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("tokenize_ratio", monkeypatch, MODELS=("smollm",), MAX_CHARS_PER_KIND=3_000)
    rows = module.main()
    assert_table_rows(rows)
    assert [row["figure"].rsplit(": ", 1)[1] for row in rows] == [*module.KINDS, "overall"]


@pytest.mark.slow
@pytest.mark.model
def test_compaction_model_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load(
        "compaction_model", monkeypatch, MODEL="smollm", SIZES=(2_000,), N_CTX=8_192, tools=tuple
    )
    rows = module.main()
    assert_table_rows(rows)
    assert len(rows) == 4  # the server start, the history in both forms, the forms' ratio


@pytest.mark.slow
@pytest.mark.model
def test_checkpoint_stability_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    load("compaction_model", monkeypatch, MODEL="smollm", N_CTX=4_096)
    module = load("checkpoint_stability", monkeypatch, MODEL="smollm", N_CTX=4_096, RUNS=2)
    rows = module.main()
    assert_table_rows(rows)
    assert len(rows) == 2


@pytest.mark.slow
@pytest.mark.model
def test_compaction_stall_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("compaction_stall", monkeypatch, MODEL="smollm", MAX_TOKENS=32, TURNS=2)
    rows = module.main(turns=2, pauses=(0.0,))
    assert_table_rows(rows)
    assert len(rows) == 4  # the scenario, each mode's turns, then the slowest turns compared


def test_compaction_probes_scores_code_facts_alone_on_the_real_traces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = load("compaction_probes", monkeypatch)
    rows = module.main(["--facts-only", "--traces", "pytest-dev__pytest-7236"])
    assert_table_rows(rows)
    assert len(rows) == 1
    assert rows[0]["figure"].startswith("pytest-dev__pytest-7236, facts alone")
    # Every path, instruction and error headline of the summarised rows is still seen.
    assert rows[0]["value"].startswith("9/9, 1/1, 9/9; probes ")


def scripted(body: dict[str, Any]) -> Reply:
    """A right call for the dev split's first tool prompt, an answer for everything else."""
    last = body["messages"][-1]
    if last["role"] == "user" and "notes.txt" in last["content"]:
        return Reply(tool_calls=[("c1", "read_file", '{"path": "notes.txt"}')])
    return Reply(text="2 + 2 is 4. The meeting is on Thursday.")


def test_default_model_eval_scores_a_scripted_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # The eval's machinery on the fake server: a right call for the tool prompt, an answer for
    # the plain one. On the model it runs as `python bench/default_model_eval.py`.
    module = load("default_model_eval", monkeypatch)
    with FakeServer(responder=scripted) as fake:
        rows = module.main(["--split", "dev", "--limit", "2", "--base-url", fake.url + "/v1"])
    assert_table_rows(rows)
    values = {row["figure"]: row["value"] for row in rows}
    assert values["dev: plain answered without a tool"] == "1 / 1 (100%)"
    assert values["dev: correct first tool call"] == "1 / 1 (100%)"
    assert values["dev: key facts"] == "2 / 2 (100%)"
    assert values["dev: fake call JSON"] == "0"
    assert values["dev: ungrounded claims"] == "0"
    assert values["dev: empty answers after a tool round"] == "0 of 1"


def test_default_model_eval_keeps_each_case_and_scores_them_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run that fails after its turns (a scorer that raised lost a whole split's run once) or
    # is stopped early keeps every case that ended: `--rescore` gives the same table, no model.
    module = load("default_model_eval", monkeypatch)
    kept = tmp_path / "kept.jsonl"
    with FakeServer(responder=scripted) as fake:
        argv = ["--split", "dev", "--limit", "2", "--base-url", fake.url + "/v1", "--keep"]
        report = module.run([*argv, str(kept)])
    lines = kept.read_text().splitlines()
    assert len(lines) == 3  # the run's line, then one a case
    again = module.run(["--rescore", str(kept), "--verbose"])
    assert again.splits == report.splits
    # What made the outcomes travels with them: a rescored section names the run's command.
    ran = " ".join(["python bench/default_model_eval.py", *argv, str(kept)])
    assert again.command == report.command == ran
    assert again.markdown() == report.markdown()
    listed = capsys.readouterr().err
    assert "[1] " in listed and "dev: ungrounded claims" in listed
    # A last line cut short as the run was killed is left out; the case before it counts.
    kept.write_text("\n".join([*lines[:2], lines[2][:40]]) + "\n")
    assert "1 / 0" in module.rescore(kept).markdown()  # cases (plain / tool): the plain one
    changed = json.loads(lines[1])
    changed["prompt"] = "a prompt the split no longer holds there"
    kept.write_text("\n".join([lines[0], json.dumps(changed)]) + "\n")
    with pytest.raises(SystemExit, match="the split changed since the run"):
        module.rescore(kept)
    kept.write_text("not a kept file\n")
    with pytest.raises(SystemExit, match="is not a file --keep wrote"):
        module.rescore(kept)
    with pytest.raises(SystemExit, match="Cannot read"):
        module.rescore(tmp_path / "missing.jsonl")


def test_default_model_eval_stopped_by_sigterm_cleans_up(tmp_path: Path) -> None:
    # Killed mid-turn (here while the server stalls), the eval unwinds as on Ctrl-C: the
    # `finally` blocks that stop the model server it started also remove its scratch home.
    # The OS may hand the signal to the turn's thread; the main thread must still wake for it.
    import signal
    import subprocess

    kept = tmp_path / "kept.jsonl"
    with FakeServer(default_reply=Reply(fault="stall")) as fake:
        command = [sys.executable, str(BENCH / "default_model_eval.py"), "--split", "dev"]
        command += ["--no-warm", "--base-url", fake.url + "/v1", "--keep", str(kept)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert fake.wait_for_chat_requests(1, timeout=120), "the eval never asked"
            process.send_signal(signal.SIGTERM)
            _out, err = process.communicate(timeout=60)
        finally:
            process.kill()
            process.wait()
    home = Path(json.loads(kept.read_text().splitlines()[0])["workspace"]).parent
    assert process.returncode != 0
    assert b"stopped by signal" in err
    assert not home.exists()


def test_default_model_eval_reports_the_test_split_first_beside_dev(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Both splits are the dev cases here (the test split's cases are only ever run, never read
    # by a test): what is checked is the order and the side-by-side table.
    module = load("default_model_eval", monkeypatch)
    monkeypatch.setitem(module.SPLITS, "test", "eval_split_dev")
    with FakeServer(responder=scripted) as fake:
        report = module.run(["--limit", "2", "--base-url", fake.url + "/v1", "--model", "tiny"])
    assert list(report.splits) == ["test", "dev"]
    figures = [row["figure"] for row in report.rows()]
    assert figures.index("test: correct first tool call") < figures.index(
        "dev: cases (plain / tool)"
    )
    table = report.markdown()
    assert table.startswith("| figure | test | dev | goal | met (test / dev) |")
    assert "| correct first tool call | 1 / 1 (100%) | 1 / 1 (100%) | >= 85% | yes / yes |" in table
    assert "| first reply after the server started |" in table
    assert "tiny server start, 4 cases" in table


def test_default_model_eval_asks_in_a_live_notebook(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The notebook the cases ask about: a real IPython shell that ran the cells with history,
    # its last cell's KeyError where `last_error` finds it; put back as it was afterwards.
    module = load("default_model_eval", monkeypatch)
    from IPython.core.interactiveshell import InteractiveShell

    with module.live_notebook(tmp_path) as shell:
        tools = module.eval_registry(shell)
        ctx = ToolContext(Path.cwd())

        def call(tool: str, **arguments: object) -> str:
            return str(tools.get(tool).invoke(arguments, ctx))  # type: ignore[union-attr]

        assert "sales['revenue']" in call("read_cell", number=3)
        assert "KeyError: 'discount'" in call("last_error")
        assert "threshold" in call("list_notebook_variables")
        assert "north" in call("describe_variable", name="sales")
        assert "read_file" in tools
    assert not InteractiveShell.initialized()
    assert "KeyError" not in repr(getattr(sys, "last_value", None))
    assert module.NOTEBOOK_MODULE not in sys.modules


def test_default_model_eval_runs_approved_code_in_its_notebook_and_puts_it_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The eval's user approves the model's code (as a user asking for a DataFrame's mean does)
    # and nothing else; the code runs in the eval's shell, in the scratch workspace, while the
    # turn streams in a thread; the next case finds the notebook as its cells left it.
    module = load("default_model_eval", monkeypatch)
    tool = importlib.import_module("eval_cases").tool
    code = (
        "import os\nsales['units'] = 0\nmarker = 1\n"
        "print('units', int(sales['units'].sum()), os.path.exists('notes.txt'))\n"
        "1 / 0"
    )

    def responder(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "user":
            return Reply(tool_calls=[("c1", "run_code", json.dumps({"code": code}))])
        return Reply(text="The units add up to 0.")

    here = os.getcwd()
    with module.live_notebook(tmp_path) as shell, FakeServer(responder=responder) as fake:
        units = list(shell.user_ns["sales"]["units"])
        runner = module.kernel_runner(shell)
        tools = module.eval_registry(shell, runner)
        settings = module.eval_settings(tmp_path, fake.url + "/v1")
        case = tool("what do the units add up to", {"run_code": {"code": "units"}}, "0")
        [outcome] = module.run_split(settings, [case], tools=tools, verbose=False, runner=runner)
        assert "units 0 True" in outcome.tool_results[0]
        assert "ZeroDivisionError" in outcome.tool_results[0]
        assert list(shell.user_ns["sales"]["units"]) == units
        assert "marker" not in shell.user_ns
        assert "KeyError" in repr(sys.last_value)
    assert os.getcwd() == here
    assert module.approve_code(ApprovalRequest("run_code", {"code": "1"}))
    assert not module.approve_code(ApprovalRequest("run_shell", {"command": "ls"}))
    assert not module.approve_code(ApprovalRequest("edit_file", {"path": "a"}))


def test_default_model_eval_counts_a_path_only_when_it_names_the_workspace_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Scored by substring, read_file("/path/to/src/app.py") and a search of
    # "/path/to/workspace/folder" counted as right calls though they name nothing here.
    module = load("default_model_eval", monkeypatch)
    tool = importlib.import_module("eval_cases").tool
    registry = default_registry()
    read = tool("Show me src/app.py.", {"read_file": {"path": "src/app.py"}})
    listing = tool("What files are here?", {"list_files": {}})
    search = tool("Search for TODO.", {"search_files": {"pattern": "TODO"}})

    def right(case: Any, name: str, arguments: dict[str, Any]) -> bool:
        outcome = module.Outcome(case, calls=[(name, json.dumps(arguments))])
        return bool(outcome.is_right_call(registry, tmp_path))

    for good in ("src/app.py", "./src/app.py", "src/../src/app.py", str(tmp_path / "src/app.py")):
        assert right(read, "read_file", {"path": good}), good
    for bad in ("/path/to/src/app.py", "app.py", "../src/app.py", "/src/app.py", "src/app.pyc"):
        assert not right(read, "read_file", {"path": bad}), bad
    assert right(listing, "list_files", {})
    assert right(listing, "list_files", {"path": "."})
    assert right(listing, "list_files", {"path": str(tmp_path)})
    assert not right(listing, "list_files", {"path": "/path/to/workspace/folder"})
    assert right(search, "search_files", {"pattern": "TODO"})
    assert not right(search, "search_files", {"pattern": "TODO", "path": "/path/to/workspace"})
    assert not right(search, "search_files", {"pattern": "FIXME"})


@pytest.mark.slow
@pytest.mark.model
def test_default_model_eval_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("default_model_eval", monkeypatch)
    rows = module.main(["--model", "smollm", "--split", "dev", "--limit", "2"])
    assert_table_rows(rows)
    values = {row["figure"]: row["value"] for row in rows}
    assert values["dev: cases (plain / tool)"] == "1 / 1"
    assert values["dev: turns that failed"] == "0"


def test_notebook_tools_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("notebook_tools", monkeypatch, VARIABLES=300, FRAME_BYTES=1 << 16, REPEATS=1)
    assert_table_rows(module.main())


def test_tool_costs_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("tool_costs", monkeypatch, FILES=3, LINES=50, REPEATS=1)
    assert_table_rows(module.main())


def test_lease_bench_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("lease_bench", monkeypatch, ROWS=20, REPEATS=1)
    assert_table_rows(module.main())


@pytest.mark.slow
@pytest.mark.model
def test_schema_tokens_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("schema_tokens", monkeypatch, MODELS=("smollm",))
    assert_table_rows(module.main())


@pytest.mark.slow
@pytest.mark.model
def test_model_memory_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("model_memory", monkeypatch, MODELS=("smollm",), N_CTX=4_096)
    rows = module.main()
    assert_table_rows(rows)
    # Peak, at the end, the mapped file (beside the file's size), the server's own.
    assert [row["figure"].split(": ", 1)[1] for row in rows] == [
        "peak resident memory",
        "resident at the end",
        "of which mapped from files (the model, libraries)",
        "of which the server's own memory",
    ]
    assert all(row["value"].endswith(" MiB") for row in rows)
    peak, end, mapped, own = (float(row["value"][:-4].replace(",", "")) for row in rows)
    assert peak >= end >= own > 0 and mapped > 0


@pytest.mark.slow
@pytest.mark.model
def test_first_reply_runs_on_smollm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("first_reply", monkeypatch, MODEL="smollm", N_CTX=4_096, REPEATS=1)
    rows = module.main()
    assert_table_rows(rows)
    # The server start, each message sent at once on a first run and after a restart (against
    # its warm time), then connect() on a restarted server.
    assert len(rows) == 2 + 2 * len(module.MESSAGES)
    targeted = [row["figure"] for row in rows if row["target"]]
    assert len(targeted) == len(module.MESSAGES) and all(
        "after a restart with saved slots" in f for f in targeted
    )

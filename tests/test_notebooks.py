"""The demo notebooks: executed by nbval on the embedded models, and kept tidy.

Each notebook runs in its own `pytest --nbval` subprocess (the notebooks are not in `testpaths`,
and `--nbval` is not a default option, so this is the only way they run), with a fresh
NBCHAT_HOME (a new session database and its own model server, stopped afterwards) and a scratch
workspace. Cells whose output is deterministic are compared with the outputs stored in the
notebook, after `notebooks/sanitize.cfg` has replaced session ids and timestamps on both sides;
cells that show model text are tagged `nbval-ignore-output`. nbval itself never compares widget
views (their model ids are random); a widget's stored output is its text `repr`.

A strict output must be what the code decides, never what the model chose (how many tool calls it
made, what it wrote), so the notebooks pass on every model the README names as a default: the
embedded SmolLM2 (fast, the tests' model) and the embedded Qwen (the chat's default, run as a
user runs it: no NBCHAT_LOCAL_MODEL). The test command runs all four on both (on an idle
two-core machine the four take about two minutes on Qwen).

The fast tests check what a notebook file holds: outputs only where they are compared, no saved
widget state, and cells that call nbchat rather than hold logic.

The acting demo (`05-acting.ipynb`) runs once, on the test server, whose replies are scripted
here (`ACTING_SCRIPT`; the notebook says so before its first message): the model's calls are
written, what the tools do in the kernel is real.

To refresh the stored outputs after changing a notebook or the demo data, run
`.venv/bin/python tests/test_notebooks.py notebooks/NAME.ipynb`: it executes the notebook in the
same environment (on SmolLM2) and keeps only the outputs that are compared.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fakeserver import FakeServer, Reply

from nbchat.embedded.server import find_running

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# The acting demo runs on the test server, whose replies are scripted (`ACTING_SCRIPT`, and the
# notebook says so): what the model calls is written here; what the tools do is real.
ACTING = NOTEBOOK_DIR / "05-acting.ipynb"
MODEL_NOTEBOOKS = [path for path in NOTEBOOKS if path != ACTING]
SANITIZE = NOTEBOOK_DIR / "sanitize.cfg"
IGNORE_TAG = "nbval-ignore-output"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# What the notebooks run with in the tests. Replies and summaries are never compared, so they are
# kept short; the tool policy is deny unless a notebook says otherwise, so nothing the model picks
# runs.
TEST_SETTINGS = {
    "NBCHAT_AUTOSTART": "1",
    "NBCHAT_MAX_TOKENS": "128",
    "NBCHAT_SUMMARY_MAX_TOKENS": "256",
    "NBCHAT_TEMPERATURE": "0",
    "NBCHAT_TOOL_POLICY": "deny",
}
# The models the README names as defaults; None is Qwen as a user gets it (no NBCHAT_LOCAL_MODEL).
MODELS = {"smollm": "smollm", "qwen": None}
LOOP = "import time\nwhile True:\n    time.sleep(0.1)"
ACTING_SCRIPT = (
    Reply(tool_calls=[("r1", "run_code", json.dumps({"code": "sum(prices)"}))]),
    Reply(text="They add up to 12.75."),
    Reply(tool_calls=[("r2", "run_code", json.dumps({"code": "sum(costs) / len(costs)"}))]),
    Reply(text="There is no `costs` variable."),
    Reply(tool_calls=[("r3", "run_code", json.dumps({"code": LOOP, "timeout": 2}))]),
    Reply(text="It did not finish within 2 s."),
    Reply(tool_calls=[("i1", "insert_cell", json.dumps({"source": "total = sum(prices)"}))]),
    Reply(text="Here it is, to copy."),
)
CELL_TIMEOUT = 1200
RUN_TIMEOUT = 2400
# Statements and expressions that are logic, not calls: a cell holding one belongs in nbchat.
LOGIC = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.For,
    ast.While,
    ast.If,
    ast.IfExp,
    ast.With,
    ast.Try,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def notebook_environment(home: Path, scratch: Path, model: str = "smollm") -> dict[str, str]:
    """The environment a notebook's kernel gets: the test settings on `model` (a key of MODELS),
    a fresh home and workspace, and Jupyter's and IPython's own files in a scratch directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBCHAT_")}
    env.update(TEST_SETTINGS)
    local_model = MODELS[model]
    if local_model is not None:
        env["NBCHAT_LOCAL_MODEL"] = local_model
    workspace = scratch / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    env.update(
        NBCHAT_HOME=str(home),
        NBCHAT_WORKSPACE=str(workspace),
        JUPYTER_RUNTIME_DIR=str(scratch / "jupyter-runtime"),
        JUPYTER_PLATFORM_DIRS="1",
        IPYTHONDIR=str(scratch / "ipython"),
    )
    return env


def run_nbval(notebook: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval",
        "--nbval-current-env",
        "--nbval-sanitize-with",
        str(SANITIZE),
        "-p",
        "no:cacheprovider",
        # Each cell is an item under pytest-timeout; the project's 300 s is too short for a cell
        # that makes several requests to Qwen on two busy cores. The whole run has its own limit.
        "--timeout",
        str(CELL_TIMEOUT),
        "--rootdir",
        str(REPO),
        "-q",
        str(notebook),
    ]
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )


@pytest.fixture
def notebook_home(home: Path) -> Iterator[Path]:
    """The NBCHAT_HOME a notebook runs with; its model server is stopped afterwards."""
    yield home
    server = find_running(home=home)
    if server is not None:
        server.stop()


def code_cells(notebook: Path) -> list[Any]:
    return [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]


def is_ignored(cell: Any) -> bool:
    return IGNORE_TAG in cell.metadata.get("tags", [])


def acting_environment(home: Path, scratch: Path, url: str) -> dict[str, str]:
    """The acting demo's environment: the test settings, on the scripted test server at `url`."""
    env = notebook_environment(home, scratch)
    env.pop("NBCHAT_LOCAL_MODEL", None)
    env.update(NBCHAT_BASE_URL=f"{url}/v1", NBCHAT_MODEL="scripted-model")
    return env


@contextmanager
def scripted_server() -> Iterator[FakeServer]:
    """The test server with the acting demo's replies queued, in order."""
    with FakeServer() as server:
        server.enqueue(*ACTING_SCRIPT)
        yield server


def test_the_notebooks_run_on_every_default_model_and_qwen_without_a_local_model_setting(
    tmp_path: Path,
) -> None:
    cases = [case.id for case in nbval_cases()]
    assert cases == [f"{path.stem}-{model}" for model in MODELS for path in MODEL_NOTEBOOKS]
    assert notebook_environment(tmp_path, tmp_path)["NBCHAT_LOCAL_MODEL"] == "smollm"
    assert "NBCHAT_LOCAL_MODEL" not in notebook_environment(tmp_path, tmp_path, "qwen")


def test_the_five_demo_notebooks_are_there() -> None:
    assert [path.name for path in NOTEBOOKS] == [
        "01-quickstart.ipynb",
        "02-inspect-compaction.ipynb",
        "03-tools.ipynb",
        "04-sessions.ipynb",
        "05-acting.ipynb",
    ]


def test_the_acting_notebook_says_its_model_calls_are_scripted_before_any_call() -> None:
    cells = nbformat.read(ACTING, as_version=4).cells
    first_send = next(i for i, cell in enumerate(cells) if "ui.send(" in cell.source)
    told = [cell.source for cell in cells[:first_send] if cell.cell_type == "markdown"]
    assert any("scripted by the test server" in text for text in told)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_a_notebook_stores_outputs_only_where_they_are_compared(notebook: Path) -> None:
    document = nbformat.read(notebook, as_version=4)
    assert "widgets" not in document.metadata  # widget state from a local run is not kept
    for cell in code_cells(notebook):
        assert "execution" not in cell.metadata  # timings from a local run are not kept
        if cell.outputs:  # nbval refuses outputs of a cell that was never run
            assert cell.execution_count is not None, cell.source
        if is_ignored(cell):
            assert cell.outputs == [], cell.source
        for output in cell.outputs:
            assert output.output_type in ("stream", "execute_result", "display_data")
            assert WIDGET_VIEW not in output.get("data", {})
            assert output.get("name") != "stderr", cell.source


@pytest.mark.parametrize(
    "shown", ["print(rows[0].content)", "store.list_compactions(session_id)", "plots.usage_chart("]
)
def test_the_compaction_notebook_says_the_demo_figures_before_it_are_scripted(shown: str) -> None:
    # The demo session is written by nbchat.notebook.demo, not recorded from a model: its summary,
    # its usage and its (absent) timings must not read as measurements.
    cells = nbformat.read(NOTEBOOK_DIR / "02-inspect-compaction.ipynb", as_version=4).cells
    (index,) = [i for i, cell in enumerate(cells) if cell.source.startswith(shown)]
    assert cells[index - 1].cell_type == "markdown"
    assert "scripted" in cells[index - 1].source


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_cells_hold_calls_into_nbchat_not_logic(notebook: Path) -> None:
    for cell in code_cells(notebook):
        tree = ast.parse(cell.source)
        logic = [type(node).__name__ for node in ast.walk(tree) if isinstance(node, LOGIC)]
        assert logic == [], cell.source
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Import), cell.source
            if isinstance(node, ast.ImportFrom):
                assert node.module in ("nbchat", "nbchat.notebook"), cell.source


def nbval_cases() -> list[Any]:
    """(notebook, model) for every notebook on every default model."""
    return [
        pytest.param(notebook, model, id=f"{notebook.stem}-{model}")
        for model in MODELS
        for notebook in MODEL_NOTEBOOKS
    ]


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.model
@pytest.mark.timeout(RUN_TIMEOUT + 60)
@pytest.mark.parametrize(("notebook", "model"), nbval_cases())
def test_the_notebook_runs_under_nbval_and_its_strict_outputs_match(
    notebook: Path, model: str, notebook_home: Path, tmp_path: Path
) -> None:
    result = run_nbval(notebook, notebook_environment(notebook_home, tmp_path, model))
    output = f"{result.stdout}\n{result.stderr}"
    print(output)  # pytest shows it when the test fails: every cell's diff and traceback
    assert result.returncode == 0, output[-4000:]
    assert "failed" not in result.stdout.splitlines()[-1]


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.timeout(RUN_TIMEOUT + 60)
def test_the_acting_notebook_runs_under_nbval_on_the_scripted_server(
    home: Path, tmp_path: Path
) -> None:
    with scripted_server() as server:
        result = run_nbval(ACTING, acting_environment(home, tmp_path, server.url))
        left = server.queued
    output = f"{result.stdout}\n{result.stderr}"
    print(output)
    assert result.returncode == 0, output[-4000:]
    assert "failed" not in result.stdout.splitlines()[-1]
    assert left == 0  # every scripted call was made, in order


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.model
@pytest.mark.timeout(2 * RUN_TIMEOUT + 60)
def test_the_demos_run_in_order_in_one_home_as_a_user_runs_them(
    notebook_home: Path, tmp_path: Path
) -> None:
    # The quickstart leaves its session in the database; the sessions demo shows its own only.
    env = notebook_environment(notebook_home, tmp_path)
    for notebook in (NOTEBOOK_DIR / "01-quickstart.ipynb", NOTEBOOK_DIR / "04-sessions.ipynb"):
        result = run_nbval(notebook, env)
        output = f"{result.stdout}\n{result.stderr}"
        assert result.returncode == 0, output[-4000:]


@pytest.mark.notebook
@pytest.mark.timeout(300)
def test_the_quickstart_without_a_model_server_stops_and_says_what_to_do(
    home: Path, tmp_path: Path
) -> None:
    # nbconvert --execute without NBCHAT_AUTOSTART=1 once ran every cell and exited 0.
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    env = notebook_environment(home, tmp_path)
    del env["NBCHAT_AUTOSTART"]
    document = nbformat.read(NOTEBOOK_DIR / "01-quickstart.ipynb", as_version=4)
    client = NotebookClient(document, timeout=240, resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError) as stopped:
        client.execute(env=env)
    assert "AssertionError" in str(stopped.value)
    code = [cell for cell in document.cells if cell.cell_type == "code"]
    said = [o.text for o in code[1].outputs if o.get("name") == "stderr"]
    assert len(said) == 1 and "set NBCHAT_AUTOSTART=1" in said[0]
    assert code[2].outputs == []  # it stopped at the first wait: nothing was sent


def refresh_outputs(notebook: Path) -> None:
    """Execute `notebook` as the tests do and store only the outputs nbval compares."""
    from nbclient import NotebookClient

    class AsDisplayed(NotebookClient):
        """nbval compares each cell's outputs as they were displayed and never applies a
        display update (the chat's transcript gets one after each turn): store them so."""

        def _update_display_id(self, display_id: str, msg: dict[str, Any]) -> None:
            if msg["header"]["msg_type"] != "update_display_data":
                super()._update_display_id(display_id, msg)

    with (
        tempfile.TemporaryDirectory(prefix="nbchat-refresh-") as scratch,
        scripted_server() as fake,
    ):
        home = Path(scratch) / "home"
        document = nbformat.read(notebook, as_version=4)
        client = AsDisplayed(
            document,
            timeout=900,
            record_timing=False,
            resources={"metadata": {"path": str(notebook.parent)}},
        )
        env = notebook_environment(home, Path(scratch))
        if notebook == ACTING:
            env = acting_environment(home, Path(scratch), fake.url)
        try:
            client.execute(env=env)
        finally:
            server = find_running(home=home)
            if server is not None:
                server.stop()
    document.metadata.pop("widgets", None)
    for cell in document.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        cell.outputs = [] if is_ignored(cell) else [_comparable(o) for o in cell.outputs]
    nbformat.write(document, notebook)


def _comparable(output: Any) -> Any:
    if "data" in output:
        output.data.pop(WIDGET_VIEW, None)
    return output


if __name__ == "__main__":
    for name in sys.argv[1:]:
        refresh_outputs(Path(name).resolve())
        print(f"refreshed {name}")

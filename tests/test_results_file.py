"""`docs/results.md`, the generated results file (`bench/results.py`): sections written with the
date, machine and load, every other byte kept; and every figure the docs quote from it (the
README and every guide under docs/) read exactly as the file has it.

The writer only ever runs on a file under `tmp_path` here; a fixture checks that the real
`docs/results.md` is as it was after each test that writes.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fakeserver import FakeServer, Reply

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
REAL_RESULTS = REPO / "docs" / "results.md"


def state_of(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("results")


@pytest.fixture
def scratch(results: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The results file's default path moved to `tmp_path`; the real file checked untouched."""
    before = state_of(REAL_RESULTS)
    path = tmp_path / "docs" / "results.md"
    monkeypatch.setattr(results, "RESULTS", path)
    yield path
    assert state_of(REAL_RESULTS) == before


def write(results: ModuleType, name: str, body: str, *, path: Path) -> None:
    results.write_section(
        name,
        body,
        command="python bench/x.py --write",
        load_start=(0.5, 0.25, 0.125),
        load_end=(1.5, 1.0, 0.75),
        path=path,
    )


TABLE = "| figure | value |\n|---|---|\n| correct first tool call | 12 / 14 (86%) |"


def test_a_section_is_written_with_the_date_machine_and_load(
    results: ModuleType, scratch: Path
) -> None:
    from harness import machine_line

    write(results, "demo", TABLE, path=scratch)
    text = scratch.read_text()
    assert text.startswith("# Measured results\n")
    section = results.read_sections(text)["demo"]
    assert " UTC on " in section
    assert machine_line() in section
    assert "load (1/5/15 min) 0.50 0.25 0.12 at the start, 1.50 1.00 0.75 at the end." in section
    assert "`python bench/x.py --write`" in section
    assert TABLE in section
    assert text.endswith("<!-- /results:demo -->\n")
    assert not list(scratch.parent.glob("*.new"))  # written whole, then moved into place


def test_writing_a_section_keeps_every_other_byte(results: ModuleType, scratch: Path) -> None:
    hand_made = (
        "# Measured results\n\nSome words a person wrote.\n\n"
        "<!-- results:first -->\nold first\n<!-- /results:first -->\n\n"
        "Between the sections.\n\n"
        "<!-- results:second -->\nold second | with a pipe\n<!-- /results:second -->\n"
        "The end.\n"
    )
    scratch.parent.mkdir(parents=True)
    scratch.write_text(hand_made)
    write(results, "first", TABLE, path=scratch)
    text = scratch.read_text()
    start, end = text.index("<!-- results:first -->"), text.index("<!-- /results:first -->")
    assert "old first" not in text and TABLE in text[start:end]
    new_section = text[start : end + len("<!-- /results:first -->\n")]
    assert (
        text.replace(new_section, "<!-- results:first -->\nold first\n<!-- /results:first -->\n")
        == hand_made
    )
    write(results, "first", TABLE.replace("86%", "87%"), path=scratch)
    assert scratch.read_text().count("<!-- results:first -->") == 1
    assert "87%" in scratch.read_text() and "old second | with a pipe" in scratch.read_text()


def test_a_new_model_section_sits_beside_its_group(results: ModuleType, scratch: Path) -> None:
    write(results, "default-model-eval/qwen", TABLE, path=scratch)
    write(results, "replay_savings", TABLE, path=scratch)
    write(results, "default-model-eval/smollm", TABLE, path=scratch)
    assert list(results.read_sections(scratch.read_text())) == [
        "default-model-eval/qwen",
        "default-model-eval/smollm",
        "replay_savings",
    ]


@pytest.mark.parametrize("name", ["", "Qwen", "a b", "x -->", "model:1"])
def test_a_section_name_outside_its_alphabet_is_refused(
    results: ModuleType, scratch: Path, name: str
) -> None:
    with pytest.raises(ValueError, match="A results section name uses a-z, 0-9"):
        write(results, name, TABLE, path=scratch)
    assert not scratch.exists()


RESULTS_TEXT = (
    "# Measured results\n\n"
    "<!-- results:default-model-eval/qwen -->\n### default-model-eval/qwen\n\n"
    "| figure | test | dev | goal | met (test / dev) |\n|---|---|---|---|---|\n"
    "| correct first tool call | 12 / 14 (86%) | 40 / 50 (80%) | >= 85% | yes / **no** |\n"
    "| turns that failed | 1: a \\| b | 0 |  |  |\n"
    "<!-- /results:default-model-eval/qwen -->\n"
    "<!-- results:default-model-eval/qwen-1.5b -->\n"
    "| figure | test |\n|---|---|\n| correct first tool call | 13 / 14 (93%) |\n"
    "<!-- /results:default-model-eval/qwen-1.5b -->\n"
)


def test_a_figure_is_named_by_section_column_and_row(results: ModuleType) -> None:
    sections = results.read_sections(RESULTS_TEXT)
    value = results.figure_value
    assert value(sections, "default-model-eval/qwen/test/correct-first-tool-call") == (
        "12 / 14 (86%)"
    )
    assert value(sections, "default-model-eval/qwen/dev/correct-first-tool-call") == (
        "40 / 50 (80%)"
    )
    assert value(sections, "default-model-eval/qwen-1.5b/test/correct-first-tool-call") == (
        "13 / 14 (93%)"
    )
    assert value(sections, "default-model-eval/qwen/test/turns-that-failed") == "1: a | b"
    assert value(sections, "default-model-eval/qwen/test/no-such-row") is None
    assert value(sections, "default-model-eval/other/test/correct-first-tool-call") is None


def test_a_quoted_figure_that_drifted_is_found(results: ModuleType) -> None:
    key = "default-model-eval/qwen/test/correct-first-tool-call"
    right = f"First calls: <!-- fig:{key} -->12 / 14 (86%) on the test split.\n"
    assert results.quote_problems(right, RESULTS_TEXT) == []
    drifted = f"| first calls | <!-- fig:{key} -->13 / 14 (93%) |\n"
    assert results.quote_problems(drifted, RESULTS_TEXT) == [
        f"{key}: quoted as '13 / 14 (93%) |', the results file has '12 / 14 (86%)'"
    ]
    unknown = "<!-- fig:default-model-eval/qwen/test/speed -->fast\n"
    assert results.quote_problems(unknown, RESULTS_TEXT) == [
        "default-model-eval/qwen/test/speed: no such figure in the results file"
    ]
    assert results.quote_problems(right, "") == [f"{key}: no such figure in the results file"]
    assert results.quote_problems("No quotes at all.", "") == []


def quoting_documents() -> list[Path]:
    """The README and every hand-written Markdown file under docs/, at any depth."""
    guides = sorted(path for path in (REPO / "docs").rglob("*.md") if path != REAL_RESULTS)
    return [REPO / "README.md", *guides]


def markdown_files(root: Path) -> Iterator[Path]:
    """Every Markdown file of the checkout (hidden folders and test output aside)."""
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        folders[:] = [name for name in folders if name not in ("test-artifacts", "node_modules")]
        yield from (Path(folder) / name for name in files if name.endswith(".md"))


def test_every_figure_the_docs_quote_equals_the_results_file(results: ModuleType) -> None:
    results_text = REAL_RESULTS.read_text() if REAL_RESULTS.exists() else ""
    problems = [
        f"{document.relative_to(REPO)}: {problem}"
        for document in quoting_documents()
        for problem in results.quote_problems(document.read_text(), results_text)
    ]
    assert problems == []


def test_every_markdown_file_that_quotes_a_figure_is_checked(results: ModuleType) -> None:
    # bench/README.md shows the marker with a made-up figure, as an example of the syntax.
    example = BENCH / "README.md"
    quoting = [
        path
        for path in markdown_files(REPO)
        if results.FIG in path.read_text(encoding="utf-8") and path not in (REAL_RESULTS, example)
    ]
    assert REPO / "README.md" in quoting  # the walk sees the quotes the README holds
    assert sorted(set(quoting) - set(quoting_documents())) == []


def test_run_all_writes_each_benchmark_in_its_section(
    results: ModuleType, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overhead = importlib.import_module("compaction_overhead")
    monkeypatch.setattr(overhead, "SIZES", (1_000,))
    monkeypatch.setattr(overhead, "REPEATS", 1)
    run_all = importlib.import_module("run_all")
    run_all.main(["--only", "compaction_overhead", "--write"])
    sections = results.read_sections(scratch.read_text())
    assert list(sections) == ["compaction_overhead"]
    assert (
        "`python bench/run_all.py --only compaction_overhead --write`"
        in sections["compaction_overhead"]
    )
    row = "value/should-compact-after-one-append-1-000-rows"
    assert results.figure_value(sections, f"compaction_overhead/{row}").endswith(" µs")


def test_the_eval_writes_its_table_in_its_model_section(results: ModuleType, scratch: Path) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "user" and "notes.txt" in last["content"]:
            return Reply(tool_calls=[("c1", "read_file", '{"path": "notes.txt"}')])
        return Reply(text="2 + 2 is 4. The meeting is on Thursday.")

    evaluation = importlib.import_module("default_model_eval")
    with FakeServer(responder=respond) as fake:
        url = fake.url + "/v1"
        evaluation.main(["--split", "dev", "--limit", "2", "--base-url", url, "--model", "tiny"])
        assert not scratch.exists()  # only with --write
        argv = ["--split", "dev", "--limit", "2", "--base-url", url, "--model", "tiny", "--write"]
        evaluation.main(argv)
    sections = results.read_sections(scratch.read_text())
    assert list(sections) == ["default-model-eval/tiny"]
    key = "default-model-eval/tiny/dev/correct-first-tool-call"
    assert results.figure_value(sections, key) == "1 / 1 (100%)"

"""No eval prompt in the product: the default path may not be tuned by quoting the eval's words.

Every message of every case of both splits (`bench/eval_split_test.py`, `bench/eval_split_dev.py`:
the prompt and the earlier messages of its session) of 20 characters or more is looked for in
every file under `nbchat/`, both sides lower-cased, whitespace folded to one space, and the
message's trailing `.`, `?` or `!` dropped. The test split's messages are read into this check
and nothing else; a failure names a test-split case by its number, not by its words.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MIN_LENGTH = 20
SPLITS = ("eval_split_test", "eval_split_dev")


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def messages(cases: Iterable[object]) -> list[tuple[int, str]]:
    """(case number from 1, normalised message) for each message long enough to look for."""
    found = []
    for number, case in enumerate(cases, 1):
        for message in (*getattr(case, "before", ()), getattr(case, "prompt", "")):
            text = normalise(message).rstrip(".?!")
            if len(text) >= MIN_LENGTH:
                found.append((number, text))
    return found


def quoted(found: Sequence[tuple[int, str]], root: Path) -> list[tuple[int, str, Path]]:
    """(case number, message, file) for each message that a file under `root` holds."""
    hits = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        text = normalise(path.read_text(errors="replace"))
        hits += [(number, message, path) for number, message in found if message in text]
    return hits


def quoted_cases(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the product quotes of both splits, a test-split case by its number only.

    The cases are loaded here, not in a fixture: pytest prints a failing test's arguments,
    and a fixture holding the test split would show its words to whoever broke the check."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    problems = []
    for name in SPLITS:
        cases = importlib.import_module(name).CASES
        if not cases:
            problems.append(f"{name} has no cases to check")
        for number, message, path in quoted(messages(cases), REPO / "nbchat"):
            # The test split's words stay out of the output; its case number is enough.
            shown = f"case {number}" if name == "eval_split_test" else repr(message)
            problems.append(f"{path.relative_to(REPO)} quotes {name} {shown}")
    return problems


def test_no_eval_prompt_appears_in_the_product(monkeypatch: pytest.MonkeyPatch) -> None:
    assert quoted_cases(monkeypatch) == []


def test_the_check_finds_a_quoted_prompt_whatever_its_case_and_spacing(tmp_path: Path) -> None:
    from types import SimpleNamespace

    cases = [
        SimpleNamespace(prompt="Read notes.txt and tell me when the meeting is.", before=()),
        SimpleNamespace(prompt="Short one?", before=()),
        SimpleNamespace(prompt="And where?", before=("What is the capital of Italy, please?",)),
    ]
    product = tmp_path / "nbchat" / "tools"
    product.mkdir(parents=True)
    (product / "rules.py").write_text(
        'EXAMPLES = ["READ notes.txt and tell me\n    when the   meeting is"]\n'
    )
    (product / "other.md").write_text("Say hello. Short one\n")
    found = quoted(messages(cases), tmp_path / "nbchat")
    assert [(number, path.name) for number, _message, path in found] == [(1, "rules.py")]
    (product / "prompts.txt").write_text("what is the capital of italy, please")
    found = quoted(messages(cases), tmp_path / "nbchat")
    assert [(number, path.name) for number, _message, path in found] == [
        (3, "prompts.txt"),
        (1, "rules.py"),
    ]

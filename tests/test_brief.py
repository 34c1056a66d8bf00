"""The brief transcript a small, slow summariser reads (`nbchat.compaction.prune`), and the
engine asking for it in one request on the embedded model."""

from __future__ import annotations

import json
from pathlib import Path

from compaction_strategies import FakeSummariser
from factories import assistant, tool_call, tool_result, user

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.prompts import BRIEF_PROMPT, BRIEF_RESPONSE_FORMAT, RESPONSE_FORMAT
from nbchat.compaction.prune import BRIEF_CAP, LEVELS, brief_blocks
from nbchat.config import Settings
from nbchat.history import Row, estimate_tokens

REPLY = json.dumps({"goal": "Keep the last token", "done": ["Patched tokenize() in parse.py"]})


def turn(n: int, output: str = "") -> list[Row]:
    return [
        tool_call((f"c{n}", "run_shell", {"command": f"python check.py {n}"}), content=f"Try {n}."),
        tool_result(f"c{n}", output or ("z" * 3000 + f"\nall {n} done"), name="run_shell"),
        assistant(f"Case {n}: the tokenizer drops the last token. " + "w" * 600),
    ]


def history(turns: int) -> list[Row]:
    rows = [user("Make the tokenizer keep its last token")]
    for n in range(turns):
        rows += turn(n)
    return rows


def test_each_message_is_one_line_and_errors_keep_their_headline() -> None:
    rows = [user("fix it"), *turn(1, "Traceback (most recent call last):\n  x\nKeyError: 'k'")]
    assert brief_blocks(rows, 10_000) == [
        "[User]: fix it",
        "[Assistant]: Try 1.\n[Assistant ran]: python check.py 1",
        "[Result]: KeyError: 'k'",
        f"[Assistant]: {rows[-1].content[: LEVELS[0].statement - 2]} …",
    ]


def test_lines_get_shorter_before_any_is_left_out() -> None:
    rows = history(6)
    widest = "\n\n".join(brief_blocks(rows, 100_000))
    fitted = brief_blocks(rows, estimate_tokens(widest) // 2)
    assert len(fitted) < len(brief_blocks(rows, 100_000))  # results without errors went first
    assert not any("left out" in block for block in fitted)
    assert fitted[0] == "[User]: Make the tokenizer keep its last token"


def test_a_long_history_keeps_the_task_and_the_newest_within_the_cap() -> None:
    rows = history(200)
    blocks = brief_blocks(rows, BRIEF_CAP)
    assert sum(estimate_tokens(block) + 1 for block in blocks) <= BRIEF_CAP
    assert blocks[0] == "[User]: Make the tokenizer keep its last token"
    assert "earlier messages left out" in blocks[1]
    assert blocks[-1].startswith("[Assistant]: Case 199:")


def test_the_embedded_model_is_asked_once_for_the_brief_checkpoint(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workspace=tmp_path, summariser_context=8_192)
    assert settings.is_embedded
    fake = FakeSummariser(REPLY)
    engine = CompactionEngine(2_000, 4, settings=settings, summariser=fake)
    assert engine.brief_cap == BRIEF_CAP
    result = engine.compact(history(60))
    assert result.changed and len(fake.requests) == 1
    assert fake.requests[0]["response_format"] == BRIEF_RESPONSE_FORMAT
    assert BRIEF_PROMPT in fake.prompts[0]


def test_a_server_model_is_sent_every_row_in_chunks(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, workspace=tmp_path, base_url="http://127.0.0.1:9/v1")
    fake = FakeSummariser(REPLY)
    engine = CompactionEngine(
        2_000, 4, settings=settings, summariser=fake, summariser_context=8_192
    )
    assert engine.brief_cap is None
    engine.compact(history(60))
    assert len(fake.requests) > 1
    assert fake.requests[0]["response_format"] == RESPONSE_FORMAT

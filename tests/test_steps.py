"""Compaction's steps (compaction/steps.py, compaction/summarystep.py): `prepare` decides
everything before the summary, `compact` is the one step that asks the summariser, `reuse` serves
a summary made earlier, and `CompactionEngine.compact` is exactly `prepare` then `compact`."""

from __future__ import annotations

from dataclasses import replace

from compaction_strategies import SUMMARY, FakeSummariser
from factories import assistant, tool_call, tool_result, user

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import unchanged
from nbchat.compaction.steps import CompactionSettings, prepare, reuse
from nbchat.compaction.summarystep import compact
from nbchat.compaction.writer import SummaryWriter
from nbchat.history import Row

SETTINGS = CompactionSettings(threshold=4000, tail_messages=5)  # the trigger: 3,000 tokens


def turn(number: int) -> list[Row]:
    """One question, a file read (its output ~600 tokens, worth pruning), and an answer."""
    call = f"c{number}"
    return [
        user(f"question {number}"),
        tool_call((call, "read_file", {"path": f"src/f{number}.py"})),
        tool_result(call, f"output {number} " * 300),
        assistant(f"answer {number} " * 20),
    ]


def turns(count: int) -> list[Row]:
    return [row for number in range(count) for row in turn(number)]


def test_under_the_trigger_nothing_is_decided_and_nothing_asked() -> None:
    preparation = prepare(turns(1), SETTINGS)
    assert (preparation.split, preparation.replacements) == (None, {})
    assert preparation.reason.startswith("under the trigger")
    fake = FakeSummariser()
    result = compact(preparation, SummaryWriter(fake))
    assert (result.changed, result.reason, fake.requests) == (False, preparation.reason, [])
    assert result.rows == tuple(turns(1))


def test_the_cut_the_placeholders_and_the_facts_are_decided_before_the_summariser_is_asked() -> (
    None
):
    rows = turns(6)
    preparation = prepare(rows, SETTINGS, force=True)
    assert preparation.reason == "" and preparation.split is not None
    start = preparation.split.start
    assert sorted(preparation.replacements) == [2, 6, 10, 14, 18]
    assert "src/f0.py" in preparation.facts and "src/f5.py" not in preparation.facts
    fake = FakeSummariser()
    result = compact(preparation, SummaryWriter(fake))
    assert len(fake.requests) == 1
    assert result.rows == (
        Row("compacted", f"{SUMMARY}\n\n{preparation.facts}"),
        *preparation.pruned[start:],
    )
    assert dict(result.edit.replacements) == {
        i: row for i, row in preparation.replacements.items() if i >= start
    }


def test_the_engine_is_prepare_then_compact() -> None:
    rows = turns(6)
    engine = CompactionEngine(4000, summariser=FakeSummariser())
    by_engine = engine.compact(rows, force=True)
    preparation = prepare(rows, engine.compaction_settings, force=True)
    by_steps = compact(preparation, SummaryWriter(FakeSummariser()))
    assert by_engine.changed and replace(by_engine, duration=0.0) == by_steps


def test_a_summary_made_earlier_of_the_same_cut_is_used_with_no_model_call() -> None:
    rows = turns(6)
    earlier = compact(prepare(rows, SETTINGS, force=True), SummaryWriter(FakeSummariser()))
    served = reuse(prepare(rows, SETTINGS, force=True), earlier, force=True)
    assert served is not None
    fake = FakeSummariser("## Goal\nnot asked")
    result = compact(served, SummaryWriter(fake))
    assert fake.requests == []
    assert (result.rows, result.edit, result.usage) == (earlier.rows, earlier.edit, earlier.usage)


def test_only_the_rows_added_since_are_sent_to_update_a_summary_made_earlier() -> None:
    earlier = compact(prepare(turns(6), SETTINGS, force=True), SummaryWriter(FakeSummariser()))
    covered = earlier.edit.rows_summarised
    rows = turns(8)
    served = reuse(prepare(rows, SETTINGS, force=True), earlier, force=True)
    assert served is not None and served.split is not None and served.split.start > covered
    fake = FakeSummariser()
    result = compact(served, SummaryWriter(fake))
    (prompt,) = fake.prompts
    assert f"<previous-summary>\n{SUMMARY}\n</previous-summary>" in prompt
    assert "question 4" in prompt and "question 3" not in prompt
    assert result.edit.rows_summarised == served.split.start
    assert result.usage.requests == earlier.usage.requests + 1  # what the earlier one cost too


def test_unforced_at_the_trigger_the_earlier_cut_wins_when_it_lands_under_it() -> None:
    earlier = compact(prepare(turns(6), SETTINGS, force=True), SummaryWriter(FakeSummariser()))
    preparation = prepare(turns(8), SETTINGS)
    assert preparation.split is not None
    assert preparation.split.start > earlier.edit.rows_summarised
    served = reuse(preparation, earlier)
    assert served is not None and served.split is not None
    assert served.split.start == earlier.edit.rows_summarised
    fake = FakeSummariser()
    result = compact(served, SummaryWriter(fake))
    assert fake.requests == [] and result.tokens_after < SETTINGS.trigger


def test_an_earlier_result_without_a_summary_serves_nothing() -> None:
    earlier = unchanged(turns(6), 6000, "nothing to do")
    assert reuse(prepare(turns(6), SETTINGS, force=True), earlier) is None


def test_a_summary_that_would_not_shrink_the_history_still_reports_what_it_cost() -> None:
    # It used to fall back to the placeholders alone with no usage: a request the summariser
    # answered went unreported.
    fake = FakeSummariser(SUMMARY + "\n" + "word " * 20_000)
    result = compact(prepare(turns(6), SETTINGS, force=True), SummaryWriter(fake))
    assert result.layer == "prune" and result.edit.summary_row is None
    assert result.reason.endswith("no summary: the summary would not shrink it")
    assert len(fake.requests) == result.usage.requests == 1
    assert result.usage.prompt_tokens == 100

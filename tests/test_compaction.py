"""CompactionEngine: the baseline API with plain 5-tuples, the layered path, and its properties."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import openai
import pytest
from compaction_strategies import SUMMARY, FakeSummariser, thresholds, working_histories
from factories import analysis, assistant, tool_call, tool_result, user
from fakeserver import FakeServer, Reply
from fakeserver_replies import count_prompt_tokens
from hypothesis import given
from hypothesis import strategies as st
from strategies import histories, tail_budgets, well_formed_histories

from nbchat.compaction.cacheform import (
    Split,
    TailBudget,
    choose_split,
    compactable_before,
    find_user_tail,
)
from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import unchanged
from nbchat.config import Settings
from nbchat.conversation.session import apply_compaction
from nbchat.errors import CompactionError, NbchatError
from nbchat.history import History, Message, Row, build_messages, estimate_tokens, repair_rows
from nbchat.llm.client import stream_chat
from nbchat.stopping import StopSignal
from nbchat.store.store import Store

BIG = "x" * 3000  # 1,000 tokens


def engine_with(
    summariser: FakeSummariser | None = None, threshold: int = 100_000, **options: object
) -> CompactionEngine:
    return CompactionEngine(threshold, summariser=summariser or FakeSummariser(), **options)  # type: ignore[arg-type]


def plain(rows: Sequence[Row]) -> list[tuple[str, str, str, str, str]]:
    return [tuple(row) for row in rows]  # type: ignore[misc]


CONVERSATION = plain(
    [
        user("first question"),
        assistant("first answer " + "in detail " * 90),
        user("second question"),
        assistant("second answer"),
        user("read the file"),
        tool_call(("c1", "read_file", {"path": "a.py"})),
        tool_result("c1", "print('hi')"),
        assistant("it prints hi"),
    ]
)


class TestBaseline:
    def test_total_tokens_counts_content_and_tool_args_like_the_original(self) -> None:
        rows = [("user", "abcdef", "", "", ""), ("assistant_full", "", "", "", "x" * 9)]
        assert engine_with().total_tokens(rows) == 2 + 1 + 3

    def test_total_tokens_on_a_history_is_its_running_total(self) -> None:
        history = History(CONVERSATION)
        assert engine_with().total_tokens(history) == history.total_tokens
        assert engine_with().total_tokens(history) == engine_with().total_tokens(CONVERSATION)

    def test_should_compact_triggers_at_three_quarters_of_the_threshold(self) -> None:
        engine = engine_with(threshold=100)
        assert engine.trigger == 75
        assert not engine.should_compact([("user", "x" * 3 * 74, "", "", "")])
        assert engine.should_compact([("user", "x" * 3 * 75, "", "", "")])

    def test_tail_moves_back_to_the_nearest_user_row(self) -> None:
        out = engine_with().compact_history(CONVERSATION)
        assert out[1:] == CONVERSATION[2:]
        assert out[0][0] == "compacted"
        assert out[0][1].startswith(SUMMARY)
        assert tuple(out[0])[2:] == ("", "", "")

    def test_without_a_user_boundary_the_history_is_unchanged(self) -> None:
        fake = FakeSummariser()
        rows = plain([user("go"), *[assistant(f"step {n}") for n in range(6)]])
        assert engine_with(fake).compact_history(rows) == rows
        assert fake.requests == []

    def test_fewer_than_two_older_rows_leave_the_history_unchanged(self) -> None:
        fake = FakeSummariser()
        rows = plain([assistant("hello"), user("q"), *[assistant(f"a{n}") for n in range(4)]])
        assert engine_with(fake).compact_history(rows) == rows
        assert fake.requests == []

    def test_a_summary_and_a_short_tail_are_never_compacted_again(self) -> None:
        fake = FakeSummariser()
        engine = engine_with(fake, threshold=10)
        rows = [("compacted", "s" * 300, "", "", ""), *CONVERSATION[-5:]]
        assert not engine.should_compact(rows)
        assert engine.compact_history(rows) == rows
        assert fake.requests == []

    def test_the_summariser_is_called_once_with_a_bounded_max_tokens(self) -> None:
        fake = FakeSummariser()
        engine_with(fake, summary_max_tokens=500).compact_history(CONVERSATION)
        assert len(fake.requests) == 1
        assert fake.requests[0]["max_tokens"] == 500

    def test_a_failing_summariser_raises_and_leaves_the_history_untouched(self) -> None:
        def fail(messages: Sequence[Message]) -> str:
            raise CompactionError("The summariser failed: boom")

        rows = list(CONVERSATION)
        with pytest.raises(CompactionError, match="boom"):
            engine_with(FakeSummariser(fail)).compact_history(rows)
        assert rows == CONVERSATION

    def test_an_empty_summary_is_a_failure(self) -> None:
        with pytest.raises(CompactionError, match="empty summary"):
            engine_with(FakeSummariser("  \n")).compact_history(CONVERSATION)

    def test_compact_history_returns_a_list_for_a_history(self) -> None:
        out = engine_with().compact_history(History(CONVERSATION))
        assert isinstance(out, list)
        assert out[1:] == CONVERSATION[2:]

    def test_constructing_an_engine_does_no_io(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def refuse(**_: object) -> Settings:
            raise AssertionError("Settings.load() at construction")

        monkeypatch.setattr(Settings, "load", refuse)
        engine = CompactionEngine(1000)
        assert engine.should_compact(CONVERSATION) is False

    def test_importing_compaction_loads_neither_openai_nor_the_store(self) -> None:
        code = (
            "import sys, nbchat.compaction.engine; "
            "print(sorted(m for m in ('openai', 'nbchat.store.store', 'nbchat.llm.client') "
            "if m in sys.modules))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.stdout.strip() == "[]"


class TestBudget:
    def test_should_compact_counts_the_system_prompt_and_tool_schemas(self) -> None:
        schema = {"type": "function", "function": {"name": "t", "parameters": {}}}
        rows = [("user", "x" * 150, "", "", "")]  # 50 tokens
        assert not engine_with(threshold=100).should_compact(rows)
        assert engine_with(threshold=100, system_prompt="s" * 75).should_compact(rows)
        engine = engine_with(threshold=100, tool_schemas=[schema] * 3)
        assert engine.overhead_tokens == len(json.dumps([schema] * 3)) // 3
        assert engine.should_compact(rows)

    def test_reported_prompt_tokens_plus_rows_since_decide_on_a_history(self) -> None:
        engine = engine_with(threshold=1000)
        history = History([user("hi")])
        history.record_usage(700)
        assert not engine.should_compact(history)
        history.append(assistant("y" * 150))  # 50 more tokens
        assert engine.context_tokens(history) == 750
        assert engine.should_compact(history)

    def test_a_plain_list_falls_back_to_the_estimate(self) -> None:
        engine = engine_with(threshold=1000, system_prompt="s" * 30)
        assert engine.context_tokens(CONVERSATION) == engine.total_tokens(CONVERSATION) + 10

    def test_from_settings_takes_the_tail_trigger_and_models_from_settings(self) -> None:
        settings = Settings(
            model="chat", summary_model="small", context_token_threshold=2000, trigger_factor=0.5
        )
        engine = CompactionEngine.from_settings(settings, system_prompt="", tool_schemas=())
        assert (engine.threshold, engine.tail_messages, engine.trigger) == (2000, 4, 1000)
        assert engine.summary_model == "small"
        assert engine.summary_max_tokens == settings.summary_max_tokens

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"threshold": 0}, "threshold must be a positive number of tokens, got 0"),
            ({"tail_messages": 0}, "tail_messages must be at least 1, got 0"),
            ({"trigger_factor": 1.5}, "trigger_factor must be above 0 and at most 1, got 1.5"),
            ({"summary_max_tokens": 0}, "summary_max_tokens must be at least 1, got 0"),
            ({"summary_format": "xml"}, "summary_format must be 'json' or 'markdown', got 'xml'"),
        ],
    )
    def test_bad_options_are_refused_with_the_exact_reason(
        self, options: dict[str, object], message: str
    ) -> None:
        values: dict[str, object] = {"threshold": 100, **options}
        with pytest.raises(ValueError) as caught:
            CompactionEngine(**values)  # type: ignore[arg-type]
        assert str(caught.value) == message


class TestSummaryRequest:
    def test_older_rows_go_as_one_user_message_transcript_without_reasoning(self) -> None:
        fake = FakeSummariser()
        rows = [user("task"), analysis("SECRET THOUGHT"), assistant("done"), *CONVERSATION]
        engine_with(fake).compact_history(rows)
        messages = fake.requests[0]["messages"]
        assert [m["role"] for m in messages] == ["system", "user"]
        assert "[User]: task" in messages[1]["content"]
        assert "SECRET THOUGHT" not in messages[1]["content"]

    def test_json_format_sends_a_schema_and_markdown_does_not(self) -> None:
        as_json, as_markdown = FakeSummariser(), FakeSummariser()
        engine_with(as_json).compact_history(CONVERSATION)
        engine_with(as_markdown, summary_format="markdown").compact_history(CONVERSATION)
        assert as_json.requests[0]["response_format"]["type"] == "json_schema"
        assert as_markdown.requests[0]["response_format"] is None

    def test_a_json_reply_becomes_the_structured_sections(self) -> None:
        reply = json.dumps({"goal": "Ship it", "done": ["wrote a.py"], "next_steps": ["test"]})
        out = engine_with(FakeSummariser(reply)).compact_history(CONVERSATION)
        assert out[0][1].startswith("## Goal\nShip it\n\n## Constraints & preferences\n(none)")
        assert "### Done\n- [x] wrote a.py" in out[0][1]

    def test_missing_sections_are_accepted_with_a_warning(self) -> None:
        result = engine_with(FakeSummariser("just some words"), threshold=10).compact(CONVERSATION)
        assert result.changed
        assert result.summary.startswith("just some words")
        assert "lacks section(s) Goal" in result.warnings[0]

    def test_a_previous_summary_is_updated_with_only_the_new_rows(self) -> None:
        fake = FakeSummariser()
        first = engine_with(fake).compact_history([user("old task"), *CONVERSATION])
        second = engine_with(fake).compact_history([*first, *CONVERSATION])
        prompt = fake.prompts[1]
        assert "<previous-summary>\n" + SUMMARY + "\n</previous-summary>" in prompt
        assert "# Recorded facts" not in prompt
        assert "[User]: old task" not in prompt
        assert [row[0] for row in second].count("compacted") == 1
        assert "> old task" in second[0][1]  # the first user message, carried forward

    def test_focus_is_passed_to_the_summariser(self) -> None:
        fake = FakeSummariser()
        engine_with(fake, threshold=10).compact(CONVERSATION, focus="the database schema")
        assert "Pay particular attention to: the database schema" in fake.prompts[0]


def chatty(turns: int) -> list[Row]:
    """Turns with long replies: nothing for the prune layer to take."""
    rows: list[Row] = []
    for n in range(turns):
        rows += [user(f"question {n}"), assistant(f"answer {n} " + BIG)]
    return rows


def one_long_turn(steps: int = 10) -> list[Row]:
    rows = [user("fix everything")]
    for n in range(steps):
        rows += [tool_call((f"c{n}", "run_shell", {"command": "make"})), tool_result(f"c{n}", BIG)]
    return rows


def three_turns(*, first_output: int, last_reply: int) -> list[Row]:
    """12 rows, user rows at 0, 4 and 8, a tool round in each of the first two turns."""
    return [
        user("please look at the parser"),
        tool_call(("c1", "read_file", {"path": "parser.py"})),
        tool_result("c1", "x" * first_output),
        assistant("the parser reads tokens"),
        user("now fix the bug in it"),
        tool_call(("c2", "edit_file", {"path": "parser.py"})),
        tool_result("c2", "edited " + "z" * 300),
        assistant("fixed it " + "y" * 120),
        user("thanks, and the docs?"),
        analysis("they mean the README"),
        assistant("the README says " + "w" * last_reply),
        Row("system", "Stopped."),
    ]


# A server whose tokenizer counts far fewer tokens than the len/3 estimate: its figure is the
# "before", and the "after" must be in the same units (it once went below zero).
SERVER_COUNTS = [
    pytest.param(chatty(8) + [user("now"), assistant("ok")], "summary", id="summary"),
    pytest.param(
        one_long_turn(6) + [assistant("done"), user("thanks"), assistant("bye")],
        "prune",
        id="prune",
    ),
]


@pytest.mark.parametrize(("rows", "layer"), SERVER_COUNTS)
def test_the_figures_stay_in_the_servers_units_when_it_counts_fewer_tokens(
    rows: list[Row], layer: str
) -> None:
    estimated = engine_with().context_tokens(rows)
    # The server's count reaches the trigger; pruning alone brings it under (not so a summary).
    threshold = estimated // 5 * 4 // 3 if layer == "prune" else 6000
    engine = engine_with(
        threshold=threshold,
        summary_max_tokens=200,
        summariser_context=99_999,
        prune_alone=layer == "prune",
    )
    history = History(rows)
    history.record_usage(estimated // 5)
    result = engine.compact(history, force=layer == "summary")
    assert (result.changed, result.layer) == (True, layer)
    assert result.tokens_before == estimated // 5
    assert 0 < result.tokens_after < result.tokens_before
    # Shrunk in the same proportion as the estimates of the same requests (to rounding).
    shrunk = engine.context_tokens(list(result.rows)) / estimated
    assert abs(result.tokens_after / result.tokens_before - shrunk) < 0.01


class TestSplit:
    def test_a_turn_bigger_than_the_budget_is_split_inside_the_turn(self) -> None:
        rows = one_long_turn()
        out = engine_with(threshold=4000, summary_max_tokens=200).compact_history(rows)
        tail = out[1:]
        assert tail == rows[len(rows) - len(tail) :]
        assert tail[0].role == "assistant_full"
        assert repair_rows(out).dropped == []
        assert sum(estimate_tokens(r) for r in out) < 3000

    def test_the_user_row_tail_is_kept_exactly_when_it_fits(self) -> None:
        rows = [*one_long_turn(4), user("next"), assistant("ok"), user("more"), assistant("k")]
        engine = engine_with(threshold=3000, summary_max_tokens=100, tail_messages=4)
        assert engine.should_compact(rows)
        assert engine.compact_history(rows)[1:] == rows[-4:]

    def test_a_user_row_tail_over_the_budget_moves_inside_the_turn(self) -> None:
        rows = [user("a"), assistant("b"), *one_long_turn(6)]
        out = engine_with(threshold=4000, summary_max_tokens=200).compact_history(rows)
        assert out[1].role == "assistant_full"
        assert out[1:] == rows[len(rows) - len(out) + 1 :]

    def test_under_the_trigger_a_single_turn_is_left_alone(self) -> None:
        rows = one_long_turn(3)
        assert engine_with(threshold=100_000).compact_history(rows) == rows

    @pytest.mark.parametrize("tail_messages", [3, 4, 5, 6])
    def test_over_the_trigger_a_deeper_cut_is_made_only_at_a_user_row(
        self, tail_messages: int
    ) -> None:
        # The last turn's tail fits the aim (half the trigger): the cut moves to its user row,
        # never inside the turn before it (it once kept the tail from the tool call, row 5 or 7).
        rows = three_turns(first_output=1500, last_reply=60)
        engine = engine_with(threshold=1000, tail_messages=tail_messages)
        assert engine.should_compact(rows)
        out = engine.compact_history(rows)
        assert out[1:] == rows[8:]

    @pytest.mark.parametrize("tail_messages", [3, 4, 5, 6])
    def test_over_the_trigger_the_user_row_tail_is_kept_when_the_result_fits(
        self, tail_messages: int
    ) -> None:
        # No user row's tail fits the aim, but the baseline's leaves the result under the
        # trigger: it is kept exactly (it once kept only the last row, a notice).
        rows = three_turns(first_output=1500, last_reply=900)
        engine = engine_with(threshold=1000, tail_messages=tail_messages)
        out = engine.compact_history(rows)
        assert out[1:] == rows[find_user_tail(rows, tail_messages) :]
        assert engine.context_tokens(out) < engine.trigger


class TestLayers:
    def test_pruning_alone_under_the_trigger_makes_no_model_call(self) -> None:
        fake = FakeSummariser()
        rows = [*one_long_turn(6), assistant("done"), user("thanks"), assistant("bye")]
        result = engine_with(fake, threshold=6000, prune_alone=True).compact(rows)
        assert (result.changed, result.layer, result.usage.requests) == (True, "prune", 0)
        assert fake.requests == []
        assert result.tokens_after < engine_with(threshold=6000).trigger
        for index, placeholder in result.edit.replacements.items():
            assert result.rows[index] == placeholder
            assert placeholder.tool_id == rows[index].tool_id
            assert f'read_archived_output(tool_id="{placeholder.tool_id}")' in placeholder.content

    def test_under_the_trigger_compact_does_nothing_unless_forced(self) -> None:
        fake = FakeSummariser()
        engine = engine_with(fake)
        quiet = engine.compact(CONVERSATION)
        assert (quiet.changed, quiet.layer, quiet.rows) == (False, "none", tuple(CONVERSATION))
        assert quiet.reason.startswith("under the trigger")
        forced = engine.compact(CONVERSATION, force=True)
        assert (forced.changed, forced.layer, len(fake.requests)) == (True, "summary", 1)

    def test_summary_follows_when_pruning_is_not_enough(self) -> None:
        rows = [*one_long_turn(4), *chatty(4), user("now"), assistant("ok")]
        result = engine_with(threshold=6000, summary_max_tokens=200).compact(rows)
        assert result.layer == "summary"
        assert result.edit.summary_row == result.rows[0]
        assert result.edit.keep_tail == len(result.rows) - 1
        assert result.edit.rows_summarised == len(rows) - result.edit.keep_tail
        assert all(i >= result.edit.rows_summarised for i in result.edit.replacements)
        assert result.tokens_after < result.tokens_before

    def test_input_bigger_than_the_window_is_summarised_in_chunks(self) -> None:
        fake = FakeSummariser(lambda messages: f"## Goal\nsummary {len(fake.requests)}")
        rows = [*chatty(8), user("now"), assistant("ok")]
        engine = engine_with(fake, threshold=3000, summariser_context=2000, summary_max_tokens=200)
        result = engine.compact(rows)
        assert result.layer == "chunked"
        assert result.usage.requests == len(fake.requests) > 1
        for request in fake.requests:
            size = sum(len(str(m["content"])) // 3 for m in request["messages"])
            assert size + request["max_tokens"] <= 2000
        assert "<previous-summary>\n## Goal\nsummary 1" in fake.prompts[1]
        assert result.summary.startswith(f"## Goal\nsummary {len(fake.requests)}")

    def test_a_cancel_before_the_summary_changes_nothing(self) -> None:
        cancel = threading.Event()
        cancel.set()
        fake = FakeSummariser()
        result = engine_with(fake, threshold=10).compact(CONVERSATION, cancel=cancel)
        assert (result.changed, result.cancelled, result.reason) == (False, True, "cancelled")
        assert result.rows == tuple(CONVERSATION)
        assert fake.requests == []

    def test_a_cancel_between_chunks_changes_nothing(self) -> None:
        cancel = threading.Event()

        def answer_then_cancel(messages: Sequence[Message]) -> str:
            cancel.set()
            return SUMMARY

        fake = FakeSummariser(answer_then_cancel)
        rows = [*one_long_turn(4), *chatty(8), user("now"), assistant("ok")]
        engine = engine_with(fake, threshold=3000, summariser_context=2000, summary_max_tokens=200)
        result = engine.compact(rows, cancel=cancel)
        assert (result.changed, result.cancelled, len(fake.requests)) == (False, True, 1)
        assert fake.requests[0]["stop"] is cancel
        assert result.rows == tuple(rows)

    def test_a_summary_that_would_not_shrink_the_history_is_not_applied(self) -> None:
        fake = FakeSummariser("## Goal\n" + "very long " * 200)
        result = engine_with(fake, threshold=10).compact(CONVERSATION)
        assert (result.changed, result.rows) == (False, tuple(CONVERSATION))
        assert result.reason == "the summary would not shrink it"
        assert result.usage.requests == 1

    def test_a_summary_that_is_not_applied_names_no_layer(self) -> None:
        fake = FakeSummariser("## Goal\n" + "very long " * 200)
        result = engine_with(fake, threshold=10).compact(CONVERSATION)
        assert (result.changed, result.layer) == (False, "none")

    def test_the_result_carries_usage_model_and_timing(self) -> None:
        result = engine_with(threshold=10, summary_model="small").compact(CONVERSATION)
        assert (
            result.usage.prompt_tokens,
            result.usage.completion_tokens,
            result.usage.requests,
        ) == (100, 20, 1)
        assert result.usage.model == "small"
        assert result.duration > 0
        assert result.tokens_before == engine_with().context_tokens(CONVERSATION)
        assert result.tokens_after == engine_with().context_tokens(list(result.rows))


def assert_well_paired(messages: list[Message]) -> None:
    """No orphan tool result and no dangling call in a request."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls
            open_calls = {call["id"] for call in message.get("tool_calls") or []}
    assert not open_calls


def check_compaction(rows: list[Row], out: Sequence[Row]) -> None:
    assert_well_paired(build_messages(out))
    if list(out) == rows:
        return
    assert out[0].role == "compacted"
    assert list(out[1:]) == rows[len(rows) - len(out) + 1 :]


class TestProperties:
    @given(st.one_of(well_formed_histories, working_histories), thresholds)
    def test_compact_history_keeps_pairs_a_suffix_and_is_a_fixed_point(
        self, rows: list[Row], threshold: int
    ) -> None:
        engine = engine_with(FakeSummariser("lorem ipsum"), threshold=threshold)
        out = engine.compact_history(rows)
        check_compaction(rows, out)
        assert repair_rows(out).dropped == []
        assert engine.compact_history(out) == out

    @given(histories, thresholds)
    def test_any_history_compacts_without_orphans_or_dangling_calls(
        self, rows: list[Row], threshold: int
    ) -> None:
        engine = engine_with(FakeSummariser("lorem ipsum"), threshold=threshold)
        out = engine.compact_history(rows)
        check_compaction(rows, out)
        assert engine.compact_history(out) == out

    @given(st.one_of(well_formed_histories, working_histories), thresholds, st.booleans())
    def test_the_layered_path_is_safe_and_a_second_run_changes_nothing(
        self, rows: list[Row], threshold: int, force: bool
    ) -> None:
        engine = engine_with(FakeSummariser("lorem ipsum"), threshold=threshold)
        result = engine.compact(rows, force=force)
        check_compaction(
            [result.edit.replacements.get(i, r) for i, r in enumerate(rows)], result.rows
        )
        assert repair_rows(result.rows).dropped == []
        assert result.changed == (result.rows != tuple(rows))
        again = engine.compact(list(result.rows), force=force)
        assert (again.changed, again.rows) == (False, result.rows)


class TestSplitRule:
    """Over the trigger, the cut moves deeper only to a user row, and inside a turn only when no
    user row's tail leaves the result under the trigger (DESIGN.md, issue 20)."""

    @given(st.one_of(well_formed_histories, working_histories), st.integers(1, 8), tail_budgets)
    def test_over_the_trigger_a_cut_is_the_first_user_row_that_fits_else_inside_a_turn(
        self, rows: list[Row], tail_messages: int, budget: TailBudget
    ) -> None:
        estimates = [estimate_tokens(row) for row in rows]
        split = choose_split(
            rows, estimates, tail_messages=tail_messages, budget=budget, over_trigger=True
        )
        baseline = find_user_tail(rows, tail_messages)
        tails = {
            index: sum(estimates[index:])
            for index, row in enumerate(rows)
            if row.role == "user" and index >= max(baseline, 1)
        }
        fitting = [index for index, tokens in tails.items() if tokens <= budget.fit]
        if split is None:
            assert not fitting or compactable_before(rows, fitting[0]) < 2
        elif split.rule == "turn":
            assert not fitting
        else:
            assert split.start == fitting[0] or tails[split.start] <= budget.aim
            earlier = [tails[index] for index in tails if index < split.start]
            assert all(tokens > budget.aim for tokens in earlier)

    @given(st.one_of(well_formed_histories, working_histories), st.integers(1, 8), tail_budgets)
    def test_under_the_trigger_the_cut_is_the_baseline_user_row(
        self, rows: list[Row], tail_messages: int, budget: TailBudget
    ) -> None:
        estimates = [estimate_tokens(row) for row in rows]
        split = choose_split(
            rows, estimates, tail_messages=tail_messages, budget=budget, over_trigger=False
        )
        assert split is None or split == Split(find_user_tail(rows, tail_messages), "user")


def test_a_result_is_a_frozen_value() -> None:
    result = unchanged([user("hi")], 1, "nothing to do")
    with pytest.raises(AttributeError):
        result.layer = "summary"  # type: ignore[misc]
    assert (result.changed, result.edit.rows_pruned) == (False, 0)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def client(server: FakeServer) -> Iterator[openai.OpenAI]:
    # No retries: each scripted reply answers exactly one attempt.
    with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as real:
        yield real


def served_engine(client: openai.OpenAI, threshold: int = 3000, **options: Any) -> CompactionEngine:
    return CompactionEngine(
        threshold, 4, None, "fake-model", "", client, summariser_context=8192, **options
    )


FAULTS = [
    pytest.param(Reply(fault="http500"), "The summariser failed: .*500", id="500"),
    pytest.param(Reply(text=""), "returned an empty summary", id="empty"),
    pytest.param(
        Reply(text="## Goal\n" + "word " * 100, fault="cut", cut_after=4),
        "The summariser failed: .*(broke off|ended) the stream",
        id="cut",
    ),
    pytest.param(
        Reply(fault="overflow_llama", n_ctx=4096),
        "too big for the summariser's context window",
        id="overflow",
    ),
]


class TestAgainstTheTestServer:
    @pytest.mark.parametrize(("reply", "message"), FAULTS)
    def test_a_summariser_fault_raises_and_leaves_history_and_db_untouched(
        self, server: FakeServer, client: openai.OpenAI, store: Store, reply: Reply, message: str
    ) -> None:
        rows = [*chatty(4), user("now"), assistant("ok")]
        session = store.create_session("faults")
        store.append_rows(session, rows)
        before = store.load_full(session)
        history = History(store.load_active(session))
        server.enqueue(reply)
        with pytest.raises(CompactionError, match=message) as caught:
            served_engine(client).compact(history)
        assert "The history was left as it was" in str(caught.value)
        assert isinstance(caught.value.__cause__, NbchatError)
        assert history.rows == rows
        assert store.load_full(session) == before
        assert store.list_compactions(session) == []

    def test_cancel_during_the_summary_changes_nothing(
        self, server: FakeServer, client: openai.OpenAI
    ) -> None:
        stop = StopSignal()

        def stop_while_answering(body: dict[str, Any]) -> Reply:
            stop.set()  # the user presses Stop while the summary streams
            return Reply(text="## Goal\n" + "word " * 300, chunk_size=2, delay=0.01)

        server.responder = stop_while_answering
        rows = [*chatty(4), user("now"), assistant("ok")]
        result = served_engine(client).compact(rows, cancel=stop)
        assert (result.changed, result.cancelled, result.rows) == (False, True, tuple(rows))
        assert result.reason == "cancelled"

    def test_the_summary_request_is_bounded_and_asks_for_the_sections(
        self, server: FakeServer, client: openai.OpenAI
    ) -> None:
        server.enqueue(Reply(text=json.dumps({"goal": "ship"})))
        out = served_engine(client, summary_max_tokens=300).compact_history(CONVERSATION)
        [body] = server.chat_requests()
        assert body["max_tokens"] == 300
        assert body["model"] == "fake-model"
        assert body["response_format"]["json_schema"]["name"] == "checkpoint"
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert out[0][1].startswith("## Goal\nship")


SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "edit_file", "run_shell", "read_archived_output")
]


def session_rows() -> list[Row]:
    """About 40 rows: eight turns of file reads, edits and runs with sizeable outputs."""
    rows: list[Row] = []
    for turn in range(8):
        rows.append(user(f"step {turn}: look at module{turn}.py and fix it"))
        read, edit = f"r{turn}", f"e{turn}"
        rows += [
            tool_call((read, "read_file", {"path": f"src/module{turn}.py"})),
            tool_result(read, f"def f{turn}():\n" + "    pass  # code\n" * 120),
            tool_call((edit, "edit_file", {"path": f"src/module{turn}.py"})),
            tool_result(edit, f"ValueError: module{turn} broke\n" + "log\n" * 300, "edit_file"),
        ]
        rows.append(assistant(f"Fixed module{turn}."))
    return rows


def test_a_long_session_compacts_in_the_store_and_the_next_request_fits(
    server: FakeServer, client: openai.OpenAI, store: Store
) -> None:
    rows, threshold, system = session_rows(), 3000, "You are a careful coding assistant."
    session = store.create_session("end to end")
    store.append_rows(session, rows)
    history = History(store.load_active(session))
    engine = served_engine(client, threshold, tool_schemas=SCHEMAS)
    engine.system_prompt = system
    assert len(rows) == 48
    assert engine.should_compact(history)
    checkpoint = json.dumps({"goal": "fix every module", "done": ["module0-6"]})
    server.responder = lambda body: Reply(text=checkpoint)
    result = engine.compact(history)
    ids = apply_compaction(store, session, result, expected_active=len(history))
    active = store.load_active(session)
    assert (result.changed, result.layer, len(ids)) == (
        True,
        "chunked",
        len(store.list_compactions(session)),
    )
    assert active == list(result.rows)
    assert [row.role for row in active].count("compacted") == 1
    assert active[0].role == "compacted"
    assert "- src/module0.py" in active[0].content
    assert "ValueError: module0 broke" in active[0].content
    exported = json.loads(store.export_json(session))
    assert {r["content"] for r in exported["rows"]} >= {row.content for row in rows}
    server.enqueue(Reply(text="ok"))
    messages = build_messages(active, engine.system_prompt)
    list(stream_chat(client, messages, model="fake-model", tools=SCHEMAS))
    request = server.chat_requests()[-1]
    assert request["messages"] == messages
    assert count_prompt_tokens(request) + len(json.dumps(SCHEMAS)) // 4 <= threshold
    assert engine.context_tokens(active) <= threshold


def test_a_prune_is_stored_with_placeholders_in_place_and_originals_archived(
    store: Store,
) -> None:
    rows = [*one_long_turn(6), assistant("done"), user("thanks"), assistant("bye")]
    session = store.create_session("prune")
    store.append_rows(session, rows)
    engine = engine_with(threshold=6000, prune_alone=True)
    result = engine.compact(store.load_active(session))
    apply_compaction(store, session, result, expected_active=len(rows))
    assert result.layer == "prune"
    assert store.load_active(session) == list(result.rows)
    assert [c["kind"] for c in store.list_compactions(session)] == ["prune"]
    for index in result.edit.replacements:
        original = store.find_tool_result(session, rows[index].tool_id)
        assert original is not None
        assert original.row == rows[index]


def test_an_unchanged_result_writes_nothing(store: Store) -> None:
    session = store.create_session("quiet")
    store.append_rows(session, CONVERSATION)
    result = engine_with().compact(CONVERSATION)
    assert apply_compaction(store, session, result, expected_active=len(CONVERSATION)) == []
    assert store.list_compactions(session) == []


def test_placeholders_in_the_kept_tail_and_the_summary_are_stored_together(store: Store) -> None:
    last_turn = one_long_turn(6)
    rows = [*chatty(20), *last_turn, assistant("all done")]
    session = store.create_session("both layers")
    store.append_rows(session, rows)
    engine = engine_with(threshold=20_000, tail_messages=4, summary_max_tokens=200)
    result = engine.compact(store.load_active(session))
    ids = apply_compaction(store, session, result, expected_active=len(rows))
    assert result.layer == "chunked"  # 20,000 tokens of answers do not fit one request
    assert sorted(result.edit.replacements) == [len(rows) - 12, len(rows) - 10]
    assert result.edit.keep_tail == len(last_turn) + 1
    assert [c["kind"] for c in store.list_compactions(session)] == ["prune", "chunked"]
    assert len(ids) == 2
    assert store.load_active(session) == list(result.rows)
    assert result.edit.pruned_tokens == 2 * (
        1000 - estimate_tokens(result.edit.replacements[len(rows) - 12])
    )

"""Bad input: hostile histories through every step that cuts, rebuilds, stores or shows them, and
the tool arguments a model writes, through the executor and through a whole turn over HTTP.

The promise checked everywhere: no exception escapes except a documented `NbchatError` (or a
result that says why nothing was done), no tool result is ever parted from its call, and nothing
that was given is lost (text that is not valid Unicode — lone UTF-16 surrogate halves — is made
valid: a split pair is joined, a lone half becomes U+FFFD).
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import openai
import pytest
from compaction_strategies import FakeSummariser
from fakeserver import FakeServer, Reply
from fixtures_server import CHAT, Canned, ScriptedServer, chunk, client_for
from fuzz_strategies import hostile_histories, hostile_rows, read_file_arguments
from helpers import is_loadable, saved
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import tail_budgets
from test_render import executable_parts

from nbchat.compaction.cacheform import TailBudget, choose_split, is_cut_point
from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.prune import (
    apply_replacements,
    find_prunable,
    is_placeholder,
    protected_start,
)
from nbchat.config import Settings
from nbchat.conversation.events import Done
from nbchat.conversation.loop import Conversation
from nbchat.errors import CompactionError
from nbchat.history import UNSENT_ROLES, History, Message, Row, ToolCall, build_messages, to_row
from nbchat.llm.client import stream_chat
from nbchat.llm.reader import ReasoningDelta, TextDelta
from nbchat.store.store import Store
from nbchat.tools import ToolExecutor, default_registry
from nbchat.ui.cards import row_widget
from nbchat.ui.chatui import transcript_factories

SAFE_SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(autouse=True)
def quiet_repairs(caplog: pytest.LogCaptureFixture) -> None:
    """Repairs are logged as warnings, once per dropped row: expected here by the thousand."""
    caplog.set_level(logging.ERROR, logger="nbchat")


def is_valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def assert_well_paired(messages: list[Message]) -> None:
    """Every tool message answers a call of the assistant message just before its block, and
    every call is answered."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.discard(message["tool_call_id"])
        else:
            assert open_calls == set()
            open_calls = {call["id"] for call in message.get("tool_calls") or []}
    assert open_calls == set()


def kept_pairs(rows: list[Row]) -> list[tuple[int, int]]:
    """(call row, result row) index pairs that a request would carry (`repair_rows`' rule)."""
    pairs = []
    for index, row in enumerate(rows):
        if row.role != "assistant_full":
            continue
        try:
            ids = {call["id"] for call in json.loads(row.tool_args) if isinstance(call, dict)}
        except (TypeError, ValueError):
            continue
        after = index + 1
        while after < len(rows) and rows[after].role in UNSENT_ROLES | {"tool"}:
            if rows[after].role == "tool" and rows[after].tool_id in ids:
                pairs.append((index, after))
            after += 1
    return pairs


# The pure steps


@given(hostile_histories, st.text(max_size=20))
@SAFE_SETTINGS
def test_build_messages_takes_any_history_and_sends_only_paired_valid_text(
    rows: list[Row], system_prompt: str
) -> None:
    messages = build_messages(rows, system_prompt)
    assert_well_paired(messages)
    assert is_valid_unicode(json.dumps(messages, ensure_ascii=False))
    users = [to_row(row).content for row in rows if row.role == "user"]
    assert [m["content"] for m in messages if m["role"] == "user"] == users


@given(hostile_histories, st.integers(1, 8), tail_budgets, st.booleans())
@SAFE_SETTINGS
def test_the_split_never_parts_a_result_from_its_call(
    rows: list[Row], tail_messages: int, budget: TailBudget, over_trigger: bool
) -> None:
    estimates = [max(1, len(row.content) // 3) for row in rows]
    split = choose_split(
        rows, estimates, tail_messages=tail_messages, budget=budget, over_trigger=over_trigger
    )
    if split is None:
        return
    assert 0 < split.start < len(rows)
    assert is_cut_point(rows, split.start)
    assert split.rule == "turn" or rows[split.start].role == "user"
    for call, result in kept_pairs(rows):
        assert not call < split.start <= result


@given(hostile_histories, st.integers(1, 8), st.integers(0, 5_000))
@SAFE_SETTINGS
def test_pruning_keeps_every_row_and_every_pairing(
    rows: list[Row], keep_rows: int, keep_tokens: int
) -> None:
    estimates = [max(1, len(row.content) // 3) for row in rows]
    start = protected_start(rows, estimates, keep_rows=keep_rows, keep_tokens=keep_tokens)
    replacements = find_prunable(rows, estimates, protect_from=start)
    pruned = apply_replacements(rows, replacements)
    assert len(pruned) == len(rows)
    for index, (before, after) in enumerate(zip(rows, pruned, strict=True)):
        if index not in replacements:
            assert after == before
            continue
        assert index < start and is_placeholder(after)
        assert (after.role, after.tool_id, after.tool_name) == (
            "tool",
            before.tool_id,
            before.tool_name,
        )

    def skeleton(messages: list[Message]) -> list[tuple[str, Any, Any]]:
        return [(m["role"], m.get("tool_call_id"), m.get("tool_calls")) for m in messages]

    assert skeleton(build_messages(pruned)) == skeleton(build_messages(rows))


@given(hostile_histories, st.sampled_from([40, 600, 6000, 100_000]), st.booleans())
@SAFE_SETTINGS
def test_the_engine_compacts_any_history_or_says_why(
    rows: list[Row], threshold: int, force: bool
) -> None:
    engine = CompactionEngine(threshold, summariser=FakeSummariser("## Goal\nkeep going"))
    try:
        result = engine.compact(rows, force=force)
    except CompactionError as exc:  # documented: e.g. no room for a transcript in the window
        assert "The history was left as it was" in str(exc)
        return
    assert result.changed == (list(result.rows) != [to_row(row) for row in rows])
    assert result.reason
    assert_well_paired(build_messages(result.rows))
    if result.edit.summary_row is not None:
        kept = list(result.rows[1:])
        assert (
            kept
            == [result.edit.replacements.get(i, to_row(r)) for i, r in enumerate(rows)][
                len(rows) - len(kept) :
            ]
        )


# The store and the transcript widgets


@pytest.fixture(scope="module")
def shared_store() -> Iterator[Store]:
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "fuzz.db")
        yield store
        store.close()


@given(rows=hostile_histories)
@SAFE_SETTINGS
def test_any_history_round_trips_through_the_store_and_reloads_as_it_was_live(
    shared_store: Store, rows: list[Row]
) -> None:
    session_id = shared_store.create_session("fuzz")
    live = History(rows)
    readable = [row for row in live.rows if is_loadable(row)]
    if len(readable) < len(rows):  # what the store could not read back is refused up front
        with pytest.raises(ValueError):
            shared_store.append_rows(session_id, rows)
    shared_store.append_rows(session_id, readable)
    problems: list[Any] = []
    loaded = shared_store.load_active(session_id, problems=problems)
    assert loaded == readable
    assert problems == []
    assert build_messages(loaded, "s") == build_messages(readable, "s")
    exported = json.loads(shared_store.export_json(session_id))["rows"]
    assert [r["content"] for r in exported] == [row.content for row in loaded]


def html_values(widget: widgets.Widget) -> list[str]:
    found = []
    value = getattr(widget, "value", None)
    if isinstance(widget, widgets.HTML | widgets.HTMLMath) and isinstance(value, str):
        found.append(value)
    for child in getattr(widget, "children", ()):
        found.extend(html_values(child))
    return found


@given(rows=st.lists(hostile_rows(), max_size=12))
@SAFE_SETTINGS
def test_any_stored_row_is_shown_without_error_or_executable_markup(
    shared_store: Store, rows: list[Row]
) -> None:
    session_id = shared_store.create_session("<script>alert(1)</script>")
    shared_store.append_rows(session_id, [row for row in History(rows).rows if is_loadable(row)])
    shown = [factory() for factory in transcript_factories(shared_store, session_id)]
    shown += [row_widget(row) for row in rows]  # straight from memory, unrepaired
    for widget in shown:
        for markup in html_values(widget):
            assert executable_parts(markup) == []


# Tool arguments the model writes


@pytest.fixture(scope="module")
def fuzz_workspace() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "a.txt").write_text("one\ntwo\n")
        yield root


@given(arguments=read_file_arguments, name=st.sampled_from(default_registry().names()))
@SAFE_SETTINGS
def test_any_arguments_come_back_as_a_readable_outcome(
    fuzz_workspace: Path, arguments: str, name: str
) -> None:
    # "deny" keeps the writers and the shell from running: only their checks are exercised.
    executor = ToolExecutor(default_registry(), workspace=fuzz_workspace, policy="deny")
    outcome = executor.execute(ToolCall("call_1", name, arguments))
    assert outcome.content
    assert len(outcome.content) <= executor.output_limit + 100
    if not outcome.ok:
        assert outcome.error == outcome.content.splitlines()[0][:200]
    assert sorted(p.name for p in fuzz_workspace.iterdir()) == ["a.txt"]


# Whole turns over real HTTP


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


def conversation_for(url: str, store: Store, settings: Settings) -> Conversation:
    client = openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, store, client=client)


TEN_MB = "x" * 10_000_000
READ_FILE_PARAMETERS = (
    "Parameters: path (string, required), start_line (integer or null), end_line (integer or null)."
)


@pytest.mark.timeout(60)
def test_bad_and_huge_tool_arguments_in_a_whole_turn_become_readable_rows(
    server: FakeServer, store: Store, make_settings: Any
) -> None:
    # max_tokens high enough for the 20 MB of arguments: the client cuts longer replies.
    settings = make_settings(
        context_token_threshold=20_000_000, tool_policy="allow", max_tokens=2_000_000
    )
    chat = conversation_for(server.url, store, settings)
    calls = [
        ("w1", "read_file", json.dumps({"path": 3})),
        ("w2", "read_file", json.dumps({"path": "a.txt", "colour": "red"})),
        ("w3", "read_file", json.dumps({"start_line": 1})),
        ("w4", "read_file", json.dumps(["a.txt"])),
        ("w5", "read_file", '{"path": '),
        ("w6", "write_file", json.dumps({"path": "big.txt", "content": TEN_MB})),
        ("w7", "read_file", json.dumps({"path": TEN_MB})),
    ]
    server.enqueue(Reply(tool_calls=calls, chunk_size=1_000_000), Reply(text="understood"))
    events = list(chat.send("go"))
    results = {row.tool_id: row.content for row in saved(events) if row.role == "tool"}
    assert results["w1"] == (
        f"Invalid arguments for 'read_file': path: expected a string, got 3. {READ_FILE_PARAMETERS}"
    )
    assert results["w2"] == (
        f"Invalid arguments for 'read_file': unexpected argument 'colour'. {READ_FILE_PARAMETERS}"
    )
    assert results["w3"] == (
        "Invalid arguments for 'read_file': missing required argument 'path'. "
        f"{READ_FILE_PARAMETERS}"
    )
    assert results["w4"] == (
        f"The arguments for 'read_file' must be a JSON object, got list. {READ_FILE_PARAMETERS}"
    )
    assert results["w5"] == (
        "The arguments for 'read_file' are not valid JSON (Expecting value: line 1 column 9 "
        f"(char 8)). {READ_FILE_PARAMETERS}"
    )
    assert results["w6"] == "Wrote 10,000,000 characters to big.txt."
    assert (settings.workspace / "big.txt").stat().st_size == 10_000_000
    assert results["w7"].startswith("Cannot open 'xxxxxxxx")  # a message, not a traceback
    assert results["w7"].endswith("': File name too long.")
    assert len(results["w7"]) <= settings.tool_output_limit + 100
    assert events[-1] == Done()
    assert saved(events)[-1] == Row("assistant", "understood")
    session_id = str(chat.session_id)
    assert store.load_active(session_id) == chat.history.rows
    stored_calls = json.loads(chat.history.rows[1].tool_args)
    assert [c["function"]["arguments"] for c in stored_calls] == [a for _, _, a in calls]
    second = server.chat_requests()[-1]["messages"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == [c[0] for c in calls]
    server.enqueue(Reply(text="still here"))
    assert saved(list(chat.send("and now?")))[-1] == Row("assistant", "still here")


def surrogate_chunk(content: str) -> str:
    """A stream event whose content is JSON-escaped exactly as given (halves stay halves)."""
    body = json.dumps(chunk({"content": "PLACEHOLDER"}))
    return body.replace("PLACEHOLDER", content)


@pytest.mark.timeout(30)
def test_a_reply_streamed_in_surrogate_halves_is_stored_and_sent_back_as_valid_text(
    store: Store, make_settings: Any
) -> None:
    settings = make_settings(context_token_threshold=50_000)
    with ScriptedServer() as scripted:
        halves = [surrogate_chunk("smile \\ud83d"), surrogate_chunk("\\ude00 lone \\udc00")]
        scripted.add(CHAT, Canned(events=[*halves, chunk(finish="stop"), "[DONE]"]))
        scripted.add(
            CHAT, Canned(events=[chunk({"content": "ok"}), chunk(finish="stop"), "[DONE]"])
        )
        chat = conversation_for(scripted.url, store, settings)
        first = list(chat.send("a lone half from the browser: \ud800!"))
        assert first[-1] == Done()
        expected = [
            Row("user", "a lone half from the browser: \ufffd!"),
            Row("assistant", "smile 😀 lone \ufffd"),
        ]
        assert chat.history.rows == expected
        assert store.load_active(str(chat.session_id)) == expected
        second = list(chat.send("again"))
        assert second[-1] == Done()


@pytest.mark.timeout(30)
def test_every_streamed_delta_is_valid_text_even_when_a_character_is_split(
    tmp_path: Path,
) -> None:
    def reasoning(content: str) -> str:
        return surrogate_chunk(content).replace('"content"', '"reasoning_content"')

    events = [
        reasoning("think \\ud83e"),
        reasoning("\\udd14"),
        surrogate_chunk("smile \\ud83d"),
        surrogate_chunk("\\ude00 lone \\udc00"),
        surrogate_chunk(" end \\ud83d"),
        chunk(finish="stop"),
        "[DONE]",
    ]
    with ScriptedServer() as scripted:
        scripted.add(CHAT, Canned(events=events))
        with client_for(scripted.url, tmp_path) as client:
            streamed = list(stream_chat(client, [{"role": "user", "content": "hi"}], model="m"))
    texts = [e.text for e in streamed if isinstance(e, TextDelta)]
    thoughts = [e.text for e in streamed if isinstance(e, ReasoningDelta)]
    assert all(is_valid_unicode(piece) for piece in texts + thoughts)
    assert "".join(thoughts) == "think 🤔"
    assert "".join(texts) == "smile 😀 lone \ufffd end \ufffd"

"""Compaction you can preview, steer and undo: the store's undo (real SQLite), the conversation's
preview/accept/undo (real HTTP to the test server), `nbchat undo-compact`, and the widget's
preview card and Undo button (the real widget tree)."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from types import MappingProxyType
from typing import Any

import openai
import pytest
from compaction_strategies import FakeSummariser, thresholds, working_histories
from factories import assistant, tool_call, tool_result, user
from fakeserver import FakeServer, Reply
from helpers import buttons, is_summary_request, shown_text
from hypothesis import assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from nbchat.cli.command import main
from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import CompactionResult, Edit
from nbchat.config import Settings
from nbchat.conversation.loop import Conversation
from nbchat.conversation.session import apply_compaction
from nbchat.errors import NbchatError, SessionLockedError, StoreError
from nbchat.history import Row
from nbchat.store.rowsql import CompactionRecord
from nbchat.store.store import Store
from nbchat.ui import ChatUI
from nbchat.ui.compactflow import PreviewCard

SUMMARY = json.dumps(
    {
        "goal": "Fix the parser",
        "constraints": [],
        "done": ["read files"],
        "in_progress": [],
        "blocked": [],
        "decisions": [],
        "next_steps": ["run tests"],
        "critical_context": [],
    }
)


def chat_rows(turns: int = 6, size: int = 300) -> list[Row]:
    rows: list[Row] = []
    for i in range(turns):
        rows += [user(f"question {i} " + "y" * size), assistant(f"answer {i} " + "x" * size)]
    return rows


def snapshot(store: Store, session_id: str) -> list[tuple[Any, ...]]:
    """Every row as stored (id, position, row, archived, link), in transcript order."""
    return [
        (s.id, s.position, s.row, s.archived, s.compaction_id)
        for s in store.load_full(session_id, problems=[])
    ]


def active_ids(store: Store, session_id: str) -> list[tuple[int, int, Row]]:
    return [(s.id, s.position, s.row) for s in store.load_full(session_id) if not s.archived]


def counts(store: Store) -> tuple[int, ...]:
    tables = ("rows", "compactions", "requests", "sessions")
    return tuple(store.db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)


def summarised(store: Store, session_id: str, *, keep_tail: int = 2) -> int:
    active = store.load_active(session_id)
    return store.replace_with_compacted(
        session_id,
        ("compacted", f"summary of {len(active) - keep_tail} rows", "", "", ""),
        keep_tail=keep_tail,
        expected_active=len(active),
        record=CompactionRecord(kind="summary", tokens_before=900, tokens_after=100),
    )


# The store


def test_undo_brings_the_archived_rows_back_exactly_and_archives_the_summary(store: Store) -> None:
    session = store.create_session("s")
    store.append_rows(session, chat_rows(3))
    before = active_ids(store, session)
    record = summarised(store, session)
    store.undo_compaction(session)
    assert active_ids(store, session) == before  # same ids, positions, content, order
    full = store.load_full(session)
    compacted = [s for s in full if s.row.role == "compacted"]
    assert [(s.archived, s.compaction_id) for s in compacted] == [(True, record)]
    assert len(full) == len(before) + 1  # nothing deleted
    (info,) = store.list_compactions(session)
    assert info["id"] == record and info["undone_at"]


def test_undo_of_a_prune_and_its_summary_takes_both_back(store: Store) -> None:
    session = store.create_session("s")
    rows = [
        user("read it"),
        tool_call(("c1", "read_file", {"path": "a"})),
        tool_result("c1", "old output " * 50),
        assistant("done"),
        user("again"),
        tool_call(("c2", "read_file", {"path": "b"})),
        tool_result("c2", "more output " * 50),
        assistant("done again"),
    ]
    store.append_rows(session, rows)
    before = active_ids(store, session)
    placeholder = Row("tool", "[pruned]", "c2", "read_file", "")
    summary = Row("compacted", "what happened")
    result = CompactionResult(
        rows=(summary, rows[4], rows[5], placeholder, rows[7]),
        layer="summary",
        reason="test",
        tokens_before=900,
        tokens_after=200,
        edit=Edit(
            replacements=MappingProxyType({6: placeholder}),
            pruned_tokens=150,
            summary_row=summary,
            rows_summarised=4,
            keep_tail=4,
        ),
        duration=0.25,
    )
    ids = apply_compaction(store, session, result, expected_active=len(rows))
    assert store.load_active(session) == list(result.rows)
    undone = store.undo_compaction(session)
    assert undone.record_ids == tuple(ids)
    assert active_ids(store, session) == before
    assert all(c["undone_at"] for c in store.list_compactions(session))


def test_compactions_come_off_newest_first(store: Store) -> None:
    session = store.create_session("s")
    store.append_rows(session, chat_rows(2))
    original = active_ids(store, session)
    first = summarised(store, session)
    store.append_rows(session, chat_rows(2))
    middle = active_ids(store, session)
    second = summarised(store, session)
    with pytest.raises(StoreError) as refused:
        store.undo_compaction(session, first)
    assert str(refused.value) == (
        f"Compaction {first} is not the latest on session {session}: compaction {second} is. "
        f"Undo {second} first (compactions are undone newest first)."
    )
    assert store.undo_compaction(session).record_id == second
    assert active_ids(store, session) == middle
    assert store.undo_compaction(session, first).record_id == first
    assert active_ids(store, session)[: len(original)] == original
    with pytest.raises(StoreError, match="has no compaction to undo"):
        store.undo_compaction(session)


def test_undo_under_another_kernels_lease_is_refused_naming_the_holder(
    store: Store, tmp_path: Path
) -> None:
    session = store.create_session("s")
    store.append_rows(session, chat_rows(2))
    summarised(store, session)
    other = Store(store.path)
    try:
        assert other.acquire_lease(session)
        before = snapshot(store, session)
        with pytest.raises(SessionLockedError) as refused:
            store.undo_compaction(session)
        holder = other.lease_holder(session)
        assert holder is not None and f"pid {holder.pid}" in str(refused.value)
        assert "open for writing in another kernel" in str(refused.value)
        assert snapshot(store, session) == before
    finally:
        other.close()


def test_undo_refuses_when_a_stand_in_was_archived_since(store: Store) -> None:
    session = store.create_session("s")
    store.append_rows(session, chat_rows(2))
    summarised(store, session, keep_tail=0)
    store.archive_last(session, 1, expected_active=1, kind="edit")  # the summary itself
    before = snapshot(store, session)
    with pytest.raises(StoreError, match="cannot be undone exactly"):
        store.undo_compaction(session)
    assert snapshot(store, session) == before


@hypothesis_settings(max_examples=25, deadline=None)
@given(working_histories, thresholds, st.booleans())
def test_compact_then_undo_gives_back_the_active_rows_exactly(
    rows: list[Row], threshold: int, force: bool
) -> None:
    # Forced: mostly summaries; over the trigger: prunes too (prune + summary together: above).
    engine = CompactionEngine(threshold, summariser=FakeSummariser("lorem ipsum"))  # type: ignore[arg-type]
    result = engine.compact(rows, force=force)
    assume(result.changed)
    with tempfile.TemporaryDirectory() as folder, closing(Store(Path(folder) / "p.db")) as store:
        session = store.create_session("p")
        store.append_rows(session, rows)
        before = active_ids(store, session)
        apply_compaction(store, session, result, expected_active=len(rows))
        assert store.load_active(session) == list(result.rows)
        store.undo_compaction(session)
        assert active_ids(store, session) == before


# The conversation


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        running.responder = lambda body: Reply(text=SUMMARY if is_summary_request(body) else "ok")
        yield running


@pytest.fixture
def settings(make_settings) -> Settings:  # type: ignore[no-untyped-def]
    return make_settings(context_token_threshold=50_000, tool_policy="allow")


def conversation_on(
    server: FakeServer, store: Store, settings: Settings, **kwargs: Any
) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return Conversation(settings, store, client=client, **kwargs)


@pytest.fixture
def chat(server: FakeServer, store: Store, settings: Settings) -> Iterator[Conversation]:
    session = store.create_session("steer")
    store.append_rows(session, chat_rows(6))
    conversation = conversation_on(server, store, settings, session_id=session)
    yield conversation
    conversation.close()


def test_preview_touches_nothing(chat: Conversation, store: Store) -> None:
    session = str(chat.session_id)
    before, rows, tables = snapshot(store, session), list(chat.history.rows), counts(store)
    result = chat.preview_compaction("keep the parser")
    assert result.changed and result.rows[0].role == "compacted"
    assert "Fix the parser" in result.summary
    assert (snapshot(store, session), chat.history.rows, counts(store)) == (before, rows, tables)


def test_engine_preview_is_the_forced_compaction_and_writes_nothing(store: Store) -> None:
    engine = CompactionEngine(100_000, summariser=FakeSummariser())  # type: ignore[arg-type]
    rows = chat_rows(6)
    result = engine.preview(rows, focus="the parser")
    forced = engine.compact(rows, force=True, focus="the parser")
    assert result.changed and result.rows == forced.rows
    assert not engine.compact(rows).changed  # under the trigger: only forced it compacts


def test_accept_applies_the_preview(chat: Conversation, store: Store) -> None:
    session = str(chat.session_id)
    result = chat.preview_compaction()
    applied = chat.accept_compaction(result)
    assert applied == result
    assert store.load_active(session) == list(result.rows) == chat.history.rows
    assert [c["kind"] for c in store.list_compactions(session)] == ["summary"]


def test_edit_applies_the_users_text_and_keeps_the_code_kept_facts(
    chat: Conversation, store: Store
) -> None:
    result = chat.preview_compaction()
    applied = chat.accept_compaction(result, text="We fixed the parser; the tests come next.")
    text = store.load_active(str(chat.session_id))[0].content
    assert text.startswith("We fixed the parser; the tests come next.\n\n# Recorded facts")
    assert "Fix the parser" not in text
    assert applied.summary == text and chat.history.rows[0].content == text


def test_discard_leaves_everything(chat: Conversation, store: Store) -> None:
    session = str(chat.session_id)
    before, tables = snapshot(store, session), counts(store)
    result = chat.preview_compaction()
    chat.steering.discard()
    with pytest.raises(NbchatError, match="not the compaction previewed last"):
        chat.accept_compaction(result)
    assert (snapshot(store, session), counts(store)) == (before, tables)


def test_accept_after_the_history_changed_is_refused(chat: Conversation, store: Store) -> None:
    result = chat.preview_compaction()
    list(chat.send("one more thing"))
    before = snapshot(store, str(chat.session_id))
    with pytest.raises(NbchatError) as refused:
        chat.accept_compaction(result)
    assert str(refused.value) == (
        "The history changed since the preview (12 rows then, 14 now), so nothing was "
        "compacted. Preview again (/compact)."
    )
    assert snapshot(store, str(chat.session_id)) == before


def test_an_edited_summary_over_the_trigger_is_refused_until_forced(
    chat: Conversation, store: Store
) -> None:
    session = str(chat.session_id)
    before = snapshot(store, session)
    result = chat.preview_compaction()
    huge = "remember this " * 43_000  # 602,000 characters: ~200,000 tokens
    with pytest.raises(NbchatError) as refused:
        chat.accept_compaction(result, text=huge)
    warning = chat.steering.edit_warning(result, huge)
    assert re.fullmatch(
        r"The edited summary is ~[\d,]+ tokens: the history would be ~[\d,]+ tokens, over the "
        r"compaction trigger \(37,500 of the 50,000 budget\), so the next message compacts it "
        r"again\.",
        warning,
    )
    assert str(refused.value) == (
        f"{warning} Nothing was changed. Shorten the summary, or accept anyway with "
        "accept_compaction(result, text, force=True)."
    )
    assert snapshot(store, session) == before
    assert chat.steering.edit_warning(result, "We fixed the parser.") == ""
    applied = chat.accept_compaction(result, text=huge, force=True)
    assert applied.tokens_after > 200_000
    assert store.load_active(session)[0].content.startswith("remember this")


def test_undo_compaction_brings_the_history_back(chat: Conversation, store: Store) -> None:
    session = str(chat.session_id)
    rows, before = list(chat.history.rows), active_ids(store, session)
    chat.accept_compaction(chat.preview_compaction())
    outcome = chat.undo_compaction()
    assert outcome.done and outcome.rows_restored == 12 - 4
    assert chat.history.rows == rows and active_ids(store, session) == before
    assert outcome.message.startswith(f"Compaction {outcome.record_id} undone: 8 row(s) are back")


def test_compact_now_still_compacts_at_once(chat: Conversation, store: Store) -> None:
    list(chat.compact_now())
    assert chat.history.rows[0].role == "compacted"
    assert len(store.list_compactions(str(chat.session_id))) == 1


def test_undo_over_the_trigger_warns_and_waits_for_force(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session = store.create_session("big")
    store.append_rows(session, chat_rows(6))
    chat = conversation_on(
        server, store, settings.replace(context_token_threshold=1500), session_id=session
    )
    chat.accept_compaction(chat.preview_compaction())
    compacted = snapshot(store, session)
    outcome = chat.undo_compaction()
    assert not outcome.done and outcome.tokens_after >= outcome.trigger
    back = 12 - (len(chat.history) - 1)  # every row the summary stands in for
    assert outcome.warning.startswith(
        f"Undoing compaction {outcome.record_id} brings back {back} row(s): the history would "
        f"be ~{outcome.tokens_after:,} tokens, over the compaction trigger (1,125 of the 1,500 "
        "budget), so the next message compacts it again."
    )
    assert outcome.message.endswith("Undo anyway with undo_compaction(force=True).")
    assert snapshot(store, session) == compacted
    assert chat.undo_compaction(force=True).done
    assert chat.history.rows == chat_rows(6)
    chat.close()


def test_undo_from_a_kernel_that_does_not_hold_the_session_is_refused(
    chat: Conversation, server: FakeServer, store: Store, settings: Settings
) -> None:
    chat.accept_compaction(chat.preview_compaction())
    other = conversation_on(server, Store(store.path), settings, session_id=chat.session_id)
    assert other.read_only
    with pytest.raises(SessionLockedError) as refused:
        other.undo_compaction()
    assert "another chat in this same process" in str(refused.value)
    assert "so the compaction was not undone" in str(refused.value)
    assert chat.history.rows[0].role == "compacted"
    other.close()


# The command line


EMBEDDED_TRIGGER = "over the compaction trigger (5,376 of the 7,168 budget)"  # 8,192 - 1,024


def test_cli_undo_compact_without_a_server_judges_by_the_embedded_models_budget(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No base_url, no threshold, nothing running: the embedded model's window decides, not the
    # 10,000 of an unknown server (~6,100 tokens would pass under its 7,500 trigger).
    with closing(Store(home / "nbchat.db")) as db:
        session = db.create_session("cli")
        db.append_rows(session, chat_rows(10, size=900))
        summarised(db, session)
    assert main(["undo-compact", session]) == 1
    assert EMBEDDED_TRIGGER in capsys.readouterr().err
    assert main(["undo-compact", session, "--force"]) == 0


def test_undo_before_connecting_judges_by_the_embedded_models_budget(
    store: Store, make_settings: Any
) -> None:
    session = store.create_session("embedded")
    store.append_rows(session, chat_rows(10, size=900))
    summarised(store, session)
    chat = Conversation(make_settings(base_url=None), store, session_id=session)
    try:
        outcome = chat.undo_compaction()
        assert not outcome.done and EMBEDDED_TRIGGER in outcome.warning
        assert chat.budget.threshold_if_known() == 7_168  # the meter's budget too
    finally:
        chat.close()


def test_cli_undo_compact_restores_the_rows(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with closing(Store(home / "nbchat.db")) as db:
        session = db.create_session("cli")
        db.append_rows(session, chat_rows(2))
        before = active_ids(db, session)
        record = summarised(db, session)
    assert main(["undo-compact", session]) == 0
    assert capsys.readouterr().out.startswith(f"Compaction {record} undone: 2 row(s) are back")
    with closing(Store(home / "nbchat.db")) as db:
        assert active_ids(db, session) == before


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("none", "has no compaction to undo."),
        ("held", "is open for writing in another kernel (pid "),
        ("big", "over the compaction trigger"),
    ],
)
def test_cli_undo_compact_refuses_clearly(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    setup: str,
    message: str,
) -> None:
    db = Store(home / "nbchat.db")
    session = db.create_session("cli")
    db.append_rows(session, chat_rows(6))
    if setup != "none":
        summarised(db, session)
    if setup == "held":
        assert db.acquire_lease(session)
    if setup == "big":
        monkeypatch.setenv("NBCHAT_CONTEXT_TOKEN_THRESHOLD", "1500")
    before = snapshot(db, session)
    assert main(["undo-compact", session]) == 1
    error = capsys.readouterr().err
    assert error.startswith("nbchat: ") and message in error
    assert snapshot(db, session) == before
    if setup == "big":
        assert main(["undo-compact", session, "--force"]) == 0
        assert db.load_active(session) == chat_rows(6)
    db.close()


# The widget


@pytest.fixture
def ui(server: FakeServer, store: Store, settings: Settings) -> Iterator[ChatUI]:
    yield from widget_on(server, store, settings)


def widget_on(server: FakeServer, store: Store, settings: Settings) -> Iterator[ChatUI]:
    session = store.create_session("widget")
    store.append_rows(session, chat_rows(6))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    chat = ChatUI(settings, store=store, client=client, session_id=session)
    yield chat
    chat.close()


def shown(ui: ChatUI) -> str:
    return shown_text(ui.messages.box)


def visible_buttons(ui: ChatUI) -> list[str]:
    return [b.description for b in buttons(ui.messages.box) if b.layout.display != "none"]


def proposed(ui: ChatUI, command: str | None = None) -> PreviewCard:
    if command is None:
        ui.press_compact()
    else:
        ui.send(command)
    assert ui.wait(20)
    card = ui.preview_card()
    assert card is not None
    return card


def test_compact_shows_a_preview_and_changes_nothing(ui: ChatUI, store: Store) -> None:
    session = str(ui.conversation.session_id)
    before, tables = snapshot(store, session), counts(store)
    card = proposed(ui)
    text = shown(ui)
    assert "Proposed compaction</b> (nothing has changed yet): 8 rows → 1 summary; ~" in text
    assert "Summary written by the model" in text and "Fix the parser" in text
    assert {"▸ Kept by code (facts)", "▸ The 8 rows it replaces"} <= set(visible_buttons(ui))
    assert "Recorded facts" in text and "<b>user</b>: question 0 yyy" in text
    assert {"Accept", "Edit", "Discard"} <= set(visible_buttons(ui))
    assert card.decision == "" and not card.editing
    assert (snapshot(store, session), counts(store)) == (before, tables)


def test_the_preview_shows_the_checkpoint_in_sections_at_the_chats_type_scale(
    ui: ChatUI,
) -> None:
    proposed(ui)
    text = shown(ui)
    assert '<div class="nbchat-checkpoint"><details open><summary>Goal</summary>' in text
    assert "<h2>" not in text


def test_a_summary_that_only_repeats_itself_is_shown_as_not_kept(
    server: FakeServer, ui: ChatUI
) -> None:
    # What the 135M test model writes: one line in every section.
    line = "The robot saw the painting first and decided to finish the painting."
    repeated = {key: [line, line] for key in json.loads(SUMMARY)} | {"goal": line}
    server.responder = lambda body: Reply(
        text=json.dumps(repeated) if is_summary_request(body) else "ok"
    )
    card = proposed(ui)
    text = shown(ui)
    assert "None kept: what the model wrote repeated itself" in text
    assert line not in card.editor.value
    assert "Recorded facts" in text


def test_accept_in_the_widget_compacts_and_the_card_offers_undo(ui: ChatUI, store: Store) -> None:
    session = str(ui.conversation.session_id)
    before = active_ids(store, session)
    card = proposed(ui, "/compact keep the parser")
    card.accept()
    assert ui.wait(20)
    assert card.decision == "accepted"
    assert store.load_active(session)[0].role == "compacted"
    assert {"Undo", "▸ What was replaced"} <= set(visible_buttons(ui))
    ui.press_undo()
    assert ui.wait(20)
    assert active_ids(store, session) == before
    assert ui.conversation.history.rows == chat_rows(6)
    assert "Compaction 1 undone: 8 row(s) are back" in shown(ui)
    assert "Undone at" in shown(ui) and "Undo" not in visible_buttons(ui)


def test_edit_in_the_widget_applies_the_edited_text(ui: ChatUI, store: Store) -> None:
    card = proposed(ui)
    card.edit("Only the parser matters.")
    assert card.editing
    card.accept()
    assert ui.wait(20)
    summary = store.load_active(str(ui.conversation.session_id))[0].content
    assert summary.startswith("Only the parser matters.\n\n# Recorded facts")


def test_an_edited_summary_over_the_trigger_asks_first_in_the_widget(
    ui: ChatUI, store: Store
) -> None:
    session = str(ui.conversation.session_id)
    before = snapshot(store, session)
    card = proposed(ui)
    card.edit("remember this " * 43_000)
    card.accept()
    assert ui.wait(20)
    confirmation = ui.compaction.confirmation
    assert confirmation is not None
    assert "over the compaction trigger (37,500 of the 50,000 budget)" in shown(ui)
    assert card.decision == "" and card.editing  # still open, to shorten the text
    assert snapshot(store, session) == before
    confirmation.confirm()
    assert ui.wait(20)
    assert card.decision == "accepted"
    assert store.load_active(session)[0].content.startswith("remember this")


def test_discard_in_the_widget_leaves_everything(ui: ChatUI, store: Store) -> None:
    session = str(ui.conversation.session_id)
    before, tables = snapshot(store, session), counts(store)
    card = proposed(ui)
    card.discard()
    assert ui.wait(20)
    assert card.decision == "discarded"
    assert "Compaction discarded; nothing was changed." in shown(ui)
    assert (snapshot(store, session), counts(store)) == (before, tables)
    card.accept()  # a decided card does nothing more
    assert ui.wait(20)
    assert (snapshot(store, session), counts(store)) == (before, tables)


def test_accept_after_a_new_message_is_refused_in_the_widget(
    ui: ChatUI, store: Store, server: FakeServer
) -> None:
    card = proposed(ui)
    ui.send("something new")
    assert ui.wait(20)
    before = snapshot(store, str(ui.conversation.session_id))
    card.accept()
    assert ui.wait(20) is False  # refused, and said so to the cell too
    assert card.decision == "refused"
    assert "The history changed since the preview (12 rows then, 14 now)" in shown(ui)
    assert snapshot(store, str(ui.conversation.session_id)) == before


def test_undo_over_the_trigger_asks_first_in_the_widget(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    for ui in widget_on(server, store, settings.replace(context_token_threshold=1500)):
        session = str(ui.conversation.session_id)
        proposed(ui).accept()
        assert ui.wait(20)
        compacted = snapshot(store, session)
        ui.send("/undo-compact")
        assert ui.wait(20)
        confirmation = ui.compaction.confirmation
        assert confirmation is not None
        assert "over the compaction trigger (1,125 of the 1,500 budget)" in shown(ui)
        assert snapshot(store, session) == compacted
        confirmation.confirm()
        assert ui.wait(20)
        assert ui.conversation.history.rows == chat_rows(6)
        assert store.load_active(session) == chat_rows(6)


def test_a_stored_compaction_card_shows_what_it_replaced_and_undo_while_latest(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session = store.create_session("stored")
    store.append_rows(session, chat_rows(2))
    first = summarised(store, session)
    store.append_rows(session, chat_rows(2))
    summarised(store, session)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    ui = ChatUI(settings, store=store, client=client, session_id=session)
    assert visible_buttons(ui).count("Undo") == 1  # only on the latest
    views = [b for b in buttons(ui.messages.box) if b.description.endswith("What was replaced")]
    assert len(views) == 2
    views[-1].click()
    assert "summary of 2 rows" in shown(ui)  # the first summary, replaced by the second
    ui.press_undo()
    assert ui.wait(20)
    assert visible_buttons(ui).count("Undo") == 1  # now the first compaction's
    assert store.plan_undo(session).record_id == first
    ui.close()


def test_after_undoing_a_prune_the_transcript_shows_the_original_output(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session = store.create_session("pruned")
    rows = [
        user("read it"),
        tool_call(("c1", "read_file", {"path": "a"})),
        tool_result("c1", "the original output " * 20),
        assistant("done"),
    ]
    store.append_rows(session, rows)
    placeholder = Row("tool", "[placeholder for the pruned output]", "c1", "read_file", "")
    pruned = CompactionResult(
        rows=(rows[0], rows[1], placeholder, rows[3]),
        layer="prune",
        reason="test",
        tokens_before=300,
        tokens_after=100,
        edit=Edit(replacements=MappingProxyType({2: placeholder})),
    )
    apply_compaction(store, session, pruned, expected_active=4)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    ui = ChatUI(settings, store=store, client=client, session_id=session)
    ui.send("/undo-compact")
    assert ui.wait(20)
    assert store.load_active(session) == rows
    assert "the original output" in shown(ui)
    assert "placeholder for the pruned output" not in shown(ui)
    ui.close()


def test_a_compaction_made_after_an_undo_gets_its_own_card(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    session = store.create_session("again")
    store.append_rows(session, chat_rows(4))
    summarised(store, session, keep_tail=2)  # "summary of 6 rows", undone below
    store.undo_compaction(session)
    summarised(store, session, keep_tail=6)  # "summary of 2 rows": it sits before the first
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    ui = ChatUI(settings, store=store, client=client, session_id=session)
    cards = [b for b in buttons(ui.messages.box) if b.description == "Undo"]
    offered = [b for b in cards if b.layout.display != "none"]
    assert len(cards) == 2 and len(offered) == 1
    text = shown(ui)
    assert (
        text.index("summary of 2 rows") < text.index("summary of 6 rows") < text.index("Undone at")
    )
    ui.press_undo()
    assert ui.wait(20)
    assert store.load_active(session) == chat_rows(4)
    ui.close()


def pruned_session(store: Store) -> tuple[str, list[Row], CompactionResult]:
    session = store.create_session("pruned")
    rows = [
        user("read it"),
        tool_call(("c1", "read_file", {"path": "a"})),
        tool_result("c1", "the original output " * 20),
        assistant("done"),
        user("thanks"),
        assistant("welcome"),
    ]
    store.append_rows(session, rows)
    placeholder = Row("tool", "[placeholder for the pruned output]", "c1", "read_file", "")
    result = CompactionResult(
        rows=(rows[0], rows[1], placeholder, *rows[3:]),
        layer="prune",
        reason="test",
        tokens_before=300,
        tokens_after=100,
        edit=Edit(replacements=MappingProxyType({2: placeholder})),
    )
    return session, rows, result


def test_a_pruned_output_reads_back_whole_after_its_placeholder_was_summarised(
    store: Store,
) -> None:
    session, rows, pruned = pruned_session(store)
    apply_compaction(store, session, pruned, expected_active=len(rows))
    summarised(store, session, keep_tail=2)  # archives the placeholder too
    found = store.find_tool_result(session, "c1")
    assert found is not None and found.row == rows[2]


def test_a_pruned_output_reads_back_whole_after_an_undo_and_a_second_prune(store: Store) -> None:
    session, rows, pruned = pruned_session(store)
    apply_compaction(store, session, pruned, expected_active=len(rows))
    store.undo_compaction(session)
    apply_compaction(store, session, pruned, expected_active=len(rows))
    found = store.find_tool_result(session, "c1")
    assert found is not None and found.row == rows[2]
    assert store.load_active(session) == list(pruned.rows)


def test_an_automatic_compaction_card_shows_what_it_replaced_and_undoes(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    for ui in widget_on(server, store, settings.replace(context_token_threshold=1500)):
        session = str(ui.conversation.session_id)
        before = active_ids(store, session)
        ui.send("and now?")
        assert ui.wait(20)
        assert ui.conversation.history.rows[0].role == "compacted"  # automatic, before the reply
        view = next(b for b in buttons(ui.messages.box) if b.description == "▸ What was replaced")
        view.click()
        assert "<b>user</b>: question 0 yyy" in shown(ui)
        ui.press_undo()
        assert ui.wait(20)
        confirmation = ui.compaction.confirmation
        assert confirmation is not None  # the history is back over the trigger: asked first
        confirmation.confirm()
        assert ui.wait(20)
        assert active_ids(store, session)[: len(before)] == before
        rows = ui.conversation.history.rows
        assert rows[len(before)] == user("and now?") and rows[-1] == assistant("ok")

"""The transcript's saved copy: the transcript output carries its key in its metadata, and the
model-only `SavedCopy` widget carries the same key and sends the transcript to front ends that
keep a notebook document: whole when one loads, then what each turn changed (checked end to end
in the real browser by tests/test_browser_tools.py and tests/test_notebook7.py; its front-end
code alone in chromium here). Bytes, never timings: a turn's traffic follows what it added."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from factories import assistant, user
from fakeserver import FakeServer, Reply
from helpers import RecordingComm, from_front_end, recording_comms, transcript_bytes
from hypothesis import given
from hypothesis import strategies as st
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.display import display

from nbchat.config import Settings
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.ui import ChatUI
from nbchat.ui import transcript as transcript_module
from nbchat.ui.transcript import (
    ESM,
    METADATA_KEY,
    SavedCopy,
    Transcript,
    build_transcript,
    delta,
    render_message,
    render_transcript,
)


def test_the_saved_copy_follows_the_transcript_output_by_the_key_in_its_metadata(
    shell: CapturingDisplayPublisher, store: Store, make_settings: Any
) -> None:
    settings: Settings = make_settings(context_token_threshold=50_000)
    with recording_comms(), FakeServer() as server:
        server.enqueue(Reply(text="The answer is MARKER-7."))
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        ui = ChatUI(settings, store=store, client=client)
        try:
            display(ui)
            _widget, transcript = shell.outputs
            key = transcript["transient"]["display_id"]
            saved = ui.transcript.saved
            assert saved is not None
            assert transcript["metadata"] == {METADATA_KEY: key}
            assert (saved.key, saved.html) == (key, transcript["data"]["text/html"])

            ui.send("hello there")
            assert ui.wait(20)
            update = shell.outputs[-1]
            assert update["update"] is True
            assert update["metadata"] == {METADATA_KEY: key}
            assert saved.html == update["data"]["text/html"]
            assert "hello there" in saved.html and "MARKER-7" in saved.html
        finally:
            ui.close()
    assert saved.comm is None  # closed with the chat


def test_the_front_end_code_looks_for_the_same_metadata_key() -> None:
    assert f'const KEY = "{METADATA_KEY}";' in ESM
    assert "export default { initialize };" in ESM


FILLER = "The loader reads each file once and keeps the parsed frame in memory. " * 8


def scripted_turns(server: FakeServer, ui: ChatUI, turns: range) -> None:
    for turn in turns:
        server.enqueue(Reply(text=f"Answer {turn:03d}. {FILLER}"))
        ui.send(f"Question {turn:03d}: how does the loader work? {FILLER[:120]}")
        assert ui.wait(20)


def test_once_a_front_end_keeps_the_notebook_a_turn_sends_what_it_added_not_the_session(
    shell: CapturingDisplayPublisher,
    store: Store,
    make_settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scripted session longer than the transcript's window (made small here): the bytes a
    turn sends once the window slides are within 2x the first turn's (they were 2x the whole
    transcript, growing with the session), and no display update carries the whole again."""
    monkeypatch.setattr(transcript_module, "TRANSCRIPT_LIMIT", 10)
    settings: Settings = make_settings(context_token_threshold=10**9)
    with recording_comms(), FakeServer() as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        ui = ChatUI(settings, store=store, client=client)
        try:
            display(ui)
            saved = ui.transcript.saved
            assert saved is not None
            key = ui.transcript.display_id

            def sent() -> int:
                return transcript_bytes(shell.outputs, key, saved.comm.comm_id)

            from_front_end(saved, {"kind": "hello", "document": True})
            before = sent()
            scripted_turns(server, ui, range(1, 2))
            first = sent() - before
            scripted_turns(server, ui, range(2, 12))
            before = sent()
            scripted_turns(server, ui, range(12, 13))
            last = sent() - before
            whole = len(saved.html)
        finally:
            ui.close()
    assert "earlier messages not shown" in saved.html  # the window slid
    assert last <= 2 * first
    assert last < whole / 2
    assert [o for o in shell.outputs if o["update"]] == []  # the notebook's front end keeps it


def test_without_a_front_end_that_keeps_the_notebook_display_updates_carry_the_transcript(
    shell: CapturingDisplayPublisher, store: Store, make_settings: Any
) -> None:
    """nbclient runs no widget code and says nothing; VS Code's says it has no notebook
    document. Either way the display update is what reaches the output, so it keeps going."""
    settings: Settings = make_settings(context_token_threshold=10**9)
    with recording_comms(), FakeServer() as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        ui = ChatUI(settings, store=store, client=client)
        try:
            display(ui)
            saved = ui.transcript.saved
            assert saved is not None
            scripted_turns(server, ui, range(1, 2))  # nobody said hello yet
            from_front_end(saved, {"kind": "hello", "document": True})  # JupyterLab
            from_front_end(saved, {"kind": "hello", "document": False})  # and VS Code
            scripted_turns(server, ui, range(2, 3))
        finally:
            ui.close()
    updates = [o["data"]["text/html"] for o in shell.outputs if o["update"]]
    assert len(updates) == 2
    assert "Question 001" in updates[0] and "Answer 002" in updates[1]
    assert updates[1] == saved.html


def test_a_front_end_that_loads_gets_the_whole_transcript_once_then_only_changes() -> None:
    """The protocol on its own: hello → the whole (to every front end); an update → a delta
    from the version before; a front end that missed one asks again and gets the whole."""
    first = Transcript("<div>head 1", ("<p>a</p>", "<p>b</p>"), (1, 2))
    second = Transcript("<div>head 2", ("<p>b</p>", "<p>c</p>"), (2, 3))
    with recording_comms():
        saved = SavedCopy("key-1", first)
        saved.update(second)  # nobody listens yet: nothing sent
        from_front_end(saved, {"kind": "hello", "document": True})
        third = Transcript("<div>head 3", ("<p>b</p>", "<p>c</p>", "<p>d</p>"), (2, 3, 4))
        saved.update(third)
        saved.update(third)  # unchanged: nothing sent
        from_front_end(saved, {"kind": "resend"})
        from_front_end(saved, {"kind": "something else"})
        sent = [
            content for comm_id, content in RecordingComm.custom if comm_id == saved.comm.comm_id
        ]
        saved.close()
    assert sent == [
        {"kind": "full", "version": 1, "head": "<div>head 2", "rows": ["<p>b</p>", "<p>c</p>"]},
        {
            "kind": "delta",
            "base": 1,
            "version": 2,
            "head": "<div>head 3",
            "start": 0,
            "kept": 2,
            "rows": ["<p>d</p>"],
        },
        {"kind": "full", "version": 2, "head": "<div>head 3", "rows": list(third.rows)},
    ]


def transcripts() -> st.SearchStrategy[tuple[Transcript, Transcript]]:
    """Two transcripts of one session: row ids unique and ascending, some rows re-rendered."""
    ids = st.lists(st.integers(0, 40), unique=True, max_size=12).map(sorted)

    def pair(old: list[int], new: list[int], changed: set[int]) -> tuple[Transcript, Transcript]:
        before = tuple(f"<p>{i}.0</p>" for i in old)
        after = tuple(f"<p>{i}.{int(i in changed)}</p>" for i in new)
        return Transcript("<div>", before, tuple(old)), Transcript("<div>", after, tuple(new))

    return st.builds(pair, ids, ids, st.sets(st.integers(0, 40)))


@given(transcripts())
def test_a_delta_rebuilds_the_new_rows_from_the_old(pair: tuple[Transcript, Transcript]) -> None:
    old, new = pair
    start, kept, added = delta(old, new)
    assert 0 <= start <= len(old.rows) and 0 <= kept <= len(old.rows) - start
    assert old.rows[start : start + kept] + added == new.rows


def test_a_delta_after_a_turn_keeps_the_shown_rows_and_adds_the_new_ones() -> None:
    old = Transcript("<div>", ("a", "b", "c", "d"), (1, 2, 3, 4))
    new = Transcript("<div>", ("c", "d", "e", "f"), (3, 4, 5, 6))
    assert delta(old, new) == (2, 2, ("e", "f"))
    other_session = Transcript("<div>", ("x",), (9,))
    assert delta(old, other_session) == (4, 0, ("x",))


# The front-end code in a page of Debian's chromium, with the model and the notebook document
# it reads played by plain objects: one output marked with the key, one other output.
START_FRONT_END = """
async ([esm, key, initial, withDocument]) => {
  const url = URL.createObjectURL(new Blob([esm], { type: "text/javascript" }));
  const code = await import(url);
  const listeners = [];
  const sent = [];
  const outputs = [
    { output_type: "display_data", data: { "text/html": initial },
      metadata: { nbchat_transcript: key } },
    { output_type: "display_data", data: { "text/html": "<p>mine</p>" }, metadata: {} },
  ];
  const list = {
    get length() { return outputs.length; },
    get: (j) => outputs[j],
    set: (j, value) => { outputs[j] = value; },
  };
  const cells = { length: 1, get: () => ({ outputs: list }) };
  const model = {
    get: (name) => (name === "key" ? key : undefined),
    on: (event, callback) => { if (event === "msg:custom") listeners.push(callback); },
    send: (content) => sent.push(content),
    widget_manager: withDocument ? { context: { model: { cells } } } : {},
  };
  code.default.initialize({ model });
  window.frontEnd = { listeners, sent, outputs };
  return sent.splice(0);
}
"""
DELIVER = """
(message) => {
  for (const listener of window.frontEnd.listeners) listener(message, []);
  const [transcript, other] = window.frontEnd.outputs;
  return { sent: window.frontEnd.sent.splice(0), html: transcript.data["text/html"],
           other: other.data["text/html"], metadata: transcript.metadata };
}
"""


class FrontEnd:
    """The page's front-end code wired to a `SavedCopy` as a comm would wire them: what the
    kernel sends is delivered in order, and what the page sends back reaches the kernel."""

    def __init__(self, page: Any, saved: SavedCopy) -> None:
        self.page, self.saved, self.seen = page, saved, 0
        self.html = ""

    def start(self, initial: str, *, document: bool = True) -> list[Any]:
        arguments = [ESM, self.saved.key, initial, document]
        said: list[Any] = self.page.evaluate(START_FRONT_END, arguments)
        for content in said:
            from_front_end(self.saved, content)
        return said

    def kernel_sent(self) -> list[Any]:
        mine = [c for comm_id, c in RecordingComm.custom if comm_id == self.saved.comm.comm_id]
        new, self.seen = mine[self.seen :], len(mine)
        return new

    def sync(self) -> str:
        """Deliver until neither side has anything more to say; the marked output's HTML."""
        while messages := self.kernel_sent():
            for message in messages:
                result = self.page.evaluate(DELIVER, message)
                assert (result["other"], result["metadata"]) == (
                    "<p>mine</p>",
                    {METADATA_KEY: self.saved.key},
                )
                self.html = result["html"]
                for content in result["sent"]:
                    from_front_end(self.saved, content)
        return self.html


def entries_of(rows: list[tuple[Row, dict[str, Any] | None]], first_id: int = 1) -> list[Any]:
    return [(first_id + i, row, info) for i, (row, info) in enumerate(rows)]


def built(rows: list[tuple[Row, dict[str, Any] | None]], first_id: int = 1) -> Transcript:
    return build_transcript(entries_of(rows, first_id), lambda e: render_message(e[1], e[2]))


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(120)
def test_the_front_end_code_writes_what_the_kernel_sends_into_the_notebook_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whole, then turn by turn as the window slides, across a session switch, and after a
    missed change: the marked output always holds exactly `render_transcript` of the rows."""
    from browser import CHROMIUM_ARGS, find_chromium
    from playwright.sync_api import sync_playwright

    monkeypatch.setattr(transcript_module, "TRANSCRIPT_LIMIT", 4)
    rows: list[tuple[Row, dict[str, Any] | None]] = [(user("**hello** there"), None)]
    with recording_comms(), sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(find_chromium()), args=CHROMIUM_ARGS
        )
        try:
            saved = SavedCopy("key-7", built(rows))
            front = FrontEnd(browser.new_page(), saved)
            assert front.start("<p>as saved in the file</p>") == [
                {"kind": "hello", "document": True}
            ]
            assert front.sync() == render_transcript(rows)
            for turn in range(4):
                rows += [(user(f"question {turn}"), None), (assistant(f"`answer` {turn}"), None)]
                saved.update(built(rows))
                assert front.sync() == render_transcript(rows)
            summary = (
                Row("compacted", "the story so far"),
                {"rows_replaced": 6, "tokens_before": 90, "tokens_after": 9},
            )
            rows = [summary, *rows[-2:]]
            saved.update(built(rows, first_id=50))  # a new session, or a compaction's rows
            assert front.sync() == render_transcript(rows)
            saved.update(built([*rows, (user("missed"), None)], first_id=50))
            front.kernel_sent()  # this change never reaches the page
            rows += [(user("missed"), None), (assistant("and then"), None)]
            saved.update(built(rows, first_id=50))
            assert front.sync() == render_transcript(rows)  # it asked for the whole again
        finally:
            browser.close()
        saved.close()


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(120)
def test_front_end_code_without_a_notebook_document_says_so_and_writes_nothing() -> None:
    from browser import CHROMIUM_ARGS, find_chromium
    from playwright.sync_api import sync_playwright

    with recording_comms(), sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(find_chromium()), args=CHROMIUM_ARGS
        )
        try:
            saved = SavedCopy("key-8", built([(user("hi"), None)]))
            front = FrontEnd(browser.new_page(), saved)
            assert front.start("<p>old</p>", document=False) == [
                {"kind": "hello", "document": False}
            ]
            assert saved.needs_display_updates
            assert front.kernel_sent() == []
        finally:
            browser.close()
        saved.close()

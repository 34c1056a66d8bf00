"""The acting tools in this process: a real IPython shell (the kernel's namespace and history),
the chat widget over it with its document widget answered by a page in this process
(`InProcessPage`, carrying out requests as `kernelpage.apply_request` does), the test server
scripting the model's calls, and the real store.

What the kernel tests (`test_acting_kernel.py`) cover end to end is not repeated here; this file
checks the parts: a cell's state against what the kernel ran, the variables whose cell changed,
"Accept all", an edit that waits while the user edits the cell, no document (the code to copy,
with the reason), a run's text (displays by type and size, bounded streams, masked secrets),
the policy and the setting, and the facts a compaction keeps.
"""

from __future__ import annotations

import atexit
import base64
import json
import struct
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from helpers import from_front_end, recording_comms, shown_text
from kernelpage import PageCell, apply_request

from nbchat.compaction.facts import collect_facts, parse_facts, render_facts
from nbchat.compaction.findings import ACTING_TOOLS as FACT_TOOLS
from nbchat.config import Settings
from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.tools.acting import ACTING_TOOLS
from nbchat.tools.cells import Cell, Execution, Origin, cell_states, stale_variables
from nbchat.tools.execution import Capture, describe, name_display, run_source
from nbchat.ui.acting import NotebookDocument
from nbchat.ui.chatui import ChatUI


@pytest.fixture
def ipython(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """IPython's shell, as the kernel's (history in memory), and the chat's `current_shell`."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    # IPython puts its namespace in sys.modules["__main__"]; multiprocessing's spawn (other
    # tests) needs the real one back.
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    monkeypatch.setattr("nbchat.ui.chatui.current_shell", lambda: shell)
    try:
        yield shell
    finally:
        shell.atexit_operations()
        atexit.unregister(shell.atexit_operations)
        InteractiveShell.clear_instance()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


def make_chat(server: FakeServer, store: Store, settings: Settings) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return ChatUI(settings, store=store, client=client)


class InProcessPage:
    """The page, here: the document widget's requests are carried out at once and answered."""

    def __init__(self, document: NotebookDocument, *cells: PageCell) -> None:
        self.document = document
        self.cells = list(cells)
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        document.send = self._receive  # type: ignore[method-assign]
        self._say({"kind": "hello", "client": "page", "document": True})
        self.push()

    def push(self) -> None:
        cells = [cell.describe() for cell in self.cells]
        order = [cell["id"] for cell in cells]
        self._say({"kind": "cells", "client": "page", "order": order, "changed": cells})

    def edit_by_hand(self, cell_id: str, source: str) -> None:
        next(c for c in self.cells if c.id == cell_id).source = source
        self.push()

    def _receive(self, content: dict[str, Any], buffers: Any = None) -> None:
        if content.get("kind") != "request":
            return
        with self.lock:
            self.requests.append(content)
            reply = apply_request(self.cells, content)
        self._say({"kind": "done", "client": "page", "id": content["id"], **reply})
        self.push()

    def _say(self, content: dict[str, Any]) -> None:
        from_front_end(self.document, content)


def call(call_id: str, name: str, **arguments: object) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(arguments))


def results(ui: ChatUI, name: str) -> list[str]:
    return [
        r.content for r in ui.conversation.history.rows if r.role == "tool" and r.tool_name == name
    ]


def run_cell(shell: Any, cell: PageCell) -> None:
    """Run the page's cell in the shell as the kernel runs it (with its id), numbered."""
    shell.run_cell(cell.source, store_history=True, cell_id=cell.id)
    cell.number = shell.execution_count - 1


def test_the_acting_tools_named_in_the_facts_are_the_real_ones() -> None:
    assert {"list_cells", *FACT_TOOLS} == set(ACTING_TOOLS)


def test_a_cell_is_marked_never_run_edited_since_it_ran_and_run_out_of_order() -> None:
    cells = [
        Cell("a", "code", "x = 1", 3),
        Cell("b", "code", "y = x + 10", 2),  # above ran later: out of order
        Cell("c", "markdown", "# notes"),
        Cell("d", "code", "z = 5"),
        Cell("e", "code", "w = 9", 40),  # this kernel never ran 40
    ]
    executions = {3: Execution(3, "a", "x = 1"), 2: Execution(2, "b", "y = x + 1")}
    notes = cell_states(cells, executions, history=["", "", "", ""])
    assert notes == [
        "",
        "edited since it ran as In [2]; ran out of order (a cell above it ran later)",
        "",
        "never ran",
        "shows In [40], which this kernel has not run (it ran before a restart)",
    ]


def test_a_variable_whose_cell_changed_or_went_is_named_with_its_cell() -> None:
    cells = [Cell("a", "code", "x = 2", 1), Cell("b", "code", "y = 3", 2)]
    executions = {1: Execution(1, "a", "x = 1"), 2: Execution(2, "b", "y = 3")}
    origins = {
        "x": Origin(1, "a"),
        "y": Origin(2, "b"),
        "gone": Origin(5, "deleted-cell"),
        "mine": Origin(0, "", run=1),
    }
    assert stale_variables(origins, cells, executions) == [
        "gone: set by In [5], whose cell is no longer in the notebook",
        "x: set by In [1] (cell a), which has been edited since it ran",
    ]


def test_the_listing_tells_the_model_what_the_kernel_actually_ran(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any
) -> None:
    with recording_comms():
        ui = make_chat(server, store, make_settings(tool_policy="allow"))
        try:
            first, second = (
                PageCell("aaaa1111", "code", "x = 1"),
                PageCell("bbbb2222", "code", "y = x"),
            )
            page = InProcessPage(ui.acting.document, first, second)
            run_cell(ipython, first)
            run_cell(ipython, second)
            page.edit_by_hand(first.id, "x = 100")
            server.enqueue(Reply(tool_calls=[call("l1", "list_cells")]), Reply(text="Seen."))
            server.enqueue(
                Reply(tool_calls=[call("v1", "list_notebook_variables")]), Reply(text="Seen.")
            )
            ui.send("what state is my notebook in?")
            assert ui.wait(30)
            ui.send("and my variables?")
            assert ui.wait(30)
        finally:
            ui.close()
    (listing,) = results(ui, "list_cells")
    assert "1. aaaa1111 code, In [1]: x = 100 — edited since it ran as In [1]" in listing
    assert "2. bbbb2222 code, In [2]: y = x\n" in listing
    assert "- x: set by In [1] (cell aaaa1111), which has been edited since it ran" in listing
    (variables,) = results(ui, "list_notebook_variables")
    assert variables.endswith(
        "Set by a cell that changed or is gone:\n"
        "- x: set by In [1] (cell aaaa1111), which has been edited since it ran"
    )


def test_accept_all_accepts_the_rest_of_the_replys_edits_each_shown_with_its_diff(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any
) -> None:
    cells = [PageCell(f"cell{i}", "code", f"v{i} = {i}") for i in range(3)]
    edits = [call(f"e{i}", "edit_cell", cell=f"cell{i}", new=f"v{i} = {i * 10}") for i in range(3)]
    server.enqueue(Reply(tool_calls=edits), Reply(text="All three."))
    with recording_comms():
        ui = make_chat(server, store, make_settings(tool_policy="ask"))
        try:
            page = InProcessPage(ui.acting.document, *cells)
            ui.send("multiply them by ten")
            card = ui.wait_for_approval(30)
            assert card is not None
            assert [b.description for b in _buttons(card)] == ["Accept", "Accept all", "Reject"]
            card.approve_all()
            assert ui.wait(30)
            shown = shown_text(ui)
        finally:
            ui.close()
    assert [cell.source for cell in page.cells] == ["v0 = 0", "v1 = 10", "v2 = 20"]
    assert shown.count("approved (and the rest of this reply's)") == 3
    assert "+v2 = 20" in shown


def test_an_edit_does_not_land_on_a_cell_the_user_edited_while_it_waited(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any
) -> None:
    cell = PageCell("cell1", "code", "total = 1")
    server.enqueue(
        Reply(tool_calls=[call("e1", "edit_cell", cell="cell1", new="total = 2")]),
        Reply(text="Tried."),
    )
    with recording_comms():
        ui = make_chat(server, store, make_settings(tool_policy="ask"))
        try:
            page = InProcessPage(ui.acting.document, cell)
            ui.send("set it to 2")
            assert ui.wait_for_approval(30) is not None
            page.edit_by_hand("cell1", "total = 1  # my note")
            ui.approve()
            assert ui.wait(30)
        finally:
            ui.close()
    assert page.cells[0].source == "total = 1  # my note"
    assert page.requests == []
    (result,) = results(ui, "edit_cell")
    assert result.startswith("Not edited: cell 1 (id cell1) changed while the edit waited")


def test_without_a_notebook_document_the_code_is_shown_to_copy_with_the_reason(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any
) -> None:
    server.enqueue(
        Reply(tool_calls=[call("i1", "insert_cell", source="print('hi')")]), Reply(text="Here.")
    )
    with recording_comms():
        ui = make_chat(server, store, make_settings(tool_policy="allow"))
        try:
            ui.send("put it in a cell")
            assert ui.wait(30)
            shown = [w.value for w in _html_widgets(ui) if "insert_cell" in w.value]
        finally:
            ui.close()
    (result,) = results(ui, "insert_cell")
    assert result == (
        "Not inserted: no page holding this notebook is connected to the kernel (it runs under "
        "nbclient, papermill or a script, or the notebook's page has not loaded the chat yet). "
        "The code is shown to the user in the chat, to copy:\n```python\nprint('hi')\n```"
    )
    card = next(value for value in shown if "nbchat-acting" in value)
    assert 'class="nbchat-copy"' in card and "<details open>" in card


def test_a_page_without_a_document_is_named_as_the_reason(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any
) -> None:
    with recording_comms():
        ui = make_chat(server, store, make_settings())
        try:
            document = ui.acting.document
            from_front_end(document, {"kind": "hello", "client": "vscode", "document": False})
            assert document.why_absent().startswith("this front end (VS Code, Voilà")
        finally:
            ui.close()


@pytest.mark.parametrize(
    ("policy", "ran"), [("deny", False), ("allow", True)], ids=["deny", "allow"]
)
def test_running_code_follows_the_tool_policy(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any, policy: str, ran: bool
) -> None:
    server.enqueue(Reply(tool_calls=[call("r1", "run_code", code="hit = True")]), Reply(text="."))
    with recording_comms():
        ui = make_chat(server, store, make_settings(tool_policy=policy))
        try:
            ui.send("run it")
            assert ui.wait(30)
        finally:
            ui.close()
    assert ("hit" in ipython.user_ns) is ran
    (result,) = results(ui, "run_code")
    assert result.startswith("Finished: run 1" if ran else "Refused: the user's tool policy denies")


def test_the_acting_tools_can_be_turned_off(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any
) -> None:
    with recording_comms():
        ui = make_chat(server, store, make_settings(notebook_acting=False))
        ui.close()
    assert ui.acting is None
    assert not set(ACTING_TOOLS) & set(ui.conversation.tools.names())
    assert "describe_variable" in ui.conversation.tools  # reading stays


@pytest.mark.parametrize("acting", [True, False], ids=["serving-the-kernel", "waiting"])
def test_an_interrupt_the_os_hands_to_another_thread_still_stops_wait(
    ipython: Any, store: Store, make_settings: Any, acting: bool
) -> None:
    # The kernel's Interrupt is a process signal; the OS may deliver it to any thread, say the
    # one streaming the reply. Python then runs the handler on the main thread only once that
    # wakes: `ui.wait()` must wake while the reply stalls, or the Interrupt waits for the reply.
    import signal

    class Interrupted(Exception):
        pass

    def interrupted(_signum: int, _frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupted)
    elsewhere = threading.Thread(
        target=lambda: signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
    )
    try:
        with FakeServer(default_reply=Reply(fault="stall")) as stalled, recording_comms():
            ui = make_chat(stalled, store, make_settings(notebook_acting=acting))
            assert (ui.acting is not None) is acting
            # Should the signal never be handled, Stop ends the wait (and the test fails).
            guard = threading.Timer(60, ui.stop)
            try:
                ui.send("hi")
                assert stalled.wait_for_chat_requests(1, timeout=30)
                threading.Timer(0.2, elsewhere.start).start()
                guard.start()
                with pytest.raises(Interrupted):
                    ui.wait()
                assert ui.busy  # the reply still stalls: the wait ended for the signal alone
            finally:
                guard.cancel()
                ui.close()
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_run_names_each_display_by_type_and_size_and_masks_secrets(ipython: Any) -> None:
    png = _png(640, 480)
    ipython.user_ns["png"] = png
    code = (
        "from IPython.display import Image, HTML, display\n"
        "display(Image(data=png))\n"
        "display(HTML('<b>bold</b>'))\n"
        "print('OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz012345')\n"
        "None"
    )
    ran = run_source(ipython, code, limit=1000, label="run 1")
    text = describe(ran, "Finished: run 1.")
    assert f"- image/png 640×480 ({len(png)} bytes)" in text
    assert "- text/html (11 characters)" in text
    assert "sk-abcdefghijklmnopqrstuvwxyz012345" not in text
    assert name_display({"image/png": base64.b64encode(png).decode()}).startswith(
        "image/png 640×480"
    )


def test_the_models_code_that_ends_assigning_a_name_shows_its_value(ipython: Any) -> None:
    # `total = …` as the last line read back nothing; the model's code shows the value, a
    # cell's run does not (a notebook would not), and neither does a line binding several.
    ran = run_source(ipython, "total = 6 * 7", limit=1000, label="run 1", last_assignment=True)
    assert ran.value_data["text/plain"] == "42"
    assert "total (assigned last):\n```\n42\n```" in describe(ran, "Finished: run 1.")
    ran = run_source(ipython, "total += 1", limit=1000, label="run 2", last_assignment=True)
    assert ran.value_data["text/plain"] == "43"
    as_cell = run_source(ipython, "total = 1", limit=1000, label="In [3]")
    assert not as_cell.value_data and "(no output)" in describe(as_cell, "Finished.")
    several = run_source(ipython, "a, b = 1, 2", limit=1000, label="run 4", last_assignment=True)
    assert not several.value_data and not several.assigned
    expression = run_source(ipython, "total", limit=1000, label="run 5", last_assignment=True)
    assert expression.value_data["text/plain"] == "1" and not expression.assigned


def test_a_runs_streams_keep_their_head_and_tail_within_the_limit() -> None:
    import io

    elsewhere = io.StringIO()
    capture = Capture(100, elsewhere)
    capture.write("A" * 60 + "B" * 500 + "C" * 60)
    other = threading.Thread(target=lambda: capture.write("from another thread"))
    other.start()
    other.join()
    text = capture.text()
    assert text.startswith("A" * 50) and text.endswith("C" * 50)
    assert "[... 520 characters cut ...]" in text
    assert elsewhere.getvalue() == "from another thread"  # not the run's output


def test_the_facts_keep_what_the_assistant_did_to_the_notebook_across_compactions() -> None:
    def turn(call_id: str, name: str, arguments: dict[str, Any], result: str) -> list[Row]:
        calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
        return [
            Row("assistant_full", "", "", "", json.dumps(calls)),
            Row("tool", result, call_id, name, ""),
        ]

    rows = [
        Row("user", "add a plot cell", "", "", ""),
        *turn(
            "c1",
            "insert_cell",
            {"source": "df.plot()"},
            "Inserted a code cell at position 4 (id 3f2a1b2c), below the chat.",
        ),
        *turn(
            "c2",
            "edit_cell",
            {"cell": "3f2a1b2c", "new": "df.plot(kind='bar')"},
            "Edited cell 4 (id 3f2a1b2c):\n```diff\n```",
        ),
        *turn("c3", "run_cell", {"cell": "4"}, "Finished: cell 3f2a1b2c (In [7]) ran in 0.1 s."),
        *turn(
            "c4",
            "run_code",
            {"code": "df['profit'].sum()"},
            "Error in run 2: KeyError: 'profit'\n```\n```",
        ),
        *turn(
            "c5",
            "run_code",
            {"code": "while True: pass", "timeout": 1},
            "Timed out: run 3 was interrupted after 1 s (KeyboardInterrupt).",
        ),
    ]
    facts = collect_facts(rows)
    assert dict(facts.cells) == {
        "cell 3f2a1b2c": "inserted by the assistant (code): df.plot(); edited by the assistant; "
        "run by the assistant as In [7]: finished",
        "run 2": "failed: KeyError: 'profit' — df['profit'].sum()",
        "run 3": "interrupted at its time limit — while True: pass",
    }
    block = render_facts(facts)
    assert "- run 2: failed: KeyError: 'profit' — df['profit'].sum()" in block
    assert parse_facts(block).cells == facts.cells  # carried into the next compaction


def _png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    return (
        b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    )


def _buttons(card: Any) -> list[Any]:
    from helpers import buttons

    return [b for b in buttons(card.widget) if b.description]


def _html_widgets(ui: ChatUI) -> list[Any]:
    import ipywidgets as widgets

    found: list[Any] = []

    def walk(widget: Any) -> None:
        if isinstance(widget, widgets.HTML):
            found.append(widget)
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(ui)
    return found


def test_the_run_card_shows_hostile_code_exactly_as_text(
    ipython: Any, server: FakeServer, store: Store, make_settings: Any
) -> None:
    code = "print('<img src=x onerror=alert(1)>')  # \u202eevil"
    server.enqueue(Reply(tool_calls=[call("h1", "run_code", code=code)]), Reply(text="."))
    with recording_comms():
        ui = make_chat(server, store, make_settings(tool_policy="ask"))
        try:
            ui.send("run this")
            card = ui.wait_for_approval(30)
            assert card is not None
            question = card.question.value
            ui.deny()
            assert ui.wait(30)
        finally:
            ui.close()
    assert "<img" not in question and "&lt;img src=x onerror=alert(1)&gt;" in question
    assert "\u202e" not in question and "\\u202e" in question  # the bidi override, visible
    assert results(ui, "run_code")[0].startswith("Refused: the user did not approve")

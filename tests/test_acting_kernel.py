"""The assistant acting on a notebook, end to end: a real ipykernel (jupyter_client), the chat
in it talking real HTTP to the test server, the real store, and a page (`kernelpage.FakePage`)
holding the notebook and answering the chat's document widget over the kernel's own wire.

Each test runs the chat's cell as a page does, scripts the model's calls on the test server
and checks what the notebook and the chat hold afterwards: an inserted cell, an edit shown as a
diff and accepted or rejected, code run with its output, an error, a time limit and Stop, a run
queued behind a user's cell, and a rewind that takes the chat and the notebook back together,
leaving alone the cell the user edited by hand.

A cell that waits on the chat (`ui.wait()`) holds the kernel's main thread, where the page's
answers are handled; so while the chat needs the page, the test waits on the test server (a
turn's next request) or on the page (its answers), and only then on the chat.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeserver import FakeServer, Reply
from kernelpage import FakePage, KernelSession, kernel_environment

CHAT = "from nbchat import ChatUI\n\nui = ChatUI()\nui"
TURN_SECONDS = 60


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def start_kernel(fake: FakeServer, tmp_path: Path, policy: str) -> KernelSession:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    env = kernel_environment(
        tmp_path / "home",
        tmp_path,
        {
            "NBCHAT_BASE_URL": f"{fake.url}/v1",
            "NBCHAT_MODEL": "fake-model",
            "NBCHAT_TOOL_POLICY": policy,
            "NBCHAT_CONTEXT_TOKEN_THRESHOLD": "50000",
            "NBCHAT_WORKSPACE": str(workspace),
        },
    )
    return KernelSession(env, workspace)


@pytest.fixture
def allow(fake: FakeServer, tmp_path: Path) -> Iterator[KernelSession]:
    kernel = start_kernel(fake, tmp_path, "allow")
    yield kernel
    kernel.close()


@pytest.fixture
def ask(fake: FakeServer, tmp_path: Path) -> Iterator[KernelSession]:
    kernel = start_kernel(fake, tmp_path, "ask")
    yield kernel
    kernel.close()


def open_notebook(kernel: KernelSession, *sources: str) -> FakePage:
    """The page's notebook: `sources` (each run), then the chat's cell (run: the chat shows)."""
    page = kernel.page
    for source in sources:
        page.run(page.add(source))
    page.run(page.add(CHAT))
    assert page.document_comm, "the chat's document widget never opened"
    return page


def call(call_id: str, name: str, **arguments: object) -> tuple[str, str, str]:
    return (call_id, name, json.dumps(arguments))


def tool_result(kernel: KernelSession, name: str) -> str:
    """The newest result of tool `name` in the chat's history."""
    code = (
        f"print([r.content for r in ui.conversation.history.rows "
        f"if r.role == 'tool' and r.tool_name == {name!r}][-1])"
    )
    return kernel.run(code).stdout.strip()


def send(kernel: KernelSession, text: str) -> None:
    kernel.run(f"ui.send({text!r})")


def finish(kernel: KernelSession) -> None:
    kernel.run(f"assert ui.wait({TURN_SECONDS})")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_inserted_cell_lands_in_the_notebook_below_the_chats_own_cell(
    allow: KernelSession, fake: FakeServer
) -> None:
    page = open_notebook(allow, "x = 41")
    fake.enqueue(
        Reply(tool_calls=[call("c1", "insert_cell", source="y = x + 1")]), Reply(text="Done.")
    )
    send(allow, "put that in a new cell")
    assert fake.wait_for_chat_requests(2, TURN_SECONDS)
    finish(allow)
    sources = [cell.source for cell in page.cells]
    assert sources == ["x = 41", CHAT, "y = x + 1"]  # below the chat's own cell
    result = tool_result(allow, "insert_cell")
    assert result.startswith(f"Inserted a code cell at position 3 (id {page.cells[2].id[:8]})")
    assert "below the chat" in result


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_edit_waits_for_accept_shows_its_diff_and_a_rejected_one_changes_nothing(
    ask: KernelSession, fake: FakeServer
) -> None:
    page = open_notebook(ask, "x = 41\nprint(x)")
    first = page.cells[0]
    fake.enqueue(
        Reply(tool_calls=[call("e1", "edit_cell", cell=first.id, old="41", new="42")]),
        Reply(text="Changed."),
        Reply(tool_calls=[call("e2", "edit_cell", cell="1", new="x = 0")]),
    )
    send(ask, "make it 42")
    question = ask.run("card = ui.wait_for_approval(30)\nprint(card.question.value)").stdout
    shown = html.unescape(question)
    assert "Accept this edit?" in shown and f"cell 1 (id {first.id[:8]})" in shown
    assert "-x = 41" in shown and "+x = 42" in shown and " print(x)" in shown
    assert page.find(first.id).source == "x = 41\nprint(x)"  # nothing lands before Accept
    ask.run("ui.approve()")
    assert page.wait_answered(1)
    assert fake.wait_for_chat_requests(2, TURN_SECONDS)
    finish(ask)
    assert page.find(first.id).source == "x = 42\nprint(x)"
    assert "-x = 41\n+x = 42" in tool_result(ask, "edit_cell")

    send(ask, "set it to zero")
    ask.run("assert ui.wait_for_approval(30) is not None\nui.deny()")
    finish(ask)  # a declined edit ends the turn: the model is not asked again
    assert len(fake.chat_requests()) == 3
    assert page.find(first.id).source == "x = 42\nprint(x)"
    assert tool_result(ask, "edit_cell").startswith("Refused: the user did not approve")
    last = ask.run("print(ui.conversation.history.rows[-1].content)").stdout
    assert last.strip() == "Not done: you declined edit_cell. Say what to do instead."
    assert len(page.requests) == 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_code_runs_with_its_output_its_error_and_its_time_limit_in_the_users_namespace(
    allow: KernelSession, fake: FakeServer
) -> None:
    open_notebook(allow, "x = 41")
    fake.enqueue(
        Reply(tool_calls=[call("r1", "run_code", code="print(x * 2)\ny = x + 1\ny")]),
        Reply(text="ran"),
        Reply(tool_calls=[call("r2", "run_code", code="def f():\n    return 1 / 0\nf()")]),
        Reply(text="failed"),
        Reply(
            tool_calls=[
                call(
                    "r3",
                    "run_code",
                    code="import time\nwhile True:\n    time.sleep(0.05)",
                    timeout=1,
                )
            ]
        ),
        Reply(text="interrupted"),
    )
    send(allow, "run it")
    finish(allow)  # the code runs here, on the main thread, while the cell waits on the chat
    ran = tool_result(allow, "run_code")
    assert ran.startswith("Finished: run 1 ran in")
    assert "stdout:\n```\n82\n```" in ran and "result:\n```\n42\n```" in ran
    assert allow.run("print(y)").stdout == "42\n"  # in the user's namespace

    send(allow, "divide")
    finish(allow)
    failed = tool_result(allow, "run_code")
    assert failed.startswith("Error in run 2: ZeroDivisionError: division by zero")
    assert 'File "<run 2>", line 2, in f' in failed and "nbchat" not in failed

    send(allow, "loop")
    finish(allow)
    timed_out = tool_result(allow, "run_code")
    assert timed_out.startswith("Timed out: run 3 was interrupted after 1 s (KeyboardInterrupt)")
    assert allow.run("print(x)").stdout == "41\n"  # the kernel goes on


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stop_interrupts_the_models_code_while_it_runs_on_the_kernels_loop(
    allow: KernelSession, fake: FakeServer, tmp_path: Path
) -> None:
    page = open_notebook(allow)
    started = tmp_path / "started"
    os.mkfifo(started)
    code = f"open({str(started)!r}, 'w').write('x')\nwhile True:\n    pass"
    fake.enqueue(Reply(tool_calls=[call("s1", "run_code", code=code)]), Reply(text="stopped"))
    send(allow, "spin")  # the cell ends: the code runs on the kernel's loop, between cells
    with started.open() as running:
        assert running.read() == "x"  # the model's code is running now
    page.click("Stop")
    finish(allow)
    stopped = tool_result(allow, "run_code")
    assert stopped.startswith("Error: stopped by the user; run 1 was interrupted")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_models_code_waits_for_the_users_running_cell_and_the_chat_says_so(
    allow: KernelSession, fake: FakeServer
) -> None:
    open_notebook(allow)
    fake.enqueue(
        Reply(tool_calls=[call("q1", "run_code", code="print(marker)")]), Reply(text="ran")
    )
    # The user's cell sends, waits until the chat says the code is queued, then finishes.
    allow.run(
        "import threading\n"
        "told = threading.Event()\n"
        "said = ui.acting.runner.on_queued\n"
        "ui.acting.runner.on_queued = lambda subject: (said(subject), told.set())\n"
        "marker = 'set before the run'\n"
        "ui.send('run it')\n"
        "assert told.wait(30)\n"
        "marker = 'set by the cell the run waited for'\n"
    )
    assert fake.wait_for_chat_requests(2, TURN_SECONDS)
    finish(allow)
    ran = tool_result(allow, "run_code")
    assert ran.startswith("Finished: run 1 ran in")
    assert "for a running cell to finish first" in ran.splitlines()[0]
    assert "set by the cell the run waited for" in ran
    shown = allow.run("from helpers import shown_text\nprint(shown_text(ui))").stdout
    assert "waits for your running cell to finish" in shown


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_rewind_takes_the_chat_and_the_notebook_back_and_leaves_a_hand_edited_cell_alone(
    allow: KernelSession, fake: FakeServer
) -> None:
    page = open_notebook(allow, "x = 41")
    first = page.cells[0]
    fake.enqueue(
        Reply(tool_calls=[call("i1", "insert_cell", source="p = 1")]),
        Reply(text="Added p."),
        Reply(
            tool_calls=[
                call("e1", "edit_cell", cell=first.id, new="x = 42"),
                call("i2", "insert_cell", source="q = 2"),
            ]
        ),
        Reply(text="Changed x, added q."),
    )
    send(allow, "add a cell for p")
    assert fake.wait_for_chat_requests(2, TURN_SECONDS)
    finish(allow)
    send(allow, "now change x and add q")
    assert fake.wait_for_chat_requests(4, TURN_SECONDS)
    finish(allow)
    p_cell = next(c for c in page.cells if c.source == "p = 1")
    assert [c.source for c in page.cells] == ["x = 42", CHAT, "q = 2", "p = 1"]
    page.edit_by_hand(p_cell.id, "p = 100  # mine")
    answered = len(page.requests)

    allow.run("ui.rewind(2)")  # back to before "add a cell for p"
    assert page.wait_answered(answered + 2)  # q removed, x restored; p not asked for
    finish(allow)
    assert [c.source for c in page.cells] == ["x = 41", CHAT, "p = 100  # mine"]
    state = allow.run(
        "from helpers import shown_text\n"
        "print(repr(ui.input.value), len(ui.conversation.history))\n"
        "print(shown_text(ui))"
    ).stdout
    assert state.startswith("'add a cell for p' 0\n")
    assert f"cell {p_cell.id[:8]} (inserted by the assistant): left alone: edited by hand" in state
    assert "(edited by the assistant): restored" in state
    assert "(inserted by the assistant): removed" in state
    exported = json.loads(
        allow.run("print(ui.store.export_json(ui.conversation.session_id))").stdout
    )
    assert [row["content"] for row in exported["rows"] if row["role"] == "user"] == [
        "add a cell for p",
        "now change x and add q",
    ]
    assert all(row["archived"] for row in exported["rows"])
    outcomes = sorted(change["outcome"] for change in exported["notebook_changes"])
    assert outcomes == [
        "left alone: edited by hand since the assistant changed it",
        "removed",
        "restored",
    ]

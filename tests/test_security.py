"""Security: model, tool and title text never becomes executable markup in the real widgets;
tools stay in the workspace and obey the policy; the API key leaks nowhere (the DB and its WAL,
exports, widget state, logs, a notebook run with `jupyter nbconvert --execute`); the embedded
model server listens on 127.0.0.1 only.

Covered elsewhere and not repeated: the renderer against the same XSS corpus (test_render.py);
`..`, absolute and symlinked paths for read_file, write_file and list_files, the shell's timeout
and Stop killing its whole process group, its secret-free environment (test_tools.py); the key
never in an error message (test_client.py); the server extension's endpoints refusing requests
without Jupyter's token (test_serverext.py).
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import subprocess
import sys
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import nbformat
import openai
import pytest
from factories import assistant
from fakeserver import FakeServer, Reply
from helpers import is_summary_request, shown_text
from ipywidgets.widgets.widget import _instances
from test_render import XSS_PAYLOADS, executable_parts

from nbchat.config import Settings
from nbchat.errors import ConfigError
from nbchat.history import ToolCall
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolExecutor, default_registry
from nbchat.ui import ChatUI
from nbchat.ui.render import STYLE
from nbchat.ui.view import ContextMeter


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as running:
        yield running


@pytest.fixture
def settings(make_settings: Any, server: FakeServer) -> Settings:
    return make_settings(
        base_url=server.url + "/v1", context_token_threshold=200_000, tool_policy="allow"
    )


def make_ui(server: FakeServer, store: Store, settings: Settings) -> ChatUI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    return ChatUI(settings, store=store, client=client, live_limit=1000)


def tree(widget: widgets.Widget) -> Iterator[widgets.Widget]:
    yield widget
    for child in getattr(widget, "children", ()):
        yield from tree(child)


def executable_markup(ui: ChatUI) -> list[str]:
    """Anything in the widget's HTML that could run code. nbchat's own stylesheet, and the
    inline styles of its own meter and status line (fixed text around numbers and escaped
    words), are the widget's, not the model's."""
    own = {id(ui.view.status)} | {id(w) for w in tree(ui) if isinstance(w, ContextMeter)}
    problems: list[str] = []
    for widget in tree(ui):
        if isinstance(widget, widgets.HTML | widgets.HTMLMath) and widget.value != STYLE:
            found = executable_parts(widget.value)
            if id(widget) in own:
                found = [problem for problem in found if not re.match(r"\w+\[style=", problem)]
            problems += found
        if getattr(widget, "description_allow_html", False):
            problems.append(f"{type(widget).__name__} renders its description as HTML")
    return problems


def run_command(ui: ChatUI, text: str) -> None:
    ui.send(text)
    ui.wait(20)  # False after the scripted failures (a cut reply), which is expected here
    if text == "/compact":  # it proposes a compaction first: accept it, as the user would
        card = ui.preview_card()
        assert card is not None
        card.accept()
        ui.wait(20)
    assert not ui.busy


# Untrusted text in the real widgets


@pytest.mark.timeout(120)
def test_no_payload_becomes_executable_anywhere_in_the_widget(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    corpus = "\n\n".join(XSS_PAYLOADS)
    (settings.workspace / "payloads.md").write_text(corpus)
    filler = "\n\nand some ordinary words " * 40  # enough history for a summary to shrink
    chat_replies = [Reply(reasoning=payload, text=payload + filler) for payload in XSS_PAYLOADS]
    chat_replies += [
        Reply(
            tool_calls=[
                ("x1", "read_file", json.dumps({"path": "payloads.md"})),
                ("x2", "read_file", json.dumps({"path": XSS_PAYLOADS[1]})),
                ("x3", XSS_PAYLOADS[12], json.dumps({"html": XSS_PAYLOADS[0]})),
            ]
        ),
        Reply(text=corpus),
    ]
    summary = json.dumps({"goal": corpus, "done": XSS_PAYLOADS, "next_steps": XSS_PAYLOADS})

    def answer(body: dict[str, Any]) -> Reply:
        return Reply(text=summary) if is_summary_request(body) else chat_replies.pop(0)

    server.responder = answer
    ui = make_ui(server, store, settings)
    for payload in XSS_PAYLOADS:
        run_command(ui, payload)
    run_command(ui, "read the payloads")
    run_command(ui, "/compact")
    for payload in (XSS_PAYLOADS[0], XSS_PAYLOADS[12]):
        run_command(ui, f"/rename {payload}")
    run_command(ui, "/sessions")
    run_command(ui, f"/model {XSS_PAYLOADS[1]}")
    first = str(ui.conversation.session_id)
    other = store.create_session(XSS_PAYLOADS[2])
    ui.refresh_sessions()
    rows = store.load_full(first)
    assert sum(1 for s in rows if s.row.role == "compacted") == 1
    assert [s.row for s in rows if s.row.role == "tool"][0].content == corpus
    assert executable_markup(ui) == []
    labels = [label for label, value in ui.session_choices if value == first]
    labels += [label for label, _ in ui.session_choices]
    assert XSS_PAYLOADS[12] in labels[0]  # plain text: the browser sets it as textContent
    assert any(XSS_PAYLOADS[2] in label for label in labels)
    for session_id in (other, first):  # and everything again, rebuilt from the store
        ui.switch_session(session_id)
        assert ui.wait(20)
        assert ui.conversation.session_id == session_id
        assert executable_markup(ui) == []
    ui.close()


@pytest.mark.timeout(30)
def test_an_approval_card_shows_hostile_arguments_as_text(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    command = XSS_PAYLOADS[1] + " " + XSS_PAYLOADS[0]
    server.enqueue(Reply(tool_calls=[("a1", "run_shell", json.dumps({"command": command}))]))
    ui = make_ui(server, store, settings.replace(tool_policy="ask"))
    ui.send("run it")
    card = ui.wait_for_approval(20)
    assert card is not None
    assert executable_markup(ui) == []
    assert shown_arguments(card.question.value) == {"command": command}
    ui.press_stop()
    assert ui.wait(20)
    ui.close()


def shown_arguments(card_html: str) -> Any:
    """The arguments an approval card shows in full (its one `<pre>`), read back as JSON."""
    [shown] = re.findall(r'<pre class="nbchat-exact">(.*?)</pre>', card_html, re.DOTALL)
    return json.loads(html.unescape(shown))


# Characters that are invisible or reorder what is displayed around them.
HIDDEN = (
    "\u202e\u202c\u2066\u2069\u200b\u200d\u2028\u2029\ufeff\u00ad\u00a0\u0085\x7f\x1b\U000e0041"
)


@pytest.mark.timeout(30)
def test_an_approval_card_shows_the_whole_command_exactly_as_it_runs(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    """`echo ok <RLO>; touch PWNED #<PDF>` displays as `echo ok # HCUOT ...`: a harmless echo.
    The card must show it all, without a click, every hidden character as an escape."""
    marker = settings.workspace / "PWNED"
    command = f"echo ok \u202e; touch {marker} #\u202c; : {HIDDEN} " + "x" * 3000
    arguments = json.dumps({"command": command})
    server.enqueue(Reply(tool_calls=[("a1", "run_shell", arguments)]), Reply(text="done"))
    ui = make_ui(server, store, settings.replace(tool_policy="ask"))
    ui.send("check it")
    card = ui.wait_for_approval(20)
    assert card is not None
    markup = "".join(w.value for w in tree(card.widget) if isinstance(w, widgets.HTML))
    assert "<details" not in markup  # nothing to click open
    raw = {c for c in markup if c in HIDDEN or unicodedata.category(c) in ("Cf", "Cc", "Zl", "Zp")}
    assert raw == {"\n"}  # the JSON's own line breaks, nothing else
    assert "\\u202e" in markup and "\\u202c" in markup and "x" * 3000 in markup
    assert shown_arguments(card.question.value) == json.loads(arguments)
    assert ".nbchat-exact { unicode-bidi: bidi-override; direction: ltr;" in STYLE
    ui.approve()
    assert ui.wait(20)
    assert marker.exists()  # what ran is what the card showed: the touch included
    assert ui.conversation.history.rows[-1] == assistant("done")
    ui.close()


# Tools: the workspace, the policy


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (root / "file-link.txt").symlink_to(outside / "secret.txt")
    (root / "dir-link").symlink_to(outside)
    return root


ESCAPES = ["..", "../outside/secret.txt", "sub/../../outside", "file-link.txt", "dir-link"]
ESCAPES += ["dir-link/secret.txt", "~/secret.txt"]


def escape_calls(workspace: Path) -> list[tuple[str, dict[str, Any]]]:
    absolute = str(workspace.parent / "outside" / "secret.txt")
    calls = []
    for path in [*ESCAPES, absolute]:
        calls += [
            ("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "pwned"}),
            ("edit_file", {"path": path, "old": "top", "new": "pwned"}),
            ("list_files", {"path": path}),
            ("search_files", {"pattern": "secret", "path": path}),
        ]
    return calls


def test_every_file_tool_refuses_every_way_out_of_the_workspace(workspace: Path) -> None:
    executor = ToolExecutor(default_registry(), workspace=workspace, policy="allow")
    outside = workspace.parent / "outside"
    for name, arguments in escape_calls(workspace):
        outcome = executor.execute(ToolCall("c1", name, json.dumps(arguments)))
        assert outcome.ok is False, (name, arguments)
        shown = arguments["path"]
        assert outcome.content == (
            f"Refused: {shown!r} is outside the workspace {workspace}. Use a path inside it."
        )
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"


def test_searching_the_workspace_never_reads_through_a_link_out_of_it(workspace: Path) -> None:
    executor = ToolExecutor(default_registry(), workspace=workspace, policy="allow")
    (workspace / "inside.txt").write_text("a secret of our own\n")
    outcome = executor.execute(ToolCall("c1", "search_files", json.dumps({"pattern": "secret"})))
    assert (outcome.ok, outcome.content) == (True, "inside.txt:1: a secret of our own")


SHELL_DENIED = (
    "Refused: the user's tool policy denies 'run_shell' (it changes files or runs commands). "
    "To allow it, set NBCHAT_TOOL_POLICY=allow, or NBCHAT_TOOL_POLICY=ask to approve each call "
    "in the widget."
)


def test_run_shell_never_runs_under_deny(
    server: FakeServer, store: Store, settings: Settings
) -> None:
    marker = settings.workspace / "ran"
    command = json.dumps({"command": f"touch {marker}"})
    server.enqueue(Reply(text="Touching it.", tool_calls=[("d1", "run_shell", command)]))
    ui = make_ui(server, store, settings.replace(tool_policy="deny"))
    run_command(ui, "touch it")
    assert ui.conversation.history.rows[2].content == SHELL_DENIED
    # The turn ends with the refusal in the user's terms, saying how to allow it, shown below
    # the words the model streamed before its call.
    reply = ui.conversation.history.rows[-1]
    assert reply.role == "assistant" and reply.content.startswith("Not done: your tool policy")
    assert "NBCHAT_TOOL_POLICY=allow" in reply.content
    shown = shown_text(ui.messages.box)
    assert shown.index("Touching it.") < shown.index("Not done: your tool policy denies run_shell")
    assert not marker.exists()
    ui.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("decision", ["Approve", "Deny"])
def test_run_shell_waits_under_ask_until_the_user_decides(
    server: FakeServer, store: Store, settings: Settings, decision: str
) -> None:
    marker = settings.workspace / "ran"
    server.enqueue(
        Reply(tool_calls=[("a1", "run_shell", json.dumps({"command": f"touch {marker}"}))]),
    )
    if decision == "Approve":  # a declined call ends the turn without asking the model
        server.enqueue(Reply(text="done"))
    ui = make_ui(server, store, settings.replace(tool_policy="ask"))
    ui.send("touch it")
    card = ui.wait_for_approval(20)
    assert card is not None and card.widget in ui.messages.box.children
    assert not marker.exists()  # waiting: nothing has run
    assert ui.busy
    [button] = [w for w in tree(card.widget) if getattr(w, "description", "") == decision]
    button.click()
    assert ui.wait(20)
    assert marker.exists() is (decision == "Approve")
    said = (
        "done"
        if decision == "Approve"
        else "Not done: you declined run_shell. Say what to do instead."
    )
    assert ui.conversation.history.rows[-1].content == said
    ui.close()


def test_a_script_without_an_approver_never_runs_run_shell_under_ask(
    workspace: Path,
) -> None:
    asked: list[ApprovalRequest] = []
    marker = workspace / "ran"
    executor = ToolExecutor(default_registry(), workspace=workspace, policy="ask")
    outcome = executor.execute(
        ToolCall("c1", "run_shell", json.dumps({"command": f"touch {marker}"}))
    )
    assert outcome.content == (
        "Refused: 'run_shell' needs approval and nothing here can ask for it (policy 'ask' "
        "without an approver). Set NBCHAT_TOOL_POLICY=allow to let it run."
    )
    assert not marker.exists() and asked == []


# Secrets


def every_widget_state() -> str:
    states = []
    for widget in list(_instances.values()):
        states.append(json.dumps(widget.get_state(), default=repr))
    return "\n".join(states)


@pytest.mark.timeout(120)
def test_the_api_key_appears_nowhere_after_a_full_session(
    server: FakeServer,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = f"sk-nbchat-marker-{uuid.uuid4().hex}"
    monkeypatch.setenv("NBCHAT_API_KEY", key)
    monkeypatch.setenv("OTHER_SERVICE_TOKEN", key)
    caplog.set_level(logging.DEBUG)  # nbchat, openai, httpx and httpcore, all of it
    settings = settings.replace(context_token_threshold=6000)
    (settings.workspace / "notes.txt").write_text("the notes\n" * 50)
    replies = [
        Reply(
            tool_calls=[
                ("k1", "run_shell", json.dumps({"command": "env; echo key=$NBCHAT_API_KEY"})),
                ("k2", "read_file", json.dumps({"path": "notes.txt"})),
            ]
        ),
        Reply(text="I looked. " + "detail " * 400),
        Reply(text="partial answer " * 20, chunk_size=10, fault="cut", cut_after=4),
        Reply(fault="overflow_openai"),
        Reply(text="after the compaction"),
    ]
    summary = json.dumps({"goal": "look around", "done": ["ran env", "read notes.txt"]})

    def answer(body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return Reply(text=summary)
        return replies.pop(0) if replies else Reply(text="more " * 300)

    server.responder = answer
    ui = ChatUI(settings)  # its own store and client, from the settings and the environment
    for text in ["look around", "go on", "and again", "one more", "/compact", "last one"]:
        run_command(ui, text)
    run_command(ui, "/export md")
    run_command(ui, "/export json")
    assert len(replies) == 0
    assert server.requests[-1].headers["authorization"] == f"Bearer {key}"  # it was used
    session_id = str(ui.conversation.session_id)
    store = ui.store
    kinds = [c["kind"] for c in store.list_compactions(session_id)]
    assert "summary" in kinds or "chunked" in kinds
    tool_rows = [s.row for s in store.load_full(session_id) if s.row.role == "tool"]
    assert tool_rows[0].content.startswith("exit code: 0\n") and "key=\n" in tool_rows[0].content
    exports = sorted(settings.workspace.glob("nbchat-*"))
    assert [p.suffix for p in exports] == [".json", ".md"]
    places = {
        "widget state": every_widget_state(),
        "repr and notebook output": repr(ui) + json.dumps(ui._repr_mimebundle_(), default=repr),
        "logs": caplog.text + "\n".join(repr(r.args) for r in caplog.records),
        "exports": "\n".join(p.read_text() for p in exports),
        "json export": store.export_json(session_id),
        "markdown export": store.export_markdown(session_id),
    }
    database = store.path
    files = [database, Path(f"{database}-wal")]
    places["database while open"] = "".join(p.read_bytes().decode("latin-1") for p in files)
    ui.close()
    store.close()
    places["database after close"] = database.read_bytes().decode("latin-1")
    # This openai ships its HTTP stack as httpx2 / httpcore2.
    loggers = {record.name.split(".")[0].rstrip("2") for record in caplog.records}
    assert {"nbchat", "openai", "httpx", "httpcore"} <= loggers
    assert {place: key in text for place, text in places.items()} == dict.fromkeys(places, False)


# A password in the base URL


def with_password(url: str, password: str) -> str:
    return url.replace("http://", f"http://someone:{password}@", 1)


@pytest.mark.parametrize("place", ["environment", "config.toml", "argument", "bad port"])
def test_a_password_in_the_base_url_is_refused_without_being_repeated_or_sent(
    server: FakeServer, home: Path, monkeypatch: pytest.MonkeyPatch, place: str
) -> None:
    password = f"pw-{uuid.uuid4().hex}"
    url = with_password(server.url + "/v1", password)
    source = {
        "environment": "environment variable NBCHAT_BASE_URL",
        "config.toml": str(home / "config.toml"),
        "argument": "argument",
        "bad port": "argument",
    }[place]
    overrides: dict[str, Any] = {}
    if place == "environment":
        monkeypatch.setenv("NBCHAT_BASE_URL", url)
    elif place == "config.toml":
        home.mkdir(parents=True)
        (home / "config.toml").write_text(f'base_url = "{url}"\n', encoding="utf-8")
    else:
        overrides["base_url"] = url if place == "argument" else url.replace("/v1", "99999/v1")
    with pytest.raises(ConfigError) as caught:
        ChatUI(**overrides)
    message = str(caught.value)
    assert password not in message
    if place == "bad port":
        assert message.startswith("base_url must be an http:// or https:// URL")
        return
    assert message == (
        f"base_url must not hold a user name or password (from {source}): nbchat would store "
        "it with every session and the server would get it instead of your API key. Set "
        f"base_url to {server.url}/v1 and the key in NBCHAT_API_KEY."
    )
    assert server.requests == []
    assert not (home / "nbchat.db").exists()


def test_the_advice_for_a_password_in_the_base_url_sends_the_key_as_bearer(
    server: FakeServer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"sk-nbchat-marker-{uuid.uuid4().hex}"
    monkeypatch.setenv("NBCHAT_API_KEY", key)
    monkeypatch.setenv("NBCHAT_BASE_URL", with_password(server.url + "/v1", key))
    with pytest.raises(ConfigError) as caught:
        Settings.load()
    advised = re.search(r"Set base_url to (\S+) and", str(caught.value))
    assert advised is not None
    monkeypatch.setenv("NBCHAT_BASE_URL", advised.group(1))
    server.enqueue(Reply(text="hello"))
    ui = ChatUI(notebook_tools=False)
    ui.send("hi")
    assert ui.wait(30)
    ui.close()
    chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert [r.headers["authorization"] for r in chats] == [f"Bearer {key}"]


def test_a_clients_password_is_never_stored_shown_or_logged_by_nbchat(
    server: FakeServer,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The user's own client is theirs to configure; what nbchat keeps and shows is nbchat's.
    password = f"pw-{uuid.uuid4().hex}"
    caplog.set_level(logging.DEBUG, logger="nbchat")
    client = openai.OpenAI(
        base_url=with_password(server.url + "/v1", password), api_key="k", max_retries=0
    )
    server.enqueue(Reply(text="hello"), Reply(fault="http500"))
    store = Store(settings.database_path)
    ui = ChatUI(settings, store=store, client=client)
    ui.send("hi")
    assert ui.wait(30)
    ui.send("again")
    assert ui.wait(30) is False  # the 500, printed with the server's address
    printed = capsys.readouterr().err
    assert f"{server.url}/v1" in printed
    assert ui.conversation.budget.connect().base_url == server.url + "/v1"
    shown = every_widget_state()
    ui.close()
    store.close()
    places = {
        "widget state": shown,
        "cell output": printed,
        "nbchat's logs": caplog.text,
        "database": settings.database_path.read_bytes().decode("latin-1"),
    }
    assert {place: password in text for place, text in places.items()} == dict.fromkeys(
        places, False
    )


# The embedded model server


def listening_addresses(pid: int) -> list[str]:
    """The local address of every TCP socket `pid` listens on (IPv4 as a.b.c.d, IPv6 as hex)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        match = re.fullmatch(r"socket:\[(\d+)\]", target)
        if match:
            inodes.add(match.group(1))
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                address = local.split(":")[0]
                if table == "tcp":
                    address = ".".join(str(b) for b in reversed(bytes.fromhex(address)))
                found.append(address)
    return found


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.timeout(120)
def test_the_embedded_model_server_listens_on_127_0_0_1_only(home: Path) -> None:
    from nbchat.embedded.server import start_server

    server = start_server("smollm", home=home, n_ctx=512, timeout=60)
    try:
        assert listening_addresses(server.pid) == ["127.0.0.1"]
    finally:
        server.stop()


NOTEBOOK_CELLS = [
    "import os\nfrom nbchat.ui import ChatUI\nui = ChatUI(context_token_threshold=50000, "
    "tool_policy='allow')\nui",
    "ui.send('show me the environment')\nassert ui.wait(60)\n"
    "print(ui.conversation.history.rows[2].content[:13])\nui.conversation.settings",
    "os.environ['NBCHAT_API_KEY'].startswith('sk-nbchat-marker-')",
]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_api_key_appears_nowhere_in_an_executed_notebook(
    server: FakeServer, home: Path, tmp_path: Path
) -> None:
    key = f"sk-nbchat-marker-{uuid.uuid4().hex}"
    server.enqueue(
        Reply(tool_calls=[("n1", "run_shell", json.dumps({"command": "env"}))]),
        Reply(text="That is the environment."),
    )
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS]
    )
    source = tmp_path / "secret.ipynb"
    nbformat.write(notebook, source)
    env = {name: value for name, value in os.environ.items() if not name.startswith("NBCHAT_")}
    env.update(
        NBCHAT_API_KEY=key,
        NBCHAT_HOME=str(home),
        NBCHAT_BASE_URL=server.url + "/v1",
        NBCHAT_WORKSPACE=str(tmp_path),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
    )
    jupyter = Path(sys.executable).parent / "jupyter"
    subprocess.run(
        [str(jupyter), "nbconvert", "--to", "notebook", "--execute", str(source)]
        + ["--output", "executed.ipynb"],
        env=env,
        check=True,
        capture_output=True,
        timeout=150,
    )
    executed = (tmp_path / "executed.ipynb").read_text()
    outputs = [cell["outputs"] for cell in json.loads(executed)["cells"]]
    assert "exit code: 0" in json.dumps(outputs[1])  # the tool ran in the kernel
    assert outputs[2][0]["data"]["text/plain"] == ["True"]  # with the key in its environment
    assert server.requests[-1].headers["authorization"] == f"Bearer {key}"
    assert key not in executed
    database = home / "nbchat.db"
    assert key not in database.read_bytes().decode("latin-1")

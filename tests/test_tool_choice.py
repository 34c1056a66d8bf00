"""A small model's turn over real HTTP to the fake server (issue 19): its tools described in
the system prompt, never sent as schemas; its first step asked in one token (the chat's own
messages, the reply opened as `{"tool": "`, a grammar of the allowed names); a forced call
when it leans to a tool, words under a text-only grammar when it leans to answering, when the
round is the last or when it only repeated a call; an answer after a tool result that names
nothing the result shows withdrawn and asked again, once; the shell never forced after "don't run";
`read_archived_output` allowed once something in the session is archived; Stop during the
first step ends the turn at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import openai
import pytest
from factories import tool_call, tool_result, user
from fakeserver import FakeServer, Reply
from fixtures_server import client_for
from helpers import run

from nbchat.compaction.prune import to_placeholder
from nbchat.config import Settings
from nbchat.conversation.events import Done, RowSaved
from nbchat.conversation.loop import Conversation
from nbchat.conversation.notes import (
    AFTER_FAILURES,
    AFTER_RESULTS,
    ASKED_AGAIN,
    EXTREMES,
    INVENTED,
    JUPYTER_REFERENCE,
    UNSHOWN,
)
from nbchat.conversation.reply import plan_request, request_system_prompt, request_tools
from nbchat.history import Row
from nbchat.llm.firststep import FIRST_STEP_OPENING
from nbchat.llm.reader import TextWithdrawn
from nbchat.stopping import StopSignal
from nbchat.store.rowsql import CompactionRecord
from nbchat.store.store import Store
from nbchat.tools import ToolContext, default_registry
from nbchat.tools.asking import looked_into
from nbchat.tools.choice import Here, aimed_call
from nbchat.tools.registry import Sight, Tool

CALL = '{"name": "read_file", "arguments": {"path": "notes.txt"}}'
LOOK = Reply(first_step={"read_file": 0.97, "none": 0.01, "list_files": 0.02})
ARGS = Reply(text='{"tool": "read_file", "arguments": {"path": "notes.txt"}}')


def conversation_on(
    server: FakeServer, store: Store, settings: Settings, tools: Any = None
) -> Conversation:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    chat = Conversation(settings, store, client=client, tools=tools)
    chat.new_session("t")
    return chat


def small(make_settings: Any, **changes: Any) -> Settings:
    return make_settings(
        tools_on_request=True, json_tool_fallback=True, tool_policy="deny", **changes
    )


def allowed(step: dict[str, Any]) -> list[str]:
    """The names a first step's grammar allows, besides none."""
    grammar = step["grammar"]
    inside = grammar[grammar.index("(") + 1 : grammar.index(")")]
    return sorted(name.strip('"') for name in inside.split(" | "))


def test_a_plain_question_is_answered_in_words_after_a_first_step_on_the_same_prompt(
    make_settings: Any, store: Store
) -> None:
    with FakeServer(default_reply=Reply(text="4")) as server:
        events = run(conversation_on(server, store, small(make_settings)), "Hi! What is 2 + 2?")
        (step,) = server.first_steps()
        (answer,) = server.chat_requests()
    assert "tools" not in answer and "tool_choice" not in answer
    assert "root ::=" in answer["grammar"]  # words: no call written as text
    # The tools are described to the first step only: the answer is written as in any chat.
    assert "- read_file(path, start_line?, end_line?)" in step["messages"][0]["content"]
    assert "read_file" not in answer["messages"][0]["content"]
    assert step["messages"][-2] == {"role": "user", "content": "Hi! What is 2 + 2?"}
    assert step["messages"][-1] == {"role": "assistant", "content": FIRST_STEP_OPENING}
    assert "read_file" in allowed(step) and "none" in allowed(step)
    assert "read_archived_output" not in allowed(step)
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    assert saved[-1] == Row("assistant", "4")


def test_a_first_step_that_leans_to_a_tool_writes_its_call_on_its_own_prompt(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    with FakeServer() as server:
        server.enqueue(LOOK, ARGS, Reply(text="It is on Thursday."))
        events = run(conversation_on(server, store, settings), "peek at my notes")
        (answer,) = server.chat_requests()  # no chat request for the call itself
        step, arguments = server.first_steps()  # the last round answers without asking
    assert arguments["messages"] == step["messages"][:-1]  # the same prompt, not reopened
    schema = arguments["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["tool"] == {"const": "read_file"}
    assert "tools" not in answer and "grammar" in answer
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    assert [row.role for row in saved] == ["user", "assistant_full", "tool", "assistant"]
    assert json.loads(saved[1].tool_args)[0]["function"] == {
        "name": "read_file",
        "arguments": '{"path": "notes.txt"}',
    }
    assert saved[-1] == Row("assistant", "It is on Thursday.")


@pytest.mark.parametrize(
    ("message", "told"),
    [
        ("when's the review meeting", True),  # names nothing here: told where its words are
        ("anything about the meeting in notes.txt", False),  # names a file: nothing more
        ("how do I run our review meeting better", False),  # how-to: general knowledge
        ("tips for a review meeting", False),  # about no meeting in particular
    ],
)
def test_a_first_step_is_told_which_files_hold_the_words_of_a_message_naming_nothing(
    make_settings: Any, store: Store, message: str, told: bool
) -> None:
    settings = small(make_settings, workspace_overview=True)
    (settings.workspace / "notes.txt").write_text("The review meeting is on Thursday.\n")
    (settings.workspace / "plan.md").write_text("Ship in March.\n")
    with FakeServer(default_reply=Reply(text="Thursday.")) as server:
        run(conversation_on(server, store, settings), message)
        (step,) = server.first_steps()
    context = step["messages"][-3]["content"]
    line = "Words of the message found in the workspace's files: review (notes.txt); meeting"
    assert (line in context) is told


def test_the_answer_after_a_tool_result_is_told_what_the_user_asked_in_their_words(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    asked = "peek at my notes,\n   when's the meeting?"
    with FakeServer() as server:
        server.enqueue(LOOK, ARGS, Reply(text="On Thursday."))
        run(conversation_on(server, store, settings), asked)
        (answer,) = server.chat_requests()
    *_, result, note = answer["messages"]
    assert result["role"] == "tool" and "Meeting on Thursday." in result["content"]
    # Not stored, sent last: the question on one line, so the model answers it.
    assert note["role"] == "system"
    assert note["content"].startswith("The user asked: peek at my notes, when's the meeting?\n")


@pytest.mark.parametrize(
    ("asked", "told"),
    [
        ("which city in my cities file is smallest?", True),
        ("what does my cities file say?", False),
    ],
)
def test_asked_for_a_smallest_the_answer_is_told_the_table_s_extremes_worked_out(
    make_settings: Any, store: Store, asked: str, told: bool
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    (settings.workspace / "cities.csv").write_text("city,people\nOslo,709000\nBergen,291000\n")
    reads = Reply(text='{"tool": "read_file", "arguments": {"path": "cities.csv"}}')
    with FakeServer() as server:
        server.enqueue(LOOK, reads, Reply(text="Bergen, with 291000."))
        run(conversation_on(server, store, settings), asked)
        (answer,) = server.chat_requests()
    note = answer["messages"][-1]["content"]
    # Only the extreme asked for: told both, a 1.5B model named the one told first.
    worked = EXTREMES.format(which="smallest") + "people: smallest 291000 (Bergen)."
    assert note.endswith("\n" + worked) is told
    assert (worked in note) is told


@pytest.mark.parametrize(
    ("answers", "kept", "asked"),
    [
        # Naming nothing the notes show: withdrawn, asked again with the other note.
        (["I have read your notes."], "It is on Thursday.", 2),
        # Asked again once only: the second answer is kept whatever it names, followed by
        # what the call read when it still names nothing of it.
        (
            ["I have read your notes.", "They are your notes."],
            "They are your notes.\n\n"
            "read_file `notes.txt` returned:\n```\nMeeting on Thursday.\n```",
            2,
        ),
        (["I have read your notes.", "Thursday."], "Thursday.", 2),
        # An answer from the result is kept at once.
        (["It is on Thursday."], "It is on Thursday.", 1),
    ],
)
def test_an_answer_naming_nothing_the_result_shows_is_asked_again_once(
    make_settings: Any, store: Store, answers: list[str], kept: str, asked: int
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    replies = [Reply(text=text) for text in answers]
    if len(replies) < asked:
        replies.append(Reply(text=kept))
    with FakeServer() as server:
        server.enqueue(LOOK, ARGS, *replies)
        events = run(conversation_on(server, store, settings), "when's the meeting, per my notes")
        requests = server.chat_requests()
    assert len(requests) == asked
    assert sum(isinstance(event, TextWithdrawn) for event in events) == asked - 1
    notes = [request["messages"][-1]["content"] for request in requests]
    assert [note.split("\n")[1] for note in notes] == [
        note.split("\n")[1] for note in ([AFTER_RESULTS] + [ASKED_AGAIN] * (asked - 1))
    ]
    answered = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant"]
    assert answered == [Row("assistant", kept)]  # the withdrawn answer is not stored


@pytest.mark.parametrize(
    ("answer", "quoted"),
    [
        # Copying the note, it says nothing of the failure: what the call returned follows.
        ("The tool call did not run, or failed: its result says why.", True),
        ("The disk is on fire, so the notes could not be read.", False),
    ],
)
def test_an_answer_saying_nothing_of_what_failed_is_followed_by_the_failure(
    make_settings: Any, store: Store, answer: str, quoted: bool
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    tools = default_registry()

    def read_notes(ctx: ToolContext) -> str:
        """Read the user's notes."""
        raise RuntimeError("disk on fire")

    tools.register(Tool.from_function(read_notes))
    looks = Reply(first_step={"read_notes": 0.97, "none": 0.03})
    reads = Reply(text='{"tool": "read_notes", "arguments": {}}')
    with FakeServer() as server:
        server.enqueue(looks, reads, Reply(text=answer))
        chat = conversation_on(server, store, settings, tools)
        events = run(chat, "what's in my notes?")
        (request,) = server.chat_requests()
    assert request["messages"][-1]["content"] == AFTER_FAILURES
    (saved,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant"]
    if quoted:
        assert saved.content.startswith(
            answer + "\n\nread_notes returned:\n```\n"
            "'read_notes' failed: RuntimeError: disk on fire\n"
        )
    else:
        assert saved.content == answer


@pytest.mark.parametrize(
    ("answer", "invented"),
    [
        # A file nobody named and that is not here: withdrawn, asked again saying which.
        ("Thursday, as planning.md shows.", "planning.md"),
        ("The meeting is on Thursday; see `./minutes/2024.txt`.", "./minutes/2024.txt"),
        # The file read, a file that is here (in a folder), one the user named: kept.
        ("notes.txt says Thursday.", None),
        ("Thursday; src/agenda.md has the agenda.", None),
        ("Thursday, and agenda.md lists the items.", None),
        ("Thursday, not in meeting.ics but in notes.txt.", None),
        # Words that only look like files: a call, a URL, a version.
        ("Thursday; pandas can read it with np.load( or https://x.org/a.csv", None),
    ],
)
def test_an_answer_naming_a_file_that_is_not_here_is_asked_again_once(
    make_settings: Any, store: Store, answer: str, invented: str | None
) -> None:
    # After running code on a notebook DataFrame, a 1.5B model answered 'The file "sales.csv"
    # contains the data': there was no such file, and nothing had named one. (A file's own
    # name, without its folder, is found in the workspace's overview.)
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    (settings.workspace / "src").mkdir()
    (settings.workspace / "src" / "agenda.md").write_text("- budget\n")
    with FakeServer() as server:
        server.enqueue(LOOK, ARGS, Reply(text=answer), Reply(text="It is on Thursday."))
        message = "when's the meeting, per my notes? not in meeting.ics I think"
        events = run(conversation_on(server, store, settings), message)
        requests = server.chat_requests()
    withdrawn = [event for event in events if isinstance(event, TextWithdrawn)]
    assert len(requests) == 1 + (invented is not None)
    assert len(withdrawn) == (invented is not None)
    if invented is not None:
        note = requests[1]["messages"][-1]["content"]
        assert note.split("\n")[1] == ASKED_AGAIN.split("\n")[1] + INVENTED.format(names=invented)
        assert invented in withdrawn[0].reason


@pytest.mark.parametrize(
    ("answer", "unshown"),
    [
        # A figure no result and no message holds: withdrawn, asked again saying which.
        ("Debug is off, and the app listens on port 5000.", "5000"),
        ("Debug is off; it needs Python 3.8.5.", "3.8.5"),
        # Figures the results or the user give, and a count of the answer's own: kept.
        ("The app listens on port 8042.", None),
        ("Port 8042, not 9000 as you thought.", None),
        ("It sets 2 things: the port and debug.", None),
    ],
)
def test_an_answer_stating_a_figure_nothing_shows_is_asked_again_once(
    make_settings: Any, store: Store, answer: str, unshown: str | None
) -> None:
    # After reading a file that sets no port, a 1.5B model answered that the app listens on
    # port 5000.
    settings = small(make_settings, max_tool_turns=2)
    (settings.workspace / "settings.toml").write_text("port = 8042\ndebug = false\n")
    reads = Reply(text='{"tool": "read_file", "arguments": {"path": "settings.toml"}}')
    with FakeServer() as server:
        server.enqueue(LOOK, reads, Reply(text=answer), Reply(text="Port 8042."))
        events = run(conversation_on(server, store, settings), "our port, is it 9000?")
        requests = server.chat_requests()
    withdrawn = [event for event in events if isinstance(event, TextWithdrawn)]
    assert len(requests) == 1 + (unshown is not None)
    if unshown is not None:
        note = requests[1]["messages"][-1]["content"]
        assert note.split("\n")[1] == ASKED_AGAIN.split("\n")[1] + UNSHOWN.format(figures=unshown)
        assert unshown in withdrawn[0].reason


ANSWERS = Reply(first_step={"none": 0.9, "read_file": 0.06, "list_files": 0.04})


@pytest.mark.parametrize(
    ("message", "answer", "looks"),
    [
        # Words for a message pointing at something of theirs, speaking of a file here that
        # nothing read: withdrawn, and the model looks first.
        ("where do we keep the database settings?", "They live in `settings.toml`.", True),
        ("is the deploy script of ours safe?", "Yes: deploy/run.sh only prints.", True),
        # A file here named only inside a code block is an example; a file that is not here,
        # or no file at all, is not something here left unread.
        ("where do we keep the database settings?", "```\nopen('settings.toml')\n```", False),
        ("where do we keep the database settings?", "Probably in app.ini.", False),
        ("where do we keep the database settings?", "In a settings file.", False),
        # A message about nothing here: naming one of its files is no claim about it.
        ("what's a common name for a settings file?", "settings.toml is common.", False),
        # A yes or a no about what the message names, unread: it looks first. Not about what
        # a message only points at ("that", "my": a follow-up may be answered from the turn
        # before), nor words that open otherwise.
        ("does settings.toml use sqlite?", "Yes, it does.", True),
        ("is my shop on sqlite?", "Yes, it is.", False),
        ("does settings.toml use sqlite?", "It may.", False),
        # Whether something here is on, installed or running, answered yes or no unread.
        ("is debug turned on?", "Yes, debug is turned on.", True),
        ("is debug turned on?", "I have not looked; shall I?", False),
        # Figures and names stated of the user's own, unread, that nothing in the session said:
        # made up. Not what the message itself says, nor a capital opening a sentence.
        ("which port does our app listen on?", "It listens on port 5000.", True),
        ("which db are we using?", "We are using SQLite.", True),
        ("is our port 8080?", "It is 8080, as you say.", False),
        ("which db are we using?", "I have not looked at your settings yet.", False),
        # Asked why, or what something means, the answer explains in words of its own.
        ("why does my kernel keep dying?", "Python ran out of RAM, most likely.", False),
        # A how-to's answer names files here as examples.
        ("how do I load our settings?", "Use tomllib on `settings.toml`.", False),
        ("how do I pin our pandas version?", "Write pandas==2.1.4 in requirements.", False),
        # An answer saying it was not given what was asked, whatever the message: it looks.
        ("db?", "The database is not specified in the given information.", True),
        ("db?", "SQLite is a common choice.", False),
    ],
)
def test_an_answer_without_looking_that_speaks_of_what_it_never_read_looks_first(
    make_settings: Any, store: Store, message: str, answer: str, looks: bool
) -> None:
    # Asked what a script of theirs would delete, a 1.5B model answered without reading it
    # that it deletes "the `app.py` file": the file was here, and nobody had read it.
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "settings.toml").write_text('database = "sqlite:///shop.db"\n')
    (settings.workspace / "deploy").mkdir()
    (settings.workspace / "deploy" / "run.sh").write_text("echo deploying\n")
    reads = Reply(text='{"tool": "read_file", "arguments": {"path": "settings.toml"}}')
    with FakeServer() as server:
        server.enqueue(ANSWERS, Reply(text=answer), ANSWERS, reads, Reply(text="shop.db"))
        events = run(conversation_on(server, store, settings), message)
        steps = server.first_steps()
    withdrawn = [event for event in events if isinstance(event, TextWithdrawn)]
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    if not looks:
        assert not withdrawn and len(steps) <= 1
        assert [row.role for row in saved] == ["user", "assistant"]
        assert saved[-1].content == answer
        return
    assert len(withdrawn) == 1 and withdrawn[0].reason.startswith("the answer ")
    # Asked again, the first step may only choose a tool: answering is not in its grammar.
    assert "none" in allowed(steps[0]) and "none" not in allowed(steps[1])
    assert [row.role for row in saved] == ["user", "assistant_full", "tool", "assistant"]
    assert json.loads(saved[1].tool_args)[0]["function"]["name"] == "read_file"
    assert saved[-1].content == "shop.db"  # the withdrawn answer is not stored


@pytest.mark.parametrize(
    ("answer", "asked"),
    [
        # Cut at max_tokens after naming a made-up file (a 1.5B model then listed made-up
        # values to the limit): asked again.
        ("The file sales.csv holds 10, 20, 30, 40, 50", 2),
        # Cut before it named anything: it may not have got to the results; kept.
        ("Let me look through everything that was", 1),
    ],
)
def test_an_answer_cut_at_the_token_limit_is_asked_again_only_for_a_made_up_file(
    make_settings: Any, store: Store, answer: str, asked: int
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    cut = Reply(text=answer, finish_reason="length")
    with FakeServer() as server:
        server.enqueue(LOOK, ARGS, cut, Reply(text="It is on Thursday."))
        run(conversation_on(server, store, settings), "when's the meeting, per my notes")
        assert len(server.chat_requests()) == asked


def test_after_a_failed_call_the_answer_is_told_to_say_so_not_what_was_asked(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    registry = default_registry()

    @registry.register(name="release_date", description="When the next release ships.")
    def release_date() -> str:
        return "Error: the release calendar is offline."

    runs = Reply(first_step={"release_date": 0.97, "none": 0.03})
    called = Reply(text='{"tool": "release_date", "arguments": {}}')
    with FakeServer() as server:
        server.enqueue(runs, called, Reply(text="The calendar is offline."))
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        chat = Conversation(settings, store, client=client, tools=registry)
        run(chat, "when do we ship the next release")
        (answer,) = server.chat_requests()
    *_, result, note = answer["messages"]
    assert result["content"] == "Error: the release calendar is offline."
    assert note == {"role": "system", "content": AFTER_FAILURES}
    assert "release" not in note["content"]


def test_a_refused_call_ends_the_turn_without_asking_the_model(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=2)  # tool_policy="deny"
    shell = Reply(first_step={"run_shell": 0.97, "none": 0.03})
    command = Reply(text='{"tool": "run_shell", "arguments": {"command": "python --version"}}')
    with FakeServer() as server:
        server.enqueue(shell, command)
        events = run(conversation_on(server, store, settings), "which python have I got")
        assert server.chat_requests() == []  # the first step wrote the call; nothing else
    said = [e.row.content for e in events if isinstance(e, RowSaved) and e.row.role == "assistant"]
    assert said == [
        "Not done: your tool policy denies run_shell (it changes files or runs commands). To "
        "allow it, set NBCHAT_TOOL_POLICY=allow, or NBCHAT_TOOL_POLICY=ask to approve each call "
        "in the widget."
    ]


def test_a_file_listed_as_if_it_were_a_folder_is_read(make_settings: Any, store: Store) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "plan.md").write_text("- ship it\n")
    lists = Reply(first_step={"list_files": 0.95, "none": 0.05})
    listed = Reply(text='{"tool": "list_files", "arguments": {"path": "./plan.md"}}')
    with FakeServer(default_reply=Reply(text="Done.")) as server:
        server.enqueue(lists, listed, Reply(text="Ship it."))
        events = run(conversation_on(server, store, settings), "anything in plan.md")
    (made,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant_full"]
    assert json.loads(made.tool_args)[0]["function"] == {
        "name": "read_file",
        "arguments": '{"path": "plan.md"}',
    }


HERE = Here(
    files=frozenset({"plan.md", "src/shapes.py"}),
    variables=frozenset({"df", "area"}),
    symbols={"perimeter": "src/shapes.py", "area": "src/shapes.py"},
)
READING = ["read_file", "list_files", "describe_variable"]


@pytest.mark.parametrize(
    ("call", "allowed", "made"),
    [
        # A function of the user's code, described as a notebook variable: its file is read.
        (("describe_variable", {"name": "perimeter"}), READING, ("read_file", "src/shapes.py")),
        # The notebook holds a variable of that name too: it is described.
        (("describe_variable", {"name": "area"}), READING, ("describe_variable", None)),
        (("describe_variable", {"name": "df"}), READING, ("describe_variable", None)),
        (("list_files", {"path": "./plan.md"}), READING, ("read_file", "plan.md")),
        # A file's name described as a variable: the file is read.
        (("describe_variable", {"name": "plan.md"}), READING, ("read_file", "plan.md")),
        (("list_files", {"path": "src"}), READING, ("list_files", None)),
        # Never to a tool the turn does not allow.
        (("list_files", {"path": "plan.md"}), ["list_files"], ("list_files", None)),
        # The files searched for a notebook variable's name: the variable is described.
        (("search_files", {"pattern": "df"}), READING, ("describe_variable", "df")),
        # A name the code defines (too) is searched for; so is any other pattern.
        (("search_files", {"pattern": "area"}), READING, ("search_files", None)),
        (("search_files", {"pattern": "df.groupby"}), READING, ("search_files", None)),
        (("search_files", {"pattern": "df"}), ["search_files"], ("search_files", None)),
        # The files' contents searched for a file's own name: the file is read, by its path or
        # by a last part only one file has.
        (("search_files", {"pattern": "plan.md"}), READING, ("read_file", "plan.md")),
        (("search_files", {"pattern": "./src/shapes.py"}), READING, ("read_file", "src/shapes.py")),
        (
            ("search_files", {"pattern": "shapes.py", "path": "src"}),
            READING,
            ("read_file", "src/shapes.py"),
        ),
        (("search_files", {"pattern": "shapes"}), READING, ("search_files", None)),
        (("search_files", {"pattern": "plan.md"}), ["search_files"], ("search_files", None)),
    ],
)
def test_a_call_aimed_at_the_wrong_kind_of_thing_turns_to_the_tool_that_reads_it(
    call: tuple[str, dict[str, Any]], allowed: list[str], made: tuple[str, str | None]
) -> None:
    name, arguments = aimed_call(*call, HERE, allowed)
    assert name == made[0]
    key = "name" if name == "describe_variable" else "path"
    assert arguments == ({key: made[1]} if made[1] is not None else call[1])


INSTALLED = Here(
    variables=frozenset({"requests"}),
    symbols={"numpy": "src/numpy.py"},
    installed=lambda name: name != "polars",  # the name check must stop the last case
    python="/opt/my env/bin/python",
)
SHELL = ["describe_variable", "run_shell"]


@pytest.mark.parametrize(
    ("call", "allowed", "command"),
    [
        # No variable `pandas`, but the package is installed: pip is asked, by this interpreter.
        (
            {"name": "pandas"},
            SHELL,
            "'/opt/my env/bin/python' -m pip show pandas",
        ),
        ({"name": "scikit-learn"}, SHELL, "'/opt/my env/bin/python' -m pip show scikit-learn"),
        # A variable or a name of the user's code of that name wins; so does a turn without
        # the shell; a name that is not installed, or no package name, stays as it was.
        ({"name": "requests"}, SHELL, None),
        ({"name": "numpy"}, SHELL, None),
        ({"name": "pandas"}, ["describe_variable"], None),
        ({"name": "polars"}, SHELL, None),
        ({"name": "pandas; rm -rf ~"}, SHELL, None),
    ],
)
def test_a_variable_described_that_is_an_installed_package_asks_pip(
    call: dict[str, Any], allowed: list[str], command: str | None
) -> None:
    name, arguments = aimed_call("describe_variable", call, INSTALLED, allowed)
    if command is None:
        assert (name, arguments) == ("describe_variable", call)
    else:
        assert (name, arguments) == ("run_shell", {"command": command})


def test_arguments_the_tool_refuses_leave_the_call_to_the_chat_forced_to_that_tool(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    refused = Reply(text='{"tool": "read_file", "arguments": {"file": "notes.txt"}}')
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    with FakeServer() as server:
        server.enqueue(LOOK, refused, Reply(text=CALL), Reply(text="It is on Thursday."))
        events = run(conversation_on(server, store, settings), "peek at my notes")
        call, _answer = server.chat_requests()
    schema = call["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["name"] == {"const": "read_file"}
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    assert [row.role for row in saved] == ["user", "assistant_full", "tool", "assistant"]


def test_a_first_token_split_between_answering_and_a_tool_answers(
    make_settings: Any, store: Store
) -> None:
    split = Reply(first_step={"read_file": 0.55, "none": 0.45})
    with FakeServer(default_reply=Reply(text="Paris.")) as server:
        server.enqueue(split)
        run(conversation_on(server, store, small(make_settings)), "capital of france?")
        (answer,) = server.chat_requests()
    assert "response_format" not in answer and "grammar" in answer


@pytest.mark.parametrize(
    ("first", "looks"), [("when is the meeting, per notes.txt", True), ("hi", False)]
)
def test_a_follow_up_leans_to_looking_when_the_turn_before_it_looked(
    make_settings: Any, store: Store, first: str, looks: bool
) -> None:
    # The same first token, a third of it to answering, for "and …" after a turn: it looks
    # when the turn before it read something, and answers after a turn that did not.
    settings = small(make_settings, max_tool_turns=2)
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    answer = Reply(text="Thursday.")
    split = Reply(first_step={"read_file": 0.67, "none": 0.33})
    with FakeServer(default_reply=answer) as server:
        chat = conversation_on(server, store, settings)
        if looks:
            server.enqueue(LOOK, ARGS, answer)
        else:
            server.enqueue(Reply(first_step={"none": 0.9, "read_file": 0.1}), answer)
        run(chat, first)
        server.enqueue(split, ARGS, answer)
        events = run(chat, "and the room?")
    read = [e for e in events if isinstance(e, RowSaved) and e.row.role == "tool"]
    assert bool(read) is looks


def test_dont_run_takes_the_shell_and_the_writers_out_of_the_first_step(
    make_settings: Any, store: Store
) -> None:
    # The model's first token would go to the shell; the user said not to run it.
    eager = Reply(first_step={"run_shell": 0.9, "read_file": 0.06, "none": 0.04})
    text = "Please do NOT run `rm -rf build/`, check with me first"
    with FakeServer(default_reply=Reply(text="Sure, I won't.")) as server:
        server.enqueue(eager)
        run(conversation_on(server, store, small(make_settings)), text)
        (step,) = server.first_steps()
        requests = server.chat_requests()
    assert not {"run_shell", "write_file", "edit_file"} & set(allowed(step))
    assert "read_file" in allowed(step)
    for body in requests:
        assert "run_shell" not in str(body.get("response_format", ""))


def test_a_question_about_jupyter_s_keys_is_answered_told_the_installed_jupyter_s_own(
    make_settings: Any, store: Store
) -> None:
    pytest.importorskip("jupyterlab")
    text = "jupyter shortcut to run a cell and add a new one below?"
    with FakeServer(default_reply=Reply(text="Alt+Enter.")) as server:
        run(conversation_on(server, store, small(make_settings)), text)
        (answer,) = server.chat_requests()
    *_, note, message = answer["messages"]
    assert message == {"role": "user", "content": text}
    assert note == {
        "role": "system",
        "content": JUPYTER_REFERENCE + "Alt+Enter: run cell and insert below (notebook)",
    }


def test_a_how_to_question_is_answered_unless_the_model_is_nearly_sure_it_must_look(
    make_settings: Any, store: Store
) -> None:
    # A small model's first token went mostly to running code for a question about how to do
    # something: the acting tools are out of its first step, and a tenth for answering answers.
    eager = Reply(first_step={"read_file": 0.9, "none": 0.1})
    text = "how do I drop the rows with a missing value in my frame?"
    with FakeServer(default_reply=Reply(text="Use df.dropna().")) as server:
        server.enqueue(eager)
        run(conversation_on(server, store, small(make_settings)), text)
        (step,) = server.first_steps()
        (answer,) = server.chat_requests()
    assert not {"run_shell", "write_file", "edit_file"} & set(allowed(step))
    assert "read_file" in allowed(step)
    assert "response_format" not in answer and "grammar" in answer  # words


@pytest.mark.parametrize(
    ("text", "weighed"),
    [
        # How to do something, naming nothing here nor anything of the user's: words at once.
        ("how do i show just the last 20 lines of a log file", False),
        ("in general, what goes into a log file?", False),
        # Of theirs, of the notebook, or naming a file here: the model's first step weighs it.
        ("how do i show the last 20 lines of my log", True),
        ("how do i make the last cell faster", True),
        ("how do i show the last 20 lines of server.log", True),
    ],
)
def test_a_how_to_naming_nothing_of_the_users_is_answered_without_a_first_step(
    make_settings: Any, store: Store, text: str, weighed: bool
) -> None:
    # Asked how to show the last lines of a log file, a 1.5B model read the workspace's log
    # and answered with its lines.
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "logs").mkdir()
    (settings.workspace / "logs" / "server.log").write_text("09:14 INFO started\n")
    steps, looked = steps_and_look(settings, store, text, "logs/server.log", lean=0.99)
    assert (bool(steps), looked) == (weighed, weighed)


def steps_and_look(
    settings: Settings, store: Store, text: str, path: str, *, lean: float
) -> tuple[list[dict[str, Any]], bool]:
    """Send `text` to a model whose first step leans `lean` to reading `path`: the first
    steps it was asked, and whether the turn read anything."""
    leaning = Reply(first_step={"read_file": lean, "none": round(1 - lean, 6)})
    reads = Reply(text=json.dumps({"tool": "read_file", "arguments": {"path": path}}))
    with FakeServer(default_reply=Reply(text="In words.")) as server:
        server.enqueue(leaning, reads)
        events = run(conversation_on(server, store, settings), text)
        steps = server.first_steps()
    assert any(isinstance(e, Done) for e in events)
    return steps, any(isinstance(e, RowSaved) and e.row.role == "tool" for e in events)


def test_a_message_that_takes_tools_out_is_asked_on_the_prompt_every_message_is_asked_on(
    make_settings: Any, store: Store
) -> None:
    # The grammar holds a how-to to the tools it allows; its prompt describes every tool, as
    # the warm-up's does, so the server's cached prefix serves it (described only the allowed
    # ones, the first how-to of a server's life re-read the whole prompt: ~12 s on two cores).
    steps = []
    for text in (
        "how do I drop the rows with a missing value in my frame?",
        "what is in notes.txt?",
    ):
        with FakeServer(default_reply=Reply(text="Done.")) as server:
            server.enqueue(Reply(first_step={"none": 0.9, "read_file": 0.1}))
            run(conversation_on(server, store, small(make_settings)), text)
            (step,) = server.first_steps()
        steps.append(step)
    how_to, look = steps
    assert "run_shell" not in allowed(how_to) and "run_shell" in allowed(look)
    assert len(how_to["messages"]) == len(look["messages"])
    assert how_to["messages"][:-3] == look["messages"][:-3]  # all but context, message, opening
    assert "run_shell" in how_to["messages"][0]["content"]


@pytest.mark.parametrize(
    ("text", "looks"),
    [
        # The task's words share a stem with a file here: still a general question.
        ("how can I parse a yaml config file with pyyaml?", False),
        # Asked by the file's whole name: it is about this file, and the model leans to it.
        ("how can I parse config.yaml with pyyaml?", True),
    ],
)
def test_a_how_to_names_a_file_only_by_its_whole_name(
    make_settings: Any, store: Store, text: str, looks: bool
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "config.yaml").write_text("port: 8042\n")
    steps, looked = steps_and_look(settings, store, text, "config.yaml", lean=0.8)
    # Naming nothing here, the general question is not even weighed (above).
    shown = json.dumps(steps[0]["messages"]) if steps else ""
    assert ("config.yaml (a file in the workspace)" in shown) is looks
    assert looked is looks


def test_after_a_repeated_call_the_model_answers_without_asking(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=10)
    (settings.workspace / "notes.txt").write_text("Meeting on Thursday.\n")
    with FakeServer() as server:
        server.enqueue(LOOK, ARGS, LOOK, ARGS, Reply(text="It is on Thursday."))
        events = run(conversation_on(server, store, settings), "Read notes.txt please.")
        (last,) = server.chat_requests()
        assert len(server.first_steps()) == 4  # two choices, two calls; then words
    assert "grammar" in last and "response_format" not in last
    saved = [e.row for e in events if isinstance(e, RowSaved)]
    assert saved[-1] == Row("assistant", "It is on Thursday.")


def test_read_archived_output_is_allowed_once_an_output_is_archived(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=1)
    output = tool_result("c1", "x" * 2_000, name="read_file")
    with FakeServer(default_reply=Reply(text="ok")) as server:
        chat = conversation_on(server, store, settings)
        session_id = chat.session_id
        assert session_id is not None
        store.append_rows(
            session_id, [user("Read notes.txt"), tool_call(("c1", "read_file", {})), output]
        )
        chat.resume(session_id)
        run(chat, "Read todo.md please.")
        store.replace_rows(
            session_id,
            {2: to_placeholder(output)},
            expected_active=5,
            record=CompactionRecord(kind="prune"),
        )
        chat.resume(session_id)
        run(chat, "Read todo.md again please.")
        before, after = server.first_steps()
    assert "read_archived_output" not in allowed(before)
    assert "read_archived_output" in allowed(after)
    assert "- read_archived_output(tool_id)" in after["messages"][0]["content"]


def test_stop_during_the_first_step_ends_the_turn_at_once(
    make_settings: Any, store: Store, tmp_path: Path
) -> None:
    held = Reply(first_step={"none": 1.0}, fault="hold_headers", hold=30.0)
    stop = StopSignal()
    with FakeServer() as server:
        server.enqueue(held)
        client = client_for(server.url, tmp_path)  # nbchat's own: cancellable before headers
        chat = Conversation(small(make_settings), store, client=client)
        chat.new_session("t")
        stopper = threading.Thread(target=lambda: server.wait_for_holds(held=1) and stop.set())
        stopper.start()
        events = list(chat.send("what's in the logs?", stop))
        stopper.join()
        assert server.wait_for_holds(hung_up=1, timeout=10)
        assert server.chat_requests() == []
    assert isinstance(events[-1], Done) and events[-1].stopped


def test_a_large_model_gets_the_schemas_and_no_first_step(make_settings: Any, store: Store) -> None:
    large = make_settings(tools_on_request=False, json_tool_fallback=False)
    with FakeServer(default_reply=Reply(text="ok")) as server:
        run(conversation_on(server, store, large), "Read notes.txt please.")
        (body,) = server.chat_requests()
        assert server.first_steps() == []
    assert "read_file" in [tool["function"]["name"] for tool in body["tools"]]
    assert "tool_choice" not in body


@pytest.mark.parametrize("on_request", [True, False])
def test_the_budget_counts_the_tools_and_prompt_the_request_sends(
    make_settings: Any, store: Store, on_request: bool
) -> None:
    # The budget reads them without building the messages; they must be what is planned.
    settings = make_settings(tools_on_request=on_request, json_tool_fallback=on_request)
    with FakeServer(default_reply=Reply(text="ok")) as server:
        chat = conversation_on(server, store, settings)
        run(chat, "hello")
        plan = plan_request(chat)
        assert request_tools(chat) == plan.body_tools
        assert request_system_prompt(chat) == plan.system_prompt
    assert bool(plan.body_tools) is not on_request


def test_a_search_for_a_last_part_two_files_share_stays_a_search() -> None:
    here = Here(files=frozenset({"src/app.py", "web/app.py"}))
    call = ("search_files", {"pattern": "app.py"})
    assert aimed_call(*call, here, READING) == call
    assert aimed_call("search_files", {"pattern": "web/app.py"}, here, READING) == (
        "read_file",
        {"path": "web/app.py"},
    )


def test_a_search_inside_one_small_file_reads_it_whole() -> None:
    here = Here(files=frozenset({"data.csv", "big.log"}), small=lambda path: path == "data.csv")
    search = {"pattern": "city", "path": "./data.csv"}
    assert aimed_call("search_files", search, here, READING) == ("read_file", {"path": "data.csv"})
    inside_big = {"pattern": "ERROR", "path": "big.log"}
    assert aimed_call("search_files", inside_big, here, READING) == ("search_files", inside_big)
    everywhere = {"pattern": "city"}
    assert aimed_call("search_files", everywhere, here, READING) == ("search_files", everywhere)


@pytest.mark.parametrize(("size", "made"), [(100, "read_file"), (50_000, "search_files")])
def test_a_first_step_searching_inside_a_small_workspace_file_reads_it(
    make_settings: Any, store: Store, size: int, made: str
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "data.csv").write_text("city,population\n" + "x" * size + "\n")
    searches = Reply(first_step={"search_files": 0.97, "none": 0.01, "read_file": 0.02})
    where = Reply(
        text='{"tool": "search_files", "arguments": {"pattern": "city", "path": "data.csv"}}'
    )
    with FakeServer() as server:
        server.enqueue(searches, where, Reply(text="Oslo."))
        events = run(conversation_on(server, store, settings), "biggest city in my data?")
    (call,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant_full"]
    assert json.loads(call.tool_args)[0]["function"]["name"] == made


ACTING = ["read_file", "insert_cell", "edit_cell", "run_cell", "run_code"]


def test_a_cell_tool_for_a_message_naming_one_file_reads_that_file() -> None:
    insert = ("insert_cell", {"source": "- call the dentist"})
    assert aimed_call(*insert, HERE, ACTING, named_files=["plan.md"]) == (
        "read_file",
        {"path": "plan.md"},
    )
    # Two files named, or none (a message that speaks of the notebook passes none): as chosen.
    assert aimed_call(*insert, HERE, ACTING, named_files=["plan.md", "src/shapes.py"]) == insert
    assert aimed_call(*insert, HERE, ACTING) == insert
    assert aimed_call(*insert, HERE, ["insert_cell"], named_files=["plan.md"]) == insert


def test_a_read_of_the_cells_for_a_message_naming_one_variable_describes_it() -> None:
    for read in (("read_cell", {"number": 1}), ("list_cells", {})):
        assert aimed_call(*read, HERE, READING, named_variables=["df"]) == (
            "describe_variable",
            {"name": "df"},
        )
        # Two variables named, or none, or no describe_variable allowed: as chosen.
        assert aimed_call(*read, HERE, READING, named_variables=["df", "area"]) == read
        assert aimed_call(*read, HERE, READING) == read
        assert aimed_call(*read, HERE, ["read_cell"], named_variables=["df"]) == read
    # A cell tool that changes the notebook is no read of it: it stays.
    insert = ("insert_cell", {"source": "df.head()"})
    assert aimed_call(*insert, HERE, [*READING, "insert_cell"], named_variables=["df"]) == insert


def with_variables(output: str, *names: str) -> Any:
    """`with_read_cell`'s tools and a `describe_variable` that sees `names` in the notebook."""
    import dataclasses

    tools = with_read_cell(output)

    def describe_variable(ctx: ToolContext, name: str) -> str:
        """Describe a variable of the user's notebook.

        Args:
            name: the variable's name.
        """
        return f"{name}: a DataFrame"

    line = f"The notebook's variables: {', '.join(names)}."
    sight = Sight(line, names)
    tools.register(
        dataclasses.replace(Tool.from_function(describe_variable), context=lambda: sight)
    )
    return tools


@pytest.mark.parametrize(
    ("message", "made"),
    [
        ("print out my orders frame", "describe_variable"),
        # Said of the notebook's cells: the cell tool stays.
        ("show me the cell that made orders", "read_cell"),
    ],
)
def test_a_first_step_reading_a_cell_for_a_variable_describes_the_variable(
    make_settings: Any, store: Store, message: str, made: str
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    tools = with_variables("In [1]: orders = load()", "orders")
    cell = '{"tool": "read_cell", "arguments": {"number": 1}}'
    function = first_call_made(settings, store, tools, message, "read_cell", cell)
    assert function["name"] == made
    if made == "describe_variable":
        assert json.loads(function["arguments"]) == {"name": "orders"}


@pytest.mark.parametrize(
    ("cell", "made"),
    [
        ("df.groupby('city')['n'].sum()", ("run_code", {"code": "df.groupby('city')['n'].sum()"})),
        ("3", ("run_cell", {"cell": "3"})),
        ("a1b2c3d4", ("run_cell", {"cell": "a1b2c3d4"})),
    ],
)
def test_run_cell_given_code_instead_of_a_cell_runs_it_as_code(
    cell: str, made: tuple[str, dict[str, Any]]
) -> None:
    assert aimed_call("run_cell", {"cell": cell}, HERE, ACTING) == made
    assert aimed_call("run_cell", {"cell": cell}, HERE, ["run_cell"]) == (
        "run_cell",
        {"cell": cell},
    )


@pytest.mark.parametrize(
    ("message", "made"),
    [
        ("jot 'call the dentist' into plan.md", "read_file"),
        ("put 'call the dentist' in a new cell below, it's from plan.md", "insert_cell"),
    ],
)
def test_a_first_step_inserting_a_cell_for_a_file_reads_the_file_unless_the_notebook_is_named(
    make_settings: Any, store: Store, message: str, made: str
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "plan.md").write_text("- ship it\n")
    tools = default_registry()

    @tools.register(dangerous=True)
    def insert_cell(ctx: ToolContext, source: str) -> str:
        """Insert a new cell into the user's notebook.

        Args:
            source: the new cell's code.
        """
        return "inserted"

    source = '{"tool": "insert_cell", "arguments": {"source": "call the dentist"}}'
    function = first_call_made(settings, store, tools, message, "insert_cell", source)
    assert function["name"] == made


def with_read_cell(output: str) -> Any:
    """The default tools and a `read_cell` that shows `output` for any cell."""
    tools = default_registry()

    @tools.register()
    def read_cell(ctx: ToolContext, number: int) -> str:
        """Read one cell of the notebook's history.

        Args:
            number: the cell's execution count.
        """
        return output

    return tools


def first_call_made(
    settings: Settings, store: Store, tools: Any, message: str, chosen: str, arguments: str
) -> dict[str, Any]:
    """The call a turn makes when the model's first step leans to `chosen` and writes
    `arguments`: its `function` (name and arguments as sent)."""
    leans = Reply(first_step={chosen: 0.95, "none": 0.05})
    with FakeServer(default_reply=Reply(text="Done.")) as server:
        server.enqueue(leans, Reply(text=arguments), Reply(text="Noted."))
        chat = conversation_on(server, store, settings, tools)
        events = run(chat, message)
    (call,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant_full"]
    function: dict[str, Any] = json.loads(call.tool_args)[0]["function"]
    return function


@pytest.mark.parametrize(
    ("message", "made"),
    [
        # Named by a function its code defines, the notebook unsaid: the file is read.
        ("going by the code, what does perimeter give for a 2 by 3 box", "read_file"),
        ("what did my cell computing perimeter print", "read_cell"),
    ],
)
def test_a_first_step_reading_a_cell_for_a_function_of_the_code_reads_its_file(
    make_settings: Any, store: Store, message: str, made: str
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "src").mkdir()
    (settings.workspace / "src" / "shapes.py").write_text(
        "def perimeter(w, h):\n    return 2 * (w + h)\n"
    )
    tools = with_read_cell("In [1]: print(perimeter(2, 3))")
    cell = '{"tool": "read_cell", "arguments": {"number": 1}}'
    function = first_call_made(settings, store, tools, message, "read_cell", cell)
    assert function["name"] == made
    if made == "read_file":
        assert json.loads(function["arguments"]) == {"path": "src/shapes.py"}


@pytest.mark.parametrize(
    ("message", "made"),
    [
        # "the unit test", with one file in tests/: that file, whatever the model aimed at.
        ("without running anything, what does the unit test check?", "read_file"),
        # Said by the folder's own name, or of the notebook: the cell tool stays.
        ("what do the tests check?", "read_cell"),
        ("what did the unit test cell in my notebook print?", "read_cell"),
    ],
)
def test_a_cell_tool_for_a_folder_of_one_file_named_in_the_singular_reads_that_file(
    make_settings: Any, store: Store, message: str, made: str
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "tests").mkdir()
    (settings.workspace / "tests" / "test_shapes.py").write_text("def test_area():\n    pass\n")
    tools = with_read_cell("In [1]: 1 + 1")
    cell = '{"tool": "read_cell", "arguments": {"number": 1}}'
    function = first_call_made(settings, store, tools, message, "read_cell", cell)
    assert function["name"] == made
    if made == "read_file":
        assert json.loads(function["arguments"]) == {"path": "tests/test_shapes.py"}


def test_a_search_under_a_folder_that_is_not_here_searches_the_workspace() -> None:
    here = Here(files=frozenset({"plan.md"}), exists=lambda path: path in {".", "src", "plan.md"})
    assert aimed_call("search_files", {"pattern": "ship", "path": "./project"}, here, READING) == (
        "search_files",
        {"pattern": "ship"},
    )
    under_src = {"pattern": "ship", "path": "src"}
    assert aimed_call("search_files", under_src, here, READING) == ("search_files", under_src)


@pytest.mark.parametrize(
    ("where", "searched"), [("./project", None), ("../notes", None), ("docs", "docs")]
)
def test_a_first_step_searching_a_folder_that_does_not_exist_searches_everything(
    make_settings: Any, store: Store, where: str, searched: str | None
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "docs").mkdir()
    (settings.workspace / "docs" / "plan.md").write_text("- ship it\n")
    (settings.workspace.parent / "notes").mkdir(exist_ok=True)  # outside the workspace: not here
    search = {"pattern": "ship", "path": where}
    with FakeServer(default_reply=Reply(text="Done.")) as server:
        server.enqueue(
            Reply(first_step={"search_files": 0.95, "none": 0.05}),
            Reply(text=json.dumps({"tool": "search_files", "arguments": search})),
            Reply(text="In docs/plan.md."),
        )
        events = run(conversation_on(server, store, settings), "where did I write about shipping")
    (call,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant_full"]
    arguments = json.loads(json.loads(call.tool_args)[0]["function"]["arguments"])
    assert arguments.get("path") == searched and arguments["pattern"] == "ship"


def test_what_a_message_asks_to_have_looked_into_is_the_word_after_the_looking() -> None:
    assert looked_into("pls go through the logs, why does it crash") == {"logs"}
    assert "logs" in looked_into("anything weird in our logs?")
    assert "logs" not in looked_into("check the logs folder")
    assert "logs" not in looked_into("what is in logs/ now")
    assert looked_into("any logs? list them") == set()
    # Only the message's start is read, so a huge message costs what its start does.
    assert looked_into("x" * 500 + " go through the logs") == set()
    huge = "go through the logs " + "in the " * 2_000_000
    assert "logs" in looked_into(huge) and looked_into(huge) == looked_into(huge[:400])


def test_listing_a_named_folder_that_holds_one_file_reads_that_file() -> None:
    sole = {"logs/": "logs/app.log"}
    for path in ("logs", "./logs/", "logs/"):
        assert aimed_call("list_files", {"path": path}, HERE, READING, sole_files=sole) == (
            "read_file",
            {"path": "logs/app.log"},
        )
    other = {"path": "src"}
    assert aimed_call("list_files", other, HERE, READING, sole_files=sole) == ("list_files", other)


@pytest.mark.parametrize(
    ("message", "inside", "made"),
    [
        ("anything odd in the log?", ["app.log"], "read_file"),
        ("anything odd in the log?", ["app.log", "old.log"], "list_files"),
        # The folder by its own name: asked about the folder (what it holds), not the file.
        ("anything else in the logs folder?", ["app.log"], "list_files"),
        ("any logs?", ["app.log"], "list_files"),
        # By its own name, asked to be looked into: what it holds is the question.
        (
            "the app crashes on launch, read the logs and say why",
            ["app.log"],
            "read_file",
        ),
        ("go through the logs, anything odd?", ["app.log", "old.log"], "list_files"),
    ],
)
def test_a_first_step_listing_a_folder_of_one_file_the_message_names_reads_it(
    make_settings: Any, store: Store, message: str, inside: list[str], made: str
) -> None:
    settings = small(make_settings, max_tool_turns=2, workspace_overview=True)
    (settings.workspace / "logs").mkdir()
    for name in inside:
        (settings.workspace / "logs" / name).write_text("ERROR disk full\n")
    with FakeServer(default_reply=Reply(text="Done.")) as server:
        server.enqueue(
            Reply(first_step={"list_files": 0.95, "none": 0.05}),
            Reply(text='{"tool": "list_files", "arguments": {"path": "logs/"}}'),
            Reply(text="The disk is full."),
        )
        events = run(conversation_on(server, store, settings), message)
    (call,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant_full"]
    assert json.loads(call.tool_args)[0]["function"]["name"] == made


@pytest.mark.parametrize(
    ("message", "calls"),
    [
        ("add 'call Bo' to plan.md", ["read_file", "edit_file"]),  # the change is still to make
        ("anything about Bo in plan.md?", ["read_file"]),  # a question: answered from the read
    ],
)
def test_after_reading_for_a_change_the_change_is_still_made(
    make_settings: Any, store: Store, message: str, calls: list[str]
) -> None:
    settings = small(make_settings, max_tool_turns=4, workspace_overview=True)
    (settings.workspace / "plan.md").write_text("- ship it\n")
    reads = Reply(first_step={"read_file": 0.95, "none": 0.05})
    edits = Reply(first_step={"edit_file": 0.85, "none": 0.15})
    edit = '{"tool": "edit_file", "arguments": {"path": "plan.md", "old": "x", "new": "y"}}'
    with FakeServer(default_reply=Reply(text="Done.")) as server:
        server.enqueue(reads, Reply(text='{"tool": "read_file", "arguments": {"path": "plan.md"}}'))
        server.enqueue(edits)
        if "edit_file" in calls:  # its arguments, then the next round's step: words
            server.enqueue(Reply(text=edit), Reply(first_step={"none": 0.99, "edit_file": 0.01}))
        server.enqueue(Reply(text="The edit was not allowed."))
        events = run(conversation_on(server, store, settings), message)
    made = [
        json.loads(e.row.tool_args)[0]["function"]["name"]
        for e in events
        if isinstance(e, RowSaved) and e.row.role == "assistant_full"
    ]
    assert made == calls


def with_sales_frame() -> Any:
    """A registry with a `run_code` that echoes its code and the notebook's variables told as
    `variable_names` tells them of a real DataFrame `sales` (regions in lower case)."""
    import dataclasses

    pd = pytest.importorskip("pandas")
    from nbchat.tools.notebook import variable_names

    sales = pd.DataFrame({"region": ["north", "south"], "revenue": [1140.0, 1020.0]})
    sight = variable_names({"sales": sales, "threshold": 100})
    tools = default_registry()

    def run_code(ctx: ToolContext, code: str) -> str:
        """Run Python code in the notebook's kernel.

        Args:
            code: the code to run.
        """
        return f"ran {code}"

    def list_notebook_variables(ctx: ToolContext) -> str:
        """List the notebook's variables."""
        return sight.line

    tools.register(Tool.from_function(run_code))
    tools.register(
        dataclasses.replace(Tool.from_function(list_notebook_variables), context=lambda: sight)
    )
    return tools


def test_code_over_a_dataframe_the_message_names_is_written_knowing_its_values(
    make_settings: Any, store: Store
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    code = "sales[sales['region'] == 'North']['revenue'].sum()"
    arguments = json.dumps({"tool": "run_code", "arguments": {"code": code}})
    leans = Reply(first_step={"run_code": 0.95, "none": 0.05})
    with FakeServer(default_reply=Reply(text="Done.")) as server:
        server.enqueue(leans, Reply(text=arguments), Reply(text="1140."))
        chat = conversation_on(server, store, settings, with_sales_frame())
        events = run(chat, "how much revenue did North bring in, per my sales frame?")
        step, asked = server.first_steps()[:2]
    # The arguments are asked with the frame's outline told just before the message; the
    # choice itself was asked without it (its prompt is the one every message gets).
    *_, note, message = asked["messages"]
    assert note["role"] == "system" and message["role"] == "user"
    assert (
        "sales, a DataFrame of 2 rows: region (text: 'north', 'south'), revenue (float64)"
        in (note["content"])
    )
    assert "a DataFrame of" not in json.dumps(step["messages"])
    # The value spelt as the data spells it: 'North' would have matched no row.
    (call,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant_full"]
    function = json.loads(call.tool_args)[0]["function"]
    assert json.loads(function["arguments"]) == {
        "code": "sales[sales['region'] == 'north']['revenue'].sum()"
    }


@pytest.mark.parametrize(
    ("message", "code", "made"),
    [
        ("print the word North for me", "print('North')", "print('North')"),
        # Compared, the value is spelt as the notebook's frames hold it, named or not.
        (
            "how much did the north bring in, per my notebook?",
            "sales[sales['region'] == 'North'].revenue.sum()",
            "sales[sales['region'] == 'north'].revenue.sum()",
        ),
    ],
)
def test_code_for_a_message_naming_no_dataframe_is_asked_on_the_choice_s_own_messages(
    make_settings: Any, store: Store, message: str, code: str, made: str
) -> None:
    settings = small(make_settings, max_tool_turns=2)
    arguments = json.dumps({"tool": "run_code", "arguments": {"code": code}})
    leans = Reply(first_step={"run_code": 0.95, "none": 0.05})
    with FakeServer(default_reply=Reply(text="Done.")) as server:
        server.enqueue(leans, Reply(text=arguments), Reply(text="North."))
        chat = conversation_on(server, store, settings, with_sales_frame())
        events = run(chat, message)
        step, asked = server.first_steps()[:2]
    assert asked["messages"] == step["messages"][:-1]  # all but the opened reply
    (call,) = [e.row for e in events if isinstance(e, RowSaved) and e.row.role == "assistant_full"]
    assert json.loads(json.loads(call.tool_args)[0]["function"]["arguments"]) == {"code": made}


@pytest.mark.parametrize(
    ("message", "number"),
    [
        ("what does my last cell say", -1),
        ("show me the latest cell", -1),
        ("what was in the cell before last", 1),  # not the newest: the model's number stays
        ("what does cell 1 say", 1),
    ],
)
def test_a_read_of_the_last_cell_reads_the_newest_run(
    make_settings: Any, store: Store, message: str, number: int
) -> None:
    # Asked what the last cell said, a 1.5B model read In [1].
    settings = small(make_settings, max_tool_turns=2)
    tools = with_read_cell("In [1]: import pandas as pd")
    read = '{"tool": "read_cell", "arguments": {"number": 1}}'
    function = first_call_made(settings, store, tools, message, "read_cell", read)
    assert function["name"] == "read_cell"
    assert json.loads(function["arguments"]) == {"number": number}

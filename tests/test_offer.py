"""The pure rules of a small model's turn (issue 19): the tools described in its system prompt
(`nbchat.tools.offer`), which tool choice each round sends, how the model's first step is
weighed, and the user's "don't run it" that no first step can override (`nbchat.tools.choice`);
`read_archived_output` offered only once something was pruned."""

from __future__ import annotations

import json
import time

import pytest
from factories import assistant, tool_call, tool_result, user
from helpers import grows_linearly

from nbchat.compaction.prune import to_placeholder
from nbchat.conversation.reply import ARCHIVE_TOOL, offerable
from nbchat.history import Row
from nbchat.tools import default_registry
from nbchat.tools.asking import (
    asks_about_state,
    asks_for_a_change,
    asks_for_knowledge,
    asks_how_to,
    follows_on,
    forbids_changes,
    forbids_looking,
    weighs_acting,
)
from nbchat.tools.choice import (
    ANSWER_SHARE,
    ANSWER_SHARE_HOW_TO,
    Leaning,
    allowed_tools,
    looked_last_turn,
    round_choice,
    step_choice,
)
from nbchat.tools.offer import (
    describe_tools,
    named_in,
    points_at_something,
    points_at_theirs,
    recent_exchange,
    router_messages,
    typed_paths,
    with_slips,
)

SCHEMAS = default_registry().schemas()
ARCHIVE_SCHEMA = {
    "type": "function",
    "function": {"name": ARCHIVE_TOOL, "description": "x", "parameters": {"type": "object"}},
}
DANGEROUS = {"run_shell", "write_file", "edit_file"}
NAMES = [schema["function"]["name"] for schema in SCHEMAS]


def test_each_tool_is_one_line_with_its_optional_arguments_marked() -> None:
    lines = describe_tools(SCHEMAS).splitlines()
    assert len(lines) == len(SCHEMAS)
    assert lines[0].startswith("- read_file(path, start_line?, end_line?): Read a text file")
    assert any(line.startswith("- run_shell(command, timeout?): ") for line in lines)


def test_the_first_step_sees_its_prompt_examples_workspace_the_last_turn_and_the_message() -> None:
    rows = [
        user("what's in notes.txt"),
        call_row("c1", "notes.txt"),
        tool_result("c1", "Project notes\nThe review meeting is on Thursday."),
        assistant("The meeting is on Thursday."),
        user("and who wrote it?"),
    ]
    readers = [s for s in SCHEMAS if s["function"]["name"] in ("read_file", "list_files")]
    messages = router_messages(readers, rows, workspace="The workspace: ./notes.txt.")
    system, *rest = messages
    assert describe_tools(readers) in system["content"]
    assert '{"tool": "none"}' in system["content"]
    assert "run_shell" not in json.dumps(messages)  # no example for a tool it may not use
    assert rest[-1] == {"role": "user", "content": "and who wrote it?"}
    context = rest[-2]["content"]
    assert context.startswith("The workspace: ./notes.txt.\nConversation so far:\n")
    assert 'assistant called read_file {"path": "notes.txt"}' in context
    assert "result: Project notes The review meeting is on Thursday." in context
    assert context.endswith("assistant: The meeting is on Thursday.")
    assert "and who wrote it?" not in context
    steps = [json.loads(m["content"])["tool"] for m in rest[:-2] if m["role"] == "assistant"]
    assert set(steps) == {"none", "read_file", "list_files"}


def test_the_first_step_reads_which_files_hold_the_message_s_words_last() -> None:
    found = "Words of the message found in the workspace's files: meeting (notes.txt)."
    messages = router_messages(SCHEMAS, [user("when's the meeting")], found=found)
    assert messages[-2] == {"role": "system", "content": found}
    assert messages[-1] == {"role": "user", "content": "when's the meeting"}


def test_the_first_step_of_a_first_message_sees_no_conversation() -> None:
    assert recent_exchange([user("hi")]) == ""
    messages = router_messages(SCHEMAS, [user("hi")])
    assert messages[-1] == {"role": "user", "content": "hi"}
    assert messages[-2]["role"] == "assistant"  # the last example: no context message


def test_the_conversation_shown_is_bounded_however_long_its_rows() -> None:
    rows = [user("x" * 100_000), assistant("y" * 100_000), user("z" * 100_000)]
    messages = router_messages(SCHEMAS, rows)
    assert len(json.dumps(messages)) < len(json.dumps(router_messages(SCHEMAS, []))) + 2_000


@pytest.mark.parametrize(
    "text",
    [
        "Please do NOT run `rm -rf build/`, check with me first",
        "don't run it, just tell me what it would do",
        "dont delete anything yet",
        "Never touch the config",
        "can you look at it without changing anything",
        "no need to run the tests",
        "Don’t execute cleanup.sh",  # a typographic apostrophe
        "do not, under any circumstances, edit app.py",
        "I don't want you to run anything",
    ],
)
def test_a_message_that_forbids_running_or_changing_is_recognised(text: str) -> None:
    assert forbids_changes(text)
    assert allowed_tools(NAMES, DANGEROUS, text) == [n for n in NAMES if n not in DANGEROUS]


@pytest.mark.parametrize(
    "text",
    [
        "run the tests",
        "delete old.log",
        "what does rm -rf do?",
        "I don't know why the build fails, can you check the log",
        "don't worry about style",
        "it doesn't start when I run it",
        "I don't know how to run the tests, can you run them?",
        "don't forget to run the linter",
    ],
)
def test_a_message_that_forbids_nothing_keeps_every_tool(text: str) -> None:
    assert not forbids_changes(text)
    assert allowed_tools(NAMES, DANGEROUS, text) == NAMES


def test_the_rule_takes_linear_time_on_hostile_text() -> None:
    # Negations and long runs of words and spaces that never reach a verb.
    piece = "don't " + "a " * 50 + " " * 200 + "never" + "x" * 30 + " "
    assert not forbids_changes(piece * 3)
    assert grows_linearly(forbids_changes, piece)


@pytest.mark.parametrize(
    "text",
    [
        "is deploy.sh safe to run on prod?",
        "would it be ok to delete the old migrations",
        "hm is this script actually dangerous to execute",
        "should we rerun the failing job? should I run it again",
        "what happens if I run make clean twice",
        "what would happen if you ran the installer without sudo",
        "is it a good idea to remove node_modules",
        "a long pasted traceback " * 200 + "\nis it safe to run the fix script now?",
    ],
)
def test_a_question_whether_to_act_keeps_the_acting_tools_out(text: str) -> None:
    assert weighs_acting(text)
    assert allowed_tools(NAMES, DANGEROUS, text) == [n for n in NAMES if n not in DANGEROUS]


@pytest.mark.parametrize(
    "text",
    [
        "it's fine to run the tests now, go ahead",
        "it is ok to delete build/",
        "run it and tell me what happens",
        "is the server running?",
        "what happened when I ran it yesterday was odd, check the log",
    ],
)
def test_leave_to_act_or_a_question_about_a_run_is_no_question_whether_to_act(text: str) -> None:
    assert not weighs_acting(text)


def test_the_whether_to_act_rule_reads_a_bounded_start_and_end() -> None:
    assert not weighs_acting("is a b " * 3)
    assert grows_linearly(weighs_acting, "is a b ")
    assert weighs_acting("is it safe to run it? " + "x " * 5_000_000)


@pytest.mark.parametrize(
    "text",
    [
        "How do I parse dates with dateutil?",
        "in zsh, how can you make an alias stick",
        "how to undo the last commit",
        "ok so how to flatten a list of lists",
        "what's the best way to read a big json file in chunks",
        "Is there a way to pin a package to a minor version?",
        "how would one profile a slow loop",
        "How do folks usually lay out a monorepo?",
        "which command would I type to see free disk space",
        "is there a magic command that times a cell?",
        "what's the keyboard shortcut for commenting out lines in vscode",
        "what flag do I pass to grep to ignore case",
        "vscode shortcut to duplicate a line?",
        "git command for undoing a pushed commit",
        "ls option to show hidden files",
        "bash one-liner to count lines in every csv",
        "python snippet for timing a block of code",
        "regex that matches an email address?",
        "what's the usual way to lay out a flask project",
        "is there a quick and easy way to flatten a nested list",
        "what are some ways to speed up a pandas merge",
        # A task asked as a search box is: topic, colon or dash, task, question mark.
        "python: reverse a list in place?",
        "bash - loop over every file in a folder?",
        "SQL: select the newest row per user?",
    ],
)
def test_a_question_asking_how_to_do_something_asks_for_instructions(text: str) -> None:
    assert asks_how_to(text)
    assert allowed_tools(NAMES, DANGEROUS, text) == [n for n in NAMES if n not in DANGEROUS]
    assert Leaning(how_to=True).answer_share == ANSWER_SHARE_HOW_TO
    assert Leaning(how_to=True, named=True).answer_share > ANSWER_SHARE_HOW_TO  # names one here


@pytest.mark.parametrize(
    "text",
    [
        "how does the retry decorator work",
        "how many rows are in df",
        "I don't know how to run the tests, can you run them?",
        "run the linter and tell me how to fix what it finds",
        "what is the way forward here",
        "what command does the deploy script run",
        "which option in setup.cfg sets the line length",
        "the regex in utils.py that strips tags, what does it match",
        "the shortcut key I set up yesterday stopped working, check my keybindings.json",
        "a very long message about many things " * 3 + "how do I do that",
        # Topic first, then a question about what is here, not a task.
        "logs - anything odd since yesterday?",
        "config: is caching on?",
        "deploy script: what does it copy?",
        "tests: run them all now and tell me what fails, then " + "fix " * 60 + "it?",
    ],
)
def test_questions_about_something_or_requests_to_act_are_not_how_to(text: str) -> None:
    assert not asks_how_to(text)


def test_the_how_to_rule_takes_linear_time_on_hostile_text() -> None:
    assert grows_linearly(asks_how_to, "how " + "a-" * 40 + " ")


def call_row(call_id: str, path: str) -> Row:
    return tool_call((call_id, "read_file", {"path": path}))


def test_rules_decide_the_first_round_the_last_round_and_repeats_only() -> None:
    asked = [user("Read notes.txt")]
    once = [*asked, call_row("c1", "notes.txt"), tool_result("c1", "text")]
    again = [*once, call_row("c2", "notes.txt"), tool_result("c2", "text")]
    other = [*once, call_row("c2", "todo.md"), tool_result("c2", "text")]
    assert round_choice(asked, number=1, rounds=5, requested=None) is None  # the model's step
    assert round_choice(asked, number=1, rounds=5, requested="read_file") == "read_file"
    assert round_choice(once, number=2, rounds=5, requested=None) is None
    assert round_choice(once, number=5, rounds=5, requested=None) == "none"
    assert round_choice(again, number=3, rounds=5, requested=None) == "none"
    assert round_choice(other, number=3, rounds=5, requested=None) is None
    # The same call in an earlier turn is no repeat.
    later = [*once, assistant("text"), user("Read notes.txt"), call_row("c3", "notes.txt")]
    assert round_choice(later, number=2, rounds=5, requested=None) is None


@pytest.mark.parametrize(
    ("chosen", "share", "choice"),
    [
        ("none", 0.9, "none"),
        ("none", 0.02, "none"),
        ("read_file", 0.0, "read_file"),
        ("read_file", ANSWER_SHARE / 2, "read_file"),
        ("read_file", ANSWER_SHARE, "none"),  # a first token this split answers in words
        ("run_shell", 0.6, "none"),
    ],
)
def test_the_first_step_calls_a_tool_only_when_answering_got_little_of_its_token(
    chosen: str, share: float, choice: str
) -> None:
    assert step_choice(chosen, share) == choice


def test_read_archived_output_is_offered_only_with_something_archived() -> None:
    schemas = [*SCHEMAS, ARCHIVE_SCHEMA]
    plain = [user("Read notes.txt"), call_row("c1", "notes.txt"), tool_result("c1", "text")]
    pruned = [*plain[:2], to_placeholder(plain[2])]
    summarised = [Row("compacted", "Earlier: notes.txt was read."), *plain]
    assert ARCHIVE_SCHEMA not in offerable(schemas, plain)
    assert offerable(schemas, pruned) == schemas
    assert ARCHIVE_SCHEMA not in offerable(schemas, summarised)  # it names no call id


PATHS = ("README.md", "config.yaml", "logs/", "src/", "todo.md", "logs/server.log", "src/app.py")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("the server wont start, look at the logs", ["logs/", "logs/server.log"]),
        ("what port is in the config?", ["config.yaml"]),
        ("is there anything left on my todo list", ["todo.md"]),
        ("peek at the readme", ["README.md"]),
        ("what's in server.log", ["logs/server.log"]),
        ("which regions ended up in big?", ["big (a variable in the notebook)"]),
        ("show me `df`", ["df (a variable in the notebook)"]),
        ("how do I reverse a list in python", []),
        ("what's a df?", []),  # two letters: only in backticks
        # After "a" or "an": any such thing, not the one here; "the", "my", "any" name it.
        ("what's a README.md for", []),
        ("how do I follow a log file live", []),
        ("is an todo list worth keeping? my todo list is long", ["todo.md"]),
        ("do we have any logs", ["logs/"]),
    ],
)
def test_a_message_names_what_is_here_by_name_stem_or_plural(text: str, named: list[str]) -> None:
    def kind(path: str) -> str:
        return (
            path
            if "(" in path
            else f"{path} (a {'folder' if path.endswith('/') else 'file'} in the workspace)"
        )

    assert named_in(text, PATHS, ["big", "sales", "df"]) == [kind(n) for n in named]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("how can I parse a yaml config file with pyyaml", []),
        ("how can I parse config.yaml with pyyaml", ["config.yaml"]),
        ("how would I grep the logs for errors", ["logs/"]),
        ("how do I rotate my log", []),
    ],
)
def test_without_stems_a_path_is_named_only_by_its_whole_last_part(
    text: str, named: list[str]
) -> None:
    found = named_in(text, PATHS, [], stems=False)
    assert found == [
        f"{path} (a {'folder' if path.endswith('/') else 'file'} in the workspace)"
        for path in named
    ]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("our deps, anything old?", ["requirements.txt", "pyproject.toml"]),
        ("which of our packages are pinned", ["requirements.txt", "pyproject.toml"]),
        ("are we on the latest libraries", ["requirements.txt", "pyproject.toml"]),
        ("what packages are good for plotting", []),  # not ours: nothing here
        ("which libraries do people use for plots", []),
    ],
)
def test_a_message_about_our_dependencies_names_the_files_that_declare_them(
    text: str, named: list[str]
) -> None:
    paths = (*PATHS, "requirements.txt", "pyproject.toml", "web/package-lock.txt")
    listing = "a file in the workspace listing the project's dependencies"
    assert named_in(text, paths, []) == [f"{path} ({listing})" for path in named]
    assert named_in(text, paths, [], stems=False) == []  # asked how to: general knowledge


@pytest.mark.parametrize(
    ("word", "slipped"),
    [
        ("chekcout", "checkout"),  # neighbours swapped
        ("chckout", "checkout"),  # a letter left out
        ("dashbord.py", "dashboard.py"),
        ("checkou", None),  # the last letter left out: a word's other form, not a slip
        ("chekout", "checkout"),
        ("checkuot", "checkout"),
        ("xheckout", None),  # a letter changed: too many words are one letter off another
        ("chekc", None),
    ],
)
def test_a_word_with_one_slip_of_typing_names_what_it_slipped_from(
    word: str, slipped: str | None
) -> None:
    names = ["checkout", "dashboard.py", "check"]
    assert with_slips({word}, names) - {word} == ({slipped} if slipped else set())


def test_a_misspelt_name_names_the_file_variable_or_function_it_slipped_from() -> None:
    symbols = {"checkout": "shop/cart.py"}
    assert named_in("what does chekout return", PATHS, [], symbols) == [
        "checkout (defined in the file shop/cart.py)"
    ]
    assert named_in("is the treshold high", PATHS, ["threshold"]) == [
        "threshold (a variable in the notebook)"
    ]
    assert named_in("whats in the confg", PATHS, []) == ["config.yaml (a file in the workspace)"]
    # Under six letters, only as typed: "gret" is not `greet`.
    assert named_in("what is gret", PATHS, [], {"greet": "app.py"}) == []


def test_slips_take_time_linear_in_the_names_whatever_the_words() -> None:
    def seconds(count: int) -> float:
        words = {f"w{n:07d}" for n in range(2_000)}  # one length, one first letter
        names = [f"w{n:07d}x" for n in range(count)]
        started = time.process_time()
        assert with_slips(words, names) == words  # the last letter left out never slips
        return time.process_time() - started

    seconds(1_000)
    small, large = seconds(10_000), seconds(100_000)
    assert large / max(small, 1e-4) < 30


def test_naming_is_one_pass_over_a_bounded_start_of_the_message() -> None:
    assert named_in("x " * 1_000_000 + "config", PATHS, ["big"]) == []
    assert len(named_in(" ".join(PATHS) + " big", PATHS, ["big"])) == 5


def test_a_message_naming_something_here_leans_to_looking() -> None:
    assert step_choice("read_file", 0.3) == "none"
    assert step_choice("read_file", 0.3, Leaning(named=True)) == "read_file"
    assert step_choice("read_file", 0.6, Leaning(named=True)) == "none"
    assert step_choice("read_file", 0.03, Leaning(after_result=True)) == "none"
    assert step_choice("read_file", 0.01, Leaning(after_result=True, named=True)) == "read_file"
    assert step_choice("none", 0.4, Leaning(named=True)) == "none"  # its likeliest choice


@pytest.mark.parametrize(
    ("text", "points"),
    [
        ("when's the review meeting", True),
        ("is my config ok", True),
        ("anything in here about ports", True),
        ("what port does postgres listen on by default?", False),
        ("I'm curious, what port does postgres use?", False),
        ("capital of australia", False),
        ("", False),
    ],
)
def test_a_message_points_at_something_particular_by_its_words(text: str, points: bool) -> None:
    assert points_at_something(text) is points


@pytest.mark.parametrize(
    ("text", "points"),
    [
        ("is that above 8000?", True),
        ("what's in that file", True),
        ("multiply that by 2", True),
        ("what does that mean", True),
        ("open my notes", True),
        # "that" joining a clause points at nothing.
        ("is there a magic command that lists all variables", False),
        ("write a regex that matches dates", False),
        ("make sure that it works on windows", False),
        ("a function that returned None", False),
    ],
)
def test_that_points_at_something_of_theirs_only_where_it_stands_for_a_thing(
    text: str, points: bool
) -> None:
    assert points_at_theirs(text) is points


@pytest.mark.parametrize(
    "text",
    [
        "add a line about the dentist to plan.md",
        "please put 'renew passport' on the list",
        "ok now fix the typo in the readme",
        "can you rename utils.py to helpers.py",
        "Go ahead and delete the build folder",
    ],
)
def test_a_request_to_change_something_keeps_the_change_pending_after_a_read(text: str) -> None:
    assert asks_for_a_change(text)
    pending = Leaning(after_result=True, change_pending=True)
    assert step_choice("edit_file", 0.15, pending) == "edit_file"
    assert step_choice("edit_file", 0.15, Leaning(after_result=True)) == "none"


@pytest.mark.parametrize(
    "text",
    [
        "what did I add to plan.md yesterday",
        "don't change anything, just add up the numbers in data.csv",
        "how do I rename a branch",
        "is the fix in utils.py right?",
        "a long preamble about the project and its many parts before: add a line",
    ],
)
def test_questions_and_bans_are_not_requests_to_change(text: str) -> None:
    assert not asks_for_a_change(text)


@pytest.mark.parametrize(
    "text",
    [
        "and the Makefile?",
        "What about the other notebook",
        "ok, and the second log",
        "thanks! how about setup.cfg",
        "same for the tests",
        "okay now the changelog",
        "Also the docs folder?",
    ],
)
def test_a_message_opening_by_carrying_on_follows_on(text: str) -> None:
    assert follows_on(text)


@pytest.mark.parametrize(
    "text",
    [
        "what is the answer",
        "Andrew wrote this, is it right?",  # "and" only as the start of a word
        "sandboxes: how do they work",
        "show me the log and the config",  # "and" later on
        "a long opening that says a great deal first, and then asks",
    ],
)
def test_other_openings_do_not_follow_on(text: str) -> None:
    assert not follows_on(text)


def test_a_follow_up_to_a_turn_that_looked_leans_to_looking() -> None:
    looked = [
        user("what is in setup.cfg"),
        tool_call(("c1", "read_file", {"path": "setup.cfg"})),
        tool_result("c1", "[metadata]\nname = demo"),
        assistant("It names the package demo."),
        user("and the Makefile?"),
    ]
    answered = [user("what is a Makefile"), assistant("A build recipe."), user("and cmake?")]
    assert looked_last_turn(looked)
    assert not looked_last_turn(answered)
    assert not looked_last_turn([user("and the Makefile?")])  # nothing before it
    # A call made in this turn is not the turn before's.
    assert not looked_last_turn([*answered, tool_call(("c2", "list_files", {"path": "."}))])
    follow_up = Leaning(follows_a_look=True)
    assert follow_up.answer_share == Leaning(named=True).answer_share
    assert step_choice("read_file", 0.3, follow_up) == "read_file"
    assert step_choice("read_file", 0.3, Leaning()) == "none"
    # "and how do I …" asks for instructions still.
    assert Leaning(follows_a_look=True, how_to=True).answer_share == ANSWER_SHARE_HOW_TO


@pytest.mark.parametrize(
    "text",
    [
        "Don't look at anything, just tell me what a Dockerfile is for",
        "without opening any files: is utf-8 a superset of ascii?",
        "no need to check my setup, what does pip's -e flag do",
        "please don't even search the workspace, what's a good name for a helper module",
        "Do not use tools. Explain recursion.",
        "no tools, what's 3 cubed",
    ],
)
def test_a_message_saying_not_to_look_at_anything_gets_no_tools(text: str) -> None:
    assert forbids_looking(text)
    assert allowed_tools(NAMES, DANGEROUS, text) == []


@pytest.mark.parametrize(
    "text",
    [
        "don't read the tests, just tell me what app.py does",  # one thing: look elsewhere
        "don't open anything else, only notes.txt",  # everything else: look at this
        "no need to search any other folder, the log is in logs/",
        "no need to touch the notebook, what does setup.cfg hold",  # touching is changing
        "I looked at my files and can't find the bug",
        "why are there no tools in my tools/ folder?",
        "don't run anything, just check the log",
        "without changing any files, what would the script delete",
    ],
)
def test_a_ban_on_one_thing_or_on_acting_leaves_the_reading_tools(text: str) -> None:
    assert not forbids_looking(text)
    assert "read_file" in allowed_tools(NAMES, DANGEROUS, text)


@pytest.mark.parametrize(
    "text",
    [
        "in general, what should a .env file never hold?",
        "what's a sensible layout for a docs folder, generally speaking",
        "how are migrations typically named",
        "general question: why do logs rotate",
        "what naming pattern should migration files follow",
        "how should a changelog entry look",
        "which license should an open source library use",
        "what's the default port for redis",
        "which shell does ubuntu use by default",
        "best practice for keeping secrets out of git?",
    ],
)
def test_a_question_about_things_in_general_asks_for_knowledge(text: str) -> None:
    assert asks_for_knowledge(text) and not asks_how_to(text)
    assert "run_shell" not in allowed_tools(NAMES, DANGEROUS, text)
    assert Leaning(how_to=True).answer_share == ANSWER_SHARE_HOW_TO


@pytest.mark.parametrize(
    "text",
    [
        "the server generally dies at startup, check the log",
        "what port does our app typically listen on",
        "is my code in general tested well? run the tests",
        "is debug on by default in our config",
        "which of our files should hold the settings",
        "what value should the port have in the config",
    ],
)
def test_general_words_about_something_of_ours_ask_about_it(text: str) -> None:
    assert not asks_for_knowledge(text)
    assert "run_shell" in allowed_tools(NAMES, DANGEROUS, text)


def test_the_look_ban_takes_linear_time_on_hostile_text() -> None:
    piece = "don't " + "lookup" + "x" * 60 + " without   reading" + " " * 40 + "the  "
    assert not forbids_looking(piece * 3)
    assert grows_linearly(forbids_looking, piece)
    assert grows_linearly(asks_for_knowledge, piece)


TYPED_PATHS = ["config.yaml", "data.csv", "logs/", "logs/a.json", "logs/b.json", "src/app.py"]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("what's the timeout in the yaml", ["config.yaml"]),
        ("is that yml right?", ["config.yaml"]),
        ("sum the second column of my CSV", ["data.csv"]),
        ("what's in the json", []),  # two of them: which one is not said
        ("what is a yaml anchor", []),  # no word pointing at one
        ("csv or parquet for big tables?", []),
        ("does the json module keep key order", []),  # the type's tools, not a file
        ("the csv format quotes commas how?", []),
        ("values in the yaml, are they right", ["config.yaml"]),
        ("the toml", []),  # none here
    ],
)
def test_a_file_named_by_its_type_is_the_only_one_of_that_type(text: str, named: list[str]) -> None:
    assert typed_paths(text, TYPED_PATHS) == named
    assert bool(named_in(text, TYPED_PATHS, [])) is bool(named)
    assert not named_in(
        text, TYPED_PATHS, [], stems=False
    )  # a how-to names files by whole name only


def test_naming_by_type_is_one_pass_over_a_bounded_start() -> None:
    started = time.process_time()
    assert typed_paths("the csv " * 2_000_000, TYPED_PATHS) == ["data.csv"]
    assert typed_paths("x " * 10 + "the yaml" + " y" * 1_000_000, TYPED_PATHS) == ["config.yaml"]
    assert time.process_time() - started < 5


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("is debug turned on?", True),
        ("is pandas installed", True),
        ("are the workers running right now", True),
        ("do I have numpy installed?", True),
        ("is the server up or not", True),
        # "on" that is no state, a question about something else, or not a question.
        ("is my shop on sqlite?", False),
        ("is 97 a prime number", False),
        ("is it bad practice to commit a .env file", False),
        ("turn debug on", False),
    ],
)
def test_a_question_whether_something_here_is_on_or_installed_asks_about_state(
    text: str, asks: bool
) -> None:
    assert asks_about_state(text) is asks


def test_the_state_rule_takes_linear_time_on_hostile_text() -> None:
    assert grows_linearly(asks_about_state, "is " + "word " * 30 + "on ")

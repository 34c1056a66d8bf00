"""An answer that opens by copying the note nbchat sent after a tool round loses those sentences
as it streams, and nothing else (`nbchat.conversation.noteecho`)."""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest
from fakeserver import FakeServer, Reply
from helpers import run

from nbchat.conversation.events import RowSaved
from nbchat.conversation.loop import Conversation
from nbchat.conversation.noteecho import without_note_echo
from nbchat.conversation.notes import AFTER_FAILURES, AFTER_RESULTS
from nbchat.errors import NbchatError
from nbchat.llm.reader import Finish, ReasoningDelta, TextDelta, TextWithdrawn
from nbchat.store.store import Store

NOTE = AFTER_RESULTS.format(asked="")


def streamed(answer: str, asked: str, note: str = NOTE, size: int = 3) -> str:
    """What the user sees of `answer`, streamed in `size`-character pieces."""
    pieces = [TextDelta(answer[i : i + size]) for i in range(0, len(answer), size)]
    events = without_note_echo([*pieces, Finish("stop")], note, asked)
    return "".join(event.text for event in events if isinstance(event, TextDelta))


@pytest.mark.parametrize(
    ("answer", "asked", "shown"),
    [
        # The note's first line copied, the user's words in it: dropped.
        (
            "The user asked: is requests pinned to an exact version?\n"
            "The file pins requests>=2.31, a lower bound.",
            "is requests pinned to an exact version?",
            "The file pins requests>=2.31, a lower bound.",
        ),
        (
            "The user asked: whats still on my list\nThe list holds:\n- buy milk",
            "whats still on my list",
            "The list holds:\n- buy milk",
        ),
        # The user's words alone are an answer ("yes" said by restating): kept.
        (
            "Requests is pinned to an exact version. The line is requests==2.31.",
            "is requests pinned to an exact version?",
            "Requests is pinned to an exact version. The line is requests==2.31.",
        ),
        # An opening copied from the note, before what the results show: left out.
        (
            "The files, items, values or lines that the results show are flask==3.0.2.",
            "which flask",
            "flask==3.0.2.",
        ),
        (
            "The files, items, values or lines those results show are:\n- milk\n- eggs",
            "whats on the list",
            "- milk\n- eggs",
        ),
        # Words of the note in another order are an answer: kept.
        (
            "The results show the files: a.py and b.py.",
            "which files",
            "The results show the files: a.py and b.py.",
        ),
        # Only the copy: kept, so no answer is emptied.
        (
            "The files, items, values or lines.",
            "which",
            "The files, items, values or lines.",
        ),
        # Narrating the call and its result, with a colon: left out, the call's JSON with it.
        (
            'The tool call was: {"name": "read_file", "arguments": {"path": "todo.md"}} '
            "The results showed: # TODO\n- buy milk",
            "whats on my todo list",
            "# TODO\n- buy milk",
        ),
        ("The tool response shows: port 8042.", "port?", "port 8042."),
        ("The results show port 8042.", "port?", "The results show port 8042."),
        # The whole answer a copy: kept, so no answer is emptied.
        ("The results showed:", "port?", "The results showed:"),
        ("The user asked: what is it", "what is it", "The user asked: what is it"),
        ("No.", "is it pinned", "No."),
    ],
)
def test_the_sentences_that_copy_the_note_are_left_out(answer: str, asked: str, shown: str) -> None:
    assert streamed(answer, asked) == shown
    assert streamed(answer, asked, size=1) == shown
    assert streamed(answer, asked, size=len(answer)) == shown


def test_a_copy_of_the_failure_note_is_left_out() -> None:
    answer = (
        "The tool call did not run, or failed: its result says why. The error says the "
        "column 'North' is not there; the regions are lower case."
    )
    assert streamed(answer, "", AFTER_FAILURES) == (
        "The error says the column 'North' is not there; the regions are lower case."
    )


def test_without_a_note_everything_passes_at_once() -> None:
    events = [TextDelta("The user asked: x. "), TextDelta("Yes.")]
    passed = without_note_echo(iter(events), "", "")
    assert next(passed) is events[0]  # nothing held back


def test_reasoning_passes_at_once_and_a_withdrawn_answer_is_held_anew() -> None:
    events = [
        ReasoningDelta("thinking"),
        TextDelta("The user asked: port?"),
        TextWithdrawn("asked again"),
        TextDelta("The user asked: port?\nIt is 8042."),
        Finish("stop"),
    ]
    out = list(without_note_echo(events, NOTE, "port?"))
    assert out[0] == ReasoningDelta("thinking")
    assert out[1] == TextWithdrawn("asked again")
    assert [e.text for e in out if isinstance(e, TextDelta)] == ["It is 8042."]


def test_a_stream_cut_while_text_is_held_keeps_that_text() -> None:
    def cut() -> Any:
        yield TextDelta("The port is 8042")
        raise NbchatError("the server closed the stream")

    passed = without_note_echo(cut(), NOTE, "port?")
    assert next(passed) == TextDelta("The port is 8042")
    with pytest.raises(NbchatError):
        next(passed)


def test_a_huge_answer_is_held_back_only_at_its_start() -> None:
    text = "The user asked: x.\n" + "word " * 2_000_000  # 10 MB
    started = time.process_time()
    out = list(without_note_echo([TextDelta(text), Finish("stop")], NOTE, "x."))
    spent = time.process_time() - started
    baseline_started = time.process_time()
    text.lower().split()
    baseline = time.process_time() - baseline_started
    assert out[0] == TextDelta("word " * 2_000_000)
    assert spent < 10 * baseline + 0.05  # bounded by the held start, not the answer's length


def test_the_saved_answer_after_a_tool_round_lacks_the_copied_note(
    make_settings: Any, store: Store
) -> None:
    settings = make_settings(
        tools_on_request=True, json_tool_fallback=True, tool_policy="deny", max_tool_turns=2
    )
    (settings.workspace / "requirements.txt").write_text("requests>=2.31\n")
    look = Reply(first_step={"read_file": 0.97, "none": 0.03})
    reads = Reply(text='{"tool": "read_file", "arguments": {"path": "requirements.txt"}}')
    copied = Reply(
        text="The user asked: is requests pinned?\nNo: requirements.txt asks for requests>=2.31."
    )
    with FakeServer() as server:
        server.enqueue(look, reads, copied)
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        events = run(Conversation(settings, store, client=client), "is requests pinned?")
    said = [e.row.content for e in events if isinstance(e, RowSaved) and e.row.role == "assistant"]
    assert said == ["No: requirements.txt asks for requests>=2.31."]
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == "No: requirements.txt asks for requests>=2.31."


def test_an_answer_of_its_own_streams_from_its_first_words() -> None:
    pieces = [TextDelta("The port "), TextDelta("is "), TextDelta("8042.\n"), Finish("stop")]
    passed = without_note_echo(iter(pieces), NOTE, "which port?")
    # Released as soon as a whole word is no word of the note: not held to the sentence's end.
    assert next(passed) == TextDelta("The port ")
    assert list(passed) == [TextDelta("is "), TextDelta("8042.\n"), Finish("stop")]

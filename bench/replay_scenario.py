"""The replay behind `bench/replay_savings.py`: a 9-turn coding session, frozen as data.

Issue 3 asks for a replay shaped like a real trace whose FIRST request of each turn had these
prompt sizes (tokens as the server counts them): 20,264 / 22,565 / 58,884 / 77,702 / 77,875 /
78,703 / 81,427 / 89,910 / 90,212, with several tool iterations per turn and no tool result
above 6,000 tokens. This module is that replay, and nothing else; it was committed before any
compaction run was measured against it, and is not to be tuned afterwards.

The session. A notebook user has a data-loading bug. Turn 1's message is the task plus what
they attached from the notebook (the failing cell's source, its output and traceback, a sample
of the data): nbchat's system prompt is short (~50 tokens), so in nbchat the trace's 20k-token
first request can only come from the user's own message. The later turns: fix it across the
readers and run the tests (the big turn), a timezone follow-up, a commit message, the plot
cell, overlapping labels, a new test, a PR description, the README. Every round the "model"
asks for one or two tool calls (`read_file`, `search_files`, `run_shell`, `edit_file`) whose
outputs are deterministic text of the planned size (code, pytest logs with real-looking
failures, grep hits); the last round of each turn is a plain reply.

How sizes are met exactly. The server counts characters // 4 of every message's content and
every tool call's arguments (tool schemas are not counted). Everything the model and the
tools say is fixed here, so each user message is sized (`user_texts`) to make the first
request of its turn the trace's figure to the token, in a run without compaction.

The scripted model (`respond`) is stateless: it reads the newest message of a request. A user
message names its turn (it is looked up by its text); a tool result names its round through
the call id (`call_t<turn>_r<round>_c<call>`, unique in the session, so nbchat keeps it). A
summary request (it carries `response_format`, or the summariser's system prompt) gets a
fixed checkpoint of ~390 tokens, the size a real model writes under `summary_max_tokens`.

Must not: run anything. `replay_server.py` serves `respond` in a child process;
`replay_savings.py` runs the session through `Conversation` and measures it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import harness  # noqa: F401 - puts tests/ on sys.path for the test server's token rule
from fakeserver_replies import Reply, count_prompt_tokens
from helpers import is_summary_request
from replay_text import generated_text

from nbchat.config import DEFAULT_SYSTEM_PROMPT
from nbchat.history import Row, build_messages
from nbchat.tools import Tool, ToolRegistry

TARGET_FIRST_REQUESTS = (20_264, 22_565, 58_884, 77_702, 77_875, 78_703, 81_427, 89_910, 90_212)
SYSTEM_PROMPT = DEFAULT_SYSTEM_PROMPT
CHARS_PER_TOKEN = 4  # the test server's rule
TOOL_OUTPUT_LIMIT = 24_000  # characters: the largest result (5,900 tokens) reaches the model whole
STREAM_CHUNK = 64  # characters per SSE event; the size of the stream does not change the counts


@dataclass(frozen=True)
class Call:
    """One tool call the scripted model makes, and how many tokens its output has."""

    tool: str
    arguments: dict[str, str]
    output_tokens: int


@dataclass(frozen=True)
class Turn:
    """One user turn: the instruction, the tool rounds, and the final reply's size."""

    instruction: str
    rounds: tuple[tuple[Call, ...], ...]
    reply_tokens: int
    thought_tokens: int = 25  # the text the model writes before each round's calls


def _read(path: str, tokens: int, **lines: str) -> Call:
    return Call("read_file", {"path": path, **lines}, tokens)


def _shell(command: str, tokens: int) -> Call:
    return Call("run_shell", {"command": command}, tokens)


def _search(pattern: str, path: str, tokens: int) -> Call:
    return Call("search_files", {"pattern": pattern, "path": path}, tokens)


def _edit(path: str, old: str, new: str) -> Call:
    return Call("edit_file", {"path": path, "old": old, "new": new}, 30)


TURNS: tuple[Turn, ...] = (
    Turn(
        "The `load_measurements` cell in my notebook fails with the traceback below. Find out "
        "why. Attached: the cell's source, its output, and the first rows of the data file.",
        (
            (_search("def load_measurements", "src", 120),),
            (_read("src/labtools/loader.py", 900),),
            (_shell("python -m pytest tests/test_loader.py -q", 450),),
        ),
        reply_tokens=220,
    ),
    Turn(
        "Fix it, and check the other readers in src/labtools/io/ for the same bug. Then run "
        "the whole test suite.",
        (
            (_shell("ls -R src/labtools tests", 600),),
            (_read("src/labtools/io/csv_reader.py", 5_900),),
            (_read("src/labtools/io/excel_reader.py", 4_700),),
            (_read("src/labtools/io/hdf5_reader.py", 5_200),),
            (_search("parse_dates", "src", 1_300),),
            (_read("src/labtools/io/parquet_reader.py", 2_800),),
            (
                _edit("src/labtools/loader.py", "dayfirst=True", "dayfirst=False"),
                _edit("src/labtools/io/csv_reader.py", "dayfirst=True", "dayfirst=False"),
            ),
            (_shell("python -m pytest -q", 5_800),),
            (_read("tests/test_io.py", 5_400),),
            (_shell("python -m pytest tests/test_io.py -q -x", 3_100),),
        ),
        reply_tokens=400,
    ),
    Turn(
        "The HDF5 test still fails on my real data (the cell output is pasted below). Fix the "
        "timezone handling.",
        (
            (_read("src/labtools/io/hdf5_reader.py", 2_200, start_line="120", end_line="260"),),
            (_shell("python -c 'import h5py; print(h5py.version.info)'", 900),),
            (_read("src/labtools/timeutil.py", 4_600),),
            (_edit("src/labtools/timeutil.py", "tz=None", "tz=timezone.utc"),),
            (_shell("python -m pytest tests/test_timeutil.py tests/test_io.py -q", 5_600),),
            (_read("tests/test_timeutil.py", 3_300),),
            (_shell("python -m pytest tests/test_timeutil.py -q --lf", 1_100),),
        ),
        reply_tokens=350,
    ),
    Turn(
        "Good. Write me a commit message.",
        (
            (_shell("git status --short", 25),),
            (_shell("git diff --stat", 40),),
        ),
        reply_tokens=50,
        thought_tokens=0,
    ),
    Turn(
        "Now make the plotting cell use the new loader.",
        (
            (_read("notebooks/analysis.py", 320),),
            (_edit("notebooks/analysis.py", "read_csv(path)", "load_measurements(path)"),),
        ),
        reply_tokens=150,
        thought_tokens=10,
    ),
    Turn(
        "The x-axis labels of the plot overlap. Fix them and render the plots again.",
        (
            (_read("src/labtools/plotting.py", 1_400),),
            (_edit("src/labtools/plotting.py", "rotation=0", "rotation=45"),),
            (_shell("python scripts/render_plots.py", 300),),
        ),
        reply_tokens=250,
    ),
    Turn(
        "Add a test for the timezone case and run the full suite.",
        (
            (_read("tests/conftest.py", 1_800),),
            (_edit("tests/test_timeutil.py", "# timezone cases", "def test_utc_offsets():"),),
            (_shell("python -m pytest -q -p no:cacheprovider", 5_900),),
        ),
        reply_tokens=300,
    ),
    Turn(
        "Summarise the changes for the PR description.",
        (
            (_shell("git log --oneline -5", 60),),
            (_shell("git diff --stat HEAD~3", 70),),
        ),
        reply_tokens=100,
        thought_tokens=0,
    ),
    Turn(
        "Also update the README's section on the loader, then run the doctests.",
        (
            (_read("README.md", 2_400),),
            (_edit("README.md", "read_csv", "load_measurements"),),
            (_shell("python -m pytest --doctest-glob='*.md' README.md -q", 900),),
        ),
        reply_tokens=200,
    ),
)

SUMMARY_CHECKPOINT = json.dumps(
    {
        "goal": "Fix load_measurements in the user's notebook and the readers in "
        "src/labtools/io/ that parse dates the same way; keep the test suite green.",
        "constraints": [
            "Keep the public signature of load_measurements(path, *, tz=None).",
            "Do not change the data files under data/; fix the code.",
        ],
        "done": [
            "Read src/labtools/loader.py and the readers in src/labtools/io/ "
            "(csv_reader.py, excel_reader.py, hdf5_reader.py, parquet_reader.py).",
            "Changed dayfirst=True to dayfirst=False in loader.py and csv_reader.py.",
            "Ran python -m pytest -q: tests in tests/test_io.py failed on the HDF5 fixture.",
            "Searched src/ for parse_dates: four call sites, all with dayfirst=True.",
        ],
        "in_progress": ["Timezone handling in src/labtools/timeutil.py for HDF5 timestamps."],
        "blocked": [],
        "decisions": [
            "Parse dates as ISO 8601 (dayfirst=False): the instrument writes YYYY-MM-DD.",
            "Store timestamps as UTC internally; convert only for display.",
        ],
        "next_steps": [
            "Check excel_reader.py and parquet_reader.py for the same dayfirst assumption.",
            "Run python -m pytest tests/test_timeutil.py tests/test_io.py -q.",
            "Update the plotting cell to call load_measurements.",
        ],
        "critical_context": [
            "The failing cell raised ValueError: time data '13/04/2023' does not match format.",
            "Fixture data lives in tests/data/; the notebook is notebooks/analysis.py.",
            "The CSV exports from the instrument use DD/MM/YYYY HH:MM in local time (CET).",
            "tests/test_io.py::test_hdf5_roundtrip compares against tests/data/sample.h5.",
        ],
    },
    indent=1,
)


def call_id(turn: int, round_index: int, call_index: int) -> str:
    return f"call_t{turn}_r{round_index}_c{call_index}"


def parse_call_id(value: str) -> tuple[int, int]:
    """(turn, round) of a call id made by `call_id`."""
    parts = value.split("_")
    return int(parts[1][1:]), int(parts[2][1:])


OUTPUT_KIND = {"read_file": "code", "run_shell": "log", "search_files": "grep"}


def tool_output(call: Call) -> str:
    """The deterministic output of one planned call."""
    key = call.tool + json.dumps(call.arguments, sort_keys=True)
    chars = call.output_tokens * CHARS_PER_TOKEN
    if call.tool == "edit_file":
        head = f"Edited {call.arguments['path']}: 1 replacement.\n"
        return head + generated_text(key, chars - len(head), "code")
    return generated_text(key, chars, OUTPUT_KIND[call.tool])


def arguments_json(call: Call) -> str:
    return json.dumps(call.arguments)


def thought(turn: int, round_index: int, tokens: int) -> str:
    return generated_text(f"thought {turn} {round_index}", tokens * CHARS_PER_TOKEN, "prose")


def final_reply(turn: int) -> str:
    plan = TURNS[turn - 1]
    return generated_text(f"reply {turn}", plan.reply_tokens * CHARS_PER_TOKEN, "prose")


def turn_rows(turn: int, user_text: str) -> list[Row]:
    """The rows one turn adds in a run without compaction, exactly as nbchat stores them."""
    plan = TURNS[turn - 1]
    rows = [Row("user", user_text)]
    for round_index, calls in enumerate(plan.rounds):
        wire = [
            {
                "id": call_id(turn, round_index, index),
                "type": "function",
                "function": {"name": call.tool, "arguments": arguments_json(call)},
            }
            for index, call in enumerate(calls)
        ]
        text = thought(turn, round_index, plan.thought_tokens)
        rows.append(Row("assistant_full", text, "", "", json.dumps(wire, ensure_ascii=False)))
        for index, call in enumerate(calls):
            rows.append(
                Row("tool", tool_output(call), call_id(turn, round_index, index), call.tool)
            )
    rows.append(Row("assistant", final_reply(turn)))
    return rows


def user_texts() -> tuple[str, ...]:
    """Each turn's user message, sized so the turn's first request is the trace's figure."""
    texts: list[str] = []
    rows: list[Row] = []
    for turn, target in enumerate(TARGET_FIRST_REQUESTS, start=1):
        instruction = TURNS[turn - 1].instruction
        floor = _prompt_tokens([*rows, Row("user", "")])
        pad = (target - floor) * CHARS_PER_TOKEN - len(instruction) - 2
        if pad < 0:
            raise ValueError(f"turn {turn}: the earlier turns already exceed {target:,} tokens")
        attached = generated_text(f"attached {turn}", pad, "attachment" if turn == 1 else "prose")
        text = f"{instruction}\n\n{attached}" if pad else instruction.ljust(len(instruction) + 2)
        texts.append(text)
        rows.extend(turn_rows(turn, text))
    return tuple(texts)


def _prompt_tokens(rows: Sequence[Row]) -> int:
    return count_prompt_tokens({"messages": build_messages(rows, SYSTEM_PROMPT)})


class ScriptedModel:
    """The replay's model: answers each request from its newest message (see the docstring)."""

    def __init__(self) -> None:
        self.turn_of_text = {text: turn for turn, text in enumerate(user_texts(), start=1)}

    def respond(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return Reply(text=SUMMARY_CHECKPOINT, chunk_size=STREAM_CHUNK)
        newest = body["messages"][-1]
        if newest["role"] == "user":
            return self.step(self.turn_of_text[newest["content"]], 0)
        if newest["role"] == "tool":
            turn, round_index = parse_call_id(newest["tool_call_id"])
            return self.step(turn, round_index + 1)
        raise ValueError(f"the replay cannot answer a request ending with {newest['role']!r}")

    def step(self, turn: int, round_index: int) -> Reply:
        plan = TURNS[turn - 1]
        if round_index == len(plan.rounds):
            return Reply(text=final_reply(turn), chunk_size=STREAM_CHUNK)
        calls = tuple(
            (call_id(turn, round_index, index), call.tool, arguments_json(call))
            for index, call in enumerate(plan.rounds[round_index])
        )
        text = thought(turn, round_index, plan.thought_tokens)
        return Reply(text=text, tool_calls=calls, chunk_size=STREAM_CHUNK)


def replay_tools() -> ToolRegistry:
    """The four tools the replay's model calls; each returns its planned output."""
    outputs = planned_outputs()

    def planned(tool: str, **arguments: str | None) -> str:
        given = {name: value for name, value in arguments.items() if value is not None}
        return outputs[(tool, json.dumps(given, sort_keys=True))]

    def read_file(path: str, start_line: str | None = None, end_line: str | None = None) -> str:
        """Read a file of the workspace, or a range of its lines."""
        return planned("read_file", path=path, start_line=start_line, end_line=end_line)

    def run_shell(command: str) -> str:
        """Run a shell command in the workspace."""
        return planned("run_shell", command=command)

    def search_files(pattern: str, path: str) -> str:
        """Search the files under a path for a pattern."""
        return planned("search_files", pattern=pattern, path=path)

    def edit_file(path: str, old: str, new: str) -> str:
        """Replace text in a file."""
        return planned("edit_file", path=path, old=old, new=new)

    return ToolRegistry(
        [Tool.from_function(f) for f in (read_file, run_shell, search_files, edit_file)]
    )


def planned_outputs() -> dict[tuple[str, str], str]:
    """Every planned call's output, by (tool, arguments); each call is made once."""
    outputs: dict[tuple[str, str], str] = {}
    for plan in TURNS:
        for calls in plan.rounds:
            for call in calls:
                key = (call.tool, json.dumps(call.arguments, sort_keys=True))
                if key in outputs:
                    raise ValueError(f"the replay calls {key} twice; make each call unique")
                outputs[key] = tool_output(call)
    return outputs

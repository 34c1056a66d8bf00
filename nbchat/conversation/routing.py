"""Which first step a small model's turn takes: asked on the offer's own prompt, weighed, and
aimed.

On a model that gets its tools described rather than sent (`nbchat.tools.offer`), each round
starts by asking the model whether to answer or which tool to call (`nbchat.llm.firststep`):
`first_step_messages` builds what it is asked on (the workspace, the notebook's sights, the
conversation in brief, what the message names, which files hold its words), `choose_first_step`
weighs the answer (`nbchat.tools.choice`) among the tools this turn allows and, for a tool, asks
for the call's arguments and turns a misaimed call to the tool that looks at what it aimed at.
The prompt-cache warm-up builds the same messages (`nbchat.conversation.warmup`).

Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbchat.conversation.turn import TurnParts, Unlooked
from nbchat.errors import NbchatError, ServerUnavailableError
from nbchat.history import Row, ToolCall, last_user_text, new_call_id, stored_calls
from nbchat.llm.firststep import ask_arguments, ask_first_step
from nbchat.tools.asking import (
    asks_about_state,
    asks_for_a_change,
    asks_for_knowledge,
    asks_for_the_newest_cell,
    asks_why,
    follows_on,
    looked_into,
    speaks_of_the_notebook,
)
from nbchat.tools.choice import (
    NO_TOOL,
    Here,
    Leaning,
    aimed_call,
    allowed_tools,
    looked_last_turn,
    step_choice,
    turn_calls,
)
from nbchat.tools.fileaccess import exists_inside, open_regular
from nbchat.tools.filewords import describe_found
from nbchat.tools.frames import Outline, spelt_as_in_data
from nbchat.tools.offer import (
    MESSAGE_SCAN,
    named_in,
    paths_named,
    points_at_something,
    points_at_theirs,
    router_messages,
    speaks_of_their_own,
    specific_words,
    symbols_in,
)
from nbchat.tools.registry import Sight

__all__ = [
    "FirstStep",
    "SMALL_FILE_BYTES",
    "after_tool",
    "choose_first_step",
    "first_step_messages",
]


def after_tool(parts: TurnParts) -> bool:
    """Whether the turn's last row is a tool result (the round after a tool round)."""
    rows = parts.history.rows
    return bool(rows) and rows[-1].role == "tool"


@dataclass(frozen=True)
class FirstStep:
    """A small model's choice for a round: "none" (words) or a tool, with the call when the
    first step wrote its arguments. `unlooked`: set when the model itself chose words before
    any tool ran this turn, so its answer has read nothing, with what the message names or
    points at here (`nbchat.tools.offer.points_at_theirs`). An answer that then says it was
    not told, speaks of a file here, or says yes or no about what the message names did not
    look (`nbchat.conversation.reply` asks again with `look`)."""

    choice: str
    call: ToolCall | None = None
    unlooked: Unlooked | None = None


def choose_first_step(
    parts: TurnParts,
    schemas: Sequence[dict[str, Any]],
    stop: threading.Event,
    *,
    look: bool = False,
) -> FirstStep | None:
    """The model's first step (`nbchat.llm.firststep`, weighed by
    `nbchat.tools.choice.step_choice`) among the tools this turn allows, asked on its own
    prompt (`nbchat.tools.offer.router_messages`); for a tool, the call's arguments too. None
    after Stop. Arguments the tool refuses leave the call to the chat, forced to that tool.
    With `look`, answering in words is not among the choices (an answer given without looking
    spoke of what it had not read)."""
    last_user = last_user_text(parts.history.rows)
    dangerous = {name for name in parts.tools.names() if _is_dangerous(parts, name)}
    names = [schema["function"]["name"] for schema in schemas]
    allowed = allowed_tools(names, dangerous, last_user)
    if not allowed:
        return FirstStep(NO_TOOL)
    sights = parts.tools.sights(allowed)  # read once: they call into the user's notebook
    named = _named(parts, parts.history.rows, sights)
    if not look and not after_tool(parts) and _asks_for_knowledge_only(last_user, named):
        return FirstStep(NO_TOOL)
    # Every tool of the turn is described, whatever this message allows: the grammar holds the
    # choice to `allowed`, and the prompt stays the one the warm-up read. Described only the
    # allowed tools, a how-to sent first re-read its whole prompt (~12 s more on two cores).
    messages = first_step_messages(
        parts, schemas, parts.history.rows, sights=sights, named=named, look=look
    )
    leaning = Leaning(
        after_result=after_tool(parts),
        named=bool(named),
        how_to=asks_for_knowledge(last_user),
        change_pending=asks_for_a_change(last_user) and not _changed(parts, dangerous),
        follows_a_look=follows_on(last_user) and looked_last_turn(parts.history.rows),
    )
    client, model = parts.budget.connect().client, parts.settings.model
    try:
        step = ask_first_step(
            client, messages, model=model, names=allowed, stop=stop, answering=not look
        )
        if step is None:
            return None
        # With `look` the grammar held it to a tool: no share to weigh.
        choice = step.chosen if look else step_choice(step.chosen, step.answer_share, leaning)
        if choice == NO_TOOL:
            if turn_calls(parts.history.rows):
                return FirstStep(NO_TOOL)
            # Not a how-to: its answer names files here as examples ("run `pytest
            # tests/test_app.py`"), and a yes or a no to it is no claim about them.
            said = tuple(dict.fromkeys(entry.split(" (", 1)[0] for entry in named))
            if leaning.how_to:
                return FirstStep(NO_TOOL, unlooked=Unlooked(named=said))
            about_state = asks_about_state(last_user)
            # "my", "our" or "we" in a question asking why or what something means asks for
            # an explanation, whose words are its own, not claims about what is here.
            theirs = speaks_of_their_own(last_user) and not asks_why(last_user)
            owned = bool(said) or theirs or about_state
            pointed = owned or points_at_theirs(last_user)
            unlooked = Unlooked(pointed, said, owned=owned, about_state=about_state)
            return FirstStep(NO_TOOL, unlooked=unlooked)
        schema = next(s for s in schemas if s["function"]["name"] == choice)
        parameters = schema["function"].get("parameters") or {}
        # A call whose arguments are code, or a `run_cell` of code the aim makes `run_code`.
        writes_code = "code" in parameters.get("properties", {}) or (
            choice == "run_cell" and "run_code" in allowed
        )
        # Outlined only for code: reading them is work no other choice needs.
        every_frame = [pair for sight in sights for pair in sight.frames()] if writes_code else []
        frames = _frames_named(every_frame, specific_words(last_user[:MESSAGE_SCAN]))
        arguments = ask_arguments(
            client,
            _with_frames(messages, frames),
            model=model,
            name=choice,
            parameters=parameters,
            stop=stop,
        )
    except ServerUnavailableError as exc:
        raise parts.budget.lost(exc) from exc
    if stop.is_set():
        return None
    if arguments is None or not parts.tools.accepts(choice, arguments):
        return FirstStep(choice)
    choice, arguments = _aimed(
        parts, choice, arguments, allowed=allowed, sights=sights, last_user=last_user
    )
    if writes_code and isinstance(arguments.get("code"), str):
        # Spelt as the frames the message names hold, else as any of the notebook's: code
        # comparing a region to 'West' is about the frame holding 'west', named or not.
        spelling = frames or [outline for _, outline in every_frame]
        values = [value for frame in spelling for value in frame.values]
        spelt = spelt_as_in_data(arguments["code"], values, written=last_user[:MESSAGE_SCAN])
        arguments = {**arguments, "code": spelt}
    call = ToolCall(new_call_id(), choice, json.dumps(arguments, ensure_ascii=False))
    return FirstStep(choice, call)


# Before the user's message, when the chosen tool writes code: what the DataFrames the message
# names hold, as `nbchat.tools.frames` outlines them.
FRAMES_NOTE = (
    "Code over these DataFrames uses their names and columns, and text values exactly as "
    "listed (case matters): "
)


def _frames_named(frames: Sequence[tuple[str, Outline]], words: set[str]) -> list[Outline]:
    """The outlines of the notebook's DataFrames (`Sight.frames`: name and outline pairs) named
    among a message's `words`. Only those named: told of every frame, a 1.5B model asked for
    an average over all the rows took it from the frame listed first, a filtered copy."""
    return [outline for name, outline in frames if name.lower() in words]


def _with_frames(messages: list[dict[str, Any]], frames: Sequence[Outline]) -> list[dict[str, Any]]:
    """`messages` with `frames` told just before the user's message (`messages` when there are
    none), for a call whose arguments are code."""
    if not frames:
        return messages
    note = {"role": "system", "content": FRAMES_NOTE + " ".join(frame.line for frame in frames)}
    return [*messages[:-1], note, messages[-1]]


def _aimed(
    parts: TurnParts,
    choice: str,
    arguments: dict[str, Any],
    *,
    allowed: Sequence[str],
    sights: Sequence[Sight],
    last_user: str,
) -> tuple[str, dict[str, Any]]:
    """The call a first step's `choice(arguments)` becomes (`aimed_call`), given what the
    user's last message (`last_user`) names of the workspace and the notebook (`sights`, read
    once)."""
    here = _here(parts, sights)
    paths = parts.overview.paths()
    # The message's paths and words, read once for both rules.
    said = paths_named(last_user, paths)
    words = specific_words(last_user[:MESSAGE_SCAN])
    sole = _sole_files(said, paths, words, looked_into(last_user))
    # The files a cell tool's call turns to, unless the message speaks of the notebook (then a
    # cell tool may be what it asks for): named by path, or by a name their code defines that
    # is no variable of the notebook, else the one file of a folder named in the singular
    # (asked what "the unit test" checks, a 1.5B model read the notebook's first cell).
    files: list[str] = []
    variables: list[str] = []
    if not speaks_of_the_notebook(last_user):
        files = _files_named(words, said, here) or list(sole.values())
        variables = sorted(name for name in here.variables if name.lower() in words)
    return aimed_call(
        choice,
        arguments,
        here,
        allowed,
        named_files=files,
        named_variables=variables,
        sole_files=sole,
        newest_cell=asks_for_the_newest_cell(last_user),
    )


def _files_named(words: set[str], said: Sequence[str], here: Here) -> list[str]:
    """The files a message names: those of `said` (its paths), then the files defining the
    names of the code among its `words` (`greet` → `src/app.py`) that are not notebook
    variables; each once."""
    files = [path for path in said if not path.endswith("/")]
    files += [
        where for name, where in symbols_in(words, here.symbols) if name not in here.variables
    ]
    return list(dict.fromkeys(files))


def _here(parts: TurnParts, sights: Sequence[Sight]) -> Here:
    """What a first step's call may aim at: the listed files, the notebook's variables, the
    names the code defines."""
    overview = parts.overview
    files = frozenset(path for path in overview.paths() if not path.endswith("/"))
    variables = frozenset(name for sight in sights for name in sight.names)
    workspace = parts.settings.workspace
    return Here(
        files,
        variables,
        overview.symbols(),
        installed=_installed,
        python=sys.executable,
        small=lambda path: _is_small(workspace, path),
        exists=lambda path: exists_inside(workspace, path),
    )


# A file this small is read whole rather than searched inside: it fits any tool output limit.
SMALL_FILE_BYTES = 4_096


def _is_small(workspace: Path, path: str) -> bool:
    """Whether `path` is a regular file inside `workspace` of at most `SMALL_FILE_BYTES`."""
    try:
        fd, status = open_regular(workspace, path)
    except (OSError, NbchatError):
        return False
    os.close(fd)
    return status.st_size <= SMALL_FILE_BYTES


def _installed(name: str) -> bool:
    """Whether a distribution called `name` is installed in this kernel's environment."""
    try:
        importlib.metadata.distribution(name)
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        return False
    return True


def first_step_messages(
    parts: TurnParts,
    schemas: Sequence[Mapping[str, Any]],
    rows: Sequence[Row],
    *,
    sights: Sequence[Sight] | None = None,
    named: Sequence[str] | None = None,
    look: bool = False,
) -> list[dict[str, Any]]:
    """What a first step is asked on (`nbchat.tools.offer.router_messages`): the turn's tools
    (`schemas`, all of them, so the prompt is the same for every message), the workspace, what
    the tools can see (`sights`, read here unless the caller read them), the conversation in
    `rows` and what its last message names (`named`, likewise); with `look` (a tool must be
    chosen), which files hold the words of any message that names nothing."""
    if sights is None:
        sights = parts.tools.sights([str(schema["function"]["name"]) for schema in schemas])
    if named is None:
        named = _named(parts, rows, sights)
    return router_messages(
        schemas,
        rows,
        workspace=parts.overview.text() if parts.overview.enabled else "",
        notes=[sight.line for sight in sights],
        named=named,
        found="" if named else _files_holding(parts, last_user_text(rows), look=look),
    )


def _asks_for_knowledge_only(text: str, named: Sequence[str]) -> bool:
    """Whether the user's `text` asks how to do something or about things in general
    (`asks_for_knowledge`) and names nothing here (`named`), says nothing of the notebook and
    points at nothing of theirs ("my", "our", "this": `points_at_theirs`): then it is answered
    in words without asking the model. Asked in general for the tail end of any log, a 1.5B
    model read the workspace's own log and answered with its lines."""
    return (
        asks_for_knowledge(text)
        and not named
        and not speaks_of_the_notebook(text)
        and not points_at_theirs(text)
    )


def _files_holding(parts: TurnParts, text: str, *, look: bool = False) -> str:
    """Which files hold the words of a message that names nothing here, points at something
    particular and does not ask how to do something (`nbchat.tools.filewords`), or of any
    message when a tool must be chosen (`look`). With a file named, a 1.5B model told that
    "server" was in config.yaml searched the logs for it instead of reading the log it was
    asked about; asked how to do something, or about no thing in particular (which port a
    database server listens on by default), it is general knowledge whatever words it shares
    with the files. Made to look after answering a one-word question about a setting that it
    was not told the value, and told nothing, the same model read the notebook's last error."""
    if not look and (asks_for_knowledge(text) or not points_at_something(text)):
        return ""
    return describe_found(parts.overview.files_holding(text))


def _named(parts: TurnParts, rows: Sequence[Row], sights: Sequence[Sight]) -> list[str]:
    """What the user's last message names of the workspace and the notebook. A message asking
    how to do something names a path only by its whole name (`config.yaml`, `logs`): its
    other words describe the task, and read as naming what shares their stem (a question
    about parsing config files in general named `config.yaml`; one about making scripts
    runnable, `scripts/`) they sent a 1.5B model to read that file or insert a cell instead
    of answering."""
    last_user = last_user_text(rows)
    names = [name for sight in sights for name in sight.names]
    columns = {column: name for sight in sights for column, name in sight.columns}
    overview = parts.overview
    return named_in(
        last_user,
        overview.paths(),
        names,
        overview.symbols(),
        columns,
        stems=not asks_for_knowledge(last_user),
    )


def _sole_files(
    said: Sequence[str], paths: Sequence[str], words: set[str], looked: set[str]
) -> dict[str, str]:
    """Each folder of `said` (the paths a message names) that `paths` (the overview's) show
    holding one entry, a file, named in its `words` in the singular only ("the log" for
    `logs/`) or asked to be looked into by its own name (`looked`: "read the logs, why does
    it crash?"): that file. Otherwise said by its own name ("the tests folder", "any
    tests"), the folder itself is asked about: what is in it, whether it has anything."""
    sole = {}
    for folder in (path for path in said if path.endswith("/")):
        name = folder.rstrip("/").rsplit("/", 1)[-1].lower()
        singular = name.removesuffix("s")
        in_singular = singular != name and singular in words and name not in words
        if not in_singular and name not in looked:
            continue
        inside = [path for path in paths if path.startswith(folder) and path != folder]
        if len(inside) == 1 and not inside[0].endswith("/"):
            sole[folder] = inside[0]
    return sole


def _changed(parts: TurnParts, dangerous: Collection[str]) -> bool:
    """Whether a tool that runs or changes things was called since the user's last message."""
    return any(
        name in dangerous
        for row in turn_calls(parts.history.rows)
        for _id, name, _arguments in stored_calls(row)
    )


def _is_dangerous(parts: TurnParts, name: str) -> bool:
    found = parts.tools.get(name)
    return found is not None and found.dangerous

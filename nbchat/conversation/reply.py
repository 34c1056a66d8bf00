"""One streamed reply of a turn, and the tool that reads back a pruned tool output (offered only
while one is archived).

One reply of the chat model: the request planned (the tools, sent or described in the system
prompt, the system prompt, the messages), on a small model its first step asked (answer, or
which tool: `nbchat.conversation.routing`), the reply streamed, recorded as sent, and saved
with its usage; after a context overflow, one forced compaction and one more try
(`request_reply`); on a small model, the notes it is told beside the conversation
(`nbchat.conversation.notes`).

A stream that fails keeps what arrived as complete rows and then raises.

The archive tool reads back a tool output that compaction pruned, by the call id named in its
placeholder, and is offered only while a placeholder among the rows names an archived output (a
summary names no call id, so it gives the tool nothing to read). Offered always, a 0.5B model
called it when asked for the current directory (issue 12). It reads the store it is handed; it
never writes.

Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from nbchat.compaction.cacheform import RequestShape
from nbchat.compaction.prune import is_placeholder
from nbchat.conversation.events import Event, Notice, RequestStarted, UsageReported
from nbchat.conversation.grounding import (
    facts_stated,
    figures_unshown,
    files_spoken_of,
    invented_files,
    names_nothing_shown,
    results_quoted,
    says_it_was_not_told,
    says_yes_or_no,
)
from nbchat.conversation.noteecho import without_note_echo
from nbchat.conversation.notes import (
    AFTER_FAILURES,
    AFTER_RESULTS,
    ASKED_AGAIN,
    after_results,
    last_results,
    worked_out,
)
from nbchat.conversation.routing import after_tool, choose_first_step
from nbchat.conversation.turn import (
    Round,
    Steps,
    StreamedReply,
    TurnParts,
    compact_after_overflow,
    post_notice,
    save_rows,
    warn_over_budget,
)
from nbchat.errors import ContextOverflowError, NbchatError, ServerUnavailableError
from nbchat.history import Row, build_messages, last_user_text, stored_calls
from nbchat.llm.client import stream_chat
from nbchat.llm.reader import ReasoningDelta, TextDelta, TextWithdrawn
from nbchat.store.store import Store
from nbchat.tools.choice import NO_TOOL
from nbchat.tools.executor import is_failed_result
from nbchat.tools.fileaccess import exists_inside
from nbchat.tools.jupyterhelp import jupyter_reference
from nbchat.tools.offer import brief

__all__ = [
    "ARCHIVE_TOOL",
    "EMPTY_REPLY_NOTICE",
    "RequestPlan",
    "STOPPED_NOTICE",
    "SessionSource",
    "archived_output_tool",
    "offerable",
    "plan_request",
    "request_reply",
    "request_system_prompt",
    "request_tools",
    "save_reply",
    "stream_reply",
    "system_prompt_for",
    "uses_grammars",
]


ARCHIVE_TOOL = "read_archived_output"


class SessionSource(Protocol):
    store: Store
    id: str | None


def archived_output_tool(source: SessionSource) -> Callable[[str], str]:
    """A tool that reads back a tool output that compaction pruned, by its call id."""

    def read_archived_output(tool_id: str) -> str:
        """Read the full text of an earlier tool output that was pruned to save context.

        Args:
            tool_id: the call id named in the placeholder that replaced the output.
        """
        if source.id is None:
            return "No session is open, so there is nothing archived to read."
        found = source.store.find_tool_result(source.id, tool_id)
        if found is None:
            return f"No tool output with id {tool_id!r} in this session."
        return found.row.content

    return read_archived_output


def offerable(schemas: Sequence[dict[str, Any]], rows: Sequence[Row]) -> list[dict[str, Any]]:
    """`schemas` without `read_archived_output` unless `rows` hold the placeholder of a pruned
    output, which names the call id the tool reads back."""
    if any(is_placeholder(row) for row in rows):
        return list(schemas)
    return [schema for schema in schemas if schema["function"]["name"] != ARCHIVE_TOOL]


STOPPED_NOTICE = "Stopped by you; the reply so far was kept."
EMPTY_REPLY_NOTICE = "The model sent an empty reply. Try rephrasing, or /retry."


def request_reply(
    parts: TurnParts, state: Round, stop: threading.Event
) -> Generator[Event, None, StreamedReply]:
    """One streamed request; after an overflow, one forced compaction and one retry; after a
    tool result, an empty reply asked once more, for words (`tool_choice="none"`), and a small
    model's answer that names nothing the results show, a file that is not here, or a figure
    nothing shows, withdrawn and asked once more (`Reask`), then followed by the results it was
    about if it still names nothing they show (`nbchat.conversation.grounding.results_quoted`),
    as is an answer to a round whose calls all failed that names nothing of the failures; a
    small model's answer given without looking that speaks of what it has not read
    (`_unread`), withdrawn and looked into first (its first step asked to choose a tool)."""
    choice = state.tool_choice
    asked_again: Reask | None = None
    look = False
    while True:
        yield from warn_over_budget(parts)
        yield RequestStarted(state.number, 2 if state.overflow_retried else 1)
        try:
            reply = yield from stream_reply(parts, stop, choice, asked_again=asked_again, look=look)
            if reply.is_empty and not reply.stopped and after_tool(parts) and choice != NO_TOOL:
                choice = NO_TOOL  # models answered nothing after a read (issue 19): ask again
                continue
            if not look and (unread := _unread(parts, reply)):
                look = True
                yield TextWithdrawn(unread)
                continue
            answered = _answered_round(parts, reply)
            if asked_again is None and (asked_again := _reask(parts, reply, answered)):
                choice = NO_TOOL
                yield TextWithdrawn(asked_again.why)
                continue
            failures = answered == "failures"
            if (asked_again is not None or failures) and _names_nothing_shown(
                parts, reply, answered
            ):
                # Asked again and still naming nothing read, or saying nothing of what failed
                # (a 1.5B model answered a failed insert with the note's "its result says
                # why"): the user sees what the calls returned.
                labelled = _labelled_results(parts.history.rows, failed=failures)
                quoted = TextDelta(results_quoted(labelled))
                reply.take(quoted)
                yield quoted
            break
        except ContextOverflowError as exc:
            if state.overflow_retried:
                raise ContextOverflowError(
                    f"The request is still too big for the model after compacting: {exc} "
                    "Start a new session (/new), or give the server a larger context.",
                    prompt_tokens=exc.prompt_tokens,
                    context_size=exc.context_size,
                ) from exc
            state.overflow_retried = True
            yield Notice(f"The server said the request was too big; compacting. ({exc})")
            yield from compact_after_overflow(parts, exc, stop)
    yield from save_reply(parts, reply)
    return reply


@dataclass(frozen=True)
class RequestPlan:
    """What a request of the chat sends besides its tool choice: the tools the model may use,
    whether they travel in the request (or, on a small model, only bound its first step and
    its forced calls: `nbchat.tools.offer`), the system prompt and the messages; after a tool
    round on a small model, the note's own words (`note`) and the user's message it quotes
    (`quoted`), so an answer that opens by copying them is caught (`nbchat.conversation.
    noteecho`)."""

    schemas: list[dict[str, Any]]
    in_prompt: bool
    system_prompt: str
    messages: list[dict[str, Any]]
    note: str = ""
    quoted: str = ""

    @property
    def body_tools(self) -> list[dict[str, Any]]:
        return [] if self.in_prompt else self.schemas


def request_tools(parts: TurnParts) -> list[dict[str, Any]]:
    """The tool schemas the next request carries: none when they travel in the prompt. What
    `plan_request` gives as `body_tools`, without building the messages (the budget asks for
    it at every access)."""
    return [] if takes_notes(parts) else _offered(parts)


def request_system_prompt(parts: TurnParts) -> str:
    """The next request's system prompt, as `plan_request` gives it, without the messages."""
    return system_prompt_for(parts, _offered(parts))


def _offered(parts: TurnParts) -> list[dict[str, Any]]:
    """The tools the model may use in the next request (`offerable` of the registry's)."""
    return offerable(parts.tools.schemas(), parts.history.rows)


@dataclass(frozen=True)
class Reask:
    """Why a small model's answer after a tool round is withdrawn and asked again: `why`, for
    the user; `invented`, the files it named that are nowhere, and `unshown`, the figures it
    stated that nothing shows (none when it named nothing the
    results show)."""

    why: str
    invented: tuple[str, ...] = ()
    unshown: tuple[str, ...] = ()


def plan_request(parts: TurnParts, *, asked_again: Reask | None = None) -> RequestPlan:
    """The next request's tools, system prompt and messages; `asked_again`: an answer after a
    tool round is asked again, and why (a small model's notes)."""
    schemas = _offered(parts)
    in_prompt = takes_notes(parts)
    system_prompt = system_prompt_for(parts, schemas)
    messages = build_messages(parts.history.rows, system_prompt)
    if not in_prompt:
        return RequestPlan(schemas, in_prompt, system_prompt, messages)
    rows = parts.history.rows
    if rows and rows[-1].role == "tool":
        invented, unshown = (asked_again.invented, asked_again.unshown) if asked_again else ((), ())
        note, quoted, told = after_results(rows, asked_again is not None, invented, unshown)
        messages = [*messages, {"role": "system", "content": told}]
        return RequestPlan(schemas, in_prompt, system_prompt, messages, note, quoted)
    if rows and rows[-1].role == "user" and (worked := _worked_out(rows[-1].content)):
        # Just before the message: a note after it made a 1.5B model echo the question.
        messages = [*messages[:-1], {"role": "system", "content": worked}, messages[-1]]
    return RequestPlan(schemas, in_prompt, system_prompt, messages)


def _worked_out(message: str) -> str:
    """What a small model is told before answering `message` (`nbchat.conversation.notes.
    worked_out`), with this Jupyter's own entries for it (`jupyter_reference`)."""
    return worked_out(message, jupyter_reference(message))


def _reask(parts: TurnParts, reply: StreamedReply, answered: str) -> Reask | None:
    """Why `reply`, a small model's words after a tool round that did not all fail (`answered`,
    from `_answered_round`, is "results"), is asked again, if it is
    (`nbchat.conversation.grounding`): it names nothing its results show
    (judged only on a whole answer: one cut at `max_tokens` may not have got to them), a
    file that no earlier text of the session holds and that is not here (a 1.5B model that
    named one ran on listing made-up values to the limit), or a figure none holds
    (`figures_unshown`)."""
    rows = parts.history.rows
    if answered != "results":
        return None
    if _names_nothing_shown(parts, reply, answered):
        return Reask("the answer named nothing the tool results show")
    invented = invented_files(reply.text, _earlier_texts(rows), lambda name: _is_here(parts, name))
    if invented:
        which = "which is" if len(invented) == 1 else "which are"
        return Reask(f"the answer named {', '.join(invented)}, {which} not here", tuple(invented))
    unshown = figures_unshown(reply.text, _earlier_texts(rows))
    if unshown:
        which = "which no result shows" if len(unshown) == 1 else "which no results show"
        return Reask(f"the answer stated {', '.join(unshown)}, {which}", unshown=tuple(unshown))
    return None


def _answered_round(parts: TurnParts, reply: StreamedReply) -> str:
    """What round `reply` answers, when it is a small model's words after a tool round:
    "results" when some of its calls did not fail, "failures" when all did; "" otherwise."""
    if reply.calls or reply.stopped or not after_tool(parts):
        return ""
    if not takes_notes(parts):
        return ""  # a model that gets no notes is not asked again with one
    results = last_results(parts.history.rows)
    return "failures" if all(is_failed_result(row.content) for row in results) else "results"


def _names_nothing_shown(parts: TurnParts, reply: StreamedReply, answered: str) -> bool:
    """Whether `reply`, a small model's words after a tool round (`answered`, from
    `_answered_round`, not ""), whole (one cut at `max_tokens` may not have got to them), names
    nothing its round's results show that the user or the calls had not said
    (`nbchat.conversation.grounding.names_nothing_shown`)."""
    if not answered or reply.finish == "length":
        return False
    rows = parts.history.rows
    results, call = _last_round(rows)
    # The notes' words too: copying "The tool call did not run, or failed" names no failure.
    said = (
        last_user_text(rows),
        (call.tool_args or "") if call else "",
        AFTER_RESULTS,
        ASKED_AGAIN,
        AFTER_FAILURES,
    )
    return names_nothing_shown(reply.text, (row.content for row in results), said)


def _last_round(rows: Sequence[Row]) -> tuple[list[Row], Row | None]:
    """The last tool round's results and the row of the calls that made them (None when the
    results open the history, their call compacted away)."""
    results = last_results(rows)
    start = len(rows) - len(results)
    return results, rows[start - 1] if start > 0 else None


# The arguments that say what a call was about, in the order one is looked for: not its code or
# a cell's source, which the card above shows.
LABEL_ARGUMENTS = ("path", "name", "cell", "number", "pattern", "command")


def _labelled_results(rows: Sequence[Row], *, failed: bool = False) -> list[tuple[str, str]]:
    """The last round's results that did not fail (with `failed`, those that did), each with
    its call in brief ("read_file `README.md`": the tool and what it was about)."""
    results, call = _last_round(rows)
    arguments = {
        call_id: found or {} for call_id, _name, found in (stored_calls(call) if call else ())
    }
    labelled = []
    for row in results:
        if is_failed_result(row.content) is not failed:
            continue
        said = arguments.get(row.tool_id, {})
        named = next((str(said[key]) for key in LABEL_ARGUMENTS if key in said), "")
        labelled.append(
            (f"{row.tool_name} `{brief(named, 80)}`" if named else row.tool_name, row.content)
        )
    return labelled


def _unread(parts: TurnParts, reply: StreamedReply) -> str:
    """What `reply`, words a small model's first step chose before anything was read this turn
    (`StreamedReply.unlooked`), left unread, in words for the status line; "" when nothing:
    the information it says it was not given (`nbchat.conversation.grounding.
    says_it_was_not_told`); for a message naming or pointing at something here
    (`Unlooked.pointed`), the files here its prose names (`files_spoken_of`), or, when it
    opens with a yes or a no, what the message names (`Unlooked.named`) or that it asked
    whether something is so (`Unlooked.about_state`); for a message about the user's own
    things (`Unlooked.owned`), the figures and names it states that nothing in the session
    said (`facts_stated`). The model then looks first. Answered without looking, such replies
    said a setting was "not specified in the given information", what a script deletes or
    where a setting lives, naming the file, "Yes" to whether a dependency is pinned and to
    whether debug was on, that the app listens on port 5000 and that "we" use SQLite: stating
    what nobody had read."""
    unlooked = reply.unlooked
    if unlooked is None or reply.calls or reply.stopped:
        return ""
    if says_it_was_not_told(reply.text):
        return "the answer said it was not given what a tool can look up"
    if not unlooked.pointed:
        return ""
    files = files_spoken_of(reply.text, lambda name: _is_here(parts, name))
    yes_or_no = says_yes_or_no(reply.text)
    if not files and unlooked.named and yes_or_no:
        files = list(unlooked.named)
    if files:
        return f"the answer spoke of {', '.join(files)} without reading it"
    if unlooked.about_state and yes_or_no:
        return "the answer said yes or no to whether something here is so without looking"
    if unlooked.owned and (stated := facts_stated(reply.text, _earlier_texts(parts.history.rows))):
        return f"the answer stated {', '.join(stated[:3])} of yours without looking"
    return ""


def _earlier_texts(rows: Sequence[Row]) -> Iterator[str]:
    """What a name in an answer may come from: every row's text but the assistant's own
    answers (the user's messages, tool results, summaries), and every call's arguments."""
    for row in rows:
        if row.role not in ("assistant", "assistant_full"):
            yield row.content
        if row.tool_args:
            yield row.tool_args


def _is_here(parts: TurnParts, name: str) -> bool:
    """Whether the file `name` is here: a listed path or a listed file's own name, or an
    entry the file tools reach inside the workspace."""
    workspace = parts.settings.workspace
    relative = name.removeprefix("./")
    paths = parts.overview.paths()
    if relative in paths or any(path.rsplit("/", 1)[-1] == relative for path in paths):
        return True
    return exists_inside(workspace, relative)


def takes_notes(parts: TurnParts) -> bool:
    """Whether the chat's tools travel in its prompt, not its requests (a small model's way,
    `nbchat.tools.offer`): such a model's first step chooses, and it gets the notes."""
    return parts.settings.offers_tools_on_request() and uses_grammars(parts)


def uses_grammars(parts: TurnParts) -> bool:
    """Whether requests may carry llama.cpp's grammars and JSON schemas (the JSON fallback):
    as set, else on any llama.cpp server (the embedded one, or one named by NBCHAT_BASE_URL).
    With `tools_on_request` too, a small model's requests carry no schemas and its first step
    chooses (`nbchat.tools.offer`)."""
    if parts.settings.json_tool_fallback is not None:
        return parts.settings.json_tool_fallback
    connection = parts.budget.connection  # planning a request never connects by itself
    return parts.settings.is_embedded if connection is None else connection.is_llama_cpp


def system_prompt_for(parts: TurnParts, schemas: Sequence[Mapping[str, Any]]) -> str:
    """The settings' prompt, with the workspace's overview when the chat may use tools."""
    return parts.overview.system_prompt(parts.settings.system_prompt, tools_offered=bool(schemas))


def stream_reply(
    parts: TurnParts,
    stop: threading.Event,
    tool_choice: str | None,
    *,
    asked_again: Reask | None = None,
    look: bool = False,
) -> Generator[Event, None, StreamedReply]:
    """Stream one reply; a failure keeps what arrived (as complete rows), then raises.

    With the tools in the prompt and no choice made yet, the model's first step chooses
    (`choose_first_step`; with `look`, only among the tools)."""
    settings = parts.settings
    reply = StreamedReply(request_rows=len(parts.history))
    plan = plan_request(parts, asked_again=asked_again)
    if plan.in_prompt and tool_choice is None:
        step = choose_first_step(parts, plan.schemas, stop, look=look)
        if step is None:  # Stop came first
            reply.finish = "stopped"
            return reply
        if step.call is not None:  # the first step wrote the call: no chat request needed
            reply.calls, reply.finish = (step.call,), "tool_calls"
            return reply
        tool_choice = step.choice
        reply.unlooked = step.unlooked
    # A summary is then asked as this request's continuation, in the server's cache.
    shape = RequestShape(
        plan.system_prompt, tuple(plan.body_tools), settings.model, tuple(plan.messages)
    )
    parts.engine.request_shape = shape
    try:
        streamed = stream_chat(
            parts.budget.connect().client,
            plan.messages,
            model=settings.model,
            tools=plan.schemas,
            tools_in_prompt=plan.in_prompt,
            max_tokens=settings.max_tokens,
            temperature=settings.reply_temperature(),
            stop=stop,
            json_tool_fallback=uses_grammars(parts),
            check_arguments=parts.tools.accepts,
            tool_choice=tool_choice,
            on_request=lambda body: _record_sent(parts, reply, body, plan.system_prompt),
        )
        for event in without_note_echo(streamed, plan.note, plan.quoted):
            reply.take(event)
            if isinstance(event, ReasoningDelta | TextDelta | TextWithdrawn):
                yield event
    except ContextOverflowError:
        raise
    except ServerUnavailableError as exc:
        raise parts.budget.lost(exc) from exc
    except NbchatError as exc:
        if reply.is_empty:
            raise
        reply.calls = ()  # calls never complete in a cut stream; the text is kept
        yield from save_reply(parts, reply)
        yield from post_notice(parts.session, f"The reply was cut off: {exc}")
        raise  # the client's message already says the partial reply was kept
    return reply


def _record_sent(
    parts: TurnParts, reply: StreamedReply, body: dict[str, Any], system_prompt: str
) -> None:
    session_id = parts.session.ensure_writable()  # the user's row was written: it is
    reply.request_id = parts.store.record_sent(session_id, body, system_prompt=system_prompt)


def save_reply(parts: TurnParts, reply: StreamedReply) -> Steps:
    """Record the request's usage, then store the reply's rows (and say why it ended early)."""
    duration = time.monotonic() - reply.started
    usage = reply.usage
    prompt = usage.prompt_tokens if usage else None
    completion = usage.completion_tokens if usage else None
    if prompt is not None:
        parts.history.record_usage(prompt)  # measured on the rows before this reply
    parts.session.record_request(
        prompt_tokens=prompt,
        completion_tokens=completion,
        duration=duration,
        active_rows=reply.request_rows,
        request_id=reply.request_id,
    )
    yield UsageReported(prompt, completion, duration)
    reply.calls = tuple(parts.session.unique(call) for call in reply.calls)
    yield from save_rows(parts.session, *reply.rows())
    if reply.stopped:
        yield from post_notice(parts.session, STOPPED_NOTICE)
    elif reply.is_empty:
        yield from post_notice(parts.session, EMPTY_REPLY_NOTICE)
    elif reply.finish == "length":
        yield from post_notice(
            parts.session,
            f"The reply hit the max_tokens limit ({parts.settings.max_tokens}); ask the model "
            "to continue, or raise NBCHAT_MAX_TOKENS.",
        )

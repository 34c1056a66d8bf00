"""`Conversation`: one session's whole round-trip, synchronous and UI-free.

`send(text, stop)` yields `nbchat.conversation.events` while it: stores the user row; streams the
reply; stores `analysis`, `assistant` or `assistant_full` rows exactly as they will be sent again;
runs the tool round-trips up to `max_tool_turns`; checks the budget before each request, after each
reply and after each tool round (at most one automatic compaction per round, plus one forced
compaction after a context overflow, whose request is then retried once); and honours the stop
signal at every chunk and between tools. Rows are persisted as they complete (`Session`), so a
crash loses nothing already received and nothing is ever half a row.

A `ChatUI` runs this in its worker thread; a script can iterate `send` directly. Must not import
ipywidgets, hold widget state, or contain SQL.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterator
from typing import Any

import openai

from nbchat.compaction.cacheform import RequestShape
from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import CompactionResult
from nbchat.compaction.summariser import Summariser
from nbchat.config import Settings
from nbchat.conversation.archivetool import archived_output_tool, offerable
from nbchat.conversation.budget import Budget
from nbchat.conversation.events import (
    CompactionFinished,
    CompactionStarted,
    Done,
    Event,
    Failed,
    Notice,
    RequestStarted,
    RowSaved,
    ToolFinished,
    ToolStarted,
    UsageReported,
)
from nbchat.conversation.inspect import InspectedRequest, last_request
from nbchat.conversation.prepare import CheckpointPreparer, Situation, situation_of
from nbchat.conversation.session import Session
from nbchat.conversation.steer import Steering, UndoOutcome
from nbchat.conversation.turn import FailureGuard, Round, StreamedReply
from nbchat.conversation.warmup import PromptWarmer
from nbchat.errors import (
    CompactionError,
    ContextOverflowError,
    NbchatError,
    ServerUnavailableError,
    StoreError,
)
from nbchat.history import History, Row, ToolCall, build_messages, context_tokens
from nbchat.llm.client import stream_chat
from nbchat.llm.endpoint import LOCAL, Connection, destination_of
from nbchat.llm.stream import ReasoningDelta, TextDelta
from nbchat.store.store import Store
from nbchat.tools import ApprovalRequest, ToolExecutor, ToolRegistry, default_registry
from nbchat.tools.choice import round_choice
from nbchat.tools.offer import offered_tools
from nbchat.tools.overview import WorkspaceOverview

__all__ = ["Conversation"]

log = logging.getLogger(__name__)

STOPPED_NOTICE = "Stopped by you; the reply so far was kept."
EMPTY_REPLY_NOTICE = "The model sent an empty reply. Try rephrasing, or /retry."
NOTHING_TO_RETRY = "There is no message to retry yet."
NOT_RUN = "Not run: stopped by the user."
RELOADED_NOTICE = (
    "This kernel writes this session now. It first loaded what another kernel wrote "
    "meanwhile ({rows} active rows), so the model sees it; choose the session again in the "
    "list to show it here."
)
Approver = Callable[[ApprovalRequest], bool]
Steps = Generator[Event, None, None]


class Conversation:
    """One session's loop: `send`, `compact_now` (or preview, accept and undo), `retry`,
    `resume`, and what a UI inspects."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        session_id: str | None = None,
        client: openai.OpenAI | None = None,
        tools: ToolRegistry | None = None,
        *,
        approver: Approver | None = None,
        summariser: Summariser | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.approver = approver
        self.session = Session(store, settings)
        self.tools = (tools if tools is not None else default_registry()).copy()
        self.budget = Budget(
            settings,
            self.tools.schemas,
            client,
            summariser=summariser,
            on_model=self._served,
            system_prompt=lambda: self.overview.system_prompt(
                self.settings.system_prompt, tools_offered=len(self.tools) > 0
            ),
        )
        self.tools.register(archived_output_tool(self.session))
        self._lock = threading.Lock()  # one turn at a time
        self._warmer = PromptWarmer()
        shown = settings.shows_workspace_overview()
        self.overview = WorkspaceOverview(settings.workspace, enabled=shown)
        self.preparer = CheckpointPreparer(settings.prepare_mark)
        self.steering = Steering(self.session, self.budget, self._lock)
        if session_id is not None:
            self.session.open(session_id)

    def __repr__(self) -> str:
        return f"Conversation(session={self.session_id!r}, rows={len(self.history)})"

    @property
    def history(self) -> History:
        """The active history: what the model sees next."""
        return self.session.history

    @property
    def session_id(self) -> str | None:
        return self.session.id

    @property
    def read_only(self) -> bool:
        return self.session.read_only

    @property
    def problems(self) -> list[StoreError]:
        """Rows that could not be loaded (corrupt), as errors naming them."""
        return self.session.problems

    def resume(self, session_id: str) -> None:
        """Continue `session_id` exactly where it stopped (read-only if another kernel writes)."""
        self.session.open(session_id)

    def new_session(self, title: str = "") -> str:
        """Start a new, empty session (the old one stays in the store)."""
        return self.session.create(title)

    def close(self) -> None:
        self.session.release()

    def set_model(self, model: str) -> None:
        """Switch the chat model; the server's last usage figure no longer applies."""
        self.settings = self.session.settings = self.settings.replace(model=model)
        self.budget.use_settings(self.settings)
        self.history.forget_usage()

    def _served(self, model: str) -> None:
        """The server answers under any name and serves `model`: use and record that name."""
        self.set_model(model)
        self.session.record_model()

    # Server and budget (see `Budget`)

    def connect(
        self, *, start: bool | None = None, progress: Callable[[str], None] | None = None
    ) -> Connection:
        """Connect now (starting the embedded model when `start`); later calls reuse it.

        On the embedded server this also starts `warm_up` in the background, so the first reply
        does not pay for reading the system prompt and the tool schemas.
        """
        connection = self.budget.connect(start=start, progress=progress)
        if connection.embedded:
            threading.Thread(target=self.warm_up, name="nbchat-warm-up", daemon=True).start()
        return connection

    def warm_up(self, cancel: threading.Event | None = None) -> None:
        """Have the embedded server read this conversation's prompt (system prompt, tools,
        history) into its prompt cache, for each set of tools a request may offer. Each prompt
        is read once per conversation; other servers are left alone (with `cancel`, closing the
        request, any server on this machine: the new prefix after a compaction)."""
        connection = self.budget.connect()
        if not (connection.embedded or cancel and destination_of(connection.base_url) == LOCAL):
            return

        def messages(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
            sent = build_messages(self.history.rows, self._system_prompt(tools))
            return [*sent, {"role": "user", "content": "Hi"}]  # the next turn's opening

        client, url = connection.client if cancel else None, connection.base_url
        schemas = offerable(self.tools.schemas(), self.history.rows)
        self._warmer.warm(url, self.settings, messages, schemas, client=client, cancel=cancel)

    def use_idle_moment(
        self, cancel: threading.Event, notify: Callable[[], None] = lambda: None
    ) -> CompactionResult | None:
        """While the user reads (`CheckpointPreparer.use_idle_moment`); `cancel` ends it at once,
        a running turn makes it a no-op. Returns the compaction applied, if any."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self.preparer.use_idle_moment(
                self.history,
                self.engine,
                self._situation,
                cancel=cancel,
                notify=notify,
                apply=self.session.apply,
                warm=lambda: self.warm_up(cancel),
            )
        finally:
            self._lock.release()

    def _situation(self) -> Situation:
        return situation_of(
            self.session,
            self.settings,
            self.tools.schemas(),
            self.context_tokens(),
            system_prompt=self.budget.sent_prompt(),
        )

    @property
    def engine(self) -> CompactionEngine:
        return self.budget.engine

    @property
    def threshold(self) -> int:
        return self.budget.threshold

    def context_tokens(self) -> int:
        """Tokens the next request takes: reported usage + rows since, else the estimate."""
        return context_tokens(self.history, self.budget.overhead_tokens())

    # Turns

    def send(
        self, text: str, stop: threading.Event | None = None, *, tool_choice: str | None = None
    ) -> Iterator[Event]:
        """Add the user's message and run the turn; ends with exactly one `Done` or `Failed`.

        `tool_choice` (a tool's name, or "required") applies to the first request of the turn.
        """
        yield from self._exclusive(
            lambda s: self._turn(text, s, tool_choice), stop, unsent_text=text
        )

    def retry(self, stop: threading.Event | None = None) -> Iterator[Event]:
        """Ask for the last reply again: what followed the last user message is archived."""
        yield from self._exclusive(self._retry, stop)

    def compact_now(
        self, focus: str | None = None, stop: threading.Event | None = None
    ) -> Iterator[Event]:
        """Compact the history now (the Compact button, `/compact [focus]`)."""

        def run(stop_event: threading.Event) -> Steps:
            yield from self._compact("manual", stop_event, focus=focus, force=True)
            yield Done(stopped=stop_event.is_set())

        yield from self._exclusive(run, stop)

    def preview_compaction(
        self, focus: str | None = None, stop: threading.Event | None = None
    ) -> CompactionResult:
        """The compaction `compact_now` would make, to look at first; nothing is written."""
        return self.steering.preview(focus, stop)

    def accept_compaction(
        self, result: CompactionResult, text: str | None = None
    ) -> CompactionResult:
        """Apply the previewed `result`, with `text` as the summary's own words if given."""
        return self.steering.accept(result, text)

    def undo_compaction(self, *, force: bool = False, record_id: int | None = None) -> UndoOutcome:
        """Undo the latest compaction (if that puts the history over the trigger, only with
        `force`: the outcome says how big it would be). See `nbchat.conversation.steer`."""
        return self.steering.undo(force=force, record_id=record_id)

    def take_back_last_message(self) -> str:
        """Archive the last user message and what followed; return its text to edit."""
        with self._lock:
            index = self.session.last_user_index()
            if index is None:
                return ""
            text = self.history[index].content
            self.session.archive_last(len(self.history) - index, kind="edit")
            return text

    def _exclusive(
        self,
        run: Callable[[threading.Event], Steps],
        stop: threading.Event | None,
        *,
        unsent_text: str = "",
    ) -> Iterator[Event]:
        """One turn at a time; any exception becomes a `Failed` event (errors never vanish)."""
        stop = stop or threading.Event()
        if not self._lock.acquire(blocking=False):
            yield Failed(
                RuntimeError("busy"),
                "A reply is still running; wait or press Stop.",
                unsent_text=unsent_text,
            )
            return
        try:
            yield from run(stop)
        except NbchatError as exc:
            yield Failed(exc, str(exc), unsent_text=self._unsaved(unsent_text))
        except Exception as exc:  # a bug: show it with its traceback
            yield Failed(
                exc,
                f"Unexpected error: {exc!r}",
                traceback.format_exc(),
                unsent_text=self._unsaved(unsent_text),
            )
        finally:
            self._lock.release()

    def _unsaved(self, text: str) -> str:
        rows = self.history.rows[-50:]
        return "" if any(r.role == "user" and r.content == text for r in rows) else text

    def _turn(self, text: str, stop: threading.Event, tool_choice: str | None) -> Steps:
        if not text.strip():
            yield Failed(ValueError("empty message"), "Type a message first.")
            return
        if tool_choice not in (None, "auto", "required", "none") and tool_choice not in self.tools:
            yield Failed(
                ValueError("unknown tool"),
                f"No tool named {tool_choice!r} to require. "
                f"Tools: {', '.join(self.tools.names())}.",
                unsent_text=text,
            )
            return
        yield from self._take_over()
        self.budget.check_fits(text)
        yield from self._save(Row("user", text))
        yield from self._rounds(stop, tool_choice)

    def _take_over(self) -> Steps:
        """A read-only session takes the lease if it is free, reloading the store's rows."""
        if self.session.id is None or not self.session.read_only:
            return
        before = list(self.history.rows)
        self.session.take_over()  # raises, saying why, when it is still held elsewhere
        if self.history.rows != before:
            yield Notice(RELOADED_NOTICE.format(rows=len(self.history)))

    def _retry(self, stop: threading.Event) -> Steps:
        index = self.session.last_user_index()
        if index is None:
            yield Failed(ValueError("nothing to retry"), NOTHING_TO_RETRY)
            return
        if index < len(self.history) - 1:
            self.session.archive_last(len(self.history) - 1 - index, kind="retry")
        yield from self._rounds(stop)

    def _rounds(self, stop: threading.Event, tool_choice: str | None = None) -> Steps:
        guard = FailureGuard()
        self.overview.refresh()  # once a turn: the prompt changes only when the listing did
        for number in range(1, self.settings.max_tool_turns + 1):
            state = Round(number, tool_choice=self._round_choice(number, tool_choice))
            yield from self._compact_if_needed(state, stop)
            reply = yield from self._request(state, stop)
            if reply.stopped or stop.is_set():
                yield Done(stopped=True)
                return
            yield from self._compact_if_needed(state, stop)
            if not reply.calls:
                yield Done()
                return
            if (yield from self._run_tools(reply.calls, stop, guard)):
                return
            yield from self._compact_if_needed(state, stop)
        yield from self._notice(
            f"Stopped after {self.settings.max_tool_turns} tool rounds (max_tool_turns). "
            "Send a message to let the model continue, or raise NBCHAT_MAX_TOOL_TURNS."
        )
        yield Done()

    def _request(
        self, state: Round, stop: threading.Event
    ) -> Generator[Event, None, StreamedReply]:
        """One streamed request; after an overflow, one forced compaction and one retry."""
        while True:
            yield from self._over_budget()
            yield RequestStarted(state.number, 2 if state.overflow_retried else 1)
            try:
                reply = yield from self._stream(stop, state.tool_choice)
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
                yield from self._compact_after_overflow(exc, stop)
        yield from self._save_reply(reply)
        return reply

    def _compact_after_overflow(
        self, overflow: ContextOverflowError, stop: threading.Event
    ) -> Steps:
        """The forced compaction after an overflow. When it fails the turn ends saying what to
        do, in a notice row too, so the user's message is not left without an answer."""
        try:
            yield from self._compact("overflow", stop, force=True)
        except Exception as exc:
            if isinstance(exc, NbchatError) and not isinstance(exc, CompactionError):
                raise  # the store's own errors say what to do already
            if not isinstance(exc, CompactionError):
                log.exception("compaction after an overflow failed")
            text = (
                "The request was too big for the model, and compacting it failed: "
                f"{exc} Start a new session (/new), or compact (/compact) and resend."
            )
            yield from self._notice(text)
            raise ContextOverflowError(
                text, prompt_tokens=overflow.prompt_tokens, context_size=overflow.context_size
            ) from exc

    def _stream(
        self, stop: threading.Event, tool_choice: str | None
    ) -> Generator[Event, None, StreamedReply]:
        """Stream one reply; a failure keeps what arrived (as complete rows), then raises."""
        reply = StreamedReply(request_rows=len(self.history))
        tools = self._offered_tools(tool_choice)
        system_prompt = self._system_prompt(tools)
        messages = build_messages(self.history.rows, system_prompt)
        # A summary is then asked as this request's continuation, in the server's cache.
        shape = RequestShape(system_prompt, tuple(tools), self.settings.model, tuple(messages))
        self.engine.request_shape = shape
        try:
            for event in stream_chat(
                self.budget.connect().client,
                messages,
                model=self.settings.model,
                tools=tools,
                max_tokens=self.settings.max_tokens,
                temperature=self.settings.reply_temperature(),
                stop=stop,
                json_tool_fallback=self.settings.uses_json_tool_fallback(),
                check_arguments=self.tools.accepts,
                tool_choice=tool_choice,
                on_request=lambda body: self._record_sent(reply, body, system_prompt),
            ):
                reply.take(event)
                if isinstance(event, ReasoningDelta | TextDelta):
                    yield event
        except ContextOverflowError:
            raise
        except ServerUnavailableError as exc:
            raise self.budget.lost(exc) from exc
        except NbchatError as exc:
            if reply.is_empty:
                raise
            reply.calls = ()  # calls never complete in a cut stream; the text is kept
            yield from self._save_reply(reply)
            yield from self._notice(f"The reply was cut off: {exc}")
            raise  # the client's message already says the partial reply was kept
        return reply

    def _record_sent(self, reply: StreamedReply, body: dict[str, Any], system_prompt: str) -> None:
        session_id = self.session.ensure_writable()  # the user's row was written: it is
        reply.request_id = self.store.record_sent(session_id, body, system_prompt=system_prompt)

    def last_request(self) -> InspectedRequest | None:
        """The last request sent to the chat model, exactly as sent (`nbchat.conversation.
        inspect`: its parts, their token counts, and which rows were summaries, placeholders
        or attachments); None before the first."""
        return last_request(self.store, self.session_id)

    def _round_choice(self, number: int, requested: str | None) -> str | None:
        """The caller's choice on the first round; on a small model, `tools.choice`'s rule."""
        if not self.settings.offers_tools_on_request():
            return requested if number == 1 else None
        rounds = self.settings.max_tool_turns
        return round_choice(self.history.rows, number=number, rounds=rounds, requested=requested)

    def _offered_tools(self, tool_choice: str | None) -> list[dict[str, Any]]:
        """Every tool, or on a small model none unless the user's message asks for them."""
        return offered_tools(
            offerable(self.tools.schemas(), self.history.rows),
            self.history.rows,
            on_request=self.settings.offers_tools_on_request(),
            tool_choice=tool_choice,
        )

    def _system_prompt(self, tools: list[dict[str, Any]]) -> str:
        """The settings' prompt, naming the workspace's top level when tools are offered."""
        return self.overview.system_prompt(self.settings.system_prompt, tools_offered=bool(tools))

    def _save_reply(self, reply: StreamedReply) -> Steps:
        duration = time.monotonic() - reply.started
        usage = reply.usage
        prompt = usage.prompt_tokens if usage else None
        completion = usage.completion_tokens if usage else None
        if prompt is not None:
            self.history.record_usage(prompt)  # measured on the rows before this reply
        self.session.record_request(
            prompt_tokens=prompt,
            completion_tokens=completion,
            duration=duration,
            active_rows=reply.request_rows,
            request_id=reply.request_id,
        )
        yield UsageReported(prompt, completion, duration)
        reply.calls = tuple(self.session.unique(call) for call in reply.calls)
        yield from self._save(*reply.rows())
        if reply.stopped:
            yield from self._notice(STOPPED_NOTICE)
        elif reply.is_empty:
            yield from self._notice(EMPTY_REPLY_NOTICE)
        elif reply.finish == "length":
            yield from self._notice(
                f"The reply hit the max_tokens limit ({self.settings.max_tokens}); ask the model "
                "to continue, or raise NBCHAT_MAX_TOKENS."
            )

    def _run_tools(
        self, calls: tuple[ToolCall, ...], stop: threading.Event, guard: FailureGuard
    ) -> Generator[Event, None, bool]:
        """Run each call and store its result; returns True when the turn has ended."""
        # Without an approver the executor's own "ask with no approver means deny" applies.
        approver = self._approve if self.approver else None
        executor = ToolExecutor.from_settings(self.settings, self.tools, approver=approver)
        gave_up = False
        for index, call in enumerate(calls):
            if stop.is_set():  # every call still needs a result row
                skipped = [Row("tool", NOT_RUN, c.id, c.name) for c in calls[index:]]
                yield from self._save(*skipped)
                yield Done(stopped=True)
                return True
            yield ToolStarted(call)
            outcome = executor.execute(call, stop=stop)
            yield from self._save(Row("tool", outcome.content, call.id, call.name))
            yield ToolFinished(call, outcome)
            gave_up = guard.record(call, ok=outcome.ok) or gave_up
        if gave_up:
            yield from self._notice(
                "The same tool call failed three times in a row, so the turn was ended. "
                "Tell the model what to do differently."
            )
            yield Done()
        return gave_up

    def _approve(self, request: ApprovalRequest) -> bool:
        # Read at call time, so a UI can attach its approver after the conversation exists.
        return self.approver is not None and self.approver(request)

    def _compact_if_needed(self, state: Round, stop: threading.Event) -> Steps:
        """The budget check. A compaction that fails or cannot shrink the history is reported
        and the turn goes on with the history as it was: a reply is never lost to it."""
        if not state.may_compact() or not self.engine.should_compact(self.history):
            return
        state.compacted = True
        try:
            result = yield from self._compact("budget", stop)
        except CompactionError as exc:
            yield from self._notice(f"Compaction failed; the history was kept as it was. {exc}")
        except Exception as exc:  # a bug: logged with its traceback, the reply still comes
            log.exception("automatic compaction failed")
            yield from self._notice(
                f"Compaction failed unexpectedly ({type(exc).__name__}: {exc}); the history was "
                "kept as it was. Compact with the button or /compact to retry; if it fails "
                "again, start a new session (/new)."
            )
        else:
            if not result.changed and not result.cancelled:
                yield from self._notice(
                    f"Compaction could not shrink the history ({result.reason}); it was kept "
                    "as it was."
                )

    def _over_budget(self) -> Steps:
        """A request over the budget never goes out unannounced."""
        tokens, threshold = self.context_tokens(), self.threshold
        if tokens > threshold:
            yield from self._notice(
                f"This request is about {tokens:,} tokens, over the budget of {threshold:,}: "
                "compaction could not bring the history under it. The server may refuse it or "
                "drop the start of the conversation; start a new session (/new), or raise "
                "context_token_threshold if the model's window is larger."
            )

    def _compact(
        self, reason: str, stop: threading.Event, *, focus: str | None = None, force: bool = False
    ) -> Generator[Event, None, CompactionResult]:
        yield CompactionStarted(reason)
        result = self.preparer.compact(
            self.history, self.engine, self._situation(), force=force, focus=focus, cancel=stop
        )
        if result.changed:
            self.session.apply(result)
        yield CompactionFinished(result)
        return result

    def _save(self, *rows: Row) -> Steps:
        for row in self.session.save(rows):
            yield RowSaved(row)

    def _notice(self, text: str) -> Steps:
        yield from self._save(Row("system", text))
        yield Notice(text)

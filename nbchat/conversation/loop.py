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

This module strings a turn together; its parts live beside it: one streamed reply
(`nbchat.conversation.reply`), and the rest of a turn (`nbchat.conversation.turn`): the tool
round, the compactions a turn makes on its own, and the steps they share.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterator, Sequence

import openai

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import CompactionResult, Summariser
from nbchat.config import Settings
from nbchat.conversation.budget import Budget
from nbchat.conversation.events import Done, Event, Failed, Notice
from nbchat.conversation.prepare import CheckpointPreparer, Situation, situation_of
from nbchat.conversation.reply import (
    archived_output_tool,
    request_reply,
    request_system_prompt,
    request_tools,
)
from nbchat.conversation.requestview import InspectedRequest, last_request
from nbchat.conversation.session import Rewound, Session, rewind
from nbchat.conversation.steer import Steering, UndoOutcome
from nbchat.conversation.turn import (
    FailureGuard,
    Round,
    Steps,
    compact,
    compact_if_needed,
    post_notice,
    run_tools,
    save_rows,
    start_servers,
)
from nbchat.conversation.warmup import PromptWarmer, opening_prompts
from nbchat.errors import NbchatError, StoreError
from nbchat.history import History, Row, context_tokens
from nbchat.llm.endpoint import LOCAL, Connection, destination_of
from nbchat.store.store import Store
from nbchat.tools import ToolRegistry, default_registry
from nbchat.tools.cells import Document
from nbchat.tools.choice import round_choice
from nbchat.tools.executor import Approver
from nbchat.tools.mcp import McpTools
from nbchat.tools.overview import WorkspaceOverview

__all__ = ["Conversation"]

NOTHING_TO_RETRY = "There is no message to retry yet."
RELOADED_NOTICE = (
    "This kernel writes this session now. It first loaded what another kernel wrote "
    "meanwhile ({rows} active rows), so the model sees it; choose the session again in the "
    "list to show it here."
)


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
        self.mcp = McpTools(settings)  # started by the first turn (`start_servers`)
        self.budget = Budget(
            settings,
            lambda: request_tools(self),  # what requests carry (none on a small model)
            client,
            summariser=summariser,
            on_model=self._served,
            system_prompt=lambda: request_system_prompt(self),
        )
        self.tools.register(archived_output_tool(self.session))
        self._lock = threading.Lock()  # one turn at a time
        self.warmer = PromptWarmer()
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
        self.warmer.cancel()  # it warms the session being left
        self.session.open(session_id)

    def new_session(self, title: str = "") -> str:
        """Start a new, empty session (the old one stays in the store)."""
        self.warmer.cancel()
        return self.session.create(title)

    def close(self) -> None:
        self.warmer.cancel()
        self.mcp.close()
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

        On the embedded server this also restores the prompts it saved before a restart, and
        starts `warm_up` in the background, so the first reply does not pay for reading the
        system prompt and the tool schemas; a turn cancels it, so no message waits for it
        (`nbchat.conversation.warmup`).
        """
        connection = self.budget.connect(start=start, progress=progress)
        if connection.embedded:
            self._restore_saved(connection)
            self.warmer.start(self.warm_up)
        return connection

    def _restore_saved(self, connection: Connection) -> None:
        self.warmer.restore(connection, self.settings.home, lambda: opening_prompts(self))

    def warm_up(
        self, cancel: threading.Event | None = None, rows: Sequence[Row] | None = None
    ) -> int | None:
        """Have the embedded server read this conversation's next prompt (system prompt, tools,
        history) into its prompt cache: every request of a turn starts with it (a small
        model's tools are in the system prompt). Each prompt is read once per conversation;
        other servers are left alone (with `cancel`, closing the request, any server on this
        machine: the new prefix after a compaction). `rows`: the history a compaction prepared
        in the background would leave, read before it is applied (`nbchat.conversation.
        prepare`); the first step's prompt holds only the last exchange, the same either way.

        Returns the server's count of the chat's prompt (None when not read or not said). For
        today's history it is also the history's size from then on: after a compaction only
        the estimate knew it, a third over on English prose, enough to put the next turn at
        the trigger and compact it again while the user waits."""
        connection = self.budget.connect()
        if not (connection.embedded or cancel and destination_of(connection.base_url) == LOCAL):
            return None
        before = self.history.rows if rows is None else None
        prompts = opening_prompts(self, rows)
        counted = self.warmer.warm_all(connection, self.settings.model, prompts, cancel=cancel)
        # (A background warm-up holds no lock: a turn may have added rows meanwhile. The
        # closing "Hi" stands for the user's next message, then counted on top: a few tokens
        # over, never under.)
        if (
            counted is not None
            and before is not None
            and self.history.rows[: len(before)] == before
        ):
            self.history.record_usage(counted, rows=len(before))
        return counted

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
                self.situation,
                cancel=cancel,
                notify=notify,
                apply=self.session.apply,
                warm=lambda rows: self.warm_up(cancel, rows),
                counted=lambda rows: self.warmer.counted(
                    self.settings.model, opening_prompts(self, rows)
                ),
            )
        finally:
            self._lock.release()

    def situation(self) -> Situation:
        """Where the session stands, for deciding about a compaction (`nbchat.conversation.
        prepare`)."""
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
            yield from compact(self, "manual", stop_event, focus=focus, force=True)
            yield Done(stopped=stop_event.is_set())

        yield from self._exclusive(run, stop)

    def preview_compaction(
        self, focus: str | None = None, stop: threading.Event | None = None
    ) -> CompactionResult:
        """The compaction `compact_now` would make, to look at first; nothing is written."""
        return self.steering.preview(focus, stop)

    def accept_compaction(
        self, result: CompactionResult, text: str | None = None, *, force: bool = False
    ) -> CompactionResult:
        """Apply the previewed `result`, with `text` as the summary's own words if given (an
        edit that puts the history over the trigger only with `force`)."""
        return self.steering.accept(result, text, force=force)

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

    def rewind(self, row_id: int, document: Document) -> Rewound:
        """Take the chat and the notebook back to before the user's message stored as
        `row_id` (`nbchat.conversation.session`); refused while a reply runs."""
        if not self._lock.acquire(blocking=False):
            raise NbchatError("A reply is still running; press Stop first, then rewind.")
        try:
            return rewind(self.session, document, row_id)
        finally:
            self._lock.release()

    def _exclusive(
        self,
        run: Callable[[threading.Event], Steps],
        stop: threading.Event | None,
        *,
        unsent_text: str = "",
    ) -> Iterator[Event]:
        """One turn at a time; any exception becomes a `Failed` event (errors never vanish)."""
        self.warmer.cancel()  # the user comes first
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
        if self.warmer.pending:  # the message came before the warm-up could save the prompts
            self.warmer.start(self.warm_up)

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
        self._restore_saved(self.budget.connect())  # when the turn connected (a script)
        yield from save_rows(self.session, Row("user", text))
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
            yield from start_servers(self, stop)
            state = Round(number, tool_choice=self._round_choice(number, tool_choice))
            yield from compact_if_needed(self, state, stop)
            reply = yield from request_reply(self, state, stop)
            if reply.stopped or stop.is_set():
                yield Done(stopped=True)
                return
            yield from compact_if_needed(self, state, stop)
            if not reply.calls:
                yield Done()
                return
            if (yield from run_tools(self, reply.calls, stop, guard)):
                return
            yield from compact_if_needed(self, state, stop)
        yield from post_notice(
            self.session,
            f"Stopped after {self.settings.max_tool_turns} tool rounds (max_tool_turns). "
            "Send a message to let the model continue, or raise NBCHAT_MAX_TOOL_TURNS.",
        )
        yield Done()

    def last_request(self) -> InspectedRequest | None:
        """The last request sent to the chat model, exactly as sent (`nbchat.conversation.
        inspect`: its parts, their token counts, and which rows were summaries, placeholders
        or attachments); None before the first."""
        return last_request(self.store, self.session_id)

    def _round_choice(self, number: int, requested: str | None) -> str | None:
        """The rule of `nbchat.tools.choice`: the caller's choice first, words on the last round
        and after repeated calls; None lets the model (or, on a small one, its first step)
        choose."""
        rounds = self.settings.max_tool_turns
        return round_choice(self.history.rows, number=number, rounds=rounds, requested=requested)

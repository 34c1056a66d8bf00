"""`Session`: one conversation's persisted side — which session, its active rows, the writer
lease, and every write, done so that memory and the store never disagree.

Rows go to the store first and into the in-memory `History` only once written, so a failed
write leaves both as they were. Compactions and retries archive rows through the store and then
replace the in-memory rows with the store's own view. Tool call ids are kept unique per session,
because an archived tool output is found again by its call id.

Must not: talk to the model, run tools or know about widgets.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from nbchat.compaction.result import CompactionResult, apply_compaction
from nbchat.config import Settings
from nbchat.errors import SessionLockedError, StoreError
from nbchat.history import History, Row, ToolCall, to_row
from nbchat.store.store import Store

__all__ = ["Session"]

READ_ONLY_MESSAGE = (
    "This session is open for writing in another kernel, so it is read-only here. Close it "
    "there, or start a new session with /new."
)


class Session:
    """The current session of a conversation (none until the first write or `open`)."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.history = History()
        self.id: str | None = None
        self.read_only = False
        self.problems: list[StoreError] = []
        self._tool_ids: set[str] = set()

    def open(self, session_id: str) -> None:
        """Load `session_id`'s active rows; read-only when another process holds the lease."""
        self.store.get_session(session_id)
        problems: list[StoreError] = []
        rows = self.store.load_active(session_id, problems=problems)
        full = self.store.load_full(session_id, problems=[])
        self.release()
        self.id, self.problems = session_id, problems
        self.history.replace(rows)
        self._tool_ids = {stored.row.tool_id for stored in full if stored.row.tool_id}
        self.read_only = not self.store.acquire_lease(session_id)

    def create(self, title: str = "") -> str:
        """A new empty session, which becomes the current one."""
        self.release()
        self.id = self.store.create_session(
            title, model=self.settings.model, settings=self.settings.to_public_dict()
        )
        self.history.replace([])
        self.problems, self._tool_ids, self.read_only = [], set(), False
        self.store.acquire_lease(self.id)
        return self.id

    def release(self) -> None:
        """Give up the writer lease (the session stays in the store)."""
        if self.id is not None and not self.read_only:
            self.store.release_lease(self.id)

    def ensure_writable(self) -> str:
        """The session id, creating a session if there is none; raises when read-only."""
        if self.id is None:
            return self.create()
        if self.read_only and not self.store.acquire_lease(self.id):
            raise SessionLockedError(READ_ONLY_MESSAGE)
        self.read_only = False
        return self.id

    def save(self, rows: Sequence[Row]) -> list[Row]:
        """Write rows (one transaction), then append them to the active history; returns them
        as stored (`to_row`: text made valid Unicode)."""
        checked = [to_row(row) for row in rows]
        if checked:
            self.store.append_rows(self.ensure_writable(), checked)
            self.history.extend(checked)
        return checked

    def apply(self, result: CompactionResult) -> None:
        """Store a compaction (archiving what it replaced), then use its rows."""
        apply_compaction(
            self.store, self.ensure_writable(), result, expected_active=len(self.history)
        )
        self.history.replace(result.rows)

    def archive_last(self, count: int, *, kind: str) -> None:
        """Archive the last `count` active rows (retry, edit); they stay in the transcript."""
        session_id = self.ensure_writable()
        self.store.archive_last(session_id, count, expected_active=len(self.history), kind=kind)
        self.history.replace(self.history.rows[:-count])

    def unique(self, call: ToolCall) -> ToolCall:
        """`call` with an id no other call in this session has (servers reuse `call_0`)."""
        if not call.id or call.id in self._tool_ids:
            call = ToolCall(f"call_{uuid.uuid4().hex[:12]}", call.name, call.arguments)
        self._tool_ids.add(call.id)
        return call

    def record_request(
        self,
        *,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        duration: float,
        active_rows: int,
    ) -> None:
        self.store.record_request(
            self.ensure_writable(),
            model=self.settings.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            duration=duration,
            active_rows=active_rows,
        )

    def last_user_index(self) -> int | None:
        rows = self.history.rows
        return next((i for i in range(len(rows) - 1, -1, -1) if rows[i].role == "user"), None)

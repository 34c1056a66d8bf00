"""A conversation's session, and rewinding it to one of the user's earlier messages, the notebook
with it.

`Session`: one conversation's persisted side — which session, its active rows, the writer
lease, every write, done so that memory and the store never disagree, and the session's title
(from its first message).

Rows go to the store first and into the in-memory `History` only once written, so a failed
write leaves both as they were. Compactions and retries archive rows through the store and then
replace the in-memory rows with the store's own view. Tool call ids are kept unique per session,
because an archived tool output is found again by its call id.

One kernel writes a session (the writer lease, `nbchat.store.lease`); in the others it is read-only.
Each `Session` holds the lease under an owner name of its own, so two chats on one `Store` in
one kernel are kept apart exactly as two kernels are: the second opens the session read-only.
A read-only session that later gets the lease (the other kernel closed it, or lost it) first
reloads its rows from the store, so the model sees what the other kernel wrote. A write that
finds the lease taken over raises `LeaseLostError` and leaves the session read-only here. A
store that cannot be written at all (a read-only file) opens every session read-only.

`apply_compaction` is the store write of a compaction (the steps never write,
`nbchat.compaction.steps`): in one transaction, the pruned originals are archived and their
placeholders put at the same positions (`Store.replace_rows`, kind "prune"), then the
summarised rows are archived behind one `compacted` row (`Store.replace_with_compacted`, kind
"summary" or "chunked"). Nothing is deleted.

Rewinding: `rewind(session, document, row_id)` takes the session back to just before the user's
message stored as `row_id`: the cells the assistant inserted since are removed and the cells it
edited get their earlier source back (newest change first, each only if the cell still holds what
the assistant left there: a cell the user edited by hand is left alone, and the outcome says so);
then, in one transaction, the message and every row after it are archived (kind "rewind": the rows
stay in the transcript and the export) and the changes are stamped with what became of them. The
message's text comes back, for the input.

Only messages in the active history can be rewound to (a summary stands for the ones before
it: undo that compaction first). The notebook is reached only through the `Document` it is
given.

Must not: talk to the model, run tools or know about widgets.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from nbchat.compaction.findings import typed_text
from nbchat.compaction.result import CompactionResult
from nbchat.config import Settings
from nbchat.errors import LeaseLostError, SessionLockedError, StoreError
from nbchat.history import History, Row, ToolCall, last_user_index, stored_calls, to_row
from nbchat.store import lease
from nbchat.store.rowsql import CompactionRecord, NotebookChange, StoredRow
from nbchat.store.store import Store
from nbchat.tools.cells import Document, take_back

__all__ = ["Rewound", "Session", "TITLE_CHARS", "apply_compaction", "rewind", "title_from"]


TITLE_CHARS = 60  # a session picker's line

READ_ONLY_MESSAGE = (
    "This session is open for writing in another kernel, so it is read-only here. Close it "
    "there, or start a new session with /new."
)
SAME_KERNEL_MESSAGE = (
    "This session is open for writing in another chat of this kernel, so it is read-only here. "
    "Close that chat (`ui.close()`), or start a new session with /new."
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
        self.owner = lease.new_owner()  # this chat's own name on the lease, not the store's

    def open(self, session_id: str) -> None:
        """Load `session_id`'s active rows; read-only when another process holds the lease.

        The lease is taken before the rows are read, so no other kernel writes in between.
        """
        self.store.get_session(session_id)
        other = session_id != self.id
        writable = self._take_lease(session_id)
        try:
            rows, tool_ids, problems = self._read(session_id)
        except BaseException:  # the current session stays as it was
            if writable and other:
                self.store.release_lease(session_id, owner=self.owner)
            raise
        if other:
            self.release()
        self.id, self.read_only, self.problems = session_id, not writable, problems
        self.history.replace(rows)
        self._tool_ids = tool_ids

    def _take_lease(self, session_id: str) -> bool:
        return not self.store.read_only and self.store.acquire_lease(session_id, owner=self.owner)

    def _read(self, session_id: str) -> tuple[list[Row], set[str], list[StoreError]]:
        """The active rows, every tool call id ever used, and the corrupt rows' errors."""
        problems: list[StoreError] = []
        rows = self.store.load_active(session_id, problems=problems)
        full = self.store.load_full(session_id, problems=[])
        return rows, {stored.row.tool_id for stored in full if stored.row.tool_id}, problems

    @property
    def read_only_reason(self) -> str:
        """Why this session cannot be written here ("" when it can)."""
        if not self.read_only:
            return ""
        if self.store.read_only:
            return self.store.read_only_message()
        holder = self.store.lease_holder(self.id) if self.id else None
        same_kernel = holder is not None and holder.pid == os.getpid()
        return SAME_KERNEL_MESSAGE if same_kernel else READ_ONLY_MESSAGE

    def create(self, title: str = "") -> str:
        """A new empty session, which becomes the current one."""
        self.release()
        self.id = self.store.create_session(
            title, model=self.settings.model, settings=self.settings.to_public_dict()
        )
        self.history.replace([])
        self.problems, self._tool_ids, self.read_only = [], set(), False
        self.store.acquire_lease(self.id, owner=self.owner)
        return self.id

    def record_model(self) -> None:
        """Record the model in the session's row, when this chat writes it (a server's real
        model name is learned on connecting, which may come after the session was created)."""
        if self.id is not None and not self.read_only:
            with self._writing() as session_id:
                self.store.set_session_model(session_id, self.settings.model)

    def release(self) -> None:
        """Give up the writer lease if this store holds it (the session stays in the store)."""
        if self.id is not None:
            self.store.release_lease(self.id, owner=self.owner)

    def take_over(self) -> None:
        """Make a read-only session writable: take the lease, then reload the rows another
        kernel may have written meanwhile. Raises when the lease is still held elsewhere."""
        assert self.id is not None
        if self.store.read_only:
            raise StoreError(self.store.read_only_message())
        if not self._take_lease(self.id):
            raise SessionLockedError(self.read_only_reason)
        rows, self._tool_ids, self.problems = self._read(self.id)
        self.history.replace(rows)
        self.read_only = False

    def ensure_writable(self) -> str:
        """The session id, creating a session if there is none; raises when read-only."""
        if self.id is None:
            return self.create()
        if self.read_only:
            self.take_over()
        return self.id

    @contextlib.contextmanager
    def _writing(self) -> Iterator[str]:
        """The id to write to; a lease lost on the way leaves the session read-only here."""
        session_id = self.ensure_writable()
        try:
            yield session_id
        except LeaseLostError:
            self.read_only = True
            raise

    def save(self, rows: Sequence[Row]) -> list[Row]:
        """Write rows (one transaction), then append them to the active history; returns them
        as stored (`to_row`: text made valid Unicode). The session's first user message, as
        in any chat app, names it."""
        checked = [to_row(row) for row in rows]
        if checked:
            first = self._first_user_text(checked)
            with self._writing() as session_id:
                self.store.append_rows(session_id, checked)
                if first is not None and (title := title_from(first)):
                    self.store.name_untitled(session_id, title)
            self.history.extend(checked)
        return checked

    def _first_user_text(self, rows: Sequence[Row]) -> str | None:
        """The text of the session's first user message, when it is among `rows`."""
        if any(row.role == "user" for row in self.history.rows):
            return None
        return next((row.content for row in rows if row.role == "user"), None)

    def apply(self, result: CompactionResult) -> None:
        """Store a compaction (archiving what it replaced), then use its rows."""
        with self._writing() as session_id:
            apply_compaction(self.store, session_id, result, expected_active=len(self.history))
        self.history.replace(result.rows)

    def archive_last(self, count: int, *, kind: str) -> None:
        """Archive the last `count` active rows (retry, edit); they stay in the transcript."""
        with self._writing() as session_id:
            expected = len(self.history)
            self.store.archive_last(session_id, count, expected_active=expected, kind=kind)
        self.history.replace(self.history.rows[:-count])

    def rewind(self, count: int, outcomes: Mapping[int, str]) -> None:
        """Archive the last `count` active rows as a rewind, settling the notebook changes
        taken back with them (`outcomes`, by change id), in one transaction."""
        with self._writing() as session_id:
            expected = len(self.history)
            self.store.rewind(session_id, count, expected_active=expected, outcomes=outcomes)
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
        request_id: int | None = None,
    ) -> None:
        with self._writing() as session_id:
            self.store.record_request(
                session_id,
                model=self.settings.model,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                duration=duration,
                active_rows=active_rows,
                request_id=request_id,
            )

    def last_user_index(self) -> int | None:
        return last_user_index(self.history)


def title_from(message: str) -> str:
    """A session's title from its first message: the words typed (no `/attach` blocks), on one
    line, cut at a word to at most `TITLE_CHARS` ("" when nothing was typed)."""
    words = " ".join(typed_text(message).split())
    if len(words) <= TITLE_CHARS:
        return words
    cut = words[: TITLE_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def apply_compaction(
    store: Store, session_id: str, result: CompactionResult, *, expected_active: int
) -> list[int]:
    """Write `result` to the session in one transaction; returns the compaction record ids.

    `expected_active` is the number of active rows the result was computed from; the store
    refuses (and writes nothing) when the session changed meanwhile.
    """
    if not result.changed:
        return []
    edit = result.edit
    ids: list[int] = []
    pruned_to = result.tokens_before - edit.pruned_tokens
    with store.transaction("save the compaction"):
        if edit.replacements:
            record = _record(result, "prune", before=result.tokens_before, after=pruned_to)
            ids.append(
                store.replace_rows(
                    session_id, edit.replacements, expected_active=expected_active, record=record
                )
            )
        if edit.summary_row is not None:
            record = _record(result, result.layer, before=pruned_to, after=result.tokens_after)
            ids.append(
                store.replace_with_compacted(
                    session_id,
                    edit.summary_row,
                    keep_tail=edit.keep_tail,
                    expected_active=expected_active,
                    record=record,
                )
            )
    return ids


def _record(result: CompactionResult, kind: str, *, before: int, after: int) -> CompactionRecord:
    """The store's record of one layer; the summariser's figures belong to the summary only."""
    summary = kind != "prune"
    usage = result.usage
    return CompactionRecord(
        kind=kind,
        summary=result.summary if summary else "",
        tokens_before=before,
        tokens_after=after,
        model=usage.model if summary else "",
        prompt_tokens=usage.prompt_tokens if summary else 0,
        completion_tokens=usage.completion_tokens if summary else 0,
        duration=result.duration,
    )


@dataclass(frozen=True)
class Rewound:
    """What a rewind did: the message's `text`, how many rows it archived, and one line per
    notebook change it took back or left alone."""

    text: str
    rows: int
    changes: tuple[str, ...] = ()

    @property
    def left_alone(self) -> tuple[str, ...]:
        return tuple(line for line in self.changes if "left alone" in line)

    def summary(self) -> str:
        """The notice the chat shows."""
        rows = "row" if self.rows == 1 else "rows"
        lines = [
            f"Rewound to before your message: {self.rows} {rows} archived (they stay in the "
            "transcript and the export); your message is back in the input."
        ]
        lines += [f"- {line}" for line in self.changes]
        return "\n".join(lines)


def rewind(session: Session, document: Document, row_id: int) -> Rewound:
    """Take `session` (and the notebook) back to before the user's message `row_id`."""
    session_id = session.ensure_writable()
    store = session.store
    active = [s for s in store.load_full(session_id, problems=[]) if not s.archived]
    index = next((i for i, s in enumerate(active) if s.id == row_id), None)
    if index is None or active[index].row.role != "user":
        raise StoreError(
            "That message is not in the active history (a compaction summarised it, or it was "
            "archived already); only messages after the latest summary can be rewound to."
        )
    count = len(active) - index
    calls = _calls(active[index:])
    changes = [
        c for c in store.notebook_changes(session_id) if c.call_id in calls and not c.reverted_at
    ]
    outcomes = {c.id: _undo(document, c) for c in reversed(changes)}
    session.rewind(count, outcomes)
    lines = [_line(c, outcomes[c.id]) for c in reversed(changes)]
    return Rewound(active[index].row.content, count, tuple(lines))


def _calls(stored: Sequence[StoredRow]) -> set[str]:
    ids: set[str] = set()
    for item in stored:
        row = item.row
        if row.role == "tool":
            ids.add(row.tool_id)
        elif row.role == "assistant_full":
            ids.update(call_id for call_id, _, _ in stored_calls(row) if call_id)
    return ids


def _undo(document: Document, change: NotebookChange) -> str:
    return take_back(
        document,
        kind=change.kind,
        cell_id=change.cell_id,
        before=change.before,
        after=change.after,
    )


def _line(change: NotebookChange, outcome: str) -> str:
    what = "inserted" if change.kind == "insert" else "edited"
    return f"cell {change.cell_id[:8]} ({what} by the assistant): {outcome}"

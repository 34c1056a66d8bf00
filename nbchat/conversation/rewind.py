"""Rewinding a conversation to one of the user's earlier messages, the notebook with it.

`rewind(session, document, row_id)` takes the session back to just before the user's message
stored as `row_id`: the cells the assistant inserted since are removed and the cells it edited
get their earlier source back (newest change first, each only if the cell still holds what the
assistant left there: a cell the user edited by hand is left alone, and the outcome says so);
then, in one transaction, the message and every row after it are archived (kind "rewind": the
rows stay in the transcript and the export) and the changes are stamped with what became of
them. The message's text comes back, for the input.

Only messages in the active history can be rewound to (a summary stands for the ones before
it: undo that compaction first). Must not: know about widgets; it reaches the notebook only
through the `Document` it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nbchat.conversation.session import Session
from nbchat.errors import StoreError
from nbchat.history import stored_calls
from nbchat.store.notebooklog import NotebookChange
from nbchat.store.records import StoredRow
from nbchat.tools.cells import Document, take_back

__all__ = ["Rewound", "rewind"]


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

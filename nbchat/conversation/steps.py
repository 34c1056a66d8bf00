"""What the parts of a turn share: `TurnParts` (what they use of a `Conversation`), and the two
steps every part takes: saving rows (each reported as `RowSaved`) and posting a notice (a
`system` row in the transcript, and a `Notice` event).

The turn's parts are `nbchat.conversation.reply` (one streamed reply), `toolround` (running the
tools the reply called) and `autocompact` (the compactions a turn makes on its own); the loop
(`nbchat.conversation.loop`) strings them together. Must not import the loop.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Protocol

from nbchat.compaction.engine import CompactionEngine
from nbchat.config import Settings
from nbchat.conversation.budget import Budget
from nbchat.conversation.events import Event, Notice, RowSaved
from nbchat.conversation.prepare import CheckpointPreparer, Situation
from nbchat.conversation.session import Session
from nbchat.history import History, Row
from nbchat.store.store import Store
from nbchat.tools import ToolRegistry
from nbchat.tools.executor import Approver
from nbchat.tools.mcp import McpTools
from nbchat.tools.overview import WorkspaceOverview

__all__ = ["Steps", "TurnParts", "post_notice", "save_rows"]

Steps = Generator[Event, None, None]


class TurnParts(Protocol):
    """What a turn's parts use of the conversation (`Conversation` has all of it)."""

    settings: Settings
    store: Store
    session: Session
    tools: ToolRegistry
    mcp: McpTools
    budget: Budget
    overview: WorkspaceOverview
    preparer: CheckpointPreparer
    approver: Approver | None

    @property
    def history(self) -> History: ...

    @property
    def engine(self) -> CompactionEngine: ...

    @property
    def threshold(self) -> int: ...

    def context_tokens(self) -> int: ...

    def situation(self) -> Situation: ...


def save_rows(session: Session, *rows: Row) -> Steps:
    """Store `rows` (complete rows only), reporting each."""
    for row in session.save(rows):
        yield RowSaved(row)


def post_notice(session: Session, text: str) -> Steps:
    """A notice that belongs in the transcript: stored as a `system` row, then shown."""
    yield from save_rows(session, Row("system", text))
    yield Notice(text)

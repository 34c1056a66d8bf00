"""Rebuilding a chat's message list from the store: one widget factory per transcript entry,
each reply followed by its "request" link, compaction rows as their cards.

Factories, not widgets: the message list builds only the ones it shows (`MessageList`).
No SQL, HTTP or prompt text: the rows come from `transcript_entries` and `reply_links`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from nbchat.history import Row
from nbchat.store.store import Store
from nbchat.ui.cards import row_widget
from nbchat.ui.inspector import reply_links
from nbchat.ui.transcript import transcript_entries

__all__ = ["Card", "User", "transcript_factories"]

# Makes a compaction row's card (Undo, what it replaced) from the row and its record.
Card = Callable[[Row, dict[str, Any] | None], widgets.Widget]
# Makes a user's message in the active history from the row and its stored id.
User = Callable[[Row, int], widgets.Widget]


def transcript_factories(
    store: Store, session_id: str, *, card: Card | None = None, user: User | None = None
) -> list[Callable[[], widgets.Widget]]:
    """Widget factories for the full transcript (`transcript_entries`), each reply followed by
    its request link; `card` makes the compaction cards (Undo, what was replaced), `user` the
    user's messages still in the active history (with their "rewind to here" button)."""
    entries = transcript_entries(store, session_id)
    links = reply_links(store, session_id, [stored for stored, _ in entries])
    factories: list[Callable[[], widgets.Widget]] = []
    for stored, info in entries:
        if user is not None and stored.row.role == "user" and not stored.archived:
            factories.append(_user_factory(user, stored.row, stored.id))
            continue
        factories.append(_row_factory(stored.row, info, card))
        factories.extend([links[stored.id]] if stored.id in links else [])
    return factories


def _row_factory(
    row: Row, info: dict[str, Any] | None, card: Card | None
) -> Callable[[], widgets.Widget]:
    if card is not None and row.role == "compacted":  # the card with Undo and what it replaced
        return lambda: card(row, info)
    return lambda: row_widget(row, compaction=info)


def _user_factory(user: User, row: Row, row_id: int) -> Callable[[], widgets.Widget]:
    return lambda: user(row, row_id)

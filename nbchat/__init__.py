"""nbchat: a chat assistant that lives in a Jupyter notebook.

The table of contents. Names are imported lazily on first use, so `import nbchat` does no work:
no client, database, thread or socket is created and ipywidgets is not loaded until `ChatUI` is
asked for.

    ChatUI            the notebook widget (nbchat.ui)
    Conversation      one session's UI-free loop (nbchat.conversation.loop)
    CompactionEngine  keeps requests inside the token budget (nbchat.compaction.engine)
    CompactionResult  what one compaction did (nbchat.compaction.result)
    Settings          every setting and where it came from (nbchat.config)
    Store             sessions and rows in SQLite (nbchat.store.store)
    Row, History, build_messages   the data model (nbchat.history)
    tool, ToolRegistry             tools the model may call (nbchat.tools)
    Event and its kinds            what `Conversation.send` yields, as it happens: TextDelta,
                                   ReasoningDelta and TextWithdrawn (nbchat.llm.reader: the text
                                   so far was a call asked again), RowSaved, RequestStarted,
                                   UsageReported, ToolStarted, ToolFinished, CompactionStarted,
                                   CompactionFinished, Notice, then one Failed or Done
                                   (nbchat.conversation.events)
    NbchatError and its tree       nbchat.errors draws it; ModelServerError groups the model
                                   server's failures (unavailable, context overflow, any other)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EVENTS = "nbchat.conversation.events"
_ERRORS = "nbchat.errors"

# Each name and the module that defines it.
_EXPORTS = {
    "ChatUI": "nbchat.ui",
    "Conversation": "nbchat.conversation.loop",
    "CompactionEngine": "nbchat.compaction.engine",
    "CompactionResult": "nbchat.compaction.result",
    "Settings": "nbchat.config",
    "Store": "nbchat.store.store",
    "Row": "nbchat.history",
    "History": "nbchat.history",
    "build_messages": "nbchat.history",
    "tool": "nbchat.tools",
    "ToolRegistry": "nbchat.tools",
    "Event": _EVENTS,
    "TextDelta": "nbchat.llm.reader",
    "ReasoningDelta": "nbchat.llm.reader",
    "TextWithdrawn": "nbchat.llm.reader",
    "RowSaved": _EVENTS,
    "RequestStarted": _EVENTS,
    "UsageReported": _EVENTS,
    "ToolStarted": _EVENTS,
    "ToolFinished": _EVENTS,
    "CompactionStarted": _EVENTS,
    "CompactionFinished": _EVENTS,
    "Notice": _EVENTS,
    "Failed": _EVENTS,
    "Done": _EVENTS,
    "NbchatError": _ERRORS,
    "ConfigError": _ERRORS,
    "ModelServerError": _ERRORS,
    "ServerUnavailableError": _ERRORS,
    "ContextOverflowError": _ERRORS,
    "ServerError": _ERRORS,
    "CompactionError": _ERRORS,
    "ToolError": _ERRORS,
    "McpError": _ERRORS,
    "StoreError": _ERRORS,
    "SessionLockedError": _ERRORS,
    "LeaseLostError": _ERRORS,
}

__all__ = [
    "ChatUI",
    "CompactionEngine",
    "CompactionError",
    "CompactionFinished",
    "CompactionResult",
    "CompactionStarted",
    "ConfigError",
    "ContextOverflowError",
    "Conversation",
    "Done",
    "Event",
    "Failed",
    "History",
    "LeaseLostError",
    "McpError",
    "ModelServerError",
    "NbchatError",
    "Notice",
    "ReasoningDelta",
    "RequestStarted",
    "Row",
    "RowSaved",
    "ServerError",
    "ServerUnavailableError",
    "SessionLockedError",
    "Settings",
    "Store",
    "StoreError",
    "TextDelta",
    "TextWithdrawn",
    "ToolError",
    "ToolFinished",
    "ToolRegistry",
    "ToolStarted",
    "UsageReported",
    "build_messages",
    "tool",
]

if TYPE_CHECKING:
    from nbchat.compaction.engine import CompactionEngine
    from nbchat.compaction.result import CompactionResult
    from nbchat.config import Settings
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
    from nbchat.conversation.loop import Conversation
    from nbchat.errors import (
        CompactionError,
        ConfigError,
        ContextOverflowError,
        LeaseLostError,
        McpError,
        ModelServerError,
        NbchatError,
        ServerError,
        ServerUnavailableError,
        SessionLockedError,
        StoreError,
        ToolError,
    )
    from nbchat.history import History, Row, build_messages
    from nbchat.llm.reader import ReasoningDelta, TextDelta, TextWithdrawn
    from nbchat.store.store import Store
    from nbchat.tools import ToolRegistry, tool
    from nbchat.ui import ChatUI


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nbchat' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

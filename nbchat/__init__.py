"""nbchat: a chat assistant that lives in a Jupyter notebook.

The table of contents. Names are imported lazily on first use, so `import nbchat` does no work:
no client, database, thread or socket is created and ipywidgets is not loaded until `ChatUI` is
asked for.

    ChatUI            the notebook widget (nbchat.ui)
    Conversation      one session's UI-free loop (nbchat.conversation.loop)
    CompactionEngine  keeps requests inside the token budget (nbchat.compaction.engine)
    Settings          every setting and where it came from (nbchat.config)
    Store             sessions and rows in SQLite (nbchat.store.store)
    Row, History, build_messages   the data model (nbchat.history)
    tool, ToolRegistry             tools the model may call (nbchat.tools)
    NbchatError and its subclasses (nbchat.errors)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

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
    "NbchatError": "nbchat.errors",
    "ConfigError": "nbchat.errors",
    "ServerUnavailableError": "nbchat.errors",
    "ContextOverflowError": "nbchat.errors",
    "ServerError": "nbchat.errors",
    "CompactionError": "nbchat.errors",
    "ToolError": "nbchat.errors",
    "StoreError": "nbchat.errors",
}

__all__ = [
    "ChatUI",
    "CompactionEngine",
    "CompactionError",
    "CompactionResult",
    "ConfigError",
    "ContextOverflowError",
    "Conversation",
    "History",
    "NbchatError",
    "Row",
    "ServerError",
    "ServerUnavailableError",
    "Settings",
    "Store",
    "StoreError",
    "ToolError",
    "ToolRegistry",
    "build_messages",
    "tool",
]

if TYPE_CHECKING:
    from nbchat.compaction.engine import CompactionEngine
    from nbchat.compaction.result import CompactionResult
    from nbchat.config import Settings
    from nbchat.conversation.loop import Conversation
    from nbchat.errors import (
        CompactionError,
        ConfigError,
        ContextOverflowError,
        NbchatError,
        ServerError,
        ServerUnavailableError,
        StoreError,
        ToolError,
    )
    from nbchat.history import History, Row, build_messages
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

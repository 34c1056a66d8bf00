"""The tool that reads back a tool output that compaction pruned, by the call id named in its
placeholder. It reads the store it is handed; it never writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from nbchat.store.store import Store

__all__ = ["SessionSource", "archived_output_tool"]


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

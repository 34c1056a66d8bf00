"""The tool that reads back a tool output that compaction pruned, by the call id named in its
placeholder, and when to offer it: only while a placeholder among the rows names an archived
output (a summary names no call id, so it gives the tool nothing to read). Offered always, a
0.5B model called it when asked for the current directory (issue 12). It reads the store
it is handed; it never writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from nbchat.compaction.prune import is_placeholder
from nbchat.history import Row
from nbchat.store.store import Store

__all__ = ["ARCHIVE_TOOL", "SessionSource", "archived_output_tool", "offerable"]

ARCHIVE_TOOL = "read_archived_output"


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


def offerable(schemas: Sequence[dict[str, Any]], rows: Sequence[Row]) -> list[dict[str, Any]]:
    """`schemas` without `read_archived_output` unless `rows` hold the placeholder of a pruned
    output, which names the call id the tool reads back."""
    if any(is_placeholder(row) for row in rows):
        return list(schemas)
    return [schema for schema in schemas if schema["function"]["name"] != ARCHIVE_TOOL]

"""The tool round of a turn: each call the reply made run through the `ToolExecutor` (policy,
approval, limits: one result holds at most the budget's `tool_output_limit`) and its result
stored, every call answered even when Stop was pressed; the turn ends when the same call keeps
failing (`FailureGuard`). Before each round, the MCP servers not started yet are started and
their tools registered, and each that failed or stopped is said once (`start_servers`).

Must not import the loop, widgets, or SQL.
"""

from __future__ import annotations

import threading
from collections.abc import Generator

from nbchat.conversation.events import Done, Event, ToolFinished, ToolStarted
from nbchat.conversation.steps import Steps, TurnParts, post_notice, save_rows
from nbchat.conversation.turn import FailureGuard
from nbchat.history import Row, ToolCall
from nbchat.tools import ApprovalRequest, ToolExecutor

__all__ = ["NOT_RUN", "run_tools", "start_servers"]

NOT_RUN = "Not run: stopped by the user."


def start_servers(parts: TurnParts, stop: threading.Event) -> Steps:
    """Start the chat's MCP servers when their tools are first needed (a no-op once they run),
    posting each notice of one that failed or stopped."""
    for text in parts.mcp.start(parts.tools, stop):
        yield from post_notice(parts.session, text)


def run_tools(
    parts: TurnParts, calls: tuple[ToolCall, ...], stop: threading.Event, guard: FailureGuard
) -> Generator[Event, None, bool]:
    """Run each call and store its result; returns True when the turn has ended."""

    def approve(request: ApprovalRequest) -> bool:
        # Read at call time, so a UI can attach its approver after the conversation exists.
        return parts.approver is not None and parts.approver(request)

    # Without an approver the executor's own "ask with no approver means deny" applies.
    approver = approve if parts.approver else None
    limited = parts.settings.replace(tool_output_limit=parts.budget.tool_output_limit())
    executor = ToolExecutor.from_settings(limited, parts.tools, approver=approver)
    gave_up = False
    for index, call in enumerate(calls):
        if stop.is_set():  # every call still needs a result row
            skipped = [Row("tool", NOT_RUN, c.id, c.name) for c in calls[index:]]
            yield from save_rows(parts.session, *skipped)
            yield Done(stopped=True)
            return True
        yield ToolStarted(call)
        outcome = executor.execute(call, stop=stop)
        yield from save_rows(parts.session, Row("tool", outcome.content, call.id, call.name))
        yield ToolFinished(call, outcome)
        gave_up = guard.record(call, ok=outcome.ok) or gave_up
    if gave_up:
        yield from post_notice(
            parts.session,
            "The same tool call failed three times in a row, so the turn was ended. "
            "Tell the model what to do differently.",
        )
        yield Done()
    return gave_up

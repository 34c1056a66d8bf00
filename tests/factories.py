"""Tiny row factories, so tests read like the histories they build."""

from __future__ import annotations

import json

from nbchat.history import Row


def user(text: str) -> Row:
    return Row("user", text)


def assistant(text: str) -> Row:
    return Row("assistant", text)


def analysis(text: str) -> Row:
    return Row("analysis", text)


def tool_call(*calls: tuple[str, str, dict[str, object]], content: str = "") -> Row:
    """An `assistant_full` row; each call is (id, tool name, arguments)."""
    payload = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for call_id, name, arguments in calls
    ]
    return Row("assistant_full", content, "", "", json.dumps(payload))


def tool_result(call_id: str, text: str, name: str = "read_file") -> Row:
    return Row("tool", text, call_id, name, "")

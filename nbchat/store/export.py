"""A session's full transcript as Markdown or JSON, and the requests it sent
(`nbchat export ID --requests`).

Pure: takes the session's metadata and its rows as dicts, returns text. Archived rows are kept
and marked, so an export always holds every original row even after compaction. Each request
is given as `InspectedRequest.to_dict()` (`nbchat.conversation.requestview`): its parts with their
token counts and marks, and the body exactly as sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["requests_to_markdown", "to_json", "to_markdown"]

HEADINGS = {
    "user": "User",
    "assistant": "Assistant",
    "assistant_full": "Assistant (tool calls)",
    "analysis": "Reasoning",
    "tool": "Tool result",
    "system": "Notice",
    "compacted": "Compacted summary",
}


def to_json(
    session: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    *,
    compactions: Sequence[Mapping[str, Any]],
    requests: Sequence[Mapping[str, Any]],
    notebook_changes: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The whole session as JSON: metadata, full transcript, compactions, requests, and the
    assistant's changes to notebook cells (with what each rewind did to them)."""
    document = {
        "session": dict(session),
        "rows": list(rows),
        "compactions": list(compactions),
        "requests": list(requests),
        "notebook_changes": list(notebook_changes),
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def to_markdown(session: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown for one session: a title, then each row under a heading saying whose it is."""
    lines = [
        f"# {session.get('title') or 'Chat'}",
        "",
        f"Session `{session.get('id', '')}` · model `{session.get('model') or '-'}` · "
        f"created {session.get('created', '')}",
        "",
    ]
    for row in rows:
        lines.extend(_row_lines(row))
    return "\n".join(lines).rstrip() + "\n"


def _row_lines(row: Mapping[str, Any]) -> list[str]:
    role = str(row.get("role", ""))
    heading = HEADINGS.get(role, role)
    if role == "tool":
        heading = f"{heading}: {row.get('tool_name') or '?'} (`{row.get('tool_id', '')}`)"
    if row.get("archived"):
        heading += f" · archived by compaction {row.get('compaction_id')}"
    lines = [f"## {heading}", ""]
    content = str(row.get("content") or "")
    if role in ("tool", "analysis"):
        lines.extend(_fenced(content))
    elif content:
        lines.append(content)
    if role == "assistant_full":
        lines.extend(["", *_tool_call_lines(str(row.get("tool_args") or ""))])
    lines.append("")
    return lines


def _tool_call_lines(tool_args: str) -> list[str]:
    try:
        calls = json.loads(tool_args)
        pretty = json.dumps(calls, indent=2, ensure_ascii=False)
    except ValueError:
        pretty = tool_args
    return _fenced(pretty, info="json")


def _fenced(text: str, info: str = "") -> list[str]:
    # A fence longer than any backtick run inside, so tool output cannot close it early.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", text, fence]


def requests_to_markdown(requests: Sequence[Mapping[str, Any]]) -> str:
    """A `# Requests` section: per request, its parts (tokens, marks) and its body as JSON."""
    lines = ["# Requests", ""]
    for request in requests:
        server = request.get("prompt_tokens")
        counted = f", {server:,} counted by the server" if isinstance(server, int) else ""
        lines += [
            f"## Request {request.get('id')} · {request.get('created', '')}",
            "",
            f"~{request.get('estimated_tokens', 0):,} tokens estimated{counted}.",
            "",
        ]
        for part in request.get("parts", []):
            marks = "".join(f" **{mark}**" for mark in part.get("marks", []))
            lines.append(f"- {part.get('label')} · ~{part.get('tokens', 0):,} tokens{marks}")
        body = json.dumps(request.get("body", {}), indent=2, ensure_ascii=False)
        lines += ["", *_fenced(body, info="json"), ""]
    return "\n".join(lines).rstrip() + "\n"

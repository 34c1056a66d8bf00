"""What the summariser is asked and how its answer is read: prompts, sections, transcript, chunks.

The rows to summarise are serialised as one readable transcript (reasoning left out, tool calls
as `name(args)`, long tool outputs trimmed head and tail) inside ONE user message, so that even a
small model summarises the text instead of continuing the chat. The checkpoint has fixed
sections (Goal; Constraints & preferences; Progress: Done / In progress / Blocked; Key
decisions; Next steps; Critical context). With `summary_format="json"` the sections are asked
for as a JSON object under a JSON schema (`response_format`), which a 0.5B model follows far
better than a markdown template; the reply is rendered back to markdown. When a previous summary
exists the *update* prompt is used: previous summary plus only the new rows.

Input larger than the summariser's window is cut into chunks of whole transcript blocks; the
engine summarises them one after the other, each chunk updating the summary so far.

Pure: no I/O. `nbchat.compaction.writer` drives a summariser over the chunks;
`nbchat.compaction.modelsummariser` is the one module that calls a model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nbchat.history import Message, Row

__all__ = [
    "RESPONSE_FORMAT",
    "SECTION_TITLES",
    "Checkpoint",
    "SummaryFormat",
    "build_request",
    "chunk_blocks",
    "parse_reply",
    "request_overhead",
    "text_tokens",
    "to_blocks",
    "trim_middle",
]

SUMMARY_SYSTEM_PROMPT = (
    "You are a context summarisation assistant. You read a transcript of a conversation between "
    "a user and an AI assistant, including the assistant's tool calls and their results, and "
    "write a structured checkpoint that another assistant will use to continue the work.\n"
    "Do NOT continue the conversation. Do NOT answer questions in it. Do NOT call tools. "
    "ONLY output the checkpoint."
)
SUMMARY_PROMPT = (
    "The text inside <conversation> is the conversation so far. Write a checkpoint of it: what "
    "the user wants, what was done, what was decided, and what comes next. Keep each section "
    "short. Preserve exact file paths, function names, commands and error messages."
)
UPDATE_PROMPT = (
    "The text inside <conversation> holds NEW messages that came after the checkpoint inside "
    "<previous-summary>. Update that checkpoint with them:\n"
    "- keep everything in it that still matters;\n"
    "- add the new progress, decisions and context;\n"
    "- move finished items from In progress to Done, and update Next steps;\n"
    "- preserve exact file paths, function names, commands and error messages."
)
MARKDOWN_FORMAT = (
    "Use exactly this format:\n\n"
    "## Goal\n[what the user is trying to accomplish]\n\n"
    "## Constraints & preferences\n- [requirements the user stated, or (none)]\n\n"
    "## Progress\n### Done\n- [x] [completed work]\n### In progress\n- [ ] [current work]\n"
    "### Blocked\n- [what stops progress, or (none)]\n\n"
    "## Key decisions\n- **[decision]**: [why]\n\n"
    "## Next steps\n1. [what should happen next]\n\n"
    "## Critical context\n- [data, names or references needed to continue, or (none)]"
)
JSON_FORMAT = (
    "Reply with ONE JSON object and nothing else, with these keys: "
    '"goal" (a string: what the user wants), and "constraints", "done", "in_progress", '
    '"blocked", "decisions", "next_steps", "critical_context" (each a list of short strings; '
    '[] when empty). "done" lists what was achieved: files read or changed, commands run and '
    "what they showed. At most 6 items per list, each under 25 words: the reply has a token limit."
)
FOCUS_PROMPT = "Pay particular attention to: {focus}"

SECTION_TITLES = (
    "Goal",
    "Constraints & preferences",
    "Progress",
    "Key decisions",
    "Next steps",
    "Critical context",
)
# JSON key → (heading, list style); Done/In progress/Blocked sit under "## Progress".
JSON_SECTIONS = (
    ("goal", "## Goal", ""),
    ("constraints", "## Constraints & preferences", "- "),
    ("done", "## Progress\n### Done", "- [x] "),
    ("in_progress", "### In progress", "- [ ] "),
    ("blocked", "### Blocked", "- "),
    ("decisions", "## Key decisions", "- "),
    ("next_steps", "## Next steps", "1. "),
    ("critical_context", "## Critical context", "- "),
)
JSON_KEY_SECTION = {
    "goal": "Goal",
    "constraints": "Constraints & preferences",
    "done": "Progress",
    "decisions": "Key decisions",
    "next_steps": "Next steps",
    "critical_context": "Critical context",
}
RESPONSE_FORMAT: Mapping[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "checkpoint",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "goal": {"type": "string"},
                **{
                    key: {"type": "array", "items": {"type": "string"}}
                    for key, _, _ in JSON_SECTIONS[1:]
                },
            },
            "required": [key for key, _, _ in JSON_SECTIONS],
            "additionalProperties": False,
        },
    },
}
TOOL_OUTPUT_CHARS = 2000
TOOL_CALL_CHARS = 1500
HEADING = re.compile(r"^#{1,6}\s*(.+?)\s*:?\s*$", re.MULTILINE)
FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

SummaryFormat = Literal["json", "markdown"]


@dataclass(frozen=True)
class Checkpoint:
    """A reply read back: markdown text (empty when the model said nothing) and what it lacks."""

    text: str
    missing: tuple[str, ...]
    was_json: bool


def text_tokens(text: str) -> int:
    """The baseline estimate for a piece of text: len // 3, at least 1."""
    return max(1, len(text) // 3)


def trim_middle(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping its head and its tail."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted:,} characters omitted ...]\n{text[len(text) - tail :]}"


def to_blocks(rows: Iterable[Row]) -> list[str]:
    """One transcript block per row that matters to a summary (reasoning and summaries left out)."""
    blocks: list[str] = []
    for row in rows:
        if row.role == "user":
            blocks.append(f"[User]: {row.content}")
        elif row.role == "assistant":
            blocks.append(f"[Assistant]: {row.content}")
        elif row.role == "assistant_full":
            text = f"[Assistant]: {row.content}\n" if row.content.strip() else ""
            blocks.append(f"{text}[Assistant tool calls]: {_calls_text(row.tool_args)}")
        elif row.role == "tool":
            output = trim_middle(row.content, TOOL_OUTPUT_CHARS)
            blocks.append(f"[Tool result of {row.tool_name or 'a tool'}]: {output}")
        elif row.role == "system":
            blocks.append(f"[Notice]: {row.content}")
    return blocks


def _calls_text(tool_args: str) -> str:
    try:
        calls = json.loads(tool_args)
    except ValueError:
        return trim_middle(tool_args, TOOL_CALL_CHARS)
    texts = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        name = function.get("name", "?") if isinstance(function, dict) else "?"
        raw = function.get("arguments", "") if isinstance(function, dict) else ""
        texts.append(trim_middle(f"{name}({_arguments_text(raw)})", TOOL_CALL_CHARS))
    return "; ".join(texts)


def _arguments_text(raw: Any) -> str:
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return str(raw)
    if not isinstance(arguments, dict):
        return str(raw)
    return ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
    )


def chunk_blocks(blocks: Sequence[str], *, budget: int) -> list[str]:
    """Chunks of whole blocks, each within `budget` tokens (a bigger block is trimmed to fit)."""
    chunks: list[list[str]] = [[]]
    used = 0
    for block in blocks:
        if text_tokens(block) > budget:
            block = trim_middle(block, budget * 3 - 60)  # room for the omission marker
        cost = text_tokens(block) + 1  # the blank line between blocks
        if chunks[-1] and used + cost > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(block)
        used += cost
    return ["\n\n".join(chunk) for chunk in chunks if chunk]


def build_request(
    transcript: str,
    *,
    previous: str = "",
    fmt: SummaryFormat = "json",
    instruction: str | None = None,
    focus: str | None = None,
) -> list[Message]:
    """The summary request: the system prompt, then ONE user message holding everything."""
    parts = [f"<conversation>\n{transcript}\n</conversation>"]
    if previous:
        parts.append(f"<previous-summary>\n{previous}\n</previous-summary>")
        parts.append(UPDATE_PROMPT)
    else:
        parts.append(instruction or SUMMARY_PROMPT)
    parts.append(JSON_FORMAT if fmt == "json" else MARKDOWN_FORMAT)
    if focus:
        parts.append(FOCUS_PROMPT.format(focus=focus))
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def request_overhead(*, previous_tokens: int, instruction: str | None, focus: str | None) -> int:
    """Tokens a request spends besides its transcript: prompts, format, tags, previous summary."""
    prompt = max(text_tokens(instruction or SUMMARY_PROMPT), text_tokens(UPDATE_PROMPT))
    fmt = max(text_tokens(JSON_FORMAT), text_tokens(MARKDOWN_FORMAT))
    extra = text_tokens(FOCUS_PROMPT.format(focus=focus)) if focus else 0
    tags = 20  # the <conversation> and <previous-summary> tags and the blank lines between
    return text_tokens(SUMMARY_SYSTEM_PROMPT) + prompt + fmt + extra + tags + previous_tokens


def parse_reply(text: str) -> Checkpoint:
    """The model's answer as markdown: a JSON object is rendered, anything else kept as is."""
    stripped = text.strip()
    fenced = FENCE.match(stripped)
    candidate = fenced.group(1) if fenced else stripped
    if candidate.startswith("{"):
        data = _load_json_object(candidate)
        if data is not None:
            return _from_json(data)
    return Checkpoint(stripped, _missing_headings(stripped), was_json=False)


def _load_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in `text`; a reply cut at its token limit is closed after its last
    complete item, so what the model did write is kept."""
    try:
        data = json.loads(text)
    except ValueError:
        data = _salvage_json(text)
    return data if isinstance(data, dict) else None


def _salvage_json(text: str) -> Any:
    """Close a truncated JSON object at the last comma where everything before it is complete."""
    cuts: list[tuple[int, str]] = []  # (position of a comma, the closers needed there)
    stack: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}" and stack:
            stack.pop()
        elif char == ",":
            cuts.append((index, "".join(reversed(stack))))
    for index, closers in reversed(cuts):
        try:
            return json.loads(text[:index] + closers)
        except ValueError:
            continue
    return None


def _from_json(data: Mapping[str, Any]) -> Checkpoint:
    sections: list[str] = []
    has_content = False
    for key, heading, bullet in JSON_SECTIONS:
        value = data.get(key)
        items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        lines = [f"{bullet}{str(item).strip()}" for item in items if str(item).strip()]
        has_content = has_content or bool(lines)
        sections.append(heading + "\n" + ("\n".join(lines) if lines else "(none)"))
    missing = tuple(dict.fromkeys(JSON_KEY_SECTION[k] for k in JSON_KEY_SECTION if k not in data))
    return Checkpoint("\n\n".join(sections) if has_content else "", missing, was_json=True)


def _missing_headings(text: str) -> tuple[str, ...]:
    found = {_normalise(match) for match in HEADING.findall(text)}
    return tuple(title for title in SECTION_TITLES if _normalise(title) not in found)


def _normalise(title: str) -> str:
    # "Constraints and Preferences:" and "constraints & preferences" are the same heading.
    return " ".join(word for word in re.findall(r"[a-z]+", title.lower()) if word != "and")

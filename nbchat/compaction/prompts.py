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

from nbchat.compaction.echoes import find_echoes
from nbchat.history import CHARS_PER_TOKEN, Message, Row, estimate_tokens

__all__ = [
    "RESPONSE_FORMAT",
    "SMALL_CHECKPOINT_TOKENS",
    "SMALL_RESPONSE_FORMAT",
    "BRIEF_REPLY_TOKENS",
    "BRIEF_RESPONSE_FORMAT",
    "checkpoint_format",
    "SECTION_TITLES",
    "Checkpoint",
    "SummaryFormat",
    "build_request",
    "chunk_blocks",
    "json_format",
    "parse_reply",
    "request_overhead",
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
    '"goal" (a string: what the user wants) in one sentence, and "constraints", "done", '
    '"in_progress", "blocked", "decisions", "next_steps", "critical_context" (each a list of '
    'short strings; [] when empty). "done" lists what was achieved: files read or changed, '
    "commands run and what they showed. Be brief: at most {items} items per list, each under "
    "{words} words. File paths, errors and the user's own words are recorded separately: do "
    "not copy them at length."
)
# The brief form (`nbchat.compaction.prune`): a small, slow summariser reads each message as one
# short line and is told concretely what each list holds, in the conversation's own names.
BRIEF_PROMPT = (
    "The text inside <conversation> is a conversation between a user and an assistant, one "
    "short line per message (long ones cut). Write the checkpoint the assistant will continue "
    'from. "goal": what the user asked for, in one sentence. "done": what the assistant found '
    'out or changed, each naming the file, function or command. "blocked": what failed and '
    'why. "decisions": what the assistant chose to do and why. "next_steps": what the '
    "assistant said it would do next. Use the names the conversation uses; never restate "
    "these instructions."
)
BRIEF_FORMAT = (
    'Reply with ONE JSON object and nothing else: "goal" (a string), then lists of short '
    'strings "constraints", "done", "in_progress", "blocked", "decisions", "next_steps", '
    '"critical_context" ([] when empty).'
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
# Each model-written section's budget (items, characters an item): the schema enforces it on
# servers that honour it (llama.cpp turns it into a grammar), `parse_reply` cuts what exceeds
# it elsewhere. Worst case about 850 tokens, so a checkpoint never reaches the 1,024-token cap.
GOAL_CHARS = 240
ITEM_CHARS = 140
SECTION_ITEMS = {
    "constraints": 3,
    "done": 4,
    "in_progress": 2,
    "blocked": 2,
    "decisions": 3,
    "next_steps": 3,
    "critical_context": 3,
}
PROMPT_ITEMS = 4
PROMPT_WORDS = 15
# The small checkpoint, for a trigger of a few thousand tokens (`CompactionEngine.checkpoint_tokens`
# under SMALL_CHECKPOINT_TOKENS): on the embedded model every written token costs ~50 ms while
# the user waits, so the model writes the goal, two items of progress and of next steps and one
# in progress, each short; the paths, errors, user's words and notebook facts are kept by code
# beside it. Less than the full checkpoint: decisions, constraints the user stated before their
# latest message, and a blocker's reasoning survive only in the facts, not in words.
SMALL_GOAL_CHARS = 120
SMALL_ITEM_CHARS = 70
SMALL_SECTION_ITEMS = SECTION_ITEMS | {
    "constraints": 0,  # the user's latest words are carried whole by code
    "done": 2,
    "in_progress": 1,
    "blocked": 0,  # error headlines are recorded facts
    "decisions": 0,
    "next_steps": 2,
    "critical_context": 0,  # paths and notebook facts are recorded facts
}
SMALL_CHECKPOINT_TOKENS = 200
# The brief checkpoint: what the brief form asks for (at most ~350 tokens written).
BRIEF_GOAL_CHARS = 200
BRIEF_ITEM_CHARS = 120
BRIEF_SECTION_ITEMS = SECTION_ITEMS | {
    "constraints": 1,
    "in_progress": 1,
    "decisions": 2,
    "next_steps": 2,
    "critical_context": 0,  # paths and errors are recorded facts
}
BRIEF_REPLY_TOKENS = 400


def checkpoint_format(
    items: Mapping[str, int], *, goal_chars: int, item_chars: int
) -> Mapping[str, Any]:
    """The checkpoint's JSON-schema response format under these section budgets."""
    properties: dict[str, Any] = {"goal": {"type": "string", "maxLength": goal_chars}}
    for key, _, _ in JSON_SECTIONS[1:]:
        properties[key] = {
            "type": "array",
            "items": {"type": "string", "maxLength": item_chars},
            "maxItems": items[key],
        }
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "checkpoint",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": properties,
                "required": [key for key, _, _ in JSON_SECTIONS],
                "additionalProperties": False,
            },
        },
    }


RESPONSE_FORMAT = checkpoint_format(SECTION_ITEMS, goal_chars=GOAL_CHARS, item_chars=ITEM_CHARS)
SMALL_RESPONSE_FORMAT = checkpoint_format(
    SMALL_SECTION_ITEMS, goal_chars=SMALL_GOAL_CHARS, item_chars=SMALL_ITEM_CHARS
)
BRIEF_RESPONSE_FORMAT = checkpoint_format(
    BRIEF_SECTION_ITEMS, goal_chars=BRIEF_GOAL_CHARS, item_chars=BRIEF_ITEM_CHARS
)
TOOL_OUTPUT_CHARS = 2000
TOOL_CALL_CHARS = 1500
HEADING = re.compile(r"^#{1,6}\s*(.+?)\s*:?\s*$", re.MULTILINE)
FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

SummaryFormat = Literal["json", "markdown"]


@dataclass(frozen=True)
class Checkpoint:
    """A reply read back: markdown text (empty when the model said nothing, or when what it said
    was not kept) and what it lacks."""

    text: str
    missing: tuple[str, ...]
    over_budget: tuple[str, ...] = ()  # sections cut to their budget (a server ignored it)
    echoes: int = 0  # items dropped: they copied the instruction or repeated (`echoes`)
    rejected: bool = False  # mostly echoes: not kept at all


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
        if estimate_tokens(block) > budget:
            block = trim_middle(
                block, budget * CHARS_PER_TOKEN - 60
            )  # room for the omission marker
        cost = estimate_tokens(block) + 1  # the blank line between blocks
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
    brief: bool = False,
) -> list[Message]:
    """The summary request: the system prompt, then ONE user message holding everything (the
    brief form's instruction and format when `brief` and the format is JSON)."""
    brief = brief and fmt == "json"
    parts = [f"<conversation>\n{transcript}\n</conversation>"]
    if previous:
        parts.append(f"<previous-summary>\n{previous}\n</previous-summary>")
        parts.append(UPDATE_PROMPT)
    else:
        parts.append(instruction or (BRIEF_PROMPT if brief else SUMMARY_PROMPT))
    if brief:
        parts.append(BRIEF_FORMAT)
    else:
        parts.append(json_format() if fmt == "json" else MARKDOWN_FORMAT)
    if focus:
        parts.append(FOCUS_PROMPT.format(focus=focus))
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def request_overhead(*, previous_tokens: int, instruction: str | None, focus: str | None) -> int:
    """Tokens a request spends besides its transcript: prompts, format, tags, previous summary."""
    prompt = max(estimate_tokens(instruction or SUMMARY_PROMPT), estimate_tokens(UPDATE_PROMPT))
    fmt = max(estimate_tokens(json_format()), estimate_tokens(MARKDOWN_FORMAT))
    extra = estimate_tokens(FOCUS_PROMPT.format(focus=focus)) if focus else 0
    tags = 20  # the <conversation> and <previous-summary> tags and the blank lines between
    return estimate_tokens(SUMMARY_SYSTEM_PROMPT) + prompt + fmt + extra + tags + previous_tokens


def parse_reply(text: str, *, instruction: str = "") -> Checkpoint:
    """The model's answer as markdown: a JSON object is rendered, anything else kept as is;
    either way without the items or lines that copy `instruction` (what the summariser was
    told) or repeat one before (`nbchat.compaction.echoes`)."""
    stripped = text.strip()
    fenced = FENCE.match(stripped)
    candidate = fenced.group(1) if fenced else stripped
    if candidate.startswith("{"):
        data = _load_json_object(candidate)
        if data is not None:
            return _from_json(data, instruction)
    return _from_text(stripped, instruction)


def _from_text(text: str, instruction: str) -> Checkpoint:
    """A plain or markdown reply without its echoed and repeated lines (headings and "(none)"
    kept: they are the template's)."""
    lines = text.splitlines()
    items = [(index, _item_text(line)) for index, line in enumerate(lines)]
    content = [(index, said) for index, said in items if said and said.lower() != "(none)"]
    echoes = find_echoes({"lines": [said for _, said in content]}, instruction)
    if echoes.rejected:
        return Checkpoint("", _missing_headings(text), echoes=len(echoes.dropped), rejected=True)
    gone = {content[i][0] for _, i in echoes.dropped}
    kept = "\n".join(line for index, line in enumerate(lines) if index not in gone).strip()
    return Checkpoint(kept, _missing_headings(kept), echoes=len(echoes.dropped))


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


def json_format() -> str:
    """The JSON reply's instructions, with the sections' budgets."""
    return JSON_FORMAT.format(items=PROMPT_ITEMS, words=PROMPT_WORDS)


def _item_text(line: str) -> str:
    """A line's words without its list marker (`- `, `* `, `1. `, `- [x] `); "" for a heading."""
    text = line.strip()
    if text.startswith("#"):
        return ""
    for marker in ("- [x] ", "- [ ] ", "- ", "* "):
        if text.startswith(marker):
            return text[len(marker) :].strip()
    number, dot, rest = text.partition(". ")
    return rest.strip() if dot and number.isdigit() else text


def _from_json(data: Mapping[str, Any], instruction: str) -> Checkpoint:
    budgeted = {key: _within_budget(key, data.get(key)) for key, _, _ in JSON_SECTIONS}
    over = tuple(key for key, (_, cut) in budgeted.items() if cut)
    missing = tuple(dict.fromkeys(JSON_KEY_SECTION[k] for k in JSON_KEY_SECTION if k not in data))
    echoes = find_echoes({key: items for key, (items, _) in budgeted.items()}, instruction)
    if echoes.rejected:
        return Checkpoint("", missing, over, echoes=len(echoes.dropped), rejected=True)
    sections: list[str] = []
    has_content = False
    for key, heading, bullet in JSON_SECTIONS:
        items = [
            item
            for index, item in enumerate(budgeted[key][0])
            if (key, index) not in echoes.dropped
        ]
        lines = [_bulleted(bullet, number, item) for number, item in enumerate(items, start=1)]
        has_content = has_content or bool(lines)
        sections.append(heading + "\n" + ("\n".join(lines) if lines else "(none)"))
    text = "\n\n".join(sections) if has_content else ""
    return Checkpoint(text, missing, over, echoes=len(echoes.dropped))


def _within_budget(key: str, value: Any) -> tuple[list[str], bool]:
    """A section's non-empty items cut to its budget, and whether anything was cut."""
    raw = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    items = [str(item).strip() for item in raw if str(item).strip()]
    limit = GOAL_CHARS if key == "goal" else ITEM_CHARS
    kept = [_cut(item, limit) for item in items[: SECTION_ITEMS.get(key, 1)]]
    return kept, len(kept) < len(items) or any(a != b for a, b in zip(kept, items, strict=False))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _bulleted(bullet: str, number: int, item: str) -> str:
    """One list line; a numbered list counts up instead of repeating "1."."""
    return f"{number}. {item}" if bullet == "1. " else f"{bullet}{item}"


def _missing_headings(text: str) -> tuple[str, ...]:
    found = {_normalise(match) for match in HEADING.findall(text)}
    return tuple(title for title in SECTION_TITLES if _normalise(title) not in found)


def _normalise(title: str) -> str:
    # "Constraints and Preferences:" and "constraints & preferences" are the same heading.
    return " ".join(word for word in re.findall(r"[a-z]+", title.lower()) if word != "and")

"""What the fake OpenAI-compatible server says: scripted replies and their wire bytes.

Owns the values that cross the fake server's wire (`Reply`, one scripted answer, and
`RecordedRequest`, both JSON-serialisable so they can cross a process boundary), the token
arithmetic the fake server reports, and the exact bodies it sends: SSE chunk events,
non-streaming completions and the error bodies of each fault. Pure: no sockets, threads or
clocks beyond stamping `created`; `fakeserver.py` owns the transport.

Token counts are deliberately `characters // 4`, not nbchat's `len // 3` estimate, so tests can
tell a server-reported figure from the client's own estimate.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

Fault = Literal[
    "http500",
    "http429",
    "cut",
    "stall",
    "overflow_llama",
    "overflow_openai",
    "drop",
    "bad_bytes",  # a delta with a byte that is not UTF-8 after `cut_after` events
    "keepalive",  # after `stall_after` events, only SSE comments, every `delay` (or 0.05 s)
    "flood",  # ignores max_tokens: `chunk_size`-character deltas until the client hangs up
    "endless_line",  # after `cut_after` events, one line that never ends (until the backstop)
    "hold_headers",  # no response headers for `hold` seconds (llama.cpp reading a prompt)
]
FAULTS: frozenset[str] = frozenset(get_args(Fault))
FINISH_REASONS = frozenset({"stop", "tool_calls", "length"})
ToolCall = tuple[str, str, str]  # (call id, function name, arguments as a JSON string)
CHAT_PATH = "/v1/chat/completions"
MODEL_NAME = "fake-model"  # answered by /v1/models, and used when a request names no model
CONTROL_PREFIX = "/_control/"

LLAMA_OVERFLOW_MESSAGE = (
    "request ({n_prompt} tokens) exceeds the available context size ({n_ctx} tokens), "
    "try increasing it"
)
OPENAI_OVERFLOW_MESSAGE = (
    "This model's maximum context length is {n_ctx} tokens. However, your messages resulted in "
    "{n_prompt} tokens. Please reduce the length of the messages."
)
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Reply:
    """One scripted answer; every field has a default so `Reply(text="hi")` is a full reply.

    `usage` is `(prompt_tokens, completion_tokens)`; None means computed from the request and
    the output. `finish_reason` None means "tool_calls" when there are tool calls, else "stop".
    `delay` is the pause between stream chunks. `cut_after` / `stall_after` count SSE events,
    the first (role-only) chunk included; `cut_after` also places the `bad_bytes` delta and
    `stall_after` the start of the `keepalive` comments. `n_ctx` and `n_prompt_tokens` (None:
    computed from the request) fill the overflow bodies; `retry_after` is the 429's Retry-After
    in seconds. `hold` is how long `hold_headers` sends nothing before answering as usual; a
    client that hangs up meanwhile is recorded (`FakeServer.hung_up`).
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ToolCall] = ()  # stored as a tuple of tuples
    interleave: bool = False
    chunk_size: int = 4
    delay: float = 0.0
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    fault: Fault | None = None
    retry_after: int = 1
    cut_after: int = 3
    stall_after: int = 1
    n_ctx: int = 4096
    n_prompt_tokens: int | None = None
    hold: float = 30.0
    # For a first-step request (`is_first_step`): the probability of each name's first token,
    # as llama.cpp reports them; the likeliest name is the one written.
    first_step: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        # Lists arrive from JSON and from callers; tuples keep the value frozen and hashable.
        object.__setattr__(self, "tool_calls", tuple(tuple(call) for call in self.tool_calls))
        if self.usage is not None:
            object.__setattr__(self, "usage", tuple(self.usage))
        step = self.first_step.items() if isinstance(self.first_step, dict) else self.first_step
        object.__setattr__(self, "first_step", tuple((str(n), float(p)) for n, p in step))
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; expected one of {sorted(FAULTS)}")
        if self.finish_reason is not None and self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {sorted(FINISH_REASONS)}")
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be at least 1 character")

    @property
    def effective_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def to_dict(self) -> dict[str, Any]:
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        data["tool_calls"] = [list(call) for call in self.tool_calls]
        data["usage"] = None if self.usage is None else list(self.usage)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reply:
        return cls(**data)


DEFAULT_REPLY = Reply(text="ok")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: headers with lower-cased names, the parsed JSON body or None."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordedRequest:
        return cls(**data)


def count_prompt_tokens(body: dict[str, Any]) -> int:
    """Characters of every message content and tool-call arguments in a request, // 4."""
    chars = 0
    for message in body.get("messages", []):
        chars += _content_chars(message.get("content"))
        for call in message.get("tool_calls") or []:
            chars += len(call.get("function", {}).get("arguments") or "")
    return chars // CHARS_PER_TOKEN


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):  # multimodal parts: only text parts carry characters
        return sum(len(part.get("text", "")) for part in content if isinstance(part, dict))
    return 0


def count_completion_tokens(reply: Reply) -> int:
    """Output characters (reasoning, text, tool-call arguments) // 4."""
    chars = len(reply.text) + len(reply.reasoning)
    chars += sum(len(arguments) for _, _, arguments in reply.tool_calls)
    return chars // CHARS_PER_TOKEN


def usage_dict(reply: Reply, body: dict[str, Any]) -> dict[str, int]:
    if reply.usage is not None:
        prompt, completion = reply.usage
    else:
        prompt, completion = count_prompt_tokens(body), count_completion_tokens(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def llama_overflow_body(n_prompt_tokens: int, n_ctx: int) -> dict[str, Any]:
    """llama.cpp server's exact 400 body for a prompt larger than its context."""
    message = LLAMA_OVERFLOW_MESSAGE.format(n_prompt=n_prompt_tokens, n_ctx=n_ctx)
    error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
    return {"error": {**error, "n_prompt_tokens": n_prompt_tokens, "n_ctx": n_ctx}}


def openai_overflow_body(n_prompt_tokens: int, n_ctx: int) -> dict[str, Any]:
    """OpenAI's exact 400 body for a prompt larger than the model's context."""
    message = OPENAI_OVERFLOW_MESSAGE.format(n_prompt=n_prompt_tokens, n_ctx=n_ctx)
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def error_response(reply: Reply, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Status and JSON body for the faults that answer with an HTTP error."""
    if reply.fault == "http500":
        error = {"message": "Injected internal server error", "type": "server_error", "code": 500}
        return 500, {"error": error}
    if reply.fault == "http429":
        error = {"message": "Injected rate limit", "type": "rate_limit_error", "code": 429}
        return 429, {"error": error}
    n_prompt = reply.n_prompt_tokens
    if n_prompt is None:
        n_prompt = count_prompt_tokens(body)
    if reply.fault == "overflow_llama":
        return 400, llama_overflow_body(n_prompt, reply.n_ctx)
    if reply.fault == "overflow_openai":
        return 400, openai_overflow_body(n_prompt, reply.n_ctx)
    raise ValueError(f"fault {reply.fault!r} is not answered with an HTTP error")


FIRST_STEP_OPENING = '{"tool": "'
ANSWER_STEP = Reply(first_step=(("none", 1.0),))


def is_first_step(body: Any) -> bool:
    """A small model's first-step request (`nbchat.llm.firststep`): a grammar, and a reply
    opened as `{"tool": "` for the model to continue."""
    if not isinstance(body, dict) or "grammar" not in body or body.get("stream"):
        return False
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    return last.get("role") == "assistant" and last.get("content") == FIRST_STEP_OPENING


def is_arguments_step(body: Any) -> bool:
    """The arguments of a tool the first step chose: a JSON schema `{"tool": <const>, ...}`."""
    if not isinstance(body, dict) or body.get("stream"):
        return False
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    return "const" in ((schema.get("properties") or {}).get("tool") or {})


def first_step_body(reply: Reply, body: dict[str, Any], completion_id: str) -> dict[str, Any]:
    """llama.cpp's answer to a first step: the opening continued with the likeliest name its
    grammar allows and its closing quote, and the first token's alternatives (here: whole
    names, those the grammar allows)."""
    allowed = str(body.get("grammar", ""))
    step = [item for item in reply.first_step if json.dumps(item[0]) in allowed]
    step = step or list(ANSWER_STEP.first_step)
    chosen = max(step, key=lambda item: item[1])[0]
    alternatives = [
        {"token": name, "logprob": math.log(p) if p > 0 else -1e9, "bytes": list(name.encode())}
        for name, p in step
    ]
    content = {"token": chosen, "logprob": alternatives[0]["logprob"], "top_logprobs": alternatives}
    message = {"role": "assistant", "content": FIRST_STEP_OPENING + chosen + '"'}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    choice["logprobs"] = {"content": [content]}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or MODEL_NAME,
        "choices": [choice],
        "usage": {"prompt_tokens": count_prompt_tokens(body), "completion_tokens": 2},
    }


def completion_body(reply: Reply, body: dict[str, Any], completion_id: str) -> dict[str, Any]:
    """A non-streaming `chat.completion` object; it always carries usage, as OpenAI's does."""
    if is_first_step(body):
        return first_step_body(reply, body, completion_id)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in reply.tool_calls
        ]
    choice = {"index": 0, "message": message, "finish_reason": reply.effective_finish_reason}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or MODEL_NAME,
        "choices": [choice],
        "usage": usage_dict(reply, body),
    }


def stream_events(reply: Reply, body: dict[str, Any], completion_id: str) -> Iterator[bytes]:
    """Every SSE event of a streamed reply, `data: [DONE]` last, each ready to write.

    The chunk envelope is serialised once and only each delta per event, so a 20,000-token
    reply costs one small `json.dumps` per chunk.
    """
    envelope = _envelope(body, completion_id)
    prefix = _chunk_prefix(body, completion_id)
    for delta in _deltas(reply):
        yield prefix + _dumps(delta) + b',"finish_reason":null}]}\n\n'
    yield prefix + b'{},"finish_reason":' + _dumps(reply.effective_finish_reason) + b"}]}\n\n"
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = _dumps(usage_dict(reply, body))
        yield ("data: " + envelope).encode() + b',"choices":[],"usage":' + usage + b"}\n\n"
    yield b"data: [DONE]\n\n"


BAD_BYTE_DELTA = b'{"content":"bad \xff byte"}'  # 0xff is never valid UTF-8
KEEPALIVE_COMMENT = b": keep-alive\n\n"


def bad_bytes_event(body: dict[str, Any], completion_id: str) -> bytes:
    """One chunk event whose delta holds a byte that is not UTF-8 (the rest is valid)."""
    return _chunk_prefix(body, completion_id) + BAD_BYTE_DELTA + b',"finish_reason":null}]}\n\n'


def flood_events(reply: Reply, body: dict[str, Any], completion_id: str) -> Iterator[bytes]:
    """Endless `chunk_size`-character content deltas: a server ignoring max_tokens."""
    prefix = _chunk_prefix(body, completion_id)
    yield prefix + b'{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
    event = prefix + _dumps({"content": "y" * reply.chunk_size}) + b',"finish_reason":null}]}\n\n'
    while True:
        yield event


# A client without a bound of its own reads this much of the endless line, then fails on it:
# enough to tell such a client from one that refuses the line, small enough to stay quick.
ENDLESS_LINE_BACKSTOP = 32 * 1024 * 1024
ENDLESS_PIECE = b"x" * 65_536


def endless_line_events(
    events: Iterator[bytes], reply: Reply, body: dict[str, Any], completion_id: str
) -> Iterator[bytes]:
    """The first `cut_after` of `events`, then one chunk event whose line never ends: pieces of
    `x` (up to `ENDLESS_LINE_BACKSTOP`), then the stream's end as if nothing were wrong."""
    yield from itertools.islice(events, reply.cut_after)
    yield _chunk_prefix(body, completion_id) + b'{"content":"'
    for _ in range(ENDLESS_LINE_BACKSTOP // len(ENDLESS_PIECE)):
        yield ENDLESS_PIECE
    yield b'"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def _envelope(body: dict[str, Any], completion_id: str) -> str:
    """The chunk object without its closing brace (the choices or usage follow)."""
    header = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time())}
    header["model"] = body.get("model") or MODEL_NAME
    return json.dumps(header, separators=(",", ":"))[:-1]


def _chunk_prefix(body: dict[str, Any], completion_id: str) -> bytes:
    """An SSE chunk event up to its delta."""
    return ("data: " + _envelope(body, completion_id) + ',"choices":[{"index":0,"delta":').encode()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _deltas(reply: Reply) -> Iterator[dict[str, Any]]:
    yield {"role": "assistant", "content": ""}
    for piece in _pieces(reply.reasoning, reply.chunk_size):
        yield {"reasoning_content": piece}
    for piece in _pieces(reply.text, reply.chunk_size):
        yield {"content": piece}
    per_call = [
        _tool_call_fragments(index, call, reply.chunk_size)
        for index, call in enumerate(reply.tool_calls)
    ]
    if reply.interleave:
        ordered = [f for group in itertools.zip_longest(*per_call) for f in group if f is not None]
    else:
        ordered = [fragment for fragments in per_call for fragment in fragments]
    for fragment in ordered:
        yield {"tool_calls": [fragment]}


def _tool_call_fragments(index: int, call: ToolCall, chunk_size: int) -> list[dict[str, Any]]:
    """The first fragment names the call; the arguments follow in `chunk_size` pieces."""
    call_id, name, arguments = call
    head = {"index": index, "id": call_id, "type": "function"}
    fragments: list[dict[str, Any]] = [{**head, "function": {"name": name, "arguments": ""}}]
    for piece in _pieces(arguments, chunk_size):
        fragments.append({"index": index, "function": {"arguments": piece}})
    return fragments


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]

"""Model-server errors, translated: every openai/httpx failure becomes an `NbchatError`
whose message says what happened and what to do.

Unreachable server → `ServerUnavailableError`; a prompt too big for the window (llama.cpp's
`exceed_context_size_error`, OpenAI's `context_length_exceeded`, and the usual wordings) →
`ContextOverflowError` with the sizes when the server gave them; anything else → `ServerError`
with the server's own message. Any credential the failed request carried is blanked out of the
text, so a server that echoes the key back never puts it in front of the user.

Pure translation: no I/O, no state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import openai

from nbchat.config import public_url
from nbchat.errors import ContextOverflowError, NbchatError, ServerError, ServerUnavailableError

__all__ = ["midstream_error", "partial_note", "translate_error"]

# What to do depends on where the URL came from (the embedded server, base_url, a client passed
# in), which only the caller knows: `nbchat.conversation.budget.Budget.lost` says it.
UNAVAILABLE = "No model server answers at {url}."
OVERFLOW_PATTERNS = (
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "exceeds the available context size",
    "exceed_context_size",
    "prompt is too long",
    "too many tokens",
)
CONTEXT_SIZE_PATTERNS = (
    r"maximum context length is (\d+)",
    r"available context size \((\d+)",
    r"context (?:size|length|window) (?:is |of )?\(?(\d+)",
    r"\d+ tokens? > (\d+)",
)
PROMPT_TOKEN_PATTERNS = (
    r"(\d+) in the messages",
    r"resulted in (\d+) tokens",
    r"request \((\d+) tokens\)",
    r"(\d+) tokens? > \d+",
    r"requested (\d+) tokens",
)
# Exception class names (httpx / httpcore) that mean nothing answered at the address.
UNREACHABLE_CAUSES = frozenset({"ConnectError", "ConnectTimeout"})


def translate_error(exc: BaseException, *, base_url: str) -> NbchatError:
    """The `NbchatError` for an openai/httpx error, with a message that says what to do."""
    if isinstance(exc, NbchatError):
        return exc
    return _finished(_classify(exc, public_url(base_url)), exc)


def _classify(exc: BaseException, url: str) -> NbchatError:
    if isinstance(exc, openai.APIConnectionError):
        return _connection_error(exc, url)
    if isinstance(exc, openai.APIError):
        return _answered_error(exc, url)
    return ServerError(
        f"The request to the model server at {url} failed: {type(exc).__name__}: {exc}. "
        "Retry; if it keeps failing, check the server and its log."
    )


def _finished(error: NbchatError, exc: BaseException, note: str = "") -> NbchatError:
    """`error` with `note` appended and any credential the request carried blanked out."""
    text = f"{error} {note}".strip()
    for secret in _secrets_of(exc):
        text = text.replace(secret, "***")
    error.args = (text,)
    return error


def _connection_error(exc: openai.APIConnectionError, url: str) -> NbchatError:
    causes = {type(cause).__name__ for cause in _causes(exc)}
    if causes & UNREACHABLE_CAUSES:
        return ServerUnavailableError(UNAVAILABLE.format(url=url))
    if isinstance(exc, openai.APITimeoutError):
        return ServerError(
            f"The model server at {url} stopped answering (the read timed out). Retry; if it "
            "keeps happening, check the server or raise NBCHAT_REQUEST_TIMEOUT."
        )
    return ServerError(
        f"The connection to the model server at {url} broke before it answered "
        f"({_cause_text(exc)}). Retry; if it keeps happening, check the server's log."
    )


def _answered_error(exc: openai.APIError, url: str) -> NbchatError:
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    body = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message)
    overflow = _overflow_error(body, message)
    if overflow is not None:
        return overflow
    said = f"{status}: {message}" if status is not None else message
    if status in (401, 403):
        hint = "Set NBCHAT_API_KEY to a key this server accepts."
        return ServerError(
            f"The model server at {url} refused the API key ({said}). {hint}", status=status
        )
    if status == 429:
        return ServerError(
            f"The model server at {url} is rate limiting requests ({said}). "
            "Wait a moment, then retry.",
            status=status,
        )
    return ServerError(
        f"The model server at {url} answered with an error ({said}). "
        "Check the model name and the server's log, then retry.",
        status=status,
    )


def _overflow_error(body: dict[str, Any], message: str) -> ContextOverflowError | None:
    kind, code = str(body.get("type") or ""), str(body.get("code") or "")
    lowered = message.lower()
    is_overflow = kind == "exceed_context_size_error" or code == "context_length_exceeded"
    if not is_overflow and not any(pattern in lowered for pattern in OVERFLOW_PATTERNS):
        return None
    prompt = _int_field(body, "n_prompt_tokens") or _first_number(PROMPT_TOKEN_PATTERNS, lowered)
    window = _int_field(body, "n_ctx") or _first_number(CONTEXT_SIZE_PATTERNS, lowered)
    sizes = f" ({prompt:,} tokens; the window holds {window:,})" if prompt and window else ""
    return ContextOverflowError(
        f"The conversation is too long for the model's context window{sizes}. Compact the "
        f"history or start a new session. The server said: {message}",
        prompt_tokens=prompt,
        context_size=window,
    )


def midstream_error(exc: Exception, url: str, received: bool) -> NbchatError:
    """The error for a stream that broke while its body was read (`received`: text arrived)."""
    if isinstance(exc, openai.APITimeoutError):
        error = ServerError(
            f"The model server at {url} stopped answering in the middle of the reply (the read "
            "timed out)."
        )
    elif isinstance(exc, openai.APIConnectionError):
        error = ServerError(
            f"The model server at {url} broke off the stream before the reply was complete "
            f"({_cause_text(exc)})."
        )
    elif isinstance(exc, json.JSONDecodeError):
        error = ServerError(f"The model server at {url} sent a stream that is not valid JSON.")
    elif isinstance(exc, UnicodeDecodeError):
        error = ServerError(
            f"The model server at {url} sent bytes that are not UTF-8 in the middle of the "
            f"reply (byte {exc.object[exc.start : exc.start + 1].hex()})."
        )
    else:
        return _finished(_classify(exc, url), exc, partial_note(received))
    return _finished(error, exc, partial_note(received))


def partial_note(received: bool) -> str:
    if received:
        return "The partial reply was kept; retry for a complete one."
    return "Nothing had arrived yet; retry, and check the server's log if it happens again."


def _secrets_of(exc: BaseException) -> list[str]:
    """The credentials the failed request carried (so a server echoing them is not repeated)."""
    request = getattr(exc, "request", None)
    headers = getattr(request, "headers", None)
    if headers is None:
        return []
    found = []
    for name in ("authorization", "api-key", "x-api-key"):
        value = str(headers.get(name) or "")
        value = value.removeprefix("Bearer ").strip()
        if len(value) >= 4:  # a one-letter placeholder would turn every such letter to ***
            found.append(value)
    return found


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _cause_text(exc: BaseException) -> str:
    root = list(_causes(exc))[-1]
    return f"{type(root).__name__}: {root}" if str(root) else type(root).__name__


def _int_field(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first_number(patterns: Sequence[str], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text)
        if match:
            return int(match.group(1))
    return None

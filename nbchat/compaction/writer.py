"""`SummaryWriter` and `write_digest`: a summary asked of the summariser, chunk by chunk.

The writer talks to a `Summariser` (`nbchat.compaction.result`): one handed in, or its own
`nbchat.compaction.modelsummariser.OpenAISummariser`, built at first use. `write_digest` cuts the
transcript into chunks that fit the summariser's window next to the prompts and the reply, then
asks for each chunk in turn, every request after the first *updating* the summary so far (the first
updates the previous compaction's summary, when there is one). A cancel is honoured between chunks
and passed on as the request's `stop`, so the HTTP stream is closed; an empty reply is a failure.
`SummaryWriter.write_cached` asks in the cache form instead (`nbchat.compaction.cacheform`): as
many of the rows as fit the window, in one request only the writer's own summariser can send (it
sends the chat's tool schemas too).

Pure apart from the summariser it is handed or builds: no I/O of its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from nbchat.compaction.cacheform import RequestShape, build_cache_request, cache_prefix_end
from nbchat.compaction.prompts import (
    BRIEF_REPLY_TOKENS,
    BRIEF_RESPONSE_FORMAT,
    RESPONSE_FORMAT,
    SMALL_RESPONSE_FORMAT,
    SummaryFormat,
    build_request,
    chunk_blocks,
    parse_reply,
    request_overhead,
)
from nbchat.compaction.result import Summariser, SummaryReply, SummaryUsage
from nbchat.config import DEFAULT_N_CTX
from nbchat.errors import CompactionError, ContextOverflowError, NbchatError
from nbchat.history import Message, Row, estimate_tokens

if TYPE_CHECKING:
    import openai

    from nbchat.compaction.modelsummariser import OpenAISummariser
    from nbchat.config import Settings

__all__ = ["Digest", "SummaryWriter", "joined", "write_digest"]

log = logging.getLogger(__name__)

DEFAULT_SUMMARISER_CONTEXT = DEFAULT_N_CTX  # the embedded server's window, when none is known
MIN_CHUNK_TOKENS = 256
# A model that ignored the schema's budgets: noted in the result, logged below WARNING (a
# notebook shows WARNING records as stderr output).
OVER_BUDGET = "the summary's section(s)"
NOTHING_SAID = "(The earlier rows held only the assistant's reasoning.)"
ECHOED = "copied the summariser's instruction or repeated a line and were left out"
NOT_KEPT = (
    "the summary mostly copied its instruction or repeated itself and was not kept; what code "
    "picked (the facts and key lines) stands alone"
)
CONVERSATION_END = "</conversation>"
PREVIOUS_START, PREVIOUS_END = "<previous-summary>", "</previous-summary>"


@dataclass(frozen=True)
class Digest:
    """What the summariser said for one compaction: the text, its usage, in how many chunks,
    whether it was cancelled, and what was wrong with it."""

    text: str = ""
    usage: SummaryUsage = SummaryUsage()
    chunks: int = 0
    cancelled: bool = False
    warnings: tuple[str, ...] = ()


class SummaryWriter:
    """The engine's summariser: the one handed in, else its own `OpenAISummariser` built at
    first use; the window given, else asked once of its own summariser's server, else
    `DEFAULT_N_CTX`, and corrected when the server reports an overflow."""

    def __init__(
        self,
        summariser: Summariser | None,
        *,
        client: openai.OpenAI | None = None,
        model: str | None = None,
        settings: Settings | None = None,
        window: int | None = None,
    ) -> None:
        self._given = summariser
        self._own: OpenAISummariser | None = None
        self._client, self._model, self._settings = client, model, settings
        self._window = window

    @property
    def summariser(self) -> Summariser:
        return self._given if self._given is not None else self.own

    @property
    def own(self) -> OpenAISummariser:
        """The writer's own summariser (the chat's server unless `summary_model` says else)."""
        if self._own is None:
            # Imported here: only this path needs the HTTP client (and openai).
            from nbchat.compaction.modelsummariser import OpenAISummariser

            self._own = OpenAISummariser(self._client, model=self._model, settings=self._settings)
        return self._own

    @property
    def sends_prefix(self) -> bool:
        """Can this writer ask in the cache form? Only its own summariser sends tool schemas."""
        return self._given is None

    @property
    def model_name(self) -> str:
        return str(self._model or getattr(self._given or self._own, "model", "") or "")

    @property
    def window(self) -> int:
        """The summariser's context size: given, else asked once of its own summariser's
        server, else `DEFAULT_N_CTX`."""
        if self._window is None:
            asked = self.own.context_size() if self._given is None else None
            self._window = asked or DEFAULT_SUMMARISER_CONTEXT
        return self._window

    def write(
        self,
        blocks: Sequence[str],
        *,
        previous: str,
        max_tokens: int,
        fmt: SummaryFormat,
        instruction: str | None = None,
        focus: str | None = None,
        cancel: threading.Event | None = None,
        brief: bool = False,
    ) -> Digest:
        """`write_digest` with this summariser and window; every failure a `CompactionError`,
        whatever the summariser raised (a plugged-in one may raise anything)."""
        try:
            digest = write_digest(
                self.summariser,
                blocks,
                previous=previous,
                window=self.window,
                max_tokens=max_tokens,
                fmt=fmt,
                instruction=instruction,
                focus=focus,
                cancel=cancel,
                brief=brief,
            )
        except NbchatError as exc:
            raise self._learn_from(exc) from exc
        except Exception as exc:  # not ours: keep its traceback in the log, tell the user
            log.exception("the summariser raised %s", type(exc).__name__)
            raise CompactionError(
                f"The summariser failed with {type(exc).__name__}: {exc}. The history was left "
                "as it was; compact again, or set another summary_model if it keeps failing."
            ) from exc
        _log_warnings(digest)
        return self._stamped(digest, "transcript")

    def write_cached(
        self,
        rows: Sequence[Row],
        shape: RequestShape,
        *,
        threshold: int,
        reply_cap: int,
        small: bool,
        instruction: str | None = None,
        focus: str | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple[int, Digest]:
        """The longest prefix of `rows` that fits the window asked in the cache form
        (`nbchat.compaction.cacheform`: the chat's messages plus the instruction, with the
        chat's tools and the checkpoint's schema, the small one when `small`): how many rows
        went (0: none, see `cache_prefix_end`) and what was said. The writer's own summariser
        sends it (see `sends_prefix`)."""
        # The chat's requests, up to the threshold, went to this server: its window is at
        # least that big, whatever a server without /props lets the writer guess.
        window = max(self.window, threshold)
        reply = min(reply_cap, window // 4)
        end = cache_prefix_end(
            rows, shape, model=self.model_name, window=window, reply_tokens=reply
        )
        if not end:
            return 0, Digest()
        messages = build_cache_request(
            rows[:end], shape, instruction=instruction, focus=focus, small=small
        )
        try:
            answer = self.own.summarise_prefix(
                messages,
                tools=shape.tools,
                max_tokens=min(reply, self.window // 4),
                response_format=SMALL_RESPONSE_FORMAT if small else RESPONSE_FORMAT,
                stop=cancel,
            )
            digest = _read_reply(
                Digest(chunks=1),
                answer,
                cancelled=cancel is not None and cancel.is_set(),
                told=messages[-1:],
            )
        except NbchatError as exc:
            raise self._learn_from(exc) from exc
        _log_warnings(digest)
        return end, self._stamped(digest, "cache")

    def _stamped(self, digest: Digest, form: str) -> Digest:
        """`digest` with the model and the form it was asked in, when it asked anything."""
        if not digest.usage.requests:
            return digest
        return replace(digest, usage=replace(digest.usage, model=self.model_name, form=form))

    def _learn_from(self, exc: NbchatError) -> CompactionError:
        """The error to raise; an overflow also says the window, so the next attempt fits it."""
        cause = exc.__cause__ if isinstance(exc, CompactionError) else exc
        if isinstance(cause, ContextOverflowError) and cause.context_size:
            self._window = cause.context_size
        if isinstance(exc, CompactionError):
            return exc
        return CompactionError(
            f"The summariser failed: {exc} The history was left as it was; compact again."
        )


def write_digest(
    summariser: Summariser,
    blocks: Sequence[str],
    *,
    previous: str,
    window: int,
    max_tokens: int,
    fmt: SummaryFormat,
    instruction: str | None = None,
    focus: str | None = None,
    cancel: threading.Event | None = None,
    brief: bool = False,
) -> Digest:
    """The summary of the transcript `blocks`, updating `previous` (may be empty); `brief`:
    the blocks are a brief transcript (`nbchat.compaction.prune`), asked for the brief
    checkpoint."""
    if not blocks:
        return Digest(text=previous or NOTHING_SAID)
    reply_tokens = min(max_tokens, window // 4, BRIEF_REPLY_TOKENS if brief else max_tokens)
    budget = _chunk_budget(
        window, reply_tokens, previous=previous, instruction=instruction, focus=focus
    )
    chunks = chunk_blocks(blocks, budget=budget)
    digest = Digest(text=previous, chunks=len(chunks))
    for chunk in chunks:
        if cancel is not None and cancel.is_set():
            return replace(digest, cancelled=True)
        messages = build_request(
            chunk, previous=digest.text, fmt=fmt, instruction=instruction, focus=focus, brief=brief
        )
        schema = (BRIEF_RESPONSE_FORMAT if brief else RESPONSE_FORMAT) if fmt == "json" else None
        reply = summariser.summarise(
            messages, max_tokens=reply_tokens, response_format=schema, stop=cancel
        )
        digest = _read_reply(
            digest, reply, cancelled=cancel is not None and cancel.is_set(), told=messages
        )
        if digest.cancelled:
            return digest
    return digest


def _chunk_budget(
    window: int, reply_tokens: int, *, previous: str, instruction: str | None, focus: str | None
) -> int:
    """Transcript tokens one request may carry beside its prompts, summary so far and reply."""
    overhead = request_overhead(
        previous_tokens=max(reply_tokens, estimate_tokens(previous) if previous else 0),
        instruction=instruction,
        focus=focus,
    )
    budget = window - reply_tokens - overhead - window // 20  # 5% margin: len//3 is a guess
    if budget < MIN_CHUNK_TOKENS:
        raise CompactionError(
            f"The summariser's window ({window:,} tokens) leaves no room for the transcript "
            f"after the prompts and a {reply_tokens:,}-token reply. The history was left as it "
            "was; raise summariser_context or lower summary_max_tokens."
        )
    return budget


def _read_reply(
    digest: Digest, reply: SummaryReply, *, cancelled: bool, told: Sequence[Message]
) -> Digest:
    """`digest` after one reply: usage counted, its text the new summary so far (the summary
    before it, when the reply only copied `told`, its instruction, or repeated itself)."""
    usage = SummaryUsage(
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        requests=1,
        cached_tokens=reply.cached_tokens,
    )
    counted = replace(digest, usage=digest.usage.plus(usage))
    if cancelled or reply.finish_reason == "stopped":
        return replace(counted, cancelled=True)
    checkpoint = parse_reply(reply.text, instruction=instruction_of(told))
    warnings = list(counted.warnings)
    if checkpoint.rejected:
        warnings.append(NOT_KEPT)
        return replace(counted, warnings=tuple(dict.fromkeys(warnings)))
    if not checkpoint.text:
        raise CompactionError(
            "The summariser returned an empty summary. The history was left as it was; compact "
            "again, or set another summary_model if it keeps happening."
        )
    if checkpoint.echoes:
        warnings.append(f"{checkpoint.echoes} item(s) of the summary {ECHOED}")
    if checkpoint.missing:
        missing = ", ".join(checkpoint.missing)
        warnings.append(f"the summary lacks section(s) {missing}; the recorded facts stand in")
    if checkpoint.over_budget:
        over = ", ".join(checkpoint.over_budget)
        warnings.append(f"{OVER_BUDGET} {over} were over their budget and were cut")
    if reply.finish_reason == "length":
        warnings.append("the summary was cut at its max_tokens")
    return replace(counted, text=checkpoint.text, warnings=tuple(dict.fromkeys(warnings)))


def instruction_of(messages: Sequence[Message]) -> str:
    """What a summary request told the summariser: its messages without the transcript (in the
    cache form, `messages` is only the instruction)."""
    parts = []
    for message in messages:
        content = str(message.get("content") or "")
        end = content.rfind(CONVERSATION_END)
        told = content[end + len(CONVERSATION_END) :] if end >= 0 else content
        # An update carries the previous summary forward: its items are no echo.
        start, stop = told.find(PREVIOUS_START), told.find(PREVIOUS_END)
        if 0 <= start < stop:
            told = told[:start] + told[stop + len(PREVIOUS_END) :]
        parts.append(told)
    return "\n".join(parts)


def joined(first: Digest, then: Digest) -> Digest:
    """`then` (which updated `first`'s text) with both digests' usage and warnings; its form
    says "cache+transcript" when the first was asked in the cache form."""
    if not first.usage.requests:
        return then
    return replace(
        then,
        usage=first.usage.plus(then.usage),
        chunks=first.chunks + then.chunks,
        warnings=tuple(dict.fromkeys(first.warnings + then.warnings)),
    )


def _log_warnings(digest: Digest) -> None:
    for warning in digest.warnings:
        level = logging.INFO if warning.startswith(OVER_BUDGET) else logging.WARNING
        log.log(level, "compaction: %s", warning)

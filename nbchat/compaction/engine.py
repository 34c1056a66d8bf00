"""`CompactionEngine`: the original API, a thin front over the compaction steps.

The engine holds the options a cell or the conversation gives it (the threshold, the tail, the
system prompt and tool schemas, the summary's model and form) and the summariser
(`nbchat.compaction.writer.SummaryWriter`: the one handed in, else an `OpenAISummariser` built at
the first summary). Each call is the compaction steps: `prepare` the compaction
(`nbchat.compaction.steps`), then `compact` it (`nbchat.compaction.summarystep`: the one model
call). It never opens the DB or touches widgets.

- `total_tokens(history)`: rows only, the baseline len//3 rule; O(1) on a `History`.
- `should_compact(history)`: rows + system prompt + tool schemas (or the server's reported
  prompt size plus the rows added since) against the trigger, `int(threshold * factor)`.
- `compact_history(history)`: the baseline, `[compacted, *tail]` or the history unchanged.
- `compact(history, ...)`: the layered path the conversation loop uses: prune old tool
  outputs and summarise (in chunks when the input exceeds the summariser's window); a prune
  alone only with `prune_alone` (see `steps.PRUNE_ALONE`). Returns a `CompactionResult`.
- `compact_prepared(history, prepared)`: what `compact` would do now, from a summary prepared
  earlier in the background (`steps.reuse`); only rows added since are summarised.
- `preview(history, focus=...)`: the forced `compact` the Compact button proposes, to look at
  (and edit) before anything is applied.

The store write is the caller's: `nbchat.conversation.session.apply_compaction`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nbchat.compaction.cacheform import RequestShape
from nbchat.compaction.prompts import SummaryFormat
from nbchat.compaction.prune import BRIEF_CAP
from nbchat.compaction.result import CompactionResult, Summariser
from nbchat.compaction.steps import (
    PRUNE_ALONE,
    CompactionSettings,
    HistoryLike,
    Preparation,
    is_settled,
    needs_summariser,
    prepare,
    prepare_baseline,
    reuse,
    trigger_tokens,
)
from nbchat.compaction.summarystep import compact
from nbchat.compaction.writer import SummaryWriter
from nbchat.config import DEFAULT_SUMMARY_MAX_TOKENS, DEFAULT_TRIGGER_FACTOR
from nbchat.history import History, Row, context_tokens, estimate_tokens, request_overhead_tokens

if TYPE_CHECKING:
    import openai

    from nbchat.config import Settings

__all__ = ["CompactionEngine"]


class CompactionEngine:
    """Decides when to compact and builds the compacted history (see the module docstring).

    The six positional parameters are the original nbchat's, kept so cells that drive it keep
    working; everything added is keyword-only. Constructing an engine does no I/O: the client
    (from `Settings.load()` when `client` is None) and the summariser's window are looked up
    at the first summary. `summariser` replaces the OpenAI client with any
    `Summariser` (asked transcripts only: the cache form needs the engine's own). `brief_cap`:
    summarise the brief transcript within that many tokens (the default on the embedded model,
    `steps.CompactionSettings.brief_cap`).
    """

    def __init__(
        self,
        threshold: int,
        # 5 on purpose: the original design's `CompactionEngine` default (the chat's
        # `Settings.tail_messages` keeps the original design's 4; `from_settings` passes it).
        tail_messages: int = 5,
        summary_prompt: str | None = None,
        summary_model: str | None = None,
        system_prompt: str = "",
        client: openai.OpenAI | None = None,
        *,
        trigger_factor: float | None = None,
        tool_schemas: Sequence[Mapping[str, Any]] = (),
        summary_max_tokens: int | None = None,
        summariser_context: int | None = None,
        summary_format: SummaryFormat = "json",
        settings: Settings | None = None,
        summariser: Summariser | None = None,
        prune_alone: bool = PRUNE_ALONE,
        brief_cap: int | None = None,
    ) -> None:
        self.threshold = threshold
        self.tail_messages = tail_messages
        self.summary_prompt = summary_prompt
        self.summary_model = summary_model or (settings.summary_model if settings else None)
        self.system_prompt = system_prompt
        self.tool_schemas = tuple(tool_schemas)
        self.trigger_factor: float = _pick(
            trigger_factor, settings, name="trigger_factor", default=DEFAULT_TRIGGER_FACTOR
        )
        self.summary_max_tokens: int = _pick(
            summary_max_tokens,
            settings,
            name="summary_max_tokens",
            default=DEFAULT_SUMMARY_MAX_TOKENS,
        )
        self.summary_format = summary_format
        self.prune_alone = prune_alone
        # The embedded model summarises the brief transcript (`nbchat.compaction.prune`): read
        # whole, in chunks, a long history took it tens of minutes.
        embedded = settings is not None and settings.is_embedded
        self.brief_cap = brief_cap if brief_cap is not None else BRIEF_CAP if embedded else None
        # The chat's last request (set by the conversation): the summary is then asked as its
        # continuation, inside the server's prompt cache (`nbchat.compaction.cacheform`).
        self.request_shape: RequestShape | None = None
        _validate(self)
        window = summariser_context or (settings.summariser_context if settings else None)
        self._writer = SummaryWriter(
            summariser, client=client, model=self.summary_model, settings=settings, window=window
        )
        self._overhead: tuple[str, tuple[Mapping[str, Any], ...], int] | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        client: openai.OpenAI | None = None,
        *,
        system_prompt: str | None = None,
        tool_schemas: Sequence[Mapping[str, Any]] = (),
        summariser: Summariser | None = None,
    ) -> CompactionEngine:
        """An engine with the settings' threshold, tail, trigger factor and summary options."""
        return cls(
            settings.offline_threshold(),
            settings.tail_messages,
            None,
            settings.summary_model,
            settings.system_prompt if system_prompt is None else system_prompt,
            client,
            tool_schemas=tool_schemas,
            settings=settings,
            summariser=summariser,
        )

    def __repr__(self) -> str:
        return (
            f"CompactionEngine(threshold={self.threshold}, tail_messages={self.tail_messages}, "
            f"trigger={self.trigger})"
        )

    @property
    def trigger(self) -> int:
        """Compaction triggers at this many tokens and aims to land under it."""
        return trigger_tokens(self.threshold, self.trigger_factor)

    @property
    def overhead_tokens(self) -> int:
        """The system prompt's and the tool schemas' estimate, counted again only when changed."""
        cached = self._overhead
        if (
            cached is None
            or cached[0] is not self.system_prompt
            or cached[1] is not self.tool_schemas
        ):
            tokens = request_overhead_tokens(self.system_prompt, self.tool_schemas)
            self._overhead = cached = (self.system_prompt, self.tool_schemas, tokens)
        return cached[2]

    @property
    def compaction_settings(self) -> CompactionSettings:
        """The value the steps are sized and asked by, from this engine's options now."""
        return CompactionSettings(
            threshold=self.threshold,
            tail_messages=self.tail_messages,
            overhead_tokens=self.overhead_tokens,
            trigger_factor=self.trigger_factor,
            summary_max_tokens=self.summary_max_tokens,
            summary_format=self.summary_format,
            summary_prompt=self.summary_prompt,
            prune_alone=self.prune_alone,
            brief_cap=self.brief_cap,
        )

    def total_tokens(self, history: HistoryLike) -> int:
        """Rows only, the baseline rule; O(1) on a `History`, a rescan on a list."""
        if isinstance(history, History):
            return history.total_tokens
        return sum(estimate_tokens(row) for row in history)

    def context_tokens(self, history: HistoryLike) -> int:
        """The size of the next request (`nbchat.history.context_tokens` with this engine's
        system prompt and tool schemas)."""
        return context_tokens(history, self.overhead_tokens)

    def should_compact(self, history: HistoryLike) -> bool:
        """At or over the trigger, unless the history is already `[compacted, <= tail rows]`."""
        if len(history) == 0 or is_settled(history, self.tail_messages):
            return False
        return self.context_tokens(history) >= self.trigger

    def compact_history(self, history: HistoryLike) -> list[Row]:
        """The baseline: `[compacted, *tail]`, or the history unchanged (as a list).

        Raises `CompactionError` when the summariser fails; the history is not touched.
        """
        preparation = prepare_baseline(history, self.compaction_settings)
        return list(compact(preparation, self._writer).rows)

    def compact(
        self,
        history: HistoryLike,
        *,
        force: bool = False,
        focus: str | None = None,
        cancel: threading.Event | None = None,
        room: int = 0,
    ) -> CompactionResult:
        """The layered path: prune old tool outputs, then summarise (chunked) if still needed.

        `force` compacts under the trigger too (the Compact button); `focus` is passed to the
        summariser; a set `cancel` (checked between chunks, and closing the summariser's stream)
        returns `changed=False`; `room`: tokens the kept tail leaves free for what comes before
        the compaction is applied (one prepared ahead). Raises `CompactionError` when the
        summariser fails.
        """
        started = time.monotonic()
        preparation = self._prepare(history, force=force, focus=focus, room=room)
        result = compact(preparation, self._writer, cancel=cancel)
        return replace(result, duration=time.monotonic() - started)

    def compact_prepared(
        self,
        history: HistoryLike,
        prepared: CompactionResult,
        *,
        force: bool = False,
        at_once: bool = False,
        cancel: threading.Event | None = None,
        room: int = 0,
    ) -> CompactionResult | None:
        """`compact(history)` reusing `prepared`, a forced compaction made earlier of this
        history's first rows (the caller checks they are unchanged; see `steps.reuse`). None
        when `prepared` cannot serve, or its summary would not shrink the history now: compact
        as usual then. `at_once`: only with the cut `prepared` made, with no model call (None
        when that cut would not land under the trigger)."""
        started = time.monotonic()
        prefer_made = True if at_once else None
        preparation = reuse(
            self._prepare(history, force=force, room=room),
            prepared,
            force=force,
            prefer_made=prefer_made,
        )
        if preparation is None or (at_once and needs_summariser(preparation)):
            return None
        result = compact(preparation, self._writer, cancel=cancel)
        if result.edit.summary_row is None and not result.cancelled:
            return None
        return replace(result, duration=time.monotonic() - started)

    def preview(
        self,
        history: HistoryLike,
        *,
        focus: str | None = None,
        cancel: threading.Event | None = None,
    ) -> CompactionResult:
        """The compaction the Compact button would make (forced, with `focus`), to look at first.

        The engine never touches a store: nothing changes until the result is applied
        (`apply_compaction`, or `Conversation.accept_compaction`). The summariser is called.
        """
        return self.compact(history, force=True, focus=focus, cancel=cancel)

    def _prepare(
        self, history: HistoryLike, *, force: bool, focus: str | None = None, room: int = 0
    ) -> Preparation:
        return prepare(
            history,
            self.compaction_settings,
            force=force,
            focus=focus,
            shape=self.request_shape,
            room=room,
        )


def _pick(value: Any, settings: Settings | None, *, name: str, default: Any) -> Any:
    """An explicit value, else the settings' value, else the default."""
    if value is not None:
        return value
    return getattr(settings, name) if settings is not None else default


def _validate(engine: CompactionEngine) -> None:
    problems = {
        "threshold must be a positive number of tokens": engine.threshold < 1,
        "tail_messages must be at least 1": engine.tail_messages < 1,
        "trigger_factor must be above 0 and at most 1": not 0 < engine.trigger_factor <= 1,
        "summary_max_tokens must be at least 1": engine.summary_max_tokens < 1,
        "summary_format must be 'json' or 'markdown'": engine.summary_format
        not in ("json", "markdown"),
    }
    for problem, failed in problems.items():
        if failed:
            name = problem.split()[0]
            raise ValueError(f"{problem}, got {getattr(engine, name)!r}")

"""`CompactionEngine`: keeps every request inside the token budget without losing what matters.

The engine decides and builds; it never opens the DB or touches widgets. It is built in three
layers, each its own module: the sizes (`nbchat.compaction.sizing`: trigger, overhead,
checkpoint cap, keep budget), the prune and summary layers and the summary call
(`nbchat.compaction.layers`), and the reuse of a checkpoint prepared in the background
(`nbchat.compaction.prepared`). Its pure steps live beside them: the split, the prune, the
facts, the prompts, the cache form. The one call to a model goes through a `Summariser` (by
default `nbchat.compaction.modelsummariser.OpenAISummariser`, imported only when first needed).

- `total_tokens(history)`: rows only, the baseline len//3 rule; O(1) on a `History`.
- `should_compact(history)`: rows + system prompt + tool schemas (or the server's reported
  prompt size plus the rows added since) against the trigger, `int(threshold * factor)`.
- `compact_history(history)`: the baseline, `[compacted, *tail]` or the history unchanged.
- `compact(history, ...)`: the layered path the conversation loop uses: prune old tool
  outputs and summarise (in chunks when the input exceeds the summariser's window); a prune
  alone only with `prune_alone` (see `layers.PRUNE_ALONE`). Returns a `CompactionResult` with
  everything measurable.
- `compact_prepared(history, prepared)`: what `compact` would do now, from a summary prepared
  earlier in the background (`nbchat.compaction.prepared`); only rows added since are
  summarised.
- `preview(history, focus=...)`: the forced `compact` the Compact button proposes, to look at
  (and edit) before anything is applied.
- `apply_compaction(store, ...)`: writes a result in one store transaction (archive, never
  delete), through a small protocol so this module never imports `nbchat.store.store`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nbchat.compaction.cacheform import RequestShape
from nbchat.compaction.layers import PRUNE_ALONE
from nbchat.compaction.prepared import PreparedCompaction
from nbchat.compaction.prompts import SummaryFormat
from nbchat.compaction.result import CompactionResult, CompactionStore, Layer, apply_compaction
from nbchat.compaction.sizing import CHECKPOINT_TOKENS, HistoryLike, rows_and_estimates
from nbchat.compaction.summariser import Summariser
from nbchat.compaction.writer import SummaryWriter
from nbchat.config import DEFAULT_SUMMARY_MAX_TOKENS, DEFAULT_TRIGGER_FACTOR
from nbchat.history import Row

if TYPE_CHECKING:
    import openai

    from nbchat.config import Settings

__all__ = [
    "CHECKPOINT_TOKENS",
    "PRUNE_ALONE",
    "CompactionEngine",
    "CompactionResult",
    "CompactionStore",
    "Layer",
    "apply_compaction",
]

log = logging.getLogger(__name__)

DEFAULT_SUMMARY_FORMAT: SummaryFormat = "json"


class CompactionEngine(PreparedCompaction):
    """Decides when to compact and builds the compacted history (see the module docstring).

    The six positional parameters are the original nbchat's, kept so cells that drive it keep
    working; everything added is keyword-only. Constructing an engine does no I/O: the client
    (from `Settings.load()` when `client` is None) and the summariser's window are looked up at
    the first summary. `summariser` replaces the OpenAI client with any `Summariser`.
    """

    def __init__(
        self,
        threshold: int,
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
        summary_format: SummaryFormat = DEFAULT_SUMMARY_FORMAT,
        extra_body: Mapping[str, Any] | None = None,
        settings: Settings | None = None,
        summariser: Summariser | None = None,
        prune_protect_tokens: int | None = None,
        prune_alone: bool = PRUNE_ALONE,
    ) -> None:
        self.threshold = threshold
        self.tail_messages = tail_messages
        self.summary_prompt = summary_prompt
        self.summary_model = summary_model or (settings.summary_model if settings else None)
        self.system_prompt = system_prompt
        self.client = client
        self.trigger_factor: float = _pick(
            trigger_factor, settings, name="trigger_factor", default=DEFAULT_TRIGGER_FACTOR
        )
        self.tool_schemas = tuple(tool_schemas)
        self.summary_max_tokens: int = _pick(
            summary_max_tokens,
            settings,
            name="summary_max_tokens",
            default=DEFAULT_SUMMARY_MAX_TOKENS,
        )
        self.summary_format = summary_format
        self.extra_body = dict(extra_body) if extra_body else None
        self.settings = settings
        self.prune_protect_tokens = prune_protect_tokens
        self.prune_alone = prune_alone
        self._summariser = summariser
        self._summary_writer: SummaryWriter | None = None
        self._window: int | None = summariser_context or (
            settings.summariser_context if settings else None
        )
        _validate(self)
        self._overhead: tuple[str, tuple[Mapping[str, Any], ...], int] | None = None
        # The chat's last request (set by the conversation): the summary is then asked as its
        # continuation, inside the server's prompt cache (`nbchat.compaction.cacheform`).
        self.request_shape: RequestShape | None = None

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

    def should_compact(self, history: HistoryLike) -> bool:
        """At or over the trigger, unless the history is already `[compacted, <= tail rows]`."""
        if len(history) == 0 or self._is_settled(history):
            return False
        return self.context_tokens(history) >= self.trigger

    def compact_history(self, history: HistoryLike) -> list[Row]:
        """The baseline: `[compacted, *tail]`, or the history unchanged (as a list).

        Raises `CompactionError` when the summariser fails; the history is not touched.
        """
        rows, estimates = rows_and_estimates(history)
        measured = self.context_tokens(history)
        if self._is_settled(rows):
            return rows
        result = self._summarise(
            rows, rows, estimates, measured=measured, over=measured >= self.trigger
        )
        return list(result.rows)

    def compact(
        self,
        history: HistoryLike,
        *,
        force: bool = False,
        focus: str | None = None,
        cancel: threading.Event | None = None,
    ) -> CompactionResult:
        """The layered path: prune old tool outputs, then summarise (chunked) if still needed.

        `force` compacts under the trigger too (the Compact button); `focus` is passed to the
        summariser; a set `cancel` (checked between chunks, and closing the summariser's stream)
        returns `changed=False`. Raises `CompactionError` when the summariser fails.
        """
        started = time.monotonic()
        rows, estimates = rows_and_estimates(history)
        before = self.context_tokens(history)
        if not force and before < self.trigger:
            result = CompactionResult.unchanged(
                rows, before, f"under the trigger ({before:,} of {self.trigger:,})"
            )
        elif not rows or self._is_settled(rows):
            result = CompactionResult.unchanged(
                rows, before, "already compacted: a summary and the recent rows"
            )
        else:
            pruned, pruned_estimates = self._prune(rows, estimates, before)
            if self._prune_is_enough(pruned, force=force):
                result = pruned  # the cheap layer was enough: no model call
            else:
                result = self._summarise_pruned(
                    rows,
                    estimates,
                    pruned,
                    pruned_estimates=pruned_estimates,
                    focus=focus,
                    cancel=cancel,
                )
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

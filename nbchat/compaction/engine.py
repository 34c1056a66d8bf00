"""`CompactionEngine`: keeps every request inside the token budget without losing what matters.

The engine decides and builds; it never opens the DB or touches widgets. Its steps are pure and
live in their own modules: the split (`nbchat.compaction.split`), the cheap prune layer
(`nbchat.compaction.prune`), the code-computed facts (`nbchat.compaction.facts`), the prompts,
transcript and chunks (`nbchat.compaction.prompts`). The one call to a model goes through a
`Summariser` (by default `nbchat.compaction.modelsummariser.OpenAISummariser`, imported only when
first needed).

- `total_tokens(history)`: rows only, the baseline len//3 rule; O(1) on a `History`.
- `should_compact(history)`: rows + system prompt + tool schemas (or the server's reported
  prompt size plus the rows added since) against the trigger, `int(threshold * factor)`.
- `compact_history(history)`: the baseline, `[compacted, *tail]` or the history unchanged.
- `compact(history, ...)`: the layered path the conversation loop uses: prune old tool
  outputs; stop there if that lands under the trigger; else summarise (in chunks when the input
  exceeds the summariser's window). Returns a `CompactionResult` with everything measurable.
- `compact_prepared(history, prepared)`: what `compact` would do now, from a summary prepared
  earlier in the background (`nbchat.compaction.reuse`); only rows added since are summarised.
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
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from nbchat.compaction.cacheform import RequestShape, build_cache_request, cache_prefix_end
from nbchat.compaction.facts import facts_of, previous_summary, render_facts
from nbchat.compaction.latest import latest_instruction, render_latest
from nbchat.compaction.prompts import SummaryFormat, to_blocks
from nbchat.compaction.prune import apply_replacements, find_prunable, protected_start
from nbchat.compaction.result import (
    CompactionResult,
    CompactionStore,
    Layer,
    apply_compaction,
    in_units_of,
)
from nbchat.compaction.reuse import (
    model_text,
    summary_row_for,
    with_kept_placeholders,
    with_prepared_cost,
)
from nbchat.compaction.split import Split, choose_split
from nbchat.compaction.summariser import Summariser
from nbchat.compaction.writer import Digest, SummaryWriter, joined
from nbchat.config import DEFAULT_SUMMARY_MAX_TOKENS, DEFAULT_TRIGGER_FACTOR
from nbchat.history import (
    History,
    Row,
    context_tokens,
    estimate_tokens,
    request_overhead_tokens,
    to_row,
)

if TYPE_CHECKING:
    import openai

    from nbchat.config import Settings

__all__ = [
    "CompactionEngine",
    "CompactionResult",
    "CompactionStore",
    "Layer",
    "apply_compaction",
]

log = logging.getLogger(__name__)

DEFAULT_SUMMARY_FORMAT: SummaryFormat = "json"
# A checkpoint's usual size under its section budgets (the code-computed facts come on top).
CHECKPOINT_TOKENS = 400

HistoryLike = History | Sequence[Sequence[str]]


class CompactionEngine:
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
            settings.threshold_for(None),
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
    def trigger(self) -> int:
        """Compaction triggers at this many tokens and aims to land under it."""
        return int(self.threshold * self.trigger_factor)

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
        if len(history) == 0 or self._is_settled(history):
            return False
        return self.context_tokens(history) >= self.trigger

    def compact_history(self, history: HistoryLike) -> list[Row]:
        """The baseline: `[compacted, *tail]`, or the history unchanged (as a list).

        Raises `CompactionError` when the summariser fails; the history is not touched.
        """
        rows, estimates = _rows_and_estimates(history)
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
        rows, estimates = _rows_and_estimates(history)
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
            if pruned.changed and not force and pruned.tokens_after < self.trigger:
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

    def _summarise_pruned(
        self,
        rows: list[Row],
        estimates: list[int],
        pruned: CompactionResult,
        *,
        pruned_estimates: list[int],
        focus: str | None,
        cancel: threading.Event | None,
    ) -> CompactionResult:
        """The summary layer on top of the prune layer; placeholders kept only in the tail."""
        outcome = self._summarise(
            list(pruned.rows),
            rows,
            pruned_estimates,
            measured=pruned.tokens_after,
            over=True,  # forced, or still over the trigger after pruning
            focus=focus,
            cancel=cancel,
        )
        if outcome.cancelled or (not outcome.changed and not pruned.changed):
            before = pruned.tokens_before  # nothing is applied: not even the placeholders
            return replace(outcome, rows=tuple(rows), tokens_before=before, tokens_after=before)
        if not outcome.changed:
            return replace(pruned, reason=f"{pruned.reason}; no summary: {outcome.reason}")
        first_kept = len(rows) - outcome.keep_tail
        kept = {i: row for i, row in pruned.replacements.items() if i >= first_kept}
        return replace(
            outcome,
            tokens_before=pruned.tokens_before,
            replacements=MappingProxyType(kept),
            pruned_tokens=sum(estimates[i] - pruned_estimates[i] for i in kept),
        )

    def _is_settled(self, rows: HistoryLike) -> bool:
        """The loop guard: `[compacted, <= tail rows]` is never compacted again."""
        return 0 < len(rows) <= self.tail_messages + 1 and rows[0][0] == "compacted"

    def _keep_budget(self) -> int:
        """How many tokens a tail may keep when over the trigger: the request after a compaction
        should stand at about half the trigger (so at most half the threshold), system prompt,
        tool schemas and a checkpoint of the usual size included, so that the next compaction
        is many turns away. (`_split` then takes the facts and the carried message off too.)"""
        checkpoint = min(self.summary_max_tokens, CHECKPOINT_TOKENS)
        return max(0, self.trigger // 2 - self.overhead_tokens - checkpoint)

    def _prune(
        self, rows: list[Row], estimates: list[int], before: int
    ) -> tuple[CompactionResult, list[int]]:
        """The cheap layer: old tool outputs behind placeholders (and the new estimates)."""
        keep_tokens = self.prune_protect_tokens
        if keep_tokens is None:
            keep_tokens = self.trigger // 4
        start = protected_start(
            rows, estimates, keep_rows=self.tail_messages, keep_tokens=keep_tokens
        )
        replacements = find_prunable(rows, estimates, protect_from=start)
        pruned = apply_replacements(rows, replacements)
        new_estimates = [
            estimate_tokens(pruned[i]) if i in replacements else e for i, e in enumerate(estimates)
        ]
        saved = sum(estimates) - sum(new_estimates)
        estimated = sum(estimates) + self.overhead_tokens
        result = CompactionResult(
            rows=tuple(pruned),
            changed=bool(replacements),
            layer="prune" if replacements else "none",
            reason=f"{len(replacements)} old tool output(s) archived behind placeholders",
            tokens_before=before,
            tokens_after=before - in_units_of(saved, measured=before, estimated=estimated),
            replacements=MappingProxyType(replacements),
            pruned_tokens=saved,
        )
        return result, new_estimates

    def _summarise(
        self,
        rows: list[Row],
        original: list[Row],
        estimates: list[int],
        *,
        measured: int,
        over: bool,
        focus: str | None = None,
        cancel: threading.Event | None = None,
    ) -> CompactionResult:
        """Summarise `rows[:split]` (facts read from `original`, the rows before pruning)."""
        split = self._split(rows, estimates, original=original, over=over)
        if split is None:
            reason = "fewer than two rows before the kept tail"
            return CompactionResult.unchanged(rows, measured, reason)
        carried = render_latest(latest_instruction(rows, split.start))
        facts = render_facts(facts_of(original[: split.start]))
        # Checked before any tokens are spent: even a summary of nothing must save something.
        kept = estimate_tokens(facts) + (estimate_tokens(carried) if carried else 0)
        if kept + sum(estimates[split.start :]) >= sum(estimates):
            reason = "a summary would not shrink the history"
            return CompactionResult.unchanged(rows, measured, reason)
        said = self._write(original, rows, start=split.start, focus=focus, cancel=cancel)
        if said.cancelled:
            return self._with_usage(CompactionResult.unchanged(rows, measured, "cancelled"), said)
        blocks = (said.text, facts, carried)
        summary_row = Row("compacted", "\n\n".join(block for block in blocks if block))
        result = CompactionResult.summarised(
            rows,
            estimates,
            summary_row,
            start=split.start,
            rule=split.rule,
            measured=measured,
            estimated=sum(estimates) + self.overhead_tokens,
        )
        # A summary that would not shrink the history is not applied: no layer did the work.
        layer: Layer = ("chunked" if said.chunks > 1 else "summary") if result.changed else "none"
        return self._with_usage(replace(result, layer=layer), said)

    def _write(
        self,
        original: list[Row],
        rows: list[Row],
        *,
        start: int,
        focus: str | None,
        cancel: threading.Event | None,
    ) -> Digest:
        """Ask for the summary of `original[:start]`: in the cache form when it applies (the
        rows exactly as the chat sent them), else as a transcript (chunked when needed)."""
        writer = self._writer()
        end, reply = 0, self.summary_max_tokens
        if self.summary_format == "json" and writer.sends_prefix:
            # The chat's requests, up to the threshold, went to this server: its window is at
            # least that big, whatever a server without /props lets the writer guess.
            window = max(writer.window, self.threshold)
            reply = min(self.summary_max_tokens, window // 4)
            shape = self.request_shape
            end = cache_prefix_end(
                original[:start], shape, model=writer.model_name, window=window, reply_tokens=reply
            )
        said = Digest()
        if end and self.request_shape is not None:
            messages = build_cache_request(
                original[:end], self.request_shape, instruction=self.summary_prompt, focus=focus
            )
            said = writer.write_cached(
                messages, tools=self.request_shape.tools, max_tokens=reply, cancel=cancel
            )
            if end == start or said.cancelled:
                return said
        rest = writer.write(
            to_blocks(original[end:start]),
            previous=said.text or previous_summary(rows[:start]),
            max_tokens=self.summary_max_tokens,
            fmt=self.summary_format,
            instruction=self.summary_prompt,
            focus=focus,
            cancel=cancel,
        )
        return joined(said, rest)

    def _split(
        self, rows: list[Row], estimates: list[int], *, original: list[Row], over: bool
    ) -> Split | None:
        """Where to cut. The summary row also carries the recorded facts and, when the cut
        takes the user's latest message, that message whole, so the tail gets the budget that
        is left beside them."""
        budget = self._keep_budget()
        split = choose_split(
            rows, estimates, tail_messages=self.tail_messages, budget=budget, over_trigger=over
        )
        if split is None or not over:
            return split
        latest = latest_instruction(rows, split.start)
        carried = estimate_tokens(render_latest(latest)) if latest else 0
        facts = estimate_tokens(render_facts(facts_of(original[: split.start])))
        budget = max(0, budget - carried - facts)
        narrower = choose_split(
            rows, estimates, tail_messages=self.tail_messages, budget=budget, over_trigger=over
        )
        return narrower or split

    def _with_usage(self, result: CompactionResult, said: Digest) -> CompactionResult:
        return replace(
            result,
            model=self._writer().model_name if said.requests else "",
            prompt_tokens=said.prompt_tokens,
            completion_tokens=said.completion_tokens,
            requests=said.requests,
            cancelled=said.cancelled,
            warnings=said.warnings,
            cached_tokens=said.cached_tokens,
            summary_form=said.form if said.requests else "",
        )

    def _writer(self) -> SummaryWriter:
        if self._summary_writer is None:
            self._summary_writer = SummaryWriter(
                self._summariser,
                client=self.client,
                model=self.summary_model,
                settings=self.settings,
                extra_body=self.extra_body,
                window=self._window,
            )
        return self._summary_writer

    def compact_prepared(
        self,
        history: HistoryLike,
        prepared: CompactionResult,
        *,
        force: bool = False,
        cancel: threading.Event | None = None,
    ) -> CompactionResult | None:
        """`compact(history)` reusing `prepared`: a forced compaction, made earlier, of this
        history's first `prepared.rows_summarised` rows (the caller checks they are unchanged).

        When the summary would now replace exactly those rows, it is rebuilt at once, with no
        model call; when it would replace more, only the rows added since are sent, to update
        the prepared summary. None when `prepared` cannot serve (unforced: under the trigger,
        or the prune layer is enough; or the cut now falls before what it covers): compact as
        usual then.
        """
        started = time.monotonic()
        rows, estimates = _rows_and_estimates(history)
        before = self.context_tokens(history)
        under = not force and before < self.trigger
        if under or prepared.summary_row is None or self._is_settled(rows):
            return None
        pruned, pruned_estimates = self._prune(rows, estimates, before)
        split = self._split(list(pruned.rows), pruned_estimates, original=rows, over=True)
        enough = not force and pruned.changed and pruned.tokens_after < self.trigger
        if enough or split is None or split.start < prepared.rows_summarised:
            return None
        covered = prepared.rows_summarised
        if split.start > covered and not force:
            # At the trigger the user is waiting: the prepared cut, if it lands under the
            # trigger, beats a deeper one that needs a model call now. (Forced, from an idle
            # moment or the button, the deeper cut is worth the call.)
            at_once = self._reused(
                rows, estimates, pruned, pruned_estimates, Split(covered, split.rule), prepared
            )
            if at_once is not None and at_once.tokens_after < self.trigger:
                return replace(at_once, duration=time.monotonic() - started)
        said = self._update_prepared(rows, prepared, split.start, cancel)
        if said.cancelled:
            return self._with_usage(CompactionResult.unchanged(rows, before, "cancelled"), said)
        result = self._reused(rows, estimates, pruned, pruned_estimates, split, prepared, said=said)
        return None if result is None else replace(result, duration=time.monotonic() - started)

    def _reused(
        self,
        rows: list[Row],
        estimates: list[int],
        pruned: CompactionResult,
        pruned_estimates: list[int],
        split: Split,
        prepared: CompactionResult,
        *,
        said: Digest | None = None,
    ) -> CompactionResult | None:
        """The compaction at `split` with the prepared summary (updated: `said`), or None when it
        would not shrink the history."""
        said = said or Digest(text=model_text(prepared))
        row = summary_row_for(said.text, rows, list(pruned.rows), split)
        result = CompactionResult.summarised(
            pruned.rows,
            pruned_estimates,
            row,
            start=split.start,
            rule=split.rule,
            measured=pruned.tokens_after,
            estimated=sum(pruned_estimates) + self.overhead_tokens,
        )
        if not result.changed:
            return None
        result = with_kept_placeholders(
            result, pruned, estimates=estimates, pruned_estimates=pruned_estimates
        )
        return with_prepared_cost(self._with_usage(result, said), prepared)

    def _update_prepared(
        self,
        rows: list[Row],
        prepared: CompactionResult,
        start: int,
        cancel: threading.Event | None,
    ) -> Digest:
        """The prepared summary's text, updated with `rows[covered:start]` when there are any."""
        said = Digest(text=model_text(prepared))
        if start == prepared.rows_summarised:
            return said
        return self._writer().write(
            to_blocks(rows[prepared.rows_summarised : start]),
            previous=said.text,
            max_tokens=self.summary_max_tokens,
            fmt=self.summary_format,
            instruction=self.summary_prompt,
            cancel=cancel,
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


def _rows_and_estimates(history: HistoryLike) -> tuple[list[Row], list[int]]:
    if isinstance(history, History):
        return history.rows, [history.estimate_of(i) for i in range(len(history))]
    rows = [to_row(row) for row in history]
    return rows, [estimate_tokens(row) for row in rows]

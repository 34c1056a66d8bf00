"""`LayeredCompaction`: the engine's two layers, the prune and the summary, and the summary call.

The second layer of `CompactionEngine` (`nbchat.compaction.engine`): old tool outputs behind
placeholders (`nbchat.compaction.prune`); where to cut (`nbchat.compaction.split`); the summary
asked in the cache form when it applies (`nbchat.compaction.cacheform`: the chat's own prefix
plus one instruction), else as a transcript, chunked when the input exceeds the summariser's
window (`nbchat.compaction.writer`); the recorded facts and the user's latest message carried
beside it. Builds `CompactionResult`s; never touches a store.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from nbchat.compaction.cacheform import RequestShape, build_cache_request, cache_prefix_end
from nbchat.compaction.facts import facts_of, previous_summary, render_facts
from nbchat.compaction.latest import latest_instruction, render_latest
from nbchat.compaction.prompts import (
    RESPONSE_FORMAT,
    SMALL_RESPONSE_FORMAT,
    SummaryFormat,
    to_blocks,
)
from nbchat.compaction.prune import apply_replacements, find_prunable, protected_start
from nbchat.compaction.result import CompactionResult, Layer, in_units_of
from nbchat.compaction.sizing import EngineSizing
from nbchat.compaction.split import Split, TailBudget, choose_split
from nbchat.compaction.summariser import Summariser
from nbchat.compaction.writer import Digest, SummaryWriter, joined
from nbchat.history import Row, estimate_tokens

if TYPE_CHECKING:
    import openai

    from nbchat.config import Settings

__all__ = ["PRUNE_ALONE", "LayeredCompaction"]

# Whether the prune layer may compact alone, with no summary. Off: every server nbchat talks to
# keeps a prompt cache (llama.cpp, vLLM, OpenAI), and a prune rewrites old tool outputs in the
# middle of the history, so the server reads everything after the first of them again, and the
# trigger comes back a few turns later for a summary that breaks the prefix once more. Pruning
# only when a summary is made breaks the cached prefix once per compaction (the replay of
# `bench/replay_savings.py`: 5 prune-only compactions of 7 made the prefix-cache cost higher
# than with no compaction at all). On: the cheapest compaction when no cache is kept.
PRUNE_ALONE = False


class LayeredCompaction(EngineSizing):
    """The prune and summary layers (set up by `CompactionEngine.__init__`)."""

    summary_prompt: str | None
    summary_model: str | None
    client: openai.OpenAI | None
    summary_format: SummaryFormat
    extra_body: dict[str, Any] | None
    settings: Settings | None
    prune_protect_tokens: int | None
    prune_alone: bool
    request_shape: RequestShape | None
    _summariser: Summariser | None
    _summary_writer: SummaryWriter | None
    _window: int | None

    def _prune_is_enough(self, pruned: CompactionResult, *, force: bool) -> bool:
        """Whether the prune layer alone compacts: only when allowed (`PRUNE_ALONE`: it breaks
        the server's cached prefix without deferring the next summary much), unforced, and it
        lands under the trigger."""
        under = pruned.changed and pruned.tokens_after < self.trigger
        return self.prune_alone and under and not force

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
        facts = render_facts(facts_of(original[: split.start]), small=self.small_checkpoint)
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
            reply = min(self.checkpoint_tokens, window // 4)
            shape = self.request_shape
            end = cache_prefix_end(
                original[:start], shape, model=writer.model_name, window=window, reply_tokens=reply
            )
        said = Digest()
        if end and self.request_shape is not None:
            small = self.small_checkpoint
            messages = build_cache_request(
                original[:end],
                self.request_shape,
                instruction=self.summary_prompt,
                focus=focus,
                small=small,
            )
            said = writer.write_cached(
                messages,
                tools=self.request_shape.tools,
                max_tokens=reply,
                cancel=cancel,
                response_format=SMALL_RESPONSE_FORMAT if small else RESPONSE_FORMAT,
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
        small = self.small_checkpoint
        facts = estimate_tokens(render_facts(facts_of(original[: split.start]), small=small))
        beside = carried + facts
        budget = TailBudget(aim=max(0, budget.aim - beside), fit=max(0, budget.fit - beside))
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

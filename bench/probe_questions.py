"""Probe questions about the five real traces (`tests/data/traces/`), for `compaction_probes.py`.

Each probe asks what a model continuing a compacted chat should still know: what the user asked,
which files changed and why, which errors happened, what was tried and failed, what comes next.
Its answer lies in the part of the trace that a compaction at a 12,000-token threshold
summarises (most of them not in the kept tail; `compaction_probes.py --verbose` marks those that
are). A probe counts as answered when any of its `answers` appears (case-insensitive) in what
the model would see after the compaction: the compacted row (the checkpoint and the facts code
keeps) and the kept tail.

Written and committed before anything in `nbchat/compaction/` was tuned against them, from
reading the traces, by the engineer who then tuned compaction. Half the probes are the test
split (`split="test"`), never tuned on: no prompt, rule or budget in `nbchat/` may be shaped by
them, and a failure there is fixed in the product only if the same kind of failure shows on the
dev split. The split alternates within each trace (test, dev, test, ...), fixed here. Nobody
changes a probe to move a score; a probe that is wrong about its trace (its answer is not in
the summarised part at all) may be corrected, and the commit says which and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PROBES", "Probe"]

Kind = Literal["asked", "files", "why", "errors", "tried", "next"]
Split = Literal["test", "dev"]


@dataclass(frozen=True)
class Probe:
    trace: str
    kind: Kind
    question: str
    answers: tuple[str, ...]
    split: Split


def _trace(name: str, *probes: tuple[Kind, str, tuple[str, ...]]) -> tuple[Probe, ...]:
    """The probes of one trace, the split alternating test, dev, test, ..."""
    return tuple(
        Probe(name, kind, question, answers, "test" if index % 2 == 0 else "dev")
        for index, (kind, question, answers) in enumerate(probes)
    )


PROBES: tuple[Probe, ...] = (
    *_trace(
        "pytest-dev__pytest-7236",
        ("asked", "What bug does the user report?", ("tearDown executed on skipped tests",)),
        ("asked", "In which pytest version did the behaviour change?", ("5.4.2",)),
        (
            "tried",
            "Why was src/_pytest/unittest.py checked out again before the fix?",
            ("debug print", "DEBUG"),
        ),
        (
            "errors",
            "What error did the debug print of the store's keys raise?",
            ("'Store' object has no attribute 'keys'",),
        ),
        (
            "errors",
            "What error did the reproduction script show under --pdb?",
            ("name 'xxx' is not defined",),
        ),
        (
            "tried",
            "Which store key did the first idea for the fix check?",
            ("skipped_by_mark_key",),
        ),
        (
            "tried",
            "How was the new regression test shown to fail without the fix?",
            ("assert [] != []", "teardowns != []"),
        ),
        ("next", "Which regression test was added?", ("test_pdb_teardown_skipped",)),
        ("why", "Which unittest result method is called for a skipped test?", ("addSkip",)),
        (
            "files",
            "Which scratch scripts were written to check the fix?",
            ("verify_setup_skip.py", "verify_pass.py", "verify_fail.py", "verify_setup_fail.py"),
        ),
    ),
    *_trace(
        "matplotlib__matplotlib-26208",
        ("asked", "What bug does the user report?", ("dataLims get replaced by inf",)),
        ("why", "Which Axes method was taught to handle collections?", ("relim",)),
        (
            "why",
            "Which handler calls relim when an axis' units change?",
            ("_unit_change_handler",),
        ),
        (
            "errors",
            "What error did the first version of the fix raise?",
            ("'Bbox' object has no attribute 'update_from_bbox'",),
        ),
        (
            "errors",
            "What error did the edited reproduction script raise?",
            ("name 'ax2' is not defined",),
        ),
        (
            "tried",
            "Which other plot type was checked for the same bug?",
            ("pcolormesh", "QuadMesh"),
        ),
        (
            "tried",
            "What happened when test_axes.py and test_collections.py were run together?",
            ("timed out", "timeout", "time out"),
        ),
        (
            "why",
            "What does relim's comment say about collections?",
            ("deliberately not supported",),
        ),
        ("files", "Which file was the reproduction script?", ("reproduce_issue.py",)),
        ("files", "Which file defines fill_between?", ("lib/matplotlib/axes/_axes.py",)),
    ),
    *_trace(
        "django__django-14351",
        (
            "asked",
            "What does the user report?",
            ("Q object __or__", "subquery must return only one column"),
        ),
        (
            "errors",
            "What error did the reproduction show on SQLite?",
            ("sub-select returns 2 columns - expected 1",),
        ),
        (
            "errors",
            "What went wrong when the reproduction created its tables?",
            ('property_groups" already exists', "no such table"),
        ),
        (
            "tried",
            "Why did the debug prints added with sed not run?",
            ("SyntaxError: invalid syntax", "nested quotes"),
        ),
        (
            "files",
            "Which compiler file was read to find get_default_columns?",
            ("django/db/models/sql/compiler.py",),
        ),
        (
            "why",
            "Which QuerySet method, found to exist, explains the subquery?",
            ("resolve_expression",),
        ),
        ("asked", "Which Django version worked?", ("2.2.5",)),
        (
            "why",
            "Which method does the PR description blame for adding all the fields?",
            ("get_default_columns",),
        ),
        (
            "next",
            "Which test suite was run to check for regressions?",
            ("tests/queries", "runtests.py queries"),
        ),
        ("tried", "Which script finally added the debug prints?", ("add_debug.py",)),
    ),
    *_trace(
        "pylint-dev__pylint-7080",
        ("asked", "What does the user report?", ("ignores `ignore-paths`", "ignores ignore-paths")),
        ("files", "Which pylint file holds the fix?", ("pylint/lint/pylinter.py",)),
        ("why", "Which helper decides whether a path is ignored?", ("_is_ignored_file",)),
        (
            "errors",
            "What did the first script that edited pylinter.py report?",
            ("Line 613 does not match",),
        ),
        ("errors", "What error did the regex experiments raise?", ("bad escape",)),
        (
            "why",
            "Which function turns ignore-paths into patterns?",
            ("_regexp_paths_csv_transfomer",),
        ),
        (
            "files",
            "Which file defines the ignore-paths option?",
            ("pylint/lint/base_options.py",),
        ),
        ("tried", "What TOML error did the first regex edit give?", ("Unescaped",)),
        (
            "files",
            "Which module holds expand_modules?",
            ("pylint/lint/expand_modules.py",),
        ),
        ("tried", "Which scripts edited pylinter.py?", ("modify_pylinter.py",)),
    ),
    *_trace(
        "psf__requests-1142",
        ("asked", "What does the user report?", ("ALWAYS sending content length",)),
        ("files", "Which file holds the fix?", ("requests/models.py",)),
        ("why", "Which method was changed?", ("prepare_content_length",)),
        (
            "errors",
            "What stopped the test suite from importing first?",
            ("cannot import name 'MutableMapping'",),
        ),
        (
            "errors",
            "Which keyword argument did HTTPConnection reject?",
            ("unexpected keyword argument 'strict'",),
        ),
        (
            "tried",
            "What did removing strict=self.strict) break?",
            ("was never closed", "SyntaxError"),
        ),
        ("errors", "Which attribute was MockRequest missing?", ("origin_req_host",)),
        (
            "tried",
            "What happened to the compatibility edits before submitting?",
            ("git checkout", "revert"),
        ),
        ("files", "Which script checks a POST request without a body?", ("verify_post.py",)),
        ("next", "Which test file was run to check for regressions?", ("test_requests.py",)),
    ),
)

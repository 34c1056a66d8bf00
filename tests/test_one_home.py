"""Each rule and default has one home (issue 10, item 4), checked on the code itself: the len//3
estimate is written only in `nbchat.history`, the defaults 0.75, 1024 and 8192 only in
`nbchat.config`, and the modules that need them use those (the same objects, not copies)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from nbchat import config, history
from nbchat.compaction import cacheform, result, steps, writer
from nbchat.compaction.engine import CompactionEngine
from nbchat.config import Settings
from nbchat.conversation import session
from nbchat.embedded import server
from nbchat.store.rowsql import CompactionRecord

PACKAGE = Path(__file__).resolve().parent.parent / "nbchat"
ESTIMATE = re.compile(r"//\s*3\b|\b3\s*\*|\*\s*3\b")
DEFAULTS = {"0.75", "1024", "8192"}
# Code that looks like the rule or a default but means something else.
UNRELATED = {
    ("embedded/modelfiles.py", "CHUNK_BYTES"),  # 8 MiB download chunks
    ("tools/builtins.py", "BINARY_SNIFF"),  # bytes read to tell a binary file
    ("compaction/prompts.py", "limit * 2 // 3"),  # a trimmed text keeps 2/3 head, 1/3 tail
    ("tools/preview.py", "quote = text [ opening ]"),  # a triple-quoted string's quote
    ("tools/listing.py", "CHECK_EVERY = 1024"),  # entries read between two deadline checks
    ("tools/mcpcall.py", "len ( data ) * 3 // 4"),  # the bytes a base64 text decodes to
}


BYTE_UNIT = re.compile(r"\*\s*1024\b|\b1024\s*\*")  # 64 * 1024 is a size in bytes, not max_tokens


def is_unrelated(name: str, line: str) -> bool:
    if BYTE_UNIT.search(line) and "1024" not in BYTE_UNIT.sub("", line):
        return True
    return any(name == where and what in line for where, what in UNRELATED)


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of each line that holds code, comments and strings left out."""
    kept: dict[int, list[str]] = {}
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    skip = {tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.NEWLINE}
    for token in tokens:
        if token.type not in skip and token.string.strip():
            kept.setdefault(token.start[0], []).append(token.string)
    return [(number, " ".join(parts)) for number, parts in sorted(kept.items())]


def modules() -> list[tuple[str, Path]]:
    return [(path.relative_to(PACKAGE).as_posix(), path) for path in PACKAGE.rglob("*.py")]


def test_the_len_over_3_estimate_is_written_once() -> None:
    found = [
        f"{name}:{number}: {line}"
        for name, path in modules()
        if name != "history.py"
        for number, line in code_lines(path)
        if ESTIMATE.search(line) and not is_unrelated(name, line)
    ]
    assert found == []


def test_the_defaults_are_written_only_in_config() -> None:
    found = []
    for name, path in modules():
        if name == "config.py":
            continue
        for number, line in code_lines(path):
            numbers = set(re.findall(r"\d+(?:\.\d+)?", line))
            if numbers & DEFAULTS and not is_unrelated(name, line):
                found.append(f"{name}:{number}: {line}")
    assert found == []


def test_the_modules_use_the_one_definition() -> None:
    settings = Settings()
    bare = CompactionEngine(1000)
    assert bare.trigger_factor == settings.trigger_factor == config.DEFAULT_TRIGGER_FACTOR
    assert bare.summary_max_tokens == settings.summary_max_tokens
    assert writer.DEFAULT_SUMMARISER_CONTEXT == settings.local_n_ctx == server.DEFAULT_N_CTX
    assert cacheform.UNSENT_ROLES is history.UNSENT_ROLES
    assert steps.context_tokens is history.context_tokens
    assert history.estimate_tokens("x" * 30) == 10
    assert history.estimate_tokens(("user", "x" * 30, "", "", "y" * 9)) == 13


def test_apply_compaction_hands_the_store_its_own_record_type() -> None:
    records: list[object] = []

    class Recording:
        def transaction(self, action: str):  # type: ignore[no-untyped-def]
            import contextlib

            return contextlib.nullcontext()

        def replace_rows(self, session_id, replacements, *, expected_active, record):  # type: ignore[no-untyped-def]
            records.append(record)
            return 1

        def replace_with_compacted(
            self, session_id, compacted, *, keep_tail, expected_active, record
        ):  # type: ignore[no-untyped-def]
            records.append(record)
            return 2

    rows = [history.Row("user", "x" * 300), history.Row("assistant", "y" * 300)]
    summary = history.Row("compacted", "short")
    done = result.summarised(rows + rows, [100] * 4, summary, start=3, rule="turn", measured=400)
    recording = Recording()
    assert session.apply_compaction(recording, "s", done, expected_active=4) == [2]  # type: ignore[arg-type]
    assert [type(record) for record in records] == [CompactionRecord]

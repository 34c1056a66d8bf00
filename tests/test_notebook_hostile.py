"""The notebook tools against hostile user objects and secrets, in a real IPython shell: secrets
masked, every call into user code under one deadline, odd variables skipped, no preview copying
a huge value, and a kernel that keeps answering while a preview holds the GIL.

The kernel's responsiveness is measured as a heartbeat thread sees it: it ticks every 50 ms and
records its longest gap while a tool runs. Memory is measured with tracemalloc (numpy reports to
it too) with the previews run in the kernel's own process (`CAN_FORK` off), where a copy would
land.
"""

from __future__ import annotations

import sys
import threading
import time
import tracemalloc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nbchat.tools.context import ToolContext
from nbchat.tools.notebook import notebook_tools

# Made up, in the shapes real ones have (built from parts so no scanner flags this file).
API_KEY = "sk-" + "proj-Zr8Qx2Lm5Np7Ks3Vb6Tc9Wd1Yf4Hg0Jk2Lm5Np7Qs"
GITHUB_TOKEN = "ghp" + "_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
DB_PASSWORD = "Hunter2x-" + "db"
MB = 1 << 20
BIG = 1 << 62


@pytest.fixture
def ipython(shell: Any) -> Iterator[Any]:
    """The real IPython shell of the `shell` fixture, its last error cleared."""
    from IPython.core.interactiveshell import InteractiveShell

    previous = getattr(sys, "last_value", None)
    yield InteractiveShell.instance()
    sys.last_value = previous  # type: ignore[assignment]
    for thread in threading.enumerate():
        if thread.name == "nbchat-preview":
            thread.join(10)


@pytest.fixture
def no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """Previews run in this process (on a helper thread), as on a system without fork."""
    monkeypatch.setattr("nbchat.tools.isolation.CAN_FORK", False)


def run_cell(ipython: Any, code: str) -> int:
    """Run `code` as the user's next cell; its execution number."""
    number = int(ipython.execution_count)
    ipython.run_cell(code, store_history=True)
    return number


def run_tool(ipython: Any, tool_name: str, /, timeout: float = 10, **arguments: Any) -> str:
    """The tool as the executor calls it, under a tool time limit of `timeout` seconds."""
    (found,) = [item for item in notebook_tools(ipython) if item.name == tool_name]
    context = ToolContext(Path.cwd(), timeout=timeout, deadline=time.monotonic() + timeout)
    return str(found.invoke(arguments, context))


@dataclass
class Watch:
    longest_gap: float = 0.0
    peak_growth: int = 0


@contextmanager
def watched(*, memory: bool = True) -> Iterator[Watch]:
    """The longest gap between the beats of a 50 ms heartbeat thread, and (with `memory`) the
    peak growth of traced memory, while the block runs. Tracing slows every allocation, so a
    test of time alone leaves it off."""
    watch = Watch()
    done = threading.Event()

    def beat() -> None:
        last = time.monotonic()
        while not done.wait(0.05):
            now = time.monotonic()
            watch.longest_gap = max(watch.longest_gap, now - last)
            last = now
        watch.longest_gap = max(watch.longest_gap, time.monotonic() - last)

    if memory:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    heart = threading.Thread(target=beat, name="heartbeat")
    heart.start()
    try:
        yield watch
    finally:
        done.set()
        heart.join()
        watch.peak_growth = tracemalloc.get_traced_memory()[1] - base
        if memory:
            tracemalloc.stop()


# 3. Secrets never reach the model without approval


def test_a_key_a_bearer_header_and_the_cell_that_set_them_reach_the_model_masked(
    ipython: Any,
) -> None:
    number = run_cell(
        ipython,
        f'api_key = "{API_KEY}"\n'
        f'headers = {{"Authorization": "Bearer {GITHUB_TOKEN}", "Accept": "json"}}\n'
        f'config = {{"url": "postgresql://bob:{DB_PASSWORD}@db/prod", "retries": 3}}\n'
        f'note = "the key is {API_KEY}"\n'
        "total = 42",
    )
    answers = {
        "listing": run_tool(ipython, "list_notebook_variables"),
        "api_key": run_tool(ipython, "describe_variable", name="api_key"),
        "headers": run_tool(ipython, "describe_variable", name="headers"),
        "config": run_tool(ipython, "describe_variable", name="config"),
        "note": run_tool(ipython, "describe_variable", name="note"),
        "cell": run_tool(ipython, "read_cell", number=number),
    }
    for answer in answers.values():
        for secret in (API_KEY, GITHUB_TOKEN, DB_PASSWORD, API_KEY[:20], GITHUB_TOKEN[:20]):
            assert secret not in answer
    assert answers["api_key"] == "api_key: str, length 49\n[masked: secret-looking name]"
    assert answers["headers"].endswith(
        "{'Authorization': '[masked: secret-looking name]', 'Accept': 'json'}"
    )
    assert answers["config"].endswith(
        "{'url': 'postgresql://bob:[masked: password in a URL]@db/prod', 'retries': 3}"
    )
    assert answers["note"].endswith("'the key is [masked: looks like an API key]'")
    assert 'api_key = "[masked: secret-looking name]"' in answers["cell"]
    assert "total: int = 42" in answers["listing"]


def test_a_traceback_that_shows_a_secret_reaches_the_model_masked(ipython: Any) -> None:
    run_cell(ipython, f'api_key = "{API_KEY}"\nraise ValueError("refused: " + api_key)')
    shown = run_tool(ipython, "last_error")
    assert API_KEY not in shown and API_KEY[:20] not in shown
    assert shown.rstrip().endswith("ValueError: refused: [masked: looks like an API key]")


def test_the_last_error_opens_with_the_error_and_the_cell_line_that_raised_it(
    ipython: Any,
) -> None:
    # Raised deep inside a library: its frames come last in the traceback, the cell's first.
    run_cell(ipython, 'import json\nrows = json.loads("{")')
    shown = run_tool(ipython, "last_error")
    headline = shown.split("\n", 1)[0]
    assert headline.startswith("The error: json.decoder.JSONDecodeError: Expecting property")
    assert headline.endswith('raised by this line of a notebook cell: rows = json.loads("{")')
    assert "Traceback (most recent call last)" in shown


# 4. Every call into user code is under the time limit


HOSTILE_CELL = """
import threading
import pandas as pd
calls = []
def _hang(what):
    calls.append(what)
    threading.Event().wait(3)

class SlowInt(int):
    def __str__(self): _hang("str"); return "slow"
    def __repr__(self): _hang("repr"); return "slow"
    def __format__(self, spec): _hang("format"); return "slow"

class Liar:
    @property
    def __class__(self): _hang("__class__"); return int

class FakeArray:
    __module__ = "numpy"
    dtype = "float64"
    @property
    def shape(self): _hang("shape"); return (1,)

class Label:
    def __str__(self): _hang("label"); return "label"
    __repr__ = __str__
    def __format__(self, spec): _hang("label"); return "label"

a_frame = pd.DataFrame([[1, 2]], columns=[Label(), Label()])
b_int = SlowInt(5)
c_liar = Liar()
d_array = FakeArray()
"""


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "in-process"])
def test_a_listing_of_hostile_objects_calls_none_of_their_methods(
    ipython: Any, monkeypatch: pytest.MonkeyPatch, fork: bool
) -> None:
    monkeypatch.setattr("nbchat.tools.isolation.CAN_FORK", fork)
    run_cell(ipython, HOSTILE_CELL)
    listed = run_tool(ipython, "list_notebook_variables").splitlines()
    assert {
        "a_frame: DataFrame, shape 1×2 (1 row, 2 columns), columns <Label>, <Label>",
        "b_int: SlowInt = 5",
        "c_liar: Liar",
        "d_array: FakeArray",
    } <= set(listed)
    assert ipython.user_ns["calls"] == []


def test_last_error_with_a_message_that_hangs_shows_its_frames_within_the_limit(
    ipython: Any,
) -> None:
    run_cell(
        ipython,
        "import threading\n"
        "armed = []\n"
        "class Hang(Exception):\n"
        "    def __str__(self):\n"
        "        if armed: threading.Event().wait(5)\n"
        "        return 'late'\n"
        "def fail(): raise Hang()\n",
    )
    run_cell(ipython, "fail()")
    ipython.user_ns["armed"].append(True)
    with watched(memory=False) as watch:
        shown = run_tool(ipython, "last_error", timeout=0.5)
    assert "in fail" in shown and "Hang" in shown and "late" not in shown
    assert shown.endswith("(The messages could not be read: it took longer than 0.5 s.)")
    assert watch.longest_gap < 5


# 5. One odd variable does not break the listing


def test_a_dead_proxy_a_key_that_is_not_a_string_and_a_function_do_not_break_the_listing(
    ipython: Any,
) -> None:
    run_cell(
        ipython,
        "import weakref\n"
        "class Thing: pass\n"
        "thing = Thing()\n"
        "proxy = weakref.proxy(thing)\n"
        "del thing\n"
        "def helper(): pass\n"
        "count = 3",
    )
    ipython.user_ns[7] = "seven"
    listed = run_tool(ipython, "list_notebook_variables").splitlines()
    assert listed == [
        "Thing: type",
        "count: int = 3",
        "helper: function",
        "proxy: ProxyType",
        "(1 entry of the namespace skipped: not named by a string.)",
    ]
    assert run_tool(ipython, "describe_variable", name="proxy").startswith(
        "proxy: ProxyType\n<weakproxy at 0x"
    )
    assert isinstance(ipython.user_ns["proxy"], weakref.ProxyType)


# 6. No preview copies a huge value


def big_bytes(ipython: Any) -> tuple[str, dict[str, Any]]:
    ipython.user_ns["blob"] = bytes(50 * MB)  # calloc'ed: no page is touched until read
    return "describe_variable", {"name": "blob"}


def transposed_array(ipython: Any) -> tuple[str, dict[str, Any]]:
    import numpy as np

    ipython.user_ns["grid"] = np.zeros((5000, 5000)).T  # 200 MB, not contiguous
    return "describe_variable", {"name": "grid"}


def huge_message(ipython: Any) -> tuple[str, dict[str, Any]]:
    try:
        raise ValueError("x" * (100 * MB))
    except ValueError as exc:
        sys.last_value = exc
    return "last_error", {}


@pytest.mark.usefixtures("no_fork")
@pytest.mark.parametrize("make", [big_bytes, transposed_array, huge_message])
def test_no_preview_grows_the_kernels_memory_by_64_mb(ipython: Any, make: Any) -> None:
    tool, arguments = make(ipython)
    with watched() as watch:
        shown = run_tool(ipython, tool, **arguments)
    assert len(shown) <= 4000
    assert watch.peak_growth < 64 * MB


# 7. A repr that holds the GIL


def gil_holder_count(seconds: float) -> int:
    """How many numbers above 2**62 `sum()` adds in about `seconds`, measured here: a C loop
    that never releases the GIL (above 2**62 every addition takes the same, slow, path)."""
    started = time.perf_counter()
    sum(range(BIG, BIG + 1_000_000))
    return int(1_000_000 * seconds / (time.perf_counter() - started))


def test_a_repr_that_holds_the_gil_does_not_freeze_the_kernel(ipython: Any) -> None:
    limit = 1.0
    n = gil_holder_count(4 * limit)
    run_cell(
        ipython,
        f"class Holder:\n    def __repr__(self): return str(sum(range({BIG}, {BIG + n})))\n"
        "holder = Holder()",
    )
    with watched(memory=False) as watch:
        shown = run_tool(ipython, "describe_variable", timeout=limit, name="holder")
    assert watch.longest_gap < limit
    assert shown == "holder: Holder\n(could not show its contents: it took longer than 1 s)"


def test_stuck_previews_do_not_refuse_the_ones_after_them(ipython: Any) -> None:
    release = threading.Event()
    ipython.user_ns["release"] = release
    run_cell(
        ipython,
        "class Stuck:\n    def __repr__(self): release.wait(30); return 'late'\n"
        "stuck = Stuck()\nsmall = [1, 2]",
    )
    try:
        stuck = [run_tool(ipython, "describe_variable", timeout=0.3, name="stuck") for _ in "abc"]
        after = run_tool(ipython, "describe_variable", name="small")
    finally:
        release.set()
    # The limit named is what was left of the call's 0.3 s when the preview started: on a busy
    # machine a few milliseconds have gone ("0.29 s").
    for text in stuck:
        head, _, limit = text.removesuffix(" s)").partition("it took longer than ")
        assert head == "stuck: Stuck\n(could not show its contents: "
        assert 0 < float(limit) <= 0.3
    assert after == "small: list, length 2\n[1, 2]"


def test_a_repr_that_allocates_gigabytes_fails_in_its_own_process(ipython: Any) -> None:
    run_cell(
        ipython,
        "class Greedy:\n    def __repr__(self): return str(len(bytes(3 << 30)))\ngreedy = Greedy()",
    )
    assert run_tool(ipython, "describe_variable", name="greedy") == (
        "greedy: Greedy\n(could not show its contents: MemoryError)"
    )

"""What the saved transcript sends to the browser per turn as a session grows (issue 21).

A scripted session of 200 turns through `ChatUI` against the test server (in this process:
bytes are counted, nothing is timed). The chat is displayed in a real IPython shell whose
display publisher records what a kernel would publish, and its widgets talk through a recording
comm that serialises every message as a kernel would; a front end with a notebook document
(JupyterLab, Notebook 7) has said hello, as its code does when it loads. Each turn is a
question of about 200 characters and a markdown reply of about 1,500.

After turns 1, 50 and 200: the bytes that turn's transcript traffic took (display updates and
the saved copy's comm messages, as JSON), against the whole transcript sent twice, which is
what each turn cost before (a display update and the saved copy's synced trait, each carrying
all of the newest 200 messages). Target: turn 200 within 2x turn 1. Also: what a front end
that loads at turn 200 (a reload, another tab) receives once, and what a turn costs where no
front end keeps the notebook (nbclient, VS Code: the display update alone). The live widget's
own traffic is `streaming_overhead.py`'s. `main()` returns the table rows as dicts for
`bench/run_all.py`. Figures only, never an assertion.

    python bench/transcript_bytes.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import harness
import openai
from fakeserver import FakeServer, Reply
from harness import Figure, temporary_directory
from helpers import RecordingComm, from_front_end, recording_comms, transcript_bytes
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from traitlets.config import Config

from nbchat.config import Settings
from nbchat.store.store import Store
from nbchat.ui import ChatUI

TURNS = 200
MEASURED = (1, 50, 200)
TARGET_GROWTH = 2.0
QUESTION = "How does the loader in `reader_{0}.py` treat dates written day first, and why? "
REPLY_PARAGRAPH = (
    "The loader calls `parse_dates` with `dayfirst=True`, which reads 13/04/2023 correctly "
    "but turns 04/05/2023 into the fifth of April. "
)


def question(turn: int) -> str:
    return (QUESTION.format(turn) * 3)[:200]


def reply(turn: int) -> str:
    body = "\n\n".join(f"- step {i}: {REPLY_PARAGRAPH}" for i in range(7))
    return f"### Turn {turn}\n\n{body}\n\n```python\nframe = load(path_{turn}, tz='UTC')\n```"


@contextmanager
def shell(workdir: Path) -> Iterator[CapturingDisplayPublisher]:
    """A real IPython shell whose display publisher records each output and update."""
    earlier = os.environ.get("IPYTHONDIR")
    os.environ["IPYTHONDIR"] = str(workdir / "ipython")  # not the user's profile
    publisher = CapturingDisplayPublisher()
    config = Config()
    config.HistoryManager.hist_file = ":memory:"  # nothing left to write when the dir is gone
    InteractiveShell.instance(config=config).display_pub = publisher
    try:
        yield publisher
    finally:
        InteractiveShell.clear_instance()
        if earlier is None:
            del os.environ["IPYTHONDIR"]
        else:
            os.environ["IPYTHONDIR"] = earlier


def measure(workdir: Path) -> dict[str, Any]:
    """Bytes per measured turn, the whole transcript's HTML then, and a reload's bytes."""
    figures: dict[str, Any] = {"turns": {}}
    with shell(workdir) as publisher, recording_comms(), FakeServer() as server:
        settings = Settings(
            base_url=server.url + "/v1",
            home=workdir / "home",
            workspace=workdir,
            context_token_threshold=10**9,  # the whole session stays: nothing is compacted
        )
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="bench", max_retries=0)
        ui = ChatUI(settings, store=Store(workdir / "transcript.db"), client=client)
        try:
            display(ui)  # type: ignore[no-untyped-call]
            saved = ui.transcript.saved
            assert saved is not None
            ids = (ui.transcript.display_id, saved.comm.comm_id)
            from_front_end(saved, {"kind": "hello", "document": True})
            for turn in range(1, TURNS + 1):
                before = transcript_bytes(publisher.outputs, *ids)
                server.enqueue(Reply(text=reply(turn)))
                ui.send(question(turn))
                if not ui.wait(120):
                    raise RuntimeError(f"turn {turn} failed or did not finish in 2 minutes")
                if turn in MEASURED:
                    sent = transcript_bytes(publisher.outputs, *ids) - before
                    figures["turns"][turn] = (sent, len(json.dumps({"text/html": saved.html})))
            before = transcript_bytes(publisher.outputs, *ids)
            from_front_end(saved, {"kind": "hello", "document": True})  # another page loads
            figures["reload"] = transcript_bytes(publisher.outputs, *ids) - before
            figures["updates"] = sum(1 for output in publisher.outputs if output["update"])
            figures["messages"] = len(RecordingComm.custom)
        finally:
            ui.close()
    return figures


def figures(measured: dict[str, Any]) -> list[Figure]:
    turns = measured["turns"]
    rows = [
        Figure(
            f"transcript bytes sent for turn {turn}",
            f"{sent:,}",
            f"{2 * whole:,} the whole transcript twice (before)",
            f"{sent / (2 * whole):.3f}",
        )
        for turn, (sent, whole) in sorted(turns.items())
    ]
    first, last = turns[min(turns)][0], turns[max(turns)][0]
    growth = last / first
    rows.append(
        Figure(
            f"transcript bytes: turn {max(turns)} against turn {min(turns)}",
            f"{last:,}",
            f"{first:,}",
            f"{growth:.2f}",
            f"<= {TARGET_GROWTH}",
            growth <= TARGET_GROWTH,
        )
    )
    whole = turns[max(turns)][1]
    rows += [
        Figure(
            f"a front end that loads at turn {max(turns)} (a reload): sent once",
            f"{measured['reload']:,}",
            f"{whole:,} the whole transcript",
            f"{measured['reload'] / whole:.2f}",
        ),
        Figure(
            f"a turn where no front end keeps the notebook (nbclient, VS Code), turn {max(turns)}",
            f"{whole:,} (the display update)",
        ),
        Figure(
            f"display updates sent in the session with the notebook kept ({TURNS} turns)",
            f"{measured['updates']}",
        ),
    ]
    return rows


def main() -> list[dict[str, Any]]:
    """Run the scripted session; the table rows as dicts."""
    with temporary_directory("nbchat-transcript-") as workdir:
        measured = measure(workdir)
    return [figure.as_dict() for figure in figures(measured)]


if __name__ == "__main__":
    harness.print_figures("Saved transcript: bytes per turn (issue 21)", main())

"""The transcript's saved copy: the transcript output carries its key in its metadata, and the
model-only `SavedCopy` widget carries the same key and the current transcript, turn by turn,
for the front-end code that writes it into the notebook (checked in the real browser by
tests/test_browser_tools.py and tests/test_notebook7.py)."""

from __future__ import annotations

from typing import Any

import openai
from fakeserver import FakeServer, Reply
from helpers import recording_comms
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.display import display

from nbchat.config import Settings
from nbchat.store.store import Store
from nbchat.ui import ChatUI
from nbchat.ui.savedcopy import ESM, METADATA_KEY


def test_the_saved_copy_follows_the_transcript_output_by_the_key_in_its_metadata(
    shell: CapturingDisplayPublisher, store: Store, make_settings: Any
) -> None:
    settings: Settings = make_settings(context_token_threshold=50_000)
    with recording_comms(), FakeServer() as server:
        server.enqueue(Reply(text="The answer is MARKER-7."))
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        ui = ChatUI(settings, store=store, client=client)
        try:
            display(ui)
            _widget, transcript = shell.outputs
            key = transcript["transient"]["display_id"]
            saved = ui.transcript.saved
            assert saved is not None
            assert transcript["metadata"] == {METADATA_KEY: key}
            assert (saved.key, saved.html) == (key, transcript["data"]["text/html"])

            ui.send("hello there")
            assert ui.wait(20)
            update = shell.outputs[-1]
            assert update["update"] is True
            assert update["metadata"] == {METADATA_KEY: key}
            assert saved.html == update["data"]["text/html"]
            assert "hello there" in saved.html and "MARKER-7" in saved.html
        finally:
            ui.close()
    assert saved.comm is None  # closed with the chat


def test_the_front_end_code_looks_for_the_same_metadata_key() -> None:
    assert f'const KEY = "{METADATA_KEY}";' in ESM
    assert "export default { initialize };" in ESM

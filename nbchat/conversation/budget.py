"""`Budget`: one conversation's model server connection, token budget and compaction engine.

The connection (and with it the server's window, which sets the budget when no threshold is
configured) is made on first need, never at construction, so a widget can show its meter
before any server answers. The engine is built once the budget is known and rebuilt after a
model switch. On connecting, the configured model name is checked against the names the server
lists (`nbchat.llm.endpoint`); on llama.cpp, which answers under any name, `on_model` is told
the name really served, so a script records it exactly as the widget does. It also says how
much of that budget one tool result may take (`tool_output_limit`).

Must not: store rows or yield events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai

from nbchat.compaction.engine import CompactionEngine
from nbchat.compaction.result import Summariser
from nbchat.config import Settings
from nbchat.errors import ContextOverflowError, ServerUnavailableError
from nbchat.history import CHARS_PER_TOKEN, estimate_tokens, request_overhead_tokens
from nbchat.llm.endpoint import Connection, ModelCheck, connect, sentence, unreachable

__all__ = ["TOOL_OUTPUT_SHARE", "Budget"]

# One tool result takes at most this share of the trigger: a search that matches everything
# must not push the next request over the trigger on its own (a 20,000-character result is
# ~6,700 tokens, more than the embedded model's whole trigger of 5,376).
TOOL_OUTPUT_SHARE = 4


class Budget:
    """Connection, threshold, engine and token counts for one conversation."""

    def __init__(
        self,
        settings: Settings,
        tool_schemas: Callable[[], list[dict[str, Any]]],  # those a request carries
        client: openai.OpenAI | None = None,
        *,
        summariser: Summariser | None = None,
        on_model: Callable[[str], None] | None = None,
        system_prompt: Callable[[], str] | None = None,
    ) -> None:
        self.settings = settings
        self._on_model = on_model
        self._system_prompt = system_prompt
        self.model_check: ModelCheck | None = None  # the configured name's verdict, once known
        self._summariser = summariser
        self._tool_schemas = tool_schemas
        self._client = client
        self._connection: Connection | None = None
        self._engine: CompactionEngine | None = None

    def use_settings(self, settings: Settings) -> None:
        """New settings (e.g. another model): the engine is rebuilt on next use."""
        self.settings = settings
        self._engine = None

    @property
    def connection(self) -> Connection | None:
        """The connection made so far, if any (reading it never connects)."""
        return self._connection

    def connect(
        self, *, start: bool | None = None, progress: Callable[[str], None] | None = None
    ) -> Connection:
        """Connect now (starting the embedded model when `start`); later calls reuse it."""
        if self._connection is None:
            self._connection = connect(
                self.settings, client=self._client, start=start, progress=progress
            )
            self._adopt_served_model(self._connection)
        return self._connection

    def _adopt_served_model(self, connection: Connection) -> None:
        """Keep the verdict on the configured name; on a server that answers under any name,
        hand `on_model` the name it really serves."""
        self.model_check = check = connection.check_model(self.settings)
        if check.model != self.settings.model and self._on_model is not None:
            self._on_model(check.model)

    def lost(self, error: ServerUnavailableError) -> ServerUnavailableError:
        """The server stopped answering: the error to show, with what to do for where its URL
        came from. An embedded one is forgotten, so the next request finds (or starts) it
        again."""
        connection = self._connection
        if connection is None:
            return error  # raised while connecting, which said what to do
        if not connection.embedded:
            if self._client is not None:
                return ServerUnavailableError(
                    f"Nothing answers at {connection.base_url} (the client given to the chat). "
                    "Start that server, or give the chat a client for one that runs."
                )
            return ServerUnavailableError(sentence(unreachable(self.settings, connection.base_url)))
        self._connection = self._engine = None
        return ServerUnavailableError(
            f"The embedded model server at {connection.base_url} stopped. Start it again with "
            "the Start button or `nbchat serve-model` (or set NBCHAT_AUTOSTART=1 to restart it "
            "automatically), then resend."
        )

    def sent_prompt(self) -> str:
        """The system prompt as requests send it: `system_prompt()` when given (the settings'
        prompt with the workspace overview), else the settings' own."""
        return self.settings.system_prompt if self._system_prompt is None else self._system_prompt()

    @property
    def engine(self) -> CompactionEngine:
        if self._engine is None:
            budget = self.settings.replace(context_token_threshold=self.threshold)
            self._engine = CompactionEngine.from_settings(
                budget,
                client=self.connect().client,
                system_prompt=self.sent_prompt(),
                tool_schemas=self._tool_schemas(),
                summariser=self._summariser,
            )
        else:
            if self._engine.system_prompt != (prompt := self.sent_prompt()):
                self._engine.system_prompt = prompt  # the overview follows the workspace's listing
            if list(self._engine.tool_schemas) != (schemas := self._tool_schemas()):
                self._engine.tool_schemas = tuple(
                    schemas
                )  # MCP servers started, or what is offered changed
        return self._engine

    @property
    def threshold(self) -> int:
        """The token budget: the setting, else the server's window minus the reply."""
        if self.settings.context_token_threshold is not None:
            return self.settings.context_token_threshold
        return self.connect().threshold

    def tool_output_limit(self) -> int:
        """How many characters one tool result may hold: a `TOOL_OUTPUT_SHARE` of the trigger
        (in the characters the len/3 estimate counts), never more than the setting."""
        trigger = int(self.threshold * self.settings.trigger_factor)
        share = trigger // TOOL_OUTPUT_SHARE * CHARS_PER_TOKEN
        return max(1, min(self.settings.tool_output_limit, share))

    def threshold_if_known(self) -> int:
        """The budget without contacting a server (the default until connected)."""
        if self._connection is not None:
            return self._connection.threshold
        return self.settings.offline_threshold()

    def overhead_tokens(self) -> int:
        """What every request spends besides its rows: the system prompt as sent (with the
        workspace overview) and the tool schemas (counted as the engine counts them, without
        needing a connection)."""
        return request_overhead_tokens(self.sent_prompt(), self._tool_schemas())

    def check_fits(self, text: str) -> None:
        """Refuse, before it is sent, a message that cannot stay whole in what the model sees:
        with the system prompt and the tool descriptions it is bigger than the whole budget
        (compaction keeps the latest message whole, so it must fit beside them)."""
        tokens = estimate_tokens(text)
        overhead = self.overhead_tokens()
        if tokens + overhead > self.threshold:
            beside = f" beside the system prompt and tools ({overhead:,})" if overhead else ""
            raise ContextOverflowError(
                f"Your message is about {tokens:,} tokens, too big{beside} for the whole "
                f"budget ({self.threshold:,}). Shorten it, or save it to a file in the "
                "workspace and ask the model to read the parts it needs.",
                prompt_tokens=tokens + overhead,
                context_size=self.threshold,
            )

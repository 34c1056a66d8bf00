"""Every error nbchat raises on purpose, under one base.

```
NbchatError                     anything nbchat raises deliberately; the UI shows it as a notice
├── ConfigError                 a setting is invalid; names the setting and where it came from
├── ModelServerError            the model server failed the request: catch this for all three
│   ├── ServerUnavailableError  no model server answers at the base URL (refused, DNS, timeout)
│   ├── ContextOverflowError    the server refused the request: prompt larger than its window
│   └── ServerError             the server answered with any other error (its message kept)
├── CompactionError             summarisation failed; the history was left as it was
├── ToolError                   a tool could not run (unknown, bad arguments, refused, timed out)
│   └── CellChangedError        a notebook cell changed since it was read; it was left as it is
├── McpError                    an MCP server could not be started, listed or reached (names it)
└── StoreError                  the SQLite store cannot be read or written as asked
    └── SessionLockedError      another kernel holds the writer lease on this session
        └── LeaseLostError      this kernel held the lease, but another kernel took it over
```

Library errors (openai, sqlite3, OSError) stop at the edge module that owns the resource and are
re-raised as one of these with a message that says what happened and what to do. (One more
subclass lives beside the code that raises it and never leaves it: `llm.transport`'s
`RequestCancelledError`, a request whose sockets Stop shut, which `llm/` turns into a stopped
reply.)
"""

from __future__ import annotations

__all__ = [
    "CellChangedError",
    "CompactionError",
    "ConfigError",
    "ContextOverflowError",
    "LeaseLostError",
    "McpError",
    "ModelServerError",
    "NbchatError",
    "ServerError",
    "ServerUnavailableError",
    "SessionLockedError",
    "StoreError",
    "ToolError",
]


class NbchatError(Exception):
    """Base of every error nbchat raises on purpose."""


class ConfigError(NbchatError):
    """A setting has an invalid value."""


class ModelServerError(NbchatError):
    """The model server could not answer the request: unreachable, overflowed or failing.

    A caller that treats every model-server failure alike (retry later, switch servers) catches
    this; the subclasses say which it was.
    """


class ServerUnavailableError(ModelServerError):
    """No model server could be reached."""


class ContextOverflowError(ModelServerError):
    """The request did not fit the model's context window.

    `prompt_tokens` and `context_size` carry the sizes when the server reported them.
    """

    def __init__(
        self, message: str, *, prompt_tokens: int | None = None, context_size: int | None = None
    ) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context_size = context_size


class ServerError(ModelServerError):
    """The model server answered with an error that is not an overflow.

    `status` is the HTTP status when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class CompactionError(NbchatError):
    """Summarising the history failed; nothing was changed."""


class ToolError(NbchatError):
    """A tool call could not be carried out."""


class McpError(NbchatError):
    """An MCP server did not start, answer its handshake, or list its tools; the message names
    the server and says what to check."""


class StoreError(NbchatError):
    """The session store could not do what was asked."""


class SessionLockedError(StoreError):
    """Another process holds the writer lease on the session."""


class LeaseLostError(SessionLockedError):
    """This process held the writer lease, but another one took it over; nothing was written."""


class CellChangedError(ToolError):
    """A notebook cell's source is no longer what the caller read (the user edited it, or it
    was deleted): nothing was written to it."""

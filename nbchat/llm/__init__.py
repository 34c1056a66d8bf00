"""The HTTP edge to a model server: one streamed chat request turned into typed events.

    client        build the `openai` client, stream one chat request, ask the server's window
    reader        `ReplyReader`: one streamed reply's state while its chunks arrive
    idle          `IdleWatch`: a stream that sends no data (keep-alives only) is given up
    eventlimit    one server-sent event (or line) without an end is refused at its byte bound
    stream        the events a streamed reply is made of (deltas, tool calls, usage, finish)
    servererrors  openai/httpx failures translated into `NbchatError`s that say what to do
    fallback      a tool call a small model wrote as plain JSON text, and forced calls
    correction    the fallback's stream closed at a whole call, and a second chance for a
                  call that does not validate
    endpoint      which server a conversation talks to (the embedded one found or started),
                  and where its requests go (`destination_of`: local or the host)
    modelcheck    the model names the server serves (`/v1/models`)

Must not: import tools, the store, compaction or widgets (import-linter checks it).
"""

"""The HTTP edge to a model server: one streamed chat request turned into typed events.

    client        build the `openai` client, stream one chat request, ask the server's window
    reader        the events a streamed reply is made of (deltas, tool calls, usage, finish);
                  `ReplyReader`: one streamed reply's state while its chunks arrive; the stream
                  closed at a whole call and a second chance for one that does not validate
    textcalls     a tool call a small model wrote as plain JSON text (the fallback): recognised,
                  checked, explained when it does not validate; forced calls, words-only grammar
    servererrors  openai/httpx failures translated into `NbchatError`s that say what to do
    transport     the HTTP transport: a request's sockets shut from another thread (Stop); a
                  stream that sends no data (keep-alives only) is given up (`IdleWatch`); one
                  server-sent event (or line) without an end is refused at its byte bound
    firststep     a small model's first step, weighed on its first token (answer or which tool)
    endpoint      which server a conversation talks to (the embedded one found or started),
                  where its requests go (`destination_of`: local or the host), and the model
                  names it serves (`/v1/models`)

Must not: import tools, the store, compaction or widgets (import-linter checks it).
"""

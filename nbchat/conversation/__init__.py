"""One session's whole round-trip, synchronous and UI-free.

    loop         `Conversation`: send a message, stream the reply, run tools, compact, store
    reply        one reply: the request built, streamed, recorded; an overflow's one retry
    toolround    the tools a reply called, run and their results stored
    autocompact  the compactions a turn makes on its own (budget, overflow), the over-budget note
    steps        what a turn's parts share: `TurnParts`, saving rows, posting a notice
    budget       the model server connection, token budget and compaction engine of one loop
    session      which session, its active rows, the writer lease and every write
    events       what a turn reports as it happens (the events `Conversation.send` yields)
    turn         one turn's small state: the round, the streamed reply, the failure guard
    archivetool  the tool that reads a pruned tool output back from the store
    warmup       the prompts the embedded server was asked to cache, each sent once
    prepare      the next compaction prepared while the user reads, used at the trigger
    steer        compaction the user steers: preview, accept (or edit), undo the latest
    inspect      a recorded request rebuilt exactly as sent, in parts with token counts

Must not: import widgets.
"""

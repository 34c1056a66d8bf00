"""One session's whole round-trip, synchronous and UI-free.

    loop         `Conversation`: send a message, stream the reply, run tools, compact, store
    reply        one reply: the request built, streamed, recorded; an overflow's one retry; a
                 small model's answer asked again when it names nothing the results show; the
                 tool that reads a pruned tool output back from the store
    grounding    whether an answer after a tool round names anything its results show
    routing      a small model's first step in a round: what it is asked on, how its choice
                 is weighed, where a misaimed call is turned
    turn         the rest of a turn: its small state (the streamed reply, the failure guard),
                 what its parts share (`TurnParts`, saving rows, posting a notice), the tool
                 round, and the compactions a turn makes on its own (budget, overflow)
    budget       the model server connection, token budget and compaction engine of one loop
    session      which session, its active rows, the writer lease and every write; rewinding
                 to an earlier user message, the notebook with it
    events       what a turn reports as it happens (the events `Conversation.send` yields)
    warmup       the prompts the embedded server was asked to cache, each sent once
    prepare      the next compaction prepared while the user reads, used at the trigger
    steer        compaction the user steers: preview, accept (or edit), undo the latest
    requestview  a recorded request rebuilt exactly as sent, in parts with token counts

Must not: import widgets.
"""

"""Keeping every request inside the token budget without losing what matters.

Compaction is plain steps around one value: `prepare(history, settings) → Preparation`, then
`compact(preparation, writer) → CompactionResult` (the one model call); the store write is the
caller's (`nbchat.conversation.session.apply_compaction`).

    engine           `CompactionEngine`: the original API, a thin front over the steps
    steps            `CompactionSettings`, `Preparation`, `prepare`, `reuse`: all up to the
                     summary, and the result built from it
    summarystep      `compact`: the one step that asks the summariser
    result           `CompactionResult` and its `Edit` and `SummaryUsage`: what a compaction
                     did; the summariser seam (`Summariser`, `SummaryReply`)
    cacheform        where a history is cut (rows to summarise, tail kept verbatim), and the
                     summary asked as the chat's own prefix plus one instruction
    prune            what is done by code: old tool outputs become placeholders; the brief
                     transcript (one short line a message) a small summariser reads; the key
                     lines of the old rows kept word for word beside the summary
    facts            what code keeps across a compaction (files, errors, the user's words), and
                     the user's latest message, carried whole through a cut inside its turn
    findings         what the facts find in rows by code: a tool output's error headlines,
                     the notebook variables and cells referred to
    prompts          what the summariser is asked and how its answer is read
    echoes           a summary that copies its instruction or repeats itself, found
    modelsummariser  `OpenAISummariser`: the one place compaction calls a model server (kept
                     apart so importing compaction loads neither openai nor the client)
    writer           `SummaryWriter`/`write_digest`: a summary asked, chunk by chunk

Must not: import the conversation loop, the store or widgets. Pure except `modelsummariser`
(HTTP) and the summariser calls `summarystep.compact` makes through the writer it is handed.
"""

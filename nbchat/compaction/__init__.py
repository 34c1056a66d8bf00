"""Keeping every request inside the token budget without losing what matters.

Compaction is plain steps around one value: `prepare(history, settings) → Preparation`, then
`compact(preparation, writer) → CompactionResult` (the one model call); the store write is the
caller's (`nbchat.conversation.session.apply_compaction`).

    engine           `CompactionEngine`: the original API, a thin front over the steps
    steps            `CompactionSettings`, `Preparation`, `prepare`, `reuse`, `compact`
    result           `CompactionResult` and its `Edit` and `SummaryUsage`: what a compaction did
    split            where a history is cut: rows to summarise, tail kept verbatim
    prune            the cheap layer: old tool outputs become placeholders
    facts            what code keeps across a compaction (files, errors, the user's words)
    notebookfacts    the notebook variables and cells referred to, for the facts
    latest           the user's latest message, carried whole through a cut inside its turn
    prompts          what the summariser is asked and how its answer is read
    cacheform        the summary asked as the chat's own prefix plus one instruction
    summariser       the summariser seam (`Summariser`, `SummaryReply`)
    writer           `SummaryWriter`/`write_digest`: a summary asked, chunk by chunk
    modelsummariser  `OpenAISummariser`: the one place compaction calls a model server

Must not: import the conversation loop, the store or widgets. Pure except `modelsummariser`
(HTTP) and the summariser calls `steps.compact` makes through the writer it is handed.
"""

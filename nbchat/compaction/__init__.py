"""Keeping every request inside the token budget without losing what matters.

    engine           `CompactionEngine`: estimate, decide, and the layered compaction
    sizing           the engine's sizes: trigger, overhead, checkpoint cap, kept tail
    layers           the engine's prune and summary layers and its summary call
    prepared         the engine's reuse of a checkpoint prepared in the background
    cacheform        the summary asked as the chat's own prefix plus one instruction
    split            where a history is cut: rows to summarise, tail kept verbatim
    prune            the cheap layer: old tool outputs become placeholders
    facts            what code keeps across a compaction (files, errors, the user's words)
    notebookfacts    the notebook variables and cells referred to, for the facts
    latest           the user's latest message, carried whole through a cut inside its turn
    prompts          what the summariser is asked and how its answer is read
    summariser       the summariser seam (`Summariser`, `SummaryReply`)
    modelsummariser  `OpenAISummariser`: the one place compaction calls a model
    writer           `SummaryWriter`/`write_digest`: a transcript summarised chunk by chunk
    result           `CompactionResult` and `apply_compaction`, which stores it
    reuse            a summary prepared earlier, rebuilt into the compaction the trigger asks for

Must not: import the conversation loop or widgets. Pure except `modelsummariser` (HTTP) and
`apply_compaction` (the store it is handed).
"""

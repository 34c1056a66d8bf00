"""Helpers for notebook cells: a demo session and a session's token usage as a chart.

    demo      a realistic tool-using session built the same way every time (its figures
              scripted), and its script: the demo project's files and every turn of it; the
              acting demo's helpers: a card's question as text, a tool's newest result, what a
              compaction keeps of the assistant's acts
    plots     prompt tokens per request as inline SVG, with compactions marked

Must not: be imported by the package below it.
"""

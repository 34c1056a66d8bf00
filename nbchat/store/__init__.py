"""Every session, row, compaction and request record, in one SQLite file.

    store       `Store`: the public API (sessions, rows, compactions, requests, export)
    sqlite      per-thread SQLite connections, migrated on first use, errors classified
    rowsql      the row-level SQL, run inside the caller's transaction
    records     the stored values (`SessionInfo`, `StoredRow`, `CompactionRecord`)
    migrations  the schema as named, ordered migrations (sqlite-utils `Migrations`)
    lease       the writer lease: one process writes a session, the others read
    heartbeat   the thread that renews a store's leases while it holds them
    export      a session's transcript as Markdown
    undo        undoing the latest compaction: its rows back exactly, its record stamped
    export      a session's transcript (and the requests it sent) as Markdown
    requests    request records: what each chat request sent, to rebuild it exactly

Must not: import the HTTP edge, tools, compaction or widgets.
"""

"""Every session, row, compaction and request record, in one SQLite file.

    store       `Store`: the public API (sessions, rows, compactions, requests, export)
    sqlite      per-thread SQLite connections, migrated on first use, errors classified
    migrations  the schema as named, ordered migrations (sqlite-utils `Migrations`)
    catalog     the sessions table's SQL, reading a session's rows back, and a session's
                transcript as Markdown or JSON with the requests it sent (its export)
    rowsql      the stored values (`SessionInfo`, `StoredRow`, `CompactionRecord`), the
                row-level SQL (inserting, archiving, compacting) and the assistant's notebook
                changes (for a rewind), in the caller's transaction
    lease       the writer lease (one process writes a session, the others read); the leases
                one store took, renewed by a heartbeat thread, confirmed by each write
    undo        undoing the latest compaction: its rows back exactly, its record stamped
    requests    request records: what each chat request sent, to rebuild it exactly

Must not: import the HTTP edge, tools, compaction or widgets.
"""

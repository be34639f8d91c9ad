"""The PostgreSQL session store: the same events as the JSON Lines store, in a shared database.

Opened by `carryall.sessions.open_store("postgresql://...")` (or `--store`,
`$CARRYALL_STORE`, the config file's `store`); needs `carryall[postgres]`
(psycopg 3). Several workers on several hosts can continue one
conversation: whoever picks it up opens it and records.

Tables (all named `carryall_*`, so a store can share a database):

    carryall_schema     the schema version carryall created or migrated to
    carryall_sessions   one row per session: its header (the meta as the
                        transcript's line 1), title, turns, last time, and
                        `seq`, the sequence number of its last event
    carryall_events     the events: (session, seq) is the key, `body` is the
                        transcript event line, `token` names the write
    carryall_blobs      image bytes, stored once by content hash
    carryall_blob_refs  which session refers to which blob (for `rm`, `gc`)
    carryall_messages   the current history's text, for full-text search
    carryall_indexed    for each session, the last event `carryall_messages`
                        holds (no row: none)

Every write is one transaction that holds the session row's lock: it reads
the events other writers added (by `seq`), makes the append-or-rewrite
decision, and inserts the next `seq`. Two writers therefore never
interleave, and the primary key refuses a conflicting append even from a
writer that skipped the lock. A failed write rolls back whole, so the
session is as it was. A lost connection or a restarting server is retried
for a bounded time; the write's `token` says on reconnecting whether the
lost commit had in fact landed, so a retry never records an event twice.

Recall is PostgreSQL full-text search (`english` stemming) over
`carryall_messages`. A recording never writes it, so an append is one
statement over the session row and the event, with no text to parse or
index. Before a search, the index catches up with every session whose
`seq` is past its `carryall_indexed` mark, reading only the events after
it (a rewrite among them: the whole session), so a search still finds
every recorded message. A query is the person's words taken literally
(`plainto_tsquery` over the words `carryall.sessions.recall` splits), and
hits are the same `Hit` values with snippets marked the same way.
"""

from carryall.sessions.postgres.recall import INDEXED_BYTES, PostgresRecall
from carryall.sessions.postgres.schema import SCHEMA_VERSION
from carryall.sessions.postgres.store import PostgresSession, PostgresStore, display_url

__all__ = [
    "INDEXED_BYTES",
    "SCHEMA_VERSION",
    "PostgresRecall",
    "PostgresSession",
    "PostgresStore",
    "display_url",
]

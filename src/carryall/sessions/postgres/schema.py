"""The PostgreSQL store's tables: the statements of each schema version, and migrating."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from carryall.errors import TranscriptError

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "migrate"]

SCHEMA_VERSION = 5
"""The newest schema this carryall creates and reads."""

_LOCK_KEY = 0x63617272  # the advisory lock that serializes schema migrations

# Each entry takes the schema from the version before it to its own.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE carryall_sessions (
            id text PRIMARY KEY,
            created timestamptz NOT NULL,
            header bytea NOT NULL,
            title text,
            turns integer NOT NULL DEFAULT 0,
            updated text NOT NULL,
            seq integer NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE carryall_events (
            session_id text NOT NULL REFERENCES carryall_sessions(id) ON DELETE CASCADE,
            seq integer NOT NULL CHECK (seq > 0),
            token uuid NOT NULL UNIQUE,
            body bytea NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        """CREATE TABLE carryall_blobs (
            sha256 text PRIMARY KEY,
            data bytea NOT NULL,
            stored timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
        """CREATE TABLE carryall_blob_refs (
            session_id text NOT NULL REFERENCES carryall_sessions(id) ON DELETE CASCADE,
            sha256 text NOT NULL,
            PRIMARY KEY (session_id, sha256)
        )""",
        "CREATE INDEX carryall_blob_refs_sha ON carryall_blob_refs (sha256)",
        """CREATE TABLE carryall_messages (
            session_id text NOT NULL REFERENCES carryall_sessions(id) ON DELETE CASCADE,
            idx integer NOT NULL,
            role text NOT NULL,
            time text NOT NULL,
            body text NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED,
            PRIMARY KEY (session_id, idx)
        )""",
        "CREATE INDEX carryall_messages_tsv ON carryall_messages USING gin (tsv)",
    ),
    # The error of the last request when the last event kept a prompt that failed.
    2: ("ALTER TABLE carryall_sessions ADD COLUMN failed text",),
    # A title or an error is whatever was typed or said, a NUL included, which
    # `text` cannot hold: both are kept as their UTF-8 bytes.
    3: (
        "ALTER TABLE carryall_sessions"
        " ALTER COLUMN title TYPE bytea USING convert_to(title, 'UTF8'),"
        " ALTER COLUMN failed TYPE bytea USING convert_to(failed, 'UTF8')",
    ),
    # The search index is fed by the next search, not by each recording:
    # the mark of what it holds, every session indexed up to its last event.
    4: (
        """CREATE TABLE carryall_indexed (
            session_id text PRIMARY KEY REFERENCES carryall_sessions(id) ON DELETE CASCADE,
            seq integer NOT NULL
        )""",
        "INSERT INTO carryall_indexed (session_id, seq) SELECT id, seq FROM carryall_sessions",
    ),
    # A write's token is looked for only in its own session, after the events it
    # knew (through the key): an index of its own cost every append an insert.
    5: ("ALTER TABLE carryall_events DROP CONSTRAINT IF EXISTS carryall_events_token_key",),
}


def migrate(conn: psycopg.Connection[Any], where: str) -> None:
    """Create the schema, or bring an older one up to `SCHEMA_VERSION`, under an advisory lock."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS carryall_schema (version integer NOT NULL)")
        row = conn.execute("SELECT max(version) FROM carryall_schema").fetchone()
        version = row[0] if row is not None and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise TranscriptError(
                f"session store {where}: schema version {version} is newer than this "
                f"carryall's ({SCHEMA_VERSION}); upgrade carryall"
            )
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[step]:
                conn.execute(statement)
            conn.execute("INSERT INTO carryall_schema (version) VALUES (%s)", (step,))

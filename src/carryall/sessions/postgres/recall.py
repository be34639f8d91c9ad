"""Full-text search over the PostgreSQL store, fed from its events before each search."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from carryall.blocks import Message
from carryall.errors import TranscriptError
from carryall.sessions._transcript import (
    Replay,
    SessionMeta,
    decode_event,
    format_time,
    image_stand_in,
    restore,
)
from carryall.sessions.protocol import SessionInfo
from carryall.sessions.recall import Hit, bounded_words, marked_hit, passage

if TYPE_CHECKING:
    import psycopg

__all__ = ["INDEXED_BYTES", "PostgresRecall", "index_rows", "mark_indexed"]

INDEXED_BYTES = 256 * 1024
"""How much of one message's text (UTF-8 bytes, from its start) full-text search takes in."""

_INDEX_KEY = 0x63617273  # with a session id's hash: one catch-up of its index rows at a time
_OPEN, _CLOSE = "\x02", "\x03"
_HEADLINE = f"StartSel={_OPEN}, StopSel={_CLOSE}, MaxWords=16, MinWords=8, MaxFragments=1"

T = TypeVar("T")


class _Searched(Protocol):
    """What the search asks of its store (`PostgresStore` is the one that builds it).

    Named by what it asks rather than by the store's class, so the store
    imports its search and the search never imports the store.
    """

    def list(
        self, *, on_error: Callable[[TranscriptError], None] | None = None
    ) -> builtins.list[SessionInfo]: ...

    def _retrying(self, work: Callable[[psycopg.Connection[Any]], T], failed: str = "") -> T: ...

    def _where(self, session_id: str) -> str: ...

    def _load(
        self, session_id: str, *, keep_versions: bool, images: bool
    ) -> tuple[SessionMeta, Replay, int]: ...


class PostgresRecall:
    """Full-text search over a PostgreSQL store, caught up with the events before each search."""

    def __init__(self, store: _Searched) -> None:
        self.store = store

    def search(
        self,
        query: str,
        *,
        since: datetime | None = None,
        role: str | None = None,
        session: str | None = None,
        limit: int = 20,
        sync: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Hit]:
        """The best-ranked messages containing every word of `query` (see `RecallIndex.search`).

        The index first catches up with what was recorded since the last
        search, whatever `sync` says (recordings never feed it, so without
        that a search would miss them); `progress` hears of each session
        caught up, as `RecallIndex.sync` tells it.
        """
        words = bounded_words(query, limit)
        if not words or limit <= 0:
            return []
        self.sync(progress)
        sql = [
            # Snippets only for the hits kept: ts_headline reparses the text.
            "SELECT s, i, r, t, ts_headline('english', body, q, %s), score FROM (",
            "SELECT m.session_id AS s, m.idx AS i, m.role AS r, m.time AS t, m.body, q,",
            " ts_rank(m.tsv, q) AS score",
            " FROM carryall_messages m, plainto_tsquery('english', %s) q WHERE m.tsv @@ q",
        ]
        args: list[Any] = [_HEADLINE, " ".join(words)]
        if since is not None:
            sql.append(" AND m.time >= %s")
            args.append(format_time(since))
        if role is not None:
            sql.append(" AND m.role = %s")
            args.append(role)
        if session is not None:
            sql.append(" AND m.session_id = %s")
            args.append(session)
        sql.append(" ORDER BY score DESC, m.time DESC LIMIT %s) top ORDER BY score DESC, t DESC")
        args.append(limit)

        def run(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return conn.execute("".join(sql), args).fetchall()

        # Lower ranks first, as FTS5's bm25 gives them.
        return [
            marked_hit(s, i, r, t, marked, -score)
            for s, i, r, t, marked, score in self.store._retrying(run)
        ]

    def reindex(self) -> int:
        """Rebuild every session's index rows from its events; returns the messages indexed."""
        ids = [info.meta.id for info in self.store.list(on_error=lambda exc: None)]
        count = 0
        for session_id in ids:
            _, replay, seq = self.store._load(session_id, keep_versions=False, images=False)

            def rebuild(
                conn: psycopg.Connection[Any],
                sid: str = session_id,
                replay: Replay = replay,
                seq: int = seq,
            ) -> None:
                with conn.transaction():
                    _lock_index(conn, sid)
                    conn.execute("DELETE FROM carryall_messages WHERE session_id = %s", (sid,))
                    index_rows(conn, sid, 0, replay.messages, replay.times)
                    mark_indexed(conn, sid, seq)

            self.store._retrying(rebuild)
            count += len(replay.messages)
        return count

    def sync(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Index every event recorded since the index last caught up, one session at a time.

        Each session is caught up in a transaction of its own, so an
        interrupted catch-up keeps what it finished. `progress(done, total)`
        is called first with 0, then after each session (not at all when
        none was behind).
        """

        def behind(conn: psycopg.Connection[Any]) -> builtins.list[str]:
            return [
                row[0]
                for row in conn.execute(
                    "SELECT s.id FROM carryall_sessions s"
                    " LEFT JOIN carryall_indexed i ON i.session_id = s.id"
                    " WHERE s.seq > coalesce(i.seq, 0) ORDER BY s.id"
                ).fetchall()
            ]

        stale = self.store._retrying(behind)
        if stale and progress is not None:
            progress(0, len(stale))
        for done, session_id in enumerate(stale, 1):

            def catch_up(conn: psycopg.Connection[Any], sid: str = session_id) -> None:
                self._catch_up(conn, sid)

            self.store._retrying(catch_up)
            if progress is not None:
                progress(done, len(stale))

    def flush(self) -> None:
        """Index what was recorded since the last catch-up (`sync`)."""
        self.sync()

    def _catch_up(self, conn: psycopg.Connection[Any], session_id: str) -> None:
        """Bring one session's index rows up to its last event, in one transaction.

        Append events after the mark add their messages where they start;
        anything else among them (a rewrite, a damaged event) indexes the
        whole session again from all its events. Two searches catching up
        one session take turns on an advisory lock; a recording takes none
        of it, and never waits for a search.
        """
        where = self.store._where(session_id)
        with conn.transaction():
            _lock_index(conn, session_id)
            row = conn.execute(
                "SELECT seq FROM carryall_indexed WHERE session_id = %s", (session_id,)
            ).fetchone()
            mark = row[0] if row is not None else 0
            rows = conn.execute(
                "SELECT seq, body FROM carryall_events WHERE session_id = %s AND seq > %s"
                " ORDER BY seq",
                (session_id, mark),
            ).fetchall()
            if not rows:
                return
            appends: builtins.list[Any] = []
            for seq, body in rows:
                try:
                    event = decode_event(bytes(body), where, seq + 1)
                except TranscriptError:
                    appends = []
                    break
                if event.event != "append":
                    appends = []
                    break
                appends.append(event)
            if appends:
                for event in appends:
                    messages = [restore(m, image_stand_in) for m in event.messages]
                    conn.execute(
                        "DELETE FROM carryall_messages WHERE session_id = %s AND idx >= %s",
                        (session_id, event.start),
                    )
                    index_rows(
                        conn, session_id, event.start, messages, [event.time] * len(messages)
                    )
            else:
                replay = Replay(where, image_stand_in)
                every = conn.execute(
                    "SELECT seq, body FROM carryall_events WHERE session_id = %s ORDER BY seq",
                    (session_id,),
                ).fetchall()
                for seq, body in every:
                    replay.apply_line(bytes(body), seq + 1)
                conn.execute("DELETE FROM carryall_messages WHERE session_id = %s", (session_id,))
                index_rows(conn, session_id, 0, replay.messages, replay.times)
            mark_indexed(conn, session_id, rows[-1][0])


def index_rows(
    conn: psycopg.Connection[Any],
    session_id: str,
    first: int,
    messages: Sequence[Message],
    times: Sequence[str],
) -> None:
    """Add the index rows of `messages`, numbering them from `first`."""
    if not messages:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO carryall_messages (session_id, idx, role, time, body)"
            " VALUES (%s, %s, %s, %s, %s)",
            [
                (session_id, first + i, m.role, t, _indexed(passage(m)))
                for i, (m, t) in enumerate(zip(messages, times, strict=True))
            ],
        )


def _lock_index(conn: psycopg.Connection[Any], session_id: str) -> None:
    """Take (until the transaction ends) the lock on one session's index rows."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_INDEX_KEY, session_id))


def mark_indexed(conn: psycopg.Connection[Any], session_id: str, seq: int) -> None:
    """Record that a session's index rows hold its history up to event `seq`."""
    conn.execute(
        "INSERT INTO carryall_indexed (session_id, seq) VALUES (%s, %s)"
        " ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq",
        (session_id, seq),
    )


def _indexed(text: str) -> str:
    """The part of a message's text the index takes: its first `INDEXED_BYTES` of UTF-8.

    A `tsvector` holds at most 1 MiB, so an unbounded message (a pasted log
    of distinct words) would make its event impossible to write; the event
    keeps the whole text, the index its start.
    """
    if len(text) * 4 <= INDEXED_BYTES:
        return text
    return text.encode("utf-8", "replace")[:INDEXED_BYTES].decode("utf-8", "ignore")

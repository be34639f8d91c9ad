"""The PostgreSQL store and its sessions: every write one transaction on the session row's lock."""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import re
import secrets
import threading
import time
import urllib.parse
import uuid
import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack

from carryall.blocks import Downgrade, Message
from carryall.errors import SessionConflict, TranscriptError
from carryall.sessions._core import (
    Extras,
    MissingBlob,
    ReplayedSession,
    SessionInfo,
    blob_loader,
    checked_hash,
    checked_id,
    event_hashes,
    last_used_first,
    new_meta,
    resolve_id,
)
from carryall.sessions._transcript import (
    BlobLoader,
    Replay,
    SessionMeta,
    decode_event,
    decode_header,
    encode_event,
    encode_header,
    format_time,
    has_image,
    image_stand_in,
    now,
    parse_time,
    with_title,
)
from carryall.sessions.postgres.recall import PostgresRecall, index_rows, mark_indexed
from carryall.sessions.postgres.schema import migrate
from carryall.sessions.protocol import NewSession, Plan, RecordKind
from carryall.sessions.redact import Redactor, compile_pattern, configured_redactor
from carryall.usage import RequestUsage

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool


__all__ = ["PostgresSession", "PostgresStore", "display_url"]

T = TypeVar("T")


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401  (checked here, used by the first operation)
    except ImportError:
        raise TranscriptError(
            "a postgresql:// session store needs psycopg 3: pip install 'carryall[postgres]'"
        ) from None
    return psycopg


def display_url(url: str) -> str:
    """A store URL as it may be shown: the password, if any, left out."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}{host}"))


class PostgresStore:
    """Sessions in a PostgreSQL database, with the promises of `carryall.sessions.protocol`.

    `retry_for` bounds, in seconds, how long one operation keeps retrying a
    lost connection or a server that is restarting before it fails with a
    clear error. The schema is created or migrated on first connection.
    Threads that share a store take connections from a pool (`psycopg_pool`),
    so their writes do not wait on each other: it opens `pool_min`
    connections with the first operation and grows, one connection at a
    time while threads wait, to at most `pool_size`. A program that runs N
    threads on one store passes `pool_min=N`, so none of them queues while
    the pool grows; one thread needs one connection, the default.
    """

    def __init__(
        self,
        url: str,
        *,
        redactor: Redactor | None = None,
        retry_for: float = 30.0,
        connect_timeout: float = 5.0,
        pool_size: int = 8,
        pool_min: int = 1,
    ) -> None:
        if not 1 <= pool_min <= pool_size:
            raise ValueError(
                f"PostgresStore: pool_min ({pool_min}) must be at least 1 and at most "
                f"pool_size ({pool_size})"
            )
        self.url = url
        self.retry_for = retry_for
        self.connect_timeout = connect_timeout
        self.pool_size = pool_size
        self.pool_min = pool_min
        self.redactor = redactor if redactor is not None else configured_redactor()
        """What is cut out of every event before it is written."""
        self._pg = _psycopg()
        from psycopg_pool import PoolTimeout

        self._pool_timeout = PoolTimeout
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._closer: Callable[[], object] | None = None
        self._lock = threading.Lock()
        self._recall = PostgresRecall(self)
        try:  # connect now, once: a mistyped URL fails where it is given, at once
            first = self._connect()
        except self._pg.Error as exc:
            raise TranscriptError(
                f"session store {self.location}: cannot connect: {_reason(exc)}"
            ) from None
        first.close()

    @property
    def location(self) -> str:
        """The store's URL, without its password."""
        return display_url(self.url)

    @property
    def recall(self) -> PostgresRecall:
        """Full-text search over every session."""
        return self._recall

    def close(self) -> None:
        """Close every connection (the next operation opens new ones)."""
        with self._lock:
            self._pool = None
            closer, self._closer = self._closer, None
        if closer is not None:
            closer()

    # -- connection ---------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = self._pg.connect(
            self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
        )
        try:
            migrate(conn, self.location)
        except BaseException:
            conn.close()
            raise
        return conn

    def _connections(self) -> psycopg_pool.ConnectionPool[Any]:
        with self._lock:
            if self._pool is None:
                from psycopg_pool import ConnectionPool

                self._pool = ConnectionPool(
                    self.url,
                    kwargs={
                        "autocommit": True,
                        "connect_timeout": max(1, round(self.connect_timeout)),
                    },
                    min_size=self.pool_min,
                    max_size=self.pool_size,
                    timeout=self.retry_for,
                    # A server gone for longer than `retry_for` fails the
                    # operation; the pool itself keeps trying for the next.
                    reconnect_timeout=max(self.retry_for, 60.0),
                    name="carryall",
                    open=True,
                )
                # Closed with the store, in the thread that lets go of it: a
                # pool left to its own collection may be collected in one of
                # its worker threads, which cannot join themselves.
                self._closer = weakref.finalize(self, _close_pool, self._pool)
            return self._pool

    def _retrying(self, work: Callable[[psycopg.Connection[Any]], T], failed: str = "") -> T:
        """Run `work` on a pooled connection (a new one after a lost one) for up to `retry_for` s.

        `work` must be safe to run again: a read, or a transaction that
        checks whether an earlier try of it committed. A connection that was
        lost goes back to the pool broken, and the pool drops it.
        """
        deadline = time.monotonic() + self.retry_for
        pause = 0.05
        tries = 0
        while True:
            tries += 1
            try:
                if tries > 1:
                    # After a lost connection the pool's idle ones may be as
                    # dead (a restarted server): this try takes a new one.
                    with self._pg.connect(
                        self.url,
                        autocommit=True,
                        connect_timeout=max(1, round(self.connect_timeout)),
                    ) as conn:
                        return work(conn)
                # getconn/putconn rather than `pool.connection()`: the
                # connections are autocommit, so the commit that context
                # ends with has nothing to do but costs an append a wait.
                pool = self._connections()
                conn = pool.getconn(timeout=max(0.1, deadline - time.monotonic()))
                try:
                    return work(conn)
                finally:
                    pool.putconn(conn)
            except (self._pg.OperationalError, self._pool_timeout) as exc:
                if isinstance(exc, self._pg.OperationalError) and not _lost_connection(exc):
                    raise TranscriptError(
                        f"session store {self.location}: {_reason(exc)}{failed}"
                    ) from None
                if time.monotonic() + pause > deadline:
                    raise TranscriptError(
                        f"session store {self.location}: cannot reach the server "
                        f"after {tries} tries over {self.retry_for:g}s: {_reason(exc)}"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
            except self._pg.Error as exc:
                raise TranscriptError(
                    f"session store {self.location}: {_reason(exc)}{failed}"
                ) from None

    # -- sessions -----------------------------------------------------------

    def create(self, **fields: Unpack[NewSession]) -> PostgresSession:
        """Start a new, empty session and write its row (the same meta as the JSONL store)."""
        created = datetime.now(UTC)
        for _ in range(16):
            session_id = f"{created:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
            meta = new_meta(self.redactor, created, session_id, fields)
            if self._insert_session(meta, meta.title, 0, format_time(created), 0):
                replay = Replay(self._where(meta.id), self._blob_loader(meta.id))
                return PostgresSession(self, meta, replay, 0)
        raise TranscriptError(f"cannot pick a fresh session id in {self.location}")

    def _insert_session(
        self, meta: SessionMeta, title: str | None, turns: int, updated: str, seq: int
    ) -> bool:
        header = encode_header(meta)[:-1]

        def insert(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                cur = conn.execute(
                    "INSERT INTO carryall_sessions"
                    " (id, created, header, title, turns, updated, seq)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (meta.id, meta.created, header, _utf8(title), turns, updated, seq),
                )
                return cur.rowcount == 1

        return self._retrying(insert)

    def open(self, session_id: str) -> PostgresSession:
        """Open a session by id (or a unique prefix of one) with its current history loaded."""
        full = self.resolve(session_id)
        meta, replay, seq = self._load(full, keep_versions=False, images=True)
        return PostgresSession(self, meta, replay, seq)

    def list(
        self, *, on_error: Callable[[TranscriptError], None] | None = None
    ) -> builtins.list[SessionInfo]:
        """Every session, the one written last first, from the session rows alone."""

        def rows(conn: psycopg.Connection[Any]) -> builtins.list[tuple[Any, ...]]:
            return conn.execute(
                "SELECT id, header, title, turns, updated, failed FROM carryall_sessions"
            ).fetchall()

        infos: builtins.list[SessionInfo] = []
        for session_id, header, title, turns, updated, failed in self._retrying(rows):
            try:
                meta = decode_header(bytes(header), self._where(session_id))
            except TranscriptError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                continue
            try:
                moment = parse_time(updated)
            except TranscriptError as exc:
                # One damaged column: the session is still listed, as of its creation.
                if on_error is None:
                    raise
                on_error(TranscriptError(f"{self._where(session_id)}: updated: {exc}"))
                moment = meta.created
            infos.append(
                SessionInfo(
                    meta=with_title(meta, _text(title)),
                    turns=turns,
                    updated=moment,
                    failed=_text(failed),
                )
            )
        infos.sort(key=last_used_first, reverse=True)
        return infos

    def resolve(self, session_id: str) -> str:
        """The full id of a session named by its id, a unique prefix of it, or `last`.

        `last` is the session used last, by its last write, as in the folder store.
        """
        checked_id(session_id)

        def find(conn: psycopg.Connection[Any]) -> builtins.list[str]:
            exact = conn.execute(
                "SELECT id FROM carryall_sessions WHERE id = %s", (session_id,)
            ).fetchone()
            if exact is not None:
                return [exact[0]]
            rows = conn.execute(
                "SELECT id FROM carryall_sessions WHERE starts_with(id, %s) ORDER BY id LIMIT 6",
                (session_id,),
            ).fetchall()
            return [row[0] for row in rows]

        return resolve_id(
            session_id,
            self.location,
            lambda: self.list(on_error=lambda exc: None),
            lambda: self._retrying(find),
        )

    def remove(self, session_id: str) -> builtins.list[str]:
        """Delete a session, its events, its index rows and every blob only it referenced."""
        full = self.resolve(session_id)

        def remove(conn: psycopg.Connection[Any]) -> builtins.list[str]:
            with conn.transaction():
                own = [
                    row[0]
                    for row in conn.execute(
                        "SELECT sha256 FROM carryall_blob_refs WHERE session_id = %s", (full,)
                    )
                ]
                conn.execute("DELETE FROM carryall_sessions WHERE id = %s", (full,))
                if not own:
                    return []
                gone = conn.execute(
                    "DELETE FROM carryall_blobs b WHERE sha256 = ANY(%s) AND NOT EXISTS "
                    "(SELECT 1 FROM carryall_blob_refs r WHERE r.sha256 = b.sha256) "
                    "AND stored < now() RETURNING sha256",
                    (own,),
                ).fetchall()
                return sorted(row[0] for row in gone)

        return self._retrying(remove)

    def redact(self, session_id: str, pattern: str | re.Pattern[str]) -> int:
        """Cut every match of `pattern` out of a session's every version and its index rows.

        Every event is rewritten in place (the one operation that keeps no
        earlier version) and the index rows are rebuilt; then the tables are
        vacuumed whole (`VACUUM FULL`), so no dead row keeps the string.
        Signed thinking that matches loses its signature; signatures and
        image bytes are never searched.
        """
        compiled = compile_pattern(pattern, "redact") if isinstance(pattern, str) else pattern
        redactor = Redactor([compiled], builtin=False)
        full = self.resolve(session_id)
        where = self._where(full)

        def rewrite(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                row = conn.execute(
                    "SELECT header FROM carryall_sessions WHERE id = %s FOR UPDATE", (full,)
                ).fetchone()
                if row is None:
                    raise TranscriptError(f"no session {full!r} in {self.location}")
                meta = decode_header(bytes(row[0]), where)
                clean_meta = redactor.walk(meta)
                # Written again whole when the walk, or the bytes, find a match: a
                # field no reader knows (a hand edit) is dropped with what it held.
                header = bytes(row[0])
                if clean_meta is not meta or _matches(redactor, header):
                    header = encode_header(clean_meta)[:-1]
                changed = int(header != bytes(row[0]))
                replay = Replay(where, image_stand_in)
                events = conn.execute(
                    "SELECT seq, body FROM carryall_events WHERE session_id = %s ORDER BY seq",
                    (full,),
                ).fetchall()
                blobs = _Blobs(conn)
                before: set[str] = set()
                failed = None
                for seq, body in events:
                    event = decode_event(bytes(body), where, seq + 1)
                    clean = redactor.walk(event, blobs=blobs)
                    before.update(event_hashes(event))
                    line = bytes(body)
                    if clean is not event or _matches(redactor, line):
                        line = encode_event(clean)[:-1]
                    if line != bytes(body):
                        conn.execute(
                            "UPDATE carryall_events SET body = %s "
                            "WHERE session_id = %s AND seq = %s",
                            (line, full, seq),
                        )
                        changed += 1
                    blobs.referred.update(event_hashes(clean))
                    failed = clean.failed
                    replay.apply_line(line, seq + 1)
                conn.execute(
                    "UPDATE carryall_sessions SET header = %s, title = %s, failed = %s"
                    " WHERE id = %s",
                    (
                        header,
                        _utf8(clean_meta.title or replay.title),
                        _utf8(failed),
                        full,
                    ),
                )
                blobs.refer(full, before)
                conn.execute("DELETE FROM carryall_messages WHERE session_id = %s", (full,))
                index_rows(conn, full, 0, replay.messages, replay.times)
                mark_indexed(conn, full, events[-1][0] if events else 0)
            return changed

        changed = self._retrying(rewrite)

        def vacuum(conn: psycopg.Connection[Any]) -> None:
            for table in (
                "carryall_events",
                "carryall_messages",
                "carryall_sessions",
                "carryall_blobs",
            ):
                conn.execute(f"VACUUM FULL {table}")

        self._retrying(vacuum)
        return changed

    def export_events(self, session_id: str) -> tuple[SessionMeta, builtins.list[bytes]]:
        """A session as it is kept: its header meta and every event line, oldest first."""
        full = self.resolve(session_id)

        def read(conn: psycopg.Connection[Any]) -> tuple[bytes, builtins.list[bytes]]:
            with conn.transaction():
                row = conn.execute(
                    "SELECT header FROM carryall_sessions WHERE id = %s", (full,)
                ).fetchone()
                if row is None:
                    raise TranscriptError(f"no session {full!r} in {self.location}")
                events = conn.execute(
                    "SELECT body FROM carryall_events WHERE session_id = %s ORDER BY seq",
                    (full,),
                ).fetchall()
            return bytes(row[0]), [bytes(e[0]) for e in events]

        header, lines = self._retrying(read)
        return decode_header(header, self._where(full)), lines

    def import_events(self, meta: SessionMeta, lines: Sequence[bytes]) -> None:
        """Add a session exactly as another store kept it: the same id and event lines."""
        checked_id(meta.id)
        where = f"session {meta.id} to import"
        replay = Replay(where, image_stand_in)
        hashes: set[str] = set()
        for line_no, line in enumerate(lines, 2):
            event = replay.apply_line(line, line_no)
            if event is None:  # a damaged line is not copied as if it were whole
                raise TranscriptError(f"{replay.damage[-1]}; nothing was imported")
            hashes.update(event_hashes(event))
        header = encode_header(meta)[:-1]
        updated = replay.updated or format_time(meta.created)

        def insert(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                cur = conn.execute(
                    "INSERT INTO carryall_sessions"
                    " (id, created, header, title, turns, updated, seq)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (
                        meta.id,
                        meta.created,
                        header,
                        _utf8(meta.title or replay.title),
                        len(replay.messages),
                        updated,
                        len(lines),
                    ),
                )
                if cur.rowcount != 1:
                    raise TranscriptError(f"session {meta.id} is already in {self.location}")
                with conn.cursor() as c:
                    c.executemany(
                        "INSERT INTO carryall_events (session_id, seq, token, body)"
                        " VALUES (%s, %s, %s, %s)",
                        [(meta.id, i, uuid.uuid4(), line) for i, line in enumerate(lines, 1)],
                    )
                    c.executemany(
                        "INSERT INTO carryall_blob_refs (session_id, sha256) VALUES (%s, %s)",
                        [(meta.id, sha) for sha in sorted(hashes)],
                    )
                index_rows(conn, meta.id, 0, replay.messages, replay.times)
                mark_indexed(conn, meta.id, len(lines))

        self._retrying(insert)

    # -- blobs --------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        """Store bytes once by content hash; returns the hash."""

        def put(conn: psycopg.Connection[Any]) -> str:
            with conn.transaction():
                return _put_blob(conn, data)

        return self._retrying(put)

    def get_blob(self, sha256: str) -> bytes:
        """The bytes stored under a content hash, checked against it."""
        checked_hash(sha256)

        def get(conn: psycopg.Connection[Any]) -> bytes | None:
            row = conn.execute(
                "SELECT data FROM carryall_blobs WHERE sha256 = %s", (sha256,)
            ).fetchone()
            return None if row is None else bytes(row[0])

        data = self._retrying(get)
        if data is None:
            raise MissingBlob(f"image blob {sha256} is missing from {self.location}")
        if hashlib.sha256(data).hexdigest() != sha256:
            raise TranscriptError(
                f"image blob {sha256} in {self.location} does not match its hash (damaged)"
            )
        return data

    def referenced_blobs(self) -> set[str]:
        """The content hash of every blob some version of some session refers to."""

        def read(conn: psycopg.Connection[Any]) -> set[str]:
            rows = conn.execute("SELECT DISTINCT sha256 FROM carryall_blob_refs").fetchall()
            return {row[0] for row in rows}

        return self._retrying(read)

    def collect_blobs(
        self, candidates: set[str] | None = None, *, started: float | None = None
    ) -> builtins.list[str]:
        """Delete the blobs no session refers to (only `candidates`, when given); returns them.

        A blob stored or reused after `started` (default: now) is kept: the
        writer that stored it is about to refer to it in the same
        transaction, and holds its row until then.
        """
        since = datetime.fromtimestamp(time.time() if started is None else started, UTC)

        def collect(conn: psycopg.Connection[Any]) -> builtins.list[str]:
            with conn.transaction():
                sql = (
                    "DELETE FROM carryall_blobs b WHERE stored < %s AND NOT EXISTS "
                    "(SELECT 1 FROM carryall_blob_refs r WHERE r.sha256 = b.sha256)"
                )
                args: builtins.list[Any] = [since]
                if candidates is not None:
                    sql += " AND sha256 = ANY(%s)"
                    args.append(sorted(candidates))
                rows = conn.execute(sql + " RETURNING sha256", args).fetchall()
            return sorted(row[0] for row in rows)

        return self._retrying(collect)

    # -- reading ------------------------------------------------------------

    def _where(self, session_id: str) -> str:
        return f"{self.location} session {session_id}"

    def _load(
        self, session_id: str, *, keep_versions: bool, images: bool
    ) -> tuple[SessionMeta, Replay, int]:
        where = self._where(session_id)

        def read(conn: psycopg.Connection[Any]) -> tuple[bytes, builtins.list[Any]]:
            with conn.transaction():
                row = conn.execute(
                    "SELECT header FROM carryall_sessions WHERE id = %s", (session_id,)
                ).fetchone()
                if row is None:
                    raise TranscriptError(f"no session {session_id!r} in {self.location}")
                events = conn.execute(
                    "SELECT seq, body FROM carryall_events WHERE session_id = %s ORDER BY seq",
                    (session_id,),
                ).fetchall()
            return bytes(row[0]), events

        header, events = self._retrying(read)
        meta = decode_header(header, where)
        loader = self._blob_loader(session_id) if images else image_stand_in
        replay = Replay(where, loader, keep_versions=keep_versions)
        seq = 0
        for seq, body in events:
            replay.apply_line(bytes(body), seq + 1)
        return meta, replay, seq

    def _blob_loader(self, session_id: str) -> BlobLoader:
        return blob_loader(self._where(session_id), self.get_blob)


class PostgresSession(ReplayedSession):
    """One conversation in a PostgreSQL store; the same use as `carryall.sessions.Session`."""

    store: PostgresStore

    def __init__(self, store: PostgresStore, meta: SessionMeta, replay: Replay, seq: int) -> None:
        self.store = store
        self._meta = meta
        self._replay = replay
        self._seq = seq

    def __repr__(self) -> str:
        return f"<PostgresSession {self.id} {len(self)} messages>"

    def refresh(self) -> None:
        """Read events other writers added since this session was loaded."""

        def read(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._catch_up(conn)

        self.store._retrying(read)

    def versions(self) -> list[list[Message]]:
        """Every history this session has held, oldest first, the current one last."""
        _, replay, _ = self.store._load(self.id, keep_versions=True, images=True)
        return [*replay.versions, replay.messages]

    # -- internals ----------------------------------------------------------

    def _catch_up(self, conn: psycopg.Connection[Any], below: int | None = None) -> None:
        """Apply the events other writers added after ours (up to `below`, exclusive)."""
        sql = "SELECT seq, body FROM carryall_events WHERE session_id = %s AND seq > %s"
        args: list[Any] = [self.id, self._seq]
        if below is not None:
            sql += " AND seq < %s"
            args.append(below)
        for seq, body in conn.execute(sql + " ORDER BY seq", args).fetchall():
            if seq != self._seq + 1:
                raise TranscriptError(
                    f"{self.store._where(self.id)}: event {seq} follows event {self._seq}"
                )
            self._replay.apply_line(bytes(body), seq + 1)
            self._seq = seq

    def _write(self, decide: Callable[[], Plan], extras: Extras) -> RecordKind:
        """Write the event `decide` plans, under the session's row lock unless it is a plain
        append nobody raced; `system` (a prompt change, "" for cleared) goes on an event of
        its own and only when the session's prompt differs."""
        failed, downgrades, changes, usage, system = extras
        token = uuid.uuid4()
        planned: list[Any] = []  # the event the last try sent, should its commit be lost
        known = self._seq  # this write's event, if it landed, comes after every event known

        def attempt(conn: psycopg.Connection[Any]) -> RecordKind:
            if planned:
                # An earlier try was cut off: did its commit land after all?
                row = conn.execute(
                    "SELECT seq FROM carryall_events WHERE session_id = %s AND seq > %s"
                    " AND token = %s",
                    (self.id, known, token),
                ).fetchone()
                if row is not None:
                    with conn.transaction():
                        self._catch_up(conn, below=row[0])
                    plan, stamp, title, noted = planned
                    self._applied(plan, stamp, title, row[0], downgrades, usage, noted)
                    return plan.kind  # type: ignore[no-any-return]
                planned.clear()
            plan = None if changes or system is not None else self._optimistic(decide)
            if plan is not None:
                # The common case: nobody else wrote since this session last
                # read, so the plan made on its own history stands, and the
                # event goes in one statement that checks exactly that.
                stamp = now()
                seq = self._seq + 1
                planned[:] = [plan, stamp, None, None]
                title = self._append_at_once(
                    conn, plan.messages, stamp, seq, token, failed, downgrades or [], usage or []
                )
                if title is not False:
                    planned[2] = title
                    self._applied(plan, stamp, title, seq, downgrades, usage)
                    return plan.kind
                planned.clear()  # another writer came first: decide again under the lock
            with conn.transaction():
                # NO KEY: the key stays, so a search marking this session's
                # index rows caught up (a key share, through its foreign key)
                # never makes a recording wait.
                row = conn.execute(
                    "SELECT seq FROM carryall_sessions WHERE id = %s FOR NO KEY UPDATE", (self.id,)
                ).fetchone()
                if row is None:
                    raise TranscriptError(
                        f"session {self.id} is gone from {self.store.location} (removed?)"
                    )
                if row[0] != self._seq:
                    self._catch_up(conn)
                plan = decide()
                noted = self._noted(extras).system
                if plan.kind != "rewrite" and not plan.messages and not usage and noted is None:
                    self._base = plan.base
                    return plan.kind
                stamp = now()
                seq = self._seq + 1
                planned[:] = [plan, stamp, None, noted]
                planned[2] = title = self._insert(
                    conn,
                    "rewrite" if plan.kind == "rewrite" else "append",
                    plan.messages,
                    stamp,
                    seq,
                    token,
                    failed,
                    downgrades or [],
                    changes or [],
                    usage or [],
                    noted,
                )
            self._applied(plan, stamp, title, seq, downgrades, usage, noted)
            return plan.kind

        return self.store._retrying(
            attempt, f"; session {self.id} keeps every earlier event, this one was not written"
        )

    def _optimistic(self, decide: Callable[[], Plan]) -> Plan | None:
        """The plan on the history as last read, when it is a plain append of text; else None.

        A conflict seen on a history that may be behind is no verdict: the
        locked path reads what other writers added and decides again.
        """
        if self._replay.unsettled:
            return None
        try:
            plan = decide()
        except SessionConflict:
            return None
        if plan.kind == "rewrite" or not plan.messages:
            return None
        if any(not isinstance(m, Message) or has_image(m) for m in plan.messages):
            # Blobs and their references go in the locked transaction; what
            # is not a message is refused there.
            return None
        return plan

    def _append_at_once(
        self,
        conn: psycopg.Connection[Any],
        messages: list[Message],
        stamp: str,
        seq: int,
        token: uuid.UUID,
        failed: str | None,
        downgrades: list[Downgrade],
        usage: list[RequestUsage],
    ) -> str | Literal[False] | None:
        """Append one event in one statement if the session is still at `seq - 1`.

        Returns the title it gave the session (None for none), or False when
        another writer had moved the session on and nothing was written.
        """
        # No put_blob: `_optimistic` lets no message with an image come here.
        extras = Extras(failed=failed, downgrades=downgrades, usage=usage)
        # Encoded once, as a JSON Lines append is (`_line`), without its newline.
        written, _, title = self._line("append", messages, stamp, None, extras)
        total = len(self._replay.messages) + len(messages)
        line = written[:-1]
        try:
            written_rows = conn.execute(
                _APPEND,
                (seq, total, stamp, _utf8(title), _utf8(failed), self.id, seq - 1, token, line),
            ).rowcount
        except self.store._pg.errors.UniqueViolation:
            raise TranscriptError(
                f"session {self.id}: another writer recorded event {seq} first "
                "(conflicting append refused; nothing was written)"
            ) from None
        return title if written_rows == 1 else False

    def _insert(
        self,
        conn: psycopg.Connection[Any],
        kind: Literal["append", "rewrite"],
        messages: list[Message],
        stamp: str,
        seq: int,
        token: uuid.UUID,
        failed: str | None = None,
        downgrades: list[Downgrade] | None = None,
        changes: list[str] | None = None,
        usage: list[RequestUsage] | None = None,
        system: str | None = None,
    ) -> str | None:
        """Write one event and its index rows; returns the title it gave the session, if any."""
        hashes: set[str] = set()

        def put(data: bytes) -> str:
            sha = _put_blob(conn, data)
            hashes.add(sha)
            return sha

        extras = Extras(failed, downgrades, changes, usage, system)
        event, _, title = self._event(kind, messages, stamp, put, extras)
        total = event.n
        line = encode_event(event)[:-1]
        pg = self.store._pg
        try:
            conn.execute(
                "INSERT INTO carryall_events (session_id, seq, token, body)"
                " VALUES (%s, %s, %s, %s)",
                (self.id, seq, token, line),
            )
        except pg.errors.UniqueViolation:
            raise TranscriptError(
                f"session {self.id}: another writer recorded event {seq} first "
                "(conflicting append refused; nothing was written)"
            ) from None
        if hashes:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO carryall_blob_refs (session_id, sha256) VALUES (%s, %s)"
                    " ON CONFLICT DO NOTHING",
                    [(self.id, sha) for sha in sorted(hashes)],
                )
        conn.execute(
            "UPDATE carryall_sessions SET seq = %s, turns = %s, updated = %s,"
            " title = coalesce(title, %s), failed = %s WHERE id = %s",
            (seq, total, stamp, _utf8(title), _utf8(failed), self.id),
        )
        return title

    def _applied(
        self,
        plan: Plan,
        stamp: str,
        title: str | None,
        seq: int,
        downgrades: list[Downgrade] | None,
        usage: list[RequestUsage] | None = None,
        system: str | None = None,
    ) -> None:
        """The committed event, applied to the history in memory (unredacted, as the run has it)."""
        extras = Extras(downgrades=downgrades, usage=usage, system=system)
        self._apply(plan.kind, plan.messages, stamp, title, extras)
        self._seq = seq
        self._base = plan.base


# One append in one statement: the session row moves from the event before
# to this one's (seq, turns, updated, title, failed; id, seq before) only if
# no other writer moved it first (the row lock orders two writers, and the
# second finds `seq` changed), and the event (token, body) goes in only with
# it, so the statement's row count says which happened. Its text is indexed
# by the next search. The parameters are positional: naming them costs
# every append a reordering.
_APPEND = """
WITH s AS (
    UPDATE carryall_sessions SET seq = %s, turns = %s, updated = %s,
        title = coalesce(title, %s), failed = %s
    WHERE id = %s AND seq = %s RETURNING id, seq
)
INSERT INTO carryall_events (session_id, seq, token, body)
SELECT id, seq, %s, %s FROM s
"""


def _put_blob(conn: psycopg.Connection[Any], data: bytes) -> str:
    """Store bytes by hash inside the caller's transaction, or refresh the time of a stored one.

    The refreshed time (and the row lock it takes) keeps a `collect_blobs`
    that began earlier from deleting it before the reference commits.
    """
    sha = hashlib.sha256(data).hexdigest()
    cur = conn.execute(
        "UPDATE carryall_blobs SET stored = clock_timestamp() WHERE sha256 = %s", (sha,)
    )
    if cur.rowcount == 0:
        conn.execute(
            "INSERT INTO carryall_blobs (sha256, data) VALUES (%s, %s)"
            " ON CONFLICT (sha256) DO UPDATE SET stored = clock_timestamp()",
            (sha, data),
        )
    return sha


def _matches(redactor: Redactor, data: bytes) -> bool:
    """Whether stored bytes, read as text, hold a match anywhere (a field no reader knows too)."""
    text = data.decode("utf-8", "surrogateescape")
    return redactor.text(text) is not text


class _Blobs:
    """The blobs a `redact` walk reads and stores, inside its transaction (`BlobAccess`)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.referred: set[str] = set()
        """Every hash the redacted events refer to."""

    def get_blob(self, sha256: str) -> bytes:
        row = self.conn.execute(
            "SELECT data FROM carryall_blobs WHERE sha256 = %s", (sha256,)
        ).fetchone()
        if row is None:
            raise TranscriptError(f"blob {sha256} is missing")
        return bytes(row[0])

    def put_blob(self, data: bytes) -> str:
        return _put_blob(self.conn, data)

    def refer(self, session_id: str, before: set[str]) -> None:
        """The session's references made what the redacted events refer to, and every blob it
        referred to before and no session refers to now deleted (it may hold the string)."""
        gone = sorted(before - self.referred)
        new = sorted(self.referred - before)
        if new:
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO carryall_blob_refs (session_id, sha256) VALUES (%s, %s)"
                    " ON CONFLICT DO NOTHING",
                    [(session_id, sha) for sha in new],
                )
        if gone:
            self.conn.execute(
                "DELETE FROM carryall_blob_refs WHERE session_id = %s AND sha256 = ANY(%s)",
                (session_id, gone),
            )
            self.conn.execute(
                "DELETE FROM carryall_blobs b WHERE sha256 = ANY(%s) AND NOT EXISTS "
                "(SELECT 1 FROM carryall_blob_refs r WHERE r.sha256 = b.sha256)",
                (gone,),
            )


def _close_pool(pool: psycopg_pool.ConnectionPool[Any]) -> None:
    with contextlib.suppress(Exception):
        pool.close(timeout=1.0)


def _lost_connection(exc: BaseException) -> bool:
    """Whether an error is the connection's, not the statement's: worth a new connection.

    SQLSTATE class 08 (connection exception) and 57P01-57P04 (the server
    shutting down or restarting, the database going away), or no SQLSTATE
    at all (the socket closed under the client). Everything else (a value
    too long for an index, a quota, a refused constraint) fails the same
    way on every try, so it is reported at once.
    """
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state.startswith("57P0")


def _utf8(text: str | None) -> bytes | None:
    """A title or an error note as its column keeps it (a NUL, a lone surrogate included)."""
    return None if text is None else text.encode("utf-8", "surrogatepass")


def _text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "surrogatepass")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

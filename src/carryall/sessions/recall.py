"""Recall: full-text search over every session, with ranked snippets.

An SQLite FTS5 index (`recall.sqlite3` under the store root) holds one row
per message: its text, thinking, tool calls (name and input), tool results
and image placeholders. It is derived data. `sync` (which every search runs
first) catches it up from the transcripts themselves, reading only what
each transcript gained since it was last indexed: this is how
`carryall.sessions.Store` keeps it by default, so a recording spends nothing
on it. Subscribed to a store as a `StoreListener` (`Store(recall=True)`),
it is also kept current as events are written and sessions removed. It reads the store only
through its public methods (`transcripts`, `load`, `path`); the store never
imports this module.

A person's query is never FTS5 syntax: every word is quoted as an FTS5
string, so `C++`, a UUID or a stray quote searches for those words instead
of failing with a syntax error. Words must all appear (in any order);
English word endings are folded (Porter stemming), so `banana` finds
`bananas`.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from carryall._lazy import lazy_logger
from carryall.blocks import Message
from carryall.errors import TranscriptError
from carryall.sessions._transcript import (
    AnyEvent,
    decode_event,
    format_time,
    image_stand_in,
    iter_events,
    parse_time,
    restore,
    split_lines,
)
from carryall.sessions.jsonl import Recorded, SessionStore
from carryall.sessions.protocol import Hit
from carryall.sessions.render import searchable_text

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "MAX_LIMIT",
    "MAX_QUERY_WORDS",
    "RANKED",
    "Hit",
    "RecallIndex",
    "bounded_words",
    "fts_query",
    "marked_hit",
    "passage",
    "query_words",
]

MAX_QUERY_WORDS = 64
"""The most distinct words a query may hold: every one is a term all hits must contain,
and FTS5's cost grows faster than the count, so the bound keeps a pasted page from holding
a search up."""

RANKED = 2000
"""The most matches of a query that are ranked: a word held by more messages is ranked
among the newest `RANKED` of them (see `RecallIndex.search`)."""

MAX_LIMIT = 10_000
"""The most hits one search returns (SQLite's LIMIT is a 64-bit integer; no reader wants more)."""

log = lazy_logger("carryall.sessions")

_SCHEMA_VERSION = "1"  # bump to rebuild indexes written by an older layout
_BULK_ROWS = 2000  # rows a sync changed beyond which it merges the FTS5 segments at once
_HELD_MOST = 4096  # messages held back while the index is busy; past it `sync` reads them
_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_OPEN, _CLOSE = "\x02", "\x03"
_MARKS = str.maketrans({_OPEN: " ", _CLOSE: " ", "\x00": " "})
_CONTROLS = str.maketrans({chr(c): " " for c in range(32)})


def fts_query(query: str) -> str | None:
    """A person's words as a safe FTS5 query (every word a quoted string), or None if empty.

    Quoting each word (double quotes doubled) means nothing a person types
    is read as FTS5 syntax: `C++`, `AND`, `a-b`, `"` and `*` are words.
    """
    words = bounded_words(query)
    if not words:
        return None
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def bounded_words(query: str, limit: int = 0) -> list[str]:
    """`query_words`, refused past the bounds every store's search keeps (and `limit` too)."""
    if limit > MAX_LIMIT:
        raise TranscriptError(f"recall: --limit {limit} is more than {MAX_LIMIT}")
    words = query_words(query)
    if len(words) > MAX_QUERY_WORDS:
        raise TranscriptError(
            f"recall: the query has {len(words)} different words; at most {MAX_QUERY_WORDS}"
        )
    if any("\ud800" <= ch <= "\udfff" for ch in query):
        raise TranscriptError("recall: the query is not valid UTF-8 text")
    return words


def query_words(query: str) -> list[str]:
    """The words of a person's query, as every store's search takes them (all must appear)."""
    # FTS5 ends a string at a NUL, and no control character is part of a
    # token, so they separate words like spaces do. A repeated word adds no
    # condition, so it is asked once.
    return list(dict.fromkeys(query.translate(_CONTROLS).split()))


def passage(message: Message) -> str:
    """The text of a message as an index holds it: `searchable_text` without the marks or NULs."""
    return searchable_text(message).translate(_MARKS)


class RecallIndex:
    """The full-text index of one store's sessions; a `StoreListener` of that store."""

    def __init__(self, store: SessionStore, *, batch: int = 64) -> None:
        self.store = store
        self.path = store.root / "recall.sqlite3"
        self.batch = batch
        """Messages held back before they are indexed together in one transaction.

        Every SQLite commit rewrites pages and every FTS5 insert adds a
        segment that later merges cost reading and writing again, so
        indexing one message per commit costs an append tens of KB of I/O.
        Held-back events are indexed before any search, on `flush` and
        `close`, and at exit; events lost to a crash are caught up from the
        transcripts like any missed update.
        """
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._pending: list[Recorded] = []
        self._pending_messages = 0
        self._put_off = 0  # messages past `batch` a busy index makes the next try wait for

    # -- searching ----------------------------------------------------------

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
        """The best-ranked messages containing every word of `query`.

        Held by more than `RANKED` messages, a query is ranked among the
        newest `RANKED` of them. `since` keeps messages recorded at or after that time, `role` one
        role, `session` one session id. The index is first caught up with
        the transcripts unless `sync=False`, telling `progress` (see `sync`).
        """
        bounded_words(query, limit)
        match = fts_query(query)
        if match is None or limit <= 0:
            return []
        if sync:
            self.sync(progress)
        else:
            self._flush_or_log()
        if not self.path.exists():
            return []
        # The newest matches first, at most `RANKED` of them (FTS5 walks a
        # word's rows backwards and stops there), then ranked here: for a
        # common word, scoring and sorting every message that holds it cost
        # more than reading the transcripts, while BM25 tells little between
        # thousands of messages that all hold it, and the newest are what a
        # person looking back wants. A word in fewer messages is ranked over
        # all of them, exactly.
        sql = [
            "SELECT p.rowid, bm25(passages), d.session, d.message, d.role, d.time",
            " FROM passages p JOIN docs d ON d.id = p.rowid WHERE passages MATCH ?",
        ]
        args: list[object] = [match]
        if since is not None:
            sql.append(" AND d.time >= ?")
            args.append(format_time(since))
        if role is not None:
            sql.append(" AND d.role = ?")
            args.append(role)
        if session is not None:
            sql.append(" AND d.session = ?")
            args.append(session)
        sql.append(" ORDER BY p.rowid DESC LIMIT ?")
        args.append(max(RANKED, limit))
        with self._connection() as conn:
            found = conn.execute("".join(sql), args).fetchall()
            # Best score first (BM25 is negative: lower is better), then newest.
            found.sort(key=lambda row: row[5], reverse=True)
            found.sort(key=lambda row: row[1])
            best = found[:limit]
            if not best:
                return []
            marks = ", ".join("?" * len(best))
            snippets = dict(
                conn.execute(
                    "SELECT rowid, snippet(passages, 0, char(2), char(3), '…', 16) FROM passages"
                    f" WHERE passages MATCH ? AND rowid IN ({marks})",
                    [match, *(row[0] for row in best)],
                ).fetchall()
            )
        return [
            marked_hit(session_id, message, role_, time, snippets.get(rowid, ""), score)
            for rowid, score, session_id, message, role_, time in best
        ]

    # -- keeping current ----------------------------------------------------

    def on_record(self, recorded: Recorded, /) -> None:
        """Take in an event a session just wrote: its messages from `recorded.first` on are new.

        It is indexed once `batch` messages are waiting (see `batch`), or
        before the next search. When the index had not seen the transcript
        up to `recorded.before` (a missed update, another writer), it
        catches up from the file instead. A recording never waits for the
        index: when another process is writing it, the events stay held
        back and the next batch tries again (see `_HELD_MOST`).
        """
        with self._lock:
            if not self._pending:
                _unflushed.add(self)
            self._pending.append(recorded)
            self._pending_messages += max(len(recorded.messages), 1)
            if self._pending_messages < self.batch + self._put_off:
                return
        self._flush(wait_ms=0)

    def flush(self) -> None:
        """Index every event held back (`batch`), in one transaction.

        Waits up to a second for another process writing the index; what
        it cannot index then is caught up from the transcripts by `sync`.
        """
        self._flush(wait_ms=1000)

    def _flush(self, *, wait_ms: int) -> None:
        with self._lock:
            pending, held = self._pending, self._pending_messages
            self._pending, self._pending_messages = [], 0
            self._put_off = 0
            _unflushed.discard(self)
            if not pending or not self.store.root.is_dir():
                return  # nothing held back, or the store itself is gone
            import sqlite3  # loaded with the first thing to index, as `_connection` says

            with self._connection(busy_ms=wait_ms) as conn:
                try:
                    with _transaction(conn):
                        for run in _runs(pending):
                            self._take(conn, run)
                except sqlite3.OperationalError as exc:
                    if wait_ms or exc.sqlite_errorcode not in _BUSY:
                        raise
                    # Another process holds the index. SQLite's busy handler
                    # would sleep this recording; instead the events wait for
                    # the next batch, and past `_HELD_MOST` they are left to
                    # `sync`, which reads them from the transcripts.
                    if held < _HELD_MOST:
                        self._pending = pending
                        self._pending_messages = held
                        self._put_off = held
                        _unflushed.add(self)

    def _flush_or_log(self) -> None:
        try:
            self.flush()
        except TranscriptError as exc:  # the files hold it all; sync catches up from them
            log.warning("recall index: could not index held-back events: %s", exc)

    def _take(self, conn: sqlite3.Connection, run: list[Recorded]) -> None:
        """Index a run of one session's events, each written where the one before ended."""
        first = run[0]
        session_id = first.session_id
        row = conn.execute(
            "SELECT offset, ident FROM sources WHERE session = ?", (session_id,)
        ).fetchone()
        if row is None:
            # A session the index has not seen is read from its file, unless
            # the run holds its whole history (new, or rewritten whole):
            # then the events say all the file would.
            if first.first != 0:
                self._sync_session(conn, session_id, self.store.path(session_id))
                return
        elif row[0] != first.before or row[1] != _ident_text(first.ident):
            self._sync_session(conn, session_id, self.store.path(session_id))
            return
        # The run's events folded into one change from message `start` on:
        # one replace and one update for the run, not one per event.
        start = first.first
        messages: list[Message] = []
        times: list[str] = []
        for recorded in run:
            if recorded.first <= start:
                start, messages, times = recorded.first, [*recorded.messages], [*recorded.times]
            else:
                cut = recorded.first - start
                messages[cut:] = recorded.messages
                times[cut:] = recorded.times
        _replace(conn, session_id, start, messages, times)
        last = run[-1]
        if row is None:
            conn.execute(
                "INSERT INTO sources(session, offset, count, ident) VALUES (?, ?, ?, ?)",
                (session_id, last.after, last.total, _ident_text(last.ident)),
            )
        else:
            conn.execute(
                "UPDATE sources SET offset = ?, count = ? WHERE session = ?",
                (last.after, last.total, session_id),
            )

    def on_remove(self, session_id: str, /) -> None:
        """Drop a session from the index (its transcript was removed)."""
        with self._lock:
            self._pending = [r for r in self._pending if r.session_id != session_id]
        if not self.path.exists():
            return
        with self._connection() as conn, _transaction(conn):
            _forget(conn, session_id)

    def sync(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Catch the index up with every transcript, reading only what each one gained.

        Each session is indexed in a transaction of its own, so an
        interrupted catch-up (Ctrl-C) keeps every session it finished and the
        next one goes on from there. `progress(done, total)` hears of each
        session caught up, `total` being how many needed it (called first
        with `done` 0, and not at all when none did).
        """
        self._flush_or_log()
        paths = self.store.transcripts()
        if not paths and not self.path.exists():
            return
        with self._connection() as conn:
            changes = conn.total_changes
            known = dict(conn.execute("SELECT session, offset FROM sources").fetchall())
            for gone in set(known) - set(paths):
                with _transaction(conn):
                    _forget(conn, gone)
            stale: list[tuple[str, Path]] = []
            for session_id, path in sorted(paths.items()):
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                if known.get(session_id) != size:
                    stale.append((session_id, path))
            if stale and progress is not None:
                progress(0, len(stale))
            for done, (session_id, path) in enumerate(stale, 1):
                try:
                    with _transaction(conn):
                        self._sync_session(conn, session_id, path)
                except TranscriptError as exc:
                    # One unreadable transcript must not hide every other session.
                    log.warning("recall index: skipping session %s: %s", session_id, exc)
                if progress is not None:
                    progress(done, len(stale))
            if conn.total_changes - changes >= _BULK_ROWS:
                # A catch-up this large leaves FTS5 many segments, which its
                # automerge would otherwise fold together a little on every
                # later append: megabytes of reading and writing per commit
                # for thousands of commits. Merging them now, once, costs
                # what indexing them did.
                with _transaction(conn):
                    conn.execute("INSERT INTO passages(passages) VALUES ('optimize')")

    def reindex(self) -> int:
        """Rebuild the index from the transcripts; returns how many messages it holds."""
        with self._lock:
            # What is held back is in the transcripts too, and is read from
            # them: the events heard may be older than what a file now holds.
            self._pending, self._pending_messages, self._put_off = [], 0, 0
            _unflushed.discard(self)
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(f"{self.path}{suffix}")
        self.sync()
        if not self.path.exists():
            return 0
        with self._connection() as conn:
            count: int = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
        return count

    def purge(self) -> None:
        """Compact the index and its file so that deleted text is gone from the disk too.

        FTS5 keeps a deleted row's terms in its segments until they merge,
        and SQLite keeps freed pages and the write-ahead log: after a
        redaction none of them may still hold the string.
        """
        self.flush()
        if not self.path.exists():
            return
        with self._connection() as conn:
            conn.execute("INSERT INTO passages(passages) VALUES ('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Index what is held back, then close the database connection (it reopens on next use)."""
        self.flush()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- internals ----------------------------------------------------------

    def _sync_session(self, conn: sqlite3.Connection, session_id: str, path: Path) -> None:
        """Bring one session's rows up to date; the caller holds a write transaction."""
        row = conn.execute(
            "SELECT offset, count, ident FROM sources WHERE session = ?", (session_id,)
        ).fetchone()
        try:
            with path.open("rb") as f:
                stat = os.fstat(f.fileno())
                ident = _ident_text((stat.st_dev, stat.st_ino))
                if row is not None and row[2] == ident and 0 < row[0] <= stat.st_size:
                    f.seek(row[0])
                    data = f.read(stat.st_size - row[0])
                    if self._apply_appends(conn, session_id, row[0], row[1], data):
                        return
        except FileNotFoundError:
            _forget(conn, session_id)
            return
        except OSError as exc:
            raise TranscriptError(
                f"cannot read session file {path}: {exc.strerror or exc}"
            ) from None
        # A rewrite, a replaced file or a first sighting: index the whole session again.
        loaded = self.store.load(path, images=False)
        _forget(conn, session_id)
        _replace(conn, session_id, 0, loaded.replay.messages, loaded.replay.times)
        conn.execute(
            "INSERT INTO sources(session, offset, count, ident) VALUES (?, ?, ?, ?)",
            (session_id, loaded.end, len(loaded.replay.messages), _ident_text(loaded.ident)),
        )

    def _apply_appends(
        self, conn: sqlite3.Connection, session_id: str, offset: int, count: int, data: bytes
    ) -> bool:
        """Index the append events in `data`; False when anything else, or damage, is there."""
        lines, covered = split_lines(data)
        where = f"{self.store.path(session_id)} (after byte {offset}, counting lines from there)"
        events: list[AnyEvent] = []
        expected = count
        for line_no, line in iter_events(lines, 1):
            try:
                event = decode_event(line, where, line_no)
            except TranscriptError:
                # A damaged line: the whole session is read again, as every
                # reader reads it (each undamaged event kept, the damage
                # skipped), rather than left out of the index altogether.
                return False
            if event.event != "append" or event.start != expected:
                return False
            events.append(event)
            expected = event.n
        for event in events:
            messages = [restore(m, image_stand_in) for m in event.messages]
            _replace(conn, session_id, event.start, messages, [event.time] * len(messages))
            count = event.n
        conn.execute(
            "UPDATE sources SET offset = ?, count = ? WHERE session = ?",
            (offset + covered, count, session_id),
        )
        return True

    @contextlib.contextmanager
    def _connection(self, busy_ms: int = 30000) -> Iterator[sqlite3.Connection]:
        # SQLite loads with the first connection: listing sessions, or
        # searching a store that has no index yet, never opens one.
        import sqlite3

        with self._lock:
            if self._conn is None:
                self._conn = self._opened()
            try:
                self._conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
                yield self._conn
            except sqlite3.DatabaseError as exc:
                raise TranscriptError(
                    f"recall index {self.path}: {exc} "
                    "(if it is damaged, rebuild it with `carryall recall --reindex`)"
                ) from None

    def _opened(self) -> sqlite3.Connection:
        """`_open`, a store it cannot write (read-only, the index a folder) made one line."""
        import sqlite3

        try:
            return self._open()
        except (OSError, sqlite3.DatabaseError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise TranscriptError(
                f"recall index {self.path} cannot be opened: {reason} (search needs the index; "
                "`sessions list` and `sessions show` read the transcripts without it)"
            ) from None

    def _open(self) -> sqlite3.Connection:
        import sqlite3

        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_dir():
            # SQLite would say only that it cannot open the file.
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(self.path))
        loose = not self.path.exists() and not _create_private(self.path)
        # From here the file is opened once, by SQLite: closing any other
        # descriptor of it would drop every POSIX lock this process holds on
        # it, SQLite's own included (another `Store` on the same root, in
        # another thread), and a second process could then delete the WAL
        # under it and lose its writes.
        conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        try:
            if loose:
                # SQLite made the file empty on connect; it gives its -wal and
                # -shm files the database file's permissions when it first
                # writes, which comes after this.
                os.chmod(self.path, 0o600)
            conn.execute("PRAGMA journal_mode=WAL")
            # The index is rebuilt from the transcripts, so it need not be
            # synced on every commit; only the transcripts carry that cost.
            conn.execute("PRAGMA synchronous=NORMAL")
            if _current(conn):
                # Every writer process opens the index: only the first waits
                # for the write lock to lay out the tables.
                return conn
            with _transaction(conn):
                conn.execute("CREATE TABLE IF NOT EXISTS info(key TEXT PRIMARY KEY, value TEXT)")
                version = conn.execute("SELECT value FROM info WHERE key = 'schema'").fetchone()
                if version is not None and version[0] != _SCHEMA_VERSION:
                    for table in ("passages", "docs", "sources"):
                        conn.execute(f"DROP TABLE IF EXISTS {table}")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS sources(session TEXT PRIMARY KEY, "
                    "offset INTEGER NOT NULL, count INTEGER NOT NULL, ident TEXT NOT NULL)"
                )
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS docs(id INTEGER PRIMARY KEY, "
                    "session TEXT NOT NULL, message INTEGER NOT NULL, "
                    "role TEXT NOT NULL, time TEXT NOT NULL)"
                )
                conn.execute("CREATE INDEX IF NOT EXISTS docs_by_session ON docs(session, message)")
                conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS passages USING "
                    "fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')"
                )
                conn.execute(
                    "INSERT OR REPLACE INTO info(key, value) VALUES ('schema', ?)",
                    (_SCHEMA_VERSION,),
                )
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise TranscriptError(
                f"recall index {self.path}: {exc}; rebuild it with `carryall recall --reindex`"
            ) from None
        except BaseException:
            conn.close()
            raise
        return conn


def _create_private(path: Path) -> bool:
    """Create `path` empty and owner-only (like the transcripts the index copies text from).

    The file is made under a name of its own and linked into place, so the
    one descriptor closed here is of a file no connection can have open.
    False on a file system without hard links, where SQLite creates it.
    """
    temp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        os.link(temp, path)
    except FileExistsError:
        pass  # another writer made it first
    except OSError:
        return False
    finally:
        os.unlink(temp)
    return True


def _current(conn: sqlite3.Connection) -> bool:
    """Whether the index already has this schema's tables (read without a write lock)."""
    tables = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE name IN ('info', 'sources', 'docs', 'passages')"
    ).fetchone()[0]
    if tables != 4:
        return False
    version = conn.execute("SELECT value FROM info WHERE key = 'schema'").fetchone()
    return version is not None and version[0] == _SCHEMA_VERSION


def _runs(pending: list[Recorded]) -> Iterator[list[Recorded]]:
    """`pending` cut into runs of one session's events, each starting where the last ended.

    Sessions keep their own order; a gap (an event this index never heard
    of) starts a new run, which `_take` then catches up from the file.
    """
    runs: dict[str, list[list[Recorded]]] = {}
    for recorded in pending:
        of_session = runs.setdefault(recorded.session_id, [])
        last = of_session[-1][-1] if of_session else None
        if last is not None and last.after == recorded.before and last.ident == recorded.ident:
            of_session[-1].append(recorded)
        else:
            of_session.append([recorded])
    for of_session in runs.values():
        yield from of_session


_unflushed: weakref.WeakSet[RecallIndex] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    """Index what every open index still holds back; what fails is caught up from the files."""
    for index in list(_unflushed):
        with contextlib.suppress(Exception):
            index.flush()


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _replace(
    conn: sqlite3.Connection,
    session_id: str,
    first: int,
    messages: Sequence[Message],
    times: Sequence[str],
) -> None:
    """Drop a session's rows from message `first` on and index `messages` there."""
    conn.execute(
        "DELETE FROM passages WHERE rowid IN "
        "(SELECT id FROM docs WHERE session = ? AND message >= ?)",
        (session_id, first),
    )
    conn.execute("DELETE FROM docs WHERE session = ? AND message >= ?", (session_id, first))
    if not messages:
        return
    base: int = conn.execute("SELECT coalesce(max(id), 0) FROM docs").fetchone()[0]
    rows = [
        (base + 1 + i, session_id, first + i, m.role, t)
        for i, (m, t) in enumerate(zip(messages, times, strict=True))
    ]
    conn.executemany(
        "INSERT INTO docs(id, session, message, role, time) VALUES (?, ?, ?, ?, ?)", rows
    )
    conn.executemany(
        "INSERT INTO passages(rowid, body) VALUES (?, ?)",
        [(base + 1 + i, passage(m)) for i, m in enumerate(messages)],
    )


def _forget(conn: sqlite3.Connection, session_id: str) -> None:
    conn.execute(
        "DELETE FROM passages WHERE rowid IN (SELECT id FROM docs WHERE session = ?)",
        (session_id,),
    )
    conn.execute("DELETE FROM docs WHERE session = ?", (session_id,))
    conn.execute("DELETE FROM sources WHERE session = ?", (session_id,))


def marked_hit(session: str, message: int, role: str, time: str, marked: str, score: float) -> Hit:
    """A hit from a snippet whose matching words are marked with char(2) and char(3)."""
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    start = -1
    for part in _split_marks(marked):
        if part == _OPEN:
            start = length
        elif part == _CLOSE:
            if start >= 0:
                spans.append((start, length))
            start = -1
        else:
            plain.append(part)
            length += len(part)
    return Hit(
        session=session,
        message=message,
        role=role,
        time=parse_time(time),
        snippet="".join(plain),
        matches=tuple(spans),
        rank=score,
    )


def _split_marks(text: str) -> Iterator[str]:
    chunk: list[str] = []
    for ch in text:
        if ch in (_OPEN, _CLOSE):
            if chunk:
                yield "".join(chunk)
                chunk = []
            yield ch
        else:
            chunk.append(ch)
    if chunk:
        yield "".join(chunk)


def _ident_text(ident: tuple[int, int]) -> str:
    return f"{ident[0]}:{ident[1]}"

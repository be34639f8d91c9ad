"""The session store: one append-only JSON Lines transcript per session.

Layout under the store root (`$CARRYALL_HOME/sessions`, else the platform's
user data folder):

    <id>.jsonl          the transcript (see `_transcript` for the format)
    blobs/ab/<sha256>   image bytes, stored once per content hash
    locks/<id>.lock     the writer lock of each session
    torn/               torn last lines moved aside by a repair, never deleted
                        (only `redact` rewrites them)
    recall.sqlite3      the full-text index (kept by `carryall.sessions.recall`)

The store does not know that index. It tells the listeners it was given what
it wrote (`StoreListener.on_record`, with a `Recorded`) and what it removed
(`on_remove`); the recall index is one such listener, subscribed by
`carryall.sessions.Store(recall=True)` (by default it catches up from the
files at each search instead). A listener keeps derived data, so its failure is
logged and never fails a write. What a listener may need to catch up by
itself is public: `transcripts()` and `load(path, images=False)`.

Files are created readable by their owner only: transcripts hold whatever
was said and whatever the tools read. Secrets are cut out of every event
before it is written (`carryall.sessions.redact`: the built-in key and token
shapes plus the config file's `[redact] patterns`), and listeners hear the
redacted messages, so the index never holds what the transcript does not.
`redact` removes a string from a session after the fact: the one operation
that rewrites a transcript and keeps no earlier version, on purpose.

Every event is one line written whole, with one `write` and an `fsync`,
under a file lock, so two writers never interleave and an acknowledged event
survives a crash. A crash mid-write can leave a torn last line: readers
ignore it and the next writer moves it aside before writing. Appending never
rereads or rewrites the file: a writer only reads what other writers added
since it last looked.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import re
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, Unpack

import msgspec

from carryall import paths
from carryall._lazy import lazy_logger, lazy_module
from carryall.blocks import Message
from carryall.errors import TranscriptError
from carryall.sessions._core import (
    LAST,
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
    LineReader,
    Replay,
    SessionMeta,
    Stored,
    decode_event,
    decode_head,
    decode_header,
    encode_event,
    encode_header,
    has_blob,
    image_stand_in,
    iter_events,
    now,
    parse_time,
    split_lines,
    with_title,
)
from carryall.sessions.protocol import NewSession, Plan, RecordKind
from carryall.sessions.redact import Redactor, compile_pattern, configured_redactor

if TYPE_CHECKING:
    import fcntl
    import hashlib
else:
    fcntl = lazy_module("fcntl")  # a reader never locks
    hashlib = lazy_module("hashlib")  # OpenSSL's library loads with the first digest

__all__ = [
    "LAST",
    "Loaded",
    "Recorded",
    "Session",
    "SessionMeta",
    "SessionStore",
    "StoreListener",
    "default_root",
]

log = lazy_logger("carryall.sessions")

_SUFFIX = ".jsonl"


def default_root() -> Path:
    """Where a store lives unless it is given a root: `carryall.paths.sessions_dir()`."""
    return paths.sessions_dir()


class Recorded(msgspec.Struct, frozen=True):
    """What one event a session wrote did to its history, as a listener hears it.

    A frozen struct, since one is made for every event written and a struct
    is made far faster than a frozen dataclass.
    """

    session_id: str
    ident: tuple[int, int]
    """The transcript file's (device, inode): a replaced file is a different one."""
    before: int
    """The transcript's length in bytes before the event."""
    after: int
    """Its length after the event."""
    first: int
    """The index of the first message the event added or changed; earlier ones stand."""
    messages: Sequence[Message]
    """The history from `first` on, as it now is."""
    times: Sequence[str]
    """When each of `messages` was recorded in its current form (transcript time text)."""
    total: int
    """How many messages the history holds after the event."""


class StoreListener(Protocol):
    """Something that keeps data derived from the transcripts (the recall index).

    Called after the event is safely on disk, under the session's writer
    lock. An exception it raises is logged and never fails the write, so a
    listener must be able to catch up from the files by itself.
    """

    def on_record(self, recorded: Recorded, /) -> None:
        """A session wrote an event: `recorded` says what changed."""

    def on_remove(self, session_id: str, /) -> None:
        """A session's transcript was deleted."""


@dataclass(frozen=True)
class Loaded:
    """A transcript read whole: its meta, the replayed history, and where reading stopped."""

    meta: SessionMeta
    replay: Replay
    """The history (`replay.messages`, `replay.times`), title and, if asked, old versions."""
    end: int
    """The byte length of the complete lines read (a torn last line is not counted)."""
    lines: int
    """How many complete lines that is."""
    ident: tuple[int, int]
    """The file's (device, inode) when it was read."""


class SessionStore:
    """A folder of session transcripts and their image blobs, telling listeners what it writes.

    `SessionStore()` uses `default_root()`; tests and tools pass their own
    root. `listeners` hear every event written and every session removed
    (see `StoreListener`); `carryall.sessions.Store` is this store with its
    recall index (listening when asked). `redactor` cuts secrets out of every event
    before it is written; by default `configured_redactor()`.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        listeners: Iterable[StoreListener] = (),
        lock_timeout: float = 30.0,
        redactor: Redactor | None = None,
    ) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.lock_timeout = lock_timeout
        self.redactor = redactor if redactor is not None else configured_redactor()
        """What is cut out of every event before it is written."""
        self.listeners: builtins.list[StoreListener] = builtins.list(listeners)
        """Told of every write and removal, in order; append to subscribe."""
        self._locks_ready = False

    # -- sessions -----------------------------------------------------------

    def create(self, **fields: Unpack[NewSession]) -> Session:
        """Start a new, empty session and write its header.

        `cwd` defaults to the current working directory; `title` defaults to
        the first thing a person says once it is recorded; `origin` says
        where an imported history came from; `tools` names the tools offered.
        """
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _failed(f"cannot create session folder {self.root}", exc) from None
        created = datetime.now(UTC)
        for _ in range(16):
            session_id = f"{created:%Y%m%d-%H%M%S}-{os.urandom(3).hex()}"
            path = self.path(session_id)
            meta = new_meta(self.redactor, created, session_id, fields)
            line = encode_header(meta)
            try:
                _write_new(path, line)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _failed(f"cannot create session file {path}", exc) from None
            _fsync_dir(self.root)
            replay = Replay(str(path), self._blob_loader(str(path)))
            stat = os.stat(path)
            return Session(self, path, meta, replay, len(line), 1, (stat.st_dev, stat.st_ino))
        raise TranscriptError(f"cannot pick a fresh session id in {self.root}")  # pragma: no cover

    def open(self, session_id: str) -> Session:
        """Open a session by id (or a unique prefix of one) with its current history loaded."""
        path = self.path(self.resolve(session_id))
        loaded = self.load(path)
        return Session(
            self, path, loaded.meta, loaded.replay, loaded.end, loaded.lines, loaded.ident
        )

    def list(
        self, *, on_error: Callable[[TranscriptError], None] | None = None
    ) -> list[SessionInfo]:
        """Every session, the one written last first (`last`).

        Reads each transcript's header, first titled event and last line
        only, so listing does not grow with transcript length. A transcript
        that cannot be read is passed to `on_error` (and skipped), or raises
        when no `on_error` is given.
        """
        infos: list[SessionInfo] = []
        # Paths as strings: a `Path` made per file cost a listing of many
        # sessions more than reading their first lines.
        folder = os.path.join(self.root, "")
        for _, name in self._transcript_names():
            try:
                infos.append(self._summarize(folder + name))
            except TranscriptError as exc:
                if on_error is None:
                    raise
                on_error(exc)
                # A damaged event line is one line: the session is still
                # listed, from the events that can be read.
                with contextlib.suppress(TranscriptError):
                    infos.append(self._salvaged(Path(folder + name)))
        infos.sort(key=last_used_first, reverse=True)
        return infos

    def resolve(self, session_id: str) -> str:
        """The full id of a session named by its id, a unique prefix of it, or `last`.

        `last` is the session used last, by its last write (what `run -c`
        continues, and the top row of `sessions list`); an id is a timestamp
        first, so no real id or prefix of one reads as that word.
        """

        def matches() -> builtins.list[str]:
            if self.path(session_id).exists():
                return [session_id]
            return [m for m in sorted(self.transcripts()) if m.startswith(session_id)]

        return resolve_id(
            session_id, self.location, lambda: self.list(on_error=lambda exc: None), matches
        )

    def remove(self, session_id: str) -> builtins.list[str]:
        """Delete a session's transcript, its index entries and every blob only it referenced.

        Returns the hashes of the blobs removed. A blob another session
        still references is kept; so is one a writer stored or reused after
        this began (see `collect_blobs`).
        """
        full = self.resolve(session_id)
        path = self.path(full)
        started = time.time()
        with self._lock(full):
            own = _hashes(path)
            try:
                path.unlink()
            except OSError as exc:
                raise _failed(f"cannot remove session file {path}", exc) from None
            _fsync_dir(self.root)
        with contextlib.suppress(OSError):
            self._lock_path(full).unlink()
        for listener in self.listeners:
            try:
                listener.on_remove(full)
            except Exception as exc:  # derived data; it catches up from the files
                log.warning("%s could not drop session %s: %s", _name(listener), full, exc)
        return self.collect_blobs(own, started=started) if own else []

    def referenced_blobs(self) -> set[str]:
        """The content hash of every blob some version of some session refers to.

        A transcript that cannot be read is an error, not a skip: what it
        refers to is unknown, so nothing may be collected on its account.
        """
        referenced: set[str] = set()
        for path in self.transcripts().values():
            referenced |= _hashes(path)
        return referenced

    def collect_blobs(
        self, candidates: set[str] | None = None, *, started: float | None = None
    ) -> builtins.list[str]:
        """Delete the blobs no session refers to (only `candidates`, when given); returns them.

        A blob stored or reused (its time refreshed by `put_blob`) after
        `started` (default: now) is kept, since a writer may be about to
        write the line that refers to it. Temporary files a crashed
        `put_blob` left behind are removed once they are a day old.
        """
        started = time.time() if started is None else started
        referenced = self.referenced_blobs()
        removed: builtins.list[str] = []
        folder = self.root / "blobs"
        try:
            shards = sorted(p for p in folder.iterdir() if p.is_dir())
        except FileNotFoundError:
            return removed
        for shard in shards:
            for path in sorted(shard.iterdir()):
                try:
                    mtime = path.stat().st_mtime
                    if path.name.endswith(".tmp"):
                        if mtime < started - 86400:
                            path.unlink()
                        continue
                    sha = path.name
                    if (candidates is not None and sha not in candidates) or sha in referenced:
                        continue
                    if mtime >= started:
                        continue
                    path.unlink()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise _failed(f"cannot remove image blob {path}", exc) from None
                removed.append(sha)
            with contextlib.suppress(OSError):
                shard.rmdir()  # only when empty
        return removed

    def redact(self, session_id: str, pattern: str | re.Pattern[str]) -> int:
        """Cut every match of `pattern` out of a session's every version; returns the lines changed.

        The transcript is rewritten whole (header, every event, a torn last
        line, and the torn lines kept aside for it) into a new file that
        replaces the old one, and the listeners drop the session and take
        it in again. This is the one operation that keeps no earlier
        version: the point is that the string is gone. Signed thinking that
        matches loses its signature (see `carryall.sessions.redact`);
        signatures and image bytes are never searched.
        """
        compiled = compile_pattern(pattern, "redact") if isinstance(pattern, str) else pattern
        redactor = Redactor([compiled], builtin=False)
        full = self.resolve(session_id)
        path = self.path(full)
        where = str(path)
        with self._lock(full):
            data = _read(path)
            lines, end = split_lines(data)
            if not lines:
                raise TranscriptError(f"{where}: no complete header line to redact")
            meta = decode_header(lines[0], where)
            clean_meta = redactor.walk(meta)
            header = lines[0] + b"\n"
            if clean_meta is not meta or _redact_bytes(redactor, lines[0]) != lines[0]:
                # Written again, a field no reader knows (a hand edit) is dropped
                # with whatever it held.
                header = encode_header(clean_meta)
            changed = int(header != lines[0] + b"\n")
            out = [header]
            before: set[str] = set()
            after: set[str] = set()
            for line_no, line in iter_events(lines[1:], 2):
                event = decode_event(line, where, line_no)
                clean = redactor.walk(event, blobs=self)
                before |= event_hashes(event)
                after |= event_hashes(clean)
                if clean is event and _redact_bytes(redactor, line) == line:
                    out.append(line + b"\n")
                    continue
                # The walk changed a field, or the line holds a match the walk
                # does not reach (a field no reader knows, dropped by writing
                # the event again; or an opaque token, which stays).
                new = encode_event(clean)
                out.append(new)
                changed += new != line + b"\n"
            torn = _redact_bytes(redactor, data[end:])
            changed += torn != data[end:]
            out.append(torn)
            try:
                _replace_file(path, b"".join(out))
            except OSError as exc:
                raise _failed(f"cannot rewrite session file {path}; it is as it was", exc) from None
            for kept in sorted((self.root / "torn").glob(f"{full}.*.torn")):
                try:
                    raw = kept.read_bytes()
                    clean = _redact_bytes(redactor, raw)
                    if clean != raw:
                        _replace_file(kept, clean)
                        changed += 1
                except OSError as exc:
                    raise _failed(f"cannot redact the torn line kept in {kept}", exc) from None
            if before - after:
                # A document whose text changed is stored under a new hash: the
                # old bytes still hold the string unless no session refers to them.
                self.collect_blobs(before - after)
            if self.listeners:
                loaded = self.load(path, images=False)
                recorded = _whole(full, loaded.ident, loaded.end, loaded.replay)
                for listener in self.listeners:
                    try:
                        listener.on_remove(full)
                        listener.on_record(recorded)
                    except Exception as exc:  # derived data; it catches up from the files
                        log.warning(
                            "%s could not redact session %s: %s", _name(listener), full, exc
                        )
        return changed

    @property
    def location(self) -> str:
        """Where the store is: its folder."""
        return str(self.root)

    def export_events(self, session_id: str) -> tuple[SessionMeta, builtins.list[bytes]]:
        """A session as it is kept: its header meta and every complete event line, oldest first."""
        path = self.path(self.resolve(session_id))
        lines, _ = split_lines(_read(path))
        if not lines:
            raise TranscriptError(f"{path}: no complete header line")
        return decode_header(lines[0], str(path)), [line for _, line in iter_events(lines[1:], 2)]

    def import_events(self, meta: SessionMeta, lines: Sequence[bytes]) -> None:
        """Add a session exactly as another store kept it: the same id and event lines.

        The events are replayed first (images as stand-ins), so an
        inconsistent session is refused before anything is written; the
        blobs they refer to must be stored already. An existing session
        with that id is an error, never overwritten.
        """
        path = self.path(meta.id)
        where = f"session {meta.id} to import"
        replay = Replay(where, image_stand_in)
        for line_no, line in enumerate(lines, 2):
            replay.apply_line(line, line_no)
        data = encode_header(meta) + b"".join(line + b"\n" for line in lines)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            _link_new(path, data)
        except FileExistsError:
            raise TranscriptError(f"session {meta.id} is already in {self.root}") from None
        except OSError as exc:
            raise _failed(f"cannot write session file {path}", exc) from None
        _fsync_dir(self.root)
        if self.listeners:
            stat = os.stat(path)
            whole = _whole(meta.id, (stat.st_dev, stat.st_ino), len(data), replay)
            for listener in self.listeners:
                try:
                    listener.on_record(whole)
                except Exception as exc:  # derived data; it catches up from the files
                    name = _name(listener)
                    log.warning("%s could not take in session %s: %s", name, meta.id, exc)

    def path(self, session_id: str) -> Path:
        """The transcript file of a session id (which need not exist)."""
        return self.root / f"{checked_id(session_id)}{_SUFFIX}"

    def transcripts(self) -> dict[str, Path]:
        """Every transcript file in the store, by session id (its name without `.jsonl`)."""
        root = self.root
        return {session_id: root / name for session_id, name in self._transcript_names()}

    def _transcript_names(self) -> builtins.list[tuple[str, str]]:
        """`(session id, file name)` of every transcript file in the store."""
        # `scandir` knows each entry's kind from the folder itself: no stat
        # per file, which a store of many sessions pays on every listing.
        try:
            with os.scandir(self.root) as entries:
                return [
                    (entry.name[: -len(_SUFFIX)], entry.name)
                    for entry in entries
                    if entry.name.endswith(_SUFFIX) and entry.is_file()
                ]
        except FileNotFoundError:
            return []

    def load(self, path: Path, *, images: bool = True, keep_versions: bool = False) -> Loaded:
        """Read one transcript in one pass and replay its events.

        The file is streamed in blocks (`LineReader.batches`), never held whole,
        so the load peaks at little more than the session it keeps.
        With `images=False` no image blob is read: each image comes back as
        its stand-in (`image_stand_in`: media type and source, no bytes),
        which is all a reader of placeholders needs. `keep_versions` keeps
        every history a rewrite replaced.
        """
        where = str(path)
        loader = self._blob_loader(where) if images else image_stand_in
        replay = Replay(where, loader, keep_versions=keep_versions)
        meta: SessionMeta | None = None
        try:
            with path.open("rb") as f:
                stat = os.fstat(f.fileno())
                reader = LineReader(f)
                # No pause of the collector: messages and blocks are untracked
                # (gc=False), so a long load gives it nothing to rescan.
                for first, lines in reader.batches():
                    if meta is None:
                        meta = decode_header(lines[0], where)
                        first, lines = first + 1, lines[1:]
                    replay.apply_batch(first, lines)
        except FileNotFoundError:
            raise TranscriptError(f"no session file {path}") from None
        except OSError as exc:
            raise _failed(f"cannot read session file {path}", exc) from None
        if meta is None:
            raise TranscriptError(
                f"{where}: no complete header line (the session was torn while being created)"
            )
        return Loaded(meta, replay, reader.end, reader.count, (stat.st_dev, stat.st_ino))

    # -- image blobs --------------------------------------------------------

    def blob_path(self, sha256: str) -> Path:
        """Where the image bytes with this content hash are kept."""
        checked_hash(sha256)
        return self.root / "blobs" / sha256[:2] / sha256

    def put_blob(self, data: bytes) -> str:
        """Store image bytes once by content hash; returns the hash.

        Written to a temporary name, synced and renamed, so a blob that
        exists is whole and a transcript line never points at half an image.
        """
        sha = hashlib.sha256(data).hexdigest()
        path = self.blob_path(sha)
        if path.exists():
            # Reused: refresh its time, so a `collect_blobs` that began
            # before this keeps it for the line about to refer to it. If it
            # was collected in between, it is simply written again below.
            with contextlib.suppress(OSError):
                os.utime(path)
                return sha
        tmp = path.with_name(f".{sha}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_new(tmp, data)
            os.replace(tmp, path)
            _fsync_dir(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise _failed(f"cannot store image blob {path}", exc) from None
        return sha

    def get_blob(self, sha256: str) -> bytes:
        """The image bytes stored under a content hash, checked against it."""
        path = self.blob_path(sha256)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise MissingBlob(f"image blob {sha256} is missing from {path.parent}") from None
        except OSError as exc:
            raise _failed(f"cannot read image blob {path}", exc) from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise TranscriptError(f"image blob {path} does not match its hash (damaged)")
        return data

    def _blob_loader(self, where: str) -> BlobLoader:
        return blob_loader(where, self.get_blob)

    # -- reading ------------------------------------------------------------

    def _summarize(self, path: str) -> SessionInfo:
        where = path
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                first = f.readline()
                if not first.endswith(b"\n"):
                    raise TranscriptError(
                        f"{where}: no complete header line "
                        "(the session was torn while being created)"
                    )
                meta = decode_header(first[:-1], where)
                title = meta.title
                line_no = 1
                while title is None:
                    line = f.readline()
                    line_no += 1
                    if not line.endswith(b"\n"):
                        break
                    if line.strip():
                        title = decode_head(line, where, line_no).title
                last = _last_line(f, size)
        except OSError as exc:
            raise _failed(f"cannot read session file {path}", exc) from None
        turns, updated, failed = 0, meta.created, None
        if last is not None and last[0] > 0:
            head = decode_head(last[1], where, None)
            turns, updated, failed = head.n, parse_time(head.time), head.failed
        return SessionInfo(
            meta=with_title(meta, title), turns=turns, updated=updated, failed=failed
        )

    def _salvaged(self, path: Path) -> SessionInfo:
        """A listing of a session whose head or last line is damaged, from a whole load.

        Raises when even the header cannot be read (nothing to list).
        """
        loaded = self.load(path, images=False)
        replay = loaded.replay
        updated = parse_time(replay.updated) if replay.updated else loaded.meta.created
        return SessionInfo(
            meta=with_title(loaded.meta, replay.title), turns=len(replay.messages), updated=updated
        )

    # -- locking ------------------------------------------------------------

    def _lock_folder(self) -> None:
        if not self._locks_ready:
            folder = self.root / "locks"
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _failed(f"cannot create lock folder {folder}", exc) from None
            self._locks_ready = True

    def _lock_path(self, session_id: str) -> Path:
        return self.root / "locks" / f"{session_id}.lock"

    @contextlib.contextmanager
    def _lock(self, session_id: str) -> Iterator[None]:
        """Hold the session's writer lock (the one `Session._locked` takes) for a block."""
        path = self._lock_path(session_id)
        self._lock_folder()
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise _failed(f"cannot lock session {session_id} ({path})", exc) from None
        try:
            _flock(fd, self.lock_timeout, f"session {session_id}", path)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _flock(fd: int, timeout: float, what: str, path: Path) -> None:
    """Take the exclusive `flock` on `fd`, the lock file `path` of `what`.

    A free lock (the common case) costs one call; a held one is waited for
    with growing pauses, up to `timeout` seconds, then refused by name.
    """
    deadline = None
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            now_ = time.monotonic()
            if deadline is None:
                deadline = now_ + timeout
            elif now_ >= deadline:
                raise TranscriptError(
                    f"{what}: another writer has held {path} for over {timeout:g}s"
                ) from None
        except OSError as exc:
            raise _failed(f"cannot lock {what}", exc) from None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


class Session(ReplayedSession):
    """One recorded conversation: its meta and its history, appended as it grows.

    The agent loop's use, which is kept stable:

        session = Store().create(backend="anthropic", model="...", cwd=workdir)
        history = session.messages()          # [] for a new session
        while ...:
            started = list(history)           # what the store holds now
            ...run a turn (or a step), growing or compacting `history`...
            session.record(started, history)  # "append" or "rewrite"

    `started_from` is the history as it was last recorded (or loaded), not
    as it was when the run began: recording twice from one `started` makes
    the second a rewrite. A resumed run (`carryall chat --resume ID`) opens
    the session with `Store().open(ID)` and continues the same way.
    """

    store: SessionStore

    def __init__(
        self,
        store: SessionStore,
        path: Path,
        meta: SessionMeta,
        replay: Replay,
        end: int,
        lines: int,
        ident: tuple[int, int],
    ) -> None:
        self.store = store
        self.path = path
        self._meta = meta
        self._replay = replay
        self._end = end
        self._lines = lines
        self._ident = ident
        self._lock_fd: int | None = None
        self._fd: tuple[int, tuple[int, int]] | None = None
        self._fd_closer: Callable[[], object] | None = None

    def __repr__(self) -> str:
        return f"<Session {self.id} {len(self)} messages>"

    def refresh(self) -> None:
        """Read events other writers added since this session was loaded."""
        self._catch_up(repair=False)

    def versions(self) -> list[list[Message]]:
        """Every history this session has held, oldest first, the current one last.

        Each rewrite replaces a history; the replaced one is still in the
        transcript, and this is how it is recovered.
        """
        loaded = self.store.load(self.path, keep_versions=True)
        return [*loaded.replay.versions, loaded.replay.messages]

    # -- internals ----------------------------------------------------------

    def _locked(self) -> int:
        """Take the session's writer lock; returns its descriptor, which `_write` unlocks.

        The lock is a `flock` on a lock file this session keeps open: the
        same lock on the same file as the store's `_lock` (used by `remove`
        and `redact`), so every writer excludes every other; keeping the
        descriptor saves opening the lock file on every append. A held lock
        is waited for up to the store's `lock_timeout` (`_flock`).
        """
        fd = self._lock_fd
        if fd is None:
            path = self.store._lock_path(self.id)
            self.store._lock_folder()
            try:
                fd = self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise _failed(f"cannot lock session {self.id} ({path})", exc) from None
            weakref.finalize(self, os.close, fd)
        _flock(fd, self.store.lock_timeout, f"session {self.id}", self.store._lock_path(self.id))
        return fd

    def _catch_up(self, *, repair: bool) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            raise TranscriptError(
                f"session {self.id}: transcript {self.path} is gone (removed?)"
            ) from None
        except OSError as exc:
            raise _failed(f"cannot read session file {self.path}", exc) from None
        if (stat.st_dev, stat.st_ino) != self._ident or stat.st_size < self._end:
            self._reload()
            stat = os.stat(self.path)
        if stat.st_size == self._end:
            return
        try:
            with self.path.open("rb") as f:
                f.seek(self._end)
                data = f.read(stat.st_size - self._end)
        except OSError as exc:
            raise _failed(f"cannot read session file {self.path}", exc) from None
        lines, covered = split_lines(data)
        try:
            for line_no, line in iter_events(lines, self._lines + 1):
                self._replay.apply_line(line, line_no)
        except TranscriptError:
            # Some of the new events may be applied: read the whole file next time.
            self._ident = (-1, -1)
            raise
        self._end += covered
        self._lines += len(lines)
        torn = data[covered:]
        if torn and repair:
            self._move_aside(torn)

    def _reload(self) -> None:
        loaded = self.store.load(self.path)
        if loaded.meta.id != self.id:
            raise TranscriptError(
                f"{self.path}: now holds session {loaded.meta.id!r}, not {self.id!r}"
            )
        self._meta = loaded.meta
        self._replay = loaded.replay
        self._end = loaded.end
        self._lines = loaded.lines
        self._ident = loaded.ident

    def _move_aside(self, torn: bytes) -> None:
        """Keep a torn last line in `torn/` and cut it from the transcript.

        Never deleted: a torn line is most likely half an event a crash
        interrupted, but it is still bytes a person may want to look at.
        """
        folder = self.store.root / "torn"
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        keep = folder / f"{self.id}.{self._end}.{stamp}.torn"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _write_new(keep, torn)
            _fsync_dir(folder)
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, self._end)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TranscriptError(
                f"session {self.id}: cannot repair the torn last line of {self.path} "
                f"(moving it to {keep}): {_reason(exc)}"
            ) from None
        log.warning("session %s: moved a torn last line (%d bytes) to %s", self.id, len(torn), keep)

    def _write(self, decide: Callable[[], Plan], extras: Extras) -> RecordKind:
        # The writer lock held with the session caught up with the
        # transcript (another writer's events read, a torn line moved aside),
        # so `decide` plans on the history as it is.
        fd = self._locked()
        try:
            self._catch_up(repair=True)
            plan = decide()
            extras = self._noted(extras)
            if plan.kind == "rewrite" or plan.messages or extras.usage or extras.system is not None:
                stamp = now()
                put_blob = self.store.put_blob
                line, clean, title = self._line(plan.kind, plan.messages, stamp, put_blob, extras)
                before = self._end
                self._write_line(line)
                keep = self._apply(plan.kind, plan.messages, stamp, title, extras)
                if plan.kind == "rewrite":
                    self._publish(before, keep, clean[keep:], self._replay.times[keep:])
                else:
                    self._publish(before, keep, clean, [stamp] * len(clean))
            self._base = plan.base
            return plan.kind
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _write_line(self, line: bytes) -> None:
        """Append one event line whole and sync it, or leave the file as it was."""
        fd = self._append_fd()
        try:
            _write_whole(fd, line)
            os.fsync(fd)
        except OSError as exc:
            # The event was not acknowledged, so no line of it may stay:
            # cut back to the last whole event. Should even that fail, the
            # partial line is a torn line that the next writer moves aside.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._end)
                os.fsync(fd)
            raise TranscriptError(
                f"session {self.id}: cannot write to {self.path}: {_reason(exc)}; "
                "the transcript keeps every earlier event"
            ) from None
        self._end += len(line)
        self._lines += 1

    def _append_fd(self) -> int:
        """The transcript opened for appending, kept while it is the same file (`_ident`)."""
        if self._fd is not None and self._fd[1] == self._ident:
            return self._fd[0]
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            raise TranscriptError(
                f"session {self.id}: transcript {self.path} is gone (removed?)"
            ) from None
        except OSError as exc:
            raise _failed(f"cannot open session file {self.path}", exc) from None
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != self._ident:
            os.close(fd)  # replaced between the catch-up and here: never write to another file
            raise TranscriptError(f"session {self.id}: {self.path} was replaced while writing")
        if self._fd_closer is not None:
            self._fd_closer()
        self._fd = (fd, self._ident)
        self._fd_closer = weakref.finalize(self, os.close, fd)
        return fd

    def _publish(self, before: int, first: int, messages: list[Message], times: list[str]) -> None:
        if not self.store.listeners:
            return
        recorded = Recorded(
            session_id=self.id,
            ident=self._ident,
            before=before,
            after=self._end,
            first=first,
            messages=messages,
            times=times,
            total=len(self._replay.messages),
        )
        for listener in self.store.listeners:
            try:
                listener.on_record(recorded)
            except Exception as exc:
                # Derived data: the transcript is already safe, and the
                # listener catches up from the files.
                log.warning("%s could not take in session %s: %s", _name(listener), self.id, exc)


def _write_whole(fd: int, data: bytes) -> None:
    """Write all of `data`: one `write` call, looped only if the kernel writes short."""
    written = os.write(fd, data)
    rest = memoryview(data)
    while written < len(rest):
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        rest = rest[written:]
        written = os.write(fd, rest)


def _write_new(path: Path, data: bytes) -> None:
    """Create a file that must not exist yet (owner-only), write it whole and sync it.

    A failure leaves no file behind: a half-written one would look whole.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _write_whole(fd, data)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    os.close(fd)


def _link_new(path: Path, data: bytes) -> None:
    """Create a file that must not exist yet, whole or not at all, even if the process dies.

    The bytes go to a synced temporary file beside it, which is then linked
    at `path` (refused if something is there) and unlinked: a copy killed
    part way leaves at most a `.tmp` file, never a shorter session that
    reads as valid, so the copy can be run again.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    _write_new(tmp, data)
    try:
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _hashes(path: Path) -> set[str]:
    """The blob hashes a transcript refers to, in any of its versions."""
    where = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise _failed(f"cannot read session file {path}", exc) from None
    lines, _ = split_lines(data)
    found: set[str] = set()
    for line_no, line in iter_events(lines[1:], 2):
        if not has_blob(line):  # as in `decode_event`: no block by hash can be there
            continue
        for message in decode_event(line, where, line_no).messages:
            found.update(b.sha256 for b in message.content if isinstance(b, Stored) and b.sha256)
    return found


def _replace_file(path: Path, data: bytes) -> None:
    """Replace a file's contents whole: a synced temporary file renamed over it."""
    import tempfile  # only a rewrite in place needs it, never a reader

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            _write_whole(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _redact_bytes(redactor: Redactor, data: bytes) -> bytes:
    """Bytes that are not a whole event (a torn line) redacted as text, undecodable bytes kept."""
    if not data:
        return data
    return redactor.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def _fsync_dir(path: Path) -> None:
    """Sync a folder so a new or renamed entry in it survives a crash."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _last_line(f: BinaryIO, size: int) -> tuple[int, bytes] | None:
    """The offset and bytes of a file's last complete line, read backwards from its end.

    Bytes after the last newline are a torn write and do not count.
    """
    block = 65536
    pos = size
    buf = b""
    end = -1  # index in buf of the newline that ends the last complete line
    start = -1  # index in buf of the newline before it
    while pos > 0:
        step = min(block, pos)
        pos -= step
        f.seek(pos)
        chunk = f.read(step)
        buf = chunk + buf
        if end >= 0:
            end += len(chunk)
        else:
            end = buf.rfind(b"\n")
            if end < 0:
                continue
        start = buf.rfind(b"\n", 0, end)
        if start >= 0:
            break
    if end < 0:
        return None
    return pos + start + 1, buf[start + 1 : end]


def _whole(session_id: str, ident: tuple[int, int], end: int, replay: Replay) -> Recorded:
    """A whole session as one event a listener hears: everything from message 0 is new."""
    return Recorded(
        session_id=session_id,
        ident=ident,
        before=0,
        after=end,
        first=0,
        messages=replay.messages,
        times=replay.times,
        total=len(replay.messages),
    )


def _name(listener: StoreListener) -> str:
    """A listener as a log line names it: its class (`RecallIndex`)."""
    return type(listener).__name__


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _read(path: Path) -> bytes:
    """A transcript's bytes; a file that cannot be read is an error naming it and why."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _failed(f"cannot read session file {path}", exc) from None


def _failed(what: str, exc: OSError) -> TranscriptError:
    """An I/O failure as one line: what was being done, where, and the system's reason."""
    return TranscriptError(f"{what}: {_reason(exc)}")

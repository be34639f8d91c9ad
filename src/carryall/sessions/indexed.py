"""`Store`: the session store with its recall index, as carryall uses it.

`SessionStore` (in `store`) keeps the transcripts and knows no index;
`RecallIndex` (in `recall`) keeps the full-text index and reads the store
through its public methods. This is the one place the two are put together,
so the imports run one way (indexed -> recall -> store -> transcript) and a
store without an index is just `SessionStore`. A search catches the index
up from the transcripts, reading only what each gained since, so `carryall
recall` finds what `run`, `chat` and `sessions import` recorded while a
recording itself spends nothing on the index.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

from carryall import paths
from carryall.config import load_config
from carryall.errors import TranscriptError
from carryall.sessions.jsonl import SessionStore, StoreListener
from carryall.sessions.protocol import AnyStore
from carryall.sessions.recall import RecallIndex
from carryall.sessions.redact import Redactor

__all__ = ["Store", "open_store"]


class Store(SessionStore):
    """A session store with its full-text recall index (`self.recall`).

    `Store()` uses `default_root()`; tests and tools pass their own root.
    The index is derived data, kept off the recording path: a search first
    catches it up from the transcripts (reading only what each gained), so
    an append costs what the transcript costs. With `recall=True` the index
    listens instead, hearing every write and removal and indexing them in
    batches in the writing process: for a process that searches often what
    it writes itself, at the cost of that indexing on its appends. Either
    way a failure to update the index never fails a recording.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        recall: bool = False,
        listeners: Iterable[StoreListener] = (),
        lock_timeout: float = 30.0,
        redactor: Redactor | None = None,
    ) -> None:
        super().__init__(root, listeners=listeners, lock_timeout=lock_timeout, redactor=redactor)
        self.recall = RecallIndex(self)
        """The full-text index over every session (`carryall recall`)."""
        if recall:
            self.listeners.append(self.recall)

    def redact(self, session_id: str, pattern: str | re.Pattern[str]) -> int:
        """`SessionStore.redact`, then the session dropped from the index and the index compacted.

        The redacted transcript keeps its size, so a catch-up would not see
        it changed: the index forgets the session (its next search reads it
        again, redacted) and is compacted so no deleted row keeps the string.
        """
        changed = super().redact(session_id, pattern)
        self.recall.on_remove(session_id)
        self.recall.purge()
        return changed


def open_store(location: str | os.PathLike[str] | None = None, *, recall: bool = False) -> AnyStore:
    """The session store at `location`: a folder path, a `file:` URL, or a `postgresql://` URL.

    Without one: `$CARRYALL_STORE`, else the config file's `store`, else
    `default_root()`. Every command that reads or writes sessions opens its
    store here, so `--store`, the variable and the config key mean the
    same thing everywhere. A folder is the JSON Lines `Store`; a
    `postgresql://` (or `postgres://`) URL is `carryall.sessions.postgres`,
    which needs `carryall[postgres]` and keeps its index in the database
    (`recall` does not apply to it). A URL of any other scheme is a clear
    error.
    """
    chosen: str | os.PathLike[str] | None = location
    if chosen is None:
        chosen = paths.store_location() or load_config().store
    if chosen is None:
        return Store(recall=recall)
    if isinstance(chosen, os.PathLike):
        return Store(chosen, recall=recall)
    if urllib.parse.urlsplit(chosen).scheme in _POSTGRES:
        from carryall.sessions.postgres import PostgresStore

        return PostgresStore(chosen)
    return Store(_folder(chosen), recall=recall)


_POSTGRES = ("postgresql", "postgres")


def _folder(location: str) -> Path:
    """The folder a store location names: a path, `~` expanded, or a `file:` URL."""
    if not location.strip():
        raise TranscriptError("session store location is empty")
    scheme = urllib.parse.urlsplit(location).scheme
    # One letter is a Windows drive (C:\\...), not a scheme.
    if len(scheme) <= 1:
        return Path(location).expanduser()
    if scheme == "file":
        parts = urllib.parse.urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise TranscriptError(
                f"session store {location!r}: a file: URL must name a local folder, "
                f"not one on host {parts.netloc!r}"
            )
        # urllib.request (with http.client, email and ssl) loads only for a file: URL.
        from urllib.request import url2pathname

        return Path(url2pathname(parts.path)).expanduser()
    raise TranscriptError(
        f"session store {location!r}: unknown kind of store {scheme + ':'!r}; "
        "this carryall opens a folder path or a file: URL (JSON Lines transcripts) "
        "or a postgresql:// URL"
    )

"""What a session store promises, whatever keeps the sessions.

Two stores keep the promise: the JSON Lines folder (`carryall.sessions.Store`,
the embedded default) and PostgreSQL (`carryall.sessions.postgres`), and
`carryall.sessions.open_store` opens either from a path or a URL. The agent
loop, the CLI, the TUI and the readers hold a `SessionStore`-shaped value
typed as `AnyStore` and never ask which one it is. One conformance suite
(`tests/test_store_conformance.py`) runs every promise here against both.

Both stores keep the same events: a header (`SessionMeta`) and event lines
in the transcript format (`carryall.sessions._transcript`), images as
content hashes of bytes kept once. That is also how a session moves from
one store to another (`export_events` then `import_events`, used by
`carryall sessions copy`): the lines are copied as they are, so every
version and every time comes across unchanged.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Literal, Protocol

from carryall.blocks import Downgrade, Message
from carryall.errors import TranscriptError
from carryall.sessions._transcript import SessionMeta
from carryall.sessions.recall import Hit
from carryall.sessions.store import SessionInfo

__all__ = ["AnySession", "AnyStore", "Recall"]


class AnySession(Protocol):
    """One recorded conversation, open for reading and appending."""

    @property
    def id(self) -> str:
        """The session id."""

    @property
    def meta(self) -> SessionMeta:
        """Id, creation time, backend, model, working directory, title, system prompt."""

    def messages(self) -> list[Message]:
        """The current history, as a new list the caller may change."""

    def times(self) -> list[datetime]:
        """When each message of the current history was recorded in its current form."""

    def __len__(self) -> int:
        """How many messages the current history holds."""

    def record(
        self,
        started_from: Sequence[Message],
        left_behind: Sequence[Message],
        downgrades: Sequence[Downgrade] = (),
    ) -> Literal["append", "rewrite"]:
        """Append the new tail when `started_from` is what the store holds, else rewrite.

        `downgrades` (what the run's requests could not send as held) ride
        on the event written, and `downgrades()` lists them afterwards.

        A rewrite keeps every earlier history recoverable (`versions`); two
        writers never interleave, and a writer whose `started_from` another
        writer changed underneath gets a rewrite, never a silent merge.
        """

    def append(self, messages: Sequence[Message], *, failed: str | None = None) -> None:
        """Append messages after whatever the store holds now (another writer's included).

        `failed` is the error of the request they were sent in: the prompt is
        kept, with why, and the session lists as failed until the next write.
        """

    def refresh(self) -> None:
        """Read events other writers added since this session was loaded."""

    def versions(self) -> list[list[Message]]:
        """Every history this session has held, oldest first, the current one last."""

    def downgrades(self) -> list[Downgrade]:
        """Every downgrade recorded in this session, in the order recorded."""

    @property
    def damage(self) -> list[str]:
        """The damaged event lines reading skipped, each named by its line number."""


class Recall(Protocol):
    """A store's full-text search: the same query escaping and the same `Hit` everywhere."""

    def search(
        self,
        query: str,
        *,
        since: datetime | None = None,
        role: str | None = None,
        session: str | None = None,
        limit: int = 20,
        sync: bool = True,
    ) -> list[Hit]:
        """The best-ranked messages containing every word of `query` (taken literally)."""

    def reindex(self) -> int:
        """Rebuild the index from the sessions themselves; returns the messages indexed."""


class AnyStore(Protocol):
    """A session store: sessions by id, their versions, blobs by content hash, and recall."""

    @property
    def location(self) -> str:
        """Where the store is, as a person would name it (a folder, or a URL without password)."""

    @property
    def recall(self) -> Recall:
        """Full-text search over every session."""

    def create(
        self,
        *,
        backend: str = "",
        model: str = "",
        cwd: str | os.PathLike[str] | None = None,
        title: str | None = None,
        system: str | None = None,
        origin: str | None = None,
        tools: Sequence[str] | None = None,
        base_url: str | None = None,
        options: Mapping[str, int | float | bool] | None = None,
    ) -> AnySession:
        """Start a new, empty session (`origin`: where an imported history came from)."""

    def open(self, session_id: str) -> AnySession:
        """Open a session by id (or a unique prefix of one) with its current history loaded."""

    def list(
        self, *, on_error: Callable[[TranscriptError], None] | None = None
    ) -> builtins.list[SessionInfo]:
        """Every session, the one written last first; an unreadable one goes to `on_error`."""

    def resolve(self, session_id: str) -> str:
        """The full id of a session named by its id or a unique prefix of it."""

    def remove(self, session_id: str) -> builtins.list[str]:
        """Delete a session and every blob only it referenced; returns the hashes removed."""

    def redact(self, session_id: str, pattern: str | re.Pattern[str]) -> int:
        """Cut a pattern out of a session's every version and the index; returns what changed."""

    def put_blob(self, data: bytes) -> str:
        """Store bytes once by content hash; returns the hash."""

    def get_blob(self, sha256: str) -> bytes:
        """The bytes stored under a content hash, checked against it."""

    def referenced_blobs(self) -> set[str]:
        """The content hash of every blob some version of some session refers to."""

    def collect_blobs(
        self, candidates: set[str] | None = None, *, started: float | None = None
    ) -> builtins.list[str]:
        """Delete the blobs no session refers to; returns their hashes."""

    def export_events(self, session_id: str) -> tuple[SessionMeta, builtins.list[bytes]]:
        """A session as it is kept: its header meta and every event line, oldest first."""

    def import_events(self, meta: SessionMeta, lines: Sequence[bytes]) -> None:
        """Add a session exactly as another store kept it (same id, same events).

        The blobs its events refer to must be stored first (`put_blob`). A
        session with that id already here is an error, never overwritten.
        """

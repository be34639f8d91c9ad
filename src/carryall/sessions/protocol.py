"""What a session store promises, whatever keeps the sessions.

Two stores keep the promise: the JSON Lines folder (`carryall.sessions.Store`,
the embedded default) and PostgreSQL (`carryall.sessions.postgres`), and
`carryall.sessions.open_store` opens either from a path or a URL. The agent
loop, the CLI, the TUI and the readers hold a `SessionStore`-shaped value
typed as `AnyStore` and never ask which one it is. One conformance suite
(`tests/sessions/test_conformance.py`) runs every promise here against both.

Both stores keep the same events: a header (`SessionMeta`) and event lines
in the transcript format (`carryall.sessions._transcript`), images as
content hashes of bytes kept once. That is also how a session moves from
one store to another (`export_events` then `import_events`, used by
`carryall sessions copy`): the lines are copied as they are, so every
version and every time comes across unchanged.

Two writers on one session (two `run -c`, a worker pool) never hide each
other's turns. `plan_record` is the one decision both stores make, inside
the lock or transaction that serializes their writes, after reading what
other writers added:

- the history a writer started from is what the session holds: its new
  tail is appended (`"append"`), or, when it changed what it started from
  (a compaction, an edit), the whole history is written as a rewrite that
  replaces exactly that history (`"rewrite"`);
- another writer appended underneath: a writer whose change is a pure
  append has its tail appended after the other writer's messages
  (`"merge"`) when that is still a valid history, a new user turn after a
  finished turn; otherwise nothing is written and `SessionConflict` names
  both versions and carries the messages not recorded;
- another writer rewrote underneath, or a writer's rewrite replaces a
  history that is no longer current: `SessionConflict`, nothing written.

So an acknowledged message leaves the current history only through a
rewrite whose writer saw it, and every earlier history stays in `versions()`.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol, TypedDict, Unpack

import msgspec

from carryall.blocks import Downgrade, Message, ToolResult, validate_history
from carryall.errors import HistoryError, SessionConflict, TranscriptError
from carryall.sessions._transcript import SessionMeta, SystemChange, common_prefix
from carryall.usage import RequestUsage

__all__ = [
    "AnySession",
    "AnyStore",
    "Base",
    "Hit",
    "NewSession",
    "Plan",
    "Recall",
    "RecordKind",
    "SessionInfo",
    "plan_record",
]

RecordKind = Literal["append", "merge", "rewrite"]
"""What `record` did: appended the tail, appended it after another writer's, or rewrote."""


class Base(NamedTuple):
    """Where a writer's own history stands in the session after its tail was merged.

    After a merge the writer's history (`view`) is no longer a prefix of the
    session's: the session holds the other writer's messages in between.
    `view` stands for the session's first `at` messages for as long as no
    rewrite (`version`) intervenes, so the writer's next step appends on.
    """

    view: list[Message]
    at: int
    version: int


@dataclass(frozen=True)
class Plan:
    """The write `plan_record` decided on."""

    kind: RecordKind
    messages: list[Message]
    """The tail to append (`append`, `merge`), or the whole history (`rewrite`)."""
    base: Base | None
    """What the writer's history stands for once written (None: it is the session's)."""


def plan_record(
    session_id: str,
    stored: Sequence[Message],
    version: int,
    started: list[Message],
    left: list[Message],
    *,
    base: Base | None = None,
    seen_version: int | None = None,
) -> Plan:
    """Decide what `record(started, left)` writes onto the `stored` history (version `version`).

    `base` is where a merge left the writer (see `Base`); `seen_version` the
    version the writer last read, named in a conflict. Raises
    `SessionConflict` when the write would hide another writer's messages.
    """
    k = len(started)
    extends = len(left) >= k and common_prefix(started, left) == k
    at: int | None = None
    if (
        base is not None
        and base.version == version
        and len(stored) >= base.at
        and started == base.view
    ):
        at = base.at
    if at is None and len(stored) >= k and common_prefix(started, stored) == k:
        at = k

    def conflict(reason: str) -> SessionConflict:
        start_version = version if seen_version is None else seen_version
        return SessionConflict(
            session_id,
            reason,
            started=(start_version + 1, k),
            current=(version + 1, len(stored)),
            unrecorded=left[k:] if extends else left,
        )

    if extends and len(left) == k:
        return Plan("append", [], base)  # nothing new: written nowhere, whatever happened
    if at is not None and at == len(stored):
        if extends:
            tail = left[k:]
            return Plan("append", tail, None if at == k else Base(left, at + len(tail), version))
        if at == k:
            return Plan("rewrite", left, None)
        raise conflict(
            "a rewrite must replace the session's current history, "
            "and this one holds another writer's messages it never saw"
        )
    if at is None:
        raise conflict(
            "another writer rewrote the history in between"
            if version != seen_version and seen_version is not None
            else "the history this write started from is not the session's"
        )
    if not extends:
        raise conflict("a rewrite must replace the session's current history")
    tail = left[k:]
    reason = unplaceable(stored, tail)
    if reason is not None:
        raise conflict(reason)
    return Plan("merge", tail, Base(left, len(stored) + len(tail), version))


def unplaceable(stored: Sequence[Message], tail: Sequence[Message]) -> str | None:
    """Why `tail` cannot go after another writer's `stored` history, or None when it can.

    It can when it is a new user turn after a finished one: the session ends
    on an assistant message that calls no tool, and the tail begins with a
    user message that answers none and is a valid history by itself.
    """
    last = stored[-1]
    if last.role != "assistant" or last.tool_uses():
        what = "an unanswered tool call" if last.tool_uses() else f"a {last.role} message"
        return f"the other writer's turn is not finished (the session ends on {what})"
    first = tail[0]
    if first.role != "user" or any(type(b) is ToolResult for b in first.content):
        return "this write's new messages continue a turn rather than begin a new one"
    try:
        validate_history(tail)
    except HistoryError as exc:
        return f"this write's new messages are not a whole turn ({exc})"
    return None


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
        *,
        usage: Sequence[RequestUsage] = (),
    ) -> RecordKind:
        """Record what a run left behind, given the history it started from (`plan_record`).

        An append of the new tail; a merge, that tail after what another
        writer appended meanwhile; or, when `left_behind` changes
        `started_from`, a rewrite replacing exactly `started_from`. A write
        that would hide another writer's messages raises `SessionConflict`
        and writes nothing. A rewrite keeps every earlier history
        recoverable (`versions`); two writers never interleave.

        `downgrades` (what the run's requests could not send as held) ride
        on the event written, and `downgrades()` lists them afterwards; so
        does `usage` (what each request used), listed by `usage()`. With
        usage to keep and no message new, an append of no messages carries it.
        """

    def append(self, messages: Sequence[Message], *, failed: str | None = None) -> None:
        """Append messages after whatever the store holds now (another writer's included).

        `failed` is the error of the request they were sent in: the prompt is
        kept, with why, and the session lists as failed until the next write.
        """

    def change_system(self, system: str | None) -> None:
        """Record that the system prompt is `system` from the next message on (None: cleared).

        Written at once, as an event of its own, so a continued run (`-c`)
        and every reader find it; the same prompt again writes nothing.
        """

    @property
    def system(self) -> str | None:
        """The system prompt now: the last change recorded, else `meta.system`."""

    def system_changes(self) -> list[SystemChange]:
        """Every change of the system prompt after the session began, in the order recorded."""

    def refresh(self) -> None:
        """Read events other writers added since this session was loaded."""

    def rewrite(
        self,
        replaces: Sequence[Message],
        history: Sequence[Message],
        *,
        changes: Sequence[str] = (),
    ) -> None:
        """Replace the current history, which must be `replaces`, with `history`, naming changes.

        An explicit rewrite (a repair, an edit): `changes` are written on the
        event, and the replaced history stays in `versions()`. When `replaces`
        is no longer what the session holds, `SessionConflict`, nothing written.
        """

    def continue_from(self, view: Sequence[Message]) -> None:
        """Take `view` as the writer's own form of the current history (its media fetched, say).

        A `record` that starts from `view` then appends onto the history the
        session holds, rather than rewriting it into the writer's form.
        """

    def versions(self) -> list[list[Message]]:
        """Every history this session has held, oldest first, the current one last."""

    def downgrades(self) -> list[Downgrade]:
        """Every downgrade recorded in this session, in the order recorded."""

    def usage(self) -> list[RequestUsage]:
        """Every request's usage recorded in this session, in the order recorded."""

    @property
    def damage(self) -> list[str]:
        """The damaged event lines reading skipped, each named by its line number."""


class SessionInfo(msgspec.Struct, frozen=True):
    """One row of a sessions list: the meta, how many messages, when last written."""

    meta: SessionMeta
    turns: int
    """Messages in the current history (each user or assistant message is a turn)."""
    updated: datetime
    failed: str | None = None
    """The error of the last request, when the last thing recorded is a prompt that failed."""


class Hit(msgspec.Struct, frozen=True):
    """One message that matched: where it is, when it was said, and a snippet.

    `snippet` is plain text; `matches` are the `(start, end)` character
    spans in it of the words that matched, for a reader to highlight.
    """

    session: str
    message: int
    role: str
    time: datetime
    snippet: str
    matches: tuple[tuple[int, int], ...] = ()
    rank: float = 0.0


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
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Hit]:
        """The best-ranked messages containing every word of `query` (taken literally).

        An index that catches up before it answers (`sync`) tells
        `progress(done, total)` of each session it catches up.
        """

    def reindex(self) -> int:
        """Rebuild the index from the sessions themselves; returns the messages indexed."""


class NewSession(TypedDict, total=False):
    """What a session is created with (`AnyStore.create`): every field may be left out.

    The same fields as the `SessionMeta` the store writes, which takes them
    redacted, with `cwd` the current working directory when not given.
    """

    backend: str
    model: str
    cwd: str | os.PathLike[str] | None
    title: str | None
    """What the session is called; else the first thing a person says, once recorded."""
    system: str | None
    origin: str | None
    """Where an imported history came from."""
    tools: Sequence[str] | None
    """The names of the tools offered."""
    base_url: str | None
    options: Mapping[str, Any] | None
    output_schema: Mapping[str, Any] | None


class AnyStore(Protocol):
    """A session store: sessions by id, their versions, blobs by content hash, and recall."""

    @property
    def location(self) -> str:
        """Where the store is, as a person would name it (a folder, or a URL without password)."""

    @property
    def recall(self) -> Recall:
        """Full-text search over every session."""

    def create(self, **fields: Unpack[NewSession]) -> AnySession:
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

"""The session core both stores build on: what a session reads, how an event is made storable.

`carryall.sessions.jsonl` (JSON Lines) and `carryall.sessions.postgres`
keep sessions in different places and lock them differently; everything
else about a session is here, written once: the replayed session both
session classes read from (`ReplayedSession`), a sessions-list row
(`SessionInfo`), the one redaction of an event's messages (`writable`),
images and documents kept by hash (`storable`, `blob_loader`), and the
append-merge-or-rewrite decision (`carryall.sessions.protocol.plan_record`,
asked through `ReplayedSession._plan`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import msgspec

from carryall._lazy import lazy_logger
from carryall.blocks import Document, Downgrade, Image, Message, Text
from carryall.errors import BlockError, SessionConflict, TranscriptError
from carryall.sessions._transcript import (
    BlobLoader,
    Replay,
    SessionMeta,
    StoredBlock,
    StoredDocument,
    StoredImage,
    StoredMessage,
    SystemChange,
    blob_placeholder,
    has_image,
    image_stand_in,
    parse_time,
    revive,
    with_title,
)
from carryall.sessions.protocol import Base, Plan, plan_record
from carryall.sessions.redact import Redactor
from carryall.usage import RequestUsage

__all__ = [
    "LAST",
    "MissingBlob",
    "ReplayedSession",
    "SessionInfo",
    "blob_loader",
    "check_replaces",
    "checked_hash",
    "checked_id",
    "last_used_first",
    "storable",
    "writable",
]

log = lazy_logger("carryall.sessions")

_NOTE = "(its bytes are missing from the session store)"

LAST: Final = "last"
"""The session id that names the session used last, in every command that takes one."""


_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def checked_id(session_id: str) -> str:
    """A session id as every store takes it (a file name, a key); anything else is refused."""
    if not _ID.fullmatch(session_id):
        raise TranscriptError(f"{session_id!r} is not a session id")
    return session_id


def checked_hash(sha256: str) -> str:
    """A blob's content hash as every store takes it: 64 lowercase hex digits."""
    if not _SHA256.fullmatch(sha256):
        raise TranscriptError(f"{sha256!r} is not a sha256 content hash")
    return sha256


class MissingBlob(TranscriptError):
    """No bytes are stored under a content hash (deleted, or never stored): not damage."""


class SessionInfo(msgspec.Struct, frozen=True):
    """One row of a sessions list: the meta, how many messages, when last written."""

    meta: SessionMeta
    turns: int
    """Messages in the current history (each user or assistant message is a turn)."""
    updated: datetime
    failed: str | None = None
    """The error of the last request, when the last thing recorded is a prompt that failed."""


class ReplayedSession:
    """What every store's session reads off its replayed events: the one home of these.

    A store's session class (`Session`, `PostgresSession`) keeps its header
    meta in `_meta`, its replayed events in `_replay` and, after a merge,
    where its writer's history stands in the session in `_base`.
    """

    _meta: SessionMeta
    _replay: Replay
    _base: Base | None = None

    @property
    def id(self) -> str:
        """The session id (for the JSON Lines store also the transcript's file name)."""
        return self._meta.id

    @property
    def meta(self) -> SessionMeta:
        """Id, creation time, backend, model, working directory, title, system prompt."""
        return with_title(self._meta, self._replay.title)

    def messages(self) -> list[Message]:
        """The current history, as a new list the caller may change."""
        return list(self._replay.messages)

    def times(self) -> list[datetime]:
        """When each message of the current history was recorded in its current form."""
        return [parse_time(t) for t in self._replay.times]

    def __len__(self) -> int:
        return len(self._replay.messages)

    @property
    def damage(self) -> list[str]:
        """The damaged lines reading skipped or read in part, each naming its line number.

        Empty for a whole transcript. A reader shows these; the history is
        every undamaged event, and the next write records it whole first.
        """
        return list(self._replay.damage)

    def downgrades(self) -> list[Downgrade]:
        """Every downgrade recorded in this session, in the order recorded."""
        return list(self._replay.downgrades)

    def usage(self) -> list[RequestUsage]:
        """Every request's usage recorded in this session, in the order recorded."""
        return list(self._replay.usage)

    @property
    def system(self) -> str | None:
        """The system prompt now: the last change recorded, else the one the session began with."""
        changes = self._replay.system_changes
        return changes[-1].system if changes else self._meta.system

    def system_changes(self) -> list[SystemChange]:
        """Every change of the system prompt after the session began, in the order recorded."""
        return list(self._replay.system_changes)

    def continue_from(self, view: Sequence[Message]) -> None:
        """Take `view` as the writer's own form of the current history (its media fetched, say).

        A `record` that starts from `view` then appends onto the history the
        session holds, rather than rewriting it into the writer's form. The
        view must hold as many messages as the session.
        """
        held = len(self._replay.messages)
        if len(view) != held:
            raise TranscriptError(
                f"session {self.id}: a view of its history must hold its {held} messages, "
                f"not {len(view)}"
            )
        self._base = Base(list(view), held, self._replay.rewrites)

    def _titled(self) -> bool:
        return bool(self._meta.title or self._replay.title)

    def _plan(
        self,
        started_from: Sequence[Message],
        left_behind: Sequence[Message],
        seen_version: int,
    ) -> Plan:
        """`plan_record` for this session, on the history it holds once caught up."""
        # No copies: a list walk per append is what grows with the history.
        started = started_from if isinstance(started_from, list) else list(started_from)
        left = left_behind if isinstance(left_behind, list) else list(left_behind)
        plan = plan_record(
            self.id,
            self._replay.messages,
            self._replay.rewrites,
            started,
            left,
            base=self._base,
            seen_version=seen_version,
        )
        return self._settled(plan)

    def _plan_append(self, tail: list[Message]) -> Plan:
        """`append(tail)`: after whatever the session holds now, another writer's included."""
        return self._settled(Plan("append", tail, self._base))

    def _settled(self, plan: Plan) -> Plan:
        stored = self._replay.messages
        if self._replay.unsettled and plan.messages and plan.kind != "rewrite":
            # Salvaged: appending would build on a history no line says
            # whole, so the history and the tail are written whole instead.
            base = plan.base
            if base is not None:
                base = base._replace(version=base.version + 1)
            return Plan("rewrite", [*stored, *plan.messages], base)
        return plan


def check_replaces(
    session_id: str,
    replay: Replay,
    replaces: Sequence[Message],
    history: Sequence[Message],
    seen_version: int,
) -> None:
    """Refuse an explicit rewrite whose `replaces` is no longer the session's current history."""
    current = replay.messages
    if len(replaces) != len(current) or list(replaces) != current:
        raise SessionConflict(
            session_id,
            "a rewrite must replace the session's current history",
            started=(seen_version + 1, len(replaces)),
            current=(replay.rewrites + 1, len(current)),
            unrecorded=history,
        )


def writable(
    redactor: Redactor, session_id: str, messages: list[Message], start: int
) -> list[Message]:
    """Messages as every store writes them: checked to be messages, secrets cut out.

    The one redaction point of an event's messages. The history in memory
    keeps what the run holds, so the next `record` still finds it an
    unchanged prefix; the store and its index get the redacted form.
    """
    for i, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TranscriptError(
                f"session {session_id}: message {start + i} is a "
                f"{type(message).__name__}, not a Message"
            )
    return [redactor.message(m) for m in messages] if redactor.active else messages


def storable(
    message: Message, where: str, put_blob: Callable[[bytes], str]
) -> Message | StoredMessage:
    """A message as an event holds it: each image's bytes handed to `put_blob`, kept by hash."""
    if not has_image(message):
        return message
    blocks: list[StoredBlock] = []
    for block in message.content:
        if isinstance(block, Image) and not block.data and block.url is not None:
            blocks.append(StoredImage(block.media_type, "", block.source, block.url))
        elif isinstance(block, Image):
            try:
                raw = block.to_bytes()
            except BlockError as exc:
                raise TranscriptError(f"{where}: {exc}") from None
            blocks.append(StoredImage(block.media_type, put_blob(raw), block.source))
        elif isinstance(block, Document):
            # Kept by hash like an image: a PDF is megabytes, and every
            # version of the history would otherwise repeat it inline.
            sha = ""
            if block.data:
                try:
                    sha = put_blob(block.to_bytes())
                except BlockError as exc:
                    raise TranscriptError(f"{where}: {exc}") from None
            blocks.append(
                StoredDocument(block.media_type, "", block.url, block.title, block.source, sha)
            )
        else:
            blocks.append(block)
    return StoredMessage(message.role, tuple(blocks))


def blob_loader(where: str, get_blob: Callable[[str], bytes]) -> BlobLoader:
    """What revives a session's images and documents from a store's blobs, each read once.

    A blob that is gone (`MissingBlob`) must not make the whole session
    unreadable: the image becomes its placeholder, with a note saying why
    its bytes are not there. A damaged one is an error naming the session.
    """
    cache: dict[str, str] = {}

    def load(stored: StoredImage | StoredDocument) -> Image | Document | Text:
        if not stored.sha256:
            return image_stand_in(stored)  # a remote image: nothing kept here
        data = cache.get(stored.sha256)
        if data is None:
            try:
                raw = get_blob(stored.sha256)
            except MissingBlob as exc:
                log.warning("%s: %s", where, exc)
                return Text(f"{blob_placeholder(stored)} {_NOTE}")
            except TranscriptError as exc:
                raise TranscriptError(f"{where}: {exc}") from None
            data = cache[stored.sha256] = base64.b64encode(raw).decode("ascii")
        try:
            return revive(stored, data)
        except BlockError as exc:
            raise TranscriptError(f"{where}: stored blob {stored.sha256}: {exc}") from None

    return load


def last_used_first(info: SessionInfo) -> tuple[datetime, datetime, str]:
    """The sort key that puts the session used last first (reversed): its last write.

    The AGE a list shows is the same write, so the top row is `last`.
    """
    return (info.updated, info.meta.created, info.meta.id)

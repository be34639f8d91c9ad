"""The session core both stores build on: what a session reads, how an event is made storable.

`carryall.sessions.jsonl` (JSON Lines) and `carryall.sessions.postgres`
keep sessions in different places and lock them differently; everything
else about a session is here, written once: the replayed session both
session classes read from (`ReplayedSession`), a sessions-list row
(`carryall.sessions.protocol.SessionInfo`, what `list` promises), the one
redaction of an event's messages (`writable`), images and documents kept
by hash (`storable`, `blob_loader`), and the append-merge-or-rewrite
decision (`carryall.sessions.protocol.plan_record`, asked through
`ReplayedSession._plan`).
"""

from __future__ import annotations

import abc
import base64
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final, NamedTuple, Protocol

from carryall._lazy import lazy_logger
from carryall.blocks import Document, Downgrade, Image, Message, Text
from carryall.errors import BlockError, SessionConflict, TranscriptError
from carryall.sessions._transcript import (
    BlobLoader,
    Event,
    Replay,
    SessionMeta,
    Stored,
    StoredBlock,
    StoredDocument,
    StoredImage,
    StoredMessage,
    SystemChange,
    blob_placeholder,
    encode_event,
    event_json,
    event_line,
    has_image,
    image_stand_in,
    parse_time,
    revive,
    title_from,
    with_title,
)
from carryall.sessions.protocol import Base, NewSession, Plan, RecordKind, SessionInfo, plan_record
from carryall.sessions.redact import Redactor
from carryall.usage import RequestUsage

__all__ = [
    "LAST",
    "Extras",
    "MissingBlob",
    "ReplayedSession",
    "SessionInfo",
    "blob_loader",
    "check_replaces",
    "checked_hash",
    "checked_id",
    "event_hashes",
    "last_used_first",
    "new_meta",
    "resolve_id",
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


class Extras(NamedTuple):
    """What rides on an event besides its messages, as a recording method hands it to a store."""

    failed: str | None = None
    """The error of the request the messages were sent in (redacted already)."""
    downgrades: list[Downgrade] | None = None
    """What the run's requests could not send as held."""
    changes: list[str] | None = None
    """What an explicit rewrite changed, one line each."""
    usage: list[RequestUsage] | None = None
    """What each request of the run used."""
    system: str | None = None
    """A new system prompt (redacted already, "" for cleared), written only when it differs."""


class _Redacting(Protocol):
    @property
    def redactor(self) -> Redactor: ...


class ReplayedSession(abc.ABC):
    """What every store's session reads off its replayed events, and how it records: the one home.

    A store's session class (`Session`, `PostgresSession`) keeps its store
    in `store`, its header meta in `_meta`, its replayed events in `_replay`
    and, after a merge, where its writer's history stands in the session in
    `_base`. The recording methods decide here what to write; the store
    writes it (`_write`), under its own lock, after catching up with other
    writers.
    """

    store: _Redacting
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

    # -- recording ----------------------------------------------------------

    def record(
        self,
        started_from: Sequence[Message],
        left_behind: Sequence[Message],
        downgrades: Sequence[Downgrade] = (),
        *,
        usage: Sequence[RequestUsage] = (),
    ) -> RecordKind:
        """Record what a run left behind, given the history it started from.

        When `started_from` is what the store holds and is an unchanged
        prefix of `left_behind` (compared by value), only the new tail is
        appended ("append"); when another writer appended meanwhile, the
        tail goes after its messages if that is a new turn after a finished
        one ("merge"). When the run trimmed, compacted or edited the history
        it started from, the whole of `left_behind` is written as one
        rewrite event replacing it ("rewrite"), and every earlier version
        stays recoverable through `versions()`. A write that would hide
        another writer's messages raises `SessionConflict` and writes
        nothing (`carryall.sessions.protocol.plan_record` decides, on the
        history as the store holds it once caught up). Nothing new to add
        is an "append" that writes nothing, unless there is `usage` to
        keep. `downgrades` (what the run's requests could not send as held)
        and `usage` (what each of them used) ride on the event written.
        """
        seen = self._replay.rewrites
        return self._write(
            lambda: self._plan(started_from, left_behind, seen),
            Extras(downgrades=list(downgrades), usage=list(usage)),
        )

    def append(self, messages: Sequence[Message], *, failed: str | None = None) -> None:
        """Append messages after whatever the store holds now (another writer's included).

        `failed` is the error of the request they were sent in: a prompt
        whose request failed is kept, with why, rather than lost.
        """
        tail = list(messages)
        failed_note = self.store.redactor.optional(failed)
        self._write(lambda: self._plan_append(tail), Extras(failed=failed_note))

    def change_system(self, system: str | None) -> None:
        """Record that the system prompt is `system` from the next message on (None: cleared).

        An append of no messages holding the prompt (redacted like every
        stored string), so a continued run and every reader find it; the
        prompt the session already has (once caught up) writes nothing.
        """
        kept = self.store.redactor.text(system or "")
        self._write(lambda: Plan("append", [], self._base), Extras(system=kept))

    def rewrite(
        self,
        replaces: Sequence[Message],
        history: Sequence[Message],
        *,
        changes: Sequence[str] = (),
    ) -> None:
        """Replace the current history, which must be `replaces`, with `history`, naming changes.

        An explicit rewrite (a repair, an edit): `changes` are written on
        the event. When `replaces` is no longer what the session holds,
        `SessionConflict` is raised and nothing is written.
        """
        seen = self._replay.rewrites
        new = list(history)

        def decide() -> Plan:
            check_replaces(self.id, self._replay, replaces, new, seen)
            return Plan("rewrite", new, None)

        self._write(decide, Extras(changes=list(changes)))

    @abc.abstractmethod
    def _write(self, decide: Callable[[], Plan], extras: Extras) -> RecordKind:
        """Write the event `decide` plans, deciding once caught up under the session's lock.

        A rewrite plan writes a rewrite event; an append plan writes an
        append event when it has messages, usage, or a system prompt that
        differs from the session's; otherwise nothing is written. Either
        way `_base` becomes the plan's.
        """

    def _event(
        self,
        kind: RecordKind,
        messages: list[Message],
        stamp: str,
        put_blob: Callable[[bytes], str] | None,
        extras: Extras,
    ) -> tuple[Event[Any], list[Message], str | None]:
        """The event that writes `messages`, every string on it redacted once.

        Returns the event, the redacted messages (what an index takes) and
        the title it gives the session, if any. An append starts after the
        history held; a rewrite holds the whole history. Images and
        documents go to `put_blob` and are kept by hash; None says the
        messages hold none.
        """
        redactor = self.store.redactor
        failed, downgrades, changes, usage, system = extras
        start = 0 if kind == "rewrite" else len(self._replay.messages)
        clean = writable(redactor, self.id, messages, start)
        stored: list[Message | StoredMessage] | list[Message] = clean
        if put_blob is not None:
            stored = [
                storable(m, f"session {self.id}: message {start + i}", put_blob)
                for i, m in enumerate(clean)
            ]
        title = None if self._titled() else title_from(clean)
        kept = Extras(
            failed,
            redactor.walk(downgrades or []),
            [redactor.text(c) for c in changes] if changes else [],
            redactor.walk(usage) if usage else [],
            system,
        )
        return _new_event(kind, stamp, start, title, stored, kept), clean, title

    def _line(
        self,
        kind: RecordKind,
        messages: list[Message],
        stamp: str,
        put_blob: Callable[[bytes], str] | None,
        extras: Extras,
    ) -> tuple[bytes, list[Message], str | None]:
        """`_event`, written as its line (newline included) with one encoding.

        Most events hold nothing to redact and no image. Such an event is
        built from the messages as they are, and the JSON it is written as
        is scanned once for anything redaction could cut
        (`Redactor.passes_json`): when there is nothing, that JSON is the
        line `_event` would give, so it is written without walking the
        event and encoding it again. Anything else goes through `_event`.
        """
        start = 0 if kind == "rewrite" else len(self._replay.messages)
        _checked_messages(self.id, messages, start)
        if not any(map(has_image, messages)):
            title = None if self._titled() else title_from(messages)
            body = event_json(_new_event(kind, stamp, start, title, messages, extras))
            if self.store.redactor.passes_json(body):
                return event_line(body), messages, title
        event, clean, title = self._event(kind, messages, stamp, put_blob, extras)
        return encode_event(event), clean, title

    def _apply(
        self,
        kind: RecordKind,
        messages: list[Message],
        stamp: str,
        title: str | None,
        extras: Extras,
    ) -> int:
        """A written event, applied to the history in memory (unredacted, as the run holds it).

        Returns how many messages of the history held before stay unchanged.
        """
        replay = self._replay
        if kind == "rewrite":
            keep = replay.rewrite(list(messages), stamp)
            replay.unsettled = False
        else:
            keep = len(replay.messages)
            replay.append(messages, stamp)
        if title and not replay.title:
            replay.title = title
        replay.updated = stamp
        replay.events += 1
        replay.downgrades.extend(extras.downgrades or ())
        replay.usage.extend(extras.usage or ())
        if extras.system is not None:
            replay.change_system(extras.system, stamp)
        return keep

    def _noted(self, extras: Extras) -> Extras:
        """`extras` with its system prompt left off when the session has that prompt already."""
        if extras.system is not None and (extras.system or None) == self.system:
            return extras._replace(system=None)
        return extras

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


def _new_event(
    kind: RecordKind,
    stamp: str,
    start: int,
    title: str | None,
    messages: list[Message | StoredMessage] | list[Message],
    extras: Extras,
) -> Event[Any]:
    """The event line's value: `messages` from message `start` on, with what rides on them."""
    failed, downgrades, changes, usage, system = extras
    return Event(
        "rewrite" if kind == "rewrite" else "append",
        stamp,
        n=start + len(messages),
        start=start,
        title=title,
        messages=messages,
        failed=failed,
        downgrades=downgrades or [],
        changes=changes or [],
        usage=usage or [],
        system=system,
    )


def new_meta(
    redactor: Redactor, created: datetime, session_id: str, fields: NewSession
) -> SessionMeta:
    """The header of a new session, as every store writes it: redacted, `cwd` filled in."""
    unknown = sorted(fields.keys() - NewSession.__annotations__.keys())
    if unknown:
        raise TypeError(f"create() got an unexpected keyword argument {unknown[0]!r}")
    cwd = fields.get("cwd")
    tools = fields.get("tools")
    options = fields.get("options")
    output_schema = fields.get("output_schema")
    meta = SessionMeta(
        id=session_id,
        created=created,
        backend=fields.get("backend", ""),
        model=fields.get("model", ""),
        cwd=os.fspath(cwd) if cwd is not None else os.getcwd(),
        title=fields.get("title"),
        system=fields.get("system"),
        origin=fields.get("origin"),
        tools=None if tools is None else tuple(tools),
        base_url=fields.get("base_url"),
        options=dict(options) if options else None,
        output_schema=dict(output_schema) if output_schema else None,
    )
    redacted: SessionMeta = redactor.walk(meta)
    return redacted


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
    _checked_messages(session_id, messages, start)
    return [redactor.message(m) for m in messages] if redactor.active else messages


def _checked_messages(session_id: str, messages: list[Message], start: int) -> None:
    """Refuse anything in an event's messages that is not a `Message`, naming where it is."""
    for i, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TranscriptError(
                f"session {session_id}: message {start + i} is a "
                f"{type(message).__name__}, not a Message"
            )


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


def event_hashes(event: Event[Any]) -> set[str]:
    """The blob hashes one decoded event refers to."""
    return {
        b.sha256
        for m in event.messages
        if isinstance(m, StoredMessage)
        for b in m.content
        if isinstance(b, Stored) and b.sha256
    }


def resolve_id(
    session_id: str,
    location: str,
    sessions: Callable[[], list[SessionInfo]],
    matches: Callable[[], list[str]],
) -> str:
    """The full id of a session named by its id, a unique prefix of it, or `last`, in any store.

    `sessions` lists the store, the session used last first; `matches`
    gives the ids that are `session_id` or begin with it (the id alone when
    it names a session whole).
    """
    if session_id == LAST:
        newest = sessions()
        if not newest:
            raise TranscriptError(f"no session yet in {location}, so none is the last")
        return newest[0].meta.id
    found = matches()
    if len(found) == 1:
        return found[0]
    if not found:
        raise TranscriptError(f"no session {session_id!r} in {location}")
    shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
    raise TranscriptError(f"session id {session_id!r} is ambiguous: {shown}")


def last_used_first(info: SessionInfo) -> tuple[datetime, datetime, str]:
    """The sort key that puts the session used last first (reversed): its last write.

    The AGE a list shows is the same write, so the top row is `last`.
    """
    return (info.updated, info.meta.created, info.meta.id)

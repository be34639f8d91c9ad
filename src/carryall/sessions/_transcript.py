"""The transcript file format: one header line, then one event per line.

A transcript is JSON Lines. Line 1 is the header (`{"carryall": "session",
"format": 1, ...meta}`); every later line is an event that either appends a
tail to the history or rewrites it whole:

    {"event": "append", "time": ..., "n": 12, "start": 10, "messages": [...]}
    {"event": "rewrite", "time": ..., "n": 4, "messages": [...]}

`n` is the history length after the event, so a reader can count turns
without building messages. An image block is stored as its content hash
(`{"type": "image", "media_type", "sha256", "source"}`) and its bytes live
once in the blob folder, so no transcript line carries base64.

Replaying the events in order gives the current history; every history a
rewrite replaced stays in the file, which is how an earlier version is
recovered. This module is pure: it turns bytes into values and back, and
the store does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

import msgspec

from carryall.blocks import Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.errors import TranscriptError

FORMAT_VERSION = 1
"""The transcript format this carryall writes, and the newest it reads."""

MAGIC = "session"
"""The value of the header's `carryall` field: what kind of file this is."""


class SessionMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a session is: written once in the header, the title filled in later.

    `title` is the first thing a person said (or what `create` was given);
    `system` is the system prompt a run used, kept so a resumed run can use
    it again.
    """

    id: str
    created: datetime
    backend: str = ""
    model: str = ""
    cwd: str = ""
    title: str | None = None
    system: str | None = None


class Header(msgspec.Struct, frozen=True, omit_defaults=True):
    """Line 1 of a transcript: the file kind, the format version and the meta."""

    carryall: str
    format: int
    id: str
    created: datetime
    backend: str = ""
    model: str = ""
    cwd: str = ""
    title: str | None = None
    system: str | None = None

    def meta(self, title: str | None = None) -> SessionMeta:
        """The session meta this header describes, with a title learned later."""
        return SessionMeta(
            id=self.id,
            created=self.created,
            backend=self.backend,
            model=self.model,
            cwd=self.cwd,
            title=self.title or title,
            system=self.system,
        )


class _HeaderProbe(msgspec.Struct):
    """Just enough of line 1 to refuse a newer format before decoding the rest."""

    carryall: str = ""
    format: int = 0


class StoredImage(msgspec.Struct, frozen=True, tag="image", tag_field="type", omit_defaults=True):
    """An image as a transcript line holds it: the hash of bytes kept in the blob folder."""

    media_type: str
    sha256: str
    source: str | None = None


StoredBlock = Text | Thinking | ToolUse | ToolResult | StoredImage


class StoredMessage(msgspec.Struct, frozen=True):
    """A message as a transcript line holds it (images by hash)."""

    role: Literal["user", "assistant"]
    content: tuple[StoredBlock, ...]


M = TypeVar("M")


class Event(msgspec.Struct, Generic[M], frozen=True, omit_defaults=True):
    """One event line: a tail appended to the history, or the whole history rewritten.

    Decoded, `messages` holds `Message` values when the line has no image in
    it, else `StoredMessage` values (images by hash) that the replay
    restores; written, it holds either.
    """

    event: str
    time: str
    n: int
    start: int = 0
    title: str | None = None
    messages: list[M] = []


class EventHead(msgspec.Struct, frozen=True):
    """An event without its messages: what a sessions list needs, decoded cheaply."""

    event: str
    time: str
    n: int
    title: str | None = None


_probe_decoder = msgspec.json.Decoder(_HeaderProbe)
_header_decoder = msgspec.json.Decoder(Header)
_event_decoder = msgspec.json.Decoder(Event[StoredMessage])
_plain_decoder = msgspec.json.Decoder(Event[Message])
_head_decoder = msgspec.json.Decoder(EventHead)
_encoder = msgspec.json.Encoder()

AnyEvent = Event[Message] | Event[StoredMessage]
BlobLoader = Callable[[StoredImage], Image]


def now() -> str:
    """The current UTC time as the transcript writes it (sortable as text)."""
    return format_time(datetime.now(UTC))


def format_time(moment: datetime) -> str:
    """A time as the transcript and the recall index write it: UTC, microseconds, `Z`."""
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """A transcript time back as an aware UTC datetime."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def header_for(meta: SessionMeta) -> Header:
    """The header line a new session with this meta gets."""
    return Header(
        carryall=MAGIC,
        format=FORMAT_VERSION,
        id=meta.id,
        created=meta.created,
        backend=meta.backend,
        model=meta.model,
        cwd=meta.cwd,
        title=meta.title,
        system=meta.system,
    )


def encode_header(header: Header) -> bytes:
    """Line 1 of a new transcript, newline included."""
    return _encoder.encode(header) + b"\n"


def encode_event(event: Event[Any]) -> bytes:
    """One event line, newline included; a `TranscriptError` if a value is not JSON."""
    try:
        return _encoder.encode(event) + b"\n"
    except (msgspec.EncodeError, TypeError, ValueError) as exc:
        raise TranscriptError(f"a message cannot be written as JSON: {exc}") from None


def decode_header(line: bytes, where: str) -> Header:
    """Decode line 1, refusing a file that is not a transcript or is newer than this reader."""
    try:
        probe = _probe_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TranscriptError(f"{where} line 1: not a session header: {exc}") from None
    if probe.carryall != MAGIC:
        raise TranscriptError(f"{where} line 1: not a carryall session header")
    if probe.format > FORMAT_VERSION:
        raise TranscriptError(
            f"{where}: transcript format {probe.format} was written by a newer carryall; "
            f"this version reads format {FORMAT_VERSION} and older. Upgrade carryall to read it."
        )
    if probe.format < 1:
        raise TranscriptError(f"{where} line 1: invalid transcript format {probe.format}")
    try:
        return _header_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TranscriptError(f"{where} line 1: invalid session header: {exc}") from None


def decode_event(line: bytes, where: str, line_no: int) -> AnyEvent:
    """Decode one event line; the error names the file and line number."""
    try:
        # A line that never mentions "image" cannot hold an image block, so it
        # decodes straight into `Message` values: the common case costs one pass.
        if b'"image"' not in line:
            return _plain_decoder.decode(line)
        return _event_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        # msgspec reports a block's own validation (`BlockError`) as a
        # ValidationError; RecursionError is JSON nested deeper than Python holds.
        raise TranscriptError(f"{where} line {line_no}: invalid event: {exc}") from None


def decode_head(line: bytes, where: str, line_no: int | None) -> EventHead:
    """Decode an event's head only (kind, time, length, title); `None` means the last line."""
    try:
        return _head_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        place = "last line" if line_no is None else f"line {line_no}"
        raise TranscriptError(f"{where} {place}: invalid event: {exc}") from None


def split_lines(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of `data` and the byte length they cover.

    Whatever follows the last newline is a torn write (a crash mid-line) and
    is not a line: it is left for the store to move aside.
    """
    end = data.rfind(b"\n") + 1
    if end == 0:
        return [], 0
    return data[: end - 1].split(b"\n"), end


def has_image(message: Message) -> bool:
    """Whether a message carries an image block (and so needs the blob folder)."""
    return any(type(block) is Image for block in message.content)


def title_from(messages: Iterable[Message]) -> str | None:
    """A session title: the first line of the first thing a person said, shortened."""
    for message in messages:
        if message.is_plain_user_text():
            text = " ".join(message.text().split())
            if text:
                return text if len(text) <= 80 else text[:79].rstrip() + "…"
    return None


def common_prefix(old: Sequence[Message], new: Sequence[Message]) -> int:
    """How many leading messages two histories share (by value)."""
    count = 0
    for a, b in zip(old, new, strict=False):
        if a is not b and a != b:
            break
        count += 1
    return count


@dataclass
class Replay:
    """A history rebuilt by applying events in order.

    `times[i]` is when message `i` entered the history in its current form:
    a rewrite keeps the times of the messages it left unchanged.
    """

    where: str
    load_image: BlobLoader
    keep_versions: bool = False
    messages: list[Message] = field(default_factory=list)
    times: list[str] = field(default_factory=list)
    title: str | None = None
    updated: str | None = None
    events: int = 0
    versions: list[list[Message]] = field(default_factory=list)

    def apply_line(self, line: bytes, line_no: int) -> AnyEvent:
        """Decode and apply one event line."""
        event = decode_event(line, self.where, line_no)
        self.apply(event, line_no)
        return event

    def apply(self, event: AnyEvent, line_no: int) -> None:
        """Apply one decoded event; an inconsistent event names its line."""
        new = self._restore(event)
        if event.event == "append":
            if event.start != len(self.messages):
                raise TranscriptError(
                    f"{self.where} line {line_no}: append starts at message {event.start} "
                    f"but the history before it holds {len(self.messages)}"
                )
            self.messages.extend(new)
            self.times.extend([event.time] * len(new))
        elif event.event == "rewrite":
            keep = common_prefix(self.messages, new)
            if self.keep_versions:
                self.versions.append(self.messages)
            self.times = self.times[:keep] + [event.time] * (len(new) - keep)
            self.messages = new
        else:
            raise TranscriptError(
                f"{self.where} line {line_no}: unknown event {event.event!r} "
                "(written by a newer carryall?)"
            )
        if event.n != len(self.messages):
            raise TranscriptError(
                f"{self.where} line {line_no}: event says the history holds {event.n} "
                f"messages but replaying gives {len(self.messages)}"
            )
        if event.title and not self.title:
            self.title = event.title
        self.updated = event.time
        self.events += 1

    def _restore(self, event: AnyEvent) -> list[Message]:
        messages = event.messages
        if not messages or isinstance(messages[0], Message):
            # One decoder per line, so a line's messages are all of one kind.
            return messages  # type: ignore[return-value]
        out: list[Message] = []
        for stored in messages:
            if any(type(block) is StoredImage for block in stored.content):
                content = tuple(
                    self.load_image(block) if isinstance(block, StoredImage) else block
                    for block in stored.content
                )
                out.append(Message(stored.role, content))
            else:
                out.append(Message(stored.role, stored.content))  # type: ignore[arg-type]
        return out


def iter_events(lines: Sequence[bytes], first_line_no: int) -> Iterator[tuple[int, bytes]]:
    """Number the non-empty lines of a chunk (an empty line is never written, so skip it)."""
    for offset, line in enumerate(lines):
        if line.strip():
            yield first_line_no + offset, line

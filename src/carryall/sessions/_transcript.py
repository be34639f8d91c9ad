"""The transcript file format: one header line, then one event per line.

A transcript is JSON Lines. Line 1 is the header (`{"carryall": "session",
"format": 1, ...meta}`); every later line is an event that either appends a
tail to the history or rewrites it whole:

    {"event": "append", "time": ..., "n": 12, "start": 10, "messages": [...]}
    {"event": "rewrite", "time": ..., "n": 4, "messages": [...]}

`n` is the history length after the event, so a reader can count turns
without building messages. An event may also carry what the requests
before it used (`"usage": [...]`, `carryall.usage.RequestUsage`); an
append of no messages carries usage alone. An image block is stored as its content hash
(`{"type": "image", "media_type", "sha256", "source"}`) and its bytes live
once in the blob folder, so no transcript line carries base64.

Replaying the events in order gives the current history; every history a
rewrite replaced stays in the file, which is how an earlier version is
recovered. This module is pure: it turns bytes into values and back, and
the store does the I/O.

Each event line ends with `"crc": "<9 letters>"`, letters chosen when it is
written so that the CRC-32 of the line (without its newline) followed by a
comma is 0, so a flipped bit is found rather than read as what was said,
and a reader checks a run of lines, joined by commas as it decodes them, in
one `zlib.crc32` call. Lines written before that end with `"check": "<12 hex>"`, the
start of the SHA-256 of the line without it, and are checked that way; a
line with neither (written before either existed) still loads. A reader
salvages: a damaged line (not JSON, failing its check, out of step with the
lines before it) is skipped and named in `Replay.damage` with its line
number, and every other event is still applied.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from itertools import accumulate, chain, repeat
from operator import attrgetter, methodcaller
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, Generic, Literal, TypeVar

import msgspec

from carryall._lazy import lazy_decoder, lazy_module
from carryall._text import shorten
from carryall.blocks import (
    Document,
    Downgrade,
    Image,
    Message,
    Opaque,
    RedactedThinking,
    ServerToolCall,
    ServerToolResult,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    document_placeholder,
    image_placeholder,
)
from carryall.errors import TranscriptError
from carryall.usage import RequestUsage

if TYPE_CHECKING:
    import hashlib
else:
    hashlib = lazy_module("hashlib")  # OpenSSL's library loads with the first digest

FORMAT_VERSION = 1
"""The transcript format this carryall writes, and the newest it reads."""

MAGIC = "session"
"""The value of the header's `carryall` field: what kind of file this is."""


class SessionMeta(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a session is: written once in the header, the title filled in later.

    `title` is the first thing a person said (or what `create` was given);
    `system` is the system prompt a run used, kept so a resumed run can use
    it again. The header line is this meta behind the file kind and format
    (`encode_header`), so the two never drift apart.
    """

    id: str
    created: datetime
    backend: str = ""
    model: str = ""
    cwd: str = ""
    title: str | None = None
    system: str | None = None
    origin: str | None = None
    """Where an imported history came from (`openai messages from chat.json`); None if run here."""
    tools: tuple[str, ...] | None = None
    """The tools a run offered, by name, so a resumed run offers them again; None if unknown."""
    base_url: str | None = None
    """The backend's base URL the run was given (never a key), so a resumed run goes there."""
    options: dict[str, Any] | None = None
    """The run's settings the command line gave (`max_tokens`, `no_vision`, ...), kept alike;
    under `request` the request options it was sent with (`carryall.request_options`)."""
    output_schema: dict[str, Any] | None = None
    """The structured output a run asked for (`run --schema`): a `carryall.providers.OutputSchema`
    in its JSON form (`schema`, `name`, `strict`), so a continued run asks for it again."""


class _HeaderProbe(msgspec.Struct):
    """Just enough of line 1 to refuse a newer format before decoding the rest."""

    carryall: str = ""
    format: int = 0


_Hash = Annotated[str, msgspec.Meta(pattern="^(?:[0-9a-f]{64})?$")]
"""A blob's content hash as a line holds it (or "" for none): a hex SHA-256 and nothing else, so
a line naming any other path is damage where it is read."""


class StoredImage(msgspec.Struct, frozen=True, tag="image", tag_field="type", omit_defaults=True):
    """An image as a transcript line holds it: the hash of bytes kept in the blob folder.

    A remote image (`Image.url`) has no bytes here: its `sha256` is "" and
    its `url` says where it is.
    """

    media_type: str
    sha256: _Hash
    source: str | None = None
    url: str | None = None


class StoredDocument(
    msgspec.Struct, frozen=True, tag="document", tag_field="type", omit_defaults=True
):
    """A document as a transcript line holds it: its bytes by hash in the blob folder.

    Lines written before documents were kept as blobs hold the bytes inline
    (`data`, the `Document` JSON form itself), and they still load; a
    document by URL has neither bytes nor hash.
    """

    media_type: str
    data: str = ""
    url: str | None = None
    title: str | None = None
    source: str | None = None
    sha256: _Hash = ""

    def __post_init__(self) -> None:
        if not self.sha256:
            # Inline or by URL: the block itself, checked as it would be.
            self.revived(self.data)

    def revived(self, data: str) -> Document:
        """The `Document` this holds, its bytes (base64) given."""
        return Document(self.media_type, data, self.url, self.title, self.source)


Stored = StoredImage | StoredDocument
"""What a transcript line holds by hash: the blocks whose bytes live in the blob folder."""

StoredBlock = (
    Text
    | Thinking
    | RedactedThinking
    | ToolUse
    | ToolResult
    | StoredImage
    | StoredDocument
    | ServerToolCall
    | ServerToolResult
    | Opaque
)


class StoredMessage(msgspec.Struct, frozen=True):
    """A message as a transcript line holds it (images by hash)."""

    role: Literal["user", "assistant", "system"]
    content: tuple[StoredBlock, ...]


M = TypeVar("M")
E = TypeVar("E", bound="Event[Any] | EventHead")


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
    failed: str | None = None
    """The error of the request these messages were for, when it failed (the prompt is kept)."""
    downgrades: list[Downgrade] = []
    """What the requests before this event could not send as held (`Encoded.downgrades`)."""
    changes: list[str] = []
    """What an explicit rewrite changed, one line each (`AnySession.rewrite`: a repair)."""
    usage: list[RequestUsage] = []
    """What each request answered since the event before used, one record a request, in order."""
    system: str | None = None
    """The system prompt from after this event's messages on, when it changed here ("" when
    it was cleared).

    A change alone is an append of no messages (`AnySession.change_system`),
    which a reader that predates the field replays as the nothing it appends.
    """


class SystemChange(msgspec.Struct, frozen=True):
    """A change of the system prompt in the middle of a session, as a reader shows it."""

    at: int
    """How many messages the history held when it changed: it applies from message `at` on."""
    time: str
    system: str | None
    """The system prompt from then on; None when it was cleared."""


class EventHead(msgspec.Struct, frozen=True):
    """An event without its messages: what a sessions list needs, decoded cheaply."""

    event: Literal["append", "rewrite"]
    time: str
    n: int
    title: str | None = None
    failed: str | None = None


# Built on first use: a reader of an empty store never decodes.
_probe_decoder = lazy_decoder(_HeaderProbe)
_header_decoder = lazy_decoder(SessionMeta)
_event_decoder = lazy_decoder(Event[StoredMessage])
_plain_decoder = lazy_decoder(Event[Message])
_head_decoder = lazy_decoder(EventHead)
_encoder = msgspec.json.Encoder()

AnyEvent = Event[Message] | Event[StoredMessage]
BlobLoader = Callable[[StoredImage | StoredDocument], Image | Document | Text]


def now() -> str:
    """The current UTC time as the transcript writes it (sortable as text).

    `format_time`'s wording. The date and time up to the second are made
    once a second and kept, so an append writes only its microseconds
    rather than making a `datetime` and writing it whole.
    """
    global _second
    seconds, micro = divmod(time.time_ns() // 1000, 1_000_000)
    second, text = _second
    if seconds != second:
        text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _second = (seconds, text)
    return f"{text}{micro:06d}Z"


_second = (-1, "")  # the second `now` last wrote, and its text up to the microseconds


def format_time(moment: datetime) -> str:
    """A time as the transcript and the recall index write it: UTC, microseconds, `Z`."""
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_TIME_SHAPE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def parse_time(text: str) -> datetime:
    """A transcript time back as an aware UTC datetime; a `TranscriptError` for anything else.

    Exactly the form `format_time` writes (so times sort as text) and a real
    moment (no 30 February): what a hand edit or a forged line holds instead
    is damage, never a `ValueError` out of a reader.
    """
    if type(text) is str and _TIME_SHAPE.fullmatch(text):
        try:
            return datetime.fromisoformat(text)  # reads the `Z` as UTC
        except ValueError:
            pass
    raise TranscriptError(f"{text!r:.60} is not a transcript time")


def encode_header(meta: SessionMeta) -> bytes:
    """Line 1 of a new transcript, newline included: the file kind, the format, then the meta."""
    fields = msgspec.to_builtins(meta)
    return _encoder.encode({"carryall": MAGIC, "format": FORMAT_VERSION, **fields}) + b"\n"


def with_title(meta: SessionMeta, title: str | None) -> SessionMeta:
    """The meta with a title learned from the events, unless the header already had one."""
    if meta.title or not title:
        return meta
    return msgspec.structs.replace(meta, title=title)


# The check written today. CRC-32 is the code made for accidental damage (every
# burst of up to 32 flipped bits is caught, any other damage all but 1 time in
# 2**32), which is all a transcript's check is for. The letters are picked so
# that the CRC-32 of the line followed by a comma is 0: the register is back at
# its start after every line, so the lines of a run joined by commas, as a load
# joins them to decode them as one JSON array, have CRC 0 together, and a load
# checks a whole run in one C call over the bytes it decodes. A digest of each
# line without its field cost two copies and a hash object per line, more than
# decoding the line did.
_CRC = b',"crc":"'
_CRC_LETTERS = 9  # four bits each; see `_cancelling` for why nine
_CRC_TAIL = len(_CRC) + _CRC_LETTERS + 2  # the field, its letters, `"}`
_LETTER = 0x40  # the letters are `@` to `O`: each carries four bits in its low half
_JOIN = b","  # what follows each line in the CRC (and in a run as a load decodes it)


def _crc_holds(data: bytes | memoryview) -> bool:
    """Whether lines (one, or a run joined by commas) written with CRC fields are intact."""
    return zlib.crc32(_JOIN, zlib.crc32(data)) == 0


# The check lines were written with before the CRC: the first 12 hex digits of
# the SHA-256 of the line without the field. Still read, never written.
_CHECK = b',"check":"'
_CHECK_HEX = 12
_CHECK_TAIL = len(_CHECK) + _CHECK_HEX + 2  # the field, its digits, `"}`


@cache
def _cancelling() -> tuple[tuple[int, ...], ...]:
    """What the letter bits must be to move a line's CRC by a given amount, one table a byte.

    For lines of one length, the CRC of `a XOR b` is `crc(a) ^ crc(b) ^
    crc(zeros)`, and a change at a fixed distance from the end moves the CRC
    the same way whatever comes before it. So setting letter bit j moves a
    line's CRC (with its comma) by a fixed `effect[j]`, and Gauss-Jordan
    elimination over GF(2) gives, for each CRC bit, letter bits that flip it
    alone. Eight letters are not enough: their 32 effects span only 30
    dimensions, so nine are written and 32 of their 36 bits used.
    """
    width = _CRC_LETTERS + 2 + len(_JOIN)  # the letters, `"}` and the comma after the line
    zeros = zlib.crc32(bytes(width))
    rows = []
    for bit in range(4 * _CRC_LETTERS):
        probe = bytearray(width)
        probe[bit // 4] = 1 << (bit % 4)
        rows.append((zlib.crc32(probe) ^ zeros, 1 << bit))
    for k in range(32):
        # Always found: the effects span all 32 bits (`test_every_crc_is_reachable_...`).
        pivot = next(i for i in range(k, len(rows)) if rows[i][0] >> k & 1)
        rows[k], rows[pivot] = rows[pivot], rows[k]
        effect, letters = rows[k]
        rows = [
            (e ^ effect, x ^ letters) if i != k and e >> k & 1 else (e, x)
            for i, (e, x) in enumerate(rows)
        ]
    # Each table entry is kept spread, letter bit j at bit j % 4 of byte
    # j // 4: spreading moves bits without carries, so it commutes with XOR,
    # and a line's letters are the XOR of four entries over the `@`s.
    spread = [_spread(letters) for _, letters in rows[:32]]
    tables = []
    for byte in range(4):
        table = [0] * 256
        for value in range(1, 256):
            low = value & -value
            table[value] = table[value ^ low] ^ spread[8 * byte + low.bit_length() - 1]
        tables.append(tuple(table))
    return tuple(tables)


def _spread(bits: int) -> int:
    """Letter bits laid out as the letters' low halves: nibble i to byte i."""
    return sum((bits >> 4 * i & 0xF) << 8 * i for i in range(_CRC_LETTERS))


_BLANK_TAIL = b"@" * _CRC_LETTERS + b'"}' + _JOIN  # the letters' places as `@`s, then the end
_LETTERS = int.from_bytes(bytes([_LETTER]) * _CRC_LETTERS, "little")


def _with_crc(body: bytes) -> bytes:
    """The event line for a JSON object, its CRC field appended, newline included."""
    head = body[:-1]
    # The CRC of the line with `@` for every letter, and the comma after it:
    # what the letters must cancel to reach 0.
    move = zlib.crc32(_BLANK_TAIL, zlib.crc32(_CRC, zlib.crc32(head)))
    tables = _cancelling()
    spread = (
        tables[0][move & 0xFF]
        ^ tables[1][move >> 8 & 0xFF]
        ^ tables[2][move >> 16 & 0xFF]
        ^ tables[3][move >> 24]
    )
    letters = (spread | _LETTERS).to_bytes(_CRC_LETTERS, "little")
    return b"".join((head, _CRC, letters, b'"}\n'))


def _check_matches(line: bytes) -> bool:
    """Whether a line ending in an older check field holds the check of the body it was
    written from.

    The body is the line with the field cut and its `}` put back; it is
    hashed in two pieces rather than copied.
    """
    digest = hashlib.sha256(memoryview(line)[:-_CHECK_TAIL])
    digest.update(b"}")
    return line[-_CHECK_HEX - 2 : -2] == digest.hexdigest()[:_CHECK_HEX].encode()


def encode_event(event: Event[Any]) -> bytes:
    """One event line with its CRC field, newline included; a `TranscriptError` if a
    value is not JSON."""
    return event_line(event_json(event))


def event_json(event: Event[Any]) -> bytes:
    """An event's JSON object without its CRC field (`event_line` finishes the line).

    Apart so that a writer can scan what it is about to write (for what
    redaction would cut) without encoding the event a second time.
    """
    try:
        return _encoder.encode(event)
    except (msgspec.EncodeError, TypeError, ValueError) as exc:
        raise TranscriptError(f"a message cannot be written as JSON: {exc}") from None


def event_line(body: bytes) -> bytes:
    """The event line of an event's JSON object (`event_json`): its CRC field, a newline."""
    return _with_crc(body)


def verify_line(line: bytes, where: str, line_no: int) -> None:
    """Refuse an event line whose integrity check does not match it (a line with none passes)."""
    if line[-_CRC_TAIL : -_CRC_LETTERS - 2] == _CRC:
        intact = _crc_holds(line)
    elif len(line) >= _CHECK_TAIL and line[-_CHECK_TAIL : -_CHECK_HEX - 2] == _CHECK:
        intact = line.endswith(b'"}') and _check_matches(line)
    else:
        return
    if not intact:
        raise TranscriptError(
            f"{where} line {line_no}: fails its integrity check (changed since it was written)"
        )


def decode_header(line: bytes, where: str) -> SessionMeta:
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
    """Decode one event line, its integrity check first; the error names the file and line.

    A line that `has_blob` may hold blocks by hash and is read by the stored
    decoding (`Event[StoredMessage]`), any other straight into `Message`
    values. The plain decoding is tried first without searching the line:
    when it succeeds and no image or document came out, both decodings read
    the same values (they differ in those two blocks alone), so the search
    is made only when it can change the answer.
    """
    verify_line(line, where, line_no)
    try:
        event = _plain_decoder.decode(line)
    except _DECODE_ERRORS as exc:
        if not has_blob(line):
            raise _invalid(where, line_no, exc) from None
    else:
        if not _holds_blob_kind(event) or not has_blob(line):
            return _timed(event, where, line_no)
    try:
        return _timed(_event_decoder.decode(line), where, line_no)
    except _DECODE_ERRORS as exc:
        raise _invalid(where, line_no, exc) from None


def _timed(event: E, where: str, line_no: int | None) -> E:
    """`event` if its time is a transcript time, else the line's `TranscriptError`."""
    try:
        parse_time(event.time)
    except TranscriptError as exc:
        place = "last line" if line_no is None else f"line {line_no}"
        raise TranscriptError(f"{where} {place}: invalid event: {exc}") from None
    return event


# msgspec reports a block's own validation (`BlockError`) as a ValidationError;
# RecursionError is JSON nested deeper than Python holds.
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


def _invalid(where: str, line_no: int, exc: Exception) -> TranscriptError:
    return TranscriptError(f"{where} line {line_no}: invalid event: {exc}")


def _holds_blob_kind(event: Event[Message]) -> bool:
    """Whether a plainly decoded event holds an image or a document (a block by hash's kinds)."""
    for message in event.messages:
        for block in message.content:
            if type(block) is Image or type(block) is Document:
                return True
    return False


def decode_head(line: bytes, where: str, line_no: int | None) -> EventHead:
    """Decode an event's head only (kind, time, length, title); `None` means the last line."""
    try:
        head = _head_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        place = "last line" if line_no is None else f"line {line_no}"
        raise TranscriptError(f"{where} {place}: invalid event: {exc}") from None
    return _timed(head, where, line_no)


def split_lines(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of `data` and the byte length they cover.

    Whatever follows the last newline is a torn write (a crash mid-line) and
    is not a line: it is left for the store to move aside. So are NUL bytes
    at the end, newline or not: what a power loss leaves where the file
    system had grown the file but not yet written it.
    """
    end = data.rfind(b"\n") + 1
    run = len(data.rstrip(b"\0\n"))  # where the run of NULs and newlines at the end starts
    if b"\0" in data[run:]:
        end = data.rfind(b"\n", 0, run + 1) + 1
    if end == 0:
        return [], 0
    return data[: end - 1].split(b"\n"), end


class LineReader:
    """The complete lines of a file as it is read, as `split_lines` finds them in its bytes.

    One pass and no copy of the file: a long transcript is never held whole
    beside the session it loads. Iterating yields `(line_no, line)` for each
    line in order (numbered from 1, without its newline), empty lines
    included; afterwards `end` is the byte length the complete lines cover
    and `count` how many there are, both exactly what `split_lines` gives.
    A line becomes certain only when a line with content follows it or the
    file ends: a run of NULs and newlines at the end (what a power loss
    leaves) takes with it a line whose newline it replaced, so the last line
    with content, and any blank ones after it, are held back until then.
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.end = 0
        self.count = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        for first, lines in self.batches():
            yield from enumerate(lines, first)

    def batches(self, size: int = 1 << 18) -> Iterator[tuple[int, list[bytes]]]:
        """The same lines, a run at a time as `size`-byte reads give them: `(first line_no, lines)`.

        A load hands each run to `Replay.apply_batch`, which checks and
        decodes a clean run in a few calls rather than a few per line.
        """
        held: bytes | None = None  # the last line with content, not yet given
        after: list[bytes] = []  # the blank or all-NUL lines after it
        covered = 0  # bytes (newlines included) of the lines given so far
        pieces: list[bytes] = []  # the line being read, when no newline came yet
        while block := self._file.read(size):
            cut = block.rfind(b"\n") + 1
            if not cut:
                pieces.append(block)
                continue
            data = b"".join((*pieces, block[:cut])) if pieces else block[:cut]
            pieces = [block[cut:]] if cut < len(block) else []
            lines = data.split(b"\n")
            lines.pop()  # what follows the last newline: nothing
            last = len(lines) - 1
            while last >= 0 and not lines[last].rstrip(b"\0"):
                last -= 1  # a blank line (only NULs) is certain only with content after it
            if last < 0:
                after += lines
                continue
            ready = ([held] if held is not None else []) + after + lines[:last]
            held, after = lines[last], lines[last + 1 :]
            if ready:
                first = self.count + 1
                self.count += len(ready)
                covered += sum(map(len, ready)) + len(ready)
                yield first, ready
        torn = b"".join(pieces)
        # The end: as in `split_lines`, a NUL anywhere in the run of NULs and
        # newlines the file ends with cuts every line that run touches.
        tail = [line + b"\n" for line in ([held] if held is not None else []) + after]
        content = len(held.rstrip(b"\0")) if held is not None else 0
        run = [tail[0][content:], *tail[1:], torn] if tail else [torn]
        if not torn.rstrip(b"\0\n") and any(b"\0" in part for part in run):
            # The run starts after held's content (or at the file's start):
            # only the line whose newline is the run's first byte survives.
            tail = tail[:1] if tail and tail[0][content : content + 1] == b"\n" else []
        # (A torn piece with content holds the whole run: every line is whole.)
        if tail:
            first = self.count + 1
            self.count += len(tail)
            covered += sum(map(len, tail))
            yield first, [line[:-1] for line in tail]
        self.end = covered


def has_image(message: Message) -> bool:
    """Whether a message carries an image or a document (and so needs the blob folder)."""
    return any(type(block) is Image or type(block) is Document for block in message.content)


def blob_placeholder(stored: StoredImage | StoredDocument) -> str:
    """A block held by hash as its line: `image_placeholder` or `document_placeholder`."""
    if isinstance(stored, StoredImage):
        return image_placeholder(stored.media_type, stored.source)
    return document_placeholder(stored.media_type, stored.title or stored.source or stored.url)


def revive(stored: StoredImage | StoredDocument, data: str) -> Image | Document:
    """The block a stored image or document stands for, its bytes (base64) read back."""
    if isinstance(stored, StoredImage):
        return Image(stored.media_type, data, stored.source)
    return stored.revived(data)


def has_blob(line: bytes) -> bool:
    """Whether an event line may hold a block by hash (and so needs the stored decoding).

    A line that never mentions "image" nor "sha256" cannot: it decodes
    straight into `Message` values, the common case in one pass.
    """
    return b'"image"' in line or b'"sha256"' in line


def title_from(messages: Iterable[Message]) -> str | None:
    """A session title: the first line of the first thing a person said, shortened."""
    for message in messages:
        if message.is_plain_user_text():
            text = " ".join(message.text().split())
            if text:
                return shorten(text, 80, ellipsis="…")
    return None


def common_prefix(old: Sequence[Message], new: Sequence[Message]) -> int:
    """How many leading messages two histories share (by value).

    Appending must cost the same at 100 messages as at 100,000, and the
    common case is that `old` is all of `new`'s start. `old <= new` decides
    that in C: it compares items with `==` (identity first) and, when none
    differs, by length alone. When an item does differ Python asks whether
    it is `<=` the other; messages have no order, so that is a TypeError,
    and only then are the messages walked one by one.
    """
    if len(old) <= len(new):
        try:
            if old <= new:  # type: ignore[operator]
                return len(old)
        except TypeError:
            pass
    count = 0
    for a, b in zip(old, new, strict=False):
        if a is not b and a != b:
            break
        count += 1
    return count


def image_stand_in(stored: StoredImage | StoredDocument) -> Image | Document | Text:
    """An image without its bytes, for readers that only need its placeholder.

    The recall index reads every transcript; reading every image blob to
    say `[image: name (type)]` would cost it the blob folder for nothing. A
    document held by hash stands in as its placeholder line; one held
    inline or by URL is itself.
    """
    if isinstance(stored, StoredDocument):
        return Text(blob_placeholder(stored)) if stored.sha256 else stored.revived(stored.data)
    return Image(stored.media_type, "", stored.source, stored.url)


def restore(stored: Message | StoredMessage, load_image: BlobLoader) -> Message:
    """A decoded event message as a `Message`, each stored image given to `load_image`."""
    if isinstance(stored, Message):
        return stored
    if any(type(block) is StoredImage or type(block) is StoredDocument for block in stored.content):
        content = tuple(
            _restored(block, load_image) if isinstance(block, Stored) else block
            for block in stored.content
        )
        return Message(stored.role, content)
    return Message(stored.role, stored.content)  # type: ignore[arg-type]


def _restored(block: StoredImage | StoredDocument, load: BlobLoader) -> Image | Document | Text:
    if isinstance(block, StoredDocument) and not block.sha256:
        return block.revived(block.data)  # inline (an older line) or by URL: nothing to load
    return load(block)


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
    rewrites: int = 0
    """How many rewrites made the history: `versions()` numbers the current one this plus 1."""
    versions: list[list[Message]] = field(default_factory=list)
    damage: list[str] = field(default_factory=list)
    """What was wrong with the lines that were skipped or read in part, each naming its line."""
    unsettled: bool = False
    """Damage since the last rewrite: the history is salvaged, not what was written, so the
    next writer records it whole (a rewrite) before appending to it."""
    downgrades: list[Downgrade] = field(default_factory=list)
    usage: list[RequestUsage] = field(default_factory=list)
    """Every request's usage the events recorded, in the order recorded."""
    system_changes: list[SystemChange] = field(default_factory=list)
    """Every change of the system prompt the events record, in order (the header holds the
    first prompt)."""

    def change_system(self, system: str, time: str) -> None:
        """Note an event's system prompt change (`Event.system`; "" clears it)."""
        self.system_changes.append(SystemChange(len(self.messages), time, system or None))

    def apply_line(self, line: bytes, line_no: int) -> AnyEvent | None:
        """Decode and apply one event line; a damaged one is noted in `damage` and skipped."""
        event = self._decoded(line, line_no)
        if event is not None:
            # A whole line that cannot apply (an image blob damaged) is not
            # line damage: it is still refused.
            self.apply(event, line_no)
        return event

    def _decoded(self, line: bytes, line_no: int) -> AnyEvent | None:
        """One event line decoded; a damaged one is noted in `damage` and None."""
        try:
            return decode_event(line, self.where, line_no)
        except TranscriptError as exc:
            self.damage.append(f"{exc}; skipped")
            self.unsettled = True
            return None

    def apply_batch(self, first_line_no: int, lines: list[bytes]) -> None:
        """`apply_lines` for a run of lines numbered from `first_line_no`, clean runs at once.

        A clean run is what a recorder writes: every line checked and intact,
        plain appends that follow on from one another, no image, document or
        downgrade. Its checks are made for the whole run in a few calls, and
        its events are decoded in one call as the JSON array of the lines,
        straight into the messages the session keeps; anything else in the
        run (a damaged line, a rewrite, a block by hash) sends the whole run
        through `apply_lines`, so the reading is the same either way.
        """
        events = _clean_run(lines)
        if events is None:
            self.apply_lines(enumerate(lines, first_line_no))
            return
        held = len(self.messages)
        self.messages += chain.from_iterable(map(_MESSAGES, events))
        if len(self.messages) - held == len(events):
            sizes = None  # one message an event, as an agent loop records them
            ends: Sequence[int] = range(held, len(self.messages) + 1)
        else:
            sizes = list(map(len, map(_MESSAGES, events)))
            ends = list(accumulate(sizes, initial=held))
        if list(map(_START, events)) != list(ends[:-1]) or list(map(_N, events)) != list(ends[1:]):
            del self.messages[held:]
            self.apply_lines(enumerate(lines, first_line_no))
            return
        if not self.title:
            self.title = next(filter(None, map(_TITLE, events)), self.title)
        times = list(map(_TIME, events))
        self.times += times if sizes is None else chain.from_iterable(map(repeat, times, sizes))
        self.usage += chain.from_iterable(map(_USAGE, events))
        self.updated = times[-1]
        self.events += len(events)

    def apply_lines(self, lines: Iterable[tuple[int, bytes]]) -> None:
        """`apply_line` for each numbered line in turn, an empty line skipped (none is written).

        A load runs this once per line of the file, so the common event (an
        append that follows on, with no title, failure or downgrade) is
        applied here without `apply`'s general bookkeeping; every other one
        goes through `apply`.
        """
        for line_no, line in lines:
            if not line.strip() or (event := self._decoded(line, line_no)) is None:
                continue
            messages = event.messages
            if (
                event.event == "append"
                and event.start == len(self.messages)
                and event.n == event.start + len(messages)
                and not (event.title and not self.title)
                and not event.downgrades
                and event.system is None
                and (not messages or type(messages[0]) is Message)
            ):
                self.append(messages, event.time)  # type: ignore[arg-type]
                if event.usage:
                    self.usage += event.usage
                self.updated = event.time
                self.events += 1
            else:
                self.apply(event, line_no)

    def apply(self, event: AnyEvent, line_no: int) -> None:
        """Apply one decoded event; an inconsistent event names its line."""
        if event.event != "append" and event.event != "rewrite":
            # Not a kind this format has (a newer carryall changes the format
            # number, which the header check refuses): a hand edit or a forged
            # line, skipped like any other damage.
            self.damage.append(
                f"{self.where} line {line_no}: unknown event {event.event!r:.40}; skipped"
            )
            self.unsettled = True
            return
        new = self._restore(event)
        if event.event == "append":
            if event.start != len(self.messages):
                # A line before it was lost or repeated: its messages go where it
                # says they go, the gap or the overlap named.
                held = len(self.messages)
                self.damage.append(
                    f"{self.where} line {line_no}: append starts at message {event.start} "
                    f"but the history before it holds {held}; "
                    + (
                        f"messages {held} to {event.start - 1} are lost"
                        if event.start > held
                        else f"it replaces messages {event.start} on"
                    )
                )
                del self.messages[event.start :], self.times[event.start :]
                self.unsettled = True
            self.append(new, event.time)
        else:
            self.rewrite(new, event.time)
            self.unsettled = False
        if event.n != len(self.messages):
            self.damage.append(
                f"{self.where} line {line_no}: event says the history holds {event.n} "
                f"messages but replaying gives {len(self.messages)}"
            )
            self.unsettled = True
        if event.title and not self.title:
            self.title = event.title
        self.downgrades.extend(event.downgrades)
        self.usage.extend(event.usage)
        if event.system is not None:
            self.change_system(event.system, event.time)
        self.updated = event.time
        self.events += 1

    def append(self, tail: list[Message], time: str) -> None:
        """Add messages recorded at `time` after the history."""
        self.messages.extend(tail)
        self.times.extend([time] * len(tail))

    def rewrite(self, history: list[Message], time: str) -> int:
        """Replace the history with one recorded at `time`; returns how many messages stood.

        The messages it starts with unchanged keep their times.
        """
        keep = common_prefix(self.messages, history)
        self.rewrites += 1
        if self.keep_versions:
            self.versions.append(self.messages)
        self.times = self.times[:keep] + [time] * (len(history) - keep)
        self.messages = history
        return keep

    def _restore(self, event: AnyEvent) -> list[Message]:
        messages = event.messages
        if not messages or isinstance(messages[0], Message):
            # One decoder per line, so a line's messages are all of one kind.
            return messages  # type: ignore[return-value]
        return [restore(stored, self.load_image) for stored in messages]


class _PlainEvent(msgspec.Struct, frozen=True, gc=False):
    """`Event[Message]` as a clean run decodes it: the same fields, read the same way.

    Tuples and no collector tracking, so a run's events add nothing for the
    collector to scan while the session they build grows. Only a plain
    append with no downgrade and no system prompt change is one (`event`,
    `downgrades` and `system` say so), so a run holding any other event
    fails this decoding and is read by line; the usage an agent's appends
    carry is plain, and read here.
    """

    event: Literal["append"]
    time: str
    n: int
    start: int = 0
    title: str | None = None
    messages: tuple[Message, ...] = ()
    failed: str | None = None
    downgrades: Annotated[tuple[Downgrade, ...], msgspec.Meta(max_length=0)] = ()
    changes: Annotated[tuple[str, ...], msgspec.Meta(max_length=0)] = ()
    usage: tuple[RequestUsage, ...] = ()
    system: None = None


_batch_decoder = lazy_decoder(list[_PlainEvent])
_TAIL = slice(-_CHECK_TAIL, None)
_BODY = slice(None, -_CHECK_TAIL)
_WRITTEN = slice(None, _CHECK_HEX)
_CHECK_TEXT = _CHECK.decode()
_GLUE = '"}' + _CHECK_TEXT  # one line's check field ending, the next one's beginning
_MESSAGES = attrgetter("messages")
_START = attrgetter("start")
_N = attrgetter("n")
_TITLE = attrgetter("title")
_TIME = attrgetter("time")
_USAGE = attrgetter("usage")
_CONTENT = attrgetter("content")
_HEXDIGEST = methodcaller("hexdigest")


def _older_checks_hold(lines: list[bytes]) -> bool:
    """Whether every line of a run ends in an older (SHA-256) check field and its check holds.

    The checks are compared in one piece: the last bytes of every line, as
    long as a check field and its `}`, joined, against the check fields the
    lines' hashes give, joined. Each piece of the second is exactly that
    long, so the two are equal only if every line ends in its own check.
    """
    written = b"".join(map(bytes.__getitem__, lines, repeat(_TAIL)))
    bodies = map(bytes.__add__, map(bytes.__getitem__, lines, repeat(_BODY)), repeat(b"}"))
    checks = map(str.__getitem__, map(_HEXDIGEST, map(hashlib.sha256, bodies)), repeat(_WRITTEN))
    return written.decode("latin-1") == f'{_CHECK_TEXT}{_GLUE.join(checks)}"}}'


def _clean_run(lines: list[bytes]) -> list[_PlainEvent] | None:
    """A run's events when every line is checked, intact and plain, else None (read it by line).

    The same tests `decode_event` makes, over the whole run at once: each
    line's check holds (a line without one, an older line, is read by line),
    the lines decode as one JSON array into exactly one event each, and no
    image or document came out (only those two read differently when a line
    holds blocks by hash). A run of lines written with CRC fields is checked
    in one call over the bytes decoded (`_crc_holds`), a run of older lines
    by `_older_checks_hold`.
    """
    count = len(lines)
    if not count:
        return None
    run = b"".join((b"[", _JOIN.join(lines), b"]"))
    if not _crc_holds(memoryview(run)[1:-1]) and not _older_checks_hold(lines):
        return None
    try:
        events = _batch_decoder.decode(run)
    except _DECODE_ERRORS:
        return None
    if len(events) != count:
        return None  # a line that held two values, or none: read by line, it is damage
    try:
        for moment in map(_TIME, events):
            parse_time(moment)
    except TranscriptError:
        return None  # read by line, where the line with no transcript time is named
    blocks = chain.from_iterable(map(_CONTENT, chain.from_iterable(map(_MESSAGES, events))))
    kinds = set(map(type, blocks))
    if Image in kinds or Document in kinds:
        return None
    return events


def iter_events(lines: Sequence[bytes], first_line_no: int) -> Iterator[tuple[int, bytes]]:
    """Number the non-empty lines of a chunk (an empty line is never written, so skip it)."""
    for offset, line in enumerate(lines):
        if line.strip():
            yield first_line_no + offset, line

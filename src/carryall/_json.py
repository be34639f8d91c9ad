"""JSON both ways: the strict reading of model-written JSON, and a request body as bytes.

One home, imported by the prompt-mode grammars, the OpenAI codec and the
flat histories, so "is this JSON" has one answer everywhere: JSON that every
wire can carry again, read without ever raising. `body_bytes` is the one
writer of a wire body, so every codec's bytes are made the same way, once;
`WrittenAhead` lets an encoder write a long item list's chunks with it as
they are built (the same bytes, with far fewer dicts alive at once), and
`Payload` lets it hand over an image's or a document's base64 to be copied
into the body as it is (`builtins` gives an encoder's dict form the text).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any, Final

import msgspec

from carryall.blocks import _shared_start

__all__ = [
    "KeptItems",
    "One",
    "Payload",
    "body_bytes",
    "builtins",
    "carryable",
    "load_json",
    "repair_surrogates",
    "repair_text",
]
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(text: str) -> tuple[bool, Any]:
    """`(True, value)` when `text` is JSON every wire can carry again, else `(False, None)`.

    The one reading of model-written JSON (tool arguments, constrained
    answers) for every codec; it never raises.
    """
    try:
        # NaN and Infinity are Python's extension, not JSON: arguments holding
        # them could not be sent on any wire again.
        return True, json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        # RecursionError: deeply nested hostile JSON is a malformed call, not a crash.
        return False, None


def carryable(value: Any) -> bool:
    """Whether an already-decoded JSON value holds only what every wire can carry again.

    The check `load_json` makes while reading, for a value a transport parsed
    (its parser reads NaN and Infinity): no non-finite number anywhere. The
    walk is iterative, so a deep value cannot exhaust the stack.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue  # the commonest leaves, without the abstract-class checks below
        if kind is dict:
            stack.extend(item.values())
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return False
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


def repair_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, so it can be encoded again.

    A JSON `\\ud800` escape with no partner decodes to a string no stream
    can write: kept, it would fail the next request and the recording.
    """
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def repair_surrogates(value: Any) -> Any:
    """A decoded JSON value with `repair_text` applied to every string in it, keys too.

    Where model or file JSON enters (the decoders, the importers), so no
    unencodable string reaches a message. A value with none is returned as is.
    """
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, dict):
        return {repair_text(k): repair_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [repair_surrogates(v) for v in value]
    return value


class Payload:
    """Base64 text bound for a body, after a short `prefix` (a `data:` URL's head, or none).

    An encoder puts one where an image's or a document's bytes go, instead
    of the text itself. `body_bytes` writes it as the JSON string of
    `prefix + data`, the same bytes msgspec writes for that string, but with
    the base64 copied in as it is: msgspec would read every character for
    escapes (base64 needs none), and a `data:` URL would be a fresh copy of
    the payload first. For a history's images that is most of a request's
    encoding beyond the floor. `builtins` gives the text, for the dict form.
    """

    __slots__ = ("data", "prefix")

    def __init__(self, data: str, prefix: str = "") -> None:
        self.data = data
        self.prefix = prefix

    @classmethod
    def data_url(cls, media_type: str, data: str) -> Payload:
        """The `data:` URL of base64 `data` of `media_type`."""
        return cls(data, f"data:{media_type};base64,")

    @property
    def text(self) -> str:
        return self.prefix + self.data

    def __repr__(self) -> str:
        return f"Payload({self.prefix!r} + {len(self.data)} characters)"


class _Plain:
    """The payload texts lately found to need no JSON escape, known by identity.

    Whether a text needs none is asked of msgspec itself the first time it
    is written (its JSON is the text between two quotes exactly when it
    escapes nothing), so a text that does need escaping (not base64 after
    all) is written escaped by msgspec, and a plain one gives the very bytes
    msgspec would have written. The same history goes out with every request
    of a turn and of the turns after it, so a text is then known at once.
    Texts are held (their identity is the key) up to `LIMIT` characters in
    all, the earliest found going first: a history holds them anyway while
    it is sent, and one dropped leaves at most that much behind.
    """

    LIMIT: Final = 64 << 20

    def __init__(self) -> None:
        self._known: dict[int, str] = {}
        self._held = 0
        self._lock = threading.Lock()

    def __contains__(self, text: str) -> bool:
        known = self._known
        if known.get(id(text)) is text:
            return True
        if not _needs_no_escape(text):
            return False
        with self._lock:
            if known.get(id(text)) is None:
                known[id(text)] = text
                self._held += len(text)
                while self._held > self.LIMIT and len(known) > 1:
                    self._held -= len(known.pop(next(iter(known))))
        return True


def _needs_no_escape(text: str) -> bool:
    return text.isascii() and len(_ESCAPE.encode(text)) == len(text) + 2


_ESCAPE: Final = msgspec.json.Encoder()
_PLAIN: Final = _Plain()


def _plain_payload(value: Any) -> bool:
    # A payload whose JSON is its text between quotes: copied in as it is.
    return type(value) is Payload and value.data in _PLAIN and _needs_no_escape(value.prefix)


def _written(value: Any) -> Any:
    # `_BODY`'s hook (chunks written ahead, and `body_bytes` when it cannot
    # gather): msgspec calls it for what it cannot write itself.
    if _plain_payload(value):
        return msgspec.Raw(f'"{value.prefix}{value.data}"')
    return _as_text(value)


def _as_text(value: Any) -> Any:
    # `builtins`'s hook, and `body_bytes`'s for a payload that needs escaping.
    if type(value) is Payload:
        return value.text
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


_BODY: Final = msgspec.json.Encoder(enc_hook=_written)


def body_bytes(body: Mapping[str, Any]) -> bytes:
    """`body` as the compact UTF-8 JSON a request sends: one pass of msgspec's encoder.

    The bytes a transport hands to the socket, so the SDK neither walks nor
    copies the body again. A `Payload` in it is written as its text, and
    written once: msgspec writes the rest of the body with a one-byte mark
    where each payload goes, and the body is then gathered in one
    allocation of its exact size (`bytes.join` over the pieces between the
    marks and a zero-copy view of each payload's text), instead of each
    payload first copied into a quoted string and the whole grown as it is
    written. A value msgspec cannot write (a tool schema holding a Python
    object) is a `TypeError` naming its type, as the SDK's own serializer
    would raise.
    """
    payloads: list[Payload] = []

    def marked(value: Any) -> Any:
        if _plain_payload(value):
            payloads.append(value)
            return _MARK
        return _as_text(value)

    out = msgspec.json.Encoder(enc_hook=marked).encode(body)
    if not payloads:
        return out
    if out.count(_NUL) != len(payloads):
        # A NUL msgspec did not write for a mark (only a `Raw` holding invalid
        # JSON can carry one): written the plain way, each payload in place.
        return _BODY.encode(body)
    view = memoryview(out)
    pieces: list[Any] = []
    at = 0
    for payload in payloads:
        mark = out.index(_NUL, at)
        pieces += (view[at:mark], f'"{payload.prefix}'.encode(), msgspec.Raw(payload.data), b'"')
        at = mark + 1
    pieces.append(view[at:])
    return b"".join(pieces)


# Where `body_bytes` puts a payload: a byte msgspec never writes itself (it
# escapes every control character inside a string, and none stands outside one).
_NUL: Final = b"\x00"
_MARK: Final = msgspec.Raw(_NUL)


def builtins(value: Any) -> Any:
    """`msgspec.to_builtins` of an encoder's wire objects, each `Payload` as its text."""
    return msgspec.to_builtins(value, enc_hook=_as_text)


class One(msgspec.Struct, gc=False, array_like=True):
    """A JSON array of one item, as `body_bytes` writes it: `[item]`, with no list to track.

    For the one-item arrays a wire body holds per message (a lone tool call,
    a lone content part), so a long history's body is not a tracked list
    per message until it is sent; `msgspec.to_builtins` makes it `[item]`.
    """

    item: Any


class WrittenAhead:
    """A long item list written to JSON while it is built, so its dicts die young.

    An encoder that builds its body for `body_bytes` calls `step` before
    each message it writes: once `CHUNK` items have gathered, all but the
    last (which the encoder may still extend) are encoded in one msgspec
    pass and stand in the list as one `msgspec.Raw` of those items, commas
    between them, which `body_bytes` copies into the array where the dicts
    would have gone, so the bytes are the same. Tens of thousands of dicts
    held until the body is finished are what set off the collector's full
    passes on a long history; a chunk's dicts are freed as it is written.
    Every request is written whole again: nothing is kept between requests.
    A chunk holding one of the `payloads` messages (an image's or a
    document's base64) stays as dicts: writing it ahead would copy its
    payload twice, and payloads are few containers and many bytes.
    """

    CHUNK: Final = 256

    __slots__ = ("_payload", "_payloads", "_previous", "_start")

    def __init__(self, payloads: Container[int]) -> None:
        self._payloads = payloads
        self._start = 0
        self._payload = False  # the gathering chunk holds a payload
        self._previous = False  # the message written last holds one

    def step(self, items: list[Any], index: int) -> None:
        """Before message `index` is written into `items`: write ahead what has gathered."""
        end = len(items) - 1
        if end - self._start >= self.CHUNK:
            if not self._payload:
                chunk = _BODY.encode(items[self._start : end])
                items[self._start : end] = [msgspec.Raw(memoryview(chunk)[1:-1])]
                end = self._start + 1
            self._start = end
            self._payload = False
        if self._previous:
            # A message's payload rides its last item, the one kept back
            # above: it is in the chunk gathering now.
            self._payload = True
        self._previous = index in self._payloads


class KeptItems:
    """The message items of the last body written, kept as JSON for the next body that repeats them.

    An agent sends its whole history with every step, and each step's
    history is the last one with a few messages added, so all but those few
    were written to JSON by the request before. A transport's codec holds
    one of these (`anthropic_codec`, `openai_codec`, `responses_codec`, with
    native tool calls); its encoder asks
    `items` for a history's message items instead of writing them all. The
    items come back as `msgspec.Raw` chunks of JSON where the history still
    holds the very messages the last one did (or equal ones) from the
    start, and as wire objects after that; `body_bytes` writes both into
    the same bytes a body built whole would hold, so what is sent never
    depends on what was kept.

    Nothing is written twice for it: a chunk is the JSON of up to `CHUNK`
    messages, written once and copied into the body after; a history that
    shares no start with the last one is written whole, as without this,
    and its chunks are made the next time, when it goes on. A message
    holding an image's or a document's base64 (`payloads`) is never kept:
    its bytes would be a second copy of the payload, held until the next
    request, and writing it is the copy every body makes anyway. A message
    is a frozen value; a tool input dict changed in place after it was sent
    is not seen (the same rule as the session store's). Held: the last
    history's message list (the messages the history holds anyway) and its
    JSON without payloads. Safe to share between threads: each call reads
    one held state and replaces it whole when done, so the worst a race
    does is write again what another thread kept.
    """

    CHUNK: Final = 256

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: tuple[Sequence[Any], tuple[tuple[int, int, msgspec.Raw | None], ...]] = (
            (),
            (),
        )

    def items(
        self,
        messages: Sequence[Any],
        payloads: Container[int],
        write: Callable[[int, int], list[Any]],
    ) -> list[Any]:
        """The items of `messages`: kept chunks for the repeated start, `write(start, end)`'s after.

        `write(start, end)` gives the wire items of `messages[start:end]`;
        what it raises (a tool input msgspec will not write) is raised here
        and nothing is kept.
        """
        held, chunks = self._held
        shared = _shared_start(held, messages)
        if not shared:
            # Nothing repeats: written whole, as without `KeptItems`, and only
            # remembered. JSON is kept once a history goes on from this one,
            # so a request that is never followed up costs nothing extra.
            whole = write(0, len(messages))
            self._held = (messages, ())
            return whole
        out: list[Any] = []
        kept: list[tuple[int, int, msgspec.Raw | None]] = []
        start = 0
        for chunk in chunks:
            first, end, raw = chunk
            if end > shared:
                break
            if raw is None:
                out += write(first, end)
            elif raw:
                out.append(raw)
            kept.append(chunk)
            start = end
        count = len(messages)
        while start < count:
            if start in payloads:
                out += write(start, start + 1)
                kept.append((start, start + 1, None))
                start += 1
                continue
            end = min(start + self.CHUNK, count)
            for index in range(start + 1, end):
                if index in payloads:
                    end = index
                    break
            raw = _chunk(write(start, end))
            if kept and kept[-1][2] is not None and kept[-1][1] - kept[-1][0] < self.CHUNK:
                # The small chunk the last request ended on and this one go
                # on as one, so a long run of steps is not a chunk per step.
                first, _, before = kept.pop()
                if out and out[-1] is before:
                    out.pop()
                raw = _joined(before, raw)
                start = first
            if raw:
                out.append(raw)
            kept.append((start, end, raw))
            start = end
        self._held = (messages, tuple(kept))
        return out


def _chunk(items: list[Any]) -> msgspec.Raw:
    # The items' JSON without the array's brackets: commas between, as the
    # body's array would hold them. No items: an empty Raw, left out.
    if not items:
        return msgspec.Raw(b"")
    return msgspec.Raw(memoryview(_BODY.encode(items))[1:-1])


def _joined(before: msgspec.Raw | None, after: msgspec.Raw) -> msgspec.Raw:
    if not before:
        return after
    if not after:
        return before
    return msgspec.Raw(b",".join((bytes(before), bytes(after))))

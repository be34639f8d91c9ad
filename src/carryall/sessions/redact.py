"""Redaction: secrets cut out of every string a session store writes.

Agents read files, environments and command output, so live credentials end
up in transcripts. A `Redactor` replaces every match of its patterns with
`REDACTED`, and it does so by construction rather than by a list of cases:
`Redactor.walk` goes through every field of every `msgspec.Struct` it is
given (a message and its blocks, a whole event line with its title, its
`failed` note and its downgrade reasons, a session's header with its title,
system prompt, `cwd`, origin and tool names), every list, tuple and JSON
object inside, and redacts every string it meets, object keys included. A
block type added later is redacted the day it is added; only what `_KEPT`
names is passed over, each entry with its reason.

What is kept: opaque tokens only their maker reads back (signatures, a
provider's encrypted thinking), bytes (image data, a blob's hash) and the
identities the file's structure hangs on (the session id, an event's kind
and time). A tool call's id is text a model wrote, but a history pairs it
with its result by equality, so a matching one becomes a stand-in derived
from it (`redacted-<digest>`), the same in the call and its result. A plain
text document is text inside base64: its bytes are decoded, redacted and
encoded again, before the store hashes them into its blob folder. A thinking
block whose text changes loses its signature (the signature certifies that
text, and a provider refuses a changed one): it becomes ordinary unsigned
thinking that stays in the transcript and off the wires that check
signatures. A provider-native block (`Opaque`) is echoed to its origin byte
for byte or not at all, so one holding a match becomes its redacted text
line.

The built-in patterns match the shapes of common API keys and tokens, each
anchored so that a longer identifier that merely contains one is left
alone; the config file adds the user's own (`[redact] patterns`). This
module is pure: it turns values into values, and the one place it reads
bytes a store holds (a document kept by hash, when `sessions redact` walks a
stored event) goes through the `BlobAccess` the store hands it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol

import msgspec

from carryall.blocks import (
    Citation,
    Document,
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
)
from carryall.errors import CarryallError
from carryall.sessions._transcript import Event, SessionMeta, StoredDocument, StoredImage

__all__ = [
    "BUILTIN_PATTERNS",
    "REDACTED",
    "BlobAccess",
    "Redactor",
    "compile_pattern",
    "configured_redactor",
]

REDACTED: Final = "[redacted]"
"""What a redacted string becomes: one wording, so a reader can search for it."""

# Each key shape after a boundary no key character crosses, so `ghp_...`
# inside a longer word, or a hash that merely starts like a key, stays text.
_EDGE = r"(?<![A-Za-z0-9_-])"
BUILTIN_PATTERNS: Final[Mapping[str, str]] = {
    "anthropic": _EDGE + r"sk-ant-[A-Za-z0-9_-]{20,}",
    "openai": _EDGE + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "github": _EDGE + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "aws-access-key": _EDGE + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
    "bedrock": _EDGE + r"ABSK[A-Za-z0-9+/]{32,}={0,2}",
    "slack": _EDGE + r"xox[abprs]-[A-Za-z0-9-]{10,}",
    "google": _EDGE + r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
    "stripe": _EDGE + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
    "huggingface": _EDGE + r"hf_[A-Za-z0-9]{30,}",
    "private-key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        r"[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ),
}
"""The shapes of common API keys and tokens, by the name of who issues them."""

_MARKS: Final[Mapping[str, tuple[str, ...]]] = {
    "anthropic": ("sk-",),
    "openai": ("sk-",),
    "github": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "aws-access-key": ("AKIA", "ASIA"),
    "bedrock": ("ABSK",),
    "slack": ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"),
    "google": ("AIza",),
    "stripe": ("k_live_", "k_test_"),
    "huggingface": ("hf_",),
    "private-key": ("-----BEGIN ",),
}
"""For each built-in pattern, the text of which every match of it holds one.

Most stored text holds no key, and one scan for these few literals says so
several times faster than the patterns (whose boundary lookbehind is tried
at every position): text holding none of them is passed over by the
built-in patterns whole, and a match is cut by the patterns as ever.
"""

_MARK_TEXTS: Final = sorted({m for ms in _MARKS.values() for m in ms})

_KEPT: Final = frozenset(
    {
        # Opaque tokens, for their origin only: a signature certifies its
        # block, encrypted thinking is meaningless to a person.
        (Thinking, "signature"),
        (ToolUse, "signature"),
        (RedactedThinking, "data"),
        # Bytes, and the names of bytes.
        (Image, "data"),
        (StoredImage, "sha256"),
        (StoredDocument, "sha256"),
        # Checked against an allowlist when made: never free text.
        (Image, "media_type"),
        (StoredImage, "media_type"),
        (Document, "media_type"),
        (StoredDocument, "media_type"),
        # The structure a file is read by: the name it is kept under, what an
        # event does and when (a reader checks both).
        (SessionMeta, "id"),
        (Event, "event"),
        (Event, "time"),
    }
)
"""The fields `Redactor.walk` passes over, by struct type and field name; every other is walked."""


class BlobAccess(Protocol):
    """How a walk over stored events reads and stores the bytes a document holds by hash."""

    def get_blob(self, sha256: str, /) -> bytes:
        """The bytes stored under a content hash; a `CarryallError` when they cannot be read."""
        ...

    def put_blob(self, data: bytes, /) -> str:
        """Store bytes; their content hash."""
        ...


def compile_pattern(pattern: str, where: str) -> re.Pattern[str]:
    """A user's regular expression, or a `CarryallError` naming where it came from and why."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise CarryallError(f"{where}: {pattern!r} is not a regular expression: {exc}") from None
    if compiled.search(""):
        raise CarryallError(
            f"{where}: {pattern!r} matches the empty string, so it would match everywhere"
        )
    return compiled


class Redactor:
    """Replaces every match of a set of patterns with `REDACTED` in every string of a value.

    `Redactor()` has the built-in patterns; `patterns` adds compiled user
    patterns; `builtin=False` leaves only those. With no pattern at all it
    changes nothing (and costs nothing). A value with nothing to redact
    comes back as the very same object, so a caller can tell by identity.
    """

    def __init__(self, patterns: Iterable[re.Pattern[str]] = (), *, builtin: bool = True) -> None:
        self._builtin = builtin
        self._users = [p.pattern for p in patterns]

    @functools.cached_property
    def _scan(self) -> _Scan | None:
        # Compiled with the first thing redacted, since every store has a
        # redactor and a reader (`sessions list`, `recall`) writes nothing.
        if not self.active:
            return None
        return _Scan(builtin=self._builtin, users=self._users)

    @property
    def active(self) -> bool:
        """Whether any pattern is set."""
        return self._builtin or bool(self._users)

    def text(self, text: str) -> str:
        """`text` with every match replaced (the same object when nothing matched)."""
        scan = self._scan
        return text if scan is None else scan.sub(text)

    def optional(self, text: str | None) -> str | None:
        """`text` redacted, `None` kept."""
        return None if text is None else self.text(text)

    def walk(self, value: Any, blobs: BlobAccess | None = None) -> Any:
        """`value` with every string in it redacted: the one redaction every stored string passes.

        Strings, lists, tuples, dicts (keys too) and every field of every
        `msgspec.Struct` but those `_KEPT` names; anything else (numbers,
        times, enums) is kept. `blobs` lets a walk over stored events redact
        a plain text document held by hash: its bytes are read, redacted and
        stored again under their new hash. Without it such a document is
        kept as it is (an event being written holds its documents whole).
        """
        scan = self._scan
        if scan is None or (blobs is None and scan.passes(value)):
            return value
        return _Walk(scan, blobs).value(value)

    def passes_json(self, data: bytes) -> bool:
        """Whether `walk` surely leaves the value whose JSON form is `data` as it is.

        For a writer that encodes what it stores anyway: one scan of those
        bytes (see `_Scan.passes`) stands for the walk, so a value with
        nothing to redact is neither walked nor encoded twice. False means
        only that the walk must be made (a mark is there, or user patterns,
        which have no marks, are set).
        """
        scan = self._scan
        return scan is None or scan.passes_json(data)

    def value(self, value: Any) -> Any:
        """A JSON value with every string in it (object keys included) redacted (`walk`)."""
        return self.walk(value)

    def block(self, block: Any) -> Any:
        """One block redacted (`walk`)."""
        return self.walk(block)

    def message(self, message: Any) -> Any:
        """A `Message` (or the store's form of one, with blocks by hash) redacted (`walk`)."""
        return self.walk(message)

    def history(self, messages: Iterable[Message]) -> list[Message]:
        """Every message of a history redacted."""
        return [self.message(m) for m in messages]


class _Scan:
    """A redactor's patterns as one alternation, so a string is scanned once however many there
    are, behind one scan for the built-in patterns' `_MARKS`.

    Where no mark is, no built-in alternative matches at any position, so
    the alternation cuts exactly what the user's patterns alone cut: they
    come after the built-in ones, which hold no group to renumber theirs.
    """

    def __init__(self, *, builtin: bool, users: list[str]) -> None:
        self._builtin = builtin
        self._user_sources = users
        # In a JSON form, a doubled backslash is an escape in a native block's
        # JSON and a document's tag starts its base64: both are walked.
        unseen = [*_MARK_TEXTS, "\\\\", *_HIDDEN_TAGS]
        self._json_marks = re.compile(_any_of(unseen).encode()) if builtin and not users else None

    @functools.cached_property
    def _marks(self) -> re.Pattern[str] | None:
        """The built-in patterns' marks, as a string is scanned for them (None: no built-ins).

        Compiled when a string is first redacted: a writer whose events all
        pass `passes_json` never scans a string on its own.
        """
        return re.compile(_any_of(_MARK_TEXTS)) if self._builtin else None

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """Every pattern as one alternation, the built-in ones first.

        Compiled when a string first needs it: with only the built-in
        patterns, that is the first string holding a mark, and a writer
        whose text holds none never pays for compiling them.
        """
        builtin = BUILTIN_PATTERNS.values() if self._builtin else ()
        return _alternation([*builtin, *self._user_sources])

    @functools.cached_property
    def _users(self) -> re.Pattern[str] | None:
        """The user's patterns alone: what can match where no mark is."""
        users = self._user_sources
        return _alternation(users) if self._builtin and users else None

    def passes(self, value: Any) -> bool:
        """Whether a walk of `value` surely meets no match, told from its JSON form in one scan.

        Every string a walk meets is in that form as it is, for the marks
        are letters, digits, `_`, `-` and spaces, which JSON never escapes,
        and no field left out at its default holds text. Two things a walk
        reads are not: text a native block's JSON spells with escapes
        (every escape is a backslash, which the form doubles) and a plain
        text document's base64; a value holding either is walked. So is
        every value when there are user patterns, which have no marks.
        """
        if self._json_marks is None:
            return False
        try:
            data = _json.encode(value)
        except (msgspec.EncodeError, TypeError, ValueError, RecursionError):
            return False
        return self.passes_json(data)

    def passes_json(self, data: bytes) -> bool:
        """`passes` for a value already written as JSON (`data`, as msgspec writes it)."""
        return self._json_marks is not None and self._json_marks.search(data) is None

    def _for(self, text: str) -> re.Pattern[str] | None:
        """The patterns that can match somewhere in `text` (None: none can)."""
        if self._marks is None or self._marks.search(text) is not None:
            return self.pattern
        return self._users

    def sub(self, text: str) -> str:
        """`text` with every match replaced (the same object when nothing matched)."""
        pattern = self._for(text)
        return text if pattern is None else pattern.sub(REDACTED, text)

    def search(self, text: str) -> bool:
        """Whether anything in `text` matches."""
        pattern = self._for(text)
        return pattern is not None and pattern.search(text) is not None


def _alternation(sources: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{s})" for s in sources))


def _any_of(words: Iterable[str]) -> str:
    """A pattern that finds any of the literal `words`, written as a tree of their beginnings.

    `re` tries the alternatives of a flat list one after another wherever
    one could start; as a tree (`A(?:BSK|Iza|KIA|SIA)|gh...`) each character
    is tried once, which is what makes the scan every written event gets
    cheap. Only whether some word is there counts, so a word that begins a
    longer one stands for both.
    """

    def tree(rests: list[str]) -> str:
        if "" in rests:
            return ""  # a word ends here: the longer ones add nothing found
        firsts: dict[str, list[str]] = {}
        for rest in rests:
            firsts.setdefault(rest[:1], []).append(rest[1:])
        branches = [re.escape(first) + tree(more) for first, more in sorted(firsts.items())]
        return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"

    return tree(sorted(set(words)))


class _Walk:
    """One walk of `Redactor.walk`: the compiled patterns and the blob access it was given."""

    def __init__(self, scan: _Scan, blobs: BlobAccess | None) -> None:
        self.scan = scan
        self.blobs = blobs

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self.scan.sub(value)
        if kind is list or kind is tuple:
            items = [self.value(item) for item in value]
            for new, old in zip(items, value, strict=True):
                if new is not old:
                    return items if kind is list else tuple(items)
            return value
        if kind is dict:
            out = {}
            changed = False
            for key, item in value.items():
                new_key = self.value(key) if type(key) is str else key
                new_item = self.value(item)
                changed = changed or new_key is not key or new_item is not item
                out[new_key] = new_item
            return out if changed else value
        if isinstance(value, msgspec.Struct):
            special = _STRUCTS.get(kind)
            return special(self, value) if special is not None else self.struct(value)
        return value

    def struct(self, value: msgspec.Struct) -> Any:
        """Every field of a struct walked but those `_KEPT` names."""
        changes: dict[str, Any] = {}
        for name, rule in _walked(type(value)):
            old = getattr(value, name)
            if old is None:
                continue  # an unset optional field: nothing in it
            new = rule(self, value, old) if rule is not None else self.value(old)
            if new is not old:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value

    def identifier(self, _: Any, text: str) -> str:
        """A matching id as a stand-in derived from it, so equal ids stay equal and distinct ones
        distinct (a call and its result keep their pairing)."""
        if not self.scan.search(text):
            return text
        import hashlib  # OpenSSL's library loads with the first digest, which is rare here

        return f"redacted-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"

    def document_data(self, document: Document | StoredDocument, data: str) -> str:
        """A plain text document's base64 with its text redacted; any other kept."""
        if document.media_type != "text/plain" or not data:
            return data
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return data  # refused where it is read; nothing here to redact as text
        clean = self.bytes(raw)
        return data if clean is raw else base64.b64encode(clean).decode("ascii")

    def bytes(self, raw: bytes) -> bytes:
        """Text bytes redacted as UTF-8 (bytes that are not are kept as they are)."""
        text = raw.decode("utf-8", "surrogateescape")
        clean = self.scan.sub(text)
        return raw if clean is text else clean.encode("utf-8", "surrogateescape")

    def stored_document(self, document: StoredDocument) -> Any:
        """A document held by hash: its fields, and its bytes when the walk can reach them."""
        out = self.struct(document)
        if self.blobs is None or not out.sha256 or out.media_type != "text/plain":
            return out
        try:
            raw = self.blobs.get_blob(out.sha256)
        except CarryallError:
            # Bytes that are gone (or fail their hash) are not read by anyone:
            # the stores show such a document as its placeholder.
            return out
        clean = self.bytes(raw)
        if clean is raw:
            return out
        return msgspec.structs.replace(out, sha256=self.blobs.put_blob(clean))

    def thinking(self, block: Thinking) -> Any:
        """Thinking walked; one whose text changed loses the signature that certified it."""
        out = self.struct(block)
        if out is block or out.signature is None or out.text == block.text:
            return out
        return msgspec.structs.replace(out, signature=None, origin=None)

    def citation(self, citation: Citation) -> Any:
        """A citation walked; one that changed loses its native form, which no longer says it."""
        out = self.struct(citation)
        if out is citation:
            return citation
        return msgspec.structs.replace(out, raw="", origin=None)

    def opaque(self, block: Opaque) -> Any:
        """A native block echoed byte for byte or not at all: one holding a match anywhere (its
        kind, JSON, text or origin) is its redacted text line."""
        decoded = _json_value(block.raw)
        if self.struct(block) is block and self.value(decoded) is decoded:
            return block
        return Text(self.scan.sub(block.text))


_NOT_JSON: Final = object()


def _json_value(raw: str) -> Any:
    """The value a native block's JSON holds (its strings unescaped, so an escaped key is read
    as the key), or `_NOT_JSON`, which a walk leaves as it is."""
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return _NOT_JSON


_FIELDS: Final[dict[tuple[type, str], Callable[[_Walk, Any, Any], Any]]] = {
    (ToolUse, "id"): _Walk.identifier,
    (ToolResult, "tool_use_id"): _Walk.identifier,
    (Document, "data"): _Walk.document_data,
    (StoredDocument, "data"): _Walk.document_data,
}
"""Fields walked by a rule of their own rather than as plain strings."""

_STRUCTS: Final[dict[type, Callable[[_Walk, Any], Any]]] = {
    Thinking: _Walk.thinking,
    Opaque: _Walk.opaque,
    ServerToolCall: _Walk.opaque,
    ServerToolResult: _Walk.opaque,
    Citation: _Walk.citation,
    StoredDocument: _Walk.stored_document,
}
"""Structs whose fields hang together: walked by a rule that keeps them consistent."""

_json: Final = msgspec.json.Encoder()

_HIDDEN_TAGS: Final = frozenset(
    f':"{kind.__struct_config__.tag}"'  # type: ignore[attr-defined]
    for (kind, _), rule in _FIELDS.items()
    if rule is _Walk.document_data
)
"""What the JSON form of a struct holding text as base64 holds: its tag as a value
(`"type":"document"` begins it). `_Scan.passes` walks a value holding one; only the tag's
own part is looked for, since a `"` would have the scan try at every string of the form."""


@functools.cache
def _walked(kind: type) -> tuple[tuple[str, Callable[[_Walk, Any, Any], Any] | None], ...]:
    """A struct type's fields a walk visits, each with its own rule (None: walked as a value);
    worked out once a type, since every event walks the same few."""
    fields: tuple[str, ...] = getattr(kind, "__struct_fields__", ())
    return tuple((name, _FIELDS.get((kind, name))) for name in fields if (kind, name) not in _KEPT)


def configured_redactor() -> Redactor:
    """The redactor the config file asks for: the built-in patterns and its `[redact]` table."""
    from carryall.config import load_config

    settings = load_config().redact
    patterns = [
        compile_pattern(p, f"config file redact.patterns[{i}]")
        for i, p in enumerate(settings.patterns)
    ]
    return Redactor(patterns, builtin=settings.builtin)

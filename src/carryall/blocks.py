"""The content-block model: what a conversation is made of, on every backend.

A message is a role and a list of blocks. The system prompt belongs to the
request; a `system` message inside the history is an instruction given
mid-conversation (OpenAI `system`/`developer` messages anywhere), text only,
which each wire takes natively or folded into a user turn.
Blocks are immutable values that compare by value: session recording decides
between "append the new tail" and "the transcript was rewritten in place" by
comparing the messages a run started from with what it left behind.
"""

from __future__ import annotations

import base64
import binascii
import operator
import os
import re
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any, Final, Literal, NamedTuple, TypeAlias

import msgspec

from carryall.carrier import Marker
from carryall.errors import BlockError, HistoryError

__all__ = [
    "DOCUMENT_MEDIA_TYPES",
    "IMAGE_MEDIA_TYPES",
    "LEGACY_REDACTED_PREFIX",
    "Block",
    "Citation",
    "Document",
    "Downgrade",
    "Footnotes",
    "HistorySurvey",
    "Image",
    "Message",
    "Opaque",
    "Origin",
    "RedactedThinking",
    "Role",
    "ServerToolCall",
    "ServerToolResult",
    "Spelling",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolUse",
    "apply_image_limit",
    "block_from_dict",
    "block_to_dict",
    "document_media_type",
    "document_placeholder",
    "footnoted",
    "image_media_type",
    "image_placeholder",
    "messages_from_dicts",
    "messages_to_dicts",
    "survey_history",
    "validate_history",
]

Role: TypeAlias = Literal["user", "assistant", "system"]

IMAGE_MEDIA_TYPES: frozenset[str] = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp"}
)
"""The media types every backend takes. An allowlist, not a guess at what is an image."""

DOCUMENT_MEDIA_TYPES: frozenset[str] = frozenset({"application/pdf", "text/plain"})
"""The document types a `Document` holds: what the wires that take documents all take."""

LEGACY_REDACTED_PREFIX: Final = "redacted_thinking:"
"""How transcripts written before `RedactedThinking` spelled it: a `Thinking` signature prefix.

Such a block loads as a `RedactedThinking` (see `Message`); nothing writes
the prefix any more.
"""

_EXTENSION_MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


class Origin(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """Where something only its maker may read back was made: a wire, a server, a model, a key.

    Stamped by every decoder on signatures, reasoning (signed or not) and
    provider-native blocks. `dialect` is the codec's wire (`anthropic`,
    `openai`, `llama-server`), `endpoint` the host of the base URL the
    answer came from (the transport supplies it: the same dialect on two
    servers must not share signatures), `model` the model the answer names
    (`claude-sonnet-4-5-20250929`), `requested` the name the request asked
    for (`claude-sonnet-4-5`: people and configs name aliases, answers name
    dated models, and a continuation asks by the alias again), `account` a
    short fingerprint of the credential on wires whose encrypted content is
    bound to it (never the key itself). An encoder sends a signed or opaque
    thing back only to its own origin (`same_maker`).
    """

    dialect: str
    endpoint: str
    model: str
    requested: str = ""
    account: str = ""

    def same_maker(self, target: Origin) -> bool:
        """Whether `target` (where a request goes) may read back what this origin made.

        The dialect and endpoint must be the same, the request's model
        either name this origin answered to (the one asked for or the one
        that answered), and the account the same when both name one: an
        origin written before accounts were recorded, or a request that
        names none, is judged by the rest.
        """
        model = target.model
        return (
            self.dialect == target.dialect
            and self.endpoint == target.endpoint
            and (model == self.model or (bool(self.requested) and model == self.requested))
            and (not self.account or not target.account or self.account == target.account)
        )


class Spelling(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """How the wire a block was read from wrote it, where the block model says nothing.

    A recorded or imported history is echoed to its own origin byte for
    byte, so what the wire spelled that no block field holds rides on the
    block: `extra` is the JSON object of the item's own fields the block
    does not model (an item id, a status, a phase, an `is_error: false`
    written out, a Chat Completions call's `arguments` text where the
    block holds only the value it reads as), `form` the codec's name for how it laid out what the
    block does model (a result's text as a list of text blocks, a message
    without its type, snake_case keys), "" for the codec's own layout. The
    encoder of `origin`'s wire writes it back; every other wire leaves it
    off and names what `extra` held (`providers._common.prepare`).
    """

    origin: Origin
    form: str = ""
    extra: str = ""


class Citation(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """One source a text rests on: a web page, a file, a passage of a document.

    The one form every wire's citations are read into (Anthropic text
    `citations`, Responses `url_citation`/`file_citation` annotations, Gemini
    grounding and URL context, OpenRouter and Bedrock citations), so every
    other wire and every reader can show them as numbered footnotes
    (`Footnotes`). `url` and `title` name the source; `cited_text` is the
    passage quoted, when the wire says; `start` and `end` the span of the
    text it supports, in the wire's own counting; `source` a file id,
    document index or store the wire names it by. `raw` is the wire's own
    JSON of the citation, sent back natively only to its `origin` ("" where
    the wire takes no citation in a request).
    """

    url: str = ""
    title: str = ""
    cited_text: str = ""
    start: int | None = None
    end: int | None = None
    source: str = ""
    raw: str = ""
    origin: Origin | None = None

    def label(self) -> str:
        """The footnote line: the title and the URL (or the file), whichever the wire gave."""
        name = _CONTROL.sub(" ", self.title or self.source or self.url or "source")
        where = self.url if self.url and self.url != name else ""
        return f"{name} <{where}>" if where else name


class Text(msgspec.Struct, frozen=True, gc=False, tag="text", tag_field="type", omit_defaults=True):
    """Plain text, with the sources it cites when a provider gave them (`Citation`).

    A text with citations goes to its citations' origin in the wire's own
    form and to every other wire (and every reader) as the text with
    numbered footnotes (`Footnotes`).
    """

    text: str
    citations: tuple[Citation, ...] = ()
    spelling: Spelling | None = None
    """How its wire spelled the part it came from, for that wire only (`Spelling`)."""


class Thinking(
    msgspec.Struct, frozen=True, gc=False, tag="thinking", tag_field="type", omit_defaults=True
):
    """Reasoning.

    `signature` is opaque and is echoed back unchanged only to its `origin`;
    thinking with no valid signature for a wire (another backend's, another
    model's) stays in the transcript but never goes back on a wire that
    checks signatures. A signature with no origin was written before origins
    existed and counts as its dialect's (Anthropic's) alone. Unsigned
    reasoning carries its origin too (DeepSeek's and Kimi's
    `reasoning_content`, gpt-oss on Bedrock), so the wires that want it back
    from their own model get it (`Wire.own_thinking`); on the Responses wire
    `signature` holds the reasoning item's id, which only its maker knows.
    """

    text: str
    signature: str | None = None
    origin: Origin | None = None


class RedactedThinking(
    msgspec.Struct,
    frozen=True,
    gc=False,
    tag="redacted_thinking",
    tag_field="type",
    omit_defaults=True,
):
    """Reasoning the provider encrypted: `data` is opaque, for its `origin` only.

    Meaningless to a person, so readers show that it was there and nothing
    else; echoed byte for byte when continuing on its origin, left off
    every other wire (and reported as left off).
    """

    data: str
    origin: Origin | None = None


class ToolUse(
    msgspec.Struct, frozen=True, gc=False, tag="tool_use", tag_field="type", omit_defaults=True
):
    """A tool call the assistant made. `input` is any JSON value."""

    # gc=False although `input` is usually a dict: the collector only has to
    # see the objects a reference cycle can run through, and none runs
    # through a tool call. Its input is a JSON value (dicts, lists and
    # scalars, decoded or built by a tool's caller) that never points back at
    # a block or a message; a cycle inside the input itself stays wholly
    # among tracked containers, so the collector still frees it once the
    # call lets go. Only an input edited to hold its own `ToolUse` would leak
    # (never crash), and no JSON value can.

    id: str
    name: str
    input: Any
    signature: str | None = None
    """An opaque token some wires put on a call (Gemini's `thoughtSignature`), for `origin` only."""
    origin: Origin | None = None
    spelling: Spelling | None = None
    """How its wire spelled the call, for that wire only (`Spelling`)."""


class ToolResult(
    msgspec.Struct, frozen=True, gc=False, tag="tool_result", tag_field="type", omit_defaults=True
):
    """The answer to one `ToolUse`, always text: images a tool made ride after it.

    `attachments` holds the non-image attachments a flat history declared for
    this result (audio, video, documents): no wire carries them, but writing
    the history out again must give them back at the carrier's fixed
    position rather than lose them. Empty for almost every result.

    `structured` is the result as a JSON value when the tool gave one (an
    MCP server's structured content): `content` stays its text for the
    wires that take text, and a wire that takes JSON (Gemini's
    `functionResponse.response`, Bedrock's `toolResult` `json`) is given
    the value itself.
    """

    tool_use_id: str
    content: str
    is_error: bool = False
    attachments: tuple[Marker, ...] = ()
    structured: Any = None
    spelling: Spelling | None = None
    """How its wire spelled the result, for that wire only (`Spelling`)."""


class Image(
    msgspec.Struct, frozen=True, gc=False, tag="image", tag_field="type", omit_defaults=True
):
    """An image put in front of the model. User turns only.

    That is a portability decision rather than a simplification: Anthropic
    accepts an image inside a `tool_result`, but the OpenAI dialect's
    `role: "tool"` messages carry a string and nothing else (llama-server is
    the same), so a tool that returned pixels would work on one backend and
    silently lose them on the other. A tool's image therefore enters the
    conversation the way a person hands one over: in the user message that
    carries the round's results, after them.

    `data` is bare base64. The `data:` prefix is a rendering detail of the
    OpenAI dialect, so it belongs to the encoder that needs it, not to the
    type every backend shares. `source` is what the file was called where it
    came from: never sent to a provider, used by every human-facing reader
    and by the text-only rendering. `url` is a remote image (`data` is then
    ""): never fetched by carryall on its own, sent as a URL to the wires
    that take one and rendered as its placeholder (reported) elsewhere.
    """

    media_type: str
    data: str
    source: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if self.media_type not in IMAGE_MEDIA_TYPES:
            raise BlockError(
                f"image media type {self.media_type!r} is not one of "
                f"{', '.join(sorted(IMAGE_MEDIA_TYPES))}"
            )
        if self.data[:5].lower() == "data:":
            raise BlockError("image data must be bare base64, not a data: URI")
        if self.url is not None:
            _check_url(self.url, "image")

    @classmethod
    def from_bytes(cls, media_type: str, data: bytes, source: str | None = None) -> Image:
        """An image block from raw file bytes.

        One encoder, so the `data:` prefix question is answered once: what
        goes in is bare base64, and the one dialect that wants a prefix adds
        it at the wire.
        """
        return cls(media_type, _to_base64(data, "image"), source)

    @classmethod
    def from_url(cls, url: str, source: str | None = None) -> Image:
        """A remote image held by its URL, never fetched here.

        The media type is read off the URL's path by extension; a URL that
        names none (an image service's query string) reads as PNG. It only
        words the placeholder: bytes fetched later are typed by their magic
        bytes, and every importer that meets a URL answers this one way.
        """
        path = url.split("?", 1)[0].split("#", 1)[0]
        return cls(image_media_type(path) or "image/png", "", source, url)

    def to_bytes(self) -> bytes:
        """The raw image bytes; a `BlockError` when `data` is not valid base64."""
        return _from_base64(self.data, "image")

    def data_uri(self) -> str:
        """The `data:` URI form, for the dialects and carriers that want one."""
        return f"data:{self.media_type};base64,{self.data}"

    def placeholder(self) -> str:
        """This image's `image_placeholder` line."""
        return image_placeholder(self.media_type, self.source or self.url)


class Document(
    msgspec.Struct, frozen=True, gc=False, tag="document", tag_field="type", omit_defaults=True
):
    """A document put in front of the model (PDF or plain text). User turns only, like `Image`.

    It rides exactly where an image does, a tool's documents included (in
    the user message after the round's results). `data` is bare base64 of
    the file's bytes, plain text included, so every document is held one
    way; `url` is a remote document instead (`data` is then ""), never
    fetched by default. `title` is sent where a wire takes one; `source` is
    the file's name where it came from, for readers only.
    """

    media_type: str
    data: str = ""
    url: str | None = None
    title: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if self.media_type not in DOCUMENT_MEDIA_TYPES:
            raise BlockError(
                f"document media type {self.media_type!r} is not one of "
                f"{', '.join(sorted(DOCUMENT_MEDIA_TYPES))}"
            )
        if self.data[:5].lower() == "data:":
            raise BlockError("document data must be bare base64, not a data: URI")
        if self.url is not None:
            _check_url(self.url, "document")
        elif not self.data:
            raise BlockError("a document needs its data or a url")

    @classmethod
    def from_bytes(
        cls, media_type: str, data: bytes, source: str | None = None, title: str | None = None
    ) -> Document:
        """A document block from raw file bytes (bare base64 inside, as for images)."""
        return cls(media_type, _to_base64(data, "document"), title=title, source=source)

    def to_bytes(self) -> bytes:
        """The raw document bytes; a `BlockError` when `data` is not valid base64."""
        return _from_base64(self.data, "document")

    def plain_text(self) -> str | None:
        """A plain-text document's text (invalid UTF-8 replaced); None for a PDF or a URL."""
        if self.media_type != "text/plain" or not self.data:
            return None
        return self.to_bytes().decode("utf-8", errors="replace")

    def data_uri(self) -> str:
        """The `data:` URI form, for the dialects that want one."""
        return f"data:{self.media_type};base64,{self.data}"

    def placeholder(self) -> str:
        """This document's `document_placeholder` line."""
        return document_placeholder(self.media_type, self.title or self.source or self.url)


class Opaque(
    msgspec.Struct, frozen=True, gc=False, tag="opaque", tag_field="type", omit_defaults=True
):
    """A provider-native block carryall does not model, kept whole rather than refused.

    Server-tool use and results, citations, `tool_reference`, audio and file
    parts: `kind` is the wire's own type name, `raw` the block's JSON text,
    echoed byte for byte to its `origin`; `text` is the one honest line every
    other wire and every reader gets instead (for a web search, the query
    and the result titles), or "" when there is nothing worth saying.
    """

    kind: str
    raw: str
    origin: Origin | None = None
    text: str = ""


class ServerToolCall(Opaque, frozen=True, gc=False, tag="server_tool_call"):
    """A tool the provider ran itself (web search, web fetch, code execution, file search, MCP).

    A provider-native block with a common reading: `kind`, `raw` and
    `origin` are the wire's own (`server_tool_use`, `web_search_call`,
    `executableCode`), echoed byte for byte to the origin; `tool` is the
    common kind (`web_search`, `web_fetch`, `code_execution`,
    `file_search`, `mcp`, `image_generation`, or the wire's own name for
    anything else), `name` the tool's name as the wire gave it, `input`
    what it was run with (the query, the URL, the code). `text` is its one
    readable rendering for every other wire and every reader; build one
    with `made`, which words it. `raw` is "" when the call rides inside
    the item its result was kept in.
    """

    tool: str = ""
    id: str = ""
    name: str = ""
    input: Any = None

    @classmethod
    def made(
        cls,
        kind: str,
        raw: str,
        origin: Origin | None,
        *,
        tool: str,
        id: str = "",
        name: str = "",
        input: Any = None,
    ) -> ServerToolCall:
        """A call with its readable rendering worded from what it was run with."""
        return cls(kind, raw, origin, server_call_line(tool, name, input), tool, id, name, input)


class ServerToolResult(Opaque, frozen=True, gc=False, tag="server_tool_result"):
    """What a tool the provider ran gave back: search results, a fetched page, code output.

    Like `ServerToolCall`, the wire's own block (`kind`, `raw`, `origin`)
    for its origin, and a common reading for everything else: `tool` the
    common kind, `call_id` the call it answers, `output` the readable
    output (the code's output, a fetched page's title, an MCP tool's text),
    `sources` the results' titles and URLs, `is_error` when it failed.
    `raw` is "" when the wire keeps call and result in one item, held by
    the call.
    """

    tool: str = ""
    call_id: str = ""
    output: str = ""
    sources: tuple[Citation, ...] = ()
    is_error: bool = False

    @classmethod
    def made(
        cls,
        kind: str,
        raw: str,
        origin: Origin | None,
        *,
        tool: str,
        call_id: str = "",
        output: str = "",
        sources: Sequence[Citation] = (),
        is_error: bool = False,
    ) -> ServerToolResult:
        """A result with its readable rendering worded from its output and sources."""
        held = tuple(sources)
        line = server_result_line(tool, output, held, is_error)
        return cls(kind, raw, origin, line, tool, call_id, output, held, is_error)


_LINE_INPUT: Final = 2000
"""How much of a call's input or a result's output a rendering shows, in characters."""


def _clip(text: str, size: int = _LINE_INPUT) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def server_call_line(tool: str, name: str, input: Any) -> str:
    """How a provider-run tool call reads on another wire and to a person.

    The query, the URL or the code when the input names one (the fields
    every wire spells alike), else the input as JSON.
    """
    label = tool if not name or name == tool else f"{tool} {name}"
    if isinstance(input, dict):
        code = input.get("code")
        if isinstance(code, str):
            return f"[{label}]\n```\n{_clip(code)}\n```"
        for key in ("query", "queries", "url", "urls", "command", "prompt"):
            value = input.get(key)
            if isinstance(value, str) and value:
                return f"[{label}: {_clip(value)}]"
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                return f"[{label}: {_clip('; '.join(value))}]"
        if input:
            shown = msgspec.json.encode(input).decode("utf-8", errors="replace")
            return f"[{label}: {_clip(shown)}]"
    elif isinstance(input, str) and input:
        return f"[{label}: {_clip(input)}]"
    return f"[{label}]"


def server_result_line(
    tool: str, output: str, sources: Sequence[Citation], is_error: bool = False
) -> str:
    """How a provider-run tool's result reads on another wire and to a person.

    A heading, the output (clipped), then one numbered line per source
    with its title and URL.
    """
    lines = [f"[{tool} {'error' if is_error else 'result'}]"]
    if output:
        lines.append(_clip(output))
    lines.extend(f"{n}. {source.label()}" for n, source in enumerate(sources, 1))
    return "\n".join(lines)


class Footnotes:
    """Numbered footnotes for cited text: the rendering of `Citation` where it has no native form.

    One numbering per message: `mark` gives a cited text its markers (`[1]`,
    a source cited twice keeps its number), `text` the list the markers
    point to, one line each with the title and URL. Shared so every wire
    and every reader words citations one way.
    """

    def __init__(self) -> None:
        self.sources: list[Citation] = []
        self._numbers: dict[tuple[str, str, str], int] = {}

    def mark(self, block: Text) -> str:
        """The text followed by the numbers of the sources it cites."""
        numbers: list[int] = []
        for citation in block.citations:
            key = (citation.url, citation.title, citation.source)
            number = self._numbers.get(key)
            if number is None:
                self.sources.append(citation)
                number = self._numbers[key] = len(self.sources)
            if number not in numbers:
                numbers.append(number)
        return block.text + "".join(f" [{n}]" for n in numbers)

    def text(self) -> str:
        """The footnote list, or "" when nothing was cited."""
        return "\n".join(f"[{n}] {c.label()}" for n, c in enumerate(self.sources, 1))


def footnoted(content: Sequence[Block]) -> Sequence[Block]:
    """A message's blocks as a person reads them: cited text marked, the footnotes at the end.

    The same object when nothing in it cites a source, so readers pay
    nothing for the common message.
    """
    if not any(type(b) is Text and b.citations for b in content):
        return content
    notes = Footnotes()
    out: list[Block] = [
        Text(notes.mark(b)) if type(b) is Text and b.citations else b for b in content
    ]
    out.append(Text(notes.text()))
    return out


Block: TypeAlias = (
    Text
    | Thinking
    | RedactedThinking
    | ToolUse
    | ToolResult
    | Image
    | Document
    | ServerToolCall
    | ServerToolResult
    | Opaque
)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def image_placeholder(media_type: str, source: str | None = None) -> str:
    """How a person, or a model with no eyes, is told an image was here.

    Shared so the text-only provider rendering and every transcript reader
    say the same thing: a reader that invented its own wording would be a
    second answer to "what was in this turn". Control characters in a name
    become spaces so the placeholder stays one line.
    """
    if source:
        name = _CONTROL.sub(" ", source)
        return f"[image: {name} ({media_type})]"
    return f"[image: {media_type}]"


def document_placeholder(
    media_type: str, source: str | None = None, title: str | None = None
) -> str:
    """How a person, or a wire that takes no documents, is told a document was here.

    One wording for every reader and every text rendering, like
    `image_placeholder`; the title (or the name it came from) is shown when
    there is one.
    """
    name = title or source
    if name:
        return f"[document: {_CONTROL.sub(' ', name)} ({media_type})]"
    return f"[document: {media_type}]"


def _to_base64(data: Any, what: str) -> str:
    # One encoder for every file a block holds: bare base64, no `data:` prefix.
    if not isinstance(data, bytes | bytearray | memoryview):
        raise BlockError(f"{what} bytes must be bytes, got {type(data).__name__}")
    return base64.b64encode(data).decode("ascii")


def _from_base64(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BlockError(f"{what} data is not valid base64: {exc}") from None


def _check_url(url: str, what: str) -> None:
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise BlockError(f"{what} url must be an http(s) URL, got {url!r:.80}")


_DOCUMENT_EXTENSIONS: Final = {".pdf": "application/pdf", ".txt": "text/plain"}


def document_media_type(path: str | os.PathLike[str]) -> str | None:
    """The document media type for a file name by its extension (pdf, txt; any case), or None."""
    _, ext = os.path.splitext(os.fspath(path))
    return _DOCUMENT_EXTENSIONS.get(ext.lower())


def image_media_type(path: str | os.PathLike[str]) -> str | None:
    """The media type for a file name by its extension (any case), or None.

    An allowlist of what every backend takes, not a guess at what is an image.
    """
    _, ext = os.path.splitext(os.fspath(path))
    return _EXTENSION_MEDIA_TYPES.get(ext.lower())


class Downgrade(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """One thing of a history that a wire did not get as it is held.

    `index` is the message's position in `Request.messages` (in an imported
    history, in that history; in a decoded answer, 0, the answer itself;
    -1 for the request as a whole, such as an option its wire lacks),
    `block` the block's position in that message when one block is meant,
    `kind` the block's tag (`thinking`, `redacted_thinking`, `image`,
    `document`, `opaque`, `system`, ...) or `field` for a wire field no
    block holds, `reason` why: a foreign signature, no vision, a wire that
    takes no documents, a URL this wire cannot send, a field carryall does
    not model (named by its path). Left off or rendered as text, it is
    named here, so a loss is never silent.
    """

    index: int
    kind: str
    reason: str
    block: int | None = None


class Message(msgspec.Struct, frozen=True, gc=False):
    """A role and its blocks.

    The request's system prompt is not a message; a `system` message is an
    instruction given mid-conversation and holds text only.
    """

    # gc=False, as every block is: a message holds no cycle (its blocks are
    # untracked values), and a loaded session is one message per line, so a
    # tracked message would make every long load and every history something
    # the collector rescans whole, again and again as it grows. Untracked, it
    # can carry nothing beside its value: msgspec refuses an instance dict
    # or a weak reference with gc=False.

    role: Role
    content: tuple[Block, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            # Accept any sequence at construction but store a tuple, so a
            # message can never be changed behind a recorded history's back.
            msgspec.structs.force_setattr(self, "content", tuple(self.content))
        role = self.role
        if role == "assistant":
            # Every way a message is made or decoded comes through here, so
            # an old transcript's redacted thinking is read in its new form
            # in one place, whatever path loaded it.
            for block in self.content:
                if type(block) is Thinking and _is_legacy(block.signature):
                    msgspec.structs.force_setattr(
                        self, "content", tuple(map(_unlegacy, self.content))
                    )
                    break
        elif role not in ("user", "system"):
            raise BlockError(f"message role must be 'user', 'assistant' or 'system', not {role!r}")

    @property
    def _shape(self) -> _Shape:
        # What checking a history needs of this message alone, worked out
        # afresh each time a history holding it is checked: nothing is kept on
        # the message, so every check before a request reads every message,
        # and a message is its value and nothing more (no cache to go stale,
        # none in its JSON form or equality).
        return _shape_of(self.role, self.content)

    # -- builders -----------------------------------------------------------

    @classmethod
    def user(cls, text: str, images: Iterable[Image | Document] = ()) -> Message:
        """A user turn: the text, then any images (or documents) the person handed over."""
        return cls("user", (Text(text), *images))

    @classmethod
    def assistant(cls, blocks: Iterable[Block]) -> Message:
        """An assistant turn: thinking, text and tool calls, in the order given."""
        return cls("assistant", tuple(blocks))

    @classmethod
    def tool_results(
        cls, results: Iterable[ToolResult], images: Iterable[Image | Document] = ()
    ) -> Message:
        """One user message carrying every result of a round, then the round's images and documents.

        All results of a round go back together: splitting them teaches the
        model to stop calling tools in parallel.
        """
        return cls("user", (*results, *images))

    # -- readers ------------------------------------------------------------

    def text(self) -> str:
        """The text blocks joined; never thinking."""
        return "".join(b.text for b in self.content if isinstance(b, Text))

    def thinking(self) -> str:
        """The thinking blocks joined."""
        return "".join(b.text for b in self.content if isinstance(b, Thinking))

    def tool_uses(self) -> list[ToolUse]:
        """The tool calls in this message, in order."""
        return [b for b in self.content if isinstance(b, ToolUse)]

    def tool_results_in(self) -> list[ToolResult]:
        """The tool results in this message, in order."""
        return [b for b in self.content if isinstance(b, ToolResult)]

    def images(self) -> list[Image]:
        """The images in this message, in order."""
        return [b for b in self.content if isinstance(b, Image)]

    def documents(self) -> list[Document]:
        """The documents in this message, in order."""
        return [b for b in self.content if isinstance(b, Document)]

    def is_plain_user_text(self) -> bool:
        """A user message with no tool result in it: something a person said."""
        return self.role == "user" and not any(isinstance(b, ToolResult) for b in self.content)

    # -- JSON form ----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: `{"role": ..., "content": [tagged blocks]}`."""
        return {"role": self.role, "content": [block_to_dict(b) for b in self.content]}

    @classmethod
    def from_dict(cls, data: Any) -> Message:
        """Decode the JSON form; a `BlockError` names the position of what is wrong."""
        message: Message = _convert(data, Message, "message")
        return message


def _is_legacy(signature: str | None) -> bool:
    return signature is not None and signature.startswith(LEGACY_REDACTED_PREFIX)


def _unlegacy(block: Block) -> Block:
    if type(block) is Thinking and _is_legacy(block.signature):
        data = block.signature[len(LEGACY_REDACTED_PREFIX) :]  # type: ignore[index]
        return RedactedThinking(data, block.origin)
    return block


def block_to_dict(block: Block) -> dict[str, Any]:
    """One block's JSON form, tagged by `"type"`."""
    out: dict[str, Any] = msgspec.to_builtins(block)
    if "attachments" in out:
        out["attachments"] = list(out["attachments"])
    return out


def block_from_dict(data: Any) -> Block:
    """Decode one block; unknown types and missing fields are a `BlockError`.

    An old transcript's redacted thinking (see `LEGACY_REDACTED_PREFIX`)
    reads as a `RedactedThinking`.
    """
    block: Block = _unlegacy(_convert(data, Block, "block"))
    return block


def messages_to_dicts(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """A history's JSON form."""
    return [m.to_dict() for m in messages]


def messages_from_dicts(data: Any) -> list[Message]:
    """Decode a history; the error names the message index and field (`$[3].content[0]`)."""
    messages: list[Message] = _convert(data, list[Message], "history")
    return messages


def _convert(data: Any, typ: Any, what: str) -> Any:
    try:
        return msgspec.convert(data, typ)
    except msgspec.ValidationError as exc:
        raise BlockError(f"invalid {what} JSON: {exc}") from None
    except BlockError as exc:
        raise BlockError(f"invalid {what} JSON: {exc}") from None


def validate_history(messages: Sequence[Message]) -> None:
    """Check a history before it is encoded; a `HistoryError` names the message index.

    Every `ToolUse` is answered by exactly one `ToolResult` in the next user
    message, no result answers a call that was not made, no image sits
    outside a user message, and no message is empty. One validator, so every
    encoder refuses the same histories before any request is sent.
    """
    survey_history(messages)


class HistorySurvey(NamedTuple):
    """What `survey_history` noticed on its way through a history it passed."""

    images: int
    """How many images the history holds."""
    irregular: list[int]
    """The indices of the messages whose JSON form is not canonical, in order."""


def survey_history(messages: Sequence[Message]) -> HistorySurvey:
    """`validate_history`, plus what every encoder asks of the history next.

    It notes on its way what the encoders would otherwise walk the whole
    history again to learn: how many images there are (the image limit and a
    model with no eyes), and which messages are *irregular*. A message is
    canonical when its JSON form (`Message.to_dict`) has nothing a wire would
    drop, reorder or rename: no blank text, tool results ahead of everything
    else and never empty, no non-image attachments, tool inputs that are
    objects, no thinking, no image and no wire's own spelling (`Spelling`).
    That is the form the Anthropic
    Messages API takes as it is, so its encoder converts canonical messages
    in one step and rewrites only the irregular ones.

    One validator in two parts: what a message can be told alone (its
    shape: the calls it answers and makes, its images, whether it is
    canonical, its own first fault) is worked out per message, block by
    block, on every call (nothing is kept on a message); this fits the
    shapes together, and a message that does not fit is refused with the
    error its blocks give first.
    Blocks are told apart by exact type: a subclass of a block type counts
    as no block at all, as the encoders would treat it.
    """
    held = messages if type(messages) is tuple else tuple(messages)
    count = len(held)
    start, pending, images, irregular, resumed = _SURVEYED.resume(held)
    for index, message in enumerate(islice(held, start, None), start):
        if type(message) is not Message:
            raise HistoryError(index, f"expected a Message, got {type(message).__name__}")
        # Nothing is kept on a message, so this runs over every message of
        # every request: the three commonest messages of an agent's history
        # (a text, a lone result that answers the one pending call, a remark
        # and one canonical call) are told here, as `_shape_of` would tell
        # them, without building their shape. Anything else goes through it.
        content: tuple[Any, ...] = message.content  # told apart by exact type, as below
        role = message.role
        if len(content) == 1 and role != "system":
            block = content[0]
            kind = type(block)
            if kind is Text:
                text = block.text
                if text and not text.isspace() and not block.citations and not block.spelling:
                    if pending:
                        raise _misfit(held, index, pending)
                    continue
            elif (
                kind is ToolResult
                and role == "user"
                and len(pending) == 1
                and pending[0] == block.tool_use_id
            ):
                if not block.content or block.attachments or block.spelling:
                    irregular.append(index)
                pending = ()
                continue
        elif len(content) == 2 and role == "assistant" and not pending:
            remark, use = content
            if type(remark) is Text and type(use) is ToolUse:
                text = remark.text
                if (
                    text
                    and not text.isspace()
                    and not remark.citations
                    and use.id
                    and type(use.input) is dict
                    and not use.signature
                    and not use.origin
                    and not remark.spelling
                    and not use.spelling
                ):
                    pending = (use.id,)
                    continue
        shape = _shape_of(role, content)
        if shape is _PLAIN:  # canonical, calling and answering nothing
            if pending:
                raise _misfit(held, index, pending)
            continue
        answers = shape.answers
        if answers != pending and (len(answers) != len(pending) or set(answers) != set(pending)):
            raise _misfit(held, index, pending)
        if not shape.regular:
            if shape.fault is not None or shape.stranger is not None:
                raise _misfit(held, index, pending)
            irregular.append(index)
            images += shape.images  # an image makes a message irregular
        pending = shape.calls
    if count > start:
        _SURVEYED.remember(held, pending, images, irregular, resumed)
    if pending:
        raise HistoryError(
            count - 1, f"tool call(s) {_names(pending, held[-1])} are never answered"
        )
    return HistorySurvey(images, irregular)


class _Surveyed:
    """The last few histories `survey_history` went through, each with where it left off.

    An agent sends the same history again at every step with a few messages
    more, and every encode begins with the survey, so a history that starts
    with one held here is surveyed from where that one ended: what the
    survey carries from message to message (the calls still to answer, the
    images, the irregular messages) is all it needs to go on. A history
    starts with a held one when its first messages are those very messages,
    or equal `Message` values (immutable, so equal ones survey alike: a
    fitted image's message is a new one each time); anything else is
    surveyed whole. Only a history that passed up to its end is held (the
    check that every call is answered comes after, each time), at most
    `size` of them, the newest first; each holds its messages, so no more
    than those few stay alive for it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.held: tuple[_Resume, ...] = ()

    def resume(
        self, messages: tuple[Message, ...]
    ) -> tuple[int, tuple[str, ...], int, list[int], _Resume | None]:
        """Where to begin surveying `messages`, and the held entry it goes on from (if any).

        0 and nothing carried when no held history begins it.
        """
        for entry in self.held:  # one read: safe across threads
            held, pending, images, irregular = entry
            if _starts_with(messages, held):
                return len(held), pending, images, list(irregular), entry
        return 0, (), 0, [], None

    def remember(
        self,
        messages: tuple[Message, ...],
        pending: tuple[str, ...],
        images: int,
        irregular: list[int],
        resumed: _Resume | None,
    ) -> None:
        """Hold `messages` surveyed to its end, in place of the entry it went on from."""
        kept = [entry for entry in self.held if entry is not resumed]
        self.held = ((messages, pending, images, tuple(irregular)), *kept[: self.size - 1])


_Resume: TypeAlias = tuple[tuple["Message", ...], tuple[str, ...], int, tuple[int, ...]]


def _starts_with(messages: tuple[Message, ...], held: tuple[Message, ...]) -> bool:
    """Whether `messages` begins with all of `held`'s messages (`_shared_start`)."""
    return len(held) <= len(messages) and _shared_start(held, messages) == len(held)


def _shared_start(held: Sequence[Any], messages: Sequence[Any]) -> int:
    """How many leading messages `messages` shares with `held`: the same objects, or equal ones.

    The one answer for everything that goes on from the last history it saw
    (the survey here, the kept JSON of a request body). The same objects
    are found at C speed; from the first that is not, the rest are compared
    one by one, by value when not the same object (a fitted image's message
    made again, a history read back from its file). Only `Message` values
    count as equal, so an object whose `==` says yes to anything cannot
    stand in for one; a comparison that raises is a difference.
    """
    count = min(len(held), len(messages))
    # `map` stops at the shorter of the two.
    if all(map(operator.is_, held, messages)):
        return count
    at = list(map(operator.is_, held, messages)).index(False)
    for old, new in zip(islice(held, at, count), islice(messages, at, count), strict=True):
        if old is not new:
            if type(old) is not Message or type(new) is not Message:
                return at
            try:
                if old != new:
                    return at
            except Exception:  # a value's own `==` failed: not the same message
                return at
        at += 1
    return count


_SURVEYED: Final = _Surveyed(4)


class _Shape(msgspec.Struct, frozen=True, gc=False):
    """What checking a history needs to know of one message taken alone."""

    answers: tuple[str, ...]
    """The call ids a user message's results answer, in order, up to its fault."""
    calls: tuple[str, ...]
    """The call ids an assistant message makes, in order: what the next must answer."""
    images: int
    """How many images ride the message."""
    regular: bool
    """Canonical (`survey_history`) and without fault."""
    fault: str | None = None
    """The message's first fault, raised once the calls before it are matched."""
    stranger: str | None = None
    """A user message's block of no known type, raised after everything else."""


_NATIVE: Final = (Opaque, ServerToolCall, ServerToolResult)
"""The provider-native blocks, told apart by exact type: never canonical, echoed to their origin."""

_PLAIN = _Shape((), (), 0, True)
_BLANK = _Shape((), (), 0, False)
_EMPTY = _Shape((), (), 0, False, "message has no content blocks")


def _shape_of(role: str, content: tuple[Any, ...]) -> _Shape:
    # Every message checked comes through here once, so the commonest
    # contents (one text, one result) take a short way.
    if role == "system":
        return _system_shape(content)
    if len(content) == 1:
        block = content[0]
        kind = type(block)
        if kind is Text:
            text = block.text
            plain = text and not text.isspace() and not block.citations and not block.spelling
            return _PLAIN if plain else _BLANK
        if kind is ToolResult and role == "user":
            regular = bool(block.content) and not block.attachments and not block.spelling
            return _Shape((block.tool_use_id,), (), 0, regular)
    elif not content:
        return _EMPTY
    ids: list[str] = []
    canonical = True
    stranger = False  # worded after the checks that name the known blocks
    if role == "assistant":
        for block in content:
            kind = type(block)
            if kind is Text:
                text = block.text
                if not text or text.isspace() or block.citations or block.spelling:
                    canonical = False
            elif kind is ToolUse:
                call_id = block.id
                if not call_id:
                    return _faulty((), "a tool call has an empty id")
                if call_id in ids:
                    return _faulty((), f"tool call id {call_id!r} is used twice")
                ids.append(call_id)
                if type(block.input) is not dict or block.signature or block.origin:
                    canonical = False
                if block.spelling:
                    canonical = False
            elif kind is Thinking or kind is RedactedThinking or kind in _NATIVE:
                canonical = False
            elif kind is Image:
                return _faulty((), "an image may only ride a user message")
            elif kind is Document:
                return _faulty((), "a document may only ride a user message")
            elif kind is ToolResult:
                return _faulty((), "a tool result may only ride a user message")
            else:
                stranger = True
        if stranger:
            return _faulty((), f"a content block is not a block: {_stranger(content)}")
        if canonical and not ids:
            return _PLAIN
        return _Shape((), tuple(ids), 0, canonical)
    images = 0
    ahead = True  # nothing but results so far
    for block in content:
        kind = type(block)
        if kind is ToolResult:
            ids.append(block.tool_use_id)
            if not ahead or not block.content or block.attachments or block.spelling:
                canonical = False
        elif kind is Text:
            ahead = False
            text = block.text
            if not text or text.isspace() or block.citations or block.spelling:
                canonical = False
        elif kind is Image:
            images += 1
            ahead = canonical = False
        elif kind is Document or kind in _NATIVE:
            ahead = canonical = False
        elif kind is ToolUse:
            return _faulty(ids, "a tool call may only ride an assistant message")
        elif kind is Thinking or kind is RedactedThinking:
            return _faulty(ids, "thinking may only ride an assistant message")
        else:
            stranger = True
    if stranger:
        wording = f"a content block is not a block: {_stranger(content)}"
        return _Shape(tuple(ids), (), images, False, stranger=wording)
    if canonical and not ids:
        return _PLAIN
    return _Shape(tuple(ids), (), images, canonical)


def _system_shape(content: tuple[Any, ...]) -> _Shape:
    # An instruction mid-conversation: text and nothing else, and always
    # irregular, since no wire takes it as the block model holds it.
    if not content:
        return _EMPTY
    for block in content:
        if type(block) is not Text:
            if type(block) in _KNOWN:
                return _faulty((), "a system message holds text only")
            return _faulty((), f"a content block is not a block: {_stranger(content)}")
    return _BLANK


def _faulty(answers: list[str] | tuple[()], fault: str) -> _Shape:
    return _Shape(tuple(answers), (), 0, False, fault)


def _misfit(messages: Sequence[Message], index: int, pending: tuple[str, ...]) -> HistoryError:
    # A message that does not fit what came before it, or has a fault of its
    # own: the error its blocks give first, in the order they are read.
    message = messages[index]
    shape = message._shape
    if shape is _EMPTY:
        return HistoryError(index, _EMPTY.fault or "")
    caller = messages[index - 1] if index > 0 else message
    if message.role != "user":
        if pending:
            return HistoryError(
                index - 1,
                f"tool call(s) {_names(pending, caller)} not answered in the next user message",
            )
        return HistoryError(index, shape.fault or "")
    waiting = list(pending)
    for call_id in shape.answers:
        if call_id not in waiting:
            return HistoryError(index, _unexpected_result(messages, index, call_id))
        waiting.remove(call_id)
    if shape.fault is not None:
        return HistoryError(index, shape.fault)
    if waiting:
        names = _names(tuple(waiting), caller)
        return HistoryError(index, f"tool call(s) {names} are not answered here")
    return HistoryError(index, shape.stranger or "")


_KNOWN: Final = (
    Text,
    Thinking,
    RedactedThinking,
    ToolUse,
    ToolResult,
    Image,
    Document,
    Opaque,
    ServerToolCall,
    ServerToolResult,
)


def _stranger(content: tuple[Any, ...]) -> str:
    return next(type(b).__name__ for b in content if type(b) not in _KNOWN)


def _unexpected_result(messages: Sequence[Message], index: int, call_id: str) -> str:
    # The error path may be slow: find out why this result was not expected.
    previous = messages[index - 1] if index > 0 else None
    if (
        previous is not None
        and previous.role == "assistant"
        and any(use.id == call_id for use in previous.tool_uses())
    ):
        return f"tool call {call_id!r} is answered twice"
    return f"tool result for {call_id!r} answers no call in the previous assistant message"


def _names(pending: tuple[str, ...], caller: Message) -> str:
    # The calls still pending were all made by `caller`, the message before.
    names = {b.id: b.name for b in caller.content if type(b) is ToolUse}
    return ", ".join(f"{names[call_id]} ({call_id})" for call_id in pending)


def apply_image_limit(
    messages: Sequence[Message], max_images: int, within: Sequence[int] | None = None
) -> list[Message]:
    """Keep the newest `max_images` images of a history; older ones become placeholder text.

    One function, used by every encoder, so every backend drops the same
    images and says the same thing where they were (`image_placeholder`).
    A negative limit counts as zero. Messages without a replaced image are
    returned as the same objects. `within`, when given, names the only
    messages that can hold an image, in order (`HistorySurvey.irregular`:
    an image makes a message irregular), so an encoder that has surveyed
    the history looks into those alone instead of every message again.
    """
    # Counted by exact type over user turns only (images ride nowhere else):
    # this runs before every request on the whole history.
    # A message is looked into only when it holds an image (`in` over `map`
    # is one C-level pass), and the rewrite stops at the last image replaced.
    indices = range(len(messages)) if within is None else within
    total = 0
    for index in indices:
        m = messages[index]
        if m.role == "user" and Image in map(type, m.content):
            total += [*map(type, m.content)].count(Image)
    excess = total - max(max_images, 0)
    out = list(messages)
    if excess <= 0:
        return out
    for index in indices:
        if excess <= 0:
            break
        message = messages[index]
        if Image not in map(type, message.content):
            continue
        blocks: list[Block] = []
        for block in message.content:
            if type(block) is Image and excess > 0:
                blocks.append(Text(block.placeholder()))
                excess -= 1
            else:
                blocks.append(block)
        out[index] = Message(message.role, tuple(blocks))
    return out

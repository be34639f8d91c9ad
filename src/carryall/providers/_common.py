"""What every encoder does before it writes its dialect, and every decoder after it reads
an answer: one place, so all agree.

`prepare` checks the history, applies the image limit and blinds it for a
model with no eyes, then fits it to the wire (`Wire`): every block the wire
cannot take as it is held is left off or rendered as text here, and named
in a `Downgrade`. What an encoder gets back holds only what it writes
natively, so the question "may this go on that wire" is answered once, for
every dialect, and every answer "no" is reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple, TypeVar

import msgspec

from carryall._json import load_json, repair_surrogates, repair_text
from carryall._text import shorten
from carryall.blocks import (
    Block,
    Document,
    Footnotes,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Spelling,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    apply_image_limit,
    survey_history,
)
from carryall.errors import BlockError, ProviderError
from carryall.providers._types import Capabilities, Downgrade, Request

__all__ = [
    "SYSTEM_NOTE",
    "UNKEPT",
    "UNMODELLED",
    "Prepared",
    "Wire",
    "answer_message",
    "answered_call",
    "camel_keys",
    "goes_back",
    "imported_call",
    "openai_tool_choice",
    "payload_messages",
    "prepare",
    "spelled",
    "spelling_of",
    "system_note",
    "target_origin",
    "unmodelled",
]

SYSTEM_NOTE: Final = "[system message]"
"""The line that opens a mid-conversation system message folded into a user turn."""


class Wire(NamedTuple):
    """What one dialect takes natively; everything else is fitted by `prepare`."""

    dialect: str
    """The codec's wire: the dialect part of every origin it stamps and accepts."""
    signed: bool = False
    """Signed thinking and redacted thinking, from its own origin (Anthropic)."""
    thinking: bool = False
    """Thinking text with no signature, from any maker (llama-server's `reasoning_content`)."""
    own_thinking: bool = False
    """Unsigned thinking back to the model that made it (its origin), as the wire takes it:
    DeepSeek's and Kimi's `reasoning_content`, Bedrock's unsigned `reasoningText`, a
    Responses reasoning item with no encrypted content."""
    image_urls: bool = False
    """Images by URL (`Image.url`)."""
    pdf: bool = False
    """PDF documents by their bytes."""
    pdf_urls: bool = False
    """PDF documents by URL."""
    text_documents: bool = False
    """Plain-text documents as documents (else their text, marked)."""
    system_inside: bool = False
    """`system` messages inside the history (else folded into the next user turn)."""
    opaque_roles: frozenset[str] = frozenset({"user", "assistant"})
    """The roles whose provider-native blocks the encoder can echo to their origin."""
    call_signatures: bool = False
    """A call's own signature, back to its origin (Gemini's `thoughtSignature` on a call)."""
    url_prefixes: tuple[str, ...] = ()
    """The only URLs it fetches itself, by how they begin (Gemini: its Files API, YouTube);
    empty when any http(s) URL will do."""
    file_dialects: tuple[str, ...] = ()
    """Other dialects whose files are in this wire's own format, so the spellings a file
    read as theirs holds are this wire's too (llama-server's Chat Completions, which its
    codec imports as OpenAI's)."""

    def takes_url(self, url: str) -> bool:
        """Whether this wire fetches `url` itself (for an image or document by URL)."""
        return not self.url_prefixes or url.startswith(self.url_prefixes)


class Prepared(NamedTuple):
    """A history ready for an encoder: checked, limited, blinded and fitted to its wire."""

    messages: list[Message]
    irregular: list[int]
    """Indices of the messages whose JSON form is not canonical (`survey_history`)."""
    downgrades: tuple[Downgrade, ...] = ()
    """What was left off or rendered as text, by message index in the request."""


# Every reason a downgrade gives, worded once.
_FOREIGN = "made by {origin}, not by this request's {target}: its signature is not valid here"
_UNSIGNED = "unsigned thinking never goes to a wire that checks signatures"
_NO_REASONING = "this wire takes no reasoning back"
_NO_REDACTED = "this wire takes no redacted thinking"
_BLIND = "the model cannot see: sent as its placeholder line"
_LIMIT = "over the request's image limit: sent as its placeholder line"
_IMAGE_URL = (
    "this wire takes no image URLs and it was not fetched (its host is not in the config's "
    "[attachments] allow_hosts): sent as its placeholder"
)
_DOC_URL = (
    "this wire takes no document URLs and it was not fetched (its host is not in the config's "
    "[attachments] allow_hosts): sent as its placeholder"
)
_OTHER_URL = (
    "this wire takes only {prefixes} URLs and it was not fetched (its host is not in the "
    "config's [attachments] allow_hosts): sent as its placeholder"
)
_NO_PDF = "this wire takes no PDF documents: sent as its placeholder line"
_DOC_TEXT = "this wire takes no text documents: sent as the document's text"
_OPAQUE_TEXT = "provider-native {kind} block of {origin}: sent as its text line"
_OPAQUE_OFF = "provider-native {kind} block of {origin}: nothing of it can go on this wire"
_CITED = "citations of {origin}: this wire takes no citations from it, sent as numbered footnotes"
_TOOL_SIGNATURE = "the call's signature was made by {origin}: the call goes without it"
_FOLDED = "this wire takes no system message inside the history: folded into a user turn"
_SPELLED = "the {dialect} wire's own fields of this block ({keys}): this wire has no place for them"


def target_origin(request: Request, dialect: str) -> Origin:
    """The origin a request goes to: the codec's dialect; the request's endpoint, model, account."""
    return Origin(dialect, request.endpoint, request.model, account=request.account)


def system_note(text: str) -> str:
    """A mid-conversation system message as the marked text a user turn carries instead."""
    return f"{SYSTEM_NOTE}\n{text}"


def prepare(
    request: Request, caps: Capabilities, wire: Wire | None = None, *, every_origin: bool = False
) -> Prepared:
    """Validate the history, limit and blind its images, and fit it to `wire`.

    A model that cannot see gets each image as its `image_placeholder` line,
    so a run against a text-only model behaves as if images never existed
    rather than failing on a request it cannot serve. Only irregular
    messages can hold anything to fit, so only they are looked at again.
    With no `wire`, only the images are seen to.
    `every_origin` keeps every signature and native block of this wire's
    dialect, whatever model or server made it: for writing a history to a
    file, where whoever sends it on decides.
    """
    survey = survey_history(request.messages)
    messages = list(request.messages)
    irregular = survey.irregular
    downgrades: list[Downgrade] = []
    if survey.images > max(request.max_images, 0):
        limited = apply_image_limit(messages, request.max_images, irregular)
        for index in irregular:
            if limited[index] is not messages[index]:
                downgrades += _replaced_images(index, messages[index], limited[index], _LIMIT)
        messages = limited
    if survey.images and not caps.vision:
        for index in irregular:
            message = messages[index]
            if any(type(b) is Image for b in message.content):
                blind = (Text(b.placeholder()) if type(b) is Image else b for b in message.content)
                messages[index] = Message(message.role, tuple(blind))
                downgrades += [
                    Downgrade(index, "image", _BLIND, at)
                    for at, b in enumerate(message.content)
                    if type(b) is Image
                ]
    if wire is None or not irregular:
        return Prepared(messages, irregular, tuple(downgrades))
    target = target_origin(request, wire.dialect)
    systems = False
    for index in irregular:
        message = messages[index]
        if message.role == "system":
            systems = True
            continue
        fitted = _fit(message, index, wire, target, every_origin, downgrades)
        if fitted is not None:
            messages[index] = fitted
    if systems and not wire.system_inside:
        messages, irregular = _fold_systems(messages, irregular, downgrades)
    downgrades.sort(key=lambda d: d.index)
    return Prepared(messages, irregular, tuple(downgrades))


OPENAI_TOOL_CHOICES: Final = ("auto", "none", "required")


def openai_tool_choice(request: Request) -> str | None:
    """`request.tool_choice` as both OpenAI wires take it (None: none asked for), or refused."""
    choice = request.tool_choice
    if choice is not None and choice not in OPENAI_TOOL_CHOICES:
        raise ProviderError(
            f"tool_choice {choice!r} is not one of {', '.join(OPENAI_TOOL_CHOICES)}"
        )
    return choice


def payload_messages(prepared: Prepared) -> set[int]:
    """The indices of the prepared messages holding an image's or a document's bytes.

    Only irregular messages can (an image or document makes a message
    irregular), so only they are looked at.
    """
    messages = prepared.messages
    return {
        i
        for i in prepared.irregular
        if any(type(b) in _PAYLOADS and b.data for b in messages[i].content)  # type: ignore[union-attr]
    }


_PAYLOADS: Final = (Image, Document)


def _replaced_images(index: int, before: Message, after: Message, reason: str) -> list[Downgrade]:
    return [
        Downgrade(index, "image", reason, at)
        for at, (old, new) in enumerate(zip(before.content, after.content, strict=True))
        if type(old) is Image and type(new) is not Image
    ]


def _matches(origin: Origin | None, wire: Wire, target: Origin, every_origin: bool) -> bool:
    # A signature with no origin was written before origins existed, by the
    # one dialect that signed then: it counts as that dialect's. An origin
    # naming only a dialect (no endpoint, no model) is an imported file's:
    # the file says which wire it is in and nothing more. `every_origin`
    # asks only for the dialect: a file of this wire's form, for any model.
    if origin is None:
        return wire.dialect == "anthropic"
    if every_origin or (not origin.endpoint and not origin.model):
        return origin.dialect == wire.dialect
    return origin.same_maker(target)


def goes_back(origin: Origin | None, request: Request, dialect: str) -> bool:
    """Whether a provider-native block (`Opaque`) of `origin` goes back as itself in `request`
    on `dialect`'s wire, as `prepare` decides it: asked before the body is written by a caller
    that must know what it will hold (the betas an Anthropic request opts into)."""
    return origin is not None and _matches(
        origin, Wire(dialect), target_origin(request, dialect), False
    )


def _named(origin: Origin | None) -> str:
    if origin is None:
        return "an unknown origin"
    where = f" at {origin.endpoint}" if origin.endpoint else ""
    asked = (
        f" (asked for as {origin.requested})"
        if origin.requested and origin.requested != origin.model
        else ""
    )
    account = f" for key {origin.account}" if origin.account else ""
    return f"{origin.dialect} model {origin.model or '(unnamed)'}{asked}{where}{account}"


def _fit(
    message: Message,
    index: int,
    wire: Wire,
    target: Origin,
    every_origin: bool,
    downgrades: list[Downgrade],
) -> Message | None:
    """The message with what `wire` cannot take left off or as text; None when unchanged."""
    out: list[Block] = []
    changed = False
    notes: Footnotes | None = None
    for at, held in enumerate(message.content):
        made = len(downgrades)
        block = held
        if type(held) in _SPELLABLE and held.spelling is not None:  # type: ignore[union-attr]
            block = _unspelled(held, index, wire, target, every_origin, downgrades)
        fitted: Block | None = block
        if type(block) is Text:
            if block.citations and not all(
                _matches(c.origin, wire, target, every_origin) and c.origin is not None
                for c in block.citations
            ):
                notes = notes or Footnotes()
                fitted = Text(notes.mark(block))
                reason = _CITED.format(origin=_named(block.citations[0].origin))
                downgrades.append(Downgrade(index, "citations", reason))
        elif isinstance(block, Thinking):
            fitted = _fit_thinking(block, index, wire, target, every_origin, downgrades)
        elif isinstance(block, RedactedThinking):
            if not wire.signed:
                downgrades.append(Downgrade(index, "redacted_thinking", _NO_REDACTED))
                fitted = None
            elif not _matches(block.origin, wire, target, every_origin):
                reason = _FOREIGN.format(origin=_named(block.origin), target=_named(target))
                downgrades.append(Downgrade(index, "redacted_thinking", reason))
                fitted = None
        elif isinstance(block, ToolUse):
            # A call's signature goes only to a wire that takes one, from its origin.
            keep = wire.call_signatures and _matches(block.origin, wire, target, every_origin)
            if block.signature is not None and not every_origin and not keep:
                reason = _TOOL_SIGNATURE.format(origin=_named(block.origin))
                downgrades.append(Downgrade(index, "tool_use", reason))
                fitted = ToolUse(block.id, block.name, block.input)
        elif isinstance(block, Image):
            if (
                block.url is not None
                and not block.data
                and not _url_ok(wire.image_urls, wire, block.url)
            ):
                reason = _url_reason(wire.image_urls, wire, _IMAGE_URL)
                downgrades.append(Downgrade(index, "image", reason))
                fitted = Text(block.placeholder())
        elif isinstance(block, Document):
            fitted = _fit_document(block, index, wire, downgrades)
        elif isinstance(block, Opaque):
            origin = block.origin
            echo = (
                message.role in wire.opaque_roles
                and origin is not None
                and _matches(origin, wire, target, every_origin)
            )
            if not echo:
                wording = _OPAQUE_TEXT if block.text else _OPAQUE_OFF
                reason = wording.format(kind=block.kind, origin=_named(origin))
                fitted = Text(block.text) if block.text else None
                downgrades.append(Downgrade(index, "opaque", reason))
        if len(downgrades) > made:
            # Each names the block it was made for, by its place in the message as held.
            downgrades[made:] = [msgspec.structs.replace(d, block=at) for d in downgrades[made:]]
        if fitted is not held:
            changed = True
        if fitted is not None:
            out.append(fitted)
    if notes is not None:
        out.append(Text(notes.text()))  # the list the markers point to, at the message's end
    if not changed:
        return None
    return Message(message.role, tuple(out))


_SPELLABLE: Final = frozenset({Text, ToolUse, ToolResult})
"""The block types that can carry their wire's `Spelling`, told apart by exact type."""


def _unspelled(
    block: Block,
    index: int,
    wire: Wire,
    target: Origin,
    every_origin: bool,
    downgrades: list[Downgrade],
) -> Block:
    """The block without another wire's spelling of it, what that held named; else itself."""
    spelling: Spelling | None = getattr(block, "spelling", None)
    if spelling is None or _matches(spelling.origin, wire, target, every_origin):
        return block
    origin = spelling.origin
    if origin.dialect in wire.file_dialects and (
        every_origin or (not origin.endpoint and not origin.model)
    ):
        return block  # a file's spelling, and the file is in this wire's format
    if spelling.extra:
        keys = ", ".join(json.loads(spelling.extra))
        reason = _SPELLED.format(dialect=spelling.origin.dialect, keys=shorten(keys, 120))
        downgrades.append(Downgrade(index, type(block).__struct_config__.tag, reason))  # type: ignore[arg-type]
    return msgspec.structs.replace(block, spelling=None)


def spelling_of(origin: Origin, extra: Mapping[str, Any] | None, form: str = "") -> Spelling | None:
    """A block's `Spelling` of what its wire wrote beyond the block, or None when nothing was.

    `extra` holds the item's fields the block does not model, `form` the
    codec's name for a layout of its own; both are the importing codec's.
    """
    if not extra and not form:
        return None
    text = json.dumps(extra, ensure_ascii=False, separators=(",", ":")) if extra else ""
    return Spelling(origin, form, text)


def spelled(part: dict[str, Any], spelling: Spelling | None) -> dict[str, Any]:
    """`part` as its codec writes it, with the fields its block's spelling kept put back.

    The codec's own fields win: a value the block holds is the block's,
    whatever its wire once said beside it.
    """
    if spelling is None or not spelling.extra:
        return part
    return {**json.loads(spelling.extra), **part}


def _fit_thinking(
    block: Thinking,
    index: int,
    wire: Wire,
    target: Origin,
    every_origin: bool,
    downgrades: list[Downgrade],
) -> Thinking | None:
    if wire.thinking:
        return block  # a wire that checks nothing takes the text, signed or not
    own = block.origin is not None and _matches(block.origin, wire, target, every_origin)
    if block.signature is None and own and wire.own_thinking:
        return block  # its own model's reasoning, which that model wants back
    if not wire.signed:
        downgrades.append(Downgrade(index, "thinking", _NO_REASONING))
        return None
    if block.signature is None:
        downgrades.append(Downgrade(index, "thinking", _UNSIGNED))
        return None
    if not _matches(block.origin, wire, target, every_origin):
        reason = _FOREIGN.format(origin=_named(block.origin), target=_named(target))
        downgrades.append(Downgrade(index, "thinking", reason))
        return None
    return block


def _url_ok(takes: bool, wire: Wire, url: str) -> bool:
    return takes and wire.takes_url(url)


def _url_reason(takes: bool, wire: Wire, none: str) -> str:
    """Why a URL was left off: the wire takes none, or none beginning as this one does."""
    if not takes:
        return none
    return _OTHER_URL.format(prefixes=", ".join(f"{p}..." for p in wire.url_prefixes))


def _fit_document(
    block: Document, index: int, wire: Wire, downgrades: list[Downgrade]
) -> Block | None:
    if block.media_type == "application/pdf":
        if block.data:
            if wire.pdf:
                return block
            downgrades.append(Downgrade(index, "document", _NO_PDF))
        elif block.url is not None and _url_ok(wire.pdf_urls, wire, block.url):
            return block
        else:
            downgrades.append(
                Downgrade(index, "document", _url_reason(wire.pdf_urls, wire, _DOC_URL))
            )
        return Text(block.placeholder())
    if not block.data:
        downgrades.append(Downgrade(index, "document", _DOC_URL))
        return Text(block.placeholder())
    if wire.text_documents:
        return block
    downgrades.append(Downgrade(index, "document", _DOC_TEXT))
    return Text(f"{block.placeholder()}\n{block.plain_text()}")


def _fold_systems(
    messages: list[Message], irregular: list[int], downgrades: list[Downgrade]
) -> tuple[list[Message], list[int]]:
    """Each system message as marked text at the head of the next user turn.

    When the next message is not a user turn (an assistant turn, or the end
    of the history), the marked text becomes a user turn of its own there,
    so roles still alternate for the templates that insist on it. The
    irregular indices are worked out again for the shorter history.
    """
    marked = set(irregular)
    out: list[Message] = []
    out_irregular: list[int] = []
    pending: list[Text] = []
    for index, message in enumerate(messages):
        if message.role == "system":
            downgrades.append(Downgrade(index, "system", _FOLDED))
            pending.append(Text(system_note(message.text())))
            continue
        if pending:
            if message.role == "user":
                message = Message("user", (*pending, *message.content))
            else:
                out_irregular.append(len(out))
                out.append(Message("user", tuple(pending)))
            pending = []
            marked.add(index)
        if index in marked:
            out_irregular.append(len(out))
        out.append(message)
    if pending:
        out_irregular.append(len(out))
        out.append(Message("user", tuple(pending)))
    return out, out_irregular


_S = TypeVar("_S", bound=msgspec.Struct)


def _repaired(block: _S) -> _S:
    # Every string a block holds, not only its text: an id, a signature, an
    # opaque block's raw JSON or its origin's model name with a lone
    # surrogate in it would fail the next request just the same.
    changed: dict[str, object] = {}
    for name in block.__struct_fields__:
        value = getattr(block, name)
        if isinstance(value, str):
            new: object = repair_text(value)
        elif isinstance(value, Origin):
            new = _repaired(value)
        elif isinstance(block, ToolUse) and name == "input":
            try:
                new = repair_surrogates(value)
            except RecursionError:
                raise ProviderError(
                    f"tool call {block.id!r}: its input is nested too deeply"
                ) from None
        else:
            continue
        if new is not value:
            changed[name] = new
    return msgspec.structs.replace(block, **changed) if changed else block


def answer_message(blocks: Iterable[Block], where: str) -> Message:
    """The assistant message a decoder read: tool call ids checked, lone surrogates repaired.

    Every decoder ends here, so none lets through what the history validator
    would refuse on the next request (a call id that is empty or used twice
    would leave the session unable to continue) or text no wire can encode.
    """
    out = []
    seen: set[str] = set()
    for i, block in enumerate(blocks):
        block = _repaired(block)
        if isinstance(block, ToolUse):
            if not block.id:
                raise ProviderError(f"{where}: tool call {i} ({block.name!r}) has an empty id")
            if block.id in seen:
                raise ProviderError(f"{where}: tool call id {block.id!r} is used twice")
            seen.add(block.id)
        out.append(block)
    return Message("assistant", tuple(out) or (Text(""),))


# -- what a decoder or importer read and could not keep -----------------------

UNMODELLED: Final = "{path}: a field carryall does not model; not kept"
"""How a decoder or importer names a wire field that no block holds (a `field` downgrade)."""

UNKEPT: Final = "{path}: a field carryall reads but keeps in no block; not kept"
"""How it names a field it knows and reads past: an item's own id, a server's note, logprobs."""


def unmodelled(
    obj: Mapping[str, Any],
    known: frozenset[str],
    where: str,
    lost: list[Downgrade],
    *,
    index: int = 0,
    block: int | None = None,
    unkept: frozenset[str] = frozenset(),
) -> None:
    """Name in `lost` every field of `obj` outside `known`, by its path: nothing goes unsaid.

    The one reader every decoder and importer asks of each object it takes
    apart, so a field a wire adds tomorrow reaches the loss report rather
    than nowhere. `unkept` are the fields of `known` the codec reads past
    (knows, and keeps in no block): they are named too, in their own words,
    so knowing a field never stands in for keeping it. `index` is the
    message (0 for a decoded answer), `block` the block the object became,
    when there is one.
    """
    for key, value in obj.items():
        # A field that carries nothing (null, empty) loses nothing.
        if value is None or value == [] or value == {}:
            continue
        if key not in known:
            path = f"{where}.{shorten(str(key), 60)}"
            lost.append(Downgrade(index, "field", UNMODELLED.format(path=path), block))
        elif key in unkept:
            path = f"{where}.{key}"
            lost.append(Downgrade(index, "field", UNKEPT.format(path=path), block))


_SNAKE: Final = re.compile(r"_([a-z0-9])")


def camel_keys(part: Any) -> Any:
    """A wire object written in snake_case (`function_call`, `mime_type`) in camelCase.

    The keys of the object and of the objects directly inside it, and no
    deeper: a call's arguments and a result's response are the tool's own
    values, not the wire's, and keep their names. Anything but an object is
    given back as it is.
    """
    if not isinstance(part, Mapping):
        return part
    out: dict[str, Any] = {}
    for key, value in part.items():
        if isinstance(value, Mapping):
            value = {_camel(k): v for k, v in value.items()}
        out[_camel(key)] = value
    return out


def _camel(key: Any) -> Any:
    return _SNAKE.sub(lambda m: m.group(1).upper(), key) if isinstance(key, str) else key


# -- tool calls, read the one way the OpenAI-family wires agree on -----------


def _shown(value: Any) -> str:
    """A short rendering of a bad wire value for an error message: Python type and a prefix.

    Named by the decoded value's Python type (`int 1`, `list`), so the
    message says what arrived in the terms of the code reading it.
    """
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(shorten(value, 40))
    if isinstance(value, bool | int | float):
        try:
            shown = repr(value)
        except ValueError:  # an int too long to print
            shown = "..."
        return f"{type(value).__name__} {shorten(shown, 40)}"
    return type(value).__name__


def _parse_arguments(raw: str) -> tuple[Any, bool]:
    """The arguments as JSON, or the raw text and True when they are not JSON."""
    if not raw.strip():
        return {}, False
    ok, value = load_json(raw)
    return (value, False) if ok else (raw, True)


def answered_call(
    call_id: str, name: str | None, arguments: str, where: str
) -> tuple[ToolUse, bool]:
    """A tool call read off an answer (Chat Completions or Responses), and whether its
    arguments were not JSON (kept as their text, for `Response.malformed_tool_args`)."""
    if not name:
        raise ProviderError(f"{where}: the tool call has no name")
    value, bad = _parse_arguments(arguments)
    return ToolUse(call_id, name, value), bad


def imported_call(call_id: Any, name: Any, arguments: Any, where: str, holder: str) -> ToolUse:
    """A tool call read from a history someone holds (Chat Completions or Responses).

    `holder` names where the name and arguments sit (`function` on Chat
    Completions, nothing on Responses). Arguments that are a JSON value
    rather than its text are taken as they are: llama-server takes both.
    """
    if not isinstance(call_id, str) or not call_id:
        raise BlockError(f"{where}: a tool call needs an id string, got {_shown(call_id)}")
    inner = f"{where}.{holder}" if holder else where
    if not isinstance(name, str) or not name:
        raise BlockError(f"{inner}: a tool call needs a name, got {_shown(name)}")
    if isinstance(arguments, str):
        value, _ = _parse_arguments(arguments)
    else:
        value = arguments
    return ToolUse(call_id, name, value)

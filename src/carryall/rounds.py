"""Tool rounds in flat histories: `{role, content}` string messages and the block model.

Many applications already store a conversation as a list of
`{"role": ..., "content": "..."}` messages (`system`, `user`, `assistant`,
`tool`). A tool round lives in such a history as carriers (`carryall.carrier`):
one native carrier per result, or in prompt mode one prompt carrier for the
whole round. The attachments of a round sit at the carrier's fixed position,
so reading a flat history back never searches, and never trusts, body text.

The flat form keeps a few keys beside `role` and `content` where a string
cannot say everything (all optional, all at fixed positions only carryall
writes):

- assistant `tool_calls`: `[{"id", "name", "arguments"}]` (arguments as a
  JSON string), written in both modes; in prompt mode the content also holds
  the calls in the calling convention
  (`carryall.providers.calling_convention`), which is what the model wrote
  and reads;
- assistant `thinking`: `[{"text", "signature"?}]`;
- user `attachments`: images and documents a person handed over in a plain
  user turn, in the native attachments-array shape;
- user `round_text: true`: the text blocks of a tool-results message, written
  right after that round's carriers, and folded back into it on reading;
- system `in_history: true`: a system message given mid-conversation (one
  without it joins the system prompt);
- assistant and user `blocks`: the message's blocks whole, in their JSON
  form, when its strings cannot say them (an origin, a signed call,
  redacted thinking, an opaque block, two texts the strings would join);
  read back in place of the rest. A tool round's ride on its last entry.

Images are lifted back by the one lifting every carrier reader uses
(`carryall.carrier.load_declared_images`: declared markers only, each target
once, at most the policy's count per carrier). This module is core and does
no I/O of its own: the image loader is a parameter, and only when none is
given is the attachments loader (`carryall.attachments`, the edge that reads
files) imported, at call time, so importing the flat-history grammar never
loads a file reader or an HTTP client.

Documents ride as declared `DOCUMENT` attachments whose target holds them
whole (`document_target`: a `data:` URI, or the URL of one held by URL) and
are read back into `Document` blocks by a pure reading of that target; a
declared document by path stays a declared attachment (no file is read).

Normalizations (what a round trip through the flat form does not keep): a
round's images come back before its documents, and a document's title with no source reads back as
its source; an assistant message's
blocks come back in the canonical order thinking, text, tool calls. In prompt
mode also: the prose before calls loses trailing whitespace, and a round's
non-image attachments gather on its last result (one carrier holds them all).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from carryall._json import load_json
from carryall.blocks import (
    DOCUMENT_MEDIA_TYPES,
    Block,
    Document,
    Image,
    Message,
    Opaque,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    document_media_type,
    messages_to_dicts,
)
from carryall.carrier import (
    CarrierKind,
    LoadedImages,
    Marker,
    MarkerKind,
    classify,
    load_declared_images,
    marker_line,
    native_attachments,
    native_envelope,
    render_native_attachments,
    render_native_tool_carrier,
    render_prompt_tool_carrier,
)
from carryall.errors import BlockError, CarrierError, CarryallError
from carryall.providers.calling_convention import render_assistant, render_tool_calls
from carryall.providers.results_body import parse_results_body, render_results_body

__all__ = [
    "FlatMessage",
    "ImageLoader",
    "RoundResult",
    "append_tool_round",
    "document_target",
    "from_flat",
    "image_target",
    "to_flat",
]

FlatMessage = dict[str, Any]
ImageLoader = Callable[[str], Image]
"""Loads one declared image target into an `Image`; raises `CarryallError` on refusal."""


class RoundResult(msgspec.Struct, frozen=True):
    """One tool's result as the runtime appends it to a flat history.

    `tool_call_id` pairs it with its call; when it is None the call at the
    same position is used. `attachments` are declared at the carrier's fixed
    position.
    """

    text: str
    attachments: tuple[Marker, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


def image_target(image: Image) -> str:
    """The declared-attachment target that carries an image's bytes through a flat history.

    A `data:` URI, with the image's `source` as a `name` parameter (RFC 2397
    allows parameters) so the name survives the round trip too; an image
    held by its URL is that URL (read back as one, never fetched).
    """
    if image.url is not None and not image.data:
        return image.url
    if image.source:
        name = urllib.parse.quote(image.source, safe="")
        return f"data:{image.media_type};name={name};base64,{image.data}"
    return image.data_uri()


def document_target(document: Document) -> str:
    """The declared-attachment target that carries a document through a flat history.

    Its URL when it is held by one; else a `data:` URI with its name (the
    `source`, or the title when it has none) as a `name` parameter, as
    `image_target` writes an image.
    """
    if document.url is not None and not document.data:
        return document.url
    name = document.source or document.title
    if name:
        quoted = urllib.parse.quote(name, safe="")
        return f"data:{document.media_type};name={quoted};base64,{document.data}"
    return document.data_uri()


def _rider_marker(block: Image | Document) -> Marker:
    if isinstance(block, Image):
        return Marker(MarkerKind.IMAGE, image_target(block))
    return Marker(MarkerKind.DOCUMENT, document_target(block))


def _document_from_target(target: str) -> Document | None:
    """A declared document's block when its target holds it whole (a `data:` URI, a URL).

    Pure: no file is read and no URL fetched. A path, or a target that does
    not parse, gives None and stays a declared attachment (a
    marker among the round's others).
    """
    if target[:8].lower().startswith(("http://", "https://")):
        media_type = document_media_type(urllib.parse.urlsplit(target).path) or "application/pdf"
        try:
            return Document(media_type, url=target)
        except CarryallError:
            return None
    plain, name = _split_name(target)
    head, sep, payload = plain.partition(",")
    if not sep or not head.lower().startswith("data:") or not head.lower().endswith(";base64"):
        return None
    media_type = head[5:-7].lower()
    if media_type not in DOCUMENT_MEDIA_TYPES or not payload:
        return None
    try:
        if base64.b64encode(base64.b64decode(payload, validate=True)).decode() != payload:
            return None
        return Document(media_type, payload, source=name)
    except (binascii.Error, ValueError, CarryallError):
        return None


def _split_name(target: str) -> tuple[str, str | None]:
    """Take the `name` parameter out of a data: URI target, for the loader."""
    if not target.startswith("data:"):
        return target, None
    head, sep, payload = target.partition(",")
    if not sep:
        return target, None
    params = head.split(";")
    names = [p for p in params[1:] if p.startswith("name=")]
    if not names:
        return target, None
    kept = [p for p in params if not p.startswith("name=")]
    return ";".join(kept) + "," + payload, urllib.parse.unquote(names[0][5:])


def _unwritable(marker: Marker, reason: str) -> str:
    # Named in the body as plain text: nothing silently dropped, and body text
    # is never promoted back into a declaration, so this cannot be smuggled in.
    return f"(attachment not declared: {marker.kind.value} {marker.target!r}: {reason})"


def _writable_markers(markers: Sequence[Marker]) -> tuple[list[Marker], list[str]]:
    ok: list[Marker] = []
    notes: list[str] = []
    for marker in markers:
        try:
            marker_line(marker)
        except CarrierError as exc:
            notes.append(_unwritable(marker, str(exc).rpartition(": ")[2]))
        else:
            ok.append(marker)
    return ok, notes


def _with_notes(text: str, notes: Sequence[str]) -> str:
    if not notes:
        return text
    sep = "" if not text or text.endswith("\n") else "\n"
    return text + sep + "\n".join(notes)


def _call_dicts(calls: Sequence[ToolUse]) -> list[dict[str, str]]:
    return [
        {
            "id": call.id,
            "name": call.name,
            "arguments": call.input
            if isinstance(call.input, str)
            else json.dumps(call.input, ensure_ascii=False),
        }
        for call in calls
    ]


def append_tool_round(
    history: list[FlatMessage],
    assistant_content: str,
    tool_calls: Sequence[ToolUse],
    results: Sequence[RoundResult],
    native: bool,
) -> list[FlatMessage]:
    """Append one tool round to a flat history, in place; returns the history.

    Native mode: the assistant message, then one native carrier per result,
    each paired with its own call id (the call at the same position only when
    a result has none; never truncated by zipping). A result with neither
    answers no call a native carrier could name, so such a round is written
    as one prompt carrier holding it, as the upstream runtime does, never as
    a native carrier with an empty id. Prompt mode: the assistant message
    with the calls in the calling convention, then one prompt carrier
    holding every result and every attachment in order. An attachment that
    cannot be written at the fixed position is named in the body as plain
    text instead.
    """
    assistant: FlatMessage = {"role": "assistant", "content": assistant_content}
    if not native and tool_calls:
        assistant["content"] = render_assistant(assistant_content, tool_calls)
    if tool_calls:
        assistant["tool_calls"] = _call_dicts(tool_calls)
    history.append(assistant)

    ids = [
        r.tool_call_id
        if r.tool_call_id is not None
        else (tool_calls[i].id if i < len(tool_calls) else "")
        for i, r in enumerate(results)
    ]
    if native and all(ids):
        for result, call_id in zip(results, ids, strict=True):
            markers = [m for m in result.attachments if m.target]
            notes = [
                _unwritable(m, "its target is empty") for m in result.attachments if not m.target
            ]
            body = _with_notes(result.text, notes)
            history.append(
                {
                    "role": "tool",
                    "content": render_native_tool_carrier(
                        call_id, body, markers, is_error=result.is_error
                    ),
                }
            )
        return history

    names = {call.id: call.name for call in tool_calls}
    all_markers: list[Marker] = []
    tool_results: list[ToolResult] = []
    for result, call_id in zip(results, ids, strict=True):
        ok, notes = _writable_markers(result.attachments)
        all_markers.extend(ok)
        tool_results.append(ToolResult(call_id, _with_notes(result.text, notes), result.is_error))
    body = render_results_body(tool_results, names)
    history.append({"role": "user", "content": render_prompt_tool_carrier(body, all_markers)})
    return history


# -- blocks to flat ------------------------------------------------------------


def to_flat(
    messages: Sequence[Message], *, system: str | None = None, native: bool = True
) -> list[FlatMessage]:
    """Write a block history as a flat one.

    Tool results become carriers (native or prompt mode); the `Image` and
    `Document` blocks after a round's results become that round's declared
    `IMAGE` and `DOCUMENT` attachments, their target a `data:` URI (or a
    document's URL) so the bytes survive; a result's own non-image
    attachments are declared again at the fixed position.
    """
    flat: list[FlatMessage] = []
    if system:
        flat.append({"role": "system", "content": system})
    for index, message in enumerate(messages):
        if message.role == "system":
            # An instruction given mid-conversation, marked so it does not read
            # back as part of the system prompt.
            flat.append({"role": "system", "content": message.text(), "in_history": True})
            continue
        if message.role == "assistant":
            flat.append(_with_blocks(_assistant_to_flat(message, native), message))
            continue
        results = message.tool_results_in()
        if not results:
            flat.append(_with_blocks(_user_to_flat(message), message))
            continue
        previous = messages[index - 1] if index > 0 else None
        calls = (
            previous.tool_uses() if previous is not None and previous.role == "assistant" else []
        )
        images = [_rider_marker(b) for b in message.content if isinstance(b, Image | Document)]
        text = "".join(b.text for b in message.content if isinstance(b, Text))
        if native:
            for position, result in enumerate(results):
                last = position == len(results) - 1
                # An empty target would be written and then dropped on
                # reading: named in the body instead, as `append_tool_round` does.
                markers = [m for m in result.attachments if m.target]
                notes = [
                    _unwritable(m, "its target is empty")
                    for m in result.attachments
                    if not m.target
                ]
                markers += images if last else []
                flat.append(
                    {
                        "role": "tool",
                        "content": render_native_tool_carrier(
                            result.tool_use_id,
                            _with_notes(result.content, notes),
                            markers,
                            is_error=result.is_error,
                        ),
                    }
                )
        else:
            names = {call.id: call.name for call in calls}
            markers = []
            bodies: list[ToolResult] = []
            for r in results:
                # What cannot stand at the fixed position is named in the
                # body, as `append_tool_round` does, never raised.
                ok, notes = _writable_markers(r.attachments)
                markers += ok
                bodies.append(ToolResult(r.tool_use_id, _with_notes(r.content, notes), r.is_error))
            markers += images
            flat.append(
                {
                    "role": "user",
                    "content": render_prompt_tool_carrier(
                        render_results_body(bodies, names), markers
                    ),
                }
            )
        if text:
            flat.append({"role": "user", "content": text, "round_text": True})
        # What the carriers cannot say (an opaque rider, cited or split text)
        # rides whole on the round's last entry, where its reader looks.
        _with_blocks(flat[-1], message)
    return flat


def _assistant_to_flat(message: Message, native: bool) -> FlatMessage:
    text = message.text()
    calls = message.tool_uses()
    out: FlatMessage = {"role": "assistant", "content": text}
    if not native and calls:
        out["content"] = render_assistant(text, calls)
    if calls:
        out["tool_calls"] = _call_dicts(calls)
    thinking = [b for b in message.content if isinstance(b, Thinking)]
    if thinking:
        out["thinking"] = [
            {"text": b.text, **({"signature": b.signature} if b.signature is not None else {})}
            for b in thinking
        ]
    return out


def _with_blocks(out: FlatMessage, message: Message) -> FlatMessage:
    """`out` with the message's blocks whole under `blocks`, when its strings cannot say them.

    An origin (on thinking, a signed call), redacted thinking, opaque
    blocks, a wire's own spelling of a block and a message's texts apart
    (the strings join them) have no string form: the message's own JSON form rides at this
    fixed position, which only carryall writes and reads, so the history
    comes back as it was. The other keys are written as ever, for any other
    reader of the file.
    """
    if any(_unsayable(block) for block in message.content) or _texts(message) > 1:
        out["blocks"] = messages_to_dicts([message])[0]["content"]
    return out


def _texts(message: Message) -> int:
    # The string form joins a message's texts into one: two or more cannot be said apart.
    return sum(type(block) is Text for block in message.content)


def _unsayable(block: Block) -> bool:
    kind = type(block)
    if isinstance(block, Opaque) or kind is RedactedThinking:
        return True
    if (kind is Text or kind is ToolUse or kind is ToolResult) and block.spelling:  # type: ignore[union-attr]
        return True  # how its wire spelled it: a field no string holds
    if kind is Text:
        return bool(block.citations)  # type: ignore[union-attr]
    if kind is Thinking or kind is ToolUse:
        return block.origin is not None or (kind is ToolUse and block.signature is not None)  # type: ignore[union-attr]
    return False


def _blocks_of(entry: Mapping[str, Any], index: int, role: str | None = None) -> Message | None:
    """The message a flat entry's `blocks` key holds whole, or None when it has none.

    `role` is the message's when the entry's own is not (a round's last `tool` entry).
    """
    blocks = entry.get("blocks")
    if blocks is None:
        return None
    role = role or entry.get("role")
    try:
        return Message.from_dict({"role": role, "content": blocks})
    except BlockError as exc:
        raise CarrierError(f"flat message {index}: its blocks: {exc}") from None


def _user_to_flat(message: Message) -> FlatMessage:
    out: FlatMessage = {"role": "user", "content": message.text()}
    riders = [b for b in message.content if isinstance(b, Image | Document)]
    if riders:
        out["attachments"] = render_native_attachments(_rider_marker(b) for b in riders)
    return out


# -- flat to blocks ------------------------------------------------------------


class _Lifter:
    """Lifts the declared images of each carrier one `from_flat` call reads: loader and limit."""

    def __init__(self, load_image: ImageLoader | None) -> None:
        self._limit: int | None = None
        if load_image is None:
            # The edge, imported only when it is the loader (see the module docstring).
            from carryall.attachments import AttachmentPolicy
            from carryall.attachments import load_image as load

            policy = AttachmentPolicy()
            self._limit = policy.max_images
            load_image = functools.partial(load, policy=policy)
        self._load = load_image

    def lift(self, markers: Sequence[Marker]) -> LoadedImages[Image]:
        return load_declared_images(markers, self._named, self._limit)

    def _named(self, target: str) -> Image:
        # An image held by its URL comes back held by it: carryall fetches
        # nothing on its own.
        if target.startswith(("https://", "http://")):
            return Image.from_url(target)
        # The loader sees the target without the name parameter, so a loader
        # that knows only plain data: URIs still loads it; the name is put back.
        plain, name = _split_name(target)
        image = self._load(plain)
        return image if name is None else Image(image.media_type, image.data, name)


def from_flat(
    flat: Sequence[Mapping[str, Any]], *, load_image: ImageLoader | None = None
) -> tuple[str | None, list[Message]]:
    """Read a flat history back into blocks: `(system, messages)`.

    Declared image attachments are lifted (through `load_image`, by default
    the attachments loader with its default policy and that policy's limit
    per carrier) into `Image` blocks after the round's results; a target
    that fails to load is named, with the reason, in a note on its result.
    A target declared twice in one carrier is loaded once. A loader given
    here is the caller's whole policy: no image limit is added to it. A
    declared document whose target holds it (a `data:` URI, a URL) becomes
    a `Document` after the images. Legacy carrier bodies stay text, and
    other non-image attachments stay declared on their result so that
    writing the history out again gives them back at the fixed position.
    """
    lifter = _Lifter(load_image)
    system_parts: list[str] = []
    messages: list[Message] = []
    index = 0
    while index < len(flat):
        entry = flat[index]
        role = entry.get("role")
        content = entry.get("content")
        if not isinstance(content, str):
            content = "" if content is None else str(content)
        if role == "system" and entry.get("in_history") is True:
            messages.append(Message("system", (Text(content),)))
            index += 1
            continue
        if role in ("system", "developer"):
            system_parts.append(content)
            index += 1
            continue
        held = _blocks_of(entry, index) if role in ("assistant", "user") else None
        if held is not None:
            messages.append(held)
            index += 1
            continue
        if role == "assistant":
            messages.append(_assistant_from_flat(entry, content, index))
            index += 1
            continue
        calls = messages[-1].tool_uses() if messages and messages[-1].role == "assistant" else []
        # A user message is read as a prompt carrier only where a round is
        # due: a person who starts a message with "[Tool results]" said it.
        if role == "tool" or (role == "user" and calls and classify("user", content) is not None):
            end = index + 1 if role == "user" else _tool_run_end(flat, index)
            blocks = _round_from_flat(flat[index:end], calls, lifter)
            if end < len(flat) and flat[end].get("round_text") is True:
                extra = flat[end].get("content")
                if isinstance(extra, str) and extra:
                    results = [b for b in blocks if isinstance(b, ToolResult)]
                    rest = [b for b in blocks if not isinstance(b, ToolResult)]
                    blocks = [*results, Text(extra), *rest]
                end += 1
            whole = _blocks_of(flat[end - 1], end - 1, "user")
            messages.append(whole or Message("user", tuple(blocks)))
            index = end
            continue
        if role == "user":
            messages.append(_user_from_flat(entry, content, lifter))
            index += 1
            continue
        raise CarrierError(f"flat message {index}: unknown role {role!r}")
    return ("\n\n".join(system_parts) if system_parts else None), messages


def _tool_run_end(flat: Sequence[Mapping[str, Any]], start: int) -> int:
    end = start
    while end < len(flat) and flat[end].get("role") == "tool":
        end += 1
    return end


def _assistant_from_flat(entry: Mapping[str, Any], content: str, index: int) -> Message:
    blocks: list[Block] = []
    thinking = entry.get("thinking")
    if isinstance(thinking, list):
        for item in thinking:
            if isinstance(item, Mapping) and isinstance(item.get("text"), str):
                signature = item.get("signature")
                blocks.append(
                    Thinking(item["text"], signature if isinstance(signature, str) else None)
                )
    raw_calls = entry.get("tool_calls")
    calls: list[ToolUse] = []
    text = content
    if isinstance(raw_calls, list) and raw_calls:
        for position, call in enumerate(raw_calls):
            calls.append(_call_from_flat(call, index, position))
        # Prompt mode wrote the calls into the content too, after the prose;
        # the structured key is the fixed position, so the calls are never
        # read back out of the text: the exact rendering is cut off instead.
        rendered = render_tool_calls(calls)
        if calls and content.endswith(rendered):
            text = content[: len(content) - len(rendered)].removesuffix("\n\n")
    if text:
        blocks.append(Text(text))
    blocks.extend(calls)
    if not blocks:
        blocks.append(Text(""))
    return Message("assistant", tuple(blocks))


def _call_from_flat(call: Any, index: int, position: int) -> ToolUse:
    if not isinstance(call, Mapping):
        raise CarrierError(f"flat message {index}: tool call {position} is not an object")
    function = call.get("function")
    source = function if isinstance(function, Mapping) else call
    call_id, name, arguments = call.get("id"), source.get("name"), source.get("arguments")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise CarrierError(f"flat message {index}: tool call {position} lacks a string id and name")
    if isinstance(arguments, str):
        ok, value = load_json(arguments)
        if not ok:
            value = arguments
    else:
        value = {} if arguments is None else arguments
    return ToolUse(call_id, name, value)


def _user_from_flat(entry: Mapping[str, Any], content: str, lifter: _Lifter) -> Message:
    blocks: list[Block] = []
    loaded = lifter.lift(native_attachments(entry.get("attachments")) or ())
    documents, _ = _lift_documents(loaded.kept)
    text = _with_notes(content, loaded.notes)
    if text or not (loaded.images or documents):
        blocks.append(Text(text))
    blocks.extend(loaded.images)
    blocks.extend(documents)
    return Message("user", tuple(blocks))


def _lift_documents(markers: Sequence[Marker]) -> tuple[list[Document], list[Marker]]:
    """The declared documents whose targets hold them whole, and every other non-image marker."""
    documents: list[Document] = []
    others: list[Marker] = []
    for marker in markers:
        if marker.kind is MarkerKind.IMAGE:
            continue
        document = (
            _document_from_target(marker.target) if marker.kind is MarkerKind.DOCUMENT else None
        )
        if document is None:
            others.append(marker)
        else:
            documents.append(document)
    return documents, others


def _round_from_flat(
    entries: Sequence[Mapping[str, Any]], calls: Sequence[ToolUse], lifter: _Lifter
) -> list[Block]:
    results: list[ToolResult] = []
    images: list[Image] = []
    documents: list[Document] = []
    for position, entry in enumerate(entries):
        role = str(entry.get("role"))
        content = entry.get("content")
        content = content if isinstance(content, str) else ""
        parts = classify(role, content)
        if parts is None:  # pragma: no cover - callers only pass carriers
            continue
        if parts.kind is CarrierKind.PROMPT:
            results.extend(_prompt_results(parts.text, parts.declared, calls))
        else:
            envelope = native_envelope(content)
            call_id = envelope.get("tool_call_id") if envelope is not None else None
            if not isinstance(call_id, str):
                call_id = calls[position].id if position < len(calls) else ""
            is_error = bool(envelope.get("is_error") is True) if envelope is not None else False
            results.append(ToolResult(call_id, parts.text, is_error))
        if not parts.declared:
            continue
        loaded = lifter.lift(parts.attachments)
        images.extend(loaded.images)
        lifted, others = _lift_documents(loaded.kept)
        documents.extend(lifted)
        notes = loaded.notes
        if others or notes:
            last = results[-1]
            results[-1] = ToolResult(
                last.tool_use_id,
                _with_notes(last.content, notes),
                last.is_error,
                (*last.attachments, *others),
            )
    return [*results, *images, *documents]


def _prompt_results(body: str, declared: bool, calls: Sequence[ToolUse]) -> list[ToolResult]:
    parsed = parse_results_body(body) if declared else None
    if (parsed is not None and len(parsed) == len(calls)) or (parsed and not calls):
        return list(parsed)
    # A legacy or unreadable body stays text, whole: it answers the first call,
    # and any other call of the round is told its result was not recoverable,
    # so the history stays valid without inventing an attribution.
    if not calls:
        return [ToolResult("", body)]
    out = [ToolResult(calls[0].id, body)]
    out.extend(
        ToolResult(call.id, "(result not separable from a legacy carrier body)", True)
        for call in calls[1:]
    )
    return out

"""The Anthropic Messages dialect: blocks to wire JSON and back, streamed or not.

A pure codec: `encode_request` builds the body `messages.create` takes,
`decode_response` reads the message it returns, `StreamDecoder` reads the
SSE events of a streamed call into the same `Response`, and
`decode_messages` imports an Anthropic-style history someone already holds.

Choices this dialect forces, each made once here:

- **Tool results first.** A user message's tool results go out before its
  text and images, whatever order the blocks were in: the API wants the
  results at the top of the turn that answers the calls.
- **Images** are base64 sources with the bare payload; the `str` is the one
  the block holds, never copied. `Image.source` never goes on the wire, so it
  reads back as `None`. A tool-made image rides the user message after the
  results (SPEC §1); an imported history that put images inside a
  `tool_result` has them lifted there, after the message's last result.
- **Thinking** goes back only with its signature. Unsigned thinking (another
  backend's) stays in the transcript but off this wire, as thinking or as
  text: a made-up signature would be refused, and thinking passed as text
  would put words in the model's mouth.
- **Provenance.** Every signed thinking block, redacted thinking and
  provider-native block decoded is stamped with its `Origin` (this dialect,
  the endpoint the transport names, the model the response names), and
  goes back only to that origin (`_common.prepare`): a signature from
  another model or server is left off and reported. Redacted thinking is a
  `RedactedThinking`; decoding then encoding gives it back byte for byte.
- **Provider-native blocks** (`tool_reference`, anything newer) are `Opaque`
  blocks holding the block's JSON, echoed as they came to their origin and
  elsewhere their one text line; server-tool and MCP calls and their
  results are the common `ServerToolCall` and `ServerToolResult` (the same
  JSON, with a reading); a text block's `citations` are its
  `Text.citations`, each keeping its JSON, joined back onto the text for
  their origin (an older transcript's `Opaque` of kind `citations` right
  after its `Text` still is). A `tool_result`'s own native parts (a
  `tool_reference`) ride an `Opaque` of kind `tool_result_content` right
  after the result, back inside it for its origin. A response is never
  refused for a block type it does not know. Hosted tools
  (`Request.hosted_tools`) are server tools and `mcp_servers`
  (`providers.hosted`).
- **Documents** go as `document` blocks (PDF by base64 or URL, plain text
  as a `text` source, with the title); images by URL as `url` sources. A
  mid-conversation `system` message is folded into the next user turn
  (the Messages API has no such role), and reported.
- **Blank text** (empty or whitespace only) is left off the wire, and a
  message left with nothing is left out: the API refuses both.
- **Tool input** on this wire is always an object. Any other value (the raw
  text of arguments that were not valid JSON) goes as
  `{"INVALID_JSON": text}`, the wrapping Anthropic documents for sending
  broken arguments back; `decode_messages` unwraps exactly that shape, so
  an exported history reads back as it was. A non-string, non-object input
  goes as its JSON text and reads back as that text. `ToolResult.attachments`
  (non-image attachments of a flat history) have no place on any wire.
- **Stop reasons**: `stop_sequence` is a normal end of turn (the caller asked
  for it), so it reads as `end_turn`; `model_context_window_exceeded` cut the
  answer short like `max_tokens` and reads as that; anything else unknown is
  `other`.
- **Request options**: `thinking` is sent only when the model can think
  (`Capabilities.thinking`), as manual extended thinking with
  `thinking_budget` or half of `max_tokens` (at least 1024, the API's
  minimum); `effort` as `output_config.effort`; `cache` `auto` puts an
  ephemeral `cache_control` on the last tool, the system prompt (then a
  one-block list) and the history's moving breakpoints, as
  `carryall.providers.caching` places them; `tool_choice` is sent only
  with tools (`required` is `any`).
- **Streams**: event types this codec does not know are skipped, as the
  API's versioning policy asks; unknown block or delta types, events out of
  order and a stream without `message_stop` are a `ProviderError`. Tool
  arguments that do not parse into an object become a `ToolUse` whose input
  is the raw text, counted in `Response.malformed_tool_args`.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from carryall._json import (
    KeptItems,
    Payload,
    body_bytes,
    carryable,
    load_json,
    repair_surrogates,
    repair_text,
)
from carryall._text import json_type_phrase, shorten
from carryall.blocks import (
    Block,
    Citation,
    Document,
    Downgrade,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    ServerToolCall,
    ServerToolResult,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.errors import BlockError, CarryallError, ProviderError, wire_error
from carryall.providers import caching, hosted, structured
from carryall.providers._common import (
    Prepared,
    Wire,
    answer_message,
    payload_messages,
    prepare,
    spelled,
    spelling_of,
    unmodelled,
)
from carryall.providers._types import (
    DEFAULT_TARGET,
    Capabilities,
    Encoded,
    Imported,
    Request,
    Response,
    Sent,
    StopReason,
    Target,
    Usage,
)
from carryall.providers._wire import INVALID_JSON_KEY, MIN_THINKING_BUDGET
from carryall.providers._wire import thinking_budget as _thinking_budget
from carryall.providers.options import NO_OPTIONS, left_off, merge_extra, tier_left_off

__all__ = [
    "DIALECT",
    "INVALID_JSON_KEY",
    "MIN_THINKING_BUDGET",
    "WIRE",
    "StreamDecoder",
    "decode",
    "decode_messages",
    "decode_response",
    "decode_stream",
    "encode",
    "encode_body",
    "encode_bytes",
    "encode_request",
    "encode_request_bytes",
    "encode_sent",
    "sent_bytes",
]

DIALECT: Final = "anthropic"
"""The dialect part of every origin this codec stamps."""

WIRE: Final = Wire(
    DIALECT,
    signed=True,
    image_urls=True,
    pdf=True,
    pdf_urls=True,
    text_documents=True,
    # The Messages API takes `role: "system"` inside the history (`SystemMessageParam`).
    system_inside=True,
)
"""What the Messages API takes natively."""

_TOOL_CHOICES: Final[dict[str, dict[str, str]]] = {
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
}

_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}

_USAGE_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)

_MISSING: Final[Any] = object()


# -- the codec contract ------------------------------------------------------
# The same names with the same signatures in every wire module
# (`encode_body`, `encode_bytes`, `decode`, `StreamDecoder`,
# `decode_messages`), each taking what it needs of one `Target`.


def encode_body(request: Request, target: Target) -> Encoded:
    """The Messages API body for `request`, and every downgrade made to write it (`encode`).

    `target.every_origin` keeps every signature and native block, for a
    history written to a file.
    """
    return encode(request, target.caps, every_origin=target.every_origin)


def encode_bytes(
    request: Request, target: Target, *, stream: bool = False, kept: KeptItems | None = None
) -> Sent:
    """`encode_body`'s body as the bytes sent (a stream asked for when `stream`) (`encode_sent`).

    With `kept`, the messages the last body written with it began with are
    copied in as the JSON written then: the same bytes.
    """
    return encode_sent(request, target.caps, stream=stream, kept=kept)


def decode(data: Mapping[str, Any], target: Target) -> Response:
    """A Messages API answer as a `Response`, its origins at `target.endpoint`."""
    return decode_response(data, endpoint=target.endpoint)


# -- requests ---------------------------------------------------------------


def encode_request(
    request: Request, caps: Capabilities, *, every_origin: bool = False
) -> dict[str, Any]:
    """The Messages API body for `request` (`encode`'s body alone)."""
    return encode(request, caps, every_origin=every_origin).body


def encode(request: Request, caps: Capabilities, *, every_origin: bool = False) -> Encoded:
    """The Messages API body for `request`, and every downgrade made to write it.

    The target origin is this dialect, `request.endpoint` (the backend fills
    it from its base URL before encoding) and `request.model`: a signature
    or provider-native block of another origin is left off, and named in
    `Encoded.downgrades` with everything else this wire could not take as it
    is held. `every_origin` keeps them all, for writing a history to a file.
    The history is validated and the image limit applied first
    (`prepare`), so a broken history fails here, before anything is sent.
    Image data and tool schemas are referenced, not copied. A canonical
    message (`blocks.survey_history`) comes out of msgspec's conversion of
    the block model, with its content as a tuple and its tool inputs as
    copies; the messages this wire needs rewritten have lists. Both are JSON
    arrays to every serializer and to the SDK; the body is for sending, and
    a caller who edits it should copy it first.
    """
    body, downgrades = _body(request, caps, every_origin, _encode_messages)
    return Encoded(body, downgrades)


def encode_sent(
    request: Request, caps: Capabilities, *, stream: bool = False, kept: KeptItems | None = None
) -> Sent:
    """`encode`'s body as the bytes sent (a stream asked for when `stream`), and its report.

    The transport's entry point, and the same JSON as `encode`'s body byte
    for byte, built without that body's dict tree: a canonical message is
    written by msgspec straight from its blocks (their JSON form is this
    wire's), and only the irregular ones become dicts first. A long history
    then makes a handful of containers per request instead of several per
    message, each of which the garbage collector would track and, once the
    request outlived a few young collections, walk again in a full one.
    With `kept`, the messages the last body written with it began with are
    copied in as the JSON written then (`KeptItems`): the same bytes.
    """
    if kept is None:
        body, downgrades = _body(request, caps, False, _sent_messages, Payload)
    else:
        try:
            body, downgrades = _body(request, caps, False, _kept_messages(kept), Payload)
        except (TypeError, ValueError, RecursionError) as exc:
            if isinstance(exc, CarryallError):
                raise
            # A chunk msgspec would not write: the path below names why.
            return encode_sent(request, caps, stream=stream)
    if stream:
        body["stream"] = True
    try:
        data = body_bytes(body)
    except (TypeError, ValueError, RecursionError):
        # A tool input msgspec will not write as it is: the dict path, which
        # writes such a message block by block and names what still fails.
        data = sent_bytes(encode_request(request, caps), stream=stream)
    return Sent(data, downgrades)


def encode_request_bytes(request: Request, caps: Capabilities, *, stream: bool = False) -> bytes:
    """`encode_request`'s body as the bytes sent, asking for a stream when `stream` is true."""
    return encode_sent(request, caps, stream=stream).data


def sent_bytes(body: Mapping[str, Any], *, stream: bool = False) -> bytes:
    """A finished body (`encode`'s) as the bytes sent, asking for a stream when `stream` is true.

    The same JSON as the body, written once, so the SDK never re-walks or
    re-encodes the history; `encode_sent` writes those bytes without the
    body in between.
    """
    return body_bytes({**body, "stream": True} if stream else body)


def _body(
    request: Request,
    caps: Capabilities,
    every_origin: bool,
    write: Callable[[list[Message], list[int]], list[Any]],
    payload: Callable[[str], Any] = str,
) -> tuple[dict[str, Any], tuple[Downgrade, ...]]:
    """The body with its messages as `write` gives them, and the downgrades made.

    `payload` holds each base64 payload of the messages written past
    `write`, the ones holding a cache breakpoint (`_marked`).
    """
    messages, irregular, downgrades = prepare(request, caps, WIRE, every_origin=every_origin)
    marks = caching.anthropic_breakpoints(request, messages, irregular)
    wire: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens}
    if request.system:
        if marks.system:
            wire["system"] = [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ]
        else:
            wire["system"] = request.system
    if marks.messages:
        wire["messages"] = _marked(messages, irregular, write, payload, marks.messages)
    else:
        wire["messages"] = write(messages, irregular)
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if marks.tools:
            tools[-1]["cache_control"] = {"type": "ephemeral"}
        wire["tools"] = tools
        if request.tool_choice is not None:
            if request.tool_choice == "required" and request.thinking and caps.thinking:
                raise ProviderError(
                    "Anthropic request: tool_choice 'required' cannot be combined with "
                    "thinking (the API takes only 'auto' or 'none' then)"
                )
            wire["tool_choice"] = dict(_TOOL_CHOICES[request.tool_choice])
    if request.hosted_tools:
        served = hosted.anthropic_fields(request.hosted_tools)
        if "tools" in served:
            wire["tools"] = [*wire.get("tools", ()), *served["tools"]]
        if "mcp_servers" in served:
            wire["mcp_servers"] = served["mcp_servers"]
    if request.thinking and caps.thinking:
        wire["thinking"] = {"type": "enabled", "budget_tokens": _thinking_budget(request)}
    if request.effort is not None:
        wire["output_config"] = {"effort": request.effort}
    structured.add_anthropic(wire, request)
    placed = _options(request, wire)
    if placed:
        downgrades = (*placed, *downgrades)
    return wire, downgrades


def _marked(
    messages: list[Message],
    irregular: list[int],
    write: Callable[[list[Message], list[int]], list[Any]],
    payload: Callable[[str], Any],
    marked: tuple[int, ...],
) -> list[Any]:
    """The messages with a breakpoint on each of `marked`: `write` up to the first, then dicts.

    A breakpoint moves on at every step, so the messages from the first one
    on are written block by block and never kept (`KeptItems`): the
    message that holds a marker now is written without it once the history
    has grown past it, and kept JSON would still hold the marker.
    """
    first = marked[0]
    out = write(messages[:first], irregular[: bisect.bisect_left(irregular, first)])
    for index in range(first, len(messages)):
        item = _encode_message(messages[index], payload)
        if item is None:
            continue
        if index in marked:
            caching.mark_anthropic(item["content"])
        out.append(item)
    return out


_SERVICE_TIERS: Final = ("auto", "standard_only")


def _options(request: Request, wire: dict[str, Any]) -> list[Downgrade]:
    """Write `request.options` and strict tools as the Messages API names them; the rest named.

    `temperature`, `top_p` and `top_k` are the API's own fields still, for
    the models that sample with them (the SDK's typed parameters dropped
    them; its migration guide sends them as body fields, as here); a model
    that refuses them says so itself. Parallel calls are the tool choice's
    `disable_parallel_tool_use`, written only with tools.
    """
    for spec, tool in zip(request.tools, wire.get("tools", ()), strict=False):
        if spec.strict:
            tool["strict"] = True
    options = request.options
    if options == NO_OPTIONS:
        return []
    lost: list[Downgrade] = []
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(options, name)
        if value is not None:
            wire[name] = value
    if options.stop:
        wire["stop_sequences"] = list(options.stop)
    for name in ("seed", "presence_penalty", "frequency_penalty", "store"):
        if getattr(options, name) is not None:
            lost.append(left_off(name, DIALECT))
    if options.parallel_tool_calls is not None and request.tools:
        choice = wire.setdefault("tool_choice", {"type": "auto"})
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = not options.parallel_tool_calls
    if options.service_tier is not None:
        if options.service_tier in _SERVICE_TIERS:
            wire["service_tier"] = options.service_tier
        else:
            lost.append(tier_left_off(options.service_tier, DIALECT, _SERVICE_TIERS))
    return lost + merge_extra(wire, request, DIALECT, ("stream",))


def _encode_messages(messages: list[Message], irregular: list[int]) -> list[Any]:
    # The block model's JSON form was drawn after this wire, so a canonical
    # message (`survey_history`) is converted as it is, by msgspec, in one
    # call over the whole history: this runs on every request, and the
    # benchmark holds it to a small multiple of serialising the result. Only
    # the irregular messages are written block by block.
    try:
        out: list[Any] = msgspec.to_builtins(messages)
    except (TypeError, ValueError, RecursionError):
        # A tool input holding what msgspec will not convert: every message
        # is written block by block, which sends tool inputs by reference.
        return _rewritten([None] * len(messages), messages, range(len(messages)), str)
    return _rewritten(out, messages, irregular, str)


def _sent_messages(messages: list[Message], irregular: list[int]) -> list[Any]:
    # For the bytes: a canonical message stays the block itself, which the
    # body's encoder writes as the same JSON `_encode_messages` would hold,
    # and an image's or a document's base64 is a `Payload` for it.
    return _rewritten(list(messages), messages, irregular, Payload)


def _kept_messages(kept: KeptItems) -> Callable[[list[Message], list[int]], list[Any]]:
    # `_sent_messages`, with the start the last body repeated taken from `kept`.
    def write(messages: list[Message], irregular: list[int]) -> list[Any]:
        def written(start: int, end: int) -> list[Any]:
            part = messages[start:end]
            first = bisect.bisect_left(irregular, start)
            rewrite = [i - start for i in irregular[first : bisect.bisect_left(irregular, end)]]
            return _rewritten(list(part), part, rewrite, Payload)

        payloads = payload_messages(Prepared(messages, irregular))
        return kept.items(messages, payloads, written)

    return write


def _rewritten(
    out: list[Any],
    messages: list[Message],
    rewrite: Iterable[int],
    payload: Callable[[str], Any],
) -> list[Any]:
    """`out` with the messages at `rewrite` written block by block, the emptied ones left out.

    `payload` holds each image's and document's base64: `str` (itself) for
    the dict form, `Payload` for `body_bytes`.
    """
    emptied = False
    for index in rewrite:
        encoded = out[index] = _encode_message(messages[index], payload)
        emptied = emptied or encoded is None
    if emptied:
        return [m for m in out if m is not None]
    return out


def _encode_message(message: Message, payload: Callable[[str], Any]) -> dict[str, Any] | None:
    """One message block by block; None when nothing in it may go on this wire."""
    # The history is valid, so each block is one its role may hold. Results
    # go to the front, after any results before them; the rest keep their
    # order behind.
    content: list[dict[str, Any]] = []
    results = 0
    last_text: dict[str, Any] | None = None
    last_result: dict[str, Any] | None = None
    for block in message.content:
        if isinstance(block, Text):
            last_text = last_result = None
            if block.text and not block.text.isspace():
                last_text = {"type": "text", "text": block.text}
                if block.citations:  # `prepare` kept them: this origin's own
                    last_text["citations"] = _native_citations(block.citations)
                content.append(last_text)
            continue
        if isinstance(block, Opaque) and block.kind == CITATIONS:
            # `prepare` kept it, so it is this origin's: back onto its text.
            if last_text is not None:
                last_text["citations"] = json.loads(block.raw)
            continue
        if isinstance(block, Opaque) and block.kind == IN_RESULT:
            # The same for a result's own native parts: back inside it.
            if last_result is not None:
                text = last_result.get("content")
                parts = text if isinstance(text, list) else [{"type": "text", "text": text}]
                last_result["content"] = (parts if text else []) + json.loads(block.raw)
            continue
        last_text = last_result = None
        if isinstance(block, Opaque):
            if block.raw:  # "" is a result its call's item holds
                content.append(json.loads(block.raw))
        elif isinstance(block, ToolResult):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
            spelling = block.spelling  # `prepare` kept it: this wire's own
            if block.content:
                if spelling is not None and spelling.form == TEXT_BLOCKS:
                    result["content"] = [{"type": "text", "text": block.content}]
                else:
                    result["content"] = block.content
            if block.is_error:
                result["is_error"] = True
            result = spelled(result, spelling)
            content.insert(results, result)
            results += 1
            last_result = result
        elif isinstance(block, Image):
            if block.data or block.url is None:
                data = payload(block.data)
                source = {"type": "base64", "media_type": block.media_type, "data": data}
            else:
                source = {"type": "url", "url": block.url}
            content.append({"type": "image", "source": source})
        elif isinstance(block, Document):
            content.append(_document(block, payload))
        elif isinstance(block, RedactedThinking):
            content.append({"type": "redacted_thinking", "data": block.data})
        elif isinstance(block, ToolUse):
            content.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": _wire_input(block.input),
                }
            )
        elif isinstance(block, Thinking) and block.signature:
            content.append(
                {"type": "thinking", "thinking": block.text, "signature": block.signature}
            )
    return {"role": message.role, "content": content} if content else None


def _document(block: Document, payload: Callable[[str], Any]) -> dict[str, Any]:
    source: dict[str, Any]
    if not block.data and block.url is not None:
        source = {"type": "url", "url": block.url}
    elif block.media_type == "text/plain":
        source = {"type": "text", "media_type": "text/plain", "data": block.plain_text()}
    else:
        source = {"type": "base64", "media_type": block.media_type, "data": payload(block.data)}
    out: dict[str, Any] = {"type": "document", "source": source}
    if block.title is not None:
        out["title"] = block.title
    return out


def _wire_input(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        return {INVALID_JSON_KEY: value}
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ProviderError(f"Anthropic request: tool input is not a JSON value: {exc}") from None
    return {INVALID_JSON_KEY: text}


# -- reading wire JSON --------------------------------------------------------


def _kind(value: Any) -> str:
    return "nothing" if value is _MISSING else json_type_phrase(value)


def _bad(where: str, expected: str, value: Any) -> ProviderError:
    return ProviderError(f"Anthropic {where}: expected {expected}, got {_kind(value)}")


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(where, "an object", value)
    return value


def _array(value: Any, where: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise _bad(where, "an array", value)
    return value


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key, _MISSING)
    if not isinstance(value, str):
        raise _bad(f"{where}.{key}", "a string", value)
    return value


def _opt_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad(f"{where}.{key}", "a string or null", value)
    return value


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _bad(where, "a token count", value)
    return value


def _error(value: Any, where: str) -> ProviderError:
    """The `ProviderError` for an `{"type": "error", "error": {...}}` body or event."""
    body = value.get("error") if isinstance(value, Mapping) else None
    kind = body.get("type") if isinstance(body, Mapping) else None
    message = body.get("message") if isinstance(body, Mapping) else None
    kind = kind if isinstance(kind, str) else None
    text = message if isinstance(message, str) and message else "an error with no message"
    return wire_error(f"Anthropic {where}: {text}", kind=kind)


def _stop_reason(value: Any, where: str) -> StopReason:
    if value is None:
        return "other"
    if not isinstance(value, str):
        raise _bad(where, "a string or null", value)
    return _STOP_REASONS.get(value, "other")


def _refusal(value: Any, where: str) -> str | None:
    if value is None:
        return None
    details = _object(value, where)
    if details.get("type") != "refusal":
        return None
    return _opt_str(details, "explanation", where)


def _thinking(signature: str | None, text: str, origin: Origin | None) -> Thinking:
    # An empty signature signs nothing: the block reads as unsigned, of no origin.
    if not signature:
        return Thinking(text)
    return Thinking(text, signature, origin)


CITATIONS: Final = "citations"
"""The `Opaque.kind` of a text block's citations, riding right after its `Text`."""

IN_RESULT: Final = "tool_result_content"
"""The `Opaque.kind` of a tool result's provider-native parts, riding right after its result.

A `tool_reference` (tool search) answers a call from inside its
`tool_result`, where the request type wants it; `raw` is the list of such
parts, joined back into the result for their origin, as `CITATIONS` are
onto their text. Images and documents that rode inside are lifted instead.
"""


TEXT_BLOCKS: Final = "text_blocks"
"""The `Spelling.form` of a `tool_result` whose text was one text block, not a string."""


def _opaque(kind: str, block: Mapping[str, Any], origin: Origin | None) -> Opaque:
    """A provider-native block kept whole; a server tool's call or result in its common form."""
    if kind in ("server_tool_use", "mcp_tool_use"):
        name = block.get("name")
        name = name if isinstance(name, str) else ""
        tool = "mcp" if kind == "mcp_tool_use" else _SERVER_TOOLS.get(name, name or kind)
        ident = block.get("id")
        return ServerToolCall.made(
            kind,
            _raw_value(block),
            origin,
            tool=tool,
            id=ident if isinstance(ident, str) else "",
            name=name,
            input=block.get("input"),
        )
    if kind.endswith("_tool_result"):
        return _server_result(kind, block, origin)
    return Opaque(repair_text(kind), _raw_value(block), origin)


_SERVER_TOOLS: Final = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "code_execution": "code_execution",
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
}
"""The common kind of each Anthropic server tool by its name; any other keeps its own name."""


def _server_result(kind: str, block: Mapping[str, Any], origin: Origin | None) -> ServerToolResult:
    """A server tool's result in the common form: its sources, its output, whether it failed.

    The result block's type names its tool (`web_search_tool_result`,
    `bash_code_execution_tool_result`, `mcp_tool_result`); its content is
    a list of search results, one result object, or an MCP tool's text.
    """
    stem = kind.removesuffix("_tool_result")
    tool = "mcp" if stem == "mcp" else _SERVER_TOOLS.get(stem, stem)
    content = block.get("content")
    sources: list[Citation] = []
    output: list[str] = []
    failed = block.get("is_error") is True
    items = content if isinstance(content, list) else [content]
    for item in items:
        if isinstance(item, str):
            output.append(item)
            continue
        if not isinstance(item, Mapping):
            continue
        part = item.get("type")
        if isinstance(part, str) and part.endswith("_error"):
            failed = True
            output.append(str(item.get("error_code", part)))
        url = item.get("url")
        if isinstance(url, str):
            title = item.get("title")
            fetched = item.get("content")
            if not isinstance(title, str) and isinstance(fetched, Mapping):
                title = fetched.get("title")
            sources.append(Citation(url, title if isinstance(title, str) else ""))
        for key in ("text", "stdout", "stderr", "content"):
            value = item.get(key)
            if isinstance(value, str) and value:
                output.append(value)
    call = block.get("tool_use_id")
    return ServerToolResult.made(
        kind,
        _raw_value(block),
        origin,
        tool=tool,
        call_id=call if isinstance(call, str) else "",
        output=repair_text("\n".join(output)),
        sources=sources,
        is_error=failed,
    )


def _cited(text: str, citations: Sequence[Any], origin: Origin | None) -> Text:
    """A text with its citations in the common form, each keeping its own JSON for `origin`."""
    return Text(text, tuple(_citation(c, origin) for c in citations))


def _citation(raw: Any, origin: Origin | None) -> Citation:
    # The location kinds name their fields apart (`char_location`,
    # `page_location`, `content_block_location`, `web_search_result_location`,
    # `search_result_location`); each is read for what it has.
    c = raw if isinstance(raw, Mapping) else {}

    def text(*keys: str) -> str:
        for key in keys:
            value = c.get(key)
            if isinstance(value, str):
                return value
        return ""

    def number(*keys: str) -> int | None:
        for key in keys:
            value = c.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return None

    index = number("document_index", "search_result_index")
    return Citation(
        url=text("url"),
        title=text("document_title", "title"),
        cited_text=text("cited_text"),
        start=number("start_char_index", "start_page_number", "start_block_index"),
        end=number("end_char_index", "end_page_number", "end_block_index"),
        source=text("source") or ("" if index is None else str(index)),
        raw=_raw_value(raw),
        origin=origin,
    )


def _native_citations(citations: Sequence[Citation]) -> list[Any]:
    """Citations kept for this origin, as the API gave them."""
    return [json.loads(c.raw) for c in citations if c.raw]


def _tool_input(raw: str) -> tuple[Any, bool]:
    """Streamed tool arguments parsed into an object, or the raw text and `True` (malformed)."""
    ok, value = load_json(raw)
    if not ok or not isinstance(value, dict):
        return raw, True
    return value, False


# The fields each modelled block holds; any other is named in the loss report.
# A native block is kept whole, so nothing of it needs naming.
_BLOCK_FIELDS: Final = {
    "text": frozenset({"type", "text", "citations"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
}
_MESSAGE_FIELDS: Final = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
    | {"stop_details"}
)
_HISTORY_FIELDS: Final = frozenset({"role", "content"})


def _response_blocks(
    raw: Any,
    where: str,
    origin: Origin | None,
    native: Origin | None = None,
    lost: list[Downgrade] | None = None,
    place: tuple[int, int] = (0, 0),
) -> list[Block]:
    """One block of an assistant message as the API returns it (a cited text is two).

    `origin` is stamped on signed blocks, `native` (by default the same) on
    provider-native ones. A modelled block's fields beyond those it holds
    are named in `lost`, at `place` (message index, block index).
    """
    native = native or origin
    block = _object(raw, where)
    kind = block.get("type")
    if lost is not None and isinstance(kind, str) and kind in _BLOCK_FIELDS:
        index, at = place
        unmodelled(block, _BLOCK_FIELDS[kind], where, lost, index=index, block=at)
    if kind == "text":
        citations = block.get("citations")
        if citations:
            _array(citations, f"{where}.citations")
            return [_cited(_str(block, "text", where), citations, native)]
        return [Text(_str(block, "text", where))]
    if kind == "thinking":
        signature = _opt_str(block, "signature", where)
        return [_thinking(signature, _str(block, "thinking", where), origin)]
    if kind == "redacted_thinking":
        return [RedactedThinking(_str(block, "data", where), origin)]
    if kind == "tool_use":
        value = block.get("input", _MISSING)
        if not isinstance(value, Mapping):
            raise _bad(f"{where}.input", "an object", value)
        if not carryable(value):
            raise ProviderError(f"Anthropic {where}.input: NaN or Infinity is not JSON")
        return [
            ToolUse(
                _str(block, "id", where),
                _str(block, "name", where),
                value if isinstance(value, dict) else dict(value),
            )
        ]
    if not isinstance(kind, str):
        raise _unknown_block(kind, where)
    if kind in _USER_KINDS:
        raise ProviderError(f"Anthropic {where}: block type {kind!r} may only ride a user message")
    return [_opaque(kind, block, native)]


_USER_KINDS: Final = frozenset({"image", "document", "tool_result"})


def _raw_value(value: Any) -> str:
    # Compact, in the order it came: what `json.loads` then msgspec give back.
    # A lone surrogate (a `\ud800` escape with no partner) cannot be written:
    # it becomes U+FFFD, as everywhere model JSON enters.
    try:
        return msgspec.json.encode(value).decode()
    except UnicodeEncodeError:
        return msgspec.json.encode(repair_surrogates(value)).decode()


def _unknown_block(kind: Any, where: str) -> ProviderError:
    if isinstance(kind, str):
        return ProviderError(f"Anthropic {where}: unknown block type {shorten(kind, 60)!r}")
    return _bad(f"{where}.type", "a block type string", kind)


def decode_response(data: Mapping[str, Any], *, endpoint: str = "") -> Response:
    """The `Response` for a non-streamed Messages API answer (the JSON body).

    An error body (`{"type": "error", ...}`) is raised as the `ProviderError`
    it describes; anything that is not a well-formed message is a
    `ProviderError` naming the field. Signed and native blocks are stamped
    with the origin this dialect, `endpoint` (the transport's host) and the
    response's `model` name. An answer with no block at all (a stop
    sequence hit first) reads as one empty `Text`, so the history stays
    valid for the next request.
    """
    body = _object(data, "response")
    kind = body.get("type")
    if kind == "error":
        raise _error(body, "error response")
    if kind is not None and kind != "message":
        raise ProviderError(
            f"Anthropic response: expected type 'message', got {shorten(repr(kind), 60)}"
        )
    role = body.get("role")
    if role is not None and role != "assistant":
        raise ProviderError(
            f"Anthropic response: expected role 'assistant', got {shorten(repr(role), 60)}"
        )
    content = _array(body.get("content", _MISSING), "response.content")
    model = _opt_str(body, "model", "response")
    origin = Origin(DIALECT, endpoint, model or "")
    lost: list[Downgrade] = []
    unmodelled(body, _MESSAGE_FIELDS, "response", lost)
    blocks: list[Block] = []
    for i, b in enumerate(content):
        blocks += _response_blocks(
            b, f"response.content[{i}]", origin, None, lost, (0, len(blocks))
        )
    usage = _usage(body.get("usage"), "response.usage", {})
    return Response(
        message=answer_message(blocks, "Anthropic response.content"),
        stop_reason=_stop_reason(body.get("stop_reason"), "response.stop_reason"),
        usage=Usage(**usage),
        model=model,
        refusal=_refusal(body.get("stop_details"), "response.stop_details"),
        raw_usage=_raw_usage(body.get("usage"), {}) or None,
        stop_sequence=_stop_sequence(body, "response"),
        downgrades=tuple(lost),
    )


def _stop_sequence(obj: Mapping[str, Any], where: str) -> str | None:
    """The stop sequence that ended the answer (`stop_sequence`), where the wire names one."""
    return _opt_str(obj, "stop_sequence", where) if obj.get("stop_sequence") else None


def _usage(value: Any, where: str, into: dict[str, int]) -> dict[str, int]:
    """Read the token counts present in `value` into `into` (nulls and absences keep theirs)."""
    if value is None:
        return into
    usage = _object(value, where)
    for name in _USAGE_FIELDS:
        count = usage.get(name)
        if count is not None:
            into[name] = _count(count, f"{where}.{name}")
    return into


def _raw_usage(value: Any, into: dict[str, Any]) -> dict[str, Any]:
    """The wire's usage object (checked by `_usage`) over what `into` held: the raw figures.

    A stream sends usage twice, in `message_start` and again, counted up, in
    `message_delta`; a later field replaces the earlier one unless it is
    null, so the result is the final usage as the wire reports it.
    """
    if isinstance(value, Mapping):
        into.update((k, v) for k, v in value.items() if v is not None or k not in into)
    return into


# -- importing histories --------------------------------------------------------


def decode_messages(
    data: Sequence[Mapping[str, Any]], *, system: Any = None
) -> tuple[str | None, Imported]:
    """Read an Anthropic-style history (and its system prompt) into blocks.

    So a conversation held in this format can be continued on any backend.
    `system` is a string or a list of text blocks (joined by a blank line);
    leading `role: "system"` messages join it too, and a later one is a
    `system` message where it stood. Blocks this model does not hold are
    `Opaque`, stamped as a file of this dialect (no endpoint, no model), so
    they go back to this wire and no other. What `encode_request`
    wrote reads back as the blocks it came from (see the module notes for
    what this wire cannot hold). The history is not validated here: one that
    stops on unanswered tool calls is a legitimate thing to import.
    """
    # A lone surrogate (a `\ud800` escape with no partner) is repaired where it enters.
    messages, system = repair_surrogates(data), repair_surrogates(system)
    parts: list[str] = []
    if system is not None:
        parts.extend(_system_parts(system, "system"))
    history = _array(messages, "messages")
    out: list[Message] = []
    lost: list[Downgrade] = []
    for index, raw in enumerate(history):
        where = f"messages[{index}]"
        message = _object(raw, where)
        unmodelled(message, _HISTORY_FIELDS, where, lost, index=len(out))
        role = message.get("role")
        if role == "system":
            texts = _system_parts(message.get("content", _MISSING), f"{where}.content")
            if out:
                # An instruction mid-conversation: held where it stood.
                out.append(Message("system", tuple(Text(t) for t in texts) or (Text(""),)))
            else:
                parts.extend(texts)
            continue
        if role not in ("user", "assistant"):
            raise ProviderError(
                f"Anthropic {where}.role: expected 'user' or 'assistant', got {_kind_or(role)}"
            )
        content = message.get("content", _MISSING)
        if isinstance(content, str):
            blocks: list[Block] = [Text(content)]
        else:
            items = _array(content, f"{where}.content")
            if role == "user":
                blocks = _user_blocks(items, f"{where}.content", lost, len(out))
            else:
                blocks = []
                for i, b in enumerate(items):
                    place = (len(out), len(blocks))
                    blocks += _history_blocks(b, f"{where}.content[{i}]", lost, place)
        out.append(Message(role, tuple(blocks)))
    return ("\n\n".join(parts) if parts else None), Imported(out, lost)


def _kind_or(value: Any) -> str:
    return shorten(repr(value), 60) if isinstance(value, str) else _kind(value)


def _system_parts(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    items = _array(value, where)
    texts: list[str] = []
    for i, raw in enumerate(items):
        block = _object(raw, f"{where}[{i}]")
        if block.get("type") != "text":
            raise _unknown_block(block.get("type"), f"{where}[{i}]")
        texts.append(_str(block, "text", f"{where}[{i}]"))
    return texts


_IMPORTED: Final = Origin(DIALECT, "", "")
"""The origin of what an imported file holds: this wire, no endpoint or model known."""


def _history_blocks(
    raw: Any, where: str, lost: list[Downgrade], place: tuple[int, int]
) -> list[Block]:
    """An assistant block of an imported history; a wrapped non-object input is unwrapped."""
    # A signature read from a file has no origin to name, like one written
    # before origins existed; a native block is this wire's.
    blocks = _response_blocks(raw, where, None, _IMPORTED, lost, place)
    block = blocks[0]
    if isinstance(block, ToolUse) and len(block.input) == 1:
        wrapped = block.input.get(INVALID_JSON_KEY)
        if isinstance(wrapped, str):
            return [ToolUse(block.id, block.name, wrapped)]
    return blocks


_USER_FIELDS: Final = {
    "text": frozenset({"type", "text", "cache_control"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "cache_control"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control"}),
}


def _user_blocks(
    items: Sequence[Any], where: str, lost: list[Downgrade] | None = None, index: int = 0
) -> list[Block]:
    blocks: list[Block] = []
    lifted: list[Block] = []
    after = 0
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        block = _object(raw, at)
        kind = block.get("type")
        if lost is not None and isinstance(kind, str) and kind in _USER_FIELDS:
            unmodelled(block, _USER_FIELDS[kind], at, lost, index=index, block=len(blocks))
        if kind == "text":
            blocks.append(Text(_str(block, "text", at)))
        elif kind == "image":
            blocks.append(_image(block.get("source", _MISSING), f"{at}.source"))
        elif kind == "document":
            blocks.append(_document_block(block, at))
        elif kind == "tool_result":
            given = block.get("content", "")
            text, inside, riders = _tool_result_content(given, f"{at}.content")
            is_error = block.get("is_error", False)
            if is_error is None:
                is_error = False
            if not isinstance(is_error, bool):
                raise _bad(f"{at}.is_error", "a boolean", is_error)
            # What the file wrote that the result would not say: an `is_error: false`
            # written out, its text as one text block.
            form = TEXT_BLOCKS if _one_text_block(given) else ""
            extra = {"is_error": False} if block.get("is_error") is False else None
            call_id = _str(block, "tool_use_id", at)
            spelling = spelling_of(_IMPORTED, extra, form)
            blocks.append(ToolResult(call_id, text, is_error, spelling=spelling))
            if inside:
                blocks.append(inside)
            lifted += riders
            after = len(blocks)
        elif isinstance(kind, str):
            blocks.append(_opaque(kind, block, _IMPORTED))
        else:
            raise _unknown_block(kind, at)
    if lifted:
        # A tool's images ride after the round's results, never inside one (SPEC §1).
        blocks[after:after] = lifted
    return blocks


def _one_text_block(content: Any) -> bool:
    """Whether a result's content is a list of one text block (`TEXT_BLOCKS`), and nothing else
    a result would write again in its place."""
    if not isinstance(content, list):
        return False
    texts = [p for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
    riders = [p for p in content if isinstance(p, Mapping) and p.get("type") in _LIFTED]
    return len(texts) == 1 and bool(texts[0].get("text")) and not riders


_LIFTED: Final = frozenset({"image", "document"})


def _tool_result_content(value: Any, where: str) -> tuple[str, Opaque | None, list[Block]]:
    """A result's text, its provider-native parts (`IN_RESULT`), and the images and documents
    that rode inside it, to lift."""
    if value is None:
        return "", None, []
    if isinstance(value, str):
        return value, None, []
    items = _array(value, where)
    texts: list[str] = []
    native: list[Mapping[str, Any]] = []
    riders: list[Block] = []
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        block = _object(raw, at)
        kind = block.get("type")
        if kind == "text":
            texts.append(_str(block, "text", at))
        elif kind == "image":
            riders.append(_image(block.get("source", _MISSING), f"{at}.source"))
        elif kind == "document":
            riders.append(_document_block(block, at))
        elif isinstance(kind, str):
            native.append(block)
        else:
            raise _unknown_block(kind, at)
    inside = None
    if native:
        lines = (_inside_line(part) for part in native)
        inside = Opaque(IN_RESULT, _raw_value(native), _IMPORTED, "\n".join(filter(None, lines)))
    return "\n".join(texts), inside, riders


def _inside_line(part: Mapping[str, Any]) -> str:
    # A tool_reference names a tool the search found; anything else, its type.
    kind = part.get("type")
    name = part.get("tool_name")
    if kind == "tool_reference" and isinstance(name, str):
        return f"[tool_reference: {shorten(name, 100)}]"
    return f"[{shorten(str(kind), 60)}]"


def _image(value: Any, where: str) -> Image:
    source = _object(value, where)
    kind = source.get("type")
    try:
        if kind == "url":
            return Image.from_url(_str(source, "url", where))
        if kind != "base64":
            raise ProviderError(
                f"Anthropic {where}: image source type {_kind_or(kind)} cannot be held "
                "(only base64 and url sources)"
            )
        return Image(_str(source, "media_type", where), _str(source, "data", where))
    except BlockError as exc:
        raise ProviderError(f"Anthropic {where}: {exc}") from None


def _document_block(block: Mapping[str, Any], where: str) -> Document:
    source = _object(block.get("source", _MISSING), f"{where}.source")
    kind = source.get("type")
    title = _opt_str(block, "title", where)
    at = f"{where}.source"
    try:
        if kind == "url":
            return Document("application/pdf", url=_str(source, "url", at), title=title)
        if kind == "text":
            data = _str(source, "data", at).encode()
            return Document.from_bytes("text/plain", data, title=title)
        if kind == "base64":
            return Document(_str(source, "media_type", at), _str(source, "data", at), title=title)
    except BlockError as exc:
        raise ProviderError(f"Anthropic {at}: {exc}") from None
    raise ProviderError(
        f"Anthropic {at}: document source type {_kind_or(kind)} cannot be held "
        "(base64, text and url sources only)"
    )


# -- streams ----------------------------------------------------------------------


class _Open:
    """A content block whose deltas are still arriving: parts joined once, at its stop."""

    __slots__ = ("base", "citations", "compacted", "kind", "native", "parts", "signature")

    def __init__(self, kind: str, base: Mapping[str, Any], first: str, native: bool) -> None:
        self.kind = kind
        self.base = base
        self.native = native  # a provider-native block, kept whole as an `Opaque`
        self.parts: list[str] = [first] if first else []
        self.signature: list[str] = []
        self.citations: list[Any] = []
        # A compaction block's fields as its `compaction_delta`s give them, by name.
        self.compacted: dict[str, list[str]] = {}


class StreamDecoder:
    """Reads the events of a streamed Messages call into the `Response` the plain call gives.

    Feed it the parsed JSON of each SSE `data:` line in order. Deltas are
    kept as lists and joined once per block, so a 10 MB arguments string
    costs linear time; every field is type-checked, so hostile input is a
    `ProviderError`, never a crash. `target.endpoint` is the transport's host,
    for the origin stamped on signed and native blocks (see `decode_response`).
    """

    def __init__(self, target: Target = DEFAULT_TARGET) -> None:
        self._endpoint = target.endpoint
        self._events = 0
        self._started = False
        self._stopped = False
        self._model: str | None = None
        self._stop_reason: Any = None
        self._refusal: str | None = None
        self._stop_sequence: str | None = None
        self._usage: dict[str, int] = {}
        self._raw_usage: dict[str, Any] = {}
        self._blocks: list[list[Block]] = []
        self._open: dict[int, _Open] = {}
        self._started_blocks = 0
        self._malformed = 0
        self._lost: list[Downgrade] = []

    def feed(self, event: Mapping[str, Any]) -> str:
        """Take one event; the text it made visible, or "" when it made none.

        Raises `ProviderError` for an `error` event or an event that breaks
        the protocol (out of order, wrong types, unknown block types).
        """
        where = f"stream event {self._events}"
        self._events += 1
        data = _object(event, where)
        kind = data.get("type")
        if not isinstance(kind, str):
            raise _bad(f"{where}.type", "an event type string", kind)
        where = f"{where} ({shorten(kind, 40)})"
        if kind == "ping":
            return ""
        if kind == "error":
            raise _error(data, "stream error")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            # An event this decoder does not know carries nothing it holds: named, not kept.
            reason = f"{where}: an event type carryall does not model; not kept"
            self._lost.append(Downgrade(0, "event", reason))
            return ""
        if self._stopped:
            raise ProviderError(f"Anthropic {where}: event after message_stop")
        if not self._started and kind != "message_start":
            raise ProviderError(f"Anthropic {where}: event before message_start")
        return handler(self, data, where)

    def response(self) -> Response:
        """The decoded `Response`; a `ProviderError` if the stream ended before `message_stop`."""
        if not self._stopped:
            state = "before message_start" if not self._started else "before message_stop"
            raise ProviderError(
                f"Anthropic stream ended {state} after {self._events} events: "
                "the response is truncated"
            )
        blocks = tuple(block for group in self._blocks for block in group)
        return Response(
            message=answer_message(blocks, "Anthropic stream"),
            stop_reason=_stop_reason(self._stop_reason, "stream stop_reason"),
            usage=Usage(**self._usage),
            model=self._model,
            refusal=self._refusal,
            raw_usage=self._raw_usage or None,
            malformed_tool_args=self._malformed,
            stop_sequence=self._stop_sequence,
            downgrades=tuple(self._lost),
        )

    # -- one method per event type --------------------------------------------

    def _message_start(self, data: Mapping[str, Any], where: str) -> str:
        if self._started:
            raise ProviderError(f"Anthropic {where}: a second message_start")
        self._started = True
        message = _object(data.get("message", _MISSING), f"{where}.message")
        self._model = _opt_str(message, "model", f"{where}.message")
        unmodelled(message, _MESSAGE_FIELDS, f"{where}.message", self._lost)
        content = message.get("content")
        if content is not None:
            items = _array(content, f"{where}.message.content")
            origin = self._origin()
            self._blocks = [
                _response_blocks(
                    b, f"{where}.message.content[{i}]", origin, None, self._lost, (0, i)
                )
                for i, b in enumerate(items)
            ]
            self._started_blocks = len(self._blocks)
        self._stop_reason = message.get("stop_reason")
        _usage(message.get("usage"), f"{where}.message.usage", self._usage)
        _raw_usage(message.get("usage"), self._raw_usage)
        return ""

    def _block_start(self, data: Mapping[str, Any], where: str) -> str:
        index = self._index(data, where)
        if index != self._started_blocks:
            raise ProviderError(
                f"Anthropic {where}: block {index} started, expected block {self._started_blocks}"
            )
        block = _object(data.get("content_block", _MISSING), f"{where}.content_block")
        at = f"{where}.content_block"
        kind = block.get("type")
        first = ""
        native = False
        if kind == "text":
            first = _str(block, "text", at)
        elif kind == "thinking":
            first = _opt_str(block, "thinking", at) or ""
        elif kind == "redacted_thinking":
            _str(block, "data", at)
        elif kind == "tool_use":
            _str(block, "id", at)
            _str(block, "name", at)
            value = block.get("input", {})
            if not isinstance(value, Mapping):
                raise _bad(f"{at}.input", "an object", value)
        elif isinstance(kind, str):
            native = True
        else:
            raise _unknown_block(kind, at)
        if not native:
            unmodelled(block, _BLOCK_FIELDS[kind], at, self._lost, block=index)
        opened = _Open(kind, block, first, native)
        if kind == "thinking":
            signature = _opt_str(block, "signature", at)
            if signature:
                opened.signature.append(signature)
        elif kind == "text" and block.get("citations"):
            opened.citations += _array(block["citations"], f"{at}.citations")
        self._open[index] = opened
        self._started_blocks += 1
        # Blocks land at their index, whatever order they stop in.
        self._blocks.append([])
        return first if kind == "text" else ""

    def _block_delta(self, data: Mapping[str, Any], where: str) -> str:
        opened = self._opened(data, where)
        delta = _object(data.get("delta", _MISSING), f"{where}.delta")
        kind = delta.get("type")
        expected = _DELTA_BLOCKS.get(kind) if isinstance(kind, str) else None
        if expected is None:
            raise ProviderError(f"Anthropic {where}: unknown delta type {_kind_or(kind)}")
        if opened.kind != expected and not (
            opened.native and kind in ("input_json_delta", "compaction_delta")
        ):
            raise ProviderError(f"Anthropic {where}: a {kind} for a {opened.kind} block")
        if kind == "text_delta":
            text = _str(delta, "text", f"{where}.delta")
            opened.parts.append(text)
            return text
        if kind == "thinking_delta":
            opened.parts.append(_str(delta, "thinking", f"{where}.delta"))
        elif kind == "signature_delta":
            opened.signature.append(_str(delta, "signature", f"{where}.delta"))
        elif kind == "input_json_delta":
            opened.parts.append(_str(delta, "partial_json", f"{where}.delta"))
        elif kind == "compaction_delta":
            self._compacted(opened, delta, f"{where}.delta")
        else:
            # citations_delta: where the text came from, kept beside it (`CITATIONS`).
            opened.citations.append(
                _object(delta.get("citation", _MISSING), f"{where}.delta.citation")
            )
        return ""

    def _block_stop(self, data: Mapping[str, Any], where: str) -> str:
        index = self._index(data, where)
        opened = self._opened(data, where)
        del self._open[index]
        base = opened.base
        origin = self._origin()
        blocks: list[Block]
        if opened.native:
            whole = dict(base)
            # A server tool's input given whole at its start and streamed as
            # one empty piece is the input it started with (`{}`), as unstreamed.
            raw = "".join(opened.parts)
            if raw:
                value, malformed = _tool_input(raw)
                self._malformed += malformed
                whole["input"] = value
            for name, pieces in opened.compacted.items():
                whole[name] = (whole.get(name) or "") + "".join(pieces)
            blocks = [_opaque(opened.kind, whole, origin)]
        elif opened.kind == "text":
            text = "".join(opened.parts)
            blocks = [_cited(text, opened.citations, origin) if opened.citations else Text(text)]
        elif opened.kind == "thinking":
            blocks = [_thinking("".join(opened.signature), "".join(opened.parts), origin)]
        elif opened.kind == "redacted_thinking":
            blocks = [RedactedThinking(base["data"], origin)]
        else:
            raw = "".join(opened.parts)
            value = base.get("input", {})
            if raw:
                value, malformed = _tool_input(raw)
                self._malformed += malformed
            blocks = [ToolUse(base["id"], base["name"], value)]
        self._blocks[index] = blocks
        return ""

    def _origin(self) -> Origin:
        return Origin(DIALECT, self._endpoint, self._model or "")

    @staticmethod
    def _compacted(opened: _Open, delta: Mapping[str, Any], where: str) -> None:
        """Take one `compaction_delta`: its fields are pieces of the block's same fields.

        The summary (`content`) and the opaque `encrypted_content` the block
        must go back with arrive this way; a null field adds nothing. Every
        field is kept, so the block goes back to its origin as the whole
        answer holds it, whatever the delta newly carries.
        """
        for name, piece in delta.items():
            if name == "type" or piece is None:
                continue
            if not isinstance(piece, str):
                raise _bad(f"{where}.{shorten(str(name), 40)}", "a string or null", piece)
            started = opened.base.get(name)
            if started is not None and not isinstance(started, str):
                raise ProviderError(
                    f"Anthropic {where}: a piece of {shorten(str(name), 40)!r}, which the "
                    f"block started as {_kind(started)}, not text"
                )
            opened.compacted.setdefault(name, []).append(piece)

    def _message_delta(self, data: Mapping[str, Any], where: str) -> str:
        self._require_closed(where)
        delta = _object(data.get("delta", _MISSING), f"{where}.delta")
        if "stop_reason" in delta:
            reason = delta["stop_reason"]
            _stop_reason(reason, f"{where}.delta.stop_reason")
            if reason is not None:
                self._stop_reason = reason
        self._stop_sequence = _stop_sequence(delta, f"{where}.delta") or self._stop_sequence
        refusal = _refusal(delta.get("stop_details"), f"{where}.delta.stop_details")
        if refusal is not None:
            self._refusal = refusal
        _usage(data.get("usage"), f"{where}.usage", self._usage)
        _raw_usage(data.get("usage"), self._raw_usage)
        return ""

    def _message_stop(self, data: Mapping[str, Any], where: str) -> str:
        self._require_closed(where)
        self._stopped = True
        return ""

    # -- checks -------------------------------------------------------------------

    def _index(self, data: Mapping[str, Any], where: str) -> int:
        index = data.get("index", _MISSING)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise _bad(f"{where}.index", "a block index", index)
        return index

    def _opened(self, data: Mapping[str, Any], where: str) -> _Open:
        index = self._index(data, where)
        opened = self._open.get(index)
        if opened is None:
            state = "already stopped" if index < self._started_blocks else "not started"
            raise ProviderError(f"Anthropic {where}: block {index} is {state}")
        return opened

    def _require_closed(self, where: str) -> None:
        if self._open:
            pending = ", ".join(str(i) for i in sorted(self._open))
            raise ProviderError(f"Anthropic {where}: block(s) {pending} never stopped")


_HANDLERS: Final = {
    "message_start": StreamDecoder._message_start,
    "content_block_start": StreamDecoder._block_start,
    "content_block_delta": StreamDecoder._block_delta,
    "content_block_stop": StreamDecoder._block_stop,
    "message_delta": StreamDecoder._message_delta,
    "message_stop": StreamDecoder._message_stop,
}

_DELTA_BLOCKS: Final = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
    "compaction_delta": "compaction",
}


def decode_stream(events: Iterable[Mapping[str, Any]], *, endpoint: str = "") -> Response:
    """The `Response` for a whole stream of events (see `StreamDecoder`)."""
    decoder = StreamDecoder(Target(endpoint=endpoint))
    for event in events:
        decoder.feed(event)
    return decoder.response()

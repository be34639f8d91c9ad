"""AWS Bedrock Converse: the `Converse` and `ConverseStream` wire, on the same blocks.

`encode_request` turns a `Request` into the JSON body of
`POST /model/{modelId}/converse` (and `/converse-stream`, the same body; the
model is in the path, not the body); `decode_response`, `StreamDecoder` and
`decode_stream` turn its answers back into a `Response`; `decode_messages`
reads a Converse `messages` array someone already holds into blocks.

The body is the JSON the service reads. Its blob fields (image, document and
video bytes, `redactedContent`) are base64 text there, which is how
botocore's own REST-JSON serializer writes the `bytes` boto3 is handed: the
transport (`carryall.transport.bedrock`) turns each blob back into bytes by
the service model's shapes before calling the SDK, and an SDK answer's bytes
into base64 before decoding, so one decoder reads Bedrock whichever way it
arrived and a recorded HTTP exchange reads as a live one.

The wire:

- The system prompt is `system` (one text block); the history is
  `messages`, each a `role` and its `content` blocks. `inferenceConfig.
  maxTokens` is the token limit.
- A user message's tool results go first, each a `toolResult` block naming
  its call by `toolUseId`, the result text as its one `text` content block,
  `status: error` for an error result. The message's text, images
  (`image.source.bytes`) and documents (`document`, PDF as `pdf`, plain
  text as `txt`, with a `name` the service accepts) follow.
- Tool-made images ride that user message after the results, never inside
  a `toolResult`, although Converse could hold them there: Chat Completions
  and llama-server cannot, and a history has to read the same on every wire
  it may be continued on (SPEC §1).
- An assistant message is its blocks in order: text as `text`, calls as
  `toolUse` (an input that is not an object rides under `INVALID_JSON`, as
  on the Messages API, since the models behind Converse take objects only),
  signed thinking as `reasoningContent.reasoningText` with its signature and
  redacted thinking as `reasoningContent.redactedContent`, both only to the
  origin (this dialect, the endpoint's host, the model id) that made them
  (`WIRE`, `prepare`): a signature means nothing to another model.
  An assistant turn with nothing this wire carries is left off and the user
  turns around it joined, since Converse insists that roles alternate.
- Images and documents by URL are never fetched here: Converse takes bytes
  (or S3 locations) only, so each is its placeholder line, reported.
- Call ids must match `[a-zA-Z0-9_.:-]{1,64}` on this wire: an id
  from another wire that does not is rewritten the same way for the call and
  its result (`wire_id`), so the pair still matches.
- Tools are `toolConfig.tools[].toolSpec` with `inputSchema.json`;
  `tool_choice` `auto` is `{"auto": {}}`, `required` `{"any": {}}`. Converse
  has no "none": the tools still go (a history holding calls needs them)
  with no choice, and a call made anyway is answered by the loop as usual.
  `cache` `auto` puts a `cachePoint` after the system prompt, the tools and
  the history's moving breakpoints, on the models that cache (Claude; Nova,
  tools aside), as `carryall.providers.caching` places them.
  Thinking asked for goes, on Anthropic models (`anthropic.` in the model
  id), as `additionalModelRequestFields.thinking` with a budget, as on the
  Messages API; other models take no such field.

Decoding: `output.message.content` in order. `text` is `Text`,
`reasoningContent.reasoningText` `Thinking` (signed, and stamped with its
origin, when it has a signature), `redactedContent` `RedactedThinking`, a
`toolUse` a `ToolUse`, `citationsContent` a `Text` with its citations
(sent back as a cited block to its origin), a server tool's `toolUse` and
`toolResult` a `ServerToolCall` and `ServerToolResult`; any other block
(guard content, anything newer) is kept whole as an `Opaque` of its key,
echoed only to its origin, with its text as the honest line elsewhere. Stop reasons:
`end_turn` and `stop_sequence` are `end_turn`, `tool_use` (or any answer
holding calls) `tool_use`, `max_tokens` and `model_context_window_exceeded`
`max_tokens`, `guardrail_intervened` and `content_filtered` `refusal`,
anything else `other`. Usage: `inputTokens` is `input_tokens`,
`outputTokens` `output_tokens`, `cacheReadInputTokens` and
`cacheWriteInputTokens` the cache read and creation figures. A Converse
answer names no model: the decoders take the model id the request went to.

Every parser here answers hostile input with a `ProviderError` naming the
place (or, for `decode_messages`, a `BlockError`); unknown fields are
skipped, so new server features do not break old clients.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from carryall._json import (
    KeptItems,
    Payload,
    WrittenAhead,
    body_bytes,
    load_json,
    repair_surrogates,
)
from carryall._text import shorten
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
    document_placeholder,
    image_placeholder,
)
from carryall.errors import BlockError, HistoryError, ProviderError, wire_error
from carryall.providers import caching, hosted, structured
from carryall.providers._common import (
    Wire,
    _shown,
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
from carryall.providers._wire import BASE64 as _BASE64
from carryall.providers._wire import INVALID_JSON_KEY
from carryall.providers._wire import count as _count
from carryall.providers._wire import mapping as _mapping
from carryall.providers._wire import results_first as _results_first
from carryall.providers._wire import thinking_budget as _thinking_budget
from carryall.providers.options import NO_OPTIONS, left_off, merge_extra, tier_left_off

__all__ = [
    "DIALECT",
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
    "wire_id",
]

DIALECT: Final = "bedrock"
"""The name this wire goes by in an origin, a backend and the switch matrix."""

WIRE: Final = Wire(DIALECT, signed=True, own_thinking=True, pdf=True, text_documents=True)
"""What Converse takes natively: its own signed and redacted reasoning, PDFs and text files.

A `reasoningText.signature` (and `redactedContent`) means something to the
endpoint and model that made it only; `prepare` leaves every other one off,
and unsigned thinking with it, and reports each.
"""

_IMPORTED: Final = Origin(DIALECT, "", "")
"""The origin of what an imported `messages` array holds: this wire, no endpoint or model."""

_IMAGE_FORMATS: Final = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_MEDIA_TYPES: Final = {v: k for k, v in _IMAGE_FORMATS.items()}
_DOCUMENT_FORMATS: Final = {"application/pdf": "pdf", "text/plain": "txt"}
_DOCUMENT_TYPES: Final = {v: k for k, v in _DOCUMENT_FORMATS.items()}
_TOOL_CHOICES: Final[dict[str, dict[str, Any]]] = {"auto": {"auto": {}}, "required": {"any": {}}}
_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "guardrail_intervened": "refusal",
    "content_filtered": "refusal",
}
_ID: Final = re.compile(r"[a-zA-Z0-9_.:-]{1,64}")
_NOT_ID: Final = re.compile(r"[^a-zA-Z0-9_.:-]")
_NAME_BAD: Final = re.compile(r"[^a-zA-Z0-9\s()\[\]-]+")
_SPACES: Final = re.compile(r"\s+")
_NO_BYTES: Final = "an image of no bytes: this wire refuses it, so it goes as its placeholder line"
_DROPPED_TURN: Final = (
    "an assistant turn with nothing this wire carries: left off, the user turns around it joined"
)


# -- the codec contract ------------------------------------------------------
# The same names with the same signatures in every wire module
# (`encode_body`, `encode_bytes`, `decode`, `StreamDecoder`,
# `decode_messages`), each taking what it needs of one `Target`.


def encode_body(request: Request, target: Target) -> Encoded:
    """The Converse body for `request`, and every downgrade made to write it (`encode`)."""
    return encode(request, target.caps)


def encode_bytes(
    request: Request, target: Target, *, stream: bool = False, kept: KeptItems | None = None
) -> Sent:
    """`encode_body`'s body as the bytes sent, and its report.

    `/converse-stream` takes the same body, so `stream` changes nothing;
    this wire keeps nothing between requests, so `kept` is not read.
    """
    encoded = _encode(request, target.caps, sent=True)
    return Sent(body_bytes(encoded.body), encoded.downgrades)


def decode(data: Mapping[str, Any], target: Target) -> Response:
    """A Converse answer as a `Response`, its origins `target`'s endpoint and model.

    Converse names no model in its answer: `target.model` is the id the
    request went to (`decode_response`).
    """
    return decode_response(data, endpoint=target.endpoint, model=target.model)


# -- encoding ---------------------------------------------------------------


def encode_request(request: Request, caps: Capabilities) -> dict[str, Any]:
    """The Converse body for a request (`encode`'s body)."""
    return encode(request, caps).body


def encode(request: Request, caps: Capabilities) -> Encoded:
    """The Converse body for a request, and every downgrade made to write it.

    The history is validated, image-limited, blinded and fitted to this wire
    first (`prepare` with `WIRE`): signatures go back only to their origin.
    """
    return _encode(request, caps, sent=False)


def _encode(request: Request, caps: Capabilities, *, sent: bool) -> Encoded:
    # `sent`: the body is only for `body_bytes`, so it is written ahead as it is built.
    prepared = prepare(request, caps, WIRE)
    downgrades = list(prepared.downgrades)
    messages: list[Any] = []
    ahead = WrittenAhead(payload_messages(prepared)) if sent else None
    marks = caching.bedrock_breakpoints(request, prepared.messages, prepared.irregular)
    for index, message in enumerate(prepared.messages):
        if ahead is not None:
            ahead.step(messages, index)
        if message.role == "user":
            content = _user_content(message, index, downgrades, sent)
            if index in marks.messages:
                caching.mark_bedrock(content)
            if messages and messages[-1]["role"] == "user":
                # The turn between was left off: one user turn, its results still first.
                messages[-1]["content"].extend(content)
            else:
                messages.append({"role": "user", "content": content})
            continue
        content = _assistant_content(message, index)
        if index in marks.messages:
            caching.mark_bedrock(content)
        if content:
            messages.append({"role": "assistant", "content": content})
        else:
            downgrades.append(Downgrade(index, "assistant", _DROPPED_TURN))
    if not messages:
        raise HistoryError(0, "the request has no messages: nothing to answer")
    body: dict[str, Any] = {"messages": messages}
    if request.system:
        system: list[dict[str, Any]] = [{"text": request.system}]
        if marks.system:
            system.append({"cachePoint": {"type": "default"}})
        body["system"] = system
    hosted.refuse_all(request.hosted_tools, "bedrock")
    body["inferenceConfig"] = {"maxTokens": request.max_tokens}
    if request.tools:
        tools: list[dict[str, Any]] = []
        for spec in request.tools:
            tool: dict[str, Any] = {"name": spec.name, "inputSchema": {"json": spec.input_schema}}
            if spec.description:
                tool["description"] = spec.description  # an empty one is refused
            tools.append({"toolSpec": tool})
        if marks.tools:
            tools.append({"cachePoint": {"type": "default"}})
        config: dict[str, Any] = {"tools": tools}
        if request.tool_choice is not None and request.tool_choice != "none":
            choice = _TOOL_CHOICES.get(request.tool_choice)
            if choice is None:
                raise ProviderError(
                    f"tool_choice {request.tool_choice!r} is not one of auto, none, required"
                )
            config["toolChoice"] = dict(choice)
        body["toolConfig"] = config
    if request.thinking and caps.thinking and "anthropic." in request.model:
        body["additionalModelRequestFields"] = {
            "thinking": {"type": "enabled", "budget_tokens": _thinking_budget(request)}
        }
    structured.add_bedrock(body, request)
    if len(downgrades) != len(prepared.downgrades):
        downgrades.sort(key=lambda d: d.index)
    placed = _options(request, caps, body)
    return Encoded(body, (*placed, *downgrades) if placed else tuple(downgrades))


_SERVICE_TIERS: Final = ("default", "priority", "flex", "reserved")


def _options(request: Request, caps: Capabilities, body: dict[str, Any]) -> list[Downgrade]:
    """Write `request.options` and strict tools as Converse names them; the rest named.

    `inferenceConfig` has `temperature`, `topP` and `stopSequences`;
    `serviceTier` and each tool's `strict` are Converse's own. `top_k` goes
    in `additionalModelRequestFields` to Anthropic models, which read it
    there, and with stop sequences an Anthropic model is asked to say which
    one ended the answer (`additionalModelResponseFieldPaths`). Converse and
    the model families behind it have no seed, penalties, `store`, parallel
    call switch or effort in common, so those are left off and named, as is
    thinking on a model that is not Anthropic's.
    """
    anthropic = "anthropic." in request.model
    lost: list[Downgrade] = []
    for spec, tool in zip(request.tools, body.get("toolConfig", {}).get("tools", ()), strict=False):
        if spec.strict:
            tool["toolSpec"]["strict"] = True
    if request.thinking and caps.thinking and not anthropic:
        lost.append(left_off("thinking", DIALECT, "only Anthropic models take it here"))
    if request.effort is not None:
        lost.append(left_off("effort", DIALECT))
    options = request.options
    if options == NO_OPTIONS:
        return lost
    config = body["inferenceConfig"]
    for name, key in (("temperature", "temperature"), ("top_p", "topP")):
        value = getattr(options, name)
        if value is not None:
            config[key] = value
    if options.stop:
        config["stopSequences"] = list(options.stop)
        if anthropic:
            body["additionalModelResponseFieldPaths"] = ["/stop_sequence"]
    if options.top_k is not None:
        if anthropic:
            body.setdefault("additionalModelRequestFields", {})["top_k"] = options.top_k
        else:
            lost.append(left_off("top_k", DIALECT, "only Anthropic models take it here"))
    for name in ("seed", "presence_penalty", "frequency_penalty", "store"):
        if getattr(options, name) is not None:
            lost.append(left_off(name, DIALECT))
    if options.parallel_tool_calls is not None and request.tools:
        lost.append(left_off("parallel_tool_calls", DIALECT))
    if options.service_tier is not None:
        if options.service_tier in _SERVICE_TIERS:
            body["serviceTier"] = {"type": options.service_tier}
        else:
            lost.append(tier_left_off(options.service_tier, DIALECT, _SERVICE_TIERS))
    return lost + merge_extra(body, request, DIALECT)


def encode_request_bytes(request: Request, caps: Capabilities, *, stream: bool = False) -> bytes:
    """`encode_request`'s body as bytes: `/converse-stream` takes the same body."""
    return body_bytes(_encode(request, caps, sent=True).body)


@functools.lru_cache(maxsize=8192)
def _wire_id(value: str) -> str:
    # The same ids come back on every request of a session: each is checked once.
    return wire_id(value)


def wire_id(value: str) -> str:
    """A call id as this wire takes it: itself when it fits `[a-zA-Z0-9_.:-]{1,64}`.

    Any other is rewritten, the same way every time, so a call and the result
    that answers it still match: the characters the wire refuses become `_`,
    and a hash of the whole id keeps two ids that differ only there apart.
    """
    if _ID.fullmatch(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{_NOT_ID.sub('_', value)[:53]}_{digest}"


def _user_content(
    message: Message, index: int, downgrades: list[Downgrade], sent: bool
) -> list[dict[str, Any]]:
    # Exact types, not isinstance: this runs for every block of every request.
    # A payload going to `body_bytes` is a `Payload`; `str` of a str is itself.
    payload: Callable[[str], Any] = Payload if sent else str
    content: list[dict[str, Any]] = []
    append = content.append
    for block in _results_first(message):
        if type(block) is ToolResult:
            wire: dict[str, Any] = {
                "toolUseId": _wire_id(block.tool_use_id),
                # An empty text block is refused; an empty result is no block.
                "content": [{"text": block.content}] if block.content else [],
            }
            if isinstance(block.structured, dict) and not block.is_error:
                # Converse takes a result as a JSON document: the value, not its text.
                wire["content"] = [{"json": block.structured}]
            if block.is_error:
                wire["status"] = "error"
            if block.spelling is not None:  # `prepare` kept it: this wire's own
                wire = spelled(wire, block.spelling)
            append({"toolResult": wire})
        elif type(block) is Text:
            if block.text:
                append({"text": block.text})
        elif type(block) is Image:
            if not block.data:
                # Converse refuses an image of no bytes: what it was is said instead.
                downgrades.append(Downgrade(index, "image", _NO_BYTES))
                append({"text": block.placeholder()})
                continue
            fmt = _IMAGE_FORMATS[block.media_type]
            append({"image": {"format": fmt, "source": {"bytes": payload(block.data)}}})
        elif type(block) is Document:
            append({"document": _document(block, payload)})
        elif isinstance(block, Opaque):
            # `prepare` kept it: this origin's own block, as it came.
            if block.raw:
                append(json.loads(block.raw))
        else:
            raise HistoryError(index, f"a {type(block).__name__} block has no place in a user turn")
    return content or [{"text": ""}]


def _document(block: Document, payload: Callable[[str], Any]) -> dict[str, Any]:
    """A document as Converse takes one: its bytes, a format and a name the service accepts."""
    return {
        "format": _DOCUMENT_FORMATS[block.media_type],
        "name": document_name(block.title or block.source or "document"),
        "source": {"bytes": payload(block.data)},
    }


def document_name(name: str) -> str:
    """`name` as Converse takes a document's name: letters, digits, spaces, `-()[]`, one space.

    The service refuses any other character (a file's `.`, most of all) and
    runs of whitespace; what is left is cut to 200 characters.
    """
    cleaned = _SPACES.sub(" ", _NAME_BAD.sub("-", name)).strip()
    return cleaned[:200].strip() or "document"


def _assistant_content(message: Message, index: int) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    append = content.append
    for block in message.content:
        if type(block) is Text:
            text = block.text
            if block.citations and all(c.raw for c in block.citations):
                # `prepare` kept them: this origin's own, as a cited block again.
                citations = [json.loads(c.raw) for c in block.citations]
                cited = {"content": [{"text": text}], "citations": citations}
                append({"citationsContent": cited})
            elif text and not text.isspace():
                append({"text": text})
        elif type(block) is ToolUse:
            value = block.input if type(block.input) is dict else _input(block)
            call = {"toolUseId": _wire_id(block.id), "name": block.name, "input": value}
            append({"toolUse": call})
        elif type(block) is Thinking:
            # `prepare` kept it: this origin's own reasoning, signed or not.
            reasoning: dict[str, Any] = {"text": block.text}
            if block.signature:
                reasoning["signature"] = block.signature
            append({"reasoningContent": {"reasoningText": reasoning}})
        elif type(block) is RedactedThinking:
            append({"reasoningContent": {"redactedContent": block.data}})
        elif isinstance(block, Opaque) and block.raw:
            append(json.loads(block.raw))
    return content


def _input(block: ToolUse) -> Any:
    value = block.input
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        return {INVALID_JSON_KEY: value}
    return {INVALID_JSON_KEY: json.dumps(value, ensure_ascii=False)}


# -- decoding responses -----------------------------------------------------


def _blob(value: Any, where: str, error: type[Exception]) -> str:
    """A blob field as base64 text: the JSON form, or boto3's bytes encoded."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if not isinstance(value, str):
        raise error(f"{where} must be base64 text or bytes, got {_shown(value)}")
    return value


def _str(obj: Mapping[str, Any], key: str, where: str, error: type[Exception]) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise error(f"{where}.{key} must be a string, got {_shown(value)}")
    return value


def _object(value: Any, where: str, error: type[Exception]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise error(f"{where} must be an object, got {_shown(value)}")
    return value


def _raw(block: Mapping[str, Any]) -> str:
    """A native block's JSON text, bytes (boto3's blobs) as base64."""
    return json.dumps(block, ensure_ascii=False, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


def _opaque_text(kind: str, body: Any) -> str:
    """The honest line a native block gets on every other wire and in every reader."""
    if kind == "citationsContent" and isinstance(body, Mapping):
        parts = body.get("content")
        if isinstance(parts, list):
            texts = (p.get("text") for p in parts if isinstance(p, Mapping))
            return "".join(t for t in texts if isinstance(t, str))
    if kind == "toolUse" and isinstance(body, Mapping):
        return f"[server tool call: {shorten(str(body.get('name')), 60)}]"
    if kind == "toolResult":
        return "[server tool result]"
    if kind == "image" and isinstance(body, Mapping):
        return image_placeholder(f"image/{body.get('format')}")
    if kind == "document" and isinstance(body, Mapping):
        name = body.get("name")
        return document_placeholder(
            _DOCUMENT_TYPES.get(str(body.get("format")), "application/pdf"),
            name if isinstance(name, str) else None,
        )
    return ""


def _answer_blocks(
    raw: Any, where: str, origin: Origin, error: type[Exception]
) -> tuple[list[Block], int]:
    """One assistant content block as blocks, and 1 when it is a call whose input is not JSON."""
    block = _object(raw, where, error)
    if "text" in block:
        text = _str(block, "text", where, error)
        return ([Text(text)] if text else []), 0
    if "reasoningContent" in block:
        reasoning = _object(block["reasoningContent"], f"{where}.reasoningContent", error)
        at = f"{where}.reasoningContent"
        if "redactedContent" in reasoning:
            data = _blob(reasoning["redactedContent"], f"{at}.redactedContent", error)
            return [RedactedThinking(data, origin)], 0
        text_block = _object(reasoning.get("reasoningText"), f"{at}.reasoningText", error)
        text = text_block.get("text", "")
        signature = text_block.get("signature")
        if not isinstance(text, str):
            raise error(f"{at}.reasoningText.text must be a string, got {_shown(text)}")
        if signature is not None and not isinstance(signature, str):
            raise error(f"{at}.reasoningText.signature must be a string, got {_shown(signature)}")
        if signature:
            return [Thinking(text, signature, origin)], 0
        # Unsigned (gpt-oss and the other open models): stamped when a live
        # answer made it, so it goes back to that model alone; a file's names
        # no model, and no Claude model takes unsigned reasoning.
        live = origin if origin.model or origin.endpoint else None
        return ([Thinking(text, origin=live)] if text else []), 0
    call = block.get("toolUse")
    if isinstance(call, Mapping) and call.get("type") in (None, "tool_use"):
        at = f"{where}.toolUse"
        call_id = _str(call, "toolUseId", at, error)
        name = _str(call, "name", at, error)
        if not call_id or not name:
            raise error(f"{at}: a call needs a toolUseId and a name")
        value = call.get("input", {})
        if isinstance(value, str):
            # A stream's input arrives as JSON text; a whole answer's as JSON.
            ok, parsed = load_json(value) if value.strip() else (True, {})
            if not ok:
                return [ToolUse(call_id, name, value)], 1
            value = parsed
        return [ToolUse(call_id, name, value)], 0
    if len(block) != 1:
        raise error(f"{where}: a content block has exactly one kind, got {sorted(block)}")
    (kind,) = block
    if not isinstance(kind, str):
        raise error(f"{where}: a content block kind must be a string")
    if kind == "citationsContent" and isinstance(block[kind], Mapping):
        cited = _cited(block[kind], origin)
        if cited is not None:
            return [cited], 0
    if kind in ("toolUse", "toolResult") and isinstance(block[kind], Mapping):
        return [_server_tool(kind, block, origin)], 0
    return [Opaque(kind, _raw(block), origin, _opaque_text(kind, block[kind]))], 0


_SERVER_TOOLS: Final = {
    "nova_grounding": "web_search",
    "nova_code_interpreter": "code_execution",
}
"""The common kind of each Bedrock server tool (Nova's) by its name; any other keeps its own."""


def _server_tool(kind: str, block: Mapping[str, Any], origin: Origin) -> Opaque:
    """A server tool's call (`toolUse` of type `server_tool_use`) or its result, in the common
    form: the result's type names its tool (`nova_code_interpreter_result`)."""
    body: Mapping[str, Any] = block[kind]
    ident = body.get("toolUseId")
    ident = ident if isinstance(ident, str) else ""
    if kind == "toolUse":
        name = body.get("name")
        name = name if isinstance(name, str) else ""
        tool = _SERVER_TOOLS.get(name, name or "server_tool")
        given = body.get("input")
        return ServerToolCall.made(
            kind, _raw(block), origin, tool=tool, id=ident, name=name, input=given
        )
    named = body.get("type")
    stem = named.removesuffix("_result") if isinstance(named, str) else ""
    output: list[str] = []
    for part in _items(body.get("content")):
        if isinstance(part, Mapping):
            if isinstance(part.get("text"), str):
                output.append(part["text"])
            elif isinstance(part.get("json"), Mapping):
                value = part["json"]
                shown = [value.get(k) for k in ("stdOut", "stdErr", "output")]
                found = [s for s in shown if isinstance(s, str) and s]
                output.extend(found or [json.dumps(value, ensure_ascii=False)])
    return ServerToolResult.made(
        kind,
        _raw(block),
        origin,
        tool=_SERVER_TOOLS.get(stem, stem or "server_tool"),
        call_id=ident,
        output="\n".join(output),
        is_error=body.get("status") == "error",
    )


def _cited(content: Mapping[str, Any], origin: Origin) -> Text | None:
    """A `citationsContent` block as its text and its citations; None when it is not one.

    Its generated text is the answer's; each citation names its document
    (`title`, `source`), the passages quoted (`sourceContent`) and where in
    the document they sit (`location`, one key per kind of location).
    """
    parts = content.get("content")
    if not isinstance(parts, list) or not all(
        isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in parts
    ):
        return None
    citations: list[Citation] = []
    for raw in _items(content.get("citations")):
        if not isinstance(raw, Mapping):
            return None
        quoted = [q.get("text") for q in _items(raw.get("sourceContent")) if isinstance(q, Mapping)]
        location = raw.get("location")
        span: Mapping[str, Any] = {}
        if isinstance(location, Mapping) and len(location) == 1:
            (inner,) = location.values()
            span = inner if isinstance(inner, Mapping) else {}
        start, end = span.get("start"), span.get("end")
        url = span.get("url")
        title, source = raw.get("title"), raw.get("source")
        citations.append(
            Citation(
                url=url if isinstance(url, str) else "",
                title=title if isinstance(title, str) else "",
                cited_text="\n".join(q for q in quoted if isinstance(q, str)),
                start=start if type(start) is int else None,
                end=end if type(end) is int else None,
                source=source if isinstance(source, str) else "",
                raw=_raw(raw),
                origin=origin,
            )
        )
    return Text("".join(p["text"] for p in parts), tuple(citations))


def _stop_reason(stop: Any, calls: bool) -> StopReason:
    reason = _STOP_REASONS.get(stop, "other") if isinstance(stop, str) else "other"
    if calls and reason in ("end_turn", "tool_use"):
        return "tool_use"
    return reason


def _usage(raw: Any, where: str) -> Usage:
    if raw is None:
        return Usage()
    usage = _mapping(raw, where)
    return Usage(
        input_tokens=_count(usage, "inputTokens", where),
        output_tokens=_count(usage, "outputTokens", where),
        cache_creation_input_tokens=_count(usage, "cacheWriteInputTokens", where),
        cache_read_input_tokens=_count(usage, "cacheReadInputTokens", where),
    )


def _response(
    content: Sequence[Any],
    stop: Any,
    usage: Usage,
    model: str,
    origin: Origin,
    where: str,
    lost: Sequence[Downgrade] = (),
    raw_usage: Any = None,
    fields: Any = None,
) -> Response:
    blocks: list[Block] = []
    malformed = 0
    for i, raw in enumerate(content):
        more, bad = _answer_blocks(raw, f"{where}[{i}]", origin, ProviderError)
        blocks += more
        malformed += bad
    calls = any(isinstance(b, ToolUse) for b in blocks)
    reason = _stop_reason(stop, calls)
    refusal: str | None = None
    if reason == "refusal" and not any(isinstance(b, Text) for b in blocks):
        refusal = f"the answer was stopped ({stop})"
        blocks.append(Text(refusal))
    return Response(
        message=answer_message(blocks, "Bedrock answer"),
        stop_reason=reason,
        usage=usage,
        model=model or None,
        refusal=refusal,
        malformed_tool_args=malformed,
        # The wire's own figures, checked by `_usage` (a stream's from its metadata event).
        raw_usage=dict(raw_usage) if isinstance(raw_usage, Mapping) else None,
        stop_sequence=_stop_sequence(stop, fields),
        downgrades=tuple(lost),
    )


def _stop_sequence(stop: Any, fields: Any) -> str | None:
    """The stop sequence that ended the answer: an Anthropic model names it in the
    `additionalModelResponseFields` it was asked for (`_options`)."""
    if stop != "stop_sequence" or not isinstance(fields, Mapping):
        return None
    matched = fields.get("stop_sequence")
    return matched if isinstance(matched, str) and matched else None


# The fields of an answer, its message and a stream event this codec reads or
# counts as bookkeeping (metrics, the SDK's response metadata); any other is
# named in the loss report.
_ANSWER_FIELDS: Final = frozenset(
    {"output", "stopReason", "usage", "metrics", "additionalModelResponseFields", "trace"}
    | {"performanceConfig", "ResponseMetadata", "serviceTier"}
)
_MESSAGE_FIELDS: Final = frozenset({"role", "content"})
_OUTPUT_FIELDS: Final = frozenset({"message"})
_DELTAS: Final = frozenset({"text", "toolUse", "reasoningContent", "toolResult", "citation"})
"""The `ContentBlockDelta` members the stream decoder builds a block from."""

_EVENTS: Final = frozenset(
    {"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop"}
    | {"messageStop", "metadata"}
)


def _raise_wire_error(body: Mapping[str, Any], where: str, status: int | None = None) -> None:
    """An error body (`{"message": ...}`, the service's form) as the `ProviderError` it says."""
    if "output" in body:
        return
    message = body.get("message", body.get("Message"))
    if not isinstance(message, str):
        return
    kind = body.get("__type")
    if isinstance(kind, str):
        kind = kind.rsplit("#", 1)[-1]
    raise wire_error(
        f"{where}: the server reported an error: {shorten(message, 300)}",
        status=status,
        kind=kind if isinstance(kind, str) else None,
    )


def decode_response(
    data: Mapping[str, Any], *, endpoint: str = "", model: str = "", status: int | None = None
) -> Response:
    """A Converse answer as a `Response`; an error body is a `ProviderError` with `status`.

    Converse names no model in its answer, so `model` is the model id the
    request went to: with this dialect and `endpoint` (the transport's host)
    it is the origin stamped on signatures, redacted reasoning and native
    blocks.
    """
    where = "response"
    body = _mapping(data, where)
    _raise_wire_error(body, where, status)
    output = _mapping(body.get("output"), f"{where}.output")
    message = _mapping(output.get("message"), f"{where}.output.message")
    lost: list[Downgrade] = []
    unmodelled(body, _ANSWER_FIELDS, where, lost)
    unmodelled(output, _OUTPUT_FIELDS, f"{where}.output", lost)
    unmodelled(message, _MESSAGE_FIELDS, f"{where}.output.message", lost)
    content = message.get("content")
    if not isinstance(content, list):
        raise ProviderError(f"{where}.output.message.content must be an array")
    origin = Origin(DIALECT, endpoint, model)
    return _response(
        content,
        body.get("stopReason"),
        _usage(body.get("usage"), f"{where}.usage"),
        model,
        origin,
        f"{where}.output.message.content",
        lost,
        body.get("usage"),
        body.get("additionalModelResponseFields"),
    )


class _Partial:
    """One content block of a stream, as its deltas arrive."""

    __slots__ = (
        "call",
        "citations",
        "kind",
        "native",
        "pieces",
        "redacted",
        "results",
        "signature",
    )

    def __init__(self) -> None:
        self.kind = ""
        self.pieces: list[str] = []
        self.citations: list[Any] = []
        self.results: list[Any] = []
        self.signature: str | None = None
        self.redacted: list[str] = []
        self.call: dict[str, Any] | None = None
        self.native: dict[str, Any] | None = None

    def block(self) -> dict[str, Any] | None:
        """The whole content block the deltas add up to, as a Converse answer holds it."""
        text = "".join(self.pieces)
        if self.call is not None:
            return {"toolUse": {**self.call, "input": text}}
        if self.kind == "reasoning":
            if self.redacted:
                redacted = self.redacted[0] if len(self.redacted) == 1 else self._joined()
                return {"reasoningContent": {"redactedContent": redacted}}
            reasoning: dict[str, Any] = {"text": text}
            if self.signature is not None:
                reasoning["signature"] = self.signature
            return {"reasoningContent": {"reasoningText": reasoning}}
        if self.native is not None:
            return self._native(self.native, text)
        if self.citations:
            # Cited text: its text deltas and its citations, as the whole answer's block.
            cited = {"content": [{"text": text}], "citations": self.citations}
            return {"citationsContent": cited}
        return {"text": text} if self.kind == "text" else None

    def _native(self, native: dict[str, Any], text: str) -> dict[str, Any]:
        # A server tool's call with its input, or its result with its content.
        call = native.get("toolUse")
        if isinstance(call, Mapping) and self.pieces:
            ok, value = load_json(text)
            return {"toolUse": {**call, "input": value if ok else text}}
        result = native.get("toolResult")
        if isinstance(result, Mapping) and self.results:
            return {"toolResult": {**result, "content": self.results}}
        return native

    def _joined(self) -> str:
        data = b"".join(base64.b64decode(piece) for piece in self.redacted)
        return base64.b64encode(data).decode("ascii")


def _not_for(partial: _Partial) -> str:
    """Where a stray piece landed: a block of another kind, or one not yet started."""
    if partial.call is not None:
        started = "toolUse"
    elif partial.native is not None:
        (started,) = partial.native
    elif partial.kind:
        started = partial.kind
    else:
        return "before its contentBlockStart"
    return f"in a {started} block"


class StreamDecoder:
    """Decodes `ConverseStream` events (each `{"eventType": payload}`) into a `Response`.

    The events are boto3's (or an event-stream message's `:event-type` and
    JSON payload, which is the same): `messageStart`, `contentBlockStart`
    (a call's id and name, or a server tool's result less its content),
    `contentBlockDelta` (text, a call's input as JSON text, reasoning
    text, its signature, redacted reasoning, a citation of the block's
    text, a server tool result's content entries), `contentBlockStop`,
    `messageStop` (the stop reason) and `metadata` (the usage). The deltas
    of each block are put together into the block a whole answer holds and
    decoded by the same reader, so a streamed and a whole answer decode to
    the same blocks. An exception event is a
    `ProviderError` (retryable for throttling, overload and server errors).
    """

    def __init__(self, target: Target = DEFAULT_TARGET) -> None:
        self._endpoint = target.endpoint
        self._model = target.model
        self._blocks: dict[int, _Partial] = {}
        self._stop: Any = None
        self._fields: Any = None
        self._stopped = False
        self._usage = Usage()
        self._raw_usage: Any = None
        self._events = 0
        self._lost: list[Downgrade] = []

    def feed(self, event: Mapping[str, Any] | str) -> str:
        """Take one event; return the text it made newly visible."""
        self._events += 1
        where = f"stream event {self._events}"
        if isinstance(event, str) and event.strip() == "[DONE]":
            return ""
        body = _mapping(event, where)
        shown: list[str] = []
        for kind, payload in body.items():
            at = f"{where}.{kind}"
            if isinstance(kind, str) and kind.endswith("Exception"):
                self._raise(kind, payload, at)
            if kind == "messageStop":
                self._stopped = True
                stopped = _mapping(payload, at)
                self._stop = stopped.get("stopReason")
                self._fields = stopped.get("additionalModelResponseFields")
            elif kind == "metadata":
                self._raw_usage = _mapping(payload, at).get("usage")
                self._usage = _usage(self._raw_usage, f"{at}.usage")
            elif kind == "contentBlockStart":
                self._start(_mapping(payload, at), at)
            elif kind == "contentBlockDelta":
                shown.append(self._delta(_mapping(payload, at), at))
            elif kind not in _EVENTS and payload is not None:
                reason = f"{at}: an event carryall does not model; not kept"
                self._lost.append(Downgrade(0, "event", reason))
        return "".join(shown)

    def _partial(self, payload: Mapping[str, Any], at: str) -> _Partial:
        index = payload.get("contentBlockIndex", 0)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= 4096:
            raise ProviderError(f"{at}.contentBlockIndex must be 0 to 4096, got {_shown(index)}")
        if self._stopped:
            raise ProviderError(f"{at}: a content block after messageStop")
        return self._blocks.setdefault(index, _Partial())

    def _start(self, payload: Mapping[str, Any], at: str) -> None:
        partial = self._partial(payload, at)
        start = _mapping(payload.get("start", {}), f"{at}.start")
        call = start.get("toolUse")
        if isinstance(call, Mapping) and call.get("type") in (None, "tool_use"):
            partial.call = {
                "toolUseId": _str(call, "toolUseId", f"{at}.start.toolUse", ProviderError),
                "name": _str(call, "name", f"{at}.start.toolUse", ProviderError),
            }
        elif len(start) == 1:
            # A server tool's call or result, or another native block: kept whole.
            partial.native = {key: value for key, value in start.items()}

    def _delta(self, payload: Mapping[str, Any], at: str) -> str:
        partial = self._partial(payload, at)
        delta = _mapping(payload.get("delta"), f"{at}.delta")
        unknown = [str(key) for key in delta if key not in _DELTAS]
        if unknown:
            reason = f"{at}.delta: {', '.join(unknown)}, a delta carryall does not model; not kept"
            self._lost.append(Downgrade(0, "delta", reason))
        if "text" in delta:
            text = _str(delta, "text", f"{at}.delta", ProviderError)
            if partial.call is not None or partial.native is not None:
                raise ProviderError(f"{at}: text {_not_for(partial)}")
            partial.kind = partial.kind or "text"
            partial.pieces.append(text)
            return text
        if "toolUse" in delta:
            call = _mapping(delta["toolUse"], f"{at}.delta.toolUse")
            piece = _str(call, "input", f"{at}.delta.toolUse", ProviderError)
            if partial.call is None:
                if partial.native is not None and "toolUse" in partial.native:
                    partial.pieces.append(piece)  # a server tool's input
                    return ""
                raise ProviderError(f"{at}: a call's input {_not_for(partial)}")
            partial.pieces.append(piece)
            return ""
        if "reasoningContent" in delta:
            reasoning = _mapping(delta["reasoningContent"], f"{at}.delta.reasoningContent")
            partial.kind = "reasoning"
            where = f"{at}.delta.reasoningContent"
            if "text" in reasoning:
                partial.pieces.append(_str(reasoning, "text", where, ProviderError))
            if "signature" in reasoning:
                partial.signature = _str(reasoning, "signature", where, ProviderError)
            if "redactedContent" in reasoning:
                blob = reasoning["redactedContent"]
                partial.redacted.append(_blob(blob, f"{where}.redactedContent", ProviderError))
        if "toolResult" in delta:
            # A server tool's result, its content in pieces (`ToolResultBlockDelta`),
            # each piece one entry of the whole block's `content`.
            parts = delta["toolResult"]
            if not isinstance(parts, list):
                raise ProviderError(f"{at}.delta.toolResult must be a list, got {_shown(parts)}")
            for i, part in enumerate(parts):
                _mapping(part, f"{at}.delta.toolResult[{i}]")
            if partial.native is None or "toolResult" not in partial.native:
                raise ProviderError(f"{at}: a tool result's content {_not_for(partial)}")
            partial.results.extend(parts)
        if "citation" in delta:
            # One citation of the text this block streams (`CitationsDelta`),
            # kept as the whole answer's `citationsContent` holds it.
            citation = _mapping(delta["citation"], f"{at}.delta.citation")
            partial.kind = partial.kind or "text"
            partial.citations.append(dict(citation))
        return ""

    @staticmethod
    def _raise(kind: str, payload: Any, at: str) -> None:
        message = payload.get("message") if isinstance(payload, Mapping) else None
        text = shorten(message, 300) if isinstance(message, str) and message else "no message"
        raise wire_error(f"{at}: the server reported an error: {text}", kind=kind)

    def response(self) -> Response:
        """The whole answer; a `ProviderError` when the stream never reached `messageStop`."""
        if not self._stopped:
            raise ProviderError(
                f"the stream ended after {self._events} event(s) without messageStop: "
                "the response is truncated",
                retryable=True,
            )
        content = [
            block
            for _, partial in sorted(self._blocks.items())
            if (block := partial.block()) is not None
        ]
        origin = Origin(DIALECT, self._endpoint, self._model)
        return _response(
            content,
            self._stop,
            self._usage,
            self._model,
            origin,
            "stream content",
            self._lost,
            self._raw_usage,
            self._fields,
        )


def decode_stream(
    events: Iterable[Mapping[str, Any] | str], *, endpoint: str = "", model: str = ""
) -> Response:
    """A whole stream of events as one `Response` (see `StreamDecoder`)."""
    decoder = StreamDecoder(Target(endpoint=endpoint, model=model))
    for event in events:
        decoder.feed(event)
    return decoder.response()


# -- importing histories ----------------------------------------------------


def decode_messages(
    data: Sequence[Mapping[str, Any]], *, system: Any = None
) -> tuple[str | None, Imported]:
    """A Converse `messages` array (and its `system` blocks) read into a system prompt and blocks.

    A user turn's `toolResult` blocks come first in its message as
    `ToolResult`s (their text and JSON content as the result text); images
    and documents inside a result ride after the results, as everywhere.
    What the block model has no form for (an S3 location, a video, a cache
    point) is kept as an `Opaque` of this wire, so it goes back out here.
    """
    # A lone surrogate can be read from JSON but never written back: repaired here, once.
    messages, system = repair_surrogates(data), repair_surrogates(system)
    prompt: str | None = None
    if system is not None:
        prompt = "\n\n".join(_system_texts(system)) or None
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise BlockError(f"messages must be an array, got {_shown(messages)}")
    out: list[Message] = []
    lost: list[Downgrade] = []
    for index, raw in enumerate(messages):
        where = f"messages[{index}]"
        message = _object(raw, where, BlockError)
        unmodelled(message, _MESSAGE_FIELDS, where, lost, index=len(out))
        role = message.get("role")
        content = message.get("content")
        if not isinstance(content, list):
            raise BlockError(f"{where}.content must be an array, got {_shown(content)}")
        if role == "assistant":
            blocks: list[Block] = []
            for i, block in enumerate(content):
                more, _ = _answer_blocks(block, f"{where}.content[{i}]", _IMPORTED, BlockError)
                blocks += (_unwrapped(b) for b in more)
            out.append(Message("assistant", tuple(blocks or [Text("")])))
        elif role == "user":
            out.append(_import_user(content, f"{where}.content"))
        else:
            raise BlockError(f"{where}: role {_shown(role)} has no block form (user or assistant)")
    return prompt, Imported(out, lost)


def _unwrapped(block: Block) -> Block:
    if isinstance(block, ToolUse) and isinstance(block.input, dict) and len(block.input) == 1:
        wrapped = block.input.get(INVALID_JSON_KEY)
        if isinstance(wrapped, str):
            return ToolUse(block.id, block.name, wrapped)
    return block


def _system_texts(system: Any) -> list[str]:
    if isinstance(system, str):
        return [system]
    if not isinstance(system, list):
        raise BlockError(f"system must be an array of blocks, got {_shown(system)}")
    texts: list[str] = []
    for i, raw in enumerate(system):
        block = _object(raw, f"system[{i}]", BlockError)
        if "text" in block:
            texts.append(_str(block, "text", f"system[{i}]", BlockError))
        # A cache point or guard content in the system prompt has no place in a string.
    return texts


def _import_user(content: list[Any], where: str) -> Message:
    results: list[Block] = []
    riders: list[Block] = []
    rest: list[Block] = []
    for i, raw in enumerate(content):
        at = f"{where}[{i}]"
        block = _object(raw, at, BlockError)
        if "toolResult" in block:
            result, lifted = _import_result(block["toolResult"], f"{at}.toolResult")
            results.append(result)
            riders += lifted
        elif "text" in block:
            rest.append(Text(_str(block, "text", at, BlockError)))
        elif "image" in block:
            rest.append(_import_image(block, at))
        elif "document" in block:
            rest.append(_import_document(block, at))
        elif len(block) == 1:
            (kind,) = block
            rest.append(Opaque(str(kind), _raw(block), _IMPORTED, _opaque_text(kind, block[kind])))
        else:
            raise BlockError(f"{at}: a content block has exactly one kind, got {sorted(block)}")
    return Message("user", (*results, *riders, *rest) or (Text(""),))


def _import_result(raw: Any, where: str) -> tuple[ToolResult, list[Block]]:
    result = _object(raw, where, BlockError)
    call_id = _str(result, "toolUseId", where, BlockError)
    if not call_id:
        raise BlockError(f"{where}.toolUseId is empty")
    status = result.get("status", "success")
    if status not in (None, "success", "error"):
        raise BlockError(f"{where}.status must be success or error, got {_shown(status)}")
    content = result.get("content", [])
    if not isinstance(content, list):
        raise BlockError(f"{where}.content must be an array, got {_shown(content)}")
    texts: list[str] = []
    lifted: list[Block] = []
    for i, part_raw in enumerate(content):
        at = f"{where}.content[{i}]"
        part = _object(part_raw, at, BlockError)
        if "text" in part:
            texts.append(_str(part, "text", at, BlockError))
        elif "json" in part:
            texts.append(json.dumps(part["json"], ensure_ascii=False))
        elif "image" in part:
            lifted.append(_import_image(part, at))
        elif "document" in part:
            lifted.append(_import_document(part, at))
        else:
            raise BlockError(f"{at}: this result part has no block form")
    # A `status: success` written out is the file's spelling, kept for this wire.
    extra = {"status": status} if status == "success" and "status" in result else None
    spelling = spelling_of(_IMPORTED, extra)
    return ToolResult(call_id, "\n".join(texts), status == "error", spelling=spelling), lifted


def _bytes_source(block: Mapping[str, Any], at: str) -> str | None:
    source = _object(block.get("source"), f"{at}.source", BlockError)
    if "bytes" not in source:
        return None
    data = _blob(source["bytes"], f"{at}.source.bytes", BlockError)
    if len(data) % 4 or _BASE64.fullmatch(data) is None:
        raise BlockError(f"{at}.source.bytes is not canonical base64")
    return data


def _format(media: Mapping[str, Any], at: str) -> str:
    """A media block's `format` (checked to be text before any table lookup meets it)."""
    kind = media.get("format", "")
    if not isinstance(kind, str):
        raise BlockError(f"{at}.format must be a string, got {_shown(kind)}")
    return kind


def _import_image(part: Mapping[str, Any], at: str) -> Block:
    image = _object(part["image"], f"{at}.image", BlockError)
    media_type = _MEDIA_TYPES.get(_format(image, f"{at}.image"))
    data = _bytes_source(image, f"{at}.image")
    if media_type is None or data is None:
        # An S3 location or an unknown format: this wire's own, kept whole.
        return Opaque("image", _raw(part), _IMPORTED, _opaque_text("image", image))
    return Image(media_type, data)


def _import_document(part: Mapping[str, Any], at: str) -> Block:
    document = _object(part["document"], f"{at}.document", BlockError)
    media_type = _DOCUMENT_TYPES.get(_format(document, f"{at}.document"))
    name = document.get("name")
    title = name if isinstance(name, str) and name else None
    source = _object(document.get("source"), f"{at}.document.source", BlockError)
    if media_type == "text/plain" and isinstance(source.get("text"), str):
        return Document.from_bytes("text/plain", source["text"].encode("utf-8"), title=title)
    data = _bytes_source(document, f"{at}.document")
    if media_type is None or data is None:
        return Opaque("document", _raw(part), _IMPORTED, _opaque_text("document", document))
    return Document(media_type, data, title=title)


def _items(value: Any) -> list[Any]:
    """A field read as a list of entries: anything else (absent, null, a stray value) as none."""
    return value if isinstance(value, list) else []

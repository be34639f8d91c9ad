"""Google Gemini: the `generateContent` wire (Gemini API and Vertex AI), on the same blocks.

`encode_request` turns a `Request` into the JSON body of
`models/{model}:generateContent` (and `:streamGenerateContent`, the same
body); `decode_response`, `StreamDecoder` and `decode_stream` turn its
answers back into a `Response`; `decode_messages` reads a `contents` array
someone already holds into blocks.

The wire:

- The system prompt is `systemInstruction`; the history is `contents`, each
  a `role` (`user` or `model`) and its `parts`.
- A user message's tool results go first, each a `functionResponse` part
  naming its call (by the call's `id`, and by its `name`, which Gemini
  requires: found on the call in the message before), the result text under
  `response.output`, or `response.error` for an error result. The
  message's text, images and documents (PDF, plain text) follow as `text`
  and `inlineData` parts, or `fileData` for a URL Gemini fetches itself
  (its Files API's, `FILES_API`); any other URL is its placeholder line,
  reported (`prepare`), since carryall fetches nothing.
- Tool-made images ride that user message after the results, never inside
  a `functionResponse`, although newer Gemini models could take them there:
  Chat Completions and llama-server cannot, and a history has to read the
  same on every wire it may be continued on (SPEC §1).
- An assistant message is a `model` turn: its text as `text` parts, each
  call a `functionCall` part with its `id`, `name` and `args` (an object:
  a non-object input, or an object whose one key is `input`, goes as
  `{"input": value}`, and `{"input": value}` reads back as `value`). Its thinking goes back as
  a `thought: true` part with its `thoughtSignature` only when it came from
  this wire (`own_thought`); other thinking stays in the transcript but off
  the wire. A signature on an answer's text part is an `Opaque` block of
  kind `thoughtSignature` right after that `Text`: the text reads as text on
  every wire, and the signature goes back on that same part to its origin
  only (`prepare` leaves it off, reported, everywhere else).
- Tools are one `functionDeclarations` tool; `tool_choice` is
  `toolConfig.functionCallingConfig.mode` (`AUTO`, `NONE`, `ANY`), only
  with tools. `maxOutputTokens` is the token limit; thinking asked for is
  `thinkingConfig` with `includeThoughts` and the budget when one is set.

Decoding: the first candidate's parts, in order: `thought: true` parts
become `Thinking` (signed by their `thoughtSignature`), other text parts
`Text`, `functionCall` parts `ToolUse` (a call without an id gets a minted
one, `call_<n>`), `executableCode` and `codeExecutionResult` (and a
server-side `toolCall` and `toolResponse`) `ServerToolCall` and
`ServerToolResult` holding the part; the candidate's `groundingMetadata`
and `urlContextMetadata` become a provider-run search (or fetch) with its
result ahead of the text, and the grounding supports the text's
citations; a request has no place for them, so sending the answer back
names them left off. A call whose arguments Vertex streams as
`partialArgs` is one `ToolUse` once whole; the candidate's token
probabilities (`logprobsResult`, `avgLogprobs`) are `Response.logprobs`.
`finishReason` `STOP` is `end_turn` (`tool_use` when the
answer holds calls), `MAX_TOKENS` is `max_tokens`, `SAFETY`, `RECITATION`,
`BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY` and a blocked
prompt (`promptFeedback.blockReason`) are `refusal`, anything else `other`.
Usage: `input_tokens` is `promptTokenCount + toolUsePromptTokenCount -
cachedContentTokenCount`, the cached figure `cache_read_input_tokens`;
`output_tokens` is `candidatesTokenCount + thoughtsTokenCount`.

Every parser here answers hostile input with a `ProviderError` naming the
place (or, for `decode_messages`, a `BlockError`); part kinds the block
model does not model are kept whole as `Opaque` blocks and unknown fields
named in the report, so new server features do not break old clients.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from carryall._json import (
    KeptItems,
    One,
    Payload,
    WrittenAhead,
    body_bytes,
    builtins,
    repair_surrogates,
)
from carryall._text import shorten
from carryall.blocks import (
    DOCUMENT_MEDIA_TYPES,
    IMAGE_MEDIA_TYPES,
    Block,
    Citation,
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    ServerToolCall,
    ServerToolResult,
    Spelling,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    image_placeholder,
)
from carryall.errors import BlockError, HistoryError, ProviderError, wire_error
from carryall.providers import hosted, structured
from carryall.providers._common import (
    Wire,
    _shown,
    answer_message,
    camel_keys,
    payload_messages,
    prepare,
    spelled,
    spelling_of,
    unmodelled,
)
from carryall.providers._types import (
    DEFAULT_TARGET,
    Capabilities,
    Downgrade,
    Encoded,
    Imported,
    Logprobs,
    Request,
    Response,
    Sent,
    StopReason,
    Target,
    TokenLogprob,
    Usage,
)
from carryall.providers._wire import BASE64 as _BASE64
from carryall.providers._wire import count as _count
from carryall.providers._wire import mapping as _mapping
from carryall.providers._wire import results_first as _results_first
from carryall.providers.options import NO_OPTIONS, left_off, merge_extra, tier_left_off

__all__ = [
    "DIALECT",
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
]

DIALECT: Final = "gemini"
"""The name this wire goes by in an origin, a backend and the switch matrix."""

SIGNATURE: Final = "thoughtSignature"
"""The `Opaque` kind of a signature on an answer's text part: echoed on that part, to its origin."""

_IMPORTED: Final = Origin(DIALECT, "", "")
"""The origin of what an imported `contents` array holds: this wire, no endpoint or model."""

_MODES: Final = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
_REFUSALS: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
    # Model Armor (Vertex) screening the prompt or the answer is a refusal too.
    | {"MODEL_ARMOR"}
)


FILES_API: Final = "https://generativelanguage.googleapis.com/"
"""Where the files a Gemini request may name by URI live (the Files API's uploads)."""

WIRE: Final = Wire(
    DIALECT,
    signed=True,
    own_thinking=True,
    call_signatures=True,
    image_urls=True,
    pdf=True,
    pdf_urls=True,
    text_documents=True,
    url_prefixes=(FILES_API,),
)
"""What this wire takes natively: its own thought signatures back, nobody else's.

A `thoughtSignature` (on a thought or on a call) means something to the
endpoint and model that made it only (the Gemini API and Vertex are
different endpoints); `prepare` leaves every other one off and reports it.
"""


# -- the codec contract ------------------------------------------------------
# The same names with the same signatures in every wire module
# (`encode_body`, `encode_bytes`, `decode`, `StreamDecoder`,
# `decode_messages`), each taking what it needs of one `Target`.


def encode_body(request: Request, target: Target) -> Encoded:
    """The `generateContent` body for `request`, and every downgrade made to write it (`encode`)."""
    return encode(request, target.caps)


def encode_bytes(
    request: Request, target: Target, *, stream: bool = False, kept: KeptItems | None = None
) -> Sent:
    """`encode_body`'s body as the bytes sent, and its report.

    The stream endpoint takes the same body, so `stream` changes nothing;
    this wire keeps nothing between requests, so `kept` is not read.
    """
    encoded = _encode(request, target.caps, sent=True)
    return Sent(body_bytes(encoded.body), encoded.downgrades)


def decode(data: Mapping[str, Any], target: Target) -> Response:
    """A `GenerateContentResponse` as a `Response`, its origins at `target.endpoint`."""
    return decode_response(data, endpoint=target.endpoint)


# -- encoding ---------------------------------------------------------------


def encode_request(request: Request, caps: Capabilities) -> dict[str, Any]:
    """The `generateContent` body for a request (`encode`'s body)."""
    return encode(request, caps).body


def encode(request: Request, caps: Capabilities) -> Encoded:
    """The `generateContent` body for a request, and every downgrade made to write it.

    The history is validated, image-limited, blinded and fitted to this wire
    first (`prepare` with `WIRE`): signatures go back only to their origin.
    """
    return _encode(request, caps, sent=False)


def _encode(request: Request, caps: Capabilities, *, sent: bool) -> Encoded:
    # `sent`: the body is only for `body_bytes`, so it is written ahead as it
    # is built and keeps the wire objects below rather than their dicts.
    prepared = prepare(request, caps, WIRE)
    messages = prepared.messages
    contents: list[Any] = []
    append = contents.append
    names: dict[str, str] = {}  # the calls of the message before, which results answer by name
    unsent: list[Downgrade] = []  # what of this wire's own blocks a request has no place for
    ahead = WrittenAhead(payload_messages(prepared)) if sent else None
    # This loop runs over the whole history on every request: blocks are told
    # apart by exact type, and the commonest turns of a tool loop (one
    # result; a remark and one call) go the short way, as the general writers
    # below would write them.
    for index, message in enumerate(messages):
        if ahead is not None:
            ahead.step(contents, index)
        content = message.content
        if message.role == "user":
            if (
                len(content) == 1
                and type(content[0]) is ToolResult
                and content[0].tool_use_id in names
            ):
                parts: Any = One(_result_part(content[0], names[content[0].tool_use_id]))
            else:
                parts = [_user_part(block, names, index) for block in _results_first(message)]
            append(_Content("user", parts))
            names = {}
            continue
        names = {}
        if len(content) == 2:
            said, use = content
            if type(said) is Text and type(use) is ToolUse and said.text:
                names[use.id] = use.name
                append(_Content("model", [_TextPart(said.text), _call_part(use)]))
                continue
        written = _model_parts(content, names, index, unsent)
        append(_Content("model", written or One(_TextPart(""))))
    if not contents:
        raise HistoryError(0, "the request has no messages: nothing to answer")
    body: dict[str, Any] = {"contents": contents if sent else _as_dicts(contents)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": spec.name,
                        "description": spec.description,
                        "parametersJsonSchema": spec.input_schema,
                    }
                    for spec in request.tools
                ]
            }
        ]
        if request.tool_choice is not None:
            mode = _MODES.get(request.tool_choice)
            if mode is None:
                raise ProviderError(
                    f"tool_choice {request.tool_choice!r} is not one of {', '.join(_MODES)}"
                )
            body["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    if request.hosted_tools:
        body["tools"] = [*body.get("tools", ()), *hosted.gemini_tools(request.hosted_tools)]
    config: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
    if request.thinking:
        thinking: dict[str, Any] = {"includeThoughts": True}
        if request.thinking_budget is not None:
            thinking["thinkingBudget"] = request.thinking_budget
        config["thinkingConfig"] = thinking
    body["generationConfig"] = config
    structured.add_gemini(body, request)
    placed = _options(request, body, config)
    downgrades = prepared.downgrades
    if unsent:
        downgrades = tuple(sorted((*downgrades, *unsent), key=lambda d: d.index))
    return Encoded(body, (*placed, *downgrades) if placed else downgrades)


_SERVICE_TIERS: Final = ("standard", "flex", "priority")
_GENERATION: Final = (
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("top_k", "topK"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
)


def _options(request: Request, body: dict[str, Any], config: dict[str, Any]) -> list[Downgrade]:
    """Write `request.options`, `effort` and strict tools as `generateContent` names them.

    Sampling and stop sequences go in `generationConfig`; `serviceTier` and
    `store` beside it (the Gemini API's; Vertex AI refuses `store`).
    `effort` is `thinkingConfig.thinkingLevel`, which the API takes instead
    of a `thinkingBudget`, never with one: with a budget set, the effort is
    left off. Strict tools make the calling mode `VALIDATED` (calls or text,
    each call held to its declaration) where the choice is `auto`; `ANY`
    holds calls to their declarations already. Gemini has no switch for
    parallel calls. What is left off is named.
    """
    lost: list[Downgrade] = []
    if request.effort is not None:
        if request.thinking and request.thinking_budget is not None:
            lost.append(
                left_off("effort", DIALECT, "it takes a thinkingBudget or a level, not both")
            )
        else:
            thinking = config.setdefault("thinkingConfig", {})
            thinking["thinkingLevel"] = request.effort.upper()
    if request.tools and any(spec.strict for spec in request.tools):
        calling = body.setdefault("toolConfig", {}).setdefault("functionCallingConfig", {})
        if calling.get("mode", "AUTO") == "AUTO":
            calling["mode"] = "VALIDATED"
    options = request.options
    if options == NO_OPTIONS:
        return lost
    for name, key in _GENERATION:
        value = getattr(options, name)
        if value is not None:
            config[key] = value
    if options.stop:
        config["stopSequences"] = list(options.stop)
    if options.service_tier is not None:
        if options.service_tier in _SERVICE_TIERS:
            body["serviceTier"] = options.service_tier
        else:
            lost.append(tier_left_off(options.service_tier, DIALECT, _SERVICE_TIERS))
    if options.store is not None:
        body["store"] = options.store
    if options.parallel_tool_calls is not None and request.tools:
        lost.append(left_off("parallel_tool_calls", DIALECT))
    return lost + merge_extra(body, request, DIALECT)


def encode_request_bytes(request: Request, caps: Capabilities, *, stream: bool = False) -> bytes:
    """`encode_request`'s body as bytes: the stream endpoint takes the same body."""
    return body_bytes(_encode(request, caps, sent=True).body)


def _as_dicts(contents: list[Any]) -> list[Any]:
    """The contents as the dicts `encode` returns, or a clear error for a tool input that is
    not JSON (the bytes path refuses it as `body_bytes` does)."""
    try:
        out: list[Any] = builtins(contents)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProviderError(f"Gemini request: a tool input is not a JSON value: {exc}") from None
    return out


# -- the wire's parts ----------------------------------------------------------
# What `_encode` builds, one class per object of a content's parts, as the
# OpenAI codec builds its messages: msgspec writes them straight from their
# fields, they are not tracked by the garbage collector and are a fraction
# of a dict's size; an UNSET field is left out. `encode` turns them into the
# dicts it returns (`_json.builtins`).


class _Content(msgspec.Struct, gc=False):
    role: str
    parts: One | list[Any]


class _TextPart(msgspec.Struct, gc=False):
    text: str


class _Output(msgspec.Struct, gc=False):
    output: str


class _Error(msgspec.Struct, gc=False):
    error: str


class _Structured(msgspec.Struct, gc=False):
    output: Any


class _FunctionResponse(msgspec.Struct, gc=False):
    id: str
    name: str
    response: _Output | _Error | _Structured


class _ResponsePart(msgspec.Struct, gc=False):
    functionResponse: _FunctionResponse


class _FunctionCall(msgspec.Struct, gc=False):
    id: str
    name: str
    args: Any


class _CallPart(msgspec.Struct, gc=False):
    functionCall: _FunctionCall
    thoughtSignature: str | UnsetType = UNSET


class _Blob(msgspec.Struct, gc=False):
    mimeType: str
    data: Payload


class _InlinePart(msgspec.Struct, gc=False):
    inlineData: _Blob


class _FileData(msgspec.Struct, gc=False):
    mimeType: str
    fileUri: str


class _FilePart(msgspec.Struct, gc=False):
    fileData: _FileData


def _result_part(block: ToolResult, name: str) -> _ResponsePart | dict[str, Any]:
    response: _Output | _Error | _Structured
    if block.is_error:
        response = _Error(block.content)
    elif block.structured is not None:
        response = _Structured(block.structured)  # the value itself: Gemini takes JSON here
    else:
        response = _Output(block.content)
    part = _ResponsePart(_FunctionResponse(block.tool_use_id, name, response))
    if block.spelling is not None:  # `prepare` kept it: this wire's own
        return _as_spelt(builtins(part), "functionResponse", block.spelling)
    return part


# How a part was written (`Spelling.form`, words joined by spaces), where not as this codec
# writes it: the keys it wrote in snake_case, by name; with no id (the one a block holds was
# made on reading); a text part written out although empty.
_NO_ID: Final = "no_id"
_EMPTY: Final = "empty"


def _as_spelt(part: dict[str, Any], key: str, spelling: Spelling) -> dict[str, Any]:
    """A call's or a result's part as its spelling says it was written, with what it kept.

    The form's words other than `_NO_ID` are the part's keys it wrote in
    snake_case (`function_call`, `thought_signature`), each written so
    again, with the keys of the object under it.
    """
    words = spelling.form.split()
    if _NO_ID in words:
        part[key].pop("id", None)
    if len(words) > (_NO_ID in words):
        part = {(_snake(k) if _snake(k) in words else k): v for k, v in part.items()}
        for name in words:
            if isinstance(part.get(name), dict):
                part[name] = {_snake(k): v for k, v in part[name].items()}
    return spelled(part, spelling)


_CAMEL: Final = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake(key: str) -> str:
    """A camelCase key in snake_case: `camel_keys` undone."""
    return _CAMEL.sub(lambda m: "_" + m.group(1).lower(), key)


def _spelt_parts(
    blocks: list[Block], given: Mapping[str, Any], read: Mapping[str, Any], alone: bool
) -> list[Block]:
    """A part's blocks holding how the part was written (`given`), read as `read` (camelCase).

    A call holds its layout (snake_case, no id) as its `Spelling`; a
    native part keeps the part as written; an empty text part written out
    beside others (`alone` is a turn's only part, which this codec writes
    itself) is an empty text that says so. Only this wire reads any of it back.
    """
    snake = given != read  # a key somewhere in it that `camel_keys` renamed
    out: list[Block] = []
    for block in blocks:
        if type(block) is ToolUse:
            call = read.get("functionCall")
            words = [key for key in given if key not in read]  # its keys in snake_case
            if isinstance(call, Mapping) and call.get("id") is None:
                words.append(_NO_ID)
            spelling = spelling_of(_IMPORTED, None, " ".join(words))
            if spelling is not None:
                block = msgspec.structs.replace(block, spelling=spelling)
        elif isinstance(block, Opaque) and snake:
            # Kept as it came: keys and all, as a native part is echoed.
            kept = given if block.kind != SIGNATURE else _signature_of(given)
            block = msgspec.structs.replace(block, raw=json.dumps(kept, ensure_ascii=False))
        out.append(block)
    if not blocks and not alone and read.get("text") == "" and len(read) == 1:
        out.append(Text("", spelling=Spelling(_IMPORTED, _EMPTY)))
    return out


def _signature_of(given: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in given.items() if camel_keys({k: None}).keys() == {"thoughtSignature"}}


def _user_part(block: Block, names: Mapping[str, str], index: int) -> Any:
    kind = type(block)
    if kind is Text:
        return _TextPart(block.text)  # type: ignore[union-attr]
    if kind is ToolResult:
        result: ToolResult = block  # type: ignore[assignment]
        name = names.get(result.tool_use_id)
        if name is None:
            raise HistoryError(
                index, f"tool result {result.tool_use_id!r} answers no call of the message before"
            )
        return _result_part(result, name)
    if isinstance(block, Image | Document):
        # `prepare` let a URI through only where Gemini fetches it (`FILES_API`).
        if block.url is not None and not block.data:
            return _FilePart(_FileData(block.media_type, block.url))
        return _InlinePart(_Blob(block.media_type, Payload(block.data)))
    if isinstance(block, Text):
        return _TextPart(block.text)
    raise HistoryError(index, f"a {type(block).__name__} block has no place in a user turn")


def _call_part(call: ToolUse) -> _CallPart | dict[str, Any]:
    # `args` must be an object: anything else rides under "input", and so
    # does an object that is only "input", so that reading back is exact.
    value = call.input
    plain = type(value) is dict and not (len(value) == 1 and "input" in value)
    # A signature `prepare` kept is this origin's own, echoed with its call.
    part = _CallPart(
        _FunctionCall(call.id, call.name, value if plain else {"input": value}),
        call.signature or UNSET,
    )
    if call.spelling is not None:  # `prepare` kept it: this wire's own
        return _as_spelt(builtins(part), "functionCall", call.spelling)
    return part


def _model_parts(
    content: Sequence[Block], names: dict[str, str], index: int, unsent: list[Downgrade]
) -> list[Any]:
    parts: list[Any] = []
    text_part: _TextPart | None = None  # the part the block just before was written as
    for at, block in enumerate(content):
        kind = type(block)
        if kind is Text:
            text = block.text  # type: ignore[union-attr]
            text_part = _TextPart(text) if text else None
            if text_part is not None:
                parts.append(text_part)
            elif block.spelling is not None:  # type: ignore[union-attr]
                parts.append(_TextPart(""))  # an empty part this wire's history wrote out
            continue
        if kind is ToolUse:
            call: ToolUse = block  # type: ignore[assignment]
            parts.append(_call_part(call))
            names[call.id] = call.name
            text_part = None
            continue
        if isinstance(block, Opaque):
            # `prepare` kept it: this origin's own native block. A text part's
            # signature goes back on that part; anything else as it came.
            if not block.raw:  # a result its call's part holds, or grounding
                if block.kind in GROUNDING:
                    reason = _GROUNDING_UNSENT.format(kind=block.kind)
                    unsent.append(Downgrade(index, type(block).__struct_config__.tag, reason, at))  # type: ignore[arg-type]
                continue
            native = json.loads(block.raw)
            if block.kind == SIGNATURE and text_part is not None:
                parts[-1] = {"text": text_part.text, **native}
            else:
                parts.append({"text": "", **native} if block.kind == SIGNATURE else native)
            text_part = None
            continue
        text_part = None
        if isinstance(block, Thinking) and block.signature:
            # `prepare` kept it: this origin's own signed thought.
            parts.append({"text": block.text, "thought": True, "thoughtSignature": block.signature})
        elif isinstance(block, Thinking):
            # `prepare` kept it: this origin's own thought, which it signed nothing of.
            parts.append({"text": block.text, "thought": True})
    return parts


# -- decoding responses -----------------------------------------------------


def _part_blocks(
    raw: Any,
    where: str,
    minted: list[int],
    error: type[Exception] = ProviderError,
    origin: Origin | None = None,
) -> list[Block]:
    """One part as blocks (none for a kind the block model has no use for)."""
    if not isinstance(raw, Mapping):
        raise error(f"{where} must be an object, got {_shown(raw)}")
    text = raw.get("text")
    signature = raw.get("thoughtSignature")
    if signature is not None and not isinstance(signature, str):
        raise error(f"{where}.thoughtSignature must be a string, got {_shown(signature)}")
    if text is not None:
        if not isinstance(text, str):
            raise error(f"{where}.text must be a string, got {_shown(text)}")
        if raw.get("thought") is True:
            # Unsigned, a thought is still its model's: it goes back to it as a thought part.
            return [Thinking(text, signature or None, origin)]
        blocks: list[Block] = [Text(text)] if text else []
        if signature:
            # A signed answer part: the text is plain text everywhere, and its
            # signature rides beside it, for this part's origin only.
            blocks.append(Opaque(SIGNATURE, json.dumps({"thoughtSignature": signature}), origin))
        return blocks
    call = raw.get("functionCall")
    if call is not None:
        if not isinstance(call, Mapping):
            raise error(f"{where}.functionCall must be an object, got {_shown(call)}")
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise error(f"{where}.functionCall needs a name, got {_shown(name)}")
        call_id = call.get("id")
        if call_id is not None and (not isinstance(call_id, str) or not call_id):
            raise error(f"{where}.functionCall.id must be a string, got {_shown(call_id)}")
        if call_id is None:
            minted[0] += 1
            call_id = f"call_{minted[0]}"
        args = call.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise error(f"{where}.functionCall.args must be an object, got {_shown(args)}")
        value: Any = args["input"] if set(args) == {"input"} else dict(args)
        if signature:
            return [ToolUse(call_id, name, value, signature, origin)]
        return [ToolUse(call_id, name, value)]
    # Code the model ran and its result, a server-side tool's call and
    # response, a file or a blob in an answer: kept whole, signature and all,
    # for this origin; one line for every other reader.
    kind = next((key for key in raw if key not in _PART_META), None)
    if kind is None:
        return []
    return [_native_part(kind, raw, origin)]


def _native_part(kind: str, raw: Mapping[str, Any], origin: Origin | None) -> Opaque:
    """A part the block model does not hold, whole; code execution and server tools read too.

    `executableCode` and `codeExecutionResult` are the code the model ran
    and its output; `toolCall` and `toolResponse` a server-side tool's
    call and answer (file search, Google Search), named by `toolType`.
    """
    whole = json.dumps(raw, ensure_ascii=False)
    value = raw[kind]
    held = value if isinstance(value, Mapping) else {}
    ident = held.get("id")
    ident = ident if isinstance(ident, str) else ""
    if kind == "executableCode":
        given = {k: held[k] for k in ("language", "code") if k in held}
        tool = "code_execution"
        return ServerToolCall.made(kind, whole, origin, tool=tool, id=ident, input=given)
    if kind == "codeExecutionResult":
        output = held.get("output")
        return ServerToolResult.made(
            kind,
            whole,
            origin,
            tool="code_execution",
            call_id=ident,
            output=output if isinstance(output, str) else "",
            is_error=held.get("outcome") not in (None, "OUTCOME_OK"),
        )
    if kind in ("toolCall", "toolResponse"):
        tool_type = held.get("toolType")
        tool_type = tool_type if isinstance(tool_type, str) else ""
        tool = _SERVER_TOOL_TYPES.get(tool_type, tool_type.lower() or kind)
        if kind == "toolCall":
            return ServerToolCall.made(
                kind, whole, origin, tool=tool, id=ident, name=tool_type, input=held.get("args")
            )
        answer = held.get("response")
        shown = json.dumps(answer, ensure_ascii=False) if answer is not None else ""
        return ServerToolResult.made(
            kind, whole, origin, tool=tool, call_id=ident, output=shorten(shown, 2000)
        )
    return Opaque(kind, whole, origin, _part_line(kind, value))


_SERVER_TOOL_TYPES: Final = {
    "GOOGLE_SEARCH": "web_search",
    "GOOGLE_SEARCH_RETRIEVAL": "web_search",
    "FILE_SEARCH": "file_search",
    "URL_CONTEXT": "url_context",
    "CODE_EXECUTION": "code_execution",
    "GOOGLE_MAPS": "google_maps",
}
"""The common kind of each Gemini server-side `toolType`; any other is its own, lowercased."""

GROUNDING: Final = ("groundingMetadata", "urlContextMetadata")
"""The candidate fields that say what the answer rests on: a provider-run search or URL fetch.

They have no place in a request (a `Content` holds parts), so they are
read into the common form with no raw of their own: a call and result
every other wire and reader gets as text, and citations on the answer's
text. What of them that form does not hold is named in the answer's report.
"""

_GROUNDING_UNSENT: Final = (
    "{kind}: what the answer rested on (the search, the sources found, the spans of the "
    "text they support) has no place in a request, whose turns hold parts only; "
    "left off, kept in the transcript"
)
"""Why an answer's grounding does not go back to Gemini, even to the model that made it."""

_GROUNDING_HELD: Final = frozenset(
    {"webSearchQueries", "retrievalQueries", "groundingChunks", "web", "retrievedContext"}
    | {"maps", "uri", "title", "text", "fileSearchStore", "groundingSupports", "segment"}
    | {"startIndex", "endIndex", "urlMetadata", "retrievedUrl", "urlRetrievalStatus"}
)
"""The grounding fields the common form holds; any other is named as not kept."""


def _grounding_unheld(value: Any, path: str, out: list[str], held: bool = True) -> None:
    """The paths of the grounding fields the common form does not hold, each once, to the leaf."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            kept = held and key in _GROUNDING_HELD
            at = f"{path}.{key}"
            if not kept and not isinstance(item, Mapping) and at not in out:
                out.append(at)
            _grounding_unheld(item, at, out, kept)
    elif isinstance(value, list):
        for item in value:
            _grounding_unheld(item, path, out, held)


def _grounding(kind: str, value: Any, origin: Origin) -> tuple[list[Block], list[Citation]]:
    """A candidate's grounding or URL context as a provider-run tool's call and result.

    Google Search and file search grounding name their queries, the chunks
    found (a web page or a retrieved passage) and which chunks support which
    span of the answer: the supports become the answer's citations, the
    chunks the result's sources. URL context names each URL it retrieved.
    """
    held = value if isinstance(value, Mapping) else {}
    if kind == "urlContextMetadata":
        sources: list[Citation] = []
        statuses: list[str] = []
        for item in _items(held.get("urlMetadata")):
            if isinstance(item, Mapping) and isinstance(item.get("retrievedUrl"), str):
                sources.append(Citation(item["retrievedUrl"]))
                status = item.get("urlRetrievalStatus")
                statuses.append(f"{item['retrievedUrl']}: {status}")
        urls = [s.url for s in sources]
        call = ServerToolCall.made(kind, "", origin, tool="url_context", input={"urls": urls})
        result = ServerToolResult.made(
            kind, "", origin, tool="url_context", output="\n".join(statuses), sources=sources
        )
        return [call, result], []
    chunks: list[Citation] = []
    tool = "web_search"
    for chunk in _items(held.get("groundingChunks")):
        found = chunk if isinstance(chunk, Mapping) else {}
        page = found.get("web") or found.get("retrievedContext") or found.get("maps") or {}
        if "retrievedContext" in found:
            tool = "file_search"
        page = page if isinstance(page, Mapping) else {}
        chunks.append(
            Citation(
                url=_text_of(page, "uri"),
                title=_text_of(page, "title"),
                cited_text=_text_of(page, "text"),
                source=_text_of(page, "fileSearchStore"),
                origin=origin,
            )
        )
    cited: list[Citation] = []
    for support in _items(held.get("groundingSupports")):
        if not isinstance(support, Mapping):
            continue
        segment = support.get("segment")
        segment = segment if isinstance(segment, Mapping) else {}
        start, end = segment.get("startIndex", 0), segment.get("endIndex")
        for number in _items(support.get("groundingChunkIndices")):
            if isinstance(number, int) and 0 <= number < len(chunks):
                cited.append(
                    msgspec.structs.replace(
                        chunks[number],
                        cited_text=_text_of(segment, "text"),
                        start=start if isinstance(start, int) else None,
                        end=end if isinstance(end, int) else None,
                    )
                )
    queries = held.get("webSearchQueries") or held.get("retrievalQueries") or []
    call = ServerToolCall.made(kind, "", origin, tool=tool, input={"queries": queries})
    result = ServerToolResult.made(kind, "", origin, tool=tool, sources=chunks)
    return [call, result], cited


def _text_of(value: Mapping[str, Any], key: str) -> str:
    found = value.get(key)
    return found if isinstance(found, str) else ""


_PART_META: Final = frozenset({"thoughtSignature", "thought", "partMetadata", "videoMetadata"})
"""Fields beside a part's one content field: they ride with it, never a part alone."""


def _part_line(kind: str, value: Any) -> str:
    """A native part's one honest line: the code and its output, or its kind."""
    if isinstance(value, Mapping):
        for key in ("code", "output", "name", "fileUri"):
            detail = value.get(key)
            if isinstance(detail, str) and detail:
                return f"[{kind}]\n{detail}"
    return f"[{kind}]"


def _stop_reason(finish: Any, calls: bool) -> StopReason:
    if calls and finish in (None, "STOP"):
        return "tool_use"
    if finish == "STOP":
        return "end_turn"
    if finish == "MAX_TOKENS":
        return "max_tokens"
    if finish in _REFUSALS:
        return "refusal"
    return "other"


def _usage(raw: Any, where: str) -> Usage:
    if raw is None:
        return Usage()
    usage = _mapping(raw, where)
    prompt = _count(usage, "promptTokenCount", where)
    tool_prompt = _count(usage, "toolUsePromptTokenCount", where)
    cached = _count(usage, "cachedContentTokenCount", where)
    thoughts = _count(usage, "thoughtsTokenCount", where)
    return Usage(
        input_tokens=max(prompt + tool_prompt - cached, 0),
        output_tokens=_count(usage, "candidatesTokenCount", where) + thoughts,
        cache_read_input_tokens=cached,
        reasoning_tokens=thoughts,
    )


def _raise_wire_error(body: Mapping[str, Any], where: str) -> None:
    error = body.get("error")
    if error is None:
        return
    if not isinstance(error, Mapping):
        raise ProviderError(f"{where}: the server reported an error: {_shown(error)}")
    message = error.get("message")
    code = error.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    kind = error.get("status")
    text = shorten(message, 300) if isinstance(message, str) and message else _shown(error)
    raise wire_error(
        f"{where}: the server reported an error: {text}",
        status=status,
        kind=kind if isinstance(kind, str) else None,
    )


_PATH_STEP: Final = re.compile(
    r"\.([^\W\d]\w*)"  # .name: RFC 9535's member-name shorthand
    r"|\[(\d+)\]"  # [0]: an array index
    r"|\['((?:[^'\\]|\\.)*)'\]"  # ['name']: a quoted member name
    r'|\["((?:[^"\\]|\\.)*)"\]'  # ["name"]
)
_MAX_INDEX: Final = 4096
"""The largest array index a streamed argument may name: a hostile stream makes no huge array."""

_PARTIAL_VALUES: Final = ("stringValue", "numberValue", "boolValue", "nullValue")
_CALL_PIECE_FIELDS: Final = frozenset({"name", "id", "args", "partialArgs", "willContinue"})
_PIECE_FIELDS: Final = frozenset({"jsonPath", "willContinue", *_PARTIAL_VALUES})


class _StreamedCall:
    """A function call whose arguments arrive as `partialArgs` over several chunks (Vertex).

    Each piece puts one value (`stringValue`, `numberValue`, `boolValue` or
    `nullValue`) at its `jsonPath` (RFC 9535: `$.a.b[0]`, `$['a b']`); a
    string may come in several pieces for one path (the piece before says
    `willContinue`), joined in order. Every argument takes its place in the
    arguments when it first appears, so they keep the order the model wrote
    them in. The call is whole at the first chunk whose call no longer says
    `willContinue`; a stream that finishes before that is truncated.
    """

    def __init__(self) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.signature: str | None = None
        self.args: dict[str, Any] = {}
        self.strings: dict[str, list[str]] = {}

    def take(
        self, part: Mapping[str, Any], call: Mapping[str, Any], where: str, lost: list[Downgrade]
    ) -> Mapping[str, Any] | None:
        """Add one chunk's piece; the whole part once the call is complete, else None.

        What a piece carries beside the call and its arguments is named in
        `lost`, as for a whole part.
        """
        unmodelled(part, _PART_FIELDS, where, lost)
        unmodelled(call, _CALL_PIECE_FIELDS, f"{where}.functionCall", lost)
        for key, attr in (("name", "name"), ("id", "call_id")):
            value = call.get(key)
            if isinstance(value, str) and value:
                setattr(self, attr, value)
        signature = part.get("thoughtSignature")
        if isinstance(signature, str) and signature:
            self.signature = signature
        args = call.get("args")
        if isinstance(args, Mapping):
            self.args.update(args)
        pieces = call.get("partialArgs") or []
        if not isinstance(pieces, list):
            raise ProviderError(f"{where}.functionCall.partialArgs must be an array")
        for i, piece in enumerate(pieces):
            self._piece(piece, f"{where}.functionCall.partialArgs[{i}]", lost)
        if call.get("willContinue"):
            return None
        for path, parts in self.strings.items():
            _set_path(self.args, path, "".join(parts), where)
        whole: dict[str, Any] = {"name": self.name, "args": self.args}
        if self.call_id is not None:
            whole["id"] = self.call_id
        out: dict[str, Any] = {"functionCall": whole}
        if self.signature is not None:
            out["thoughtSignature"] = self.signature
        return out

    def _piece(self, piece: Any, at: str, lost: list[Downgrade]) -> None:
        if not isinstance(piece, Mapping) or not isinstance(piece.get("jsonPath"), str):
            raise ProviderError(f"{at} needs a jsonPath string, got {_shown(piece)}")
        unmodelled(piece, _PIECE_FIELDS, at, lost)
        path = piece["jsonPath"]
        kinds = [k for k in _PARTIAL_VALUES if k in piece]
        if len(kinds) > 1:
            raise ProviderError(f"{at} holds {' and '.join(kinds)}: a piece is one value")
        if not kinds:
            return  # a piece with no value adds nothing
        kind = kinds[0]
        value = None if kind == "nullValue" else piece[kind]
        if kind == "stringValue":
            if not isinstance(value, str):
                raise ProviderError(f"{at}.stringValue must be a string, got {_shown(value)}")
            if path not in self.strings:
                _set_path(self.args, path, "", at)  # its place now; its text when whole
            self.strings.setdefault(path, []).append(value)
            return
        if kind == "numberValue" and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            raise ProviderError(f"{at}.numberValue must be a number, got {_shown(value)}")
        if kind == "boolValue" and not isinstance(value, bool):
            raise ProviderError(f"{at}.boolValue must be true or false, got {_shown(value)}")
        _set_path(self.args, path, value, at)


def _path_steps(path: str, where: str) -> list[str | int]:
    """The member names and indexes of a `jsonPath`, or a `ProviderError` saying where it breaks.

    The whole path must read: a selector carryall cannot place (a wildcard,
    a slice, a filter) is refused, never skipped.
    """
    shown = shorten(path, 60)
    if not path.startswith("$"):
        raise ProviderError(f"{where}: jsonPath {shown!r} does not begin at the root ($)")
    steps: list[str | int] = []
    at = 1
    while at < len(path):
        found = _PATH_STEP.match(path, at)
        if found is None:
            raise ProviderError(
                f"{where}: jsonPath {shown!r} is not a path of names and indexes "
                f"($.a['b'][0]): it breaks at character {at} ({shorten(path[at:], 20)!r})"
            )
        name, index, single, double = found.groups()
        if index is not None:
            if int(index) > _MAX_INDEX:
                raise ProviderError(f"{where}: jsonPath {shown!r} indexes past {_MAX_INDEX}")
            steps.append(int(index))
        elif name is not None:
            steps.append(name)
        else:
            # As a JSON string: RFC 9535 escapes names as JSON does, and a
            # single-quoted name escapes its quote rather than a double one.
            if single is not None:
                double = single.replace('"', '\\"').replace("\\'", "'")
            try:
                steps.append(json.loads(f'"{double}"'))
            except ValueError:
                raise ProviderError(
                    f"{where}: jsonPath {shown!r} has a name with a broken escape"
                ) from None
        at = found.end()
    if not steps:
        raise ProviderError(f"{where}: jsonPath {shown!r} names no argument")
    return steps


def _set_path(target: dict[str, Any], path: str, value: Any, where: str) -> None:
    """Put `value` at a `jsonPath` in `target`, making the objects and arrays on the way.

    A path that runs through a value of another shape is a `ProviderError`.
    """
    steps = _path_steps(path, where)
    try:
        _put(target, steps, value)
    except (TypeError, AttributeError, KeyError, IndexError):
        raise ProviderError(
            f"{where}: jsonPath {shorten(path, 60)!r} runs through a value of another shape"
        ) from None


def _put(target: dict[str, Any], steps: list[str | int], value: Any) -> None:
    holder: Any = target
    for step, after in itertools.pairwise(steps):
        empty: Any = [] if isinstance(after, int) else {}
        if isinstance(step, int):
            if len(holder) <= step:
                holder.extend([None] * (step + 1 - len(holder)))
            if holder[step] is None:
                holder[step] = empty
            holder = holder[step]
        else:
            holder = holder.setdefault(step, empty)
    last = steps[-1]
    if isinstance(last, int) and len(holder) <= last:
        holder.extend([None] * (last + 1 - len(holder)))
    holder[last] = value


# The fields of an answer and of its candidate that this codec reads (or
# counts as bookkeeping); any other is reported, by its path.
_ANSWER_FIELDS: Final = frozenset(
    {"candidates", "usageMetadata", "modelVersion", "promptFeedback", "responseId"}
    | {"createTime", "modelStatus", "sdkHttpResponse", "automaticFunctionCallingHistory"}
)
_CANDIDATE_FIELDS: Final = frozenset(
    {"content", "finishReason", "index", "safetyRatings", "avgLogprobs", "tokenCount"}
    | {"logprobsResult", "finishMessage", *GROUNDING}
)
# Read past, kept in no block: the server's note on why the answer stopped.
_CANDIDATE_UNKEPT: Final = frozenset({"finishMessage"})
_CONTENT_FIELDS: Final = frozenset({"role", "parts"})
_PART_FIELDS: Final = frozenset({"text", "thought", "thoughtSignature", "functionCall"})


_LOGPROBS_FIELDS: Final = frozenset({"chosenCandidates", "topCandidates", "logProbabilitySum"})
_TOKEN_FIELDS: Final = frozenset({"token", "tokenId", "logProbability"})


class _Logprobs:
    """A candidate's token probabilities (`logprobsResult`, `avgLogprobs`) as `Logprobs`.

    `chosenCandidates` are the answer's tokens in order; `topCandidates`, a
    list of the likeliest tokens for each of them at the same position. A
    stream's chunks each give the tokens of their piece, so the tokens add
    up in order; the summaries (`avgLogprobs`, `logProbabilitySum`) are the
    last chunk's, which speaks for the whole answer as its usage does.
    """

    def __init__(self) -> None:
        self.tokens: list[TokenLogprob] = []
        self.average: float | None = None
        self.total: float | None = None

    def read(self, candidate: Mapping[str, Any], where: str, lost: list[Downgrade]) -> None:
        average = candidate.get("avgLogprobs")
        if average is not None:
            self.average = _number(average, f"{where}.avgLogprobs")
        result = candidate.get("logprobsResult")
        if result is None:
            return
        where = f"{where}.logprobsResult"
        held = _mapping(result, where)
        unmodelled(held, _LOGPROBS_FIELDS, where, lost)
        if held.get("logProbabilitySum") is not None:
            self.total = _number(held["logProbabilitySum"], f"{where}.logProbabilitySum")
        chosen = _array(held.get("chosenCandidates"), f"{where}.chosenCandidates")
        tops = _array(held.get("topCandidates"), f"{where}.topCandidates")
        if len(tops) > len(chosen):
            raise ProviderError(
                f"{where}: {len(tops)} topCandidates for {len(chosen)} chosenCandidates; "
                "each position has one chosen token"
            )
        for i, raw in enumerate(chosen):
            token = _token(raw, f"{where}.chosenCandidates[{i}]", lost)
            if i < len(tops):
                at = f"{where}.topCandidates[{i}]"
                top = _mapping(tops[i], at)
                unmodelled(top, frozenset({"candidates"}), at, lost)
                found = _array(top.get("candidates"), f"{at}.candidates")
                likeliest = tuple(
                    _token(item, f"{at}.candidates[{j}]", lost) for j, item in enumerate(found)
                )
                token = msgspec.structs.replace(token, top=likeliest)
            self.tokens.append(token)

    def held(self) -> Logprobs | None:
        if not self.tokens and self.average is None and self.total is None:
            return None
        return Logprobs(tokens=tuple(self.tokens), average=self.average, total=self.total)


def _token(raw: Any, where: str, lost: list[Downgrade]) -> TokenLogprob:
    """One `LogprobsResult.Candidate` as a `TokenLogprob`.

    The wire's JSON leaves out a field at its zero value, so a token with
    no `logProbability` is a certain one (0.0) and one with no `token` is
    the empty string; a missing `tokenId` stays unknown (None).
    """
    held = _mapping(raw, where)
    unmodelled(held, _TOKEN_FIELDS, where, lost)
    token = held.get("token", "")
    if not isinstance(token, str):
        raise ProviderError(f"{where}.token must be a string, got {_shown(token)}")
    token_id = held.get("tokenId")
    if token_id is not None and (isinstance(token_id, bool) or not isinstance(token_id, int)):
        raise ProviderError(f"{where}.tokenId must be an integer, got {_shown(token_id)}")
    logprob = _number(held.get("logProbability", 0.0), f"{where}.logProbability")
    return TokenLogprob(token=token, logprob=logprob, token_id=token_id)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProviderError(f"{where} must be a number, got {_shown(value)}")
    return float(value)


def _array(value: Any, where: str) -> list[Any]:
    """A list field (absent or null: empty), else a `ProviderError` naming `where`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProviderError(f"{where} must be an array, got {_shown(value)}")
    return value


class _Answer:
    """An answer's blocks as parts arrive, whole or chunk by chunk: adjacent texts join."""

    def __init__(self, endpoint: str = "") -> None:
        self.endpoint = endpoint
        self.lost: list[Downgrade] = []
        self.blocks: list[Block] = []
        self.streamed: _StreamedCall | None = None
        self.minted = [0]
        self.finish: Any = None
        self.usage = Usage()
        self.raw_usage: dict[str, Any] | None = None
        """The last `usageMetadata` as the wire sent it (a stream's last chunk has the totals)."""
        self.model: str | None = None
        self.blocked: str | None = None
        self.grounding: dict[str, dict[str, Any]] = {}
        self.logprobs = _Logprobs()

    def chunk(self, data: Any, where: str) -> str:
        body = _mapping(data, where)
        _raise_wire_error(body, where)
        unmodelled(body, _ANSWER_FIELDS, where, self.lost)
        model = body.get("modelVersion")
        if isinstance(model, str) and model:
            self.model = model
        if body.get("usageMetadata") is not None:
            self.usage = _usage(body["usageMetadata"], f"{where}.usageMetadata")
            self.raw_usage = dict(body["usageMetadata"])
        feedback = body.get("promptFeedback")
        if isinstance(feedback, Mapping) and isinstance(feedback.get("blockReason"), str):
            self.blocked = feedback["blockReason"]
        candidates = body.get("candidates")
        if candidates is None:
            return ""
        if not isinstance(candidates, list):
            raise ProviderError(f"{where}.candidates must be an array, got {_shown(candidates)}")
        if not candidates:
            return ""
        where = f"{where}.candidates[0]"
        candidate = _mapping(candidates[0], where)
        unmodelled(candidate, _CANDIDATE_FIELDS, where, self.lost, unkept=_CANDIDATE_UNKEPT)
        self.logprobs.read(candidate, where, self.lost)
        for kind in GROUNDING:
            value = candidate.get(kind)
            if isinstance(value, Mapping):
                # A stream may give it in pieces, the later naming more.
                self.grounding.setdefault(kind, {}).update(value)
        finish = candidate.get("finishReason")
        if finish is not None:
            if not isinstance(finish, str):
                raise ProviderError(f"{where}.finishReason must be a string")
            self.finish = finish
        content = candidate.get("content")
        if content is None:
            return ""
        held = _mapping(content, f"{where}.content")
        unmodelled(held, _CONTENT_FIELDS, f"{where}.content", self.lost)
        parts = held.get("parts") or []
        if not isinstance(parts, list):
            raise ProviderError(f"{where}.content.parts must be an array, got {_shown(parts)}")
        shown: list[str] = []
        for i, raw in enumerate(parts):
            origin = Origin(DIALECT, self.endpoint, self.model or "")
            at = f"{where}.content.parts[{i}]"
            call = raw.get("functionCall") if isinstance(raw, Mapping) else None
            if isinstance(call, Mapping) and (
                self.streamed is not None or "partialArgs" in call or call.get("willContinue")
            ):
                # A call whose arguments stream in pieces: whole once it stops continuing.
                self.streamed = self.streamed or _StreamedCall()
                raw = self.streamed.take(raw, call, at, self.lost)
                if raw is None:
                    continue
                self.streamed = None
            if isinstance(raw, Mapping) and ("text" in raw or "functionCall" in raw):
                unmodelled(raw, _PART_FIELDS, at, self.lost, block=len(self.blocks))
            for block in _part_blocks(
                raw, f"{where}.content.parts[{i}]", self.minted, ProviderError, origin
            ):
                self._add(block)
                if isinstance(block, Text):
                    shown.append(block.text)
        return "".join(shown)

    def _grounded(self, blocks: list[Block], lost: list[Downgrade]) -> list[Block]:
        """The answer with what it rests on: the search ahead of the text, its citations on it.

        The supports' spans count over the whole answer's text, so the
        citations ride on its last text block (adjacent text parts are
        already one); what of the grounding that form does not hold is
        named in `lost`.
        """
        origin = Origin(DIALECT, self.endpoint, self.model or "")
        ran: list[Block] = []
        cited: list[Citation] = []
        unheld: list[str] = []
        for kind, value in self.grounding.items():
            held, citations = _grounding(kind, value, origin)
            ran += held
            cited += citations
            _grounding_unheld(value, f"candidate.{kind}", unheld)
        if unheld:
            reason = f"{', '.join(unheld)}: what the answer rested on, not kept"
            lost.append(Downgrade(0, "field", reason))
        last = max((i for i, b in enumerate(blocks) if type(b) is Text), default=None)
        if last is not None and cited:
            text: Text = blocks[last]  # type: ignore[assignment]
            blocks[last] = Text(text.text, (*text.citations, *cited))
        first = next((i for i, b in enumerate(blocks) if type(b) is Text), len(blocks))
        return [*blocks[:first], *ran, *blocks[first:]]

    def _add(self, block: Block) -> None:
        last = self.blocks[-1] if self.blocks else None
        if type(block) is Text and type(last) is Text:
            self.blocks[-1] = Text(last.text + block.text)
        elif type(block) is Thinking and type(last) is Thinking and not last.signature:
            self.blocks[-1] = Thinking(last.text + block.text, block.signature, block.origin)
        else:
            self.blocks.append(block)

    def response(self) -> Response:
        if self.streamed is not None:
            name = self.streamed.name or "(unnamed)"
            raise ProviderError(
                f"the answer ended while function call {name!r} still said willContinue: "
                "its arguments are truncated",
                retryable=True,
            )
        blocks = list(self.blocks)
        lost = list(self.lost)  # the answer may be asked for twice: the report is made anew
        if self.grounding:
            blocks = self._grounded(blocks, lost)
        calls = any(isinstance(b, ToolUse) for b in blocks)
        refusal: str | None = None
        stop = _stop_reason(self.finish, calls)
        if self.blocked is not None and not blocks:
            stop, refusal = "refusal", f"the prompt was blocked ({self.blocked})"
        elif stop == "refusal" and not any(isinstance(b, Text) for b in blocks):
            refusal = f"the answer was stopped ({self.finish})"
        if refusal is not None and not any(isinstance(b, Text) for b in blocks):
            blocks.append(Text(refusal))
        if not blocks:
            blocks.append(Text(""))
        return Response(
            message=answer_message(blocks, "Gemini answer"),
            stop_reason=stop,
            usage=self.usage,
            model=self.model,
            refusal=refusal,
            raw_usage=self.raw_usage,
            logprobs=self.logprobs.held(),
            downgrades=tuple(lost),
        )


def decode_response(data: Mapping[str, Any], *, endpoint: str = "") -> Response:
    """A `GenerateContentResponse` as a `Response`; an error body is a `ProviderError`.

    Signatures are stamped with their origin: this dialect, `endpoint` (the
    transport's host) and the model version the answer names.
    """
    answer = _Answer(endpoint)
    answer.chunk(data, "response")
    if answer.finish is None and answer.blocked is None and not answer.blocks:
        candidates = data.get("candidates") if isinstance(data, Mapping) else None
        if not candidates:
            raise ProviderError("response: no candidates and no prompt feedback")
    return answer.response()


class StreamDecoder:
    """Decodes `streamGenerateContent` chunks (each a partial response) into a `Response`.

    Adjacent text parts across chunks join into one `Text` (thoughts into
    one `Thinking`, up to the part that carries its signature); the last
    chunk carries the `finishReason` and the usage.
    """

    def __init__(self, target: Target = DEFAULT_TARGET) -> None:
        self._answer = _Answer(target.endpoint)
        self._chunks = 0

    def feed(self, chunk: Mapping[str, Any] | str) -> str:
        """Take one chunk; return the text it made newly visible."""
        self._chunks += 1
        if isinstance(chunk, str) and chunk.strip() == "[DONE]":
            return ""
        if self._answer.finish is not None and isinstance(chunk, Mapping):
            candidates = chunk.get("candidates")
            if candidates:
                raise ProviderError(f"stream chunk {self._chunks}: a candidate after the finish")
        return self._answer.chunk(chunk, f"stream chunk {self._chunks}")

    def response(self) -> Response:
        """The whole answer; a `ProviderError` when the stream never finished it."""
        if self._answer.finish is None and self._answer.blocked is None:
            raise ProviderError(
                f"the stream ended after {self._chunks} chunk(s) without a finishReason: "
                "the response is truncated",
                retryable=True,
            )
        return self._answer.response()


def decode_stream(chunks: Iterable[Mapping[str, Any] | str], *, endpoint: str = "") -> Response:
    """A whole stream of chunks as one `Response` (see `StreamDecoder`)."""
    decoder = StreamDecoder(Target(endpoint=endpoint))
    for chunk in chunks:
        decoder.feed(chunk)
    return decoder.response()


# -- importing histories ----------------------------------------------------


def decode_messages(
    data: Sequence[Mapping[str, Any]], *, system: Any = None
) -> tuple[str | None, Imported]:
    """A Gemini `contents` array (and its `systemInstruction`, `system`) read into blocks.

    A `functionResponse` answers the call of the same id in the model turn
    before, else the call of the same name there (the first not yet
    answered); a user turn's results come first in its message.
    """
    # A lone surrogate (a `\ud800` escape with no partner) is repaired where it enters.
    contents, system_instruction = repair_surrogates(data), repair_surrogates(system)
    prompt: str | None = None
    if system_instruction is not None:
        prompt = "".join(_texts(system_instruction, "systemInstruction"))
    if isinstance(contents, str | bytes) or not isinstance(contents, Sequence):
        raise BlockError(f"contents must be an array, got {_shown(contents)}")
    out: list[Message] = []
    lost: list[Downgrade] = []
    minted = [0]
    for index, raw in enumerate(contents):
        where = f"contents[{index}]"
        if not isinstance(raw, Mapping):
            raise BlockError(f"{where} must be an object, got {_shown(raw)}")
        role = raw.get("role", "user")
        parts = raw.get("parts")
        if not isinstance(parts, list):
            raise BlockError(f"{where}.parts must be an array, got {_shown(parts)}")
        unmodelled(raw, _CONTENT_FIELDS, where, lost, index=len(out))
        # The REST API and Vertex take snake_case as well as camelCase.
        given, parts = parts, [camel_keys(part) for part in parts]
        if role == "model":
            blocks: list[Block] = []
            for i, part in enumerate(parts):
                made = _part_blocks(part, f"{where}.parts[{i}]", minted, BlockError, _IMPORTED)
                blocks.extend(_spelt_parts(made, given[i], part, len(parts) == 1))
            out.append(Message("assistant", tuple(blocks or [Text("")])))
        elif role == "user":
            calls = out[-1].tool_uses() if out and out[-1].role == "assistant" else []
            out.append(_import_user(parts, where, calls, given))
        else:
            raise BlockError(f"{where}: role {_shown(role)} has no block form (user or model)")
    return prompt, Imported(out, lost)


def _import_user(
    parts: list[Any], where: str, calls: list[ToolUse], given: Sequence[Any] = ()
) -> Message:
    results: list[ToolResult] = []
    rest: list[Block] = []
    answered: set[str] = set()
    for i, raw in enumerate(parts):
        part_where = f"{where}.parts[{i}]"
        if not isinstance(raw, Mapping):
            raise BlockError(f"{part_where} must be an object, got {_shown(raw)}")
        if "functionResponse" in raw:
            result, riders = _import_response(raw["functionResponse"], part_where, calls, answered)
            # How the part was written, where not as this codec writes it.
            written = given[i] if i < len(given) and isinstance(given[i], Mapping) else raw
            words = [key for key in written if key not in raw]  # its keys in snake_case
            response = raw["functionResponse"]
            if isinstance(response, Mapping) and response.get("id") is None:
                words.append(_NO_ID)
            spelling = spelling_of(_IMPORTED, None, " ".join(words))
            if spelling is not None:
                result = msgspec.structs.replace(result, spelling=spelling)
            results.append(result)
            # A result's images ride after the round's results, as every tool's do.
            rest.extend(riders)
        elif "inlineData" in raw:
            rest.append(_import_inline(raw["inlineData"], f"{part_where}.inlineData"))
        elif "fileData" in raw:
            rest.append(_import_file(raw["fileData"], f"{part_where}.fileData"))
        elif isinstance(raw.get("text"), str):
            rest.append(Text(raw["text"]))
        else:
            kind = next((key for key in raw if key not in _PART_META), None)
            if kind is None:
                raise BlockError(f"{part_where}: this part has no block form")
            rest.append(_native_part(kind, raw, _IMPORTED))
    return Message("user", (*results, *rest) or (Text(""),))


def _import_response(
    raw: Any, where: str, calls: list[ToolUse], answered: set[str]
) -> tuple[ToolResult, list[Block]]:
    """A function response as a result, and the images and documents its `parts` carried."""
    if not isinstance(raw, Mapping):
        raise BlockError(f"{where}.functionResponse must be an object, got {_shown(raw)}")
    riders: list[Block] = []
    inner = raw.get("parts")
    if inner is not None:
        if not isinstance(inner, list):
            raise BlockError(f"{where}.functionResponse.parts must be an array")
        for i, part in enumerate(inner):
            at = f"{where}.functionResponse.parts[{i}]"
            part = camel_keys(part)
            if not isinstance(part, Mapping):
                raise BlockError(f"{at} must be an object, got {_shown(part)}")
            if "inlineData" in part:
                riders.append(_import_inline(part["inlineData"], f"{at}.inlineData"))
            elif "fileData" in part:
                riders.append(_import_file(part["fileData"], f"{at}.fileData"))
            else:
                raise BlockError(f"{at}: this part has no block form")
    return _import_result(raw, where, calls, answered), riders


def _import_result(
    raw: Mapping[str, Any], where: str, calls: list[ToolUse], answered: set[str]
) -> ToolResult:
    call_id = raw.get("id")
    name = raw.get("name")
    if not isinstance(call_id, str) or not call_id:
        matches = [c for c in calls if c.name == name and c.id not in answered]
        if not matches:
            raise BlockError(f"{where}: a function response for {_shown(name)} answers no call")
        call_id = matches[0].id
    answered.add(call_id)
    response = raw.get("response", {})
    if not isinstance(response, Mapping):
        raise BlockError(f"{where}.functionResponse.response must be an object")
    if set(response) == {"error"}:
        return ToolResult(call_id, _as_text(response["error"]), is_error=True)
    if set(response) == {"output"}:
        output = response["output"]
        structured = None if isinstance(output, str) else output
        return ToolResult(call_id, _as_text(output), structured=structured)
    return ToolResult(call_id, _as_text(dict(response)))


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _import_inline(raw: Any, where: str) -> Block:
    if not isinstance(raw, Mapping):
        raise BlockError(f"{where} must be an object, got {_shown(raw)}")
    media_type = raw.get("mimeType")
    data = raw.get("data")
    if not isinstance(media_type, str) or not isinstance(data, str):
        raise BlockError(f"{where} needs mimeType and data strings")
    known = media_type in IMAGE_MEDIA_TYPES or media_type in DOCUMENT_MEDIA_TYPES
    if not known:
        # An audio clip or a video has no block: named, not lost.
        return Text(image_placeholder(media_type))
    if len(data) % 4 or _BASE64.fullmatch(data) is None:
        raise BlockError(f"{where}: the data is not canonical base64")
    if media_type in DOCUMENT_MEDIA_TYPES:
        return Document(media_type, data)
    return Image(media_type, data)


def _import_file(raw: Any, where: str) -> Block:
    """A `fileData` part: an image or a document by the URI Gemini fetches."""
    if not isinstance(raw, Mapping):
        raise BlockError(f"{where} must be an object, got {_shown(raw)}")
    media_type = raw.get("mimeType")
    uri = raw.get("fileUri")
    if not isinstance(media_type, str) or not isinstance(uri, str):
        raise BlockError(f"{where} needs mimeType and fileUri strings")
    try:
        if media_type in IMAGE_MEDIA_TYPES:
            return Image(media_type, "", url=uri)
        if media_type in DOCUMENT_MEDIA_TYPES:
            return Document(media_type, url=uri)
    except BlockError as exc:
        raise BlockError(f"{where}: {exc}") from None
    return Text(image_placeholder(media_type, uri))


def _texts(content: Any, where: str) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, Mapping) or not isinstance(content.get("parts"), list):
        raise BlockError(f"{where} must be a string or an object with parts")
    texts: list[str] = []
    for i, part in enumerate(content["parts"]):
        if not isinstance(part, Mapping) or not isinstance(part.get("text"), str):
            raise BlockError(f"{where}.parts[{i}] must be a text part")
        texts.append(part["text"])
    return texts


def _items(value: Any) -> list[Any]:
    """A field read as a list of entries: anything else (absent, null, a stray value) as none."""
    return value if isinstance(value, list) else []

"""OpenAI Responses: the `POST /v1/responses` wire, on the same blocks.

`encode_request` turns a `Request` into the JSON body of `/v1/responses`;
`decode_response`, `StreamDecoder` and `decode_stream` turn that endpoint's
answers back into a `Response`; `decode_messages` reads a Responses `input`
item list someone already holds into blocks.

The wire:

- The system prompt is `instructions` (an empty one is not sent); the
  history is the `input` item list; `store: false`, so nothing depends on
  items the server kept and no item needs an id.
- A user message's tool results go first, each a `function_call_output`
  item paired to its call by `call_id`, its output the result text (an
  error result is that text behind `ERROR_PREFIX`, as on Chat Completions).
  The message's text, images and documents follow as one `message` item
  of `input_text`, `input_image` (a `data:` URL, or the image's own URL)
  and `input_file` parts (a PDF as `file_data` with its name, or by
  `file_url`); a plain-text document goes as its text, reported
  (`prepare`). Imported `input_file` parts read back as `Document`s, an
  `input_image` by URL as an `Image` held by that URL (`Image.from_url`).
- Tool-made images ride that user message after the results, never inside
  a `function_call_output`, although this wire could hold them there: Chat
  Completions and llama-server cannot, and a history has to read the same
  on every wire it may be continued on (SPEC §1).
- An assistant message becomes items in its block order: each text a
  `message` item with string content (the form that needs no item id),
  each tool call a `function_call` item with JSON-string arguments. Its
  thinking goes back as a `reasoning` item, right before the item it led
  to, only to the origin that made it (`WIRE`, `prepare`); other thinking
  stays in the transcript but off the wire and is reported as a
  downgrade, because a reasoning item the server did not write is refused.
  An item the server wrote (a hosted tool's call, compaction) goes back to
  its origin as it came, in the API's input form of it: a field that form
  has no place for (a web search's `api` sources, a file search result's
  `vector_store_id`) is left off and named, block by block.
- Tools are `function` tools with `strict: false` (carryall's schemas are
  not written for strict mode); `tool_choice` only with tools.
- `max_output_tokens` is the token limit; `reasoning.effort` is sent when
  `Request.effort` is set, and `include: ["reasoning.encrypted_content"]`
  when thinking was asked for, so that a `store: false` history can carry
  its reasoning forward.

Decoding: a `reasoning` item with `encrypted_content` becomes an `Opaque`
block of kind `reasoning` (the item whole, stamped with its origin; its
`content` texts, else its `summary` texts, are its text line), one without
becomes `Thinking` of that text; `message` items' `output_text` parts become `Text`,
their annotations its citations (a `refusal` part is the refusal, and its text
when nothing else was said); a hosted tool's item (web search, file search,
code interpreter, MCP, image generation) becomes a `ServerToolCall` holding
the item and a `ServerToolResult` of what it gave back;
`function_call` items become `ToolUse` by `call_id`, arguments that are not
JSON counted in `Response.malformed_tool_args`. Blocks keep the order of the
output items. `status: incomplete` for `max_output_tokens` is `max_tokens`,
a refusal part `refusal`, calls `tool_use`, `completed` `end_turn`,
anything else `other`. `input_tokens` excludes the cached prompt tokens,
which go in `cache_read_input_tokens`; `output_tokens` includes reasoning.
The `output_text` parts' token probabilities (`logprobs`, when the request
asked with `include: ["message.output_text.logprobs"]`) are
`Response.logprobs`, the parts' tokens in their order; a stream's are the
finished response's, else its text deltas' `logprobs` in order.

Every wire parser here answers hostile input with a `ProviderError` naming
the place (or, for `decode_messages`, a `BlockError`); item types the block
model does not model are kept whole as `Opaque` blocks and unknown fields
named in the report, so new server features do not break old clients.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from carryall._json import (
    KeptItems,
    One,
    Payload,
    body_bytes,
    builtins,
    load_json,
    repair_surrogates,
)
from carryall._text import shorten
from carryall.blocks import (
    DOCUMENT_MEDIA_TYPES,
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
    document_placeholder,
)
from carryall.errors import BlockError, HistoryError, ProviderError, wire_error
from carryall.providers import caching, hosted, structured
from carryall.providers import prompt as prompt_mode
from carryall.providers._common import (
    UNKEPT,
    Wire,
    _shown,
    answer_message,
    answered_call,
    imported_call,
    openai_tool_choice,
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
from carryall.providers._wire import DATA_URL as _DATA_URL
from carryall.providers._wire import arguments as _arguments
from carryall.providers._wire import count as _count
from carryall.providers._wire import import_user_image as _import_user_image
from carryall.providers._wire import mapping as _mapping
from carryall.providers._wire import optional_str as _optional_str
from carryall.providers._wire import raise_wire_error as _raise_wire_error
from carryall.providers._wire import token_logprobs as _token_logprobs
from carryall.providers.openai import ERROR_PREFIX
from carryall.providers.options import (
    NO_OPTIONS,
    PROMPT_NO_PARALLEL,
    left_off,
    merge_extra,
    openai_strict_and_budget,
    tier_left_off,
)

__all__ = [
    "DIALECT",
    "PromptStreamDecoder",
    "StreamDecoder",
    "decode",
    "decode_messages",
    "decode_prompt_response",
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

DIALECT: Final = "responses"
"""The name this wire goes by in an origin, a backend and the switch matrix."""

REASONING: Final = "reasoning"
"""The `Opaque.kind` of an encrypted reasoning item, echoed whole to its origin."""

_IMPORTED: Final = Origin(DIALECT, "", "")
"""The origin of what an imported input list holds: this wire, no endpoint or model known."""

_REASONING_KEYS: Final = ("type", "id", "summary", "content", "encrypted_content")
_ENCRYPTED: Final = "reasoning.encrypted_content"


WIRE: Final = Wire(DIALECT, signed=True, image_urls=True, pdf=True, pdf_urls=True)
"""What this wire takes natively: its own encrypted reasoning back, nothing signed by others.

A reasoning item is opaque: its `encrypted_content` means something to the
OpenAI endpoint and model that made it only, and a reasoning item without
it (another backend's thinking) is refused by OpenAI and mistaken for the
model's own by llama-server; `prepare` leaves every other thinking off and
reports it.
"""


# -- the codec contract ------------------------------------------------------
# The same names with the same signatures in every wire module
# (`encode_body`, `encode_bytes`, `decode`, `StreamDecoder`,
# `decode_messages`), each taking what it needs of one `Target`.


def encode_body(request: Request, target: Target) -> Encoded:
    """The `/v1/responses` body for `request`, and every downgrade made to write it (`encode`).

    Prompt mode (a model without native tool calls) is held to its JSON
    schema when `target.constrained`; `target.dialect` `llama-server` is
    llama-server's reading of this wire.
    """
    llama = target.dialect == "llama-server"
    return encode(request, target.caps, constrained=target.constrained, llama=llama)


def encode_bytes(
    request: Request, target: Target, *, stream: bool = False, kept: KeptItems | None = None
) -> Sent:
    """`encode_body`'s body as the bytes sent (a stream asked for when `stream`) (`encode_sent`).

    With `kept` (native tool calls only), the messages the last body
    written with it began with are copied in as the JSON written then.
    """
    return encode_sent(
        request,
        target.caps,
        constrained=target.constrained,
        llama=target.dialect == "llama-server",
        stream=stream,
        kept=kept,
    )


def decode(data: Mapping[str, Any], target: Target) -> Response:
    """A `response` object as a `Response`, its origins at `target.endpoint` (`decode_response`).

    The answer to a request with native tool calls; prompt mode's is read by
    `decode_prompt_response` and `PromptStreamDecoder`.
    """
    return decode_response(data, endpoint=target.endpoint)


# -- encoding ---------------------------------------------------------------


def encode_request(
    request: Request, caps: Capabilities, *, constrained: bool = False, llama: bool = False
) -> dict[str, Any]:
    """The `/v1/responses` body for a request (`encode`'s body)."""
    return encode(request, caps, constrained=constrained, llama=llama).body


def encode(
    request: Request, caps: Capabilities, *, constrained: bool = False, llama: bool = False
) -> Encoded:
    """The `/v1/responses` body for a request, and every downgrade made to write it.

    The history is validated, image-limited, blinded and fitted to this wire
    first (`prepare` with `WIRE`): thinking goes back only to the origin
    (this dialect, `request.endpoint`, `request.model`) that made it.

    A model without native tool calls (`caps.native_tools` false) gets prompt
    mode on this wire: the history rewritten by `prompt.plain_request`, and,
    when `constrained`, its answer held to `prompt.response_schema` by
    `text.format`, and on llama-server (`llama`), which reads no `text.format`
    there, also by the top-level `json_schema` it does read.
    """
    return _encoded(request, caps, constrained, llama, sent=False)


def encode_sent(
    request: Request,
    caps: Capabilities,
    *,
    constrained: bool = False,
    llama: bool = False,
    stream: bool = False,
    kept: KeptItems | None = None,
) -> Sent:
    """`encode`'s body as the bytes sent (a stream asked for when `stream`), and its report.

    The transport's entry point, and the same JSON as `encode`'s body byte
    for byte: the same item objects, written by msgspec as they are instead
    of converted to dicts first. With `kept` (used with native tool calls
    only), the messages the last body written with it began with are copied
    in as the JSON written then (`KeptItems`): the same bytes.
    """
    encoded = _encoded(request, caps, constrained, llama, sent=True, kept=kept)
    return Sent(sent_bytes(encoded.body, stream), encoded.downgrades)


def _encoded(
    request: Request,
    caps: Capabilities,
    constrained: bool,
    llama: bool,
    *,
    sent: bool,
    kept: KeptItems | None = None,
) -> Encoded:
    if not caps.native_tools and request.tools:
        inner, downgrades = prompt_mode.plain_request(request, caps, WIRE, constrained=constrained)
        body = _encode(inner, _items(inner.messages, 0, len(inner.messages)), sent, llama)
        if constrained:
            schema = prompt_mode.response_schema(
                request.tools, request.tool_choice, answer=structured.checked(request)
            )
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": prompt_mode.SCHEMA_NAME,
                    "schema": schema,
                    "strict": False,
                }
            }
            if llama:
                body["json_schema"] = schema
        body = _keyed(body, request, llama)
        placed = place_options(
            request, body, llama=llama, prompt="constrained" if constrained else "plain"
        )
        return Encoded(body, (*placed, *downgrades) if placed else downgrades)
    prepared = prepare(request, caps, WIRE)
    messages = prepared.messages
    downgrades = prepared.downgrades
    lost = _input_items(messages, prepared.irregular)
    if lost:
        downgrades = tuple(sorted((*downgrades, *lost), key=lambda d: d.index))
    if kept is not None and sent:
        items = kept.items(
            messages, payload_messages(prepared), lambda start, end: _items(messages, start, end)
        )
    else:
        items = _items(messages, 0, len(messages))
    body = _keyed(_encode(request, items, sent, llama), request, llama)
    placed = place_options(request, body, llama=llama)
    return Encoded(body, (*placed, *downgrades) if placed else downgrades)


def _keyed(body: dict[str, Any], request: Request, llama: bool) -> dict[str, Any]:
    """`body` with the conversation's `prompt_cache_key`, where one goes (never to llama-server)."""
    key = None if llama else caching.prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
    return body


_SERVICE_TIERS: Final = ("auto", "default", "flex", "scale", "priority", "fast", "ultrafast")
_LLAMA_ONLY: Final = ("top_k", "seed", "presence_penalty", "frequency_penalty")


def place_options(
    request: Request, body: dict[str, Any], *, llama: bool = False, prompt: str = ""
) -> list[Downgrade]:
    """Write `request.options`, strict tools and the thinking budget as `/v1/responses` names them.

    The Responses API has `temperature`, `top_p`, `parallel_tool_calls`,
    `service_tier`, `store` (over the `false` this codec sends) and each
    function tool's `strict`; no `top_k`, `seed`, stop sequences,
    penalties or thinking budget. llama-server (`llama`) reads the body as
    Chat Completions parameters, so those go under their Chat Completions
    names there, and `service_tier` and `store` are left off. `prompt` is
    prompt mode (`"constrained"` when a JSON schema holds the answer), as
    `openai.place_options` reads it. What is left off is named.
    """
    wire = "llama-server" if llama else "responses"
    lost = openai_strict_and_budget(request, body, wire, llama=llama, prompt=prompt, nested=False)
    options = request.options
    if options == NO_OPTIONS:
        return lost
    for name in ("temperature", "top_p"):
        value = getattr(options, name)
        if value is not None:
            body[name] = value
    for name in _LLAMA_ONLY:
        value = getattr(options, name)
        if value is not None:
            if llama:
                body[name] = value
            else:
                lost.append(left_off(name, wire))
    if options.stop:
        if llama:
            body["stop"] = list(options.stop)
        else:
            lost.append(left_off("stop", wire))
    if options.service_tier is not None:
        if llama:
            lost.append(left_off("service_tier", wire))
        elif options.service_tier not in _SERVICE_TIERS:
            lost.append(tier_left_off(options.service_tier, wire, _SERVICE_TIERS))
        else:
            body["service_tier"] = options.service_tier
    if options.store is not None:
        if llama:
            lost.append(left_off("store", wire))
        else:
            body["store"] = options.store
    if options.parallel_tool_calls is not None and request.tools:
        if prompt:
            lost.append(left_off("parallel_tool_calls", wire, PROMPT_NO_PARALLEL))
        else:
            body["parallel_tool_calls"] = options.parallel_tool_calls
    # The extra is the Responses wire's, whichever server reads it.
    lost += merge_extra(body, request, "responses", ("stream",))
    return lost


def _items(messages: Sequence[Message], start: int, end: int) -> list[Any]:
    """The input items of `messages[start:end]`, as the wire objects below."""
    items: list[Any] = []
    append = items.append
    # This loop runs over the whole history on every request: blocks are
    # told apart by exact type, as `survey_history` tells them, and the
    # commonest turns (one result; a remark and one call) go the short way,
    # as the general writers below would write them.
    for index in range(start, end):
        message = messages[index]
        content = message.content
        if message.role == "user":
            if len(content) == 1:
                only: Any = content[0]  # told apart by exact type, as below
                kind = type(only)
                if kind is ToolResult:
                    append(_output(only))
                    continue
                if kind is Text and only.spelling is None:
                    append(_MessageItem("user", One(_InputText(only.text))))
                    continue
            _encode_user(message, append)
            continue
        if len(content) == 2:
            said, use = content
            if (
                type(said) is Text
                and type(use) is ToolUse
                and said.text
                and said.spelling is None
                and use.spelling is None
            ):
                append(_MessageItem("assistant", said.text))
                append(_FunctionCall(use.id, use.name, _arguments(use, index)))
                continue
        _encode_assistant(message, index, append)
    return items


def _encode(request: Request, items: list[Any], sent: bool, llama: bool = False) -> dict[str, Any]:
    """The body around the messages' `items`: the wire objects when `sent`, else their dicts."""
    if not items:
        raise HistoryError(0, "the request has no messages: nothing to answer")
    body: dict[str, Any] = {
        "model": request.model,
        "input": items if sent else builtins(items),
        "store": False,
    }
    if request.system:
        body["instructions"] = request.system
    body["max_output_tokens"] = request.max_tokens
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
                "strict": False,
            }
            for spec in request.tools
        ]
        choice = openai_tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
    if request.hosted_tools:
        body["tools"] = [*body.get("tools", ()), *hosted.responses_tools(request.hosted_tools)]
    if request.effort is not None:
        body["reasoning"] = {"effort": request.effort}
    if request.thinking:
        body["include"] = [_ENCRYPTED]
    structured.add_responses(body, request, llama=llama)
    return body


def encode_request_bytes(
    request: Request,
    caps: Capabilities,
    *,
    constrained: bool = False,
    llama: bool = False,
    stream: bool = False,
) -> bytes:
    """`encode_request`'s body as the bytes sent, asking for a stream when `stream` is true."""
    return encode_sent(request, caps, constrained=constrained, llama=llama, stream=stream).data


def sent_bytes(body: Mapping[str, Any], stream: bool = False) -> bytes:
    """A finished body (`encode`'s) as the bytes sent, asking for a stream when `stream` is true."""
    return body_bytes({**body, "stream": True} if stream else body)


# -- the wire's items --------------------------------------------------------
# What `_encode` builds, one class per item or part, as the OpenAI codec
# builds its messages: msgspec writes them straight from their fields, they
# are not tracked by the garbage collector and are a fraction of a dict's
# size, and a tagged class writes its `type` first, as the wire has it; an
# UNSET field is left out. `encode` turns them into the dicts it returns.


class _MessageItem(msgspec.Struct, gc=False, tag_field="type", tag="message"):
    role: str
    content: str | One | list[Any]


class _FunctionCall(msgspec.Struct, gc=False, tag_field="type", tag="function_call"):
    call_id: str
    name: str
    arguments: str


class _CallOutput(msgspec.Struct, gc=False, tag_field="type", tag="function_call_output"):
    call_id: str
    output: str


class _InputText(msgspec.Struct, gc=False, tag_field="type", tag="input_text"):
    text: str


class _InputImage(msgspec.Struct, gc=False, tag_field="type", tag="input_image"):
    image_url: str | Payload
    detail: str


class _InputFile(msgspec.Struct, gc=False, tag_field="type", tag="input_file"):
    filename: str | UnsetType = UNSET
    file_data: str | Payload | UnsetType = UNSET
    file_url: str | UnsetType | None = UNSET


def _output(result: ToolResult) -> _CallOutput | dict[str, Any]:
    output = ERROR_PREFIX + result.content if result.is_error else result.content
    if result.spelling is not None:  # `prepare` kept it: this wire's own
        item = {"type": "function_call_output", "call_id": result.tool_use_id, "output": output}
        return spelled(item, result.spelling)
    return _CallOutput(result.tool_use_id, output)


# How a message item was written (`Spelling.form`), where it is not this codec's own form
# for its role (a user item typed with a list of parts, an assistant item typed with a string).
_EASY: Final = "easy"
"""No `type`, the content a string: the easy input message."""
_UNTYPED: Final = "untyped"
"""No `type`, the content a list of parts."""
_STRING: Final = "string"
"""`type: message`, the content a string."""
_PARTS: Final = "parts"
"""`type: message`, the content a list of parts (an assistant's `output_text` parts)."""
_PART: Final = "part"
"""A further part of the item the spelled block before it opened."""


def _message_item(role: str, parts: list[Any], spelling: Spelling) -> dict[str, Any]:
    """A message item of `parts` laid out as its spelling says, with the fields it kept."""
    form = spelling.form
    content: Any = parts
    if form in (_EASY, _STRING) and len(parts) == 1:
        # A lone text part (an `input_text` part, or an `output_text` one) as its string.
        only = parts[0]
        text = only.get("text") if isinstance(only, dict) else getattr(only, "text", None)
        content = parts if text is None else text
    item: dict[str, Any] = {"role": role, "content": content}
    if form not in (_EASY, _UNTYPED):
        item = {"type": "message", **item}
    return spelled(item, spelling)


def _output_text(block: Text) -> dict[str, Any]:
    """An `output_text` part as the API writes one: its annotations (this origin's), or none."""
    notes = [json.loads(c.raw) for c in block.citations if c.raw]
    return {"type": "output_text", "annotations": notes, "text": block.text}


def _encode_user(message: Message, append: Callable[[Any], None]) -> None:
    parts: list[Any] = []
    spelling: Spelling | None = None
    for block in message.content:
        kind = type(block)
        if kind is ToolResult:
            append(_output(block))  # type: ignore[arg-type]
        elif kind is Text:
            given = block.spelling  # type: ignore[union-attr]
            if given is not None and given.form != _PART:
                # A spelled text opens an item of its own, laid out as it was.
                if parts:
                    append(_user_item(parts, spelling))
                parts, spelling = [], given
            parts.append(_InputText(block.text))  # type: ignore[union-attr]
        elif kind is Image:
            image: Image = block  # type: ignore[assignment]
            # `prepare` let a URL through: this wire fetches it itself.
            if image.url is not None and not image.data:
                parts.append(_InputImage(image.url, "auto"))
            else:
                parts.append(_InputImage(Payload.data_url(image.media_type, image.data), "auto"))
        elif kind is Document:
            document: Document = block  # type: ignore[assignment]
            # `prepare` let only PDFs through, by their bytes or by URL.
            if document.data:
                name = document.title or document.source or "document.pdf"
                data = Payload.data_url(document.media_type, document.data)
                parts.append(_InputFile(filename=name, file_data=data))
            else:
                parts.append(_InputFile(file_url=document.url))
    if parts:
        append(_user_item(parts, spelling))


def _user_item(parts: list[Any], spelling: Spelling | None) -> Any:
    if spelling is not None:
        return _message_item("user", parts, spelling)
    return _MessageItem("user", One(parts[0]) if len(parts) == 1 else parts)


def _encode_assistant(message: Message, index: int, append: Callable[[Any], None]) -> None:
    written = False
    opened: list[Any] | None = None  # the parts of the spelled item being written
    for block in message.content:
        kind = type(block)
        # Only a text's spelling lays out an item here (a call's is `_function_call`'s).
        spelling = block.spelling if kind is Text else None  # type: ignore[union-attr]
        if spelling is not None:
            # `prepare` kept it: this wire's own item, laid out as it was.
            said: Text = block  # type: ignore[assignment]
            part = _output_text(said)
            if spelling.form == _PART and opened is not None:
                opened.append(part)
                continue
            item = _message_item("assistant", [part], spelling)
            opened = item["content"] if isinstance(item["content"], list) else None
            append(item)
            written = True
            continue
        opened = None
        if kind is Text:
            text = block.text  # type: ignore[union-attr]
            if text:
                # The easy message form: an output message item would need the id
                # the server gave it, and a `store: false` history has none.
                append(_MessageItem("assistant", text))
                written = True
        elif kind is ToolUse:
            call: ToolUse = block  # type: ignore[assignment]
            append(_function_call(call, index))
            written = True
        elif kind is Opaque or kind is ServerToolCall or kind is ServerToolResult:
            # `prepare` kept it: this origin's own item (reasoning, a hosted
            # tool's call, compaction), as it came; a result with no raw of
            # its own rides in its call's item.
            raw: str = block.raw  # type: ignore[union-attr]
            if raw:
                append(json.loads(raw))
                written = True
        elif kind is Thinking and block.signature:  # type: ignore[union-attr]
            # `prepare` kept it: this origin's own plain reasoning, under its item id.
            thought: Thinking = block  # type: ignore[assignment]
            append(
                {
                    "type": "reasoning",
                    "id": thought.signature,
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": thought.text}],
                }
            )
    if not written:
        # A turn with nothing this wire carries still took its turn: an
        # empty message keeps the user turns around it apart.
        append(_MessageItem("assistant", ""))


# -- the items the server wrote, as input --------------------------------------
# A hosted tool's item (and every other item the server writes that carryall
# keeps whole) goes back to its origin as the API sent it, less what the
# API's input form of that item has no place for: the output form of an item
# holds fields the input form does not (a web search's sources of type `api`,
# a file search result's `vector_store_id`), and the API's own next request
# leaves them off. What is left off is named, block by block.


class _OneOf(NamedTuple):
    """An object of one of several forms, told apart by its `type`: each form's fields."""

    forms: Mapping[str, _Fields]


_Shape: TypeAlias = "Mapping[str, _Shape] | _OneOf | None"
"""What a value may hold: an object's fields (each with its own shape), one of several forms,
or None for a value taken as it is (a string, a number, a free-form object)."""

_Fields: TypeAlias = Mapping[str, _Shape]


def _fields(*names: str, **nested: _Shape) -> dict[str, _Shape]:
    """An object's fields: `names` taken as they are, `nested` by their own shapes."""
    return {**dict.fromkeys(names), **nested}


def _one_of(**forms: _Fields) -> _OneOf:
    return _OneOf(forms)


_CALLER: Final = _one_of(direct=_fields("type"), program=_fields("caller_id", "type"))

_INPUT_FIELDS: Final[Mapping[str, _Fields]] = {
    "web_search_call": _fields(
        "id",
        "status",
        "type",
        action=_one_of(
            search=_fields("queries", "query", "type", sources=_one_of(url=_fields("type", "url"))),
            open_page=_fields("type", "url"),
            find_in_page=_fields("pattern", "type", "url"),
        ),
    ),
    "file_search_call": _fields(
        "id",
        "queries",
        "status",
        "type",
        results=_fields("attributes", "file_id", "filename", "score", "text"),
    ),
    "code_interpreter_call": _fields(
        "code",
        "container_id",
        "id",
        "status",
        "type",
        outputs=_one_of(image=_fields("type", "url"), logs=_fields("logs", "type")),
    ),
    "mcp_call": _fields(
        "approval_request_id",
        "arguments",
        "id",
        "name",
        "output",
        "server_label",
        "status",
        "type",
        error=_one_of(
            http_error=_fields("code", "message", "type"),
            mcp_protocol_error=_fields("code", "message", "type"),
            mcp_tool_execution_error=_fields("content", "type"),
        ),
    ),
    "mcp_list_tools": _fields(
        "error",
        "id",
        "server_label",
        "type",
        tools=_fields("annotations", "description", "input_schema", "name"),
    ),
    "mcp_approval_request": _fields("arguments", "id", "name", "server_label", "type"),
    "image_generation_call": _fields(
        "action",
        "background",
        "id",
        "output_format",
        "quality",
        "result",
        "revised_prompt",
        "size",
        "status",
        "type",
        error=_fields(
            "code",
            "message",
            "param",
            "type",
            moderation_details=_fields("categories", "moderation_stage"),
        ),
        svg_usage=_fields(
            "input_tokens", "model", "output_tokens", "reasoning_tokens", "total_tokens"
        ),
    ),
    "tool_search_call": _fields("arguments", "call_id", "execution", "id", "status", "type"),
    "compaction": _fields("encrypted_content", "id", "type"),
    "shell_call": _fields(
        "call_id",
        "id",
        "status",
        "type",
        action=_fields("commands", "max_output_length", "timeout_ms"),
        caller=_CALLER,
        environment=_one_of(
            container_reference=_fields("container_id", "type"),
            local=_fields("type", skills=_fields("description", "name", "path")),
        ),
    ),
    "shell_call_output": _fields(
        "call_id",
        "id",
        "max_output_length",
        "status",
        "type",
        caller=_CALLER,
        output=_fields(
            "stderr",
            "stdout",
            outcome=_one_of(exit=_fields("exit_code", "type"), timeout=_fields("type")),
        ),
    ),
    "apply_patch_call": _fields(
        "call_id",
        "id",
        "status",
        "type",
        caller=_CALLER,
        operation=_one_of(
            create_file=_fields("diff", "path", "type"),
            delete_file=_fields("path", "type"),
            update_file=_fields("diff", "path", "type"),
        ),
    ),
    "apply_patch_call_output": _fields("call_id", "id", "output", "status", "type", caller=_CALLER),
    "local_shell_call": _fields(
        "call_id",
        "id",
        "status",
        "type",
        action=_one_of(
            exec=_fields("command", "env", "timeout_ms", "type", "user", "working_directory")
        ),
    ),
}
"""What the API's input form of each item the server writes takes, field by field, nested.

The fields of the `input` item types (`ResponseInputItemParam`) of the
official `openai` SDK, for the item types the server writes and carryall
keeps whole; `tests/providers/test_responses_input_forms.py` derives the same
table from the SDK's types and fails when they part. An item type not here
goes back as it came.
"""

_INPUT_LEFT_OFF: Final = (
    "the {kind} item goes back without {field}: the Responses API's input form of the item "
    "has no place for it"
)

_GONE: Final = object()
"""What `_input_form` gives for a value the input form has no place for at all."""


def _input_items(messages: list[Message], irregular: Sequence[int]) -> list[Downgrade]:
    """Fit each server-written item `messages` send back to its input form, naming what is left.

    Only irregular messages hold such items (an `Opaque` block makes a
    message irregular), and `prepare` has left only this origin's; a block
    that changes is replaced in `messages` by one holding its input form.
    """
    lost: list[Downgrade] = []
    for index in irregular:
        message = messages[index]
        if message.role != "assistant":
            continue
        content: list[Block] | None = None
        for at, block in enumerate(message.content):
            if not isinstance(block, Opaque) or not block.raw:
                continue
            fields = _INPUT_FIELDS.get(block.kind)
            if fields is None:
                continue
            left: list[str] = []
            item = _input_form(json.loads(block.raw), fields, "", left)
            if not left:
                continue
            for field in left:
                reason = _INPUT_LEFT_OFF.format(kind=block.kind, field=field)
                lost.append(Downgrade(index, "opaque", reason, at))
            if content is None:
                content = list(message.content)
            raw = json.dumps(item, ensure_ascii=False)
            content[at] = msgspec.structs.replace(block, raw=raw)
        if content is not None:
            messages[index] = Message(message.role, tuple(content))
    return lost


def _input_form(value: Any, shape: _Shape, path: str, left: list[str]) -> Any:
    """`value` as `shape` takes it: each thing it has no place for left off and named in `left`.

    A list is its entries, each fitted; an entry of a form the shape does
    not have is left off whole, and a list left with nothing is left off
    too (the API's own next request sends no emptied list). `value` itself
    when nothing changed.
    """
    if shape is None:
        return value
    if type(value) is list:
        kept: list[Any] = []
        changed = False
        for i, entry in enumerate(value):
            fitted = _input_form(entry, shape, f"{path}[{i}]", left)
            if fitted is not entry:
                changed = True
            if fitted is not _GONE:
                kept.append(fitted)
        if not changed:
            return value
        return kept if kept else _GONE
    if type(value) is not dict:
        return value
    fields: _Fields
    if isinstance(shape, _OneOf):
        form = value.get("type")
        found = shape.forms.get(form) if isinstance(form, str) else None
        if found is None:
            shown = shorten(json.dumps(value, ensure_ascii=False), 120)
            left.append(f"{path} {shown} (a form it does not have)")
            return _GONE
        fields = found
    else:
        fields = shape
    out: dict[str, Any] = {}
    changed = False
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in fields:
            shown = shorten(json.dumps(item, ensure_ascii=False), 80)
            left.append(f"{where} ({shown})")
            changed = True
            continue
        fitted = _input_form(item, fields[key], where, left)
        if fitted is not item:
            changed = True
        if fitted is not _GONE:
            out[key] = fitted
    return out if changed else value


def _function_call(call: ToolUse, index: int) -> _FunctionCall | dict[str, Any]:
    if call.spelling is not None:  # `prepare` kept it: this wire's own
        item = {"type": "function_call", "call_id": call.id, "name": call.name}
        return spelled({**item, "arguments": _arguments(call, index)}, call.spelling)
    return _FunctionCall(call.id, call.name, _arguments(call, index))


# -- decoding responses -----------------------------------------------------


class _Answer:
    """The blocks of one answer as its output items are read, in their order."""

    __slots__ = ("blocks", "logprobs", "lost", "malformed", "origin", "refusal", "seen", "texts")

    def __init__(self, origin: Origin | None = None) -> None:
        self.origin = origin
        self.lost: list[Downgrade] = []
        self.blocks: list[Block] = []
        self.texts = 0
        self.refusal: list[str] = []
        self.malformed = 0
        self.seen: set[str] = set()
        self.logprobs: list[TokenLogprob] = []

    def item(self, raw: Any, where: str) -> None:
        item = _mapping(raw, where)
        kind = item.get("type")
        if kind == "message":
            first = len(self.blocks)
            self._message(item, where)
            self._spell(item, first, where)
        elif kind == "reasoning":
            thinking = _reasoning(item, where, ProviderError, self.origin)
            if thinking is not None:
                self.blocks.append(thinking)
            else:
                # Reasoning of no text and no encrypted content: nothing to carry but its id.
                unmodelled(item, _REASONING_FIELDS, where, self.lost, unkept=_ITEM_ID)
        elif kind == "function_call":
            unmodelled(item, _CALL_FIELDS, where, self.lost, block=len(self.blocks))
            call_id = _optional_str(item, "call_id", where) or f"call_{len(self.seen)}"
            if call_id in self.seen:
                raise ProviderError(f"{where}: call_id {call_id!r} is used twice")
            self.seen.add(call_id)
            name = _optional_str(item, "name", where)
            arguments = _optional_str(item, "arguments", where) or ""
            call, bad = answered_call(call_id, name, arguments, where)
            self.malformed += int(bad)
            # The item's own fields (its id, a status), for its origin: a continuation
            # sends the call back as it came.
            extra = {k: v for k, v in item.items() if k not in _CALL_MODELLED}
            spelling = spelling_of(self.origin or _IMPORTED, extra)
            if spelling is not None:
                call = msgspec.structs.replace(call, spelling=spelling)
            self.blocks.append(call)
        elif not isinstance(kind, str):
            raise ProviderError(f"{where}: an output item needs a type string, got {_shown(kind)}")
        else:
            # Hosted tools' calls and results, compaction, and whatever comes
            # next: kept whole for this origin, one line for everyone else.
            self.blocks.extend(_native_item(kind, item, self.origin))

    def _message(self, item: Mapping[str, Any], where: str) -> None:
        content = item.get("content")
        if content is None:
            return
        if not isinstance(content, list):
            raise ProviderError(f"{where}.content must be an array, got {_shown(content)}")
        for i, raw in enumerate(content):
            part_where = f"{where}.content[{i}]"
            part = _mapping(raw, part_where)
            kind = part.get("type")
            if kind == "output_text":
                text = _optional_str(part, "text", part_where) or ""
                at = len(self.blocks)
                unmodelled(part, _TEXT_FIELDS, part_where, self.lost, block=at)
                where_lp = f"{part_where}.logprobs"
                self.logprobs += _token_logprobs(part.get("logprobs"), where_lp, self.lost)
                annotations = part.get("annotations")
                if text:
                    self.blocks.append(_cited(text, annotations, self.origin))
                    self.texts += 1
                elif annotations:
                    reason = f"{part_where}.annotations: sources of no text; not kept"
                    self.lost.append(Downgrade(0, "field", reason, len(self.blocks)))
            elif kind == "refusal":
                refusal = _optional_str(part, "refusal", part_where) or ""
                self.refusal.append(refusal)
            elif not isinstance(kind, str):
                raise ProviderError(f"{part_where}: a part needs a type string")
            else:
                reason = f"{part_where}: a {shorten(kind, 40)} part carryall does not model"
                self.lost.append(Downgrade(0, "part", reason, len(self.blocks)))

    def _spell(self, item: Mapping[str, Any], first: int, where: str) -> None:
        """The texts an output message became (from `first` on) holding its own fields.

        The first holds the item's id, status and phase, for its origin, so a
        continuation sends the message back as it came; each further text is
        marked a part of it. With no text to hold them, they are named; with
        no id (a server that gives none), the easy form goes back, as it needs none.
        """
        texts = [i for i in range(first, len(self.blocks)) if type(self.blocks[i]) is Text]
        if not texts or not item.get("id"):
            unmodelled(item, _MESSAGE_FIELDS, where, self.lost, block=first, unkept=_ITEM_ID)
            return
        extra = {k: v for k, v in item.items() if k not in _ITEM_MODELLED}
        origin = self.origin or _IMPORTED
        spelling = spelling_of(origin, extra, _PARTS)
        rest = Spelling(origin, _PART)
        for n, i in enumerate(texts):
            self.blocks[i] = msgspec.structs.replace(
                self.blocks[i],
                spelling=spelling if n == 0 else rest,
            )

    def response(
        self,
        status: Any,
        incomplete: Any,
        usage: Usage,
        model: str | None,
        raw_usage: dict[str, Any] | None = None,
    ) -> Response:
        refusal = "".join(self.refusal) or None
        blocks = list(self.blocks)
        if refusal and not self.texts:
            blocks.insert(sum(isinstance(b, Thinking | Opaque) for b in blocks), Text(refusal))
        if not blocks:
            blocks.append(Text(""))
        calls = any(isinstance(b, ToolUse) for b in blocks)
        return Response(
            message=answer_message(blocks, "Responses answer"),
            stop_reason=_stop_reason(status, incomplete, calls, refusal is not None),
            usage=usage,
            model=model,
            refusal=refusal,
            malformed_tool_args=self.malformed,
            raw_usage=raw_usage,
            logprobs=Logprobs(tokens=tuple(self.logprobs)) if self.logprobs else None,
            downgrades=tuple(self.lost),
        )


# The fields of the items and parts this codec takes apart; any other is reported.
_MESSAGE_FIELDS: Final = frozenset({"type", "id", "role", "status", "content"})
_TEXT_FIELDS: Final = frozenset({"type", "text", "annotations", "logprobs"})
_CALL_FIELDS: Final = frozenset({"type", "id", "call_id", "name", "arguments", "status"})
_REASONING_FIELDS: Final = frozenset(_REASONING_KEYS) | {"status"}
# Read past, kept in no block: an output item's own id (a message or a call is
# sent back in the easy form, which needs none).
_ITEM_ID: Final = frozenset({"id"})
# A response object's own fields: the answer, its status and usage, and the
# request's settings echoed back (bookkeeping, nothing of the conversation).
_RESPONSE_FIELDS: Final = frozenset(
    {"access_programs", "background", "completed_at", "conversation", "created_at", "error"}
    | {"id", "image", "incomplete_details", "input_transformations", "instructions"}
    | {"max_output_tokens", "max_tool_calls", "metadata", "model", "moderation", "object"}
    | {"output", "parallel_tool_calls", "previous_response_id", "prompt"}
    | {"prompt_cache_diagnostics", "prompt_cache_key", "prompt_cache_options"}
    | {"prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "status"}
    | {"temperature", "text", "tool_choice", "tool_usage", "tools", "top_logprobs", "top_p"}
    | {"truncation", "usage", "user", "store", "output_text"}
)


def _native_item(kind: str, item: Mapping[str, Any], origin: Origin | None) -> list[Block]:
    """An item this codec does not model as a message part, whole, for its origin.

    A hosted tool's item (`web_search_call`, `file_search_call`,
    `code_interpreter_call`, `mcp_call`, `image_generation_call`) holds its
    call and its result at once: it becomes a `ServerToolCall` holding the
    item, and a `ServerToolResult` (no raw of its own) when it gave back
    anything. Anything else is an `Opaque` with one line naming its type
    and what it names (a server's label, a name).
    """
    raw = json.dumps(item, ensure_ascii=False)
    hosted = _HOSTED.get(kind)
    if hosted is None:
        detail = ""
        for key in ("name", "server_label", "query", "code", "url"):
            value = item.get(key)
            if isinstance(value, str) and value:
                detail = value
                break
        line = f"[{kind}: {shorten(detail, 200)}]" if detail else f"[{kind}]"
        return [Opaque(kind, raw, origin, line)]
    ident = item.get("id")
    ident = ident if isinstance(ident, str) else ""
    name, given, output, sources, failed = _hosted_parts(kind, item)
    call = ServerToolCall.made(kind, raw, origin, tool=hosted, id=ident, name=name, input=given)
    if not (output or sources or failed):
        return [call]
    result = ServerToolResult.made(
        kind,
        "",
        origin,
        tool=hosted,
        call_id=ident,
        output=output,
        sources=sources,
        is_error=failed,
    )
    return [call, result]


_HOSTED: Final = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
    "mcp_call": "mcp",
    "image_generation_call": "image_generation",
}
"""The hosted tools' items, each by the common kind of its tool."""


def _hosted_parts(kind: str, item: Mapping[str, Any]) -> tuple[str, Any, str, list[Citation], bool]:
    """A hosted tool item's name, input, output, sources and failure, as each item spells them."""
    name = ""
    given: Any = None
    output: list[str] = []
    sources: list[Citation] = []
    failed = item.get("status") == "failed" or bool(item.get("error"))
    if kind == "web_search_call":
        action = item.get("action")
        if isinstance(action, Mapping):
            given = {k: v for k, v in action.items() if k != "sources"}
            for source in _entries(action.get("sources")):
                if isinstance(source, Mapping) and isinstance(source.get("url"), str):
                    sources.append(Citation(source["url"], _string(source.get("title"))))
    elif kind == "file_search_call":
        given = {"queries": item.get("queries") or []}
        for found in _entries(item.get("results")):
            if isinstance(found, Mapping):
                sources.append(
                    Citation(
                        title=_string(found.get("filename")),
                        cited_text=_string(found.get("text")),
                        source=_string(found.get("file_id")),
                    )
                )
    elif kind == "code_interpreter_call":
        given = {"code": _string(item.get("code"))}
        for out in _entries(item.get("outputs")):
            if isinstance(out, Mapping):
                logs, url = out.get("logs"), out.get("url")
                if isinstance(logs, str):
                    output.append(logs)
                elif isinstance(url, str):
                    sources.append(Citation(url, "image"))
    elif kind == "mcp_call":
        label, tool = _string(item.get("server_label")), _string(item.get("name"))
        name = f"{label}.{tool}" if label else tool
        arguments = item.get("arguments")
        ok, value = load_json(arguments) if isinstance(arguments, str) else (False, None)
        given = value if ok else arguments
        output.append(_string(item.get("output")))
        error = item.get("error")
        if error:
            output.append(error if isinstance(error, str) else json.dumps(error))
    elif kind == "image_generation_call":
        prompt = item.get("revised_prompt")
        given = {"prompt": prompt} if isinstance(prompt, str) else None
        if item.get("result"):
            output.append(f"(an image, {_string(item.get('output_format')) or 'png'})")
    return name, given, "\n".join(filter(None, output)), sources, failed


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _entries(value: Any) -> list[Any]:
    """A field read as a list of entries: anything else (absent, null, a stray value) as none."""
    return value if isinstance(value, list) else []


def _cited(text: str, annotations: Any, origin: Origin | None) -> Text:
    """An output text with its annotations as citations, each kept whole for its origin.

    `url_citation`, `file_citation`, `container_file_citation` and
    `file_path` name their sources apart; an annotation of a type not
    known is kept by its JSON alone.
    """
    if not isinstance(annotations, list) or not annotations:
        return Text(text)
    held: list[Citation] = []
    for note in annotations:
        c = note if isinstance(note, Mapping) else {}
        start, end = c.get("start_index"), c.get("end_index", c.get("index"))
        held.append(
            Citation(
                url=_string(c.get("url")),
                title=_string(c.get("title")) or _string(c.get("filename")),
                start=start if isinstance(start, int) else None,
                end=end if isinstance(end, int) else None,
                source=_string(c.get("file_id")),
                raw=json.dumps(note, ensure_ascii=False),
                origin=origin,
            )
        )
    return Text(text, tuple(held))


def _reasoning(
    item: Mapping[str, Any], where: str, error: type[Exception], origin: Origin | None
) -> Thinking | Opaque | None:
    """A reasoning item: `Opaque` when encrypted (the item whole), else `Thinking` of its text.

    An encrypted item goes back whole, its `id` with it (the SDK's item type
    requires one), to its origin only; its summary or raw text is the line
    every other reader gets. Plain reasoning text (llama-server, gpt-oss) is
    thinking stamped with its origin and holding the item's `id` as its
    signature: it goes back to the model that made it as a reasoning item
    (the id is the item's, meaningless to any other server), and as
    thinking to the wires that take anyone's.
    """
    texts: list[str] = []
    for key, kinds in (("content", ("reasoning_text",)), ("summary", ("summary_text",))):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise error(f"{where}.{key} must be an array, got {_shown(parts)}")
        for i, raw in enumerate(parts):
            if not isinstance(raw, Mapping) or raw.get("type") not in kinds:
                raise error(f"{where}.{key}[{i}] must be a {kinds[0]} part, got {_shown(raw)}")
            text = raw.get("text")
            if not isinstance(text, str):
                raise error(f"{where}.{key}[{i}].text must be a string, got {_shown(text)}")
            texts.append(text)
        if texts:
            break
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise error(f"{where}.encrypted_content must be a string, got {_shown(encrypted)}")
    text = "\n\n".join(texts)
    if encrypted:
        kept = {k: item[k] for k in _REASONING_KEYS if k in item}
        return Opaque(REASONING, json.dumps(kept, ensure_ascii=False), origin, text)
    if not text:
        return None
    item_id = item.get("id")
    if isinstance(item_id, str) and item_id:
        return Thinking(text, item_id, origin)
    return Thinking(text)


def _stop_reason(status: Any, incomplete: Any, calls: bool, refused: bool) -> StopReason:
    if calls:
        return "tool_use"
    if status == "incomplete":
        reason = incomplete.get("reason") if isinstance(incomplete, Mapping) else None
        if reason == "max_output_tokens":
            return "max_tokens"
        if reason == "content_filter":
            return "refusal"
        return "other"
    if refused:
        return "refusal"
    if status == "completed":
        return "end_turn"
    return "other"


def _usage(raw: Any, where: str) -> Usage:
    if raw is None:
        return Usage()
    usage = _mapping(raw, where)
    prompt = _count(usage, "input_tokens", where)
    cached = reasoning = 0
    details = usage.get("input_tokens_details")
    if details is not None:
        cached = _count(_mapping(details, f"{where}.input_tokens_details"), "cached_tokens", where)
    details = usage.get("output_tokens_details")
    if details is not None:
        at = f"{where}.output_tokens_details"
        reasoning = _count(_mapping(details, at), "reasoning_tokens", at)
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=_count(usage, "output_tokens", where),
        cache_read_input_tokens=cached,
        reasoning_tokens=reasoning,
    )


def decode_response(data: Mapping[str, Any], *, endpoint: str = "") -> Response:
    """A non-streamed `response` object as a `Response`.

    Encrypted reasoning is stamped with its origin: this dialect,
    `endpoint` (the transport's host) and the model the answer names. A
    body carrying an `error` object, or `status: failed`, is raised as the
    `ProviderError` it describes, with the server's message and status.
    """
    where = "response"
    body = _mapping(data, where)
    _raise_wire_error(body, where)
    if body.get("status") == "failed":
        raise ProviderError(f"{where}: the server reports the response failed", kind="failed")
    output = body.get("output")
    if not isinstance(output, list):
        raise ProviderError(f"{where}.output must be an array, got {_shown(output)}")
    model = _optional_str(body, "model", where)
    answer = _Answer(Origin(DIALECT, endpoint, model or ""))
    unmodelled(body, _RESPONSE_FIELDS, where, answer.lost)
    for i, raw in enumerate(output):
        answer.item(raw, f"{where}.output[{i}]")
    return answer.response(
        body.get("status"),
        body.get("incomplete_details"),
        _usage(body.get("usage"), f"{where}.usage"),
        model,
        # The wire's own figures, checked by `_usage` (a stream's come from its final response).
        dict(body["usage"]) if isinstance(body.get("usage"), Mapping) else None,
    )


# -- decoding streams -------------------------------------------------------


class StreamDecoder:
    """Decodes Responses stream events one at a time into a `Response`.

    Visible text comes from `response.output_text.delta` as it arrives; the
    answer itself is the finished response of `response.completed` (or
    `response.incomplete`), so a streamed and a non-streamed answer decode
    to the same blocks. When that event carries no output items (some
    servers leave them out), the items each `response.output_item.done`
    finished are used, in their output order; items never finished are
    built from their deltas. The token probabilities are the finished
    answer's too; when it holds none, those the text deltas carried, in
    their output order.
    """

    def __init__(self, target: Target = DEFAULT_TARGET) -> None:
        self._endpoint = target.endpoint
        self._final: Mapping[str, Any] | None = None
        self._done: dict[int, Any] = {}
        self._partial: dict[int, dict[str, Any]] = {}
        # The text deltas' token probabilities by output index, and what of them no field holds.
        self._logprobs: dict[int, list[TokenLogprob]] = {}
        self._lost: list[Downgrade] = []
        self._events = 0

    def feed(self, event: Mapping[str, Any] | str) -> str:
        """Take one event's payload; return the text it made newly visible."""
        self._events += 1
        where = f"stream event {self._events}"
        if isinstance(event, str) and event.strip() == "[DONE]":
            return ""
        body = _mapping(event, where)
        kind = body.get("type")
        if self._final is not None and kind not in (None, "[DONE]"):
            raise ProviderError(f"{where}: an event ({_shown(kind)}) after the response finished")
        if kind == "error" or kind == "response.failed":
            self._raise_error(body, where)
        _raise_wire_error(body, where)
        if kind in ("response.completed", "response.incomplete"):
            self._final = _mapping(body.get("response"), f"{where}.response")
            return ""
        index = body.get("output_index")
        if kind == "response.output_item.added":
            item = _mapping(body.get("item"), f"{where}.item")
            at = len(self._partial) if index is None else self._index(index, where)
            self._partial[at] = {**item, "_deltas": []}
        elif kind == "response.output_item.done":
            self._done[self._index(index, where)] = _mapping(body.get("item"), f"{where}.item")
        elif kind in (
            "response.output_text.delta",
            "response.function_call_arguments.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_text.delta",
            "response.refusal.delta",
        ):
            delta = body.get("delta")
            if not isinstance(delta, str):
                raise ProviderError(f"{where}.delta must be a string, got {_shown(delta)}")
            at = self._index(index, where)
            partial = self._partial.setdefault(at, {"_deltas": []})
            partial["_deltas"].append((kind, delta))
            if kind == "response.output_text.delta":
                tokens = _token_logprobs(body.get("logprobs"), f"{where}.logprobs", self._lost)
                self._logprobs.setdefault(at, []).extend(tokens)
                return delta
        return ""

    def _index(self, value: Any, where: str) -> int:
        # llama-server leaves `output_index` out: its items come one at a time.
        if value is None:
            return max((*self._partial, *self._done), default=0)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 4096:
            raise ProviderError(f"{where}: output_index must be 0 to 4096, got {_shown(value)}")
        return value

    @staticmethod
    def _raise_error(body: Mapping[str, Any], where: str) -> None:
        error: Any = body
        if body.get("type") == "response.failed":
            response = body.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
        elif isinstance(body.get("error"), Mapping):
            error = body["error"]
        if not isinstance(error, Mapping):
            raise ProviderError(f"{where}: the stream reported a failure")
        message = error.get("message")
        code = error.get("code")
        text = shorten(message, 300) if isinstance(message, str) and message else "no message"
        raise wire_error(
            f"{where}: the server reported an error: {text}",
            kind=code if isinstance(code, str) else None,
        )

    def response(self) -> Response:
        """The whole answer; a `ProviderError` when the stream never finished it."""
        if self._final is None:
            raise ProviderError(
                f"the stream ended after {self._events} event(s) without response.completed: "
                "the response is truncated",
                retryable=True,
            )
        final = self._final
        output = final.get("output")
        if not isinstance(output, list) or not output:
            indices = sorted(set(self._done) | set(self._partial))
            output = [self._done.get(i) or _from_deltas(self._partial[i]) for i in indices]
        answer = decode_response({**final, "output": output}, endpoint=self._endpoint)
        streamed = [t for i in sorted(self._logprobs) for t in self._logprobs[i]]
        if answer.logprobs is not None or not streamed:
            return answer
        return msgspec.structs.replace(
            answer,
            logprobs=Logprobs(tokens=tuple(streamed)),
            downgrades=answer.downgrades + tuple(self._lost),
        )


def _from_deltas(partial: Mapping[str, Any]) -> dict[str, Any]:
    """An output item that never got its `done` event, rebuilt from its deltas."""
    item = {k: v for k, v in partial.items() if k != "_deltas"}
    pieces: dict[str, list[str]] = {}
    for kind, delta in partial["_deltas"]:
        pieces.setdefault(kind, []).append(delta)
    if "response.function_call_arguments.delta" in pieces:
        item["arguments"] = "".join(pieces["response.function_call_arguments.delta"])
    text = "".join(pieces.get("response.output_text.delta", ()))
    refusal = "".join(pieces.get("response.refusal.delta", ()))
    if text or refusal:
        item["content"] = [{"type": "output_text", "text": text}] if text else []
        if refusal:
            item["content"].append({"type": "refusal", "refusal": refusal})
    reasoning = "".join(
        pieces.get("response.reasoning_text.delta", ())
        or pieces.get("response.reasoning_summary_text.delta", ())
    )
    if reasoning:
        item["summary"] = [{"type": "summary_text", "text": reasoning}]
    return item


class PromptStreamDecoder:
    """`StreamDecoder` for prompt mode on this wire: the calls read out of the finished text.

    It shows no text while streaming: until the answer is whole, text and a
    call written in the convention (or the constrained JSON) cannot be told
    apart, and a call must never be shown as prose.
    """

    def __init__(self, target: Target = DEFAULT_TARGET) -> None:
        self._inner = StreamDecoder(target)
        self._constrained = target.constrained

    def feed(self, event: Mapping[str, Any] | str) -> str:
        """Take one event's payload; prompt mode makes no text visible before the end."""
        self._inner.feed(event)
        return ""

    def response(self) -> Response:
        """The whole answer with its calls read out of its text."""
        final = self._inner._final
        salt = final.get("id") if final is not None else None
        return prompt_mode.read_calls(
            self._inner.response(),
            salt if isinstance(salt, str) else "",
            constrained=self._constrained,
        )


def decode_prompt_response(
    data: Mapping[str, Any], *, constrained: bool = False, endpoint: str = ""
) -> Response:
    """A prompt-mode answer on this wire: `decode_response`, then the calls read out of its text."""
    salt = data.get("id") if isinstance(data, Mapping) else None
    return prompt_mode.read_calls(
        decode_response(data, endpoint=endpoint),
        salt if isinstance(salt, str) else "",
        constrained=constrained,
    )


def decode_stream(events: Iterable[Mapping[str, Any] | str], *, endpoint: str = "") -> Response:
    """A whole stream of event payloads as one `Response` (see `StreamDecoder`)."""
    decoder = StreamDecoder(Target(endpoint=endpoint))
    for event in events:
        decoder.feed(event)
    return decoder.response()


# -- importing histories ----------------------------------------------------


def decode_messages(
    data: Sequence[Mapping[str, Any]] | str, *, system: Any = None
) -> tuple[str | None, Imported]:
    """A Responses `input` (a string or an item list) read into a system prompt and messages.

    Grouped as the block model does: a turn's reasoning, messages and
    function calls are one assistant message; the `function_call_output`
    results after it and the user input that follows them one user message.
    `system` (the body's `instructions`) comes first; `system` and
    `developer` messages join it, by a blank line.
    A `BlockError` names the index of anything that has no block form.
    """
    # A lone surrogate (a `\ud800` escape with no partner) is repaired where it enters.
    items, instructions = repair_surrogates(data), repair_surrogates(system)
    systems: list[str] = []
    if instructions is not None:
        if not isinstance(instructions, str):
            raise BlockError(f"instructions must be a string, got {_shown(instructions)}")
        if instructions:
            systems.append(instructions)
    if isinstance(items, str):
        return ("\n\n".join(systems) or None), Imported([Message.user(items)])
    if isinstance(items, bytes) or not isinstance(items, Sequence):
        raise BlockError(f"input must be a string or an array of items, got {_shown(items)}")
    out: list[Message] = []
    lost: list[Downgrade] = []
    role: Literal["user", "assistant"] | None = None
    blocks: list[Block] = []

    def close() -> None:
        nonlocal role, blocks
        if role is not None:
            out.append(Message(role, tuple(blocks or [Text("")])))
        role, blocks = None, []

    def turn(wanted: Literal["user", "assistant"]) -> list[Block]:
        nonlocal role
        if role != wanted:
            close()
            role = wanted
        return blocks

    for index, raw in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(raw, Mapping):
            raise BlockError(f"{where}: an item must be an object, got {_shown(raw)}")
        kind = raw.get("type", "message" if "role" in raw else None)
        if kind == "message":
            item_role = raw.get("role")
            made: list[Block] = []
            if item_role in ("system", "developer"):
                unmodelled(raw, _MESSAGE_FIELDS, where, lost, index=len(out), unkept=_ITEM_ID)
                systems.append("".join(_texts(raw.get("content"), f"{where}.content")))
                continue
            if item_role == "user":
                made = _user_parts(raw.get("content"), f"{where}.content")
            elif item_role == "assistant":
                content = raw.get("content")
                notes = _annotations(content)
                texts = _texts(content, f"{where}.content")
                paired = zip(texts, notes, strict=True)
                made = [_cited(text, note, _IMPORTED) for text, note in paired if text]
                # The message these blocks join: the open one, or the next after it.
                at = len(out) + (role is not None and role != item_role)
                _unkept_logprobs(content, f"{where}.content", lost, at)
            else:
                raise BlockError(f"{where}: role {_shown(item_role)} has no block form")
            spelt = _spelt_item(raw, item_role, made)
            if spelt is None:
                unmodelled(raw, _MESSAGE_FIELDS, where, lost, index=len(out), unkept=_ITEM_ID)
            turn(item_role).extend(made if spelt is None else spelt)
        elif kind == "reasoning":
            # Read from a file: this wire's, no endpoint or model known.
            thinking = _reasoning(raw, where, BlockError, _IMPORTED)
            if thinking is not None:
                turn("assistant").append(thinking)
            else:
                unmodelled(raw, _REASONING_FIELDS, where, lost, index=len(out), unkept=_ITEM_ID)
        elif kind == "function_call":
            turn("assistant").append(_import_call(raw, where))
        elif kind == "function_call_output":
            results = turn("user")
            if all(type(b) is Text and not b.text.strip() for b in results):
                # An empty user message between a call and its output says nothing:
                # the output still answers the call in the next user message.
                results.clear()
            if any(not isinstance(b, ToolResult | Image | Document) for b in results):
                # Results after user text start a new message: results come first in one.
                close()
                results = turn("user")
            result, riders = _import_output(raw, where)
            # Results first, the images they carried after the round's results.
            at = sum(isinstance(b, ToolResult) for b in results)
            results.insert(at, result)
            results.extend(riders)
        elif isinstance(kind, str):
            # A hosted tool's call or result, compaction: the model's, kept whole.
            turn("assistant").extend(_native_item(kind, raw, _IMPORTED))
        else:
            raise BlockError(f"{where}: item type {_shown(kind)} has no block form")
    close()
    return ("\n\n".join(systems) or None), Imported(out, lost)


def _unkept_logprobs(content: Any, where: str, lost: list[Downgrade], index: int) -> None:
    """Name each text part's token probabilities: a history holds no place for them.

    An answer's are `Response.logprobs`; in a history someone holds they
    say how a past answer was sampled, which no request sends back.
    """
    for i, part in enumerate(content if isinstance(content, list) else ()):
        if isinstance(part, Mapping) and part.get("logprobs"):
            path = f"{where}[{i}].logprobs"
            lost.append(Downgrade(index, "field", UNKEPT.format(path=path)))


def _annotations(content: Any) -> list[Any]:
    """Each text part's annotations (None for a part with none), in the order `_texts` reads."""
    if not isinstance(content, list):
        return [None]
    return [raw.get("annotations") if isinstance(raw, Mapping) else None for raw in content]


def _texts(content: Any, where: str) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise BlockError(f"{where} must be a string or an array of parts, got {_shown(content)}")
    texts: list[str] = []
    for i, raw in enumerate(content):
        if not isinstance(raw, Mapping):
            raise BlockError(f"{where}[{i}] must be an object, got {_shown(raw)}")
        kind = raw.get("type")
        key = "refusal" if kind == "refusal" else "text"
        if kind not in ("input_text", "output_text", "refusal", "text"):
            raise BlockError(f"{where}[{i}]: part type {_shown(kind)} is not text")
        value = raw.get(key)
        if not isinstance(value, str):
            raise BlockError(f"{where}[{i}].{key} must be a string, got {_shown(value)}")
        texts.append(value)
    return texts


def _user_parts(content: Any, where: str) -> list[Block]:
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        raise BlockError(f"{where} must be a string or an array of parts, got {_shown(content)}")
    blocks: list[Block] = []
    for i, raw in enumerate(content):
        part_where = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise BlockError(f"{part_where} must be an object, got {_shown(raw)}")
        kind = raw.get("type")
        if kind == "input_image":
            url = {"url": raw.get("image_url")}
            blocks.append(_import_user_image(url, f"{part_where}.image_url"))
        elif kind == "input_file":
            blocks.append(_import_file(raw, part_where))
        else:
            blocks.extend(Text(t) for t in _texts([raw], where))
    return blocks


def _import_file(raw: Mapping[str, Any], where: str) -> Block:
    """An `input_file` part: a PDF by its bytes or its URL; an uploaded file id named."""
    name = raw.get("filename")
    title = name if isinstance(name, str) and name else None
    data, url = raw.get("file_data"), raw.get("file_url")
    if isinstance(data, str):
        match = _DATA_URL.match(data)
        if match is None:
            raise BlockError(f"{where}.file_data: not a base64 data: URL ({shorten(data, 60)})")
        media_type = match.group(1).lower()
        payload = data[match.end() :]
        if media_type not in DOCUMENT_MEDIA_TYPES:
            return Text(document_placeholder(media_type or "file", title))
        if len(payload) % 4 or _BASE64.fullmatch(payload) is None:
            raise BlockError(f"{where}.file_data: the data: URL's payload is not canonical base64")
        return Document(media_type, payload, title=title)
    if isinstance(url, str):
        try:
            return Document("application/pdf", url=url, title=title)
        except BlockError as exc:
            raise BlockError(f"{where}.file_url: {exc}") from None
    file_id = raw.get("file_id")
    if isinstance(file_id, str) and file_id:
        # An uploaded file lives on the server that holds it: named, not lost.
        return Text(document_placeholder("application/pdf", title or file_id))
    raise BlockError(f"{where}: an input_file needs file_data, file_url or file_id")


def _import_call(item: Mapping[str, Any], where: str) -> ToolUse:
    call = imported_call(
        item.get("call_id"), item.get("name"), item.get("arguments", ""), where, ""
    )
    # The item's own fields (its id, a status): this wire's spelling of the call.
    extra = {k: v for k, v in item.items() if k not in _CALL_MODELLED}
    spelling = spelling_of(_IMPORTED, extra)
    return call if spelling is None else msgspec.structs.replace(call, spelling=spelling)


_CALL_MODELLED: Final = frozenset({"type", "call_id", "name", "arguments"})
_OUTPUT_MODELLED: Final = frozenset({"type", "call_id", "output"})
_ITEM_MODELLED: Final = frozenset({"type", "role", "content"})
_TEXTS: Final = frozenset({"input_text", "output_text"})


def _spelt_item(raw: Mapping[str, Any], role: str, blocks: list[Block]) -> list[Block] | None:
    """A message item's blocks holding how it was written, or None when no block can hold it.

    The first text holds the item's layout and its own fields (an id, a
    status, a phase: `Spelling`), each further text is marked a part of
    the same item; the blocks as they are when the item was written in
    this codec's own form for its role and has no field of its own.
    """
    typed = "type" in raw
    string = isinstance(raw.get("content"), str)
    form = (_STRING if string else _PARTS) if typed else (_EASY if string else _UNTYPED)
    extra = {k: v for k, v in raw.items() if k not in _ITEM_MODELLED}
    if not extra and form == (_PARTS if role == "user" else _STRING):
        return blocks
    content = raw.get("content")
    parts = content if isinstance(content, list) else []
    texts = string or all(isinstance(p, Mapping) and p.get("type") in _TEXTS for p in parts)
    if not blocks or not texts or any(type(b) is not Text for b in blocks):
        return None
    first = spelling_of(_IMPORTED, extra, form)
    rest = Spelling(_IMPORTED, _PART)
    return [
        msgspec.structs.replace(b, spelling=first if i == 0 else rest) for i, b in enumerate(blocks)
    ]


def _import_output(item: Mapping[str, Any], where: str) -> tuple[ToolResult, list[Block]]:
    """A call's output as its result, and the images and files it carried, to ride after."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise BlockError(f"{where}: a call output needs a call_id string, got {_shown(call_id)}")
    output = item.get("output")
    riders: list[Block] = []
    if isinstance(output, list):
        parts = _user_parts(output, f"{where}.output")
        riders = [b for b in parts if not isinstance(b, Text)]
        text = "".join(b.text for b in parts if isinstance(b, Text))
    else:
        text = "".join(_texts(output, f"{where}.output"))
    # The item's own fields (its id, a status): this wire's spelling of the result.
    spelling = spelling_of(_IMPORTED, {k: v for k, v in item.items() if k not in _OUTPUT_MODELLED})
    if text.startswith(ERROR_PREFIX):
        return ToolResult(call_id, text[len(ERROR_PREFIX) :], True, spelling=spelling), riders
    return ToolResult(call_id, text, spelling=spelling), riders

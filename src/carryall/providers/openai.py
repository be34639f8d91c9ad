"""OpenAI Chat Completions and llama-server: one codec, two dialects.

`encode_request` turns a `Request` into the JSON body of
`POST /v1/chat/completions`; `decode_response`, `StreamDecoder` and
`decode_stream` turn that endpoint's answers back into a `Response`;
`decode_messages` reads an OpenAI-style `messages` array someone already
holds into blocks, so a history can be continued on another backend.

The wire, both dialects:

- The system prompt is one leading `system` message (an empty one is not
  sent).
- A user message's tool results go first, each a `role: "tool"` message
  whose content is the result text; an error result is that text behind
  `ERROR_PREFIX` (`"Error: "`). The message's text and images follow in one
  `user` message: a lone text as a string, anything else as content parts,
  images as `data:` URLs. A model with no eyes gets each image as its
  `image_placeholder` line (`_common.prepare`), on every dialect.
- An assistant message is its text (empty texts left out), then its tool
  calls with JSON-string arguments; with neither it is `content: ""`.
- Tools are always sent with `description` and `parameters`; `tool_choice`
  only as one of the strings `auto`, `none`, `required`, and only when there
  are tools (a choice about no tools is an error on OpenAI).
- `reasoning_effort` is sent when `Request.effort` is set (both dialects
  read it). `thinking_budget` has no field here. Both servers cache a
  prompt's prefix by themselves; `cache` `auto` adds OpenAI's
  `prompt_cache_key` on OpenAI's own API (`caching.prompt_cache_key`).

What the openai dialect does beyond that: the token limit goes as
`max_completion_tokens` (OpenAI deprecated `max_tokens`, and its reasoning
models refuse it); thinking never goes on this wire, and is never turned
into text either.

What the llama-server dialect does beyond that (its server README and
`oaicompat_chat_params_parse`):

- the token limit goes as `max_tokens`;
- an assistant turn's thinking goes back as `reasoning_content` (all its
  thinking blocks joined, signed or not: the server checks nothing, and a
  signature means something to Anthropic only);
- `chat_template_kwargs: {"enable_thinking": <bool>}` is sent when the model
  can think (`Capabilities.thinking`) or thinking was asked for, so the
  request, not the server's default, decides;
- a history that ends on an assistant message is refused with a
  `HistoryError`: llama-server would continue that message as a prefill
  rather than answer, and `Request` has no way to mean a prefill.

Streaming is the transport's decision: `stream_body(body)` adds
`stream: true` and `stream_options: {"include_usage": true}` (both
dialects), so the last chunk carries the token counts.

Decoding: the reasoning (`reasoning_content`, or `reasoning`, or the text
of `reasoning_details`: whichever the server uses) becomes `Thinking(text,
signature=None)` stamped with its origin, first in the message (the openai
dialect sends it back as `reasoning_content` to that origin alone: DeepSeek
and Kimi want their reasoning back on a tool round; to OpenRouter it is
`reasoning`, the name its request type has); each `reasoning_details` entry with
encrypted `data` or a `signature` (OpenRouter passing through an OpenAI or
Claude model's own) follows as an `Opaque` stamped with its origin (the
dialect, the transport's endpoint, the response's model), sent back on the
assistant message's `reasoning_details` to that origin alone; the tools
the server ran (Groq's `executed_tools`) follow as `ServerToolCall` and
`ServerToolResult`, then the text (OpenRouter's `url_citation` annotations
its citations), then the tool calls. Arguments that are not JSON are counted in
`Response.malformed_tool_args` and surface as a `ToolUse` whose input is
the raw text, so the loop can answer it with an error result (empty
arguments read as `{}`); sent back, that input is the JSON string of the
raw text, so the history stays valid on the wire. A tool call without an id
gets `call_<index>`. Finish reasons map `stop` to `end_turn` (`tool_use`
when the message holds tool calls, `refusal` when it is a refusal),
`tool_calls` to `tool_use`, `length` to `max_tokens`, `content_filter` to
`refusal`, anything else to `other`. A stream that reaches `[DONE]` is
complete even with no `finish_reason` (audio models send none), and a
streamed refusal is shown as it arrives.
The choice's token probabilities (`logprobs.content` and `.refusal`, when
the request asked with `logprobs` and `top_logprobs`) are
`Response.logprobs`, a stream's chunk by chunk in order; llama-server's
token ids (`id`) are kept as `token_id`.
`input_tokens` excludes the cached prompt tokens, which go in
`cache_read_input_tokens`, as on Anthropic's wire. A message with nothing in
it reads as one empty `Text`, so it is still a valid message; a refusal with
no content reads as its text.

What the wire cannot hold. `decode_messages(encode_request(r, caps,
d)["messages"])` gives back `r.system` and `r.messages` except for exactly
this list (the property tests apply exactly this normalization):

1. Thinking: the openai dialect drops it unless it is the target's own. On llama-server a message's
   thinking blocks come back as one block, their texts joined, first in the
   message, or none when the joined text is empty.
2. Thinking signatures are dropped.
3. Empty `Text` blocks of an assistant message are dropped, and its blocks
   come back ordered thinking, text, tool calls; an assistant message left
   with no block reads as one empty `Text`.
4. A user message's tool results come back first, its text and images after
   them in their order.
5. `ToolResult.is_error` rides the text: a result that is not an error but
   whose text starts with `ERROR_PREFIX` reads back as an error without it.
6. `Image.source` is dropped.
7. A user message holding only tool results, followed directly by another
   user message, reads back as one message: the wire has no boundary
   between the tool messages and the user message after them.
8. An empty system prompt reads back as `None`.
9. Tool inputs come back through JSON (a tuple reads back as a list).
10. `ToolResult.attachments` (the non-image attachments a flat history
    declared) are dropped: no wire carries them.
11. A PDF `Document` goes as a `file` part named by its title or source,
    and that name reads back as its `source` (the title is gone).

`decode_messages` also takes what other writers put there: `developer`
messages count as system (all system texts are joined by a blank line,
wherever they stood); `refusal` parts and fields read as text; an
`image_url` that is a `data:` URL with an allowlisted media type becomes an
`Image`, a remote one an `Image` held by its URL (never fetched; sent back
as that URL), one with another media type its `image_placeholder` line, so
the image is named rather than lost. A `file` part whose `file_data` is a
PDF or plain text becomes a `Document`; a `file_id` (an upload only its
server knows), another file type and an `input_audio` part are kept whole
as `Opaque` parts of this wire, named by one line elsewhere; an assistant's
`reasoning_details` entries holding encrypted data or a signature too.
Tool message content is read verbatim: native carriers (SPEC §2) are
the flat-history readers' business (`carryall.rounds`), not this wire's,
where a result text that happens to be JSON is just text. The history it
returns is not validated; every encoder validates before it writes.

Every wire parser here answers hostile input (wrong JSON types, truncated
streams, fragments out of order, deep or huge arguments) with a
`ProviderError` naming the place, or for `decode_messages` a `BlockError`;
unknown fields are ignored, so new server features do not break old clients.
Nothing is accumulated by repeated string concatenation: fragments go in
lists and are joined once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, get_args

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
)
from carryall.errors import BlockError, HistoryError, ProviderError
from carryall.providers import caching, hosted, structured
from carryall.providers._common import (
    Wire,
    _parse_arguments,
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
    Dialect,
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
    ToolSpec,
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
from carryall.providers.options import (
    NO_OPTIONS,
    PROMPT_NO_PARALLEL,
    left_off,
    merge_extra,
    openai_strict_and_budget,
    tier_left_off,
)

__all__ = [
    "ERROR_PREFIX",
    "Dialect",
    "StreamDecoder",
    "decode",
    "decode_messages",
    "decode_response",
    "decode_stream",
    "encode",
    "encode_body",
    "encode_bytes",
    "encode_prepared",
    "encode_request",
    "encode_request_bytes",
    "encode_sent",
    "place_options",
    "sent_bytes",
    "stream_body",
    "wire_of",
]

ERROR_PREFIX = "Error: "
"""How a `role: "tool"` message says its result is an error; `decode_messages` undoes it."""

_DIALECTS: tuple[str, ...] = get_args(Dialect)
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
# A response names its tool calls by index; far beyond any real parallel
# round, a larger index is a broken or hostile stream, not a call.
_MAX_TOOL_CALL_INDEX = 4096


# -- the codec contract ------------------------------------------------------
# The same names with the same signatures in every wire module
# (`encode_body`, `encode_bytes`, `decode`, `StreamDecoder`,
# `decode_messages`), each taking what it needs of one `Target`.


def encode_body(request: Request, target: Target) -> Encoded:
    """The `/v1/chat/completions` body in `target.dialect`, and every downgrade made (`encode`).

    `target.every_origin` keeps every signature and native block, for a
    history written to a file.
    """
    return encode(request, target.caps, target.dialect, every_origin=target.every_origin)


def encode_bytes(
    request: Request, target: Target, *, stream: bool = False, kept: KeptItems | None = None
) -> Sent:
    """`encode_body`'s body as the bytes sent (`stream_body`'s when `stream`) (`encode_sent`).

    With `kept`, the messages the last body written with it began with are
    copied in as the JSON written then: the same bytes.
    """
    return encode_sent(request, target.caps, target.dialect, stream=stream, kept=kept)


def decode(data: Mapping[str, Any], target: Target) -> Response:
    """A `chat.completion` as a `Response`, its origins `target`'s dialect and endpoint."""
    return decode_response(data, dialect=target.dialect, endpoint=target.endpoint)


# -- encoding ---------------------------------------------------------------

_WIRES: dict[str, Wire] = {
    # OpenAI takes images by URL, PDFs as `file` parts, system messages
    # anywhere; plain-text documents go as their text. A model's own
    # reasoning goes back to it as `reasoning_content` (DeepSeek and Kimi
    # want it on a tool round). Both dialects read the one Chat Completions
    # format, which the importer reads as OpenAI's: what a file spelled (a
    # call's argument text, a `content: null`) goes back as it came on either.
    "openai": Wire(
        "openai",
        image_urls=True,
        pdf=True,
        system_inside=True,
        own_thinking=True,
        file_dialects=("llama-server",),
    ),
    # llama-server takes reasoning back and images as data: URLs only;
    # its chat templates want the system message first, if at all.
    "llama-server": Wire("llama-server", thinking=True, file_dialects=("openai",)),
}


def wire_of(dialect: Dialect) -> Wire:
    """What `dialect` takes natively (see `carryall.providers._common.prepare`)."""
    wire = _WIRES.get(dialect)
    if wire is None:
        raise ProviderError(
            f"unknown OpenAI-style dialect {dialect!r}: expected one of {', '.join(_DIALECTS)}"
        )
    return wire


def encode_request(
    request: Request, caps: Capabilities, dialect: Dialect = "openai", *, every_origin: bool = False
) -> dict[str, Any]:
    """The `/v1/chat/completions` body for a request, in the given dialect (`encode`'s body)."""
    return encode(request, caps, dialect, every_origin=every_origin).body


def encode(
    request: Request, caps: Capabilities, dialect: Dialect = "openai", *, every_origin: bool = False
) -> Encoded:
    """The `/v1/chat/completions` body for a request, and every downgrade made to write it.

    The history is validated, image-limited, blinded for a model with no
    eyes and fitted to the dialect first (`_common.prepare`), so every
    dialect refuses and renders the same histories, and names in
    `Encoded.downgrades` what it left off or sent as text. The target
    origin is `dialect`, `request.endpoint` (the backend fills it from its
    base URL) and `request.model`. The body shares the tool schemas and
    strings of the request rather than copying them: treat it as read-only.
    """
    prepared = prepare(request, caps, wire_of(dialect), every_origin=every_origin)
    # A history written to a file (`every_origin`) keeps the spaced argument
    # text of the export format, so a transcript exports the same every time.
    body = encode_prepared(request, prepared.messages, caps, dialect, spaced=every_origin)
    placed = place_options(request, body, dialect)
    return Encoded(body, (*placed, *prepared.downgrades) if placed else prepared.downgrades)


def encode_sent(
    request: Request,
    caps: Capabilities,
    dialect: Dialect = "openai",
    *,
    stream: bool = False,
    kept: KeptItems | None = None,
) -> Sent:
    """`encode`'s body as the bytes sent (`stream_body`'s when `stream`), and its report.

    The transport's entry point, and the same JSON as `encode`'s body byte
    for byte: the same wire objects (`encode_prepared(sent=True)`), written
    by msgspec as they are instead of converted to dicts first. With
    `kept`, the messages the last body written with it began with are
    copied in as the JSON written then (`KeptItems`): the same bytes.
    """
    prepared = prepare(request, caps, wire_of(dialect))
    body = encode_prepared(
        request,
        prepared.messages,
        caps,
        dialect,
        sent=True,
        kept=kept,
        payloads=payload_messages(prepared) if kept is not None else (),
    )
    placed = place_options(request, body, dialect)
    downgrades = (*placed, *prepared.downgrades) if placed else prepared.downgrades
    return Sent(sent_bytes(body, stream=stream), downgrades)


def encode_request_bytes(
    request: Request, caps: Capabilities, dialect: Dialect = "openai", *, stream: bool = False
) -> bytes:
    """`encode_request`'s body as the bytes sent; `stream_body`'s when `stream` is true."""
    return encode_sent(request, caps, dialect, stream=stream).data


def sent_bytes(body: Mapping[str, Any], *, stream: bool = False) -> bytes:
    """A finished body (`encode`'s) as the bytes sent; `stream_body`'s when `stream` is true.

    The same JSON as the body, written once, so the SDK never re-walks or
    re-encodes the history.
    """
    return body_bytes(stream_body(body) if stream else body)


def encode_prepared(
    request: Request,
    messages: Sequence[Message],
    caps: Capabilities,
    dialect: Dialect = "openai",
    *,
    spaced: bool = False,
    sent: bool = False,
    kept: KeptItems | None = None,
    payloads: Container[int] = (),
) -> dict[str, Any]:
    """`encode_request` for messages already through `_common.prepare`.

    For prompt mode, which prepares the history itself before rewriting it
    as plain messages: checking it a second time would be the same work again.
    `sent` leaves the messages as the wire objects msgspec writes (the
    `_...Message` classes) instead of dicts: for a body that is only going
    to be sent (`encode_sent`). With `sent`, `kept` gives the messages the
    last body written with it began with as their JSON (`KeptItems`);
    `payloads` are the indices of the messages holding an image's or a
    document's bytes, which it never keeps.
    """
    if dialect not in _DIALECTS:
        raise ProviderError(
            f"unknown OpenAI-style dialect {dialect!r}: expected one of {', '.join(_DIALECTS)}"
        )
    llama = dialect == "llama-server"
    if llama and messages and messages[-1].role == "assistant":
        raise HistoryError(
            len(messages) - 1,
            "the history ends on an assistant message, which llama-server would continue "
            "as a prefill instead of answering; end it on a user message",
        )
    wire: list[Any] = []
    if request.system:
        wire.append(_SystemMessage(request.system))
    named = request.endpoint in _REASONING_NAMED
    if kept is not None and sent:
        wire += kept.items(
            messages, payloads, lambda start, end: _messages(messages, start, end, named, spaced)
        )
    else:
        wire += _messages(messages, 0, len(messages), named, spaced)
    if not wire:
        raise HistoryError(0, "the request has no messages and no system prompt: nothing to answer")
    body: dict[str, Any] = {
        "model": request.model,
        "messages": wire if sent else builtins(wire),
    }
    body["max_tokens" if llama else "max_completion_tokens"] = request.max_tokens
    if request.tools:
        body["tools"] = [_encode_tool(spec) for spec in request.tools]
        choice = openai_tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
    if request.effort is not None:
        body["reasoning_effort"] = request.effort
    if llama and (caps.thinking or request.thinking):
        body["chat_template_kwargs"] = {"enable_thinking": bool(request.thinking)}
    key = None if llama else caching.prompt_cache_key(request)
    if key is not None:
        body["prompt_cache_key"] = key
    structured.add_openai(body, request)
    if request.hosted_tools:
        dialect = "llama-server" if llama else "openai"
        body.update(hosted.chat_options(request.hosted_tools, dialect))
    return body


_REASONING_NAMED: Final = frozenset({"openrouter.ai"})
"""The servers that take a model's reasoning back as `reasoning`, not `reasoning_content`.

OpenRouter's own request type (its SDK's `ChatAssistantMessage`) has
`reasoning` beside `reasoning_details` and drops a `reasoning_content`;
DeepSeek, Kimi, vLLM and llama-server read `reasoning_content`.
"""

_SERVICE_TIERS: Final = ("auto", "default", "flex", "scale", "priority", "fast")
_LLAMA_ONLY: Final = ("top_k",)
_OPENAI_ONLY: Final = ("service_tier", "store")


def place_options(
    request: Request, body: dict[str, Any], dialect: Dialect, *, prompt: str = ""
) -> list[Downgrade]:
    """Write `request.options`, strict tools and the thinking budget as `dialect` names them.

    Both dialects take the OpenAI sampling fields under their own names;
    llama-server also reads `top_k` and `thinking_budget_tokens` (when
    thinking is asked for), and has no `service_tier` or `store`; OpenAI
    has no `top_k` and no thinking budget. `prompt` says the request went
    in prompt mode (`"constrained"` when a JSON schema holds the answer):
    there are no native tools then, so `parallel_tool_calls` is left off,
    and so is `strict` unless the schema holds every call to its tool's.
    What is left off is named (`options.left_off`).
    """
    llama = dialect == "llama-server"
    lost = openai_strict_and_budget(request, body, dialect, llama=llama, prompt=prompt, nested=True)
    options = request.options
    if options == NO_OPTIONS:
        return lost
    for name in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
        value = getattr(options, name)
        if value is not None:
            body[name] = value
    if options.stop:
        body["stop"] = list(options.stop)
    for name in _LLAMA_ONLY + _OPENAI_ONLY:
        value = getattr(options, name)
        if value is None:
            continue
        if (name in _LLAMA_ONLY) != llama:
            lost.append(left_off(name, dialect))
        elif name == "service_tier" and value not in _SERVICE_TIERS:
            lost.append(tier_left_off(value, dialect, _SERVICE_TIERS))
        else:
            body[name] = value
    if options.parallel_tool_calls is not None and request.tools:
        if prompt:
            lost.append(left_off("parallel_tool_calls", dialect, PROMPT_NO_PARALLEL))
        else:
            body["parallel_tool_calls"] = options.parallel_tool_calls
    return lost + merge_extra(body, request, dialect, ("stream", "stream_options"))


def _messages(
    messages: Sequence[Message], start: int, end: int, named: bool, spaced: bool
) -> list[Any]:
    """The wire messages of `messages[start:end]` (a user turn's results are several)."""
    # This loop runs over the whole history on every request: blocks are
    # told apart by exact type, as the history's validator tells them.
    wire: list[Any] = []
    append = wire.append
    for index in range(start, end):
        message = messages[index]
        role = message.role
        content = message.content
        # The commonest turns the short way, as the general writers below
        # would write them: one result, one text, a remark and one call.
        # A function call per message is a good part of the time here.
        if len(content) == 1:
            only = content[0]
            kind = type(only)
            if kind is ToolResult and role == "user":
                append(_tool_message(only))  # type: ignore[arg-type]
                continue
            if kind is Text and role != "system" and only.spelling is None:  # type: ignore[union-attr]
                text = only.text  # type: ignore[union-attr]
                append(_UserMessage(text) if role == "user" else _AssistantMessage(content=text))
                continue
        elif len(content) == 2 and role == "assistant":
            said, use = content
            if type(said) is Text and type(use) is ToolUse and said.text:
                call = _call(use, index, spaced)
                append(_AssistantMessage(content=said.text, tool_calls=One(call)))
                continue
        if role == "user":
            _encode_user(message, append)
        elif role == "system":
            append(_SystemMessage(message.text()))
        else:
            append(_encode_assistant(message, index, named, spaced))
    return wire


def stream_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The same body asking for a stream whose last chunk carries the token usage.

    A shallow copy: the messages are shared, not copied, so streaming a
    request with megabytes of images costs nothing extra.
    """
    return {**body, "stream": True, "stream_options": {"include_usage": True}}


# -- the wire's objects ------------------------------------------------------
# What `encode_prepared` builds, one class per wire object: msgspec writes a
# Struct straight from its fields, its keys written once for the class, and
# these are not tracked by the garbage collector, so a long history's body
# is not thousands of containers the collector walks until it is sent. A
# tagged class writes its tag first (`role` or `type` leads, as the wire
# has it); an UNSET field is left out. `encode` turns the same objects into
# the dicts it returns (`_json.builtins`): one writer for both.


class _Function(msgspec.Struct, gc=False):
    name: str
    arguments: str


class _Call(msgspec.Struct, gc=False):
    id: str
    type: str
    function: _Function


class _ToolMessage(msgspec.Struct, gc=False, tag_field="role", tag="tool"):
    tool_call_id: str
    content: str


class _UserMessage(msgspec.Struct, gc=False, tag_field="role", tag="user"):
    content: str | list[Any]


class _SystemMessage(msgspec.Struct, gc=False, tag_field="role", tag="system"):
    content: str


class _AssistantMessage(msgspec.Struct, gc=False, tag_field="role", tag="assistant"):
    reasoning_content: str | UnsetType = UNSET
    reasoning: str | UnsetType = UNSET
    """The same, under OpenRouter's name (`_REASONING_NAMED`)."""
    reasoning_details: list[Any] | UnsetType = UNSET
    content: str | list[Any] | UnsetType | None = UNSET
    tool_calls: One | list[_Call] | UnsetType = UNSET
    """A lone call as `One`, the commonest, so there is no list to track."""


class _TextPart(msgspec.Struct, gc=False, tag_field="type", tag="text"):
    text: str


class _Url(msgspec.Struct, gc=False):
    url: str | Payload


class _ImagePart(msgspec.Struct, gc=False, tag_field="type", tag="image_url"):
    image_url: _Url


class _File(msgspec.Struct, gc=False):
    file_data: Payload
    filename: str


class _FilePart(msgspec.Struct, gc=False, tag_field="type", tag="file"):
    file: _File


def _encode_user(message: Message, append: Callable[[Any], None]) -> None:
    rest: list[Text | Image | Document | Opaque] | None = None
    for block in message.content:
        if type(block) is ToolResult:
            append(_tool_message(block))
        elif isinstance(block, (Text, Image, Document, Opaque)):
            if rest is None:
                rest = [block]
            else:
                rest.append(block)
    if rest is None:
        return
    parts: str | list[Any]
    if len(rest) == 1 and type(rest[0]) is Text and rest[0].spelling is None:
        parts = rest[0].text
    else:
        parts = [_user_part(block) for block in rest]
    append(_UserMessage(parts))


def _tool_message(block: ToolResult) -> _ToolMessage:
    content = ERROR_PREFIX + block.content if block.is_error else block.content
    return _ToolMessage(block.tool_use_id, content)


def _user_part(block: Text | Image | Document | Opaque) -> Any:
    if isinstance(block, Text):
        if block.spelling is not None:  # `prepare` kept it: this wire's own text part
            return spelled({"type": "text", "text": block.text}, block.spelling)
        return _TextPart(block.text)
    if isinstance(block, Opaque):
        # `prepare` kept it, so it is this origin's own part: as it came.
        return json.loads(block.raw)
    if isinstance(block, Document):
        # `prepare` leaves only PDFs by their bytes on this wire.
        data = Payload.data_url(block.media_type, block.data)
        return _FilePart(_File(data, block.title or block.source or "document.pdf"))
    if not block.data and block.url is not None:
        return _ImagePart(_Url(block.url))
    # No copy of the image data: the body's writer puts the data: URL together.
    return _ImagePart(_Url(Payload.data_url(block.media_type, block.data)))


def _encode_assistant(message: Message, index: int, named: bool, spaced: bool) -> _AssistantMessage:
    texts: list[str] = []
    calls: list[_Call] = []
    thinking: list[str] = []
    details: list[Any] = []
    layout = ""  # how the history wrote a content of no text (`_content_form`)
    for block in message.content:
        if type(block) is Text:
            if block.text:
                texts.append(block.text)
            elif block.spelling is not None:
                layout = block.spelling.form
        elif type(block) is ToolUse:
            if not calls and block.spelling is not None:
                layout = block.spelling.form
            calls.append(_call(block, index, spaced))
        elif type(block) is Thinking:
            thinking.append(block.text)
        elif isinstance(block, Opaque) and block.raw:
            # `prepare` kept it, so it is this origin's: a `reasoning_details`
            # entry, the only native thing an answer on this wire holds.
            details.append(json.loads(block.raw))
    out = _AssistantMessage()
    # `prepare` kept only thinking this wire takes: any on llama-server, a
    # model's own elsewhere.
    reasoning = "".join(thinking)
    if reasoning and named:
        out.reasoning = reasoning
    elif reasoning:
        out.reasoning_content = reasoning
    if details:
        out.reasoning_details = details
    if len(texts) == 1:
        out.content = texts[0]
    elif texts:
        out.content = [_TextPart(text) for text in texts]
    elif layout in _LAYOUTS:
        # `prepare` kept it: this wire's own history, which wrote its content so.
        out.content = _LAYOUTS[layout]
    elif not calls:
        # Both servers want content or tool calls on an assistant message.
        out.content = ""
    if calls:
        out.tool_calls = One(calls[0]) if len(calls) == 1 else calls
    return out


def _call(block: ToolUse, index: int, spaced: bool) -> _Call:
    arguments = _arguments(block, index, spaced)
    spelling = block.spelling
    if spelling is not None and spelling.extra:
        # `prepare` kept it: the argument text this wire's history wrote, which
        # goes back as it came while it still reads as the input the call holds.
        written = _written_arguments(spelling.extra)
        compact = _arguments(block, index) if spaced else arguments
        if written is not None and _reads_as(written, compact, index):
            arguments = written
    return _Call(block.id, "function", _Function(block.name, arguments))


# -- a call's arguments and its message's content, as the wire wrote them -----

_ARGUMENTS: Final = "arguments"
"""The `Spelling.extra` key of a call's argument text as its wire wrote it, kept where it
is not the text this codec writes from the input (a space after each separator, as
Python's `json.dumps` writes them)."""

# How an assistant message with no text wrote its `content` (the `Spelling.form` of its
# first call, or of the empty text that stands for a message of no call), kept where this
# codec writes otherwise: `""` on a message of no call, no key at all beside calls.
_CONTENT_NULL: Final = "content_null"
_CONTENT_EMPTY: Final = "content_empty"
_CONTENT_ABSENT: Final = "content_absent"
_LAYOUTS: Final[dict[str, str | UnsetType | None]] = {
    _CONTENT_NULL: None,
    _CONTENT_EMPTY: "",
    _CONTENT_ABSENT: UNSET,
}


def _spelled_call(call: ToolUse, written: Any, origin: Origin) -> ToolUse:
    """`call` with the argument text its wire wrote, where this codec would write another.

    Only a text that reads back as the very input the call holds is kept,
    so an echo sends the bytes the model or the history wrote and nothing
    the block does not say; an ordinary call (compact, as OpenAI writes
    them) carries nothing extra. The spaced text of `json.dumps` (and of
    this codec's own file export) is kept too: a history a client wrote
    that way goes back as it was written, and a file read and written out
    again is the same file.
    """
    if not isinstance(written, str) or not written.strip():
        return call  # no text, or a blank one, is what an empty input is written as
    try:
        compact = _arguments(call, 0)
        if written == compact:
            return call
    except HistoryError:
        return call  # an input no wire carries: the encoder names it
    if not _reads_as(written, compact, 0):
        return call
    spelling = spelling_of(origin, {_ARGUMENTS: written})
    return msgspec.structs.replace(call, spelling=spelling)


def _written_arguments(extra: str) -> str | None:
    """The argument text a call's `Spelling.extra` holds; None where it holds none, or where
    a redaction has cut through the JSON that held it (the input is written then)."""
    ok, fields = load_json(extra)
    written = fields.get(_ARGUMENTS) if ok and isinstance(fields, dict) else None
    return written if isinstance(written, str) else None


def _reads_as(written: str, compact: str, index: int) -> bool:
    """Whether argument text `written` holds what `compact` (this codec's text of an input)
    holds, read strictly: a key written twice, which parsers read differently, never does."""
    try:
        value = json.loads(written, object_pairs_hook=_once, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return False
    try:
        return _arguments(ToolUse("", "", value), index) == compact
    except HistoryError:
        return False  # a number past a float's range, read as infinity


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("a key is written twice")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _content_form(message: Mapping[str, Any], said: bool, calls: bool) -> str:
    """How an assistant message wrote a content of no text, where this codec writes another
    (no `content` beside calls, `""` on a message of none); "" when as this codec writes it."""
    if said:
        return ""
    if "content" not in message:
        return "" if calls else _CONTENT_ABSENT
    content = message["content"]
    if content is None:
        return _CONTENT_NULL
    return _CONTENT_EMPTY if content == "" and calls else ""


def _laid_out(blocks: tuple[Block, ...], form: str) -> tuple[Block, ...]:
    """`blocks` with their message's content `form` on its first call, or on the empty text
    standing for a message of no call (`_assistant_blocks`); a message of reasoning alone
    has no block to hold it and is written as this codec writes it."""
    kinds = [type(b) for b in blocks]
    at = kinds.index(ToolUse) if ToolUse in kinds else kinds.index(Text) if Text in kinds else -1
    if not form or at < 0:
        return blocks
    held: Text | ToolUse = blocks[at]  # type: ignore[assignment]
    extra = held.spelling.extra if held.spelling is not None else ""
    spelled_block = msgspec.structs.replace(held, spelling=Spelling(_IMPORTED, form, extra))
    return (*blocks[:at], spelled_block, *blocks[at + 1 :])


def _encode_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        },
    }


# -- decoding responses -----------------------------------------------------


def decode_response(
    data: Mapping[str, Any], *, dialect: Dialect = "openai", endpoint: str = ""
) -> Response:
    """A non-streamed `chat.completion` object as a `Response`.

    A body carrying `{"error": ...}` (some servers answer 200 with one) is
    raised as the `ProviderError` it describes. What only the answer's maker
    may read back (`reasoning_details` holding encrypted data or a
    signature) is stamped with the origin `dialect`, `endpoint` (the
    transport's host) and the response's `model`, as the Anthropic codec
    stamps its own.
    """
    where = "response"
    body = _mapping(data, where)
    _raise_wire_error(body, where)
    lost: list[Downgrade] = []
    unmodelled(body, _COMPLETION_FIELDS, where, lost)
    model = _optional_str(body, "model", "response")
    origin = Origin(dialect, endpoint, model or "")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ProviderError(f"{where}: 'choices' must be a non-empty array, got {_shown(choices)}")
    choice = _mapping(choices[0], f"{where}.choices[0]")
    unmodelled(choice, _CHOICE_FIELDS, f"{where}.choices[0]", lost)
    probable = _Probabilities()
    probable.read(choice.get("logprobs"), f"{where}.choices[0].logprobs", lost)
    where = f"{where}.choices[0].message"
    message = _mapping(choice.get("message"), where)
    unmodelled(message, _MESSAGE_FIELDS, where, lost)
    texts = _content_texts(message.get("content"), f"{where}.content", ProviderError)
    reasoning = _reasoning(message, where)
    signed = _signed_details(message.get("reasoning_details"), origin, where)
    refusal = _optional_str(message, "refusal", where)
    raw_calls = message.get("tool_calls")
    calls: list[ToolUse] = []
    malformed = 0
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise ProviderError(f"{where}.tool_calls must be an array, got {_shown(raw_calls)}")
        seen: set[str] = set()
        for i, raw in enumerate(raw_calls):
            call, bad = _response_tool_call(raw, i, f"{where}.tool_calls[{i}]", origin)
            if call.id in seen:
                raise ProviderError(f"{where}.tool_calls[{i}]: id {call.id!r} is used twice")
            seen.add(call.id)
            calls.append(call)
            malformed += bad
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise ProviderError(
            f"response.choices[0].finish_reason must be a string, got {_shown(finish)}"
        )
    served = _served(message.get("annotations"), message.get("executed_tools"), origin, where)
    return Response(
        message=answer_message(
            _assistant_blocks(reasoning, texts, refusal, calls, signed, origin, served),
            "OpenAI response",
        ),
        stop_reason=_stop_reason(finish, bool(calls), bool(refusal)),
        usage=_usage(body.get("usage"), "response.usage"),
        model=model,
        refusal=refusal or None,
        malformed_tool_args=malformed,
        raw_usage=_raw_usage(body.get("usage")),
        stop_sequence=_stop_string(choice, finish),
        logprobs=probable.held(),
        downgrades=tuple(lost),
    )


class _Probabilities:
    """A choice's token probabilities (`logprobs`) as `Logprobs`, whole or chunk by chunk.

    `content` holds the answer's tokens and `refusal` a refusal's, each a
    list `_token_logprobs` reads; a stream's chunks each give the tokens of
    their piece, so both add up in order.
    """

    __slots__ = ("refusal", "tokens")

    def __init__(self) -> None:
        self.tokens: list[TokenLogprob] = []
        self.refusal: list[TokenLogprob] = []

    def read(self, raw: Any, where: str, lost: list[Downgrade]) -> None:
        if raw is None:
            return
        held = _mapping(raw, where)
        unmodelled(held, _LOGPROBS_FIELDS, where, lost)
        self.tokens += _token_logprobs(held.get("content"), f"{where}.content", lost)
        self.refusal += _token_logprobs(held.get("refusal"), f"{where}.refusal", lost)

    def held(self) -> Logprobs | None:
        if not self.tokens and not self.refusal:
            return None
        return Logprobs(tokens=tuple(self.tokens), refusal=tuple(self.refusal))


_LOGPROBS_FIELDS: Final = frozenset({"content", "refusal"})


def _stop_string(choice: Mapping[str, Any], finish: Any) -> str | None:
    """The stop sequence that ended a choice, where the server names it.

    Chat Completions has no field for it; vLLM and its kin say it in the
    choice's `stop_reason` (a string; a number is a stop token, not one of
    the request's sequences).
    """
    matched = choice.get("stop_reason")
    return matched if finish == "stop" and isinstance(matched, str) and matched else None


# The fields of a completion, a choice and a message this codec reads or
# counts as bookkeeping (ids, timings, the serving provider); any other is
# named in the loss report by its path.
_COMPLETION_FIELDS: Final = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint"}
    | {"service_tier", "metadata", "provider", "timings", "x_groq", "prompt_logprobs"}
    # OpenAI pads stream chunks with random characters against length side channels.
    | {"obfuscation"}
)
_CHOICE_FIELDS: Final = frozenset(
    {"index", "message", "finish_reason", "logprobs", "native_finish_reason", "stop_reason"}
)
_STREAM_CHOICE_FIELDS: Final = (_CHOICE_FIELDS - {"message"}) | {"delta"}
_MESSAGE_FIELDS: Final = frozenset(
    {"role", "content", "refusal", "tool_calls", "reasoning_content", "reasoning"}
    | {"reasoning_details", "annotations", "executed_tools"}
)
_JOINED: Final = frozenset({"text", "summary", "data", "signature"})
"""The `reasoning_details` fields a stream sends in pieces, joined in the order they came."""


def _response_tool_call(raw: Any, index: int, where: str, origin: Origin) -> tuple[ToolUse, int]:
    call = _mapping(raw, where)
    kind = call.get("type")
    if kind is not None and kind != "function":
        raise ProviderError(f"{where}: tool call type {_shown(kind)} is not 'function'")
    call_id = _optional_str(call, "id", where) or f"call_{index}"
    function = _mapping(call.get("function"), f"{where}.function")
    name = _optional_str(function, "name", f"{where}.function")
    arguments = _optional_str(function, "arguments", f"{where}.function") or ""
    call_block, bad = answered_call(call_id, name, arguments, f"{where}.function")
    return _spelled_call(call_block, arguments, origin), int(bad)


def _assistant_blocks(
    reasoning: str,
    texts: Sequence[str],
    refusal: str | None,
    calls: Sequence[ToolUse],
    signed: Sequence[Opaque] = (),
    origin: Origin | None = None,
    served: _Served | None = None,
) -> tuple[Block, ...]:
    """One order for every reader: thinking (its signed entries after it), the tools the
    server ran, text (the last one with the sources it cites), tool calls; never an empty
    message. The thinking is stamped with `origin`: unsigned, it still goes back to the
    model that made it (`Wire.own_thinking`)."""
    blocks: list[Block] = []
    if reasoning:
        blocks.append(Thinking(reasoning, origin=origin))
    blocks.extend(signed)
    if served is not None:
        blocks.extend(served.ran)
    shown = [Text(text) for text in texts if text]
    if shown and served is not None and served.cited:
        shown[-1] = Text(shown[-1].text, served.cited)
    blocks.extend(shown)
    if refusal and not any(texts):
        blocks.append(Text(refusal))
    blocks.extend(calls)
    if not blocks:
        blocks.append(Text(""))
    return tuple(blocks)


class _Served(NamedTuple):
    """What a server did beside the model's own answer: the tools it ran, the sources cited."""

    ran: list[Block]
    cited: tuple[Citation, ...]


def _served(annotations: Any, executed: Any, origin: Origin, where: str) -> _Served | None:
    """A message's `annotations` (OpenRouter's web search citations) and `executed_tools`
    (Groq's compound models: search, browsing, code) in the common forms.

    Neither has a place in a request on this wire, so they carry no raw to
    echo: the citations ride on the text as its sources, each executed tool
    is a provider-run call and its result.
    """
    if not annotations and not executed:
        return None
    cited: list[Citation] = []
    for raw in annotations if isinstance(annotations, list) else ():
        note = raw if isinstance(raw, Mapping) else {}
        inner = note.get(str(note.get("type")), note)
        body = inner if isinstance(inner, Mapping) else {}
        start, end = body.get("start_index"), body.get("end_index")
        cited.append(
            Citation(
                url=_text_value(body.get("url")),
                title=_text_value(body.get("title")),
                cited_text=_text_value(body.get("content")),
                start=start if type(start) is int else None,
                end=end if type(end) is int else None,
                raw=_kept_json(raw, f"{where}.annotations", ProviderError),
                origin=origin,
            )
        )
    ran: list[Block] = []
    for i, raw in enumerate(executed if isinstance(executed, list) else ()):
        ran += _executed_tool(_mapping(raw, f"{where}.executed_tools[{i}]"), i, origin)
    return _Served(ran, tuple(cited))


_EXECUTED: Final = {"search": "web_search", "browser_search": "web_search", "visit": "web_fetch"}
"""Groq's executed tool types by common kind; code runs under `python` or `code_interpreter`."""


def _executed_tool(tool: Mapping[str, Any], index: int, origin: Origin) -> list[Block]:
    """One of Groq's executed tools: the call with its arguments, and what it gave back."""
    kind = _text_value(tool.get("type")) or "tool"
    common = _EXECUTED.get(kind, "code_execution" if kind in _CODE_TOOLS else kind)
    arguments = tool.get("arguments")
    ok, given = load_json(arguments) if isinstance(arguments, str) else (False, None)
    ident = f"executed_{index}"
    call = ServerToolCall.made(
        "executed_tools", "", origin, tool=common, id=ident, input=given if ok else arguments
    )
    sources: list[Citation] = []
    found = tool.get("search_results")
    results = found.get("results") if isinstance(found, Mapping) else None
    for item in results if isinstance(results, list) else ():
        if isinstance(item, Mapping):
            score = item.get("score")
            sources.append(
                Citation(
                    url=_text_value(item.get("url")),
                    title=_text_value(item.get("title")),
                    cited_text=_text_value(item.get("content")),
                    source=str(score) if isinstance(score, int | float) else "",
                )
            )
    output = _text_value(tool.get("output"))
    result = ServerToolResult.made(
        "executed_tools", "", origin, tool=common, call_id=ident, output=output, sources=sources
    )
    return [call, result]


_CODE_TOOLS: Final = frozenset({"python", "code_interpreter", "code_execution"})


def _text_value(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _stop_reason(finish: str | None, has_calls: bool, refused: bool = False) -> StopReason:
    if finish is None:
        return "other"
    if finish == "stop" and has_calls:
        # Some servers say "stop" after tool calls; the calls still need answers.
        return "tool_use"
    if finish == "stop" and refused:
        # OpenAI ends a refusal with a plain "stop"; it is a refusal all the same,
        # as the Anthropic codec reports one.
        return "refusal"
    return _STOP_REASONS.get(finish, "other")


def _reasoning(obj: Mapping[str, Any], where: str) -> str:
    """A message's or delta's reasoning text, under whichever name its server uses.

    llama-server and vLLM say `reasoning_content`; OpenRouter, Groq, Cerebras
    and Ollama say `reasoning`, and OpenRouter adds `reasoning_details`
    (text and summary entries) with the same text again: the first of the
    three that is there is the reasoning, so nothing is counted twice.
    """
    for key in ("reasoning_content", "reasoning"):
        text = _optional_str(obj, key, where)
        if text:
            return text
    details = obj.get("reasoning_details")
    if details is None:
        return ""
    if not isinstance(details, list):
        raise ProviderError(f"{where}.reasoning_details must be an array, got {_shown(details)}")
    parts: list[str] = []
    for i, raw in enumerate(details):
        entry = _mapping(raw, f"{where}.reasoning_details[{i}]")
        for key in ("text", "summary"):
            text = _optional_str(entry, key, f"{where}.reasoning_details[{i}]")
            if text:
                parts.append(text)
                break
    return "".join(parts)


def _signed_details(details: Any, origin: Origin, where: str) -> list[Opaque]:
    """The `reasoning_details` entries only their maker can read back, each an `Opaque`.

    OpenRouter passes reasoning through from the model's own provider: an
    OpenAI model's encrypted reasoning (`reasoning.encrypted`, `data`), a
    Claude model's signed thinking (`reasoning.text` with a `signature`).
    Continuing on the same origin needs them back as they came, on the
    assistant message's `reasoning_details`; their text is already the
    answer's `Thinking` (`_reasoning`), so an entry with neither data nor a
    signature is not kept twice. The `Opaque.kind` is the entry's own type.
    """
    if details is None:
        return []
    if not isinstance(details, list):
        raise ProviderError(f"{where}.reasoning_details must be an array, got {_shown(details)}")
    out: list[Opaque] = []
    for i, raw in enumerate(details):
        at = f"{where}.reasoning_details[{i}]"
        entry = _mapping(raw, at)
        if not (_optional_str(entry, "data", at) or _optional_str(entry, "signature", at)):
            continue
        kind = _optional_str(entry, "type", at) or "reasoning"
        out.append(Opaque(kind, _kept_json(entry, at, ProviderError), origin))
    return out


def _kept_json(value: Mapping[str, Any], where: str, error: type[Exception]) -> str:
    """A part kept whole (`Opaque.raw`): compact JSON in the order it came, as the Anthropic
    codec keeps its native blocks; a lone surrogate repaired, too deep a nesting an `error`."""
    try:
        return msgspec.json.encode(repair_surrogates(value)).decode()
    except (RecursionError, TypeError, ValueError):
        raise error(f"{where}: nested too deeply to keep") from None


def _usage(raw: Any, where: str) -> Usage:
    if raw is None:
        return Usage()
    usage = _mapping(raw, where)
    prompt = _count(usage, "prompt_tokens", where)
    completion = _count(usage, "completion_tokens", where)
    cached = reasoning = 0
    details = usage.get("prompt_tokens_details")
    if details is not None:
        cached = _count(_mapping(details, f"{where}.prompt_tokens_details"), "cached_tokens", where)
    details = usage.get("completion_tokens_details")
    if details is not None:
        at = f"{where}.completion_tokens_details"
        reasoning = _count(_mapping(details, at), "reasoning_tokens", at)
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=completion,
        cache_read_input_tokens=cached,
        reasoning_tokens=reasoning,
    )


def _raw_usage(raw: Any) -> dict[str, Any] | None:
    """The usage object as the wire sent it (checked by `_usage`), for `Response.raw_usage`."""
    return dict(raw) if isinstance(raw, Mapping) else None


# -- decoding streams -------------------------------------------------------


class _CallParts:
    """One tool call being streamed: its id and name once, its arguments in fragments."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class StreamDecoder:
    """Decodes `chat.completion.chunk` events one at a time into a `Response`.

    Feed it every chunk in order (the parsed JSON of each `data:` line; the
    string `"[DONE]"` is accepted too), then ask for `response()`. Tool-call
    fragments are collected by their index and joined once at the end, so a
    ten-megabyte arguments string in ten thousand fragments costs linear
    time. `target.dialect` and `target.endpoint` (the transport's host) make the origin
    stamped on what only its maker may read back, as in `decode_response`.
    """

    def __init__(self, target: Target = DEFAULT_TARGET) -> None:
        self._dialect: Dialect = target.dialect
        self._endpoint = target.endpoint
        self._text: list[str] = []
        self._reasoning: list[str] = []
        # `reasoning_details` entries as their pieces arrive, merged by `type` and `index`
        # (`_detail_pieces`): a signature streamed apart from its text goes back with it.
        self._details: dict[tuple[Any, ...], dict[str, Any]] = {}
        # What the server did beside the answer, as the deltas gave it:
        # citations, and executed tools merged by their `index`.
        self._annotations: list[Any] = []
        self._executed: dict[Any, dict[str, Any]] = {}
        self._lost: list[Downgrade] = []
        self._refusal: list[str] = []
        self._logprobs = _Probabilities()
        self._calls: dict[int, _CallParts] = {}
        self._finish: str | None = None
        self._stop_sequence: str | None = None
        self._usage = Usage()
        self._raw_usage: dict[str, Any] | None = None
        self._model: str | None = None
        self._done = False
        self._chunks = 0

    def feed(self, chunk: Mapping[str, Any] | str) -> str:
        """Take one chunk; return the text it made newly visible.

        A `ProviderError` for an error chunk, a chunk that is not a chunk, a
        delta after the finish, or a tool call that changes its id or name.
        """
        self._chunks += 1
        where = f"stream chunk {self._chunks}"
        if isinstance(chunk, str) and chunk.strip() == "[DONE]":
            self._done = True
            return ""
        if self._done:
            raise ProviderError(f"{where}: a chunk after [DONE]")
        body = _mapping(chunk, where)
        _raise_wire_error(body, where)
        unmodelled(body, _COMPLETION_FIELDS, where, self._lost)
        model = _optional_str(body, "model", where)
        if model and self._model is None:
            self._model = model
        usage = body.get("usage")
        if usage is not None:
            self._usage = _usage(usage, f"{where}.usage")
            self._raw_usage = _raw_usage(usage)
        choices = body.get("choices")
        if choices is None:
            return ""
        if not isinstance(choices, list):
            raise ProviderError(f"{where}: 'choices' must be an array, got {_shown(choices)}")
        visible: list[str] = []
        for i, raw in enumerate(choices):
            visible.append(self._choice(raw, f"{where}.choices[{i}]"))
        return "".join(visible)

    def _detail_pieces(self, details: Any, where: str) -> None:
        """Merge one delta's `reasoning_details` pieces into the entries they belong to.

        OpenRouter streams one entry in pieces that share its `type` and
        `index`: the text in several, the signature in a later one with no
        text. Their text fields are joined in the order they came; any other
        field is given once (a piece that changes it breaks the stream). The
        same `index` under another type is another entry (a summary and its
        encrypted reasoning are both index 0); a piece with no index is an
        entry of its own.
        """
        if details is None:
            return
        if not isinstance(details, list):
            raise ProviderError(
                f"{where}.reasoning_details must be an array, got {_shown(details)}"
            )
        for i, raw in enumerate(details):
            at = f"{where}.reasoning_details[{i}]"
            entry = _mapping(raw, at)
            index = entry.get("index")
            key: tuple[Any, ...] = (
                ("index", entry.get("type"), index)
                if isinstance(index, int) and not isinstance(index, bool)
                else ("piece", len(self._details))
            )
            held = self._details.setdefault(key, {})
            for name, value in entry.items():
                before = held.get(name)
                if name in _JOINED and value is not None:
                    if not isinstance(value, str):
                        raise ProviderError(f"{at}.{name} must be a string, got {_shown(value)}")
                    held[name] = value if before is None else before + value
                elif before is None:
                    held[name] = value
                elif value is not None and value != before:
                    raise ProviderError(
                        f"{at}: reasoning detail {index} changed its {shorten(str(name), 40)} "
                        f"from {_shown(before)} to {_shown(value)}"
                    )

    def _choice(self, raw: Any, where: str) -> str:
        choice = _mapping(raw, where)
        unmodelled(choice, _STREAM_CHOICE_FIELDS, where, self._lost)
        index = choice.get("index")
        if index is not None and (index != 0 or isinstance(index, bool)):
            raise ProviderError(f"{where}: choice index {_shown(index)}; carryall asks for one")
        self._logprobs.read(choice.get("logprobs"), f"{where}.logprobs", self._lost)
        delta_raw = choice.get("delta")
        delta = {} if delta_raw is None else _mapping(delta_raw, f"{where}.delta")
        where_delta = f"{where}.delta"
        unmodelled(delta, _MESSAGE_FIELDS, where_delta, self._lost)
        content = _optional_str(delta, "content", where_delta)
        reasoning = _reasoning(delta, where_delta)
        self._detail_pieces(delta.get("reasoning_details"), where_delta)
        self._served_pieces(delta, where_delta)
        refusal = _optional_str(delta, "refusal", where_delta)
        calls = delta.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise ProviderError(f"{where_delta}.tool_calls must be an array, got {_shown(calls)}")
        if self._finish is not None and (content or reasoning or refusal or calls):
            raise ProviderError(f"{where}: a delta after the finish_reason {self._finish!r}")
        if reasoning:
            self._reasoning.append(reasoning)
        if refusal:
            self._refusal.append(refusal)
        for i, fragment in enumerate(calls or ()):
            self._call_fragment(fragment, f"{where_delta}.tool_calls[{i}]")
        finish = choice.get("finish_reason")
        if finish is not None:
            if not isinstance(finish, str):
                raise ProviderError(f"{where}.finish_reason must be a string, got {_shown(finish)}")
            if self._finish is not None and finish != self._finish:
                raise ProviderError(f"{where}: finish_reason {finish!r} after {self._finish!r}")
            self._finish = finish
            self._stop_sequence = _stop_string(choice, finish) or self._stop_sequence
        if content:
            self._text.append(content)
            return content
        # A refusal is the answer's text when there is no other (`_assistant_blocks`),
        # so it is shown as it streams, as that text would be.
        return refusal or ""

    def _call_fragment(self, raw: Any, where: str) -> None:
        fragment = _mapping(raw, where)
        index = fragment.get("index")
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or not 0 <= index <= _MAX_TOOL_CALL_INDEX
        ):
            raise ProviderError(
                f"{where}: tool call index must be an integer from 0 to "
                f"{_MAX_TOOL_CALL_INDEX}, got {_shown(index)}"
            )
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _CallParts()
        kind = fragment.get("type")
        if kind is not None and kind != "function":
            raise ProviderError(f"{where}: tool call type {_shown(kind)} is not 'function'")
        call.id = _settled(call.id, _optional_str(fragment, "id", where), "id", index, where)
        function_raw = fragment.get("function")
        if function_raw is None:
            return
        function = _mapping(function_raw, f"{where}.function")
        name = _optional_str(function, "name", f"{where}.function")
        call.name = _settled(call.name, name, "name", index, where)
        arguments = _optional_str(function, "arguments", f"{where}.function")
        if arguments:
            call.arguments.append(arguments)

    def _served_pieces(self, delta: Mapping[str, Any], where: str) -> None:
        annotations = delta.get("annotations")
        if isinstance(annotations, list):
            self._annotations += annotations
        executed = delta.get("executed_tools")
        for i, raw in enumerate(executed if isinstance(executed, list) else ()):
            piece = _mapping(raw, f"{where}.executed_tools[{i}]")
            self._executed.setdefault(piece.get("index", len(self._executed)), {}).update(piece)

    def response(self) -> Response:
        """The whole response; a `ProviderError` when the stream never finished.

        A stream that reached `[DONE]` finished, with or without a
        `finish_reason` (audio models send none): it reads as the end of
        the turn, or `tool_use` when it holds calls.
        """
        if self._finish is None and not self._done:
            raise ProviderError(
                f"the stream ended after {self._chunks} chunk(s) without a finish_reason: "
                "the response is truncated",
                retryable=True,
            )
        calls: list[ToolUse] = []
        malformed = 0
        seen: set[str] = set()
        origin = Origin(self._dialect, self._endpoint, self._model or "")
        for index in sorted(self._calls):
            parts = self._calls[index]
            if not parts.name:
                raise ProviderError(f"streamed tool call {index} never got a name")
            call_id = parts.id or f"call_{index}"
            if call_id in seen:
                raise ProviderError(f"streamed tool call {index}: id {call_id!r} is used twice")
            seen.add(call_id)
            arguments = "".join(parts.arguments)
            value, bad = _parse_arguments(arguments)
            call = _spelled_call(ToolUse(call_id, parts.name, value), arguments, origin)
            calls.append(call)
            malformed += bad
        text = "".join(self._text)
        refusal = "".join(self._refusal)
        signed = _signed_details(list(self._details.values()), origin, "stream")
        executed = list(self._executed.values())
        served = _served(self._annotations, executed, origin, "stream")
        return Response(
            message=answer_message(
                _assistant_blocks(
                    "".join(self._reasoning), [text], refusal or None, calls, signed, origin, served
                ),
                "OpenAI stream",
            ),
            stop_reason=_stop_reason(self._finish or "stop", bool(calls), bool(refusal)),
            usage=self._usage,
            model=self._model,
            refusal=refusal or None,
            malformed_tool_args=malformed,
            raw_usage=self._raw_usage,
            stop_sequence=self._stop_sequence,
            logprobs=self._logprobs.held(),
            downgrades=tuple(self._lost),
        )


def _settled(current: str | None, new: str | None, what: str, index: int, where: str) -> str | None:
    """A streamed call's id or name: set by the first fragment that has one, then never changed."""
    if not new:
        return current
    if current is not None and current != new:
        raise ProviderError(
            f"{where}: tool call {index} changed its {what} from {current!r} to {new!r}"
        )
    return new


def decode_stream(
    chunks: Iterable[Mapping[str, Any] | str], *, dialect: Dialect = "openai", endpoint: str = ""
) -> Response:
    """A whole stream of chunks as one `Response` (see `StreamDecoder`)."""
    decoder = StreamDecoder(Target(dialect=dialect, endpoint=endpoint))
    for chunk in chunks:
        decoder.feed(chunk)
    return decoder.response()


# -- importing histories ----------------------------------------------------


def decode_messages(
    data: Sequence[Mapping[str, Any]], *, system: Any = None
) -> tuple[str | None, Imported]:
    """An OpenAI-style `messages` array read into a system prompt and block messages.

    `system`, when given (a string, or a list of `{"type": "text"}` parts),
    comes first; every `system` and `developer` message of the array is
    added after it, joined by a blank line. Tool messages are gathered into
    the user message that follows them (or one of their own). A `BlockError`
    names the index of anything that has no block form.
    """
    if isinstance(data, str | bytes) or not isinstance(data, Sequence):
        raise BlockError(f"messages must be an array, got {_shown(data)}")
    # A lone surrogate (a `\ud800` escape with no partner) is repaired where it enters.
    messages, system = repair_surrogates(data), repair_surrogates(system)
    systems: list[str] = []
    if system is not None:
        systems.append(_joined_text(system, "system"))
    out: list[Message] = []
    lost: list[Downgrade] = []
    results: list[ToolResult] = []
    for index, raw in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(raw, Mapping):
            raise BlockError(f"{where}: a message must be an object, got {_shown(raw)}")
        unmodelled(raw, _HISTORY_FIELDS, where, lost, index=len(out))
        role = raw.get("role")
        if role in ("system", "developer"):
            systems.append(_joined_text(raw.get("content"), f"{where}.content"))
        elif role == "tool":
            results.append(_import_tool_result(raw, where))
        elif role == "user":
            blocks = _import_user_content(raw, where)
            if not blocks and not results:
                blocks = [Text("")]
            out.append(Message("user", (*results, *blocks)))
            results = []
        elif role == "assistant":
            if results:
                out.append(Message("user", tuple(results)))
                results = []
            out.append(Message("assistant", _import_assistant(raw, where)))
        else:
            raise BlockError(
                f"{where}: role {_shown(role)} has no block form "
                "(expected system, developer, user, assistant or tool)"
            )
    if results:
        out.append(Message("user", tuple(results)))
    return ("\n\n".join(systems) if systems else None), Imported(out, lost)


_HISTORY_FIELDS: Final = _MESSAGE_FIELDS | {"name", "tool_call_id"}


def _import_tool_result(message: Mapping[str, Any], where: str) -> ToolResult:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise BlockError(
            f"{where}: a tool message needs a tool_call_id string, got {_shown(call_id)}"
        )
    if "content" not in message:
        raise BlockError(f"{where}: a tool message needs content")
    text = _joined_text(message["content"], f"{where}.content")
    if text.startswith(ERROR_PREFIX):
        return ToolResult(call_id, text[len(ERROR_PREFIX) :], is_error=True)
    return ToolResult(call_id, text)


_IMPORTED: Final = Origin("openai", "", "")
"""The origin of the native parts an imported file holds: this wire, no endpoint or model."""


def _import_user_content(message: Mapping[str, Any], where: str) -> list[Block]:
    if "content" not in message:
        raise BlockError(f"{where}: a user message needs content")
    content = message["content"]
    where = f"{where}.content"
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        raise BlockError(f"{where} must be a string or an array of parts, got {_shown(content)}")
    blocks: list[Block] = []
    for i, raw in enumerate(content):
        part_where = f"{where}[{i}]"
        part = _part(raw, part_where)
        kind = part.get("type")
        if kind == "text":
            # A text part's own fields (a `cache_control`) are its spelling, for this wire,
            # and so is a lone text written as a part, which this codec writes as a string.
            extra = {k: v for k, v in part.items() if k not in ("type", "text")}
            spelling = spelling_of(_IMPORTED, extra, _TEXT_PART if len(content) == 1 else "")
            blocks.append(Text(_part_text(part, "text", part_where), spelling=spelling))
        elif kind == "image_url":
            blocks.append(_import_user_image(part.get("image_url"), f"{part_where}.image_url"))
        elif kind == "file":
            blocks.append(_import_file(part, f"{part_where}.file"))
        elif kind == "input_audio":
            if not isinstance(part.get("input_audio"), Mapping):
                got = _shown(part.get("input_audio"))
                raise BlockError(f"{part_where}.input_audio must be an object, got {got}")
            blocks.append(_native_part(part, f"{part_where}.input_audio", "[audio]"))
        else:
            raise BlockError(f"{part_where}: part type {_shown(kind)} has no block form")
    return blocks


_TEXT_PART: Final = "text_part"
"""The `Spelling.form` of a user text written as a `text` part (not the message's string)."""


def _native_part(part: Mapping[str, Any], where: str, line: str) -> Opaque:
    """A user part the block model does not hold, kept whole for this wire (`Opaque`)."""
    return Opaque(str(part.get("type")), _kept_json(part, where, BlockError), _IMPORTED, line)


def _import_file(part: Mapping[str, Any], where: str) -> Block:
    """A `file` part: a PDF or text document by its `file_data`, else kept whole.

    A `file_id` names an upload only its server knows, and a `file_data` of
    a type a `Document` does not hold has no other wire: both stay `Opaque`,
    for this wire alone, and are named by the file's name or id elsewhere.
    """
    file = part.get("file")
    if not isinstance(file, Mapping):
        raise BlockError(f"{where} must be an object, got {_shown(file)}")
    name = file.get("filename")
    if name is not None and not isinstance(name, str):
        raise BlockError(f"{where}.filename must be a string, got {_shown(name)}")
    data = file.get("file_data")
    if isinstance(data, str):
        match = _DATA_URL.match(data)
        media_type = match.group(1).lower() if match else ""
        if match is not None and media_type in DOCUMENT_MEDIA_TYPES:
            payload = data[match.end() :]
            if len(payload) % 4 or _BASE64.fullmatch(payload) is None:
                raise BlockError(f"{where}: the file_data payload is not canonical base64")
            return Document(media_type, payload, source=name)
    elif data is not None:
        raise BlockError(f"{where}.file_data must be a data: URL string, got {_shown(data)}")
    file_id = file.get("file_id")
    label = name or (file_id if isinstance(file_id, str) else None)
    line = f"[file: {shorten(label, 100)}]" if label else "[file]"
    return _native_part(part, where, line)


def _import_assistant(message: Mapping[str, Any], where: str) -> tuple[Block, ...]:
    if message.get("function_call") is not None:
        raise BlockError(f"{where}: the legacy function_call has no block form; use tool_calls")
    texts = _content_texts(message.get("content"), f"{where}.content", BlockError)
    try:
        # Under whichever name the history's server uses, as an answer is read.
        reasoning = _reasoning(message, where)
    except ProviderError as exc:
        raise BlockError(str(exc)) from None
    refusal = message.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise BlockError(f"{where}.refusal must be a string, got {_shown(refusal)}")
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise BlockError(f"{where}.tool_calls must be an array, got {_shown(raw_calls)}")
    form = _content_form(message, any(texts) or bool(refusal), bool(raw_calls))
    calls = [
        _import_tool_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(raw_calls or ())
    ]
    try:
        signed = _signed_details(message.get("reasoning_details"), _IMPORTED, where)
    except ProviderError as exc:
        raise BlockError(str(exc)) from None
    return _laid_out(_assistant_blocks(reasoning, texts, refusal, calls, signed), form)


def _import_tool_call(raw: Any, where: str) -> ToolUse:
    call = _part(raw, where)
    if call.get("type", "function") != "function":
        raise BlockError(f"{where}: tool call type {_shown(call.get('type'))} is not 'function'")
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise BlockError(f"{where}.function must be an object, got {_shown(function)}")
    arguments = function.get("arguments", "")
    read = imported_call(call.get("id"), function.get("name"), arguments, where, "function")
    return _spelled_call(read, arguments, _IMPORTED)


# -- shared readers ---------------------------------------------------------


def _content_texts(content: Any, where: str, error: type[Exception]) -> list[str]:
    """An assistant content: a string, null, or text and refusal parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise error(f"{where} must be a string, null or an array of parts, got {_shown(content)}")
    texts: list[str] = []
    for i, raw in enumerate(content):
        part_where = f"{where}[{i}]"
        if not isinstance(raw, Mapping):
            raise error(f"{part_where}: a content part must be an object, got {_shown(raw)}")
        kind = raw.get("type")
        if kind not in ("text", "refusal"):
            raise error(f"{part_where}: part type {_shown(kind)} is not text or refusal")
        value = raw.get(kind)
        if not isinstance(value, str):
            raise error(f"{part_where}.{kind} must be a string, got {_shown(value)}")
        texts.append(value)
    return texts


def _joined_text(content: Any, where: str) -> str:
    """A system or tool content: a string, or text parts joined as they stand."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BlockError(
            f"{where} must be a string or an array of text parts, got {_shown(content)}"
        )
    texts: list[str] = []
    for i, raw in enumerate(content):
        part = _part(raw, f"{where}[{i}]")
        if part.get("type") != "text":
            raise BlockError(f"{where}[{i}]: part type {_shown(part.get('type'))} is not text")
        texts.append(_part_text(part, "text", f"{where}[{i}]"))
    return "".join(texts)


def _part(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise BlockError(f"{where} must be an object, got {_shown(raw)}")
    return raw


def _part_text(part: Mapping[str, Any], key: str, where: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise BlockError(f"{where}.{key} must be a string, got {_shown(value)}")
    return value

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
- **Redacted thinking** has no block of its own in the block model, so it is
  a `Thinking` whose text is empty and whose signature is
  `REDACTED_PREFIX + data` (see `redacted_thinking`). The data is opaque,
  encrypted and meaningless to a person, so it belongs with the other opaque
  token rather than in the text readers print; and Anthropic signatures are
  base64, which has no `:`, so the prefix cannot collide with a real one.
  Decoding then encoding gives the `redacted_thinking` block back byte for
  byte.
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
  minimum); `effort` as `output_config.effort`; `cache_prompt` puts an
  ephemeral `cache_control` on the last tool and on the system prompt (then
  a one-block list); `tool_choice` is sent only with tools (`required` is
  `any`).
- **Streams**: event types this codec does not know are skipped, as the
  API's versioning policy asks; unknown block or delta types, events out of
  order and a stream without `message_stop` are a `ProviderError`. Tool
  arguments that do not parse into an object become a `ToolUse` whose input
  is the raw text, counted in `Response.malformed_tool_args`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from carryall._json import body_bytes, carryable, load_json, repair_surrogates
from carryall._text import json_type_phrase, shorten
from carryall.blocks import Block, Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.errors import BlockError, ProviderError
from carryall.providers._common import answer_message, prepare
from carryall.providers._types import Capabilities, Request, Response, StopReason, Usage

__all__ = [
    "INVALID_JSON_KEY",
    "MIN_THINKING_BUDGET",
    "REDACTED_PREFIX",
    "StreamDecoder",
    "decode_messages",
    "decode_response",
    "decode_stream",
    "encode_request",
    "encode_request_bytes",
    "redacted_data",
    "redacted_thinking",
]

REDACTED_PREFIX: Final = "redacted_thinking:"
"""The signature prefix marking a `Thinking` block as Anthropic redacted thinking."""

INVALID_JSON_KEY: Final = "INVALID_JSON"
"""The key a non-object tool input is wrapped under on this wire."""

MIN_THINKING_BUDGET: Final = 1024
"""The smallest `budget_tokens` the API accepts for extended thinking."""

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

# Mid-stream errors the API documents as transient (529, 429, 500 outside a stream).
_RETRYABLE_ERRORS: Final = frozenset({"overloaded_error", "rate_limit_error", "api_error"})

_USAGE_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)

_MISSING: Final[Any] = object()


def redacted_thinking(data: str) -> Thinking:
    """The `Thinking` block that stands for a `redacted_thinking` block with this data."""
    return Thinking("", REDACTED_PREFIX + data)


def redacted_data(block: Thinking) -> str | None:
    """The redacted-thinking data a `Thinking` block stands for, or None for real thinking."""
    signature = block.signature
    if signature is not None and signature.startswith(REDACTED_PREFIX):
        return signature[len(REDACTED_PREFIX) :]
    return None


# -- requests ---------------------------------------------------------------


def encode_request(request: Request, caps: Capabilities) -> dict[str, Any]:
    """The Messages API body for `request`, for a model that can do what `caps` says.

    The history is validated and the image limit applied first
    (`prepare`), so a broken history fails here, before anything is sent.
    Image data and tool schemas are referenced, not copied. A canonical
    message (`blocks.survey_history`) comes out of msgspec's conversion of
    the block model, with its content as a tuple and its tool inputs as
    copies; the messages this wire needs rewritten have lists. Both are JSON
    arrays to every serializer and to the SDK; the body is for sending, and
    a caller who edits it should copy it first.
    """
    messages, irregular = prepare(request, caps)
    wire: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens}
    if request.system:
        if request.cache_prompt:
            wire["system"] = [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ]
        else:
            wire["system"] = request.system
    wire["messages"] = _encode_messages(messages, irregular)
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if request.cache_prompt:
            tools[-1]["cache_control"] = {"type": "ephemeral"}
        wire["tools"] = tools
        if request.tool_choice is not None:
            if request.tool_choice == "required" and request.thinking and caps.thinking:
                raise ProviderError(
                    "Anthropic request: tool_choice 'required' cannot be combined with "
                    "thinking (the API takes only 'auto' or 'none' then)"
                )
            wire["tool_choice"] = dict(_TOOL_CHOICES[request.tool_choice])
    if request.thinking and caps.thinking:
        wire["thinking"] = {"type": "enabled", "budget_tokens": _thinking_budget(request)}
    if request.effort is not None:
        wire["output_config"] = {"effort": request.effort}
    return wire


def encode_request_bytes(request: Request, caps: Capabilities, *, stream: bool = False) -> bytes:
    """`encode_request`'s body as the bytes sent, asking for a stream when `stream` is true.

    The transport's entry point: the same JSON as `encode_request`, written
    once, so the SDK never re-walks or re-encodes the history.
    """
    body = encode_request(request, caps)
    if stream:
        body["stream"] = True
    return body_bytes(body)


def _thinking_budget(request: Request) -> int:
    if request.thinking_budget is not None:
        return request.thinking_budget
    if request.max_tokens <= MIN_THINKING_BUDGET:
        raise ProviderError(
            f"Anthropic request: thinking needs max_tokens above {MIN_THINKING_BUDGET} "
            f"(the smallest budget), got {request.max_tokens}; raise max_tokens or set "
            "thinking_budget"
        )
    return max(MIN_THINKING_BUDGET, request.max_tokens // 2)


def _encode_messages(messages: list[Message], irregular: list[int]) -> list[dict[str, Any]]:
    # The block model's JSON form was drawn after this wire, so a canonical
    # message (`survey_history`) is converted as it is, by msgspec, in one
    # call over the whole history: this runs on every request, and the
    # benchmark holds it to a small multiple of serialising the result. Only
    # the irregular messages are written block by block.
    rewrite: Iterable[int] = irregular
    try:
        out: list[dict[str, Any] | None] = msgspec.to_builtins(messages)
    except (TypeError, ValueError, RecursionError):
        # A tool input holding what msgspec will not convert: every message
        # is written block by block, which sends tool inputs by reference.
        out = [None] * len(messages)
        rewrite = range(len(messages))
    emptied = False
    for index in rewrite:
        encoded = out[index] = _encode_message(messages[index])
        emptied = emptied or encoded is None
    if emptied:
        return [m for m in out if m is not None]
    return out  # type: ignore[return-value]


def _encode_message(message: Message) -> dict[str, Any] | None:
    """One message block by block; None when nothing in it may go on this wire."""
    # The history is valid, so each block is one its role may hold. Results
    # go to the front, after any results before them; the rest keep their
    # order behind.
    content: list[dict[str, Any]] = []
    results = 0
    for block in message.content:
        if isinstance(block, Text):
            if block.text and not block.text.isspace():
                content.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolResult):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
            if block.content:
                result["content"] = block.content
            if block.is_error:
                result["is_error"] = True
            content.insert(results, result)
            results += 1
        elif isinstance(block, Image):
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
            content.append({"type": "image", "source": source})
        elif isinstance(block, ToolUse):
            content.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": _wire_input(block.input),
                }
            )
        elif block.signature:  # thinking: only signed thinking goes back
            data = redacted_data(block)
            if data is not None:
                content.append({"type": "redacted_thinking", "data": data})
            else:
                content.append(
                    {"type": "thinking", "thinking": block.text, "signature": block.signature}
                )
    return {"role": message.role, "content": content} if content else None


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
    return ProviderError(
        f"Anthropic {where}: {text}", kind=kind, retryable=kind in _RETRYABLE_ERRORS
    )


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


def _thinking(signature: str | None, text: str) -> Thinking:
    # An empty signature signs nothing: the block reads as unsigned.
    return Thinking(text, signature or None)


def _tool_input(raw: str) -> tuple[Any, bool]:
    """Streamed tool arguments parsed into an object, or the raw text and `True` (malformed)."""
    ok, value = load_json(raw)
    if not ok or not isinstance(value, dict):
        return raw, True
    return value, False


def _response_block(raw: Any, where: str) -> Block:
    """One block of an assistant message as the API returns it."""
    block = _object(raw, where)
    kind = block.get("type")
    if kind == "text":
        return Text(_str(block, "text", where))
    if kind == "thinking":
        return _thinking(_opt_str(block, "signature", where), _str(block, "thinking", where))
    if kind == "redacted_thinking":
        return redacted_thinking(_str(block, "data", where))
    if kind == "tool_use":
        value = block.get("input", _MISSING)
        if not isinstance(value, Mapping):
            raise _bad(f"{where}.input", "an object", value)
        if not carryable(value):
            raise ProviderError(f"Anthropic {where}.input: NaN or Infinity is not JSON")
        return ToolUse(
            _str(block, "id", where),
            _str(block, "name", where),
            value if isinstance(value, dict) else dict(value),
        )
    raise _unknown_block(kind, where)


def _unknown_block(kind: Any, where: str) -> ProviderError:
    if isinstance(kind, str):
        return ProviderError(f"Anthropic {where}: unknown block type {shorten(kind, 60)!r}")
    return _bad(f"{where}.type", "a block type string", kind)


def decode_response(data: Mapping[str, Any]) -> Response:
    """The `Response` for a non-streamed Messages API answer (the JSON body).

    An error body (`{"type": "error", ...}`) is raised as the `ProviderError`
    it describes; anything that is not a well-formed message is a
    `ProviderError` naming the field.
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
    blocks = [_response_block(b, f"response.content[{i}]") for i, b in enumerate(content)]
    usage = _usage(body.get("usage"), "response.usage", {})
    return Response(
        message=answer_message(blocks, "Anthropic response.content"),
        stop_reason=_stop_reason(body.get("stop_reason"), "response.stop_reason"),
        usage=Usage(**usage),
        model=_opt_str(body, "model", "response"),
        refusal=_refusal(body.get("stop_details"), "response.stop_details"),
    )


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


# -- importing histories --------------------------------------------------------


def decode_messages(
    messages: Sequence[Mapping[str, Any]], *, system: Any = None
) -> tuple[str | None, list[Message]]:
    """Read an Anthropic-style history (and its system prompt) into blocks.

    So a conversation held in this format can be continued on any backend.
    `system` is a string or a list of text blocks (joined by a blank line);
    leading `role: "system"` messages join it too. What `encode_request`
    wrote reads back as the blocks it came from (see the module notes for
    what this wire cannot hold). The history is not validated here: one that
    stops on unanswered tool calls is a legitimate thing to import.
    """
    # A lone surrogate (a `\ud800` escape with no partner) is repaired where it enters.
    messages, system = repair_surrogates(messages), repair_surrogates(system)
    parts: list[str] = []
    if system is not None:
        parts.extend(_system_parts(system, "system"))
    history = _array(messages, "messages")
    out: list[Message] = []
    for index, raw in enumerate(history):
        where = f"messages[{index}]"
        message = _object(raw, where)
        role = message.get("role")
        if role == "system":
            if out:
                raise ProviderError(
                    f"Anthropic {where}: a system message after the conversation started "
                    "cannot be held (the system prompt belongs to the request)"
                )
            parts.extend(_system_parts(message.get("content", _MISSING), f"{where}.content"))
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
                blocks = _user_blocks(items, f"{where}.content")
            else:
                blocks = [_history_block(b, f"{where}.content[{i}]") for i, b in enumerate(items)]
        out.append(Message(role, tuple(blocks)))
    return ("\n\n".join(parts) if parts else None), out


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


def _history_block(raw: Any, where: str) -> Block:
    """An assistant block of an imported history; a wrapped non-object input is unwrapped."""
    block = _response_block(raw, where)
    if isinstance(block, ToolUse) and len(block.input) == 1:
        wrapped = block.input.get(INVALID_JSON_KEY)
        if isinstance(wrapped, str):
            return ToolUse(block.id, block.name, wrapped)
    return block


def _user_blocks(items: Sequence[Any], where: str) -> list[Block]:
    blocks: list[Block] = []
    lifted: list[Image] = []
    after = 0
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        block = _object(raw, at)
        kind = block.get("type")
        if kind == "text":
            blocks.append(Text(_str(block, "text", at)))
        elif kind == "image":
            blocks.append(_image(block.get("source", _MISSING), f"{at}.source"))
        elif kind == "tool_result":
            text, images = _tool_result_content(block.get("content", ""), f"{at}.content")
            is_error = block.get("is_error", False)
            if is_error is None:
                is_error = False
            if not isinstance(is_error, bool):
                raise _bad(f"{at}.is_error", "a boolean", is_error)
            blocks.append(ToolResult(_str(block, "tool_use_id", at), text, is_error))
            lifted += images
            after = len(blocks)
        else:
            raise _unknown_block(kind, at)
    if lifted:
        # A tool's images ride after the round's results, never inside one (SPEC §1).
        blocks[after:after] = lifted
    return blocks


def _tool_result_content(value: Any, where: str) -> tuple[str, list[Image]]:
    if value is None:
        return "", []
    if isinstance(value, str):
        return value, []
    items = _array(value, where)
    texts: list[str] = []
    images: list[Image] = []
    for i, raw in enumerate(items):
        at = f"{where}[{i}]"
        block = _object(raw, at)
        kind = block.get("type")
        if kind == "text":
            texts.append(_str(block, "text", at))
        elif kind == "image":
            images.append(_image(block.get("source", _MISSING), f"{at}.source"))
        else:
            raise _unknown_block(kind, at)
    return "\n".join(texts), images


def _image(value: Any, where: str) -> Image:
    source = _object(value, where)
    kind = source.get("type")
    if kind != "base64":
        raise ProviderError(
            f"Anthropic {where}: image source type {_kind_or(kind)} cannot be held "
            "(only base64 sources: an image block keeps its bytes)"
        )
    try:
        return Image(_str(source, "media_type", where), _str(source, "data", where))
    except BlockError as exc:
        raise ProviderError(f"Anthropic {where}: {exc}") from None


# -- streams ----------------------------------------------------------------------


class _Open:
    """A content block whose deltas are still arriving: parts joined once, at its stop."""

    __slots__ = ("base", "kind", "parts", "signature")

    def __init__(self, kind: str, base: Mapping[str, Any], first: str) -> None:
        self.kind = kind
        self.base = base
        self.parts: list[str] = [first] if first else []
        self.signature: list[str] = []


class StreamDecoder:
    """Reads the events of a streamed Messages call into the `Response` the plain call gives.

    Feed it the parsed JSON of each SSE `data:` line in order. Deltas are
    kept as lists and joined once per block, so a 10 MB arguments string
    costs linear time; every field is type-checked, so hostile input is a
    `ProviderError`, never a crash.
    """

    def __init__(self) -> None:
        self._events = 0
        self._started = False
        self._stopped = False
        self._model: str | None = None
        self._stop_reason: Any = None
        self._refusal: str | None = None
        self._usage: dict[str, int] = {}
        self._blocks: list[Block] = []
        self._open: dict[int, _Open] = {}
        self._started_blocks = 0
        self._malformed = 0

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
        handler = _HANDLERS.get(kind)
        if handler is None:
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
        return Response(
            message=answer_message(self._blocks, "Anthropic stream"),
            stop_reason=_stop_reason(self._stop_reason, "stream stop_reason"),
            usage=Usage(**self._usage),
            model=self._model,
            refusal=self._refusal,
            malformed_tool_args=self._malformed,
        )

    # -- one method per event type --------------------------------------------

    def _message_start(self, data: Mapping[str, Any], where: str) -> str:
        if self._started:
            raise ProviderError(f"Anthropic {where}: a second message_start")
        self._started = True
        message = _object(data.get("message", _MISSING), f"{where}.message")
        self._model = _opt_str(message, "model", f"{where}.message")
        content = message.get("content")
        if content is not None:
            items = _array(content, f"{where}.message.content")
            self._blocks = [
                _response_block(b, f"{where}.message.content[{i}]") for i, b in enumerate(items)
            ]
            self._started_blocks = len(self._blocks)
        self._stop_reason = message.get("stop_reason")
        _usage(message.get("usage"), f"{where}.message.usage", self._usage)
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
        else:
            raise _unknown_block(kind, at)
        opened = _Open(kind, block, first)
        if kind == "thinking":
            signature = _opt_str(block, "signature", at)
            if signature:
                opened.signature.append(signature)
        self._open[index] = opened
        self._started_blocks += 1
        # Blocks land at their index, whatever order they stop in.
        self._blocks.append(Text(""))
        return first if kind == "text" else ""

    def _block_delta(self, data: Mapping[str, Any], where: str) -> str:
        opened = self._opened(data, where)
        delta = _object(data.get("delta", _MISSING), f"{where}.delta")
        kind = delta.get("type")
        expected = _DELTA_BLOCKS.get(kind) if isinstance(kind, str) else None
        if expected is None:
            raise ProviderError(f"Anthropic {where}: unknown delta type {_kind_or(kind)}")
        if opened.kind != expected:
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
        else:
            # citations_delta: where the text came from, not text; the block model keeps none.
            _object(delta.get("citation", _MISSING), f"{where}.delta.citation")
        return ""

    def _block_stop(self, data: Mapping[str, Any], where: str) -> str:
        index = self._index(data, where)
        opened = self._opened(data, where)
        del self._open[index]
        base = opened.base
        block: Block
        if opened.kind == "text":
            block = Text("".join(opened.parts))
        elif opened.kind == "thinking":
            block = _thinking("".join(opened.signature), "".join(opened.parts))
        elif opened.kind == "redacted_thinking":
            block = redacted_thinking(base["data"])
        else:
            raw = "".join(opened.parts)
            value: Any = base.get("input", {})
            if raw:
                value, malformed = _tool_input(raw)
                self._malformed += malformed
            block = ToolUse(base["id"], base["name"], value)
        self._blocks[index] = block
        return ""

    def _message_delta(self, data: Mapping[str, Any], where: str) -> str:
        self._require_closed(where)
        delta = _object(data.get("delta", _MISSING), f"{where}.delta")
        if "stop_reason" in delta:
            reason = delta["stop_reason"]
            _stop_reason(reason, f"{where}.delta.stop_reason")
            if reason is not None:
                self._stop_reason = reason
        refusal = _refusal(delta.get("stop_details"), f"{where}.delta.stop_details")
        if refusal is not None:
            self._refusal = refusal
        _usage(data.get("usage"), f"{where}.usage", self._usage)
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
}


def decode_stream(events: Iterable[Mapping[str, Any]]) -> Response:
    """The `Response` for a whole stream of events (see `StreamDecoder`)."""
    decoder = StreamDecoder()
    for event in events:
        decoder.feed(event)
    return decoder.response()

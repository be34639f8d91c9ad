"""Prompt mode: tool calling for a backend or model that has none, on the OpenAI wire.

The tools are described in the system prompt under the one calling
convention (`carryall.providers.calling_convention`); the request carries
no `tools` and no `tool_choice`, and every message is a plain role/content
message:

- an assistant turn is its text followed by its calls written in the
  convention (`render_assistant`); its thinking goes back as
  `reasoning_content` on llama-server and is dropped on the openai dialect;
- a tool round is ONE user message: a prompt carrier
  (`carryall.carrier.render_prompt_tool_carrier`) whose body holds every
  result of the round (`carryall.providers.results_body`), then the
  round's other text, then its images. For a model that can see, the carrier declares each
  image with an `[IMAGE:<name>]` marker line, the name being the image's
  `source` (or `image-N`, its place in the round, when the source cannot
  stand on a marker line, repeats, or is a `data:` URI: a picture's bytes
  never go into text), and the image parts follow the carrier text in that
  order, so the model knows which picture is which. For a model that
  cannot see, `_common.prepare` already turned each image into its
  `image_placeholder` line and the carrier declares nothing. Non-image
  attachments of a result (`ToolResult.attachments`) have no wire here,
  as on every dialect.

Everything else (the token limit, `reasoning_effort`, `enable_thinking`,
the refusal to end a llama-server history on an assistant turn, image
parts as `data:` URLs) is the OpenAI codec's (`carryall.providers.openai`):
prompt mode rewrites the history into plain messages and hands it on, so
the two agree by construction.

Constrained mode (`constrained=True`, for llama-server without native tool
support) adds a `response_format` whose JSON schema admits exactly
`{"tool_calls": [{"name": <a tool>, "arguments": <its schema>}, ...]}` or
`{"response": "<text>"}`, so the server's grammar lets a call name only a
real tool with arguments that match its schema. `tool_choice` `none` leaves
only the `response` branch, `required` only the `tool_calls` one. Past
assistant turns are written in that same JSON form (a turn with calls as
its calls alone: the shape has no room for prose beside them) so the model
sees consistent examples. A tool schema's local `$ref`s are rebased onto
the combined schema's `$defs`.

Decoding reads the OpenAI answer with the OpenAI codec, then reads the
calls out of the text: with `parse_tool_calls`, or in constrained mode from
the JSON object (an answer that is not that JSON is read the unconstrained
way, so a server that ignored the format still works). The stop reason is
`tool_use` whenever calls were found, and malformed calls are counted in
`Response.malformed_tool_args`. Call ids are derived from the completion's
`id` and the text, so they are pure and unique within a turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jiter
import msgspec

from carryall._json import load_json
from carryall.blocks import Block, Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.carrier import Marker, MarkerKind, marker_line, render_prompt_tool_carrier
from carryall.errors import CarrierError, HistoryError, ProviderError
from carryall.providers import openai as openai_codec
from carryall.providers import structured
from carryall.providers._common import Wire, answer_message, prepare
from carryall.providers._types import (
    Capabilities,
    Dialect,
    Downgrade,
    Encoded,
    OutputSchema,
    Request,
    Response,
    ToolSpec,
)
from carryall.providers.calling_convention import (
    CALL_FENCE_LABELS,
    CALL_OPEN,
    call_id,
    describe_tools,
    is_call_fence,
    offered_schema,
    parse_tool_calls,
    read_name,
    render_assistant,
    reply_digest,
)
from carryall.providers.results_body import render_results_body

__all__ = [
    "SCHEMA_NAME",
    "StreamDecoder",
    "decode_response",
    "encode",
    "encode_request",
    "encode_request_bytes",
    "plain_request",
    "read_calls",
    "response_format",
    "response_schema",
]

SCHEMA_NAME = "tool_calls_or_response"
"""The `json_schema.name` of the constrained response format."""

_TOOL_CHOICES = (None, "auto", "none", "required")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Schema keywords whose values are data, not schemas: a "$ref" key inside
# them is a value the tool expects, never a reference to rebase.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})


# -- encoding ------------------------------------------------------------------


def encode_request(
    request: Request,
    caps: Capabilities,
    *,
    dialect: Dialect = "openai",
    constrained: bool = False,
) -> dict[str, Any]:
    """The `/v1/chat/completions` body for a request in prompt mode (`encode`'s body)."""
    return encode(request, caps, dialect=dialect, constrained=constrained).body


def encode(
    request: Request,
    caps: Capabilities,
    *,
    dialect: Dialect = "openai",
    constrained: bool = False,
) -> Encoded:
    """The `/v1/chat/completions` body for a request in prompt mode, and its downgrades.

    The system prompt is `request.system` then `describe_tools`; there are
    no `tools` or `tool_choice` keys; tool rounds are prompt carriers.
    `constrained` adds the `response_format` that makes llama-server answer
    only with a real call or a plain response. The history is fitted to the
    dialect as the OpenAI codec fits it (`openai.wire_of`), with the same
    target origin, and what was left off or sent as text is reported.
    """
    inner, downgrades = plain_request(
        request, caps, openai_codec.wire_of(dialect), constrained=constrained
    )
    body = openai_codec.encode_prepared(inner, inner.messages, caps, dialect)
    if constrained:
        body["response_format"] = response_format(
            request.tools, request.tool_choice, answer=structured.checked(request)
        )
    mode = "constrained" if constrained else "plain"
    placed = openai_codec.place_options(request, body, dialect, prompt=mode)
    return Encoded(body, (*placed, *downgrades) if placed else downgrades)


def plain_request(
    request: Request, caps: Capabilities, wire: Wire, *, constrained: bool = False
) -> tuple[Request, tuple[Downgrade, ...]]:
    """The request as prompt mode sends it on `wire`, and the downgrades made to fit it.

    Validated, image-limited, blinded and fitted to the wire (`prepare`);
    tool rounds are prompt carriers and past calls are written in the
    convention (or in the constrained JSON form); no `tools`, no
    `tool_choice`. Each wire's codec encodes the result as it would any
    request.
    """
    if request.tool_choice not in _TOOL_CHOICES:
        raise ProviderError(
            f"tool_choice {request.tool_choice!r} is not one of auto, none, required"
        )
    prepared = prepare(request, caps, wire)
    messages = prepared.messages
    plain = [
        _plain(message, index, messages, constrained, structured=request.output_schema is not None)
        for index, message in enumerate(messages)
    ]
    description = describe_tools(
        request.tools, constrained=constrained, tool_choice=request.tool_choice
    )
    system = "\n\n".join(part for part in (request.system, description) if part) or None
    inner = msgspec.structs.replace(
        request, messages=tuple(plain), system=system, tools=(), tool_choice=None
    )
    return inner, prepared.downgrades


def encode_request_bytes(
    request: Request,
    caps: Capabilities,
    *,
    dialect: Dialect = "openai",
    constrained: bool = False,
    stream: bool = False,
) -> bytes:
    """`encode_request`'s body as the bytes sent (`openai.sent_bytes`: the same wire)."""
    body = encode_request(request, caps, dialect=dialect, constrained=constrained)
    return openai_codec.sent_bytes(body, stream=stream)


def _plain(
    message: Message,
    index: int,
    messages: Sequence[Message],
    constrained: bool,
    *,
    structured: bool = False,
) -> Message:
    """One message as the plain text (and images) prompt mode sends."""
    if message.role == "assistant":
        thinking = [b for b in message.content if isinstance(b, Thinking)]
        text = message.text()
        calls = message.tool_uses()
        try:
            content = (
                _constrained_content(text, calls, structured)
                if constrained
                else render_assistant(text, calls)
            )
        except (TypeError, ValueError, RecursionError) as exc:
            raise HistoryError(index, f"a tool call's input is not JSON: {exc}") from None
        return Message("assistant", (*thinking, Text(content)))
    results = message.tool_results_in()
    if not results:
        return message
    previous = messages[index - 1] if index > 0 else None
    names = {call.id: call.name for call in previous.tool_uses()} if previous is not None else {}
    rest: list[Block] = [b for b in message.content if not isinstance(b, ToolResult)]
    images = [b for b in rest if isinstance(b, Image)]
    carrier = render_prompt_tool_carrier(render_results_body(results, names), _markers(images))
    return Message("user", (Text(carrier), *rest))


def _constrained_content(text: str, calls: Sequence[ToolUse], structured: bool = False) -> str:
    if calls:
        entries = [{"name": call.name, "arguments": call.input} for call in calls]
        return json.dumps({"tool_calls": entries}, ensure_ascii=False, allow_nan=False)
    if structured:
        # A past structured answer is its JSON value, as the schema's response branch has it.
        ok, value = load_json(text)
        if ok:
            return json.dumps({"response": value}, ensure_ascii=False)
    return json.dumps({"response": text}, ensure_ascii=False)


def _json_text(value: Any) -> str:
    """A JSON value as its text; nothing (`None`) as no text."""
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def _markers(images: Sequence[Image]) -> list[Marker]:
    """The `[IMAGE:<name>]` declarations of a round's images, one per image part that follows."""
    markers: list[Marker] = []
    used: set[str] = set()
    for position, image in enumerate(images, start=1):
        target = image.source or ""
        if not _nameable(target) or target in used:
            target = f"image-{position}"
        used.add(target)
        markers.append(Marker(MarkerKind.IMAGE, target))
    return markers


def _nameable(source: str) -> bool:
    if not source or source[:5].lower() == "data:" or _CONTROL.search(source):
        return False
    try:
        marker_line(Marker(MarkerKind.IMAGE, source))
    except CarrierError:
        return False
    return True


# -- the constrained response format ---------------------------------------------


def response_format(
    tools: Sequence[ToolSpec], tool_choice: str | None = None, answer: OutputSchema | None = None
) -> dict[str, Any]:
    """The OpenAI-form `response_format` for constrained prompt mode (`response_schema`)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": response_schema(tools, tool_choice, answer)},
    }


def response_schema(
    tools: Sequence[ToolSpec], tool_choice: str | None = None, answer: OutputSchema | None = None
) -> dict[str, Any]:
    """The JSON schema of a constrained answer: real calls, or a plain response.

    `{"tool_calls": [...]}` with each entry's `name` a `const` of one tool and
    its `arguments` that tool's input schema, or `{"response": "..."}`.
    With no tools, or `tool_choice` `none`, only the response; with
    `required`, only calls. With an `answer` schema (structured output) the
    response is a value matching it rather than a string, and is read back
    as its JSON text.
    """
    defs: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    for position, tool in enumerate(tools):
        arguments: Any = offered_schema(tool)
        try:
            has_ref = _has_ref(arguments)
        except RecursionError:
            raise ProviderError(
                f"tool {tool.name!r}: its input schema is nested too deeply"
            ) from None
        if has_ref:
            # A tool schema's "#/..." refs point into that schema; inside the
            # combined one they must point to where it now lives.
            key = f"tool{position}"
            defs[key] = _rebase(arguments, f"#/$defs/{key}")
            arguments = {"$ref": f"#/$defs/{key}"}
        entries.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    response: Any = {"type": "string"}
    if answer is not None:
        response = answer.schema
        if _has_ref(response):
            defs["answer"] = _rebase(response, "#/$defs/answer")
            response = {"$ref": "#/$defs/answer"}
    response_branch: dict[str, Any] = {
        "type": "object",
        "properties": {"response": response},
        "required": ["response"],
        "additionalProperties": False,
    }
    branches: list[dict[str, Any]] = []
    if entries and tool_choice != "none":
        items = entries[0] if len(entries) == 1 else {"anyOf": entries}
        branches.append(
            {
                "type": "object",
                "properties": {"tool_calls": {"type": "array", "minItems": 1, "items": items}},
                "required": ["tool_calls"],
                "additionalProperties": False,
            }
        )
    if not branches or tool_choice != "required":
        branches.append(response_branch)
    schema: dict[str, Any] = dict(branches[0]) if len(branches) == 1 else {"anyOf": branches}
    if defs:
        schema["$defs"] = defs
    return schema


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            return True
        return any(_has_ref(v) for k, v in node.items() if k not in _DATA_KEYWORDS)
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def _rebase(node: Any, base: str) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if (
                key == "$ref"
                and isinstance(value, str)
                and (value == "#" or value.startswith("#/"))
            ):
                out[key] = base + value[1:]
            elif key in _DATA_KEYWORDS:
                out[key] = value
            else:
                out[key] = _rebase(value, base)
        return out
    if isinstance(node, list):
        return [_rebase(v, base) for v in node]
    return node


# -- decoding ------------------------------------------------------------------


def decode_response(data: Mapping[str, Any], *, constrained: bool = False) -> Response:
    """A `chat.completion` answer in prompt mode: the calls read out of its text.

    Wire errors and malformed bodies are the OpenAI codec's `ProviderError`s.
    """
    inner = openai_codec.decode_response(data)
    salt = data.get("id")
    return read_calls(inner, salt if isinstance(salt, str) else "", constrained=constrained)


def read_calls(inner: Response, salt: str, *, constrained: bool = False) -> Response:
    """A plain answer (decoded by any wire's codec) with its calls read out of its text.

    `salt` (the answer's id) makes the derived call ids unique per answer.
    """
    thinking = [b for b in inner.message.content if isinstance(b, Thinking)]
    native = inner.message.tool_uses()
    content = inner.message.text()
    if constrained:
        text, calls, malformed = _read_constrained(
            content, salt, cut=inner.stop_reason == "max_tokens"
        )
    else:
        parsed = parse_tool_calls(content, salt=salt)
        text, calls, malformed = parsed.text, list(parsed.calls), parsed.malformed
    blocks: list[Block] = [*thinking]
    if text:
        blocks.append(Text(text))
    # A server that parsed calls itself (tools never sent, but some do) keeps them.
    blocks.extend(native)
    blocks.extend(calls)
    if not blocks:
        blocks.append(Text(""))
    return Response(
        message=answer_message(blocks, "prompt-mode answer"),
        stop_reason="tool_use" if calls or native else inner.stop_reason,
        usage=inner.usage,
        model=inner.model,
        refusal=inner.refusal,
        malformed_tool_args=inner.malformed_tool_args + malformed,
        raw_usage=inner.raw_usage,
        stop_sequence=inner.stop_sequence,
        logprobs=inner.logprobs,
    )


def _read_constrained(content: str, salt: str, *, cut: bool) -> tuple[str, list[ToolUse], int]:
    """The text and calls of a constrained answer; `cut` when it hit the token limit.

    A call cut off by the token limit is counted as malformed and is not a
    call: its arguments never arrived, so handing the fragment to the tool
    as a string would only earn an error the model cannot learn from. The
    response keeps its `max_tokens` stop reason, which is how it is reported.
    """
    stripped = content.strip()
    ok, value = load_json(stripped)
    if ok and isinstance(value, dict) and ("tool_calls" in value or "response" in value):
        response = value.get("response")
        # A structured answer (`response_schema`'s `answer`) is a JSON value: its text.
        text = response if isinstance(response, str) else _json_text(response)
        raw_calls = value.get("tool_calls")
        if raw_calls is None or raw_calls == []:
            return text, [], 0
        items = raw_calls if isinstance(raw_calls, list) else [raw_calls]
        digest = reply_digest(content, salt)
        calls: list[ToolUse] = []
        malformed = 0
        for position, item in enumerate(items):
            name = item.get("name") if isinstance(item, dict) else None
            arguments = item.get("arguments") if isinstance(item, dict) else None
            if isinstance(name, str) and name and isinstance(arguments, dict):
                calls.append(ToolUse(call_id(digest, position), name, arguments))
                continue
            malformed += 1
            try:
                raw = json.dumps(item, ensure_ascii=False)
            except (ValueError, RecursionError):
                raw = stripped
            calls.append(
                ToolUse(call_id(digest, position), name if isinstance(name, str) else "", raw)
            )
        return text, calls, malformed
    if not ok and stripped.startswith("{"):
        reader = _ResponseText()
        reader.feed(stripped)
        if reader.started:
            # Cut short (the token limit): the response text so far is the answer.
            return reader.text(), [], 0
        if cut and not reader.failed:
            # Cut inside the envelope itself (`{"resp`): no word of the
            # answer arrived, and the envelope is not one.
            return "", [], 0
        if '"tool_calls"' in stripped[:64]:
            if cut:
                return "", [], 1
            call = ToolUse(call_id(reply_digest(content, salt), 0), read_name(stripped), stripped)
            return "", [call], 1
    # Not the constrained shape at all: a server that ignored the format. Read
    # it the unconstrained way rather than lose a call written in the convention.
    parsed = parse_tool_calls(content, salt=salt)
    return parsed.text, list(parsed.calls), parsed.malformed


# -- streaming -----------------------------------------------------------------


class StreamDecoder:
    """Decodes a prompt-mode stream of `chat.completion.chunk` events.

    `feed` returns the text a person may be shown now: in unconstrained mode
    the prose, holding back anything that may be a call (from the first
    `<tool_call>` on, a partial tag, a ```json or ```tool_call fence until it
    closes and is known not to be a call); in constrained mode the
    `response` string as it arrives, nothing for calls. `response()` reads
    the whole text with `decode_response`'s rules, so what was shown never
    decides what was called.
    """

    def __init__(self, constrained: bool = False) -> None:
        self._inner = openai_codec.StreamDecoder()
        self._constrained = constrained
        self._gate: _ProseGate | _ResponseGate = _ResponseGate() if constrained else _ProseGate()
        self._salt = ""

    def feed(self, chunk: Mapping[str, Any] | str) -> str:
        """Take one chunk; return the text it made newly visible (see the class)."""
        visible = self._inner.feed(chunk)
        if not self._salt and isinstance(chunk, Mapping):
            chunk_id = chunk.get("id")
            if isinstance(chunk_id, str):
                self._salt = chunk_id
        return self._gate.feed(visible) if visible else ""

    def response(self) -> Response:
        """The whole response; a `ProviderError` when the stream never finished."""
        return read_calls(self._inner.response(), self._salt, constrained=self._constrained)


_FENCE_LINE = re.compile(r"[ \t]{0,3}(`{3,}+)[^\n<]*+\n?")
_MAYBE_FENCE = re.compile(r"[ \t]{0,3}`{0,2}")
_IS_FENCE = re.compile(r"[ \t]{0,3}```")


class _ProseGate:
    """Decides, as unconstrained content streams in, which of it is prose to show.

    Mirrors `parse_tool_calls` closely enough that call text is not shown;
    where they could disagree it holds back, never shows more.
    """

    def __init__(self) -> None:
        self._stopped = False
        self._tail = ""  # a suffix that may be the start of a tag
        self._line: list[str] = []  # the current line while it may be a fence line
        self._prefix = ""  # its first characters, enough to decide
        self._undecided = True  # at a line start: is this line a fence line?
        self._fence: tuple[int, str] | None = None  # (backticks, label) of an open fence
        self._held: list[str] | None = None  # a fence that may be a call, until it closes

    def feed(self, text: str) -> str:
        out: list[str] = []
        start = 0
        while start < len(text) and not self._stopped:
            newline = text.find("\n", start)
            end = len(text) if newline < 0 else newline + 1
            self._piece(text[start:end], newline >= 0, out)
            start = end
        return "".join(out)

    def _piece(self, piece: str, ends_line: bool, out: list[str]) -> None:
        """One piece of a line (the whole rest of it when `ends_line`)."""
        if not self._undecided:
            self._content(piece, out)
        else:
            self._line.append(piece)
            self._prefix = (self._prefix + piece)[:8]
            head = self._prefix.rstrip("\n")
            if _IS_FENCE.match(head):
                if not ends_line:
                    return  # a fence line: wait for all of it
                line = "".join(self._line)
                self._reset_line()
                self._fence_line(line, out)
            elif _MAYBE_FENCE.fullmatch(head) and not ends_line:
                return  # may still become one
            else:
                line = "".join(self._line)
                self._reset_line()
                self._undecided = False
                self._content(line, out)
        # Each line starts undecided, so a fence line is never shown before it is read.
        self._undecided = ends_line

    def _reset_line(self) -> None:
        self._line = []
        self._prefix = ""

    def _fence_line(self, line: str, out: list[str]) -> None:
        """A whole line that starts like a fence: open, close, or neither."""
        match = _FENCE_LINE.fullmatch(line)
        if match is None:  # a `<` on it: never a fence, so a tag there is a tag
            self._content(line, out)
            return
        ticks = len(match.group(1))
        info = line.strip(" \t\n")[ticks:].strip()
        if self._fence is None:
            if "`" in info:
                self._content(line, out)
                return
            label = info.split(" ")[0].lower()
            self._fence = (ticks, label)
            if label in CALL_FENCE_LABELS:
                self._held = [line]
            else:
                self._emit(line, out)
            return
        if info or ticks < self._fence[0]:
            self._content(line, out)
            return
        held, label = self._held, self._fence[1]
        self._fence = None
        self._held = None
        if held is None:
            self._emit(line, out)
            return
        body = "".join(held[1:])
        if CALL_OPEN in body:
            self._stopped = True
        elif not is_call_fence(label, body):
            self._emit("".join(held) + line, out)

    def _content(self, text: str, out: list[str]) -> None:
        if self._held is not None:
            self._held.append(text)
        else:
            self._emit(text, out)

    def _emit(self, text: str, out: list[str]) -> None:
        text = self._tail + text
        self._tail = ""
        at = text.find(CALL_OPEN)
        if at >= 0:
            out.append(text[:at])
            self._stopped = True
            return
        for size in range(min(len(CALL_OPEN) - 1, len(text)), 0, -1):
            if text.endswith(CALL_OPEN[:size]):
                self._tail = text[-size:]
                text = text[:-size]
                break
        out.append(text)


class _ResponseText:
    """Reads the `response` string of a constrained answer as it arrives.

    The answer must start `{"response": "` (whitespace allowed between the
    tokens); the string after it is decoded by jiter's partial mode, which
    gives back every character that is whole so far, so an escape split
    across chunks waits for its end. Only the string text since the last
    point where it decoded whole is read again, so a long answer streams in
    linear time. An escape JSON does not have (or a lone surrogate) ends the
    reading; the text decoded before it stands.
    """

    _HEAD = '{"response":"'
    _SPACE_BEFORE = frozenset({0, 1, 11, 12})  # head positions where whitespace may come first

    def __init__(self) -> None:
        self._at = 0  # position in _HEAD; len(_HEAD) once inside the string
        self.failed = False
        self.done = False
        self._raw = ""  # string text since the last point it decoded whole
        self._shown = 0  # characters of that text's decoding already given out
        self._out: list[str] = []

    @property
    def started(self) -> bool:
        """Whether the head matched: the answer is a response, not calls."""
        return self._at == len(self._HEAD)

    def text(self) -> str:
        """The response text decoded so far."""
        return "".join(self._out)

    def feed(self, text: str) -> str:
        """Take more answer text; return the response text it completed."""
        if self.failed or self.done:
            return ""
        pos = 0
        while not self.started:
            if self._at in self._SPACE_BEFORE:
                stripped = text[pos:].lstrip(" \t\r\n")
                pos = len(text) - len(stripped)
            if pos >= len(text):
                return ""
            if text[pos] != self._HEAD[self._at]:
                self.failed = True
                return ""
            pos += 1
            self._at += 1
        return self._string(text[pos:])

    def _string(self, text: str) -> str:
        # A model writing JSON by hand puts raw line breaks and tabs in its
        # strings; JSON wants them escaped, and the text they meant is plain.
        raw = self._raw + _RAW_CONTROL.sub(_escape_control, text)
        data = b'"' + raw.encode("utf-8", "surrogatepass")
        try:
            # Whole and still open: the common case, and a point to restart from.
            decoded: str = jiter.from_json(data + b'"')
            whole = True
        except ValueError:
            whole = False
            try:
                # Closed inside this text ("on" mode ignores what follows).
                decoded = jiter.from_json(data, partial_mode="on")
                self.done = True
            except ValueError:
                try:
                    decoded = jiter.from_json(data, partial_mode="trailing-strings")
                except ValueError:
                    self.failed = True
                    return ""
        new = decoded[self._shown :]
        self._out.append(new)
        if whole:
            self._raw, self._shown = "", 0
        else:
            self._raw, self._shown = raw, len(decoded)
        return new


_RAW_CONTROL = re.compile(r"[\x00-\x1f]")


def _escape_control(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


class _ResponseGate:
    """What a constrained stream shows: the `response` text, or, when the answer
    is not JSON at all (a server that ignored the format), the prose gate's view."""

    def __init__(self) -> None:
        self._reader = _ResponseText()
        self._seen: list[str] = []
        self._fallback: _ProseGate | None = None

    def feed(self, text: str) -> str:
        if self._fallback is not None:
            return self._fallback.feed(text)
        if not self._reader.started and not self._reader.failed:
            self._seen.append(text)
        shown = self._reader.feed(text)
        if self._reader.failed and not self._reader.started and self._seen:
            seen = "".join(self._seen)
            self._seen = []
            if not seen.lstrip().startswith("{"):
                self._fallback = _ProseGate()
                return self._fallback.feed(seen)
        return shown

"""The recorded 2026 exchanges (`tests/fixtures/recorded/<wire>/2026/`) and one adapter per wire.

Each fixture file is one recording (a cassette, an SDK's fixture folder, or
for llama-server carryall's own recording of a live server, made by the
`record.py` beside it) with its exchanges in order; see the `SOURCES.md`
beside each. This module
reads them and puts the six wires behind one table (`WIRES`), so a check is
written once and asked of every wire: decode a whole answer or a stream,
import a request's history, encode a history for a target, validate a body
against the official SDK's request type, and say where a wire keeps the
content of an answer and of a request. Every codec name the checks use is
named here and nowhere else, so a change of the codec contract is one edit.

`leaves` walks recorded JSON into the values a check expects to survive;
`held` walks what carryall made of it (blocks, an opaque block's raw JSON,
the report) into the values it holds.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import msgspec

from carryall.blocks import Message, Opaque
from carryall.providers import Capabilities, Encoded, Request, Response, ToolSpec
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import bedrock as bedrock_codec
from carryall.providers import gemini as gemini_codec
from carryall.providers import openai as openai_codec
from carryall.providers import responses as responses_codec
from tests.support.recorded import (
    anthropic_sdk_check,
    assemble_anthropic_stream,
    assemble_openai_stream,
    chat_sdk_check,
)
from tests.support.sdk_wires import (
    check_bedrock_request,
    check_gemini_request,
    check_responses_request,
)

ROOT = Path(__file__).parent.parent / "fixtures" / "recorded"
FOLDERS = (
    "anthropic",
    "openai",
    "openai_compatible",
    "responses",
    "gemini",
    "bedrock",
    "llama_server",
)
CAPS = Capabilities(vision=True, native_tools=True, thinking=True)

# Keys whose values are the wire's grammar or its bookkeeping, not what was said:
# a type tag, a role, a position in a stream, a status word, stream padding.
STRUCTURE = frozenset(
    {
        "type",
        "role",
        "index",
        "content_index",
        "output_index",
        "sequence_number",
        "item_id",
        "obfuscation",
        "status",
        "contentBlockIndex",
        "p",
    }
)


@dataclass(frozen=True)
class Exchange:
    """One recorded exchange, with the file and position it came from."""

    fixture: str
    position: int
    wire: str
    data: dict[str, Any]
    following: dict[str, Any] | None

    @property
    def id(self) -> str:
        return f"{self.fixture}#{self.position}"

    @property
    def request(self) -> dict[str, Any] | None:
        request = self.data.get("request")
        return request if isinstance(request, dict) else None

    @property
    def answered(self) -> bool:
        return self.data.get("status", 200) == 200 and (
            "response" in self.data or "stream" in self.data
        )

    @property
    def endpoint(self) -> str:
        uri = self.data.get("uri")
        return urlparse(uri).netloc if uri else WIRES[self.wire].endpoint

    @property
    def model(self) -> str:
        """The model the request named (an alias, as often as not)."""
        return WIRES[self.wire].requested_model(self)


def fixture_files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder / "2026").glob("*.json"))


def exchanges() -> list[Exchange]:
    out = []
    for path in fixture_files():
        doc = json.loads(path.read_text(encoding="utf-8"))
        items = doc["exchanges"]
        for i, item in enumerate(items):
            following = items[i + 1] if i + 1 < len(items) else None
            out.append(Exchange(doc["name"], i, doc["wire"], item, following))
    return out


# -- walking values -------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """One value of a recording: where it sat (`path`), under which key, and the value."""

    path: str
    key: str
    value: Any
    kind: str = ""

    @property
    def label(self) -> str:
        """The value's place in words: the type of the item it sat in and its key."""
        if self.kind:
            return f"{self.kind}.{self.key}"
        steps = [s for s in re.sub(r"\[\d+\]", "", self.path).split(".") if s]
        return ".".join(steps[-2:])


def leaves(value: Any, path: str = "", key: str = "", kind: str = "") -> Iterator[Leaf]:
    """Every string and number under `value`, structure keys left out.

    A JSON text (a call's arguments) is opened and walked; a `data:` URL is
    its media type and its bytes, which blocks keep apart.
    """
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return
        if text[:1] in "{[" and key in ("arguments", "input", "partial_json"):
            try:
                opened = json.loads(text)
            except ValueError:
                yield Leaf(path, key, value, kind)
            else:
                yield from leaves(opened, path, key, kind)
            return
        if value.startswith("data:") and ";base64," in value:
            media_type, _, data = value[5:].partition(";base64,")
            yield Leaf(path, key, media_type, kind)
            yield Leaf(path, key, data, kind)
            return
        yield Leaf(path, key, value, kind)
    elif isinstance(value, int | float):
        yield Leaf(path, key, value, kind)
    elif isinstance(value, Mapping):
        tag = value.get("type")
        inner = tag if isinstance(tag, str) else kind
        for name, item in value.items():
            if name in STRUCTURE:
                continue
            yield from leaves(item, f"{path}.{name}", name, inner)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from leaves(item, f"{path}[{i}]", key, kind)


def _builtins(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    return value


class Held:
    """Every value carryall holds: strings (and the texts they are part of) and numbers."""

    def __init__(self) -> None:
        self.strings: set[str] = set()
        self.numbers: set[float] = set()
        self.report: list[str] = []

    def add(self, value: Any) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, str):
            self.strings.add(value)
            if value[:1] in "{[":
                with contextlib.suppress(ValueError):
                    self.add(json.loads(value))
        elif isinstance(value, int | float):
            self.numbers.add(value)
        elif isinstance(value, Mapping):
            for item in value.values():
                self.add(item)
        elif isinstance(value, list | tuple):
            for item in value:
                self.add(item)

    def keeps(self, leaf: Leaf) -> bool:
        value = leaf.value
        if isinstance(value, str):
            if value in self.strings:
                return True
            # A longer value may sit inside a text that renders it; a short one must be held
            # as it is, or every two-letter value would pass inside some sentence.
            if len(value) >= 8 and any(value in s for s in self.strings):
                return True
            return _same_bytes(value, self.strings)
        return value in self.numbers or str(value) in self.strings

    def names(self, leaf: Leaf) -> bool:
        """A report line names the value's key (what was left out), so the loss is said."""
        return any(leaf.key and leaf.key in line for line in self.report)


def _same_bytes(value: str, strings: set[str]) -> bool:
    # A signature or inline data may be held in the other base64 alphabet.
    variants = {
        value.replace("+", "-").replace("/", "_"),
        value.replace("-", "+").replace("_", "/"),
    }
    return any(v != value and v in strings for v in variants)


def held_by(messages: Sequence[Message], *extra: Any, report: Sequence[Any] = ()) -> Held:
    held = Held()
    for message in messages:
        held.add(message.to_dict())
        for block in message.content:
            if isinstance(block, Opaque):
                held.add(block.raw)
    for value in extra:
        held.add(_builtins(value))
    for item in report:
        held.report.append(json.dumps(_builtins(item), default=str))
    return held


def held_by_response(response: Response) -> Held:
    extra: list[Any] = [response.refusal, response.model, response.logprobs]
    report: list[Any] = list(response.downgrades)
    for name in ("losses", "report", "dropped"):
        found = getattr(response, name, None)
        if found:
            report.extend(found if isinstance(found, list | tuple) else [found])
    return held_by([response.message], *extra, report=report)


def lost(recorded: Any, held: Held, root: str) -> list[Leaf]:
    """The values of `recorded` that `held` neither keeps nor names in its report."""
    return [
        leaf for leaf in leaves(recorded, root) if not held.keeps(leaf) and not held.names(leaf)
    ]


def unsent(wanted: Sequence[Leaf], body: Any) -> list[Leaf]:
    """The values of `wanted` that a request `body` does not carry.

    The body is walked as `Held` walks what carryall holds, so a JSON text
    inside it (a call's `arguments`) is opened at any depth: a value sent
    inside one counts as sent, however many times its text is escaped in
    the body as a whole.
    """
    sent = Held()
    sent.add(_builtins(body))
    return [leaf for leaf in wanted if not sent.keeps(leaf)]


def describe(missing: Sequence[Leaf]) -> str:
    """The lost values' places, each once, then the first value: a failure says what and where."""
    labels = sorted({leaf.label for leaf in missing})
    first = missing[0]
    return f"{', '.join(labels)} (first: {first.path}={str(first.value)[:50]!r})"


# -- the wires ------------------------------------------------------------------------


def _tools_anthropic(request: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    return tuple(
        ToolSpec(t["name"], t.get("description", ""), t["input_schema"])
        for t in request.get("tools") or []
        if "input_schema" in t
    )


def _tools_chat(request: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    out = []
    for tool in request.get("tools") or []:
        function = tool.get("function")
        if tool.get("type") == "function" and function:
            out.append(
                ToolSpec(function["name"], function.get("description", ""), function["parameters"])
            )
    return tuple(out)


def _tools_responses(request: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    return tuple(
        ToolSpec(t["name"], t.get("description") or "", t.get("parameters") or {"type": "object"})
        for t in request.get("tools") or []
        if t.get("type") == "function"
    )


def _tools_gemini(request: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    out = []
    for tool in request.get("tools") or []:
        for d in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            schema = (
                d.get("parametersJsonSchema")
                or d.get("parameters_json_schema")
                or d.get("parameters")
                or {"type": "object"}
            )
            out.append(ToolSpec(d["name"], d.get("description") or "", schema))
    return tuple(out)


def _tools_bedrock(request: Mapping[str, Any]) -> tuple[ToolSpec, ...]:
    out = []
    for tool in (request.get("toolConfig") or {}).get("tools") or []:
        spec = tool.get("toolSpec")
        if spec:
            out.append(
                ToolSpec(spec["name"], spec.get("description", ""), spec["inputSchema"]["json"])
            )
    return tuple(out)


def _model_from_path(exchange: Exchange) -> str:
    uri = exchange.data.get("uri")
    if not uri:
        return ""
    path = unquote(urlparse(uri).path)
    if "/models/" in path:  # Gemini and Vertex: .../models/<model>:generateContent
        return path.rsplit("/models/", 1)[1].split(":", 1)[0]
    if "/model/" in path:  # Bedrock: /model/<id>/converse
        return path.split("/model/", 1)[1].rsplit("/", 1)[0]
    return ""


def _gemini_system(request: Mapping[str, Any]) -> Any:
    return request.get("systemInstruction") or request.get("system_instruction")


def _stream_gemini(payloads: list[Any]) -> dict[str, Any]:
    """The whole answer a Gemini stream adds up to: its parts in order, the last of all else.

    A stream is pieces of the answer `generateContent` gives whole, and its
    values are those of that answer, as every other wire's assembler joins
    its deltas: a text sent a piece a chunk is one text (pieces of one kind,
    thought or not, up to the piece whose `thoughtSignature` closes it), and
    a call whose arguments stream (`partialArgs`) is the one call they add
    up to (`_StreamingCall`). Only the pieces' values count, never how the
    stream cut them.
    """
    body: dict[str, Any] = {}
    parts: list[Any] = []
    candidate: dict[str, Any] = {}
    call: _StreamingCall | None = None
    for chunk in payloads:
        for key, value in chunk.items():
            if key != "candidates":
                body[key] = value
        for cand in chunk.get("candidates", [])[:1]:
            for part in (cand.get("content") or {}).get("parts") or []:
                function = part.get("functionCall") if isinstance(part, Mapping) else None
                if isinstance(function, Mapping) and (
                    call is not None or "partialArgs" in function or function.get("willContinue")
                ):
                    if call is None:
                        call = _StreamingCall()
                        parts.append(call.part)
                    if not call.take(part, function):
                        call = None
                elif parts and _joins(parts[-1], part):
                    parts[-1] = {**parts[-1], **part, "text": parts[-1]["text"] + part["text"]}
                else:
                    parts.append(part)
            for key, value in cand.items():
                if key != "content":
                    candidate[key] = value
    candidate["content"] = {"role": "model", "parts": parts}
    body["candidates"] = [candidate]
    return body


_TEXT_PART = frozenset({"text", "thought", "thoughtSignature"})


def _joins(last: Any, part: Any) -> bool:
    """Whether `part` is the next piece of the text `last` began (a signature closes a text)."""
    return (
        isinstance(last, Mapping)
        and isinstance(part, Mapping)
        and isinstance(last.get("text"), str)
        and isinstance(part.get("text"), str)
        and set(last) <= _TEXT_PART
        and set(part) <= _TEXT_PART
        and bool(last.get("thought")) == bool(part.get("thought"))
        and "thoughtSignature" not in last
    )


class _StreamingCall:
    """A Vertex function call whose arguments stream as `partialArgs`, added up.

    Each piece puts its value (`stringValue`, `numberValue`, `boolValue`,
    `nullValue`) at its `jsonPath` (RFC 9535, `$.a.b[0]`); a string's pieces
    for one path join in order; the call is whole at the first chunk whose
    call no longer says `willContinue`.
    """

    def __init__(self) -> None:
        self.args: dict[str, Any] = {}
        self.part: dict[str, Any] = {"functionCall": {"args": self.args}}
        self.strings: dict[str, str] = {}

    def take(self, part: Mapping[str, Any], function: Mapping[str, Any]) -> bool:
        """Add one chunk's piece; whether the call goes on."""
        for key in ("name", "id"):
            if function.get(key):
                self.part["functionCall"][key] = function[key]
        if "thoughtSignature" in part:
            self.part["thoughtSignature"] = part["thoughtSignature"]
        for piece in function.get("partialArgs") or []:
            path = piece["jsonPath"]
            if "stringValue" in piece:
                self.strings[path] = self.strings.get(path, "") + piece["stringValue"]
                value: Any = self.strings[path]
            elif "nullValue" in piece:
                value = None
            else:
                value = piece.get("numberValue", piece.get("boolValue"))
            _put_at(self.args, path, value)
        return bool(function.get("willContinue"))


def _put_at(args: dict[str, Any], path: str, value: Any) -> None:
    steps = [int(i) if i else name for name, i in re.findall(r"\.(\w+)|\[(\d+)\]", path)]
    holder: Any = args
    for step, after in itertools.pairwise(steps):
        if isinstance(step, int):
            holder.extend([None] * (step + 1 - len(holder)))
            if holder[step] is None:
                holder[step] = [] if isinstance(after, int) else {}
            holder = holder[step]
        else:
            holder = holder.setdefault(step, [] if isinstance(after, int) else {})
    last = steps[-1]
    if isinstance(last, int):
        holder.extend([None] * (last + 1 - len(holder)))
    holder[last] = value


def _stream_responses(payloads: list[Any]) -> dict[str, Any] | None:
    for event in payloads:
        if isinstance(event, Mapping) and event.get("type") in (
            "response.completed",
            "response.incomplete",
        ):
            return copy.deepcopy(dict(event["response"]))
    return None


def _stream_bedrock(payloads: list[Any]) -> dict[str, Any]:
    """The Converse answer a ConverseStream adds up to.

    A block's start (`ContentBlockStart`: a call, a server tool's result) is
    the whole block less what its deltas add: a call's input as JSON text,
    a result's `content` entries (`ToolResultBlockDelta`), in order.
    """
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    body: dict[str, Any] = {"output": {"message": {"role": "assistant", "content": []}}}
    for event in payloads:
        ((kind, payload),) = event.items()
        if kind == "contentBlockStart":
            start = payload.get("start") or {}
            index = payload["contentBlockIndex"]
            blocks[index] = {name: dict(value) for name, value in start.items()}
            if "toolUse" in start:
                inputs[index] = ""
        elif kind == "contentBlockDelta":
            index, delta = payload["contentBlockIndex"], payload["delta"]
            block = blocks.setdefault(index, {})
            if "text" in delta:
                block["text"] = block.get("text", "") + delta["text"]
            elif "toolUse" in delta:
                inputs[index] = inputs.get(index, "") + delta["toolUse"].get("input", "")
            elif "toolResult" in delta:
                result = block["toolResult"]
                result["content"] = [*result.get("content", []), *delta["toolResult"]]
            elif "reasoningContent" in delta:
                part = delta["reasoningContent"]
                reasoning = block.setdefault("reasoningContent", {})
                if "redactedContent" in part:
                    reasoning["redactedContent"] = part["redactedContent"]
                else:
                    text = reasoning.setdefault("reasoningText", {})
                    if "text" in part:
                        text["text"] = text.get("text", "") + part["text"]
                    if "signature" in part:
                        text["signature"] = part["signature"]
        elif kind == "messageStop":
            body["stopReason"] = payload.get("stopReason")
        elif kind == "metadata":
            body["usage"] = payload.get("usage")
    for index, text in inputs.items():
        blocks[index]["toolUse"]["input"] = json.loads(text) if text else {}
    body["output"]["message"]["content"] = [blocks[i] for i in sorted(blocks)]
    return body


@dataclass(frozen=True)
class Wire:
    """One wire's codec, SDK check and the places its JSON keeps what was said."""

    name: str
    endpoint: str
    model: str
    decode: Callable[[Mapping[str, Any], str, str], Response]
    decode_stream: Callable[[list[Any], str, str], Response]
    assemble: Callable[[list[Any]], dict[str, Any] | None]
    import_history: Callable[[Mapping[str, Any]], tuple[str | None, list[Message]]]
    encode: Callable[[Request], Encoded]
    sdk_check: Callable[[dict[str, Any], str, str], None]
    """The SDK check of a body for (model, endpoint)."""
    messages_key: str
    answer_content: Callable[[Mapping[str, Any]], Any]
    stream_content: Callable[[list[Any]], Any]
    tools: Callable[[Mapping[str, Any]], tuple[ToolSpec, ...]]
    requested_model: Callable[[Exchange], str]


def _request_model(exchange: Exchange) -> str:
    request = exchange.request or {}
    model = request.get("model")
    if model:
        return str(model)
    return _model_from_path(exchange) or _answer_model_of(exchange)


def _answer_model_of(exchange: Exchange) -> str:
    body = exchange.data.get("response") or {}
    return str(body.get("model") or body.get("modelVersion") or "")


def _chat(dialect: str, name: str, endpoint: str, model: str) -> Wire:
    return Wire(
        name=name,
        endpoint=endpoint,
        model=model,
        decode=lambda body, endpoint, model: openai_codec.decode_response(
            body,
            dialect=dialect,
            endpoint=endpoint,  # type: ignore[arg-type]
        ),
        decode_stream=lambda payloads, endpoint, model: openai_codec.decode_stream(
            payloads,
            dialect=dialect,
            endpoint=endpoint,  # type: ignore[arg-type]
        ),
        assemble=assemble_openai_stream,
        import_history=lambda request: openai_codec.decode_messages(request["messages"]),
        encode=lambda request: openai_codec.encode(request, CAPS, dialect),  # type: ignore[arg-type]
        sdk_check=lambda body, model, endpoint: chat_sdk_check(body, endpoint),
        messages_key="messages",
        answer_content=lambda body: [
            # The message, and beside it the choice's token probabilities (`logprobs`).
            {**(c.get("message") or {}), "logprobs": c.get("logprobs")}
            for c in body.get("choices", [])[:1]
        ],
        stream_content=lambda payloads: [
            {**(c.get("delta") or {}), "logprobs": c.get("logprobs")}
            for p in payloads
            if isinstance(p, Mapping)
            for c in p.get("choices") or []
        ],
        tools=_tools_chat,
        requested_model=_request_model,
    )


WIRES: dict[str, Wire] = {
    "anthropic": Wire(
        name="anthropic",
        endpoint="api.anthropic.com",
        model="claude-sonnet-4-5",
        decode=lambda body, endpoint, model: anthropic_codec.decode_response(
            body, endpoint=endpoint
        ),
        decode_stream=lambda payloads, endpoint, model: anthropic_codec.decode_stream(
            payloads, endpoint=endpoint
        ),
        assemble=assemble_anthropic_stream,
        import_history=lambda request: anthropic_codec.decode_messages(
            request["messages"], system=request.get("system")
        ),
        encode=lambda request: anthropic_codec.encode(request, CAPS),
        sdk_check=lambda body, model, endpoint: anthropic_sdk_check(body),
        messages_key="messages",
        answer_content=lambda body: body.get("content"),
        stream_content=lambda payloads: [
            p.get("content_block") or p.get("delta")
            for p in payloads
            if p.get("type") in ("content_block_start", "content_block_delta")
        ],
        tools=_tools_anthropic,
        requested_model=_request_model,
    ),
    "openai": _chat("openai", "openai", "api.openai.com", "gpt-4.1"),
    "openai_compatible": _chat("openai", "openai_compatible", "openrouter.ai", "openai/gpt-4.1"),
    "llama_server": _chat("llama-server", "llama_server", "127.0.0.1:8080", "local"),
    "responses": Wire(
        name="responses",
        endpoint="api.openai.com",
        model="gpt-5",
        decode=lambda body, endpoint, model: responses_codec.decode_response(
            body, endpoint=endpoint
        ),
        decode_stream=lambda payloads, endpoint, model: responses_codec.decode_stream(
            payloads, endpoint=endpoint
        ),
        assemble=_stream_responses,
        import_history=lambda request: responses_codec.decode_messages(
            request["input"], system=request.get("instructions")
        ),
        encode=lambda request: responses_codec.encode(request, CAPS),
        sdk_check=lambda body, model, endpoint: check_responses_request(body),
        messages_key="input",
        answer_content=lambda body: body.get("output"),
        stream_content=lambda payloads: [
            p.get("item") or p.get("delta") or p.get("annotation") or p.get("part")
            for p in payloads
            if isinstance(p, Mapping) and p.get("type") != "response.completed"
        ],
        tools=_tools_responses,
        requested_model=_request_model,
    ),
    "gemini": Wire(
        name="gemini",
        endpoint="generativelanguage.googleapis.com",
        model="gemini-2.5-flash",
        decode=lambda body, endpoint, model: gemini_codec.decode_response(body, endpoint=endpoint),
        decode_stream=lambda payloads, endpoint, model: gemini_codec.decode_stream(
            payloads, endpoint=endpoint
        ),
        assemble=_stream_gemini,
        import_history=lambda request: gemini_codec.decode_messages(
            request["contents"], system=_gemini_system(request)
        ),
        encode=lambda request: gemini_codec.encode(request, CAPS),
        sdk_check=lambda body, model, endpoint: check_gemini_request(body),
        messages_key="contents",
        answer_content=lambda body: [
            {k: v for k, v in c.items() if k not in ("index", "finishReason")}
            for c in body.get("candidates", [])[:1]
        ],
        stream_content=lambda payloads: [
            {k: v for k, v in c.items() if k not in ("index", "finishReason")}
            for p in payloads
            for c in p.get("candidates", [])[:1]
        ],
        tools=_tools_gemini,
        requested_model=_request_model,
    ),
    "bedrock": Wire(
        name="bedrock",
        endpoint="bedrock-runtime.us-east-1.amazonaws.com",
        model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        decode=lambda body, endpoint, model: bedrock_codec.decode_response(
            body, endpoint=endpoint, model=model
        ),
        decode_stream=lambda payloads, endpoint, model: bedrock_codec.decode_stream(
            payloads, endpoint=endpoint, model=model
        ),
        assemble=_stream_bedrock,
        import_history=lambda request: bedrock_codec.decode_messages(
            request["messages"], system=request.get("system")
        ),
        encode=lambda request: bedrock_codec.encode(request, CAPS),
        sdk_check=lambda body, model, endpoint: check_bedrock_request(body, model),
        messages_key="messages",
        answer_content=lambda body: ((body.get("output") or {}).get("message") or {}).get(
            "content"
        ),
        stream_content=lambda payloads: [
            (v.get("start") or v.get("delta"))
            for p in payloads
            for k, v in p.items()
            if k in ("contentBlockStart", "contentBlockDelta")
        ],
        tools=_tools_bedrock,
        requested_model=_request_model,
    ),
}

TARGETS = ("anthropic", "openai", "responses", "gemini", "bedrock")
"""The wires a history is carried to when it leaves its own (Chat Completions counted once)."""


def decoded(exchange: Exchange) -> Response:
    """The exchange's answer as carryall decodes it (a stream through the stream decoder)."""
    wire = WIRES[exchange.wire]
    model = exchange.model
    if "stream" in exchange.data:
        return wire.decode_stream(exchange.data["stream"], exchange.endpoint, model)
    return wire.decode(exchange.data["response"], exchange.endpoint, model)


def request_for(
    wire: str,
    model: str,
    endpoint: str,
    messages: Sequence[Message],
    system: str | None,
    tools: tuple[ToolSpec, ...] = (),
) -> Request:
    return Request(
        model=model,
        endpoint=endpoint,
        messages=tuple(messages),
        system=system,
        tools=tools,
    )


def next_turn(answer: Message) -> Message:
    """What a caller sends after `answer`: its calls' results, or a word of thanks."""
    from carryall.blocks import ToolResult

    calls = answer.tool_uses()
    if calls:
        return Message.tool_results([ToolResult(c.id, "recorded") for c in calls])
    return Message.user("Thank you.")


def b64_equal(a: str, b: str) -> bool:
    try:
        return base64.b64decode(a + "==", altchars=b"-_") == base64.b64decode(
            b + "==", altchars=b"-_"
        )
    except ValueError:
        return False

"""Reading the recorded exchanges of `tests/fixtures/recorded/` (see its README).

Each fixture is one real exchange: a request, a response body, a stream's
SSE text, or an error body. What a test expects of carryall is read out of
the fixture itself: `expected_anthropic` and `expected_openai` walk a
response body into the texts, thinking, signatures, redacted data, tool
calls, provider-native blocks, stop reason and usage it holds, and
`assemble_anthropic_stream` / `assemble_openai_stream` fold a stream into
the body the same exchange would have answered unstreamed, so stream and
body are held to one expectation. `request_atoms` lists every string a
request's messages carry, which import and re-encode must not lose.
"""

from __future__ import annotations

import copy
import functools
import json
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

from anthropic.types.beta.message_create_params import (
    MessageCreateParamsNonStreaming as BetaAnthropicRequest,
)
from anthropic.types.message_create_params import (
    MessageCreateParamsNonStreaming as AnthropicRequest,
)
from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

from carryall.transport.sse import iter_sse
from tests.support.sdk_openai import (
    NON_STREAMING,
    OPENROUTER,
    _materialize,
    _without_extras,
    check_openrouter_request,
)

ROOT = Path(__file__).parent.parent / "fixtures" / "recorded"

WIRE_DIALECT = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai_compatible": "openai",
    "llama_server": "llama-server",
}
"""Which codec reads each folder: OpenAI-compatible servers speak the `openai` dialect."""

ANTHROPIC_STOPS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}
"""The Messages API's documented stop reasons and the `StopReason` each reads as."""

OPENAI_STOPS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
"""Chat Completions' documented finish reasons and the `StopReason` each reads as."""

# Keys whose string values are structure, not content: never expected to survive as such.
_STRUCTURE_KEYS = frozenset({"type", "role", "format"})


@dataclass
class Expected:
    """What one response holds, read from its JSON."""

    texts: list[str] = field(default_factory=list)
    thinking: list[tuple[str, str | None]] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)
    native: list[Any] = field(default_factory=list)
    survive: list[str] = field(default_factory=list)
    stop_reason: str = "end_turn"
    refusal: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None


WIRES = ("anthropic", "openai", "openai_compatible", "llama_server")
"""The folders in this form; other wires' folders (`responses/`, ...) have their own tests."""


def fixture_paths() -> list[Path]:
    """Every recorded exchange of `WIRES`, in a stable order."""
    return sorted(path for wire in WIRES for path in (ROOT / wire).glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    """One fixture as the JSON it is."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def sse_payloads(text: str) -> list[str]:
    """The data of every event of a recorded SSE stream, through carryall's own framing."""
    return [event.data for event in iter_sse(text.splitlines())]


# -- Anthropic ------------------------------------------------------------------------


def expected_anthropic(body: Mapping[str, Any]) -> Expected:
    """The expectation a Messages API response body sets, block by block."""
    out = Expected(model=body.get("model"))
    for block in body.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            out.texts.append(block["text"])
            if block.get("citations"):
                # A cited text reads as its text and, after it, its citations as they came.
                out.native.append(list(block["citations"]))
        elif kind == "thinking":
            out.thinking.append((block["thinking"], block.get("signature")))
        elif kind == "redacted_thinking":
            out.redacted.append(block["data"])
        elif kind == "tool_use":
            out.tool_calls.append((block["id"], block["name"], block["input"]))
        else:
            out.native.append(dict(block))
    stop = body.get("stop_reason")
    out.stop_reason = ANTHROPIC_STOPS.get(stop, "other") if stop else "end_turn"
    usage = body.get("usage") or {}
    out.usage = {
        name: usage.get(name) or 0
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        )
    }
    return out


def assemble_anthropic_stream(events: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The response body a Messages API stream adds up to, following the documented deltas."""
    body: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "message_start":
            body = copy.deepcopy(dict(event["message"]))
        elif kind == "content_block_start":
            blocks[event["index"]] = copy.deepcopy(dict(event["content_block"]))
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            dkind = delta.get("type")
            if dkind == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif dkind == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif dkind == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif dkind == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
            elif dkind == "input_json_delta":
                partial.setdefault(event["index"], []).append(delta["partial_json"])
            elif dkind == "compaction_delta":
                # The summary and its encrypted metadata, each a piece of the block's field.
                for key, piece in delta.items():
                    if key != "type" and isinstance(piece, str):
                        block[key] = (block.get(key) or "") + piece
        elif kind == "content_block_stop":
            index = event["index"]
            if index in partial:
                text = "".join(partial.pop(index))
                blocks[index]["input"] = json.loads(text) if text else {}
        elif kind == "message_delta":
            body.update({k: v for k, v in event.get("delta", {}).items() if v is not None})
            usage = body.setdefault("usage", {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
    body["content"] = [blocks[i] for i in sorted(blocks)]
    return body


def anthropic_sdk_check(body: Mapping[str, Any]) -> None:
    """Fail unless the official SDK's request type takes `body`, every item drawn.

    A body holding what only the beta API takes (`beta_only`: an MCP or
    advisor block, a beta tool, a beta field) is held to the SDK's beta
    request type, which is where those are typed; any other to the plain one.
    """
    adapter = _BETA_ANTHROPIC if beta_only(body) else _ANTHROPIC
    _consume(adapter.validate_python(body))


_ANTHROPIC: TypeAdapter[Any] = TypeAdapter(AnthropicRequest)
_BETA_ANTHROPIC: TypeAdapter[Any] = TypeAdapter(BetaAnthropicRequest)


def beta_only(body: Mapping[str, Any]) -> list[str]:
    """What in a Messages API body the SDK's plain request type does not know, each as a place.

    Read off the installed SDK's plain types, not a list kept here: a body
    field the plain `MessageCreateParams` has not; a block (in a message's
    content, a block's own content, or `tools`) whose `type` no plain type
    has; and a block whose literal field (a `server_tool_use`'s `name`)
    holds a value no plain type of that `type` takes. Empty for a plain
    request.
    """
    fields, tags = _plain_anthropic()
    found = [key for key in body if key not in fields]
    for i, tool in enumerate(body.get("tools") or ()):
        found += _beta_tags(tool, f"tools[{i}]", tags)
    for i, message in enumerate(body.get("messages") or ()):
        if isinstance(message, Mapping):
            found += _beta_content(message.get("content"), f"messages[{i}]", tags)
    return found


def _beta_content(content: Any, where: str, tags: Mapping[str, Mapping[str, Any]]) -> list[str]:
    blocks = [content] if isinstance(content, Mapping) else content
    found: list[str] = []
    if isinstance(blocks, list | tuple):
        for i, block in enumerate(blocks):
            if isinstance(block, Mapping):
                found += _beta_tags(block, f"{where}.content[{i}]", tags)
                found += _beta_content(block.get("content"), f"{where}.content[{i}]", tags)
    return found


def _beta_tags(block: Mapping[str, Any], where: str, tags: Mapping[str, Any]) -> list[str]:
    kind = block.get("type")
    if not isinstance(kind, str):
        return []
    if kind not in tags:
        return [f"{where}: type {kind!r}"]
    return [
        f"{where}: {kind} {field} {block[field]!r}"
        for field, values in tags[kind].items()
        if isinstance(block.get(field), str) and block[field] not in values
    ]


@functools.cache
def _plain_anthropic() -> tuple[frozenset[str], dict[str, dict[str, set[str]]]]:
    """The plain request type's fields, and for every `type` tag of its types, each literal
    field's values (a `server_tool_use`'s `name`s), over every type reachable from it."""
    tags: dict[str, dict[str, set[str]]] = {}
    seen: set[Any] = set()

    def walk(tp: Any) -> None:
        if is_typeddict(tp) or (isinstance(tp, type) and issubclass(tp, BaseModel)):
            if tp in seen:
                return
            seen.add(tp)
            hints = (
                typing.get_type_hints(tp)
                if is_typeddict(tp)
                else {name: f.annotation for name, f in tp.model_fields.items()}
            )
            literal = {name: _literal_values(hint) for name, hint in hints.items()}
            for tag in literal.pop("type", None) or ():
                held = tags.setdefault(tag, {})
                for name, values in literal.items():
                    if values:
                        held.setdefault(name, set()).update(values)
            for hint in hints.values():
                walk(hint)
            return
        for arg in typing.get_args(tp):
            walk(arg)

    walk(AnthropicRequest)
    return frozenset(typing.get_type_hints(AnthropicRequest)), tags


def _literal_values(hint: Any) -> set[str]:
    """The string values a field may hold when its type is a literal (or an optional one)."""
    if typing.get_origin(hint) is Literal:
        return {v for v in typing.get_args(hint) if isinstance(v, str)}
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if all(typing.get_origin(a) is Literal for a in args):
            return set().union(*(_literal_values(a) for a in args))
    return set()


def _consume(value: Any) -> None:
    # The SDK's `Iterable[...]` fields validate lazily, item by item as drawn:
    # a check that stopped at the top would pass any message list.
    if isinstance(value, str | bytes):
        return
    if isinstance(value, BaseModel):
        _consume(value.__dict__)
    elif isinstance(value, Mapping):
        for item in value.values():
            _consume(item)
    elif isinstance(value, list | tuple | Iterator):
        for item in value:
            _consume(item)


# -- OpenAI Chat Completions -------------------------------------------------------


def expected_openai(body: Mapping[str, Any]) -> Expected:
    """The expectation a Chat Completions response body sets (OpenAI or a compatible server)."""
    choice = body["choices"][0]
    message = choice.get("message") or {}
    out = Expected(model=body.get("model"))
    content = message.get("content")
    refusal = message.get("refusal")
    out.refusal = refusal or None
    text = content if isinstance(content, str) else ""
    out.texts = [text or (refusal or "")]
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    details = message.get("reasoning_details") or []
    if not reasoning:
        reasoning = "".join(d.get("text") or d.get("summary") or "" for d in details)
    if reasoning:
        out.thinking.append((reasoning, None))
    for detail in details:
        # What only the model's own provider can read back: encrypted reasoning, a signature.
        # Such an entry is kept whole, as a native block, after the reasoning's text.
        if detail.get("type") == "reasoning.encrypted":
            out.survive.append(detail["data"])
        if detail.get("signature"):
            out.survive.append(detail["signature"])
        if detail.get("data") or detail.get("signature"):
            out.native.append(dict(detail))
    for call in message.get("tool_calls") or []:
        function = call["function"]
        out.tool_calls.append((call["id"], function["name"], json.loads(function["arguments"])))
    finish = choice.get("finish_reason")
    if refusal:
        out.stop_reason = "refusal"
    elif finish is None:
        out.stop_reason = "end_turn"  # a stream that ended at [DONE] without saying why
    elif finish == "stop" and out.tool_calls:
        out.stop_reason = "tool_use"
    else:
        out.stop_reason = OPENAI_STOPS.get(finish, "other")
    usage = body.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    out.usage = {
        "input_tokens": max((usage.get("prompt_tokens") or 0) - cached, 0),
        "output_tokens": usage.get("completion_tokens") or 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }
    return out


def assemble_openai_stream(chunks: list[Any]) -> dict[str, Any]:
    """The response body a `chat.completion.chunk` stream adds up to."""
    message: dict[str, Any] = {"role": "assistant"}
    parts: dict[str, list[str]] = {}
    details: dict[Any, dict[str, Any]] = {}
    served: dict[str, list[Any]] = {}
    calls: dict[int, dict[str, Any]] = {}
    # The choice's token probabilities: each chunk's tokens (and a refusal's) in turn.
    logprobs: dict[str, list[Any]] = {}
    body: dict[str, Any] = {}
    finish = None
    for chunk in chunks:
        if chunk == "[DONE]":
            break
        if body.get("model") is None and chunk.get("model"):
            body["model"] = chunk["model"]
        if chunk.get("usage"):
            body["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            for key in ("content", "reasoning_content", "reasoning", "refusal"):
                if isinstance(delta.get(key), str):
                    parts.setdefault(key, []).append(delta[key])
            for piece in delta.get("reasoning_details") or []:
                _add_detail(details, piece)
            for key in ("annotations", "executed_tools"):
                served.setdefault(key, []).extend(delta.get(key) or [])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call["index"], {"arguments": []})
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["name"] = function["name"]
                if function.get("arguments"):
                    slot["arguments"].append(function["arguments"])
            for key, tokens in (choice.get("logprobs") or {}).items():
                logprobs.setdefault(key, []).extend(tokens or [])
            if choice.get("finish_reason") is not None:
                finish = choice["finish_reason"]
    for key, texts in parts.items():
        message[key] = "".join(texts)
    message.setdefault("content", None)
    if details:
        message["reasoning_details"] = list(details.values())
    message.update({key: items for key, items in served.items() if items})
    if calls:
        message["tool_calls"] = [
            {
                "id": slot["id"],
                "type": "function",
                "function": {"name": slot["name"], "arguments": "".join(slot["arguments"])},
            }
            for _, slot in sorted(calls.items())
        ]
    body["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
    if logprobs:
        body["choices"][0]["logprobs"] = logprobs
    return body


def _add_detail(details: dict[Any, dict[str, Any]], piece: Mapping[str, Any]) -> None:
    """One streamed `reasoning_details` piece added to the entry it is part of.

    The pieces of one entry share its type and index (OpenRouter streams a
    Claude thinking block's text in several and its signature after); a
    whole answer holds each entry once, its texts joined. A piece with no
    index is an entry of its own.
    """
    index = piece.get("index")
    key = (piece.get("type"), index) if isinstance(index, int) else len(details)
    entry = details.setdefault(key, {})
    for name, value in piece.items():
        if name in ("text", "summary", "data", "signature") and isinstance(value, str):
            entry[name] = (entry.get(name) or "") + value
        elif entry.get(name) is None:
            entry[name] = value


def openai_sdk_check(body: Mapping[str, Any]) -> None:
    """Fail unless the official SDK's request type takes `body` whole, nothing dropped.

    The same check as `tests.support.sdk_openai.check_openai_request`, less its rule
    that every image be a `data:` URL: a recorded remote image is an
    `https:` URL the API takes as it is.
    """
    plain = _without_extras(body)
    validated = _materialize(NON_STREAMING.validate_python(plain))
    assert validated == plain, "the SDK type dropped or changed something: an unknown key?"


def chat_sdk_check(body: Mapping[str, Any], endpoint: str) -> None:
    """A Chat Completions body held to the official request type of the server it goes to.

    OpenRouter's own SDK's for OpenRouter (`check_openrouter_request`: the
    type that knows its `cache_control` parts and `reasoning_details`, and
    refuses a key it does not know, where the `openai` check passes over
    the reasoning keys no OpenAI type has); `openai_sdk_check` for every
    other server.
    """
    if endpoint == OPENROUTER:
        check_openrouter_request(body)
    else:
        openai_sdk_check(body)


# -- what a request carries ------------------------------------------------------------


def request_atoms(messages: Any) -> list[str]:
    """Every content string of a request's messages, tool-call arguments read as JSON.

    Type tags and roles are structure, not content; whitespace-only strings
    are left out (a wire may drop an empty text part).
    """
    return [s for s in _leaves(messages) if s.strip()]


def _leaves(value: Any, key: str | None = None) -> Iterator[str]:
    if isinstance(value, str):
        if key in ("arguments", "raw"):  # JSON text: a call's arguments, a native block
            yield from _leaves(json.loads(value))
        elif value.startswith("data:") and ";base64," in value:
            # An inline data: URL holds a media type and bytes; blocks keep them apart.
            media_type, _, data = value[len("data:") :].partition(";base64,")
            yield from (media_type, data)
        elif key not in _STRUCTURE_KEYS:
            yield value
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _leaves(item, name)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item, key)


def leaf_strings(value: Any) -> set[str]:
    """Every string anywhere in `value`, a provider-native block's raw JSON opened too."""
    return set(_leaves(value))

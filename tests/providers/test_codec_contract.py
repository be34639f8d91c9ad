"""One codec contract: every wire module exposes the same names with the same signatures.

Each `carryall.providers.<wire>` module is imported and its contract names
compared, by `inspect.signature`, with every other's; then a small request
goes through each: encoded as a body and as bytes (the same JSON), read
back by the wire's own importer into the messages and system prompt it came
from, and a short answer of that wire decoded. `codec_for` builds every
wire's `Codec` from the one table, through the same names.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from carryall.blocks import Message, Text, ToolResult, ToolUse
from carryall.providers import Capabilities, Request, Target
from carryall.providers.codec import WIRES, codec_for
from tests.support.spelling import unspelled

WIRE_MODULES = ("anthropic", "openai", "responses", "gemini", "bedrock")
"""The wire modules (llama-server speaks `openai`'s wire, by `Target.dialect`)."""

CONTRACT = ("encode_body", "encode_bytes", "decode", "StreamDecoder", "decode_messages")

TARGET = Target(caps=Capabilities(vision=True, native_tools=True, thinking=True), endpoint="h")


def shape(value: Callable[..., Any]) -> tuple[Any, ...]:
    """A callable's parameters (name, kind, default) and the annotation of what it returns.

    Annotations of the parameters are left out: a wire may take a wider
    input than another (a Responses `input` may be a string) under the
    same name.
    """
    signature = inspect.signature(value)
    parameters = tuple((p.name, p.kind, p.default) for p in signature.parameters.values())
    returned = None if inspect.isclass(value) else signature.return_annotation
    return parameters, returned


def module(name: str) -> ModuleType:
    return importlib.import_module(f"carryall.providers.{name}")


def test_the_table_holds_every_wire_module() -> None:
    assert tuple(WIRES) == WIRE_MODULES


@pytest.mark.parametrize("name", CONTRACT)
def test_every_wire_module_has_the_name_with_one_signature(name: str) -> None:
    shapes = {wire: shape(getattr(module(wire), name)) for wire in WIRE_MODULES}
    first = shapes[WIRE_MODULES[0]]
    assert all(found == first for found in shapes.values()), shapes
    for wire in WIRE_MODULES:
        assert name in module(wire).__all__, f"{wire} does not export {name}"


def test_the_shape_tells_two_signatures_apart() -> None:
    # The comparison above must be able to fail: a renamed keyword or a
    # missing default is another signature.
    def one(data: Any, *, system: Any = None) -> int:
        return 0

    def other(data: Any, *, instructions: Any = None) -> int:
        return 0

    def third(data: Any, *, system: Any) -> int:
        return 0

    def same(data: str, *, system: Any = None) -> int:
        return 1

    assert shape(one) != shape(other)
    assert shape(one) != shape(third)
    assert shape(one) == shape(same)


HISTORY = (
    Message.user("what is in a.txt?"),
    Message.assistant([Text("reading it"), ToolUse("call_1", "read_file", {"path": "a.txt"})]),
    Message("user", (ToolResult("call_1", "hello"),)),
    Message.assistant([Text("it says hello")]),
    Message.user("thanks"),
)


def _history(wire: str, body: dict[str, Any]) -> tuple[Any, Any]:
    """Where each wire's body holds the history and the system prompt."""
    if wire == "responses":
        return body["input"], body.get("instructions")
    if wire == "gemini":
        return body["contents"], body.get("systemInstruction")
    return body["messages"], body.get("system")


ANSWERS: dict[str, dict[str, Any]] = {
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
    "openai": {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    },
    "responses": {
        "id": "r",
        "object": "response",
        "model": "m",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "m1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
        "modelVersion": "m",
    },
    "bedrock": {
        "output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4},
    },
}


@pytest.mark.parametrize("wire", WIRE_MODULES)
def test_a_request_round_trips_through_the_contract(wire: str) -> None:
    codec = module(wire)
    request = Request(model="m", system="be brief", messages=HISTORY, endpoint="h")
    encoded = codec.encode_body(request, TARGET)
    sent = codec.encode_bytes(request, TARGET, stream=False)
    assert json.loads(sent.data) == json.loads(json.dumps(encoded.body))
    assert sent.downgrades == encoded.downgrades == ()
    history, system = _history(wire, encoded.body)
    found_system, messages = codec.decode_messages(history, system=system)
    assert found_system == "be brief"
    assert list(messages) == list(HISTORY)
    answer = codec.decode(ANSWERS[wire], TARGET)
    assert unspelled(answer.message) == Message.assistant([Text("hi")])
    assert answer.stop_reason == "end_turn"
    assert answer.usage.input_tokens == 3
    decoder = codec.StreamDecoder(TARGET)
    assert callable(decoder.feed) and callable(decoder.response)


@pytest.mark.parametrize("wire", WIRE_MODULES)
def test_the_codec_table_goes_through_the_contract(wire: str) -> None:
    codec = codec_for(wire, TARGET)
    request = Request(model="m", system="be brief", messages=HISTORY, endpoint="h")
    body = module(wire).encode_body(request, TARGET).body
    assert codec.target is TARGET and codec.endpoint == "h"
    assert codec.encode(request) == body
    assert json.loads(codec.sent(request, False).data) == json.loads(json.dumps(body))
    assert unspelled(codec.decode(ANSWERS[wire]).message) == Message.assistant([Text("hi")])


def test_an_unknown_wire_has_no_codec() -> None:
    from carryall.errors import ProviderError

    with pytest.raises(ProviderError, match="no codec for wire 'telegraph'"):
        codec_for("telegraph", TARGET)

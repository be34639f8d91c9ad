"""Building recorded-shaped streams for the stream decoders' tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from anthropic.types import Message as SdkMessage
from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

SDK_EVENT = TypeAdapter(RawMessageStreamEvent)


Cut = Callable[[str], list[str]]


def every(size: int) -> Cut:
    """Split a string into pieces of `size` characters (an empty string stays one piece)."""
    return lambda s: [s[i : i + size] for i in range(0, len(s), size)] or [""]


def body_of(content: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A non-streamed response body, checked against the SDK's `Message` model."""
    body: dict[str, Any] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 34,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 6,
        },
    }
    body.update(fields)
    SdkMessage.model_validate(body)
    return body


def stream_of(body: dict[str, Any], cut: Cut | None = None) -> list[dict[str, Any]]:
    """The SSE events the API sends for `body`, deltas cut into pieces by `cut`."""
    cut = cut or every(3)
    usage = body["usage"]
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **{k: v for k, v in body.items() if k not in ("content", "usage")},
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": 1},
            },
        },
        {"type": "ping"},
    ]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        start: dict[str, Any]
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in cut(block["text"])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": t} for t in cut(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "tool_use":
            start = {**block, "input": {}}
            raw = block.get("raw", json.dumps(block["input"]))
            deltas = [{"type": "input_json_delta", "partial_json": t} for t in cut(raw)]
        else:
            start = block
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta: dict[str, Any] = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    if "stop_details" in body:
        delta["stop_details"] = body["stop_details"]
    events.append(
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    for event in events:
        if event["type"] != "ping":
            SDK_EVENT.validate_python(event)
    return events


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "smollm2",
        "choices": [choice],
        **extra,
    }


def fragment(
    index: int, *, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    out: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        out["id"] = id
        out["type"] = "function"
    return out

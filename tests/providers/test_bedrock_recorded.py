"""Recorded Bedrock Converse exchanges (issue 13): decoded, stream-decoded, re-encoded, replayed.

`tests/fixtures/recorded/bedrock/pydantic_ai.json` holds exchanges recorded
against the live `bedrock-runtime` API by pydantic-ai's test suite (sources
in `SOURCES.md` beside it): whole Converse answers as their JSON, and
ConverseStream answers as the recorded event-stream bytes, byte for byte
(base64 in the file), which botocore's own decoder reads, CRCs checked.
Each answer must decode with every text, reasoning text, signature,
redacted reasoning, call and usage figure intact, read off the recording
independently of the codec; each request's history must import and encode
again into an equivalent request; and each exchange replayed through the
Bedrock backend (the real `boto3` client, a loopback server answering with
the recording) must give the same answer, or the recorded error with its
status.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from msgspec.structs import replace

from carryall.blocks import RedactedThinking, Text, Thinking, ToolUse
from carryall.errors import ProviderError
from carryall.providers import Capabilities, Request, Response, ToolSpec
from carryall.providers.bedrock import (
    decode_messages,
    decode_response,
    decode_stream,
    encode_request,
)
from carryall.transport.bedrock import BedrockBackend
from tests.support.bedrock_peer import CREDENTIALS, Reply, converse_server, decoded_events
from tests.support.sdk_wires import check_bedrock_request

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "bedrock"
CASSETTES = json.loads((FIXTURES / "pydantic_ai.json").read_text(encoding="utf-8"))
EXCHANGES = [
    pytest.param(cassette["model"], exchange, id=f"{Path(cassette['source']['path']).stem}-{i}")
    for cassette in CASSETTES
    for i, exchange in enumerate(cassette["exchanges"])
]
ANSWERED = [p for p in EXCHANGES if p.values[1]["status"] == 200]
CAPS = Capabilities(vision=True, native_tools=True, thinking=True)
STOPS = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


def test_there_are_at_least_fifteen_distinct_recorded_exchanges_each_with_its_source() -> None:
    distinct = {
        json.dumps([c["model"], e], sort_keys=True) for c in CASSETTES for e in c["exchanges"]
    }
    assert len(distinct) >= 15
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    for cassette in CASSETTES:
        source = cassette["source"]
        assert source["repo"] == "pydantic/pydantic-ai" and len(source["commit"]) == 40
        assert source["path"].rsplit("/", 1)[-1] in sources and source["commit"] in sources
    streams = [e for c in CASSETTES for e in c["exchanges"] if "eventstream" in e]
    assert len(streams) >= 3


def events_of(exchange: dict[str, Any]) -> list[dict[str, Any]]:
    return decoded_events(base64.b64decode(exchange["eventstream"]))


def figures_of_whole(data: dict[str, Any]) -> dict[str, Any]:
    """What a whole answer says, read straight off its JSON."""
    texts, reasoning, signatures, redacted, calls = [], [], [], [], []
    for block in data["output"]["message"]["content"]:
        if "text" in block:
            texts.append(block["text"])
        elif "reasoningContent" in block:
            part = block["reasoningContent"]
            if "redactedContent" in part:
                redacted.append(part["redactedContent"])
            else:
                reasoning.append(part["reasoningText"]["text"])
                signatures.append(part["reasoningText"].get("signature"))
        elif "toolUse" in block:
            call = block["toolUse"]
            calls.append((call["toolUseId"], call["name"], call["input"]))
    return {
        "texts": texts,
        "reasoning": reasoning,
        "signatures": signatures,
        "redacted": redacted,
        "calls": calls,
        "usage": _usage(data["usage"]),
        "stop": STOPS[data["stopReason"]],
    }


def figures_of_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What a stream says, its deltas put together here, independently of the codec."""
    blocks: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    stop = None
    for event in events:
        ((kind, payload),) = event.items()
        if kind == "contentBlockStart":
            call = payload["start"]["toolUse"]
            blocks[payload["contentBlockIndex"]] = {"call": call, "input": ""}
        elif kind == "contentBlockDelta":
            block = blocks.setdefault(payload["contentBlockIndex"], {})
            delta = payload["delta"]
            if "text" in delta:
                block["text"] = block.get("text", "") + delta["text"]
            elif "toolUse" in delta:
                block["input"] += delta["toolUse"]["input"]
            else:
                part = delta["reasoningContent"]
                if "redactedContent" in part:
                    block["redacted"] = part["redactedContent"]
                else:
                    block["reasoning"] = block.get("reasoning", "") + part.get("text", "")
                    block["signature"] = part.get("signature", block.get("signature"))
        elif kind == "messageStop":
            stop = payload["stopReason"]
        elif kind == "metadata":
            usage = payload["usage"]
    texts, reasoning, signatures, redacted, calls = [], [], [], [], []
    for _, block in sorted(blocks.items()):
        if "call" in block:
            call = block["call"]
            calls.append((call["toolUseId"], call["name"], json.loads(block["input"])))
        elif "redacted" in block:
            redacted.append(block["redacted"])
        elif "reasoning" in block or "signature" in block:
            reasoning.append(block.get("reasoning", ""))
            signatures.append(block.get("signature"))
        elif block.get("text"):
            texts.append(block["text"])
    return {
        "texts": texts,
        "reasoning": reasoning,
        "signatures": signatures,
        "redacted": redacted,
        "calls": calls,
        "usage": _usage(usage),
        "stop": STOPS[stop] if stop is not None else None,
    }


def _usage(usage: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        usage["inputTokens"],
        usage["outputTokens"],
        usage.get("cacheReadInputTokens", 0),
        usage.get("cacheWriteInputTokens", 0),
    )


def figures_of(response: Response) -> dict[str, Any]:
    """The same figures, read off the decoded blocks."""
    blocks = response.message.content
    return {
        "texts": [b.text for b in blocks if isinstance(b, Text) and b.text],
        "reasoning": [b.text for b in blocks if isinstance(b, Thinking)],
        "signatures": [b.signature for b in blocks if isinstance(b, Thinking)],
        "redacted": [b.data for b in blocks if isinstance(b, RedactedThinking)],
        "calls": [(b.id, b.name, b.input) for b in blocks if isinstance(b, ToolUse)],
        "usage": (
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cache_read_input_tokens,
            response.usage.cache_creation_input_tokens,
        ),
        "stop": response.stop_reason,
    }


def decoded(model: str, exchange: dict[str, Any], endpoint: str = "") -> Response:
    if "eventstream" in exchange:
        return decode_stream(events_of(exchange), endpoint=endpoint, model=model)
    return decode_response(exchange["response"], endpoint=endpoint, model=model)


@pytest.mark.parametrize(("model", "exchange"), ANSWERED)
def test_every_recorded_answer_decodes_with_every_figure_intact(
    model: str, exchange: dict[str, Any]
) -> None:
    if "eventstream" in exchange:
        expected = figures_of_stream(events_of(exchange))
    else:
        expected = figures_of_whole(exchange["response"])
    response = decoded(model, exchange, "bedrock-runtime.us-east-1.amazonaws.com")
    assert figures_of(response) == expected
    assert response.model == model
    for block in response.message.content:
        if isinstance(block, Thinking) and block.signature:
            assert block.origin is not None and block.origin.model == model


def stream_of_whole(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a whole answer would stream as, one delta per block (two for a signed one)."""
    events: list[dict[str, Any]] = []
    for i, block in enumerate(whole["output"]["message"]["content"]):
        deltas: list[dict[str, Any]]
        if "toolUse" in block:
            start = {k: block["toolUse"][k] for k in ("toolUseId", "name")}
            opened = {"contentBlockIndex": i, "start": {"toolUse": start}}
            events.append({"contentBlockStart": opened})
            deltas = [{"toolUse": {"input": json.dumps(block["toolUse"]["input"])}}]
        elif "text" in block:
            deltas = [{"text": block["text"]}]
        elif "redactedContent" in block["reasoningContent"]:
            deltas = [{"reasoningContent": block["reasoningContent"]}]
        else:
            reasoning = block["reasoningContent"]["reasoningText"]
            deltas = [{"reasoningContent": {"text": reasoning["text"]}}]
            if reasoning.get("signature"):
                deltas.append({"reasoningContent": {"signature": reasoning["signature"]}})
        for delta in deltas:
            events.append({"contentBlockDelta": {"contentBlockIndex": i, "delta": delta}})
    events.append({"messageStop": {"stopReason": whole["stopReason"]}})
    events.append({"metadata": {"usage": whole["usage"], "metrics": whole["metrics"]}})
    return events


def whole_of_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole answer a recorded stream adds up to, put together from its figures."""
    figures = figures_of_stream(events)
    stops = {v: k for k, v in STOPS.items()}
    content: list[dict[str, Any]] = [
        {"reasoningContent": {"redactedContent": r}} for r in figures["redacted"]
    ]
    for text, signature in zip(figures["reasoning"], figures["signatures"], strict=True):
        reasoning = {"text": text, **({"signature": signature} if signature else {})}
        content.append({"reasoningContent": {"reasoningText": reasoning}})
    content += [{"text": t} for t in figures["texts"]]
    content += [
        {"toolUse": {"toolUseId": i, "name": n, "input": v}} for i, n, v in figures["calls"]
    ]
    (usage,) = [e["metadata"]["usage"] for e in events if "metadata" in e]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stops[figures["stop"]],
        "usage": usage,
    }


@pytest.mark.parametrize(("model", "exchange"), ANSWERED)
def test_streamed_and_whole_forms_of_each_recorded_answer_decode_alike(
    model: str, exchange: dict[str, Any]
) -> None:
    if "eventstream" in exchange:
        events = events_of(exchange)
        assert decode_response(whole_of_stream(events), model=model) == decode_stream(
            events, model=model
        )
    else:
        whole = exchange["response"]
        assert decode_stream(stream_of_whole(whole), model=model) == decode_response(
            whole, model=model
        )


def reencoded(model: str, body: dict[str, Any]) -> tuple[Request, dict[str, Any]]:
    """The recorded request's history imported into blocks and encoded again."""
    system, messages = decode_messages(body["messages"], system=body.get("system") or None)
    config = body.get("toolConfig", {})
    tools = tuple(
        ToolSpec(
            t["toolSpec"]["name"],
            t["toolSpec"].get("description", ""),
            t["toolSpec"]["inputSchema"]["json"],
        )
        for t in config.get("tools", [])
        if "toolSpec" in t
    )
    choice = config.get("toolChoice")
    thinking = body.get("additionalModelRequestFields", {}).get("thinking")
    request = Request(
        model=model,
        messages=tuple(messages),
        system=system,
        tools=tools,
        tool_choice=("auto" if "auto" in choice else "required") if choice else None,
        max_tokens=body.get("inferenceConfig", {}).get("maxTokens", 4096),
        thinking=thinking is not None,
        thinking_budget=thinking["budget_tokens"] if thinking else None,
        cache="auto" if any("cachePoint" in b for b in body.get("system", [])) else "off",
    )
    return request, encode_request(request, CAPS)


def normalized(body: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """A body with what carryall does not model (sampling settings) and empty defaults left out.

    `temperature` and `topP` have no place in a `Request`, an empty `system`
    list is no system prompt, `status: success` is what no status means, and
    `maxTokens` counts only where the recording set one.
    """
    out = json.loads(json.dumps(body))
    if not out.get("system"):
        out.pop("system", None)
    inference = {k: v for k, v in out.get("inferenceConfig", {}).items() if k == "maxTokens"}
    if "maxTokens" not in recorded.get("inferenceConfig", {}):
        inference.pop("maxTokens", None)
    out["inferenceConfig"] = inference
    for message in out["messages"]:
        for block in message["content"]:
            result = block.get("toolResult")
            if result is not None and result.get("status") == "success":
                del result["status"]
    return out


@pytest.mark.parametrize(("model", "exchange"), EXCHANGES)
def test_every_recorded_request_imports_and_encodes_again_equivalently(
    model: str, exchange: dict[str, Any]
) -> None:
    recorded = exchange["request"]
    _, body = reencoded(model, recorded)
    assert normalized(body, recorded) == normalized(recorded, recorded)
    check_bedrock_request(body, model)


def backend(url: str, model: str, *, stream: bool, max_retries: int = 0) -> BedrockBackend:
    return BedrockBackend(
        model=model, base_url=url, stream=stream, max_retries=max_retries, retry_delay=0.01
    )


@pytest.mark.parametrize(("model", "exchange"), ANSWERED)
def test_every_recorded_answer_replays_through_the_backend_to_the_same_response(
    model: str, exchange: dict[str, Any]
) -> None:
    stream = "eventstream" in exchange
    reply = (
        Reply(stream=base64.b64decode(exchange["eventstream"]))
        if stream
        else Reply(body=exchange["response"])
    )
    request, body = reencoded(model, exchange["request"])
    with converse_server([reply]) as server:
        client = backend(server.url, model, stream=stream)
        shown: list[str] = []
        response = client.complete(request, on_text=shown.append)
        client.close()
    (sent,) = server.requests
    path = f"/model/{quote(model, safe='')}/{exchange['operation']}"
    assert sent["path"] == path
    assert sent["body"] == body
    expected = decoded(model, exchange, "127.0.0.1")
    # boto3 parses the answer by its service model, which names some usage
    # fields the recording has not and lacks others it has: the raw figures
    # agree on every field both hold, and everything else is equal.
    assert replace(response, raw_usage=None) == replace(expected, raw_usage=None)
    assert response.raw_usage and expected.raw_usage
    common = response.raw_usage.keys() & expected.raw_usage.keys()
    assert {"inputTokens", "outputTokens"} <= common
    assert {k: response.raw_usage[k] for k in common} == {k: expected.raw_usage[k] for k in common}
    if stream:
        assert "".join(shown) == "".join(t for t in figures_of(response)["texts"])


def test_the_recorded_bad_model_error_is_a_provider_error_with_its_status_and_message() -> None:
    (cassette,) = [c for c in CASSETTES if c["source"]["path"].endswith("test_bedrock_error.yaml")]
    (exchange,) = cassette["exchanges"]
    with pytest.raises(ProviderError, match="The provided model identifier is invalid") as caught:
        decode_response(exchange["response"], status=exchange["status"])
    assert caught.value.status == 400
    request, _ = reencoded(cassette["model"], exchange["request"])
    invalid = "The provided model identifier is invalid"
    replies = [Reply(exchange["status"], exchange["response"])]
    with converse_server(replies) as server, pytest.raises(ProviderError, match=invalid) as sent:
        backend(server.url, cassette["model"], stream=False, max_retries=2).complete(request)
    assert sent.value.status == 400 and not sent.value.retryable
    assert len(server.requests) == 1  # a 4xx is not retried


def test_the_recorded_throttling_is_retried_then_a_clear_retryable_error() -> None:
    (cassette,) = [
        c for c in CASSETTES if c["source"]["path"].endswith("test_bedrock_throttling_error.yaml")
    ]
    exchanges = cassette["exchanges"]
    request, _ = reencoded(cassette["model"], exchanges[0]["request"])
    replies = [Reply(e["status"], e["response"]) for e in exchanges[:2]]
    with converse_server(replies) as server, pytest.raises(ProviderError, match="Rate") as caught:
        backend(server.url, cassette["model"], stream=False, max_retries=1).complete(request)
    assert len(server.requests) == 2  # the SDK's own retry, then the error
    error = caught.value
    assert (error.status, error.kind, error.retryable) == (429, "ThrottlingException", True)
    assert "after 1 retry" in error.message

"""Real recorded Responses exchanges (issue 13): decoded, stream-decoded, re-encoded, replayed.

`tests/fixtures/recorded/responses/pydantic_ai.json` holds 15 exchanges
recorded against the live API by pydantic-ai's test suite (sources in
`SOURCES.md` beside it). Each answer must decode with every text, reasoning
text, encrypted content, call and usage figure intact, read off the recording
independently of the codec; each request's history must import and encode
again into an equivalent request; and each exchange replayed through the
Responses backend (the real `openai` SDK, a local server answering with the
recording) must give the same answer, or the recorded error with its status.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Message, Opaque, Text, Thinking, ToolResult, ToolUse
from carryall.errors import ProviderError
from carryall.providers import Capabilities, Request, ToolSpec
from carryall.providers.openai import ERROR_PREFIX
from carryall.providers.responses import (
    decode_messages,
    decode_response,
    decode_stream,
    encode_request,
)
from carryall.transport.responses import ResponsesBackend
from tests.support.scripted import Reply, served
from tests.support.sdk_wires import check_responses_request

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "responses"
CASSETTES = json.loads((FIXTURES / "pydantic_ai.json").read_text(encoding="utf-8"))
EXCHANGES = [
    pytest.param(exchange, id=f"{Path(c['source']['path']).stem}-{i}")
    for c in CASSETTES
    for i, exchange in enumerate(c["exchanges"])
]
ANSWERED = [p for p in EXCHANGES if p.values[0]["status"] == 200]


def test_there_are_at_least_fifteen_recorded_exchanges_each_with_its_source() -> None:
    assert len(EXCHANGES) >= 15
    for cassette in CASSETTES:
        source = cassette["source"]
        assert source["repo"] and source["path"] and len(source["commit"]) == 40
        assert source["path"].rsplit("/", 1)[-1] in (FIXTURES / "SOURCES.md").read_text()


def final_response(exchange: dict[str, Any]) -> dict[str, Any]:
    if "stream" in exchange:
        (last,) = [
            e
            for e in exchange["stream"]
            if isinstance(e, dict) and e["type"] == "response.completed"
        ]
        result: dict[str, Any] = last["response"]
        return result
    body: dict[str, Any] = exchange["response"]
    return body


def figures(data: dict[str, Any]) -> dict[str, Any]:
    """What the recording says, read straight off its JSON, for the decoded answer to match."""
    texts, reasoning, encrypted, calls = [], [], [], []
    for item in data["output"]:
        if item["type"] == "message":
            texts += [p["text"] for p in item["content"] if p["type"] == "output_text"]
        elif item["type"] == "reasoning":
            parts = item.get("content") or item.get("summary") or []
            reasoning += [p["text"] for p in parts]
            if item.get("encrypted_content"):
                encrypted.append(item["encrypted_content"])
        elif item["type"] == "function_call":
            calls.append((item["call_id"], item["name"], json.loads(item["arguments"])))
    usage = data["usage"]
    cached = usage["input_tokens_details"]["cached_tokens"]
    return {
        "texts": texts,
        "reasoning": reasoning,
        "encrypted": encrypted,
        "calls": calls,
        "usage": (usage["input_tokens"] - cached, usage["output_tokens"], cached),
        "model": data["model"],
    }


def decoded_figures(message: Message, response: Any) -> dict[str, Any]:
    return {
        "texts": [b.text for b in message.content if isinstance(b, Text) and b.text],
        "reasoning": [
            b.text for b in message.content if isinstance(b, Thinking | Opaque) and b.text
        ],
        "encrypted": [
            json.loads(b.raw)["encrypted_content"]
            for b in message.content
            if isinstance(b, Opaque) and b.kind == "reasoning"
        ],
        "calls": [(b.id, b.name, b.input) for b in message.content if isinstance(b, ToolUse)],
        "usage": (
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cache_read_input_tokens,
        ),
        "model": response.model,
    }


@pytest.mark.parametrize("exchange", ANSWERED)
def test_every_recorded_answer_decodes_with_every_figure_intact(exchange: dict[str, Any]) -> None:
    data = final_response(exchange)
    response = decode_stream(exchange["stream"]) if "stream" in exchange else decode_response(data)
    assert decoded_figures(response.message, response) == figures(data)
    calls = figures(data)["calls"]
    assert response.stop_reason == ("tool_use" if calls else "end_turn")


@pytest.mark.parametrize("exchange", [p for p in ANSWERED if "stream" in p.values[0]])
def test_a_recorded_stream_shows_exactly_its_text_deltas(exchange: dict[str, Any]) -> None:
    from carryall.providers.responses import StreamDecoder

    decoder = StreamDecoder()
    shown = "".join(decoder.feed(event) for event in exchange["stream"])
    deltas = [
        e["delta"]
        for e in exchange["stream"]
        if isinstance(e, dict) and e["type"] == "response.output_text.delta"
    ]
    assert shown == "".join(deltas)
    assert decoder.response().message.text() == "".join(figures(final_response(exchange))["texts"])


def test_the_recorded_http_error_is_a_provider_error_with_its_message() -> None:
    (exchange,) = [p.values[0] for p in EXCHANGES if p.values[0]["status"] != 200]
    with pytest.raises(ProviderError, match="decimal below minimum value") as caught:
        decode_response(exchange["response"])
    assert caught.value.kind == "invalid_request_error"


def seen(item: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the model is shown of one input item, whichever form it was written in."""
    kind = item.get("type", "message")
    if kind == "function_call":
        return [("call", item["call_id"], item["name"], json.loads(item["arguments"] or "{}"))]
    if kind == "function_call_output":
        return [("output", item["call_id"], item["output"])]
    content = item["content"]
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
    out: list[tuple[Any, ...]] = []
    for part in parts:
        if part["type"] == "input_image":
            out.append((item["role"], "image", part["image_url"]))
        elif part["text"]:
            out.append((item["role"], "text", part["text"]))
    return out


def test_seen_tells_a_changed_history_apart() -> None:
    a = {"type": "function_call_output", "call_id": "c", "output": "1"}
    assert seen(a) != seen({**a, "output": "2"})
    assert seen({"role": "user", "content": "x"}) == seen(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}
    )


@pytest.mark.parametrize("exchange", EXCHANGES)
def test_every_recorded_history_imports_and_encodes_into_an_equivalent_request(
    exchange: dict[str, Any],
) -> None:
    sent = exchange["request"]
    system, messages = decode_messages(sent["input"], system=sent.get("instructions"))
    tools = tuple(
        ToolSpec(t["name"], t.get("description") or "", t["parameters"])
        for t in sent.get("tools", ())
    )
    body = encode_request(
        Request(model=sent["model"], messages=tuple(messages), system=system, tools=tools),
        Capabilities(vision=True),
    )
    check_responses_request(body)
    assert body.get("instructions") == (sent.get("instructions") or None)
    assert [t["name"] for t in body.get("tools", ())] == [t["name"] for t in sent.get("tools", ())]
    recorded = [part for item in sent["input"] for part in seen(item)]
    again = [part for item in body["input"] for part in seen(item)]
    # A remote image is never fetched, and never lost: it goes back as its URL.
    assert again == recorded


@pytest.mark.parametrize("exchange", EXCHANGES)
def test_every_recorded_exchange_replays_through_the_responses_backend(
    exchange: dict[str, Any],
) -> None:
    if "stream" in exchange:
        sse = "".join(
            f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in exchange["stream"]
        )
        reply = Reply(sse=sse)
    else:
        reply = Reply(status=exchange["status"], body=exchange["response"])
    sent = exchange["request"]
    system, messages = decode_messages(sent["input"], system=sent.get("instructions"))
    request = Request(model=sent["model"], messages=tuple(messages), system=system)
    with served([reply]) as server:
        backend = ResponsesBackend(
            model=sent["model"],
            base_url=server.url,
            api_key="k",
            stream="stream" in exchange,
            max_retries=0,
        )
        try:
            if exchange["status"] != 200:
                with pytest.raises(ProviderError) as caught:
                    backend.complete(request)
                assert caught.value.status == exchange["status"]
                assert exchange["response"]["error"]["message"] in str(caught.value)
                return
            response = backend.complete(request)
        finally:
            backend.close()
    assert decoded_figures(response.message, response) == figures(final_response(exchange))
    (posted,) = server.requests
    assert posted["path"].endswith("/responses")


def test_error_results_in_a_recorded_history_read_back_as_errors() -> None:
    _, messages = decode_messages(
        [{"type": "function_call_output", "call_id": "c", "output": ERROR_PREFIX + "boom"}]
    )
    assert messages == [Message("user", (ToolResult("c", "boom", is_error=True),))]

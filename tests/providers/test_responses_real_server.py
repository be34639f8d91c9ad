"""The Responses codec against a real llama-server at `/v1/responses` (issue 13): no mocks.

The managed local server (SmolLM2-135M, no vision, no native tools) must
accept every golden history on `/v1/responses`; a streamed and a
non-streamed greedy answer must decode to the same blocks; and a constrained
tool round (prompt mode on this wire, held to its JSON schema by the
top-level `json_schema` llama-server reads) must complete, through the
Responses backend and the real `openai` SDK as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from carryall import local
from carryall.blocks import Message, ToolResult, validate_history
from carryall.providers import Capabilities, Request
from carryall.providers.codec import responses_codec
from carryall.transport.responses import ResponsesBackend
from tests.support.goldens import GOLDENS, TOOLS
from tests.support.sdk_wires import check_responses_request
from tests.support.spelling import per_request_ids_apart

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def http(server: local.LocalServer) -> Iterator[httpx2.Client]:
    # No keep-alive: llama-server closes idle connections after a few seconds.
    no_reuse = httpx2.Limits(max_keepalive_connections=0)
    with httpx2.Client(
        base_url=server.base_url, timeout=300.0, trust_env=False, limits=no_reuse
    ) as client:
        yield client


def _greedy(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "temperature": 0, "seed": 1}


def _post(http: httpx2.Client, body: dict[str, Any]) -> dict[str, Any]:
    reply = http.post("/v1/responses", json=_greedy(body))
    assert reply.status_code == 200, f"/v1/responses refused the request: {reply.text[:500]}"
    data: dict[str, Any] = reply.json()
    return data


def _stream(http: httpx2.Client, body: dict[str, Any]) -> Iterator[Any]:
    with http.stream("POST", "/v1/responses", json=_greedy({**body, "stream": True})) as reply:
        assert reply.status_code == 200, reply.read()[:500]
        for line in reply.iter_lines():
            if line.startswith("data:"):
                payload = line[5:].strip()
                yield payload if payload == "[DONE]" else json.loads(payload)


def _request(history: list[Message], **options: Any) -> Request:
    return Request(
        model="smollm2",
        messages=tuple(history),
        system="Be brief.",
        max_tokens=MAX_TOKENS,
        **options,
    )


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_every_golden_history_is_accepted_and_answered(name: str, http: httpx2.Client) -> None:
    # Native tools, as a model that has them would get: the wire must carry the history.
    codec = responses_codec(Capabilities(vision=False), llama=True)
    body = codec.encode(_request(GOLDENS[name], tools=TOOLS))
    check_responses_request(body)
    response = codec.decode(_post(http, body))
    assert response.message.role == "assistant" and response.message.content
    assert response.usage.input_tokens + response.usage.cache_read_input_tokens > 0


@pytest.mark.parametrize("name", ["error_result", "image_from_user"])
def test_streamed_and_whole_answers_decode_to_the_same_blocks(
    name: str, http: httpx2.Client
) -> None:
    codec = responses_codec(Capabilities(vision=False), llama=True)
    body = codec.encode(_request(GOLDENS[name]))
    whole = codec.decode(_post(http, body))
    decoder = codec.stream_decoder()
    shown = "".join(decoder.feed(event) for event in _stream(http, body))
    streamed = decoder.response()
    # Each request gets its own item ids; the rest of what was read agrees.
    assert per_request_ids_apart(streamed.message) == per_request_ids_apart(whole.message)
    assert shown == whole.message.text()
    assert streamed.stop_reason == whole.stop_reason


def test_a_constrained_tool_round_completes_on_the_responses_wire(
    server: local.LocalServer, http: httpx2.Client
) -> None:
    codec = responses_codec(server.capabilities, llama=True)
    asked = Request(
        model="smollm2",
        messages=(Message.user("Read the file notes.txt."),),
        tools=TOOLS,
        tool_choice="required",
        max_tokens=256,
    )
    body = codec.encode(asked)
    assert "json_schema" in body and "tools" not in body
    check_responses_request(body)
    first = codec.decode(_post(http, body))
    calls = first.message.tool_uses()
    assert first.stop_reason == "tool_use" and calls
    assert all(call.name in {t.name for t in TOOLS} for call in calls)
    results = Message.tool_results([ToolResult(call.id, "buy milk") for call in calls])
    history = [*asked.messages, first.message, results]
    validate_history(history)
    answered = Request(
        model="smollm2", messages=tuple(history), tools=TOOLS, tool_choice="none", max_tokens=32
    )
    second = codec.decode(_post(http, codec.encode(answered)))
    assert second.stop_reason != "tool_use" and second.message.text()


def test_the_responses_backend_streams_a_round_through_the_sdk(server: local.LocalServer) -> None:
    backend = ResponsesBackend(
        name="responses",
        model="smollm2",
        base_url=f"{server.ensure_running().rstrip('/')}/v1",
        capabilities=server.capabilities,
        llama=True,
    )
    try:
        response = backend.complete(
            Request(
                model="",
                messages=(Message.user("Read the file notes.txt."),),
                tools=TOOLS,
                tool_choice="required",
                max_tokens=256,
            )
        )
    finally:
        backend.close()
    assert response.stop_reason == "tool_use" and response.message.tool_uses()

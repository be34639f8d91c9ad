"""The codecs against a real llama-server (SPEC §9): no mocks, the embedded SmolLM2 model.

Every golden history must be accepted on both OpenAI dialects and on the
Anthropic dialect at `/v1/messages`, images rendered as placeholders because
the server reports no vision; streamed and non-streamed answers decode to
the same blocks; constrained prompt mode makes even this 135M model call a
tool, and a whole round completes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from carryall import local
from carryall.backends import open_backend
from carryall.blocks import Message, ToolResult, ToolUse, validate_history
from carryall.config import BackendSettings, Config
from carryall.errors import ProviderError
from carryall.providers import Capabilities, Request, Response
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import openai as openai_codec
from carryall.providers import prompt as prompt_codec
from tests.support.goldens import GOLDENS, TOOLS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def http(server: local.LocalServer) -> Iterator[httpx2.Client]:
    # No keep-alive: llama-server closes idle connections after a few
    # seconds, and a request racing that close fails without an answer.
    no_reuse = httpx2.Limits(max_keepalive_connections=0)
    with httpx2.Client(
        base_url=server.base_url, timeout=300.0, trust_env=False, limits=no_reuse
    ) as client:
        yield client


def _post(http: httpx2.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = http.post(path, json=body)
    assert reply.status_code == 200, f"{path} refused the request: {reply.text[:500]}"
    data: dict[str, Any] = reply.json()
    return data


def _stream(http: httpx2.Client, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    with http.stream("POST", path, json=body) as reply:
        assert reply.status_code == 200, reply.read()[:500]
        for line in reply.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            yield json.loads(payload)


def _greedy(body: dict[str, Any]) -> dict[str, Any]:
    # Greedy sampling, so a streamed and a non-streamed answer can be compared.
    return {**body, "temperature": 0, "seed": 1}


def test_server_reports_no_vision_and_no_native_tools(server: local.LocalServer) -> None:
    assert server.capabilities.vision is False
    assert server.capabilities.native_tools is False


@pytest.mark.parametrize("name", sorted(GOLDENS))
@pytest.mark.parametrize("dialect", ["openai", "llama-server"])
def test_goldens_accepted_by_chat_completions(
    http: httpx2.Client, server: local.LocalServer, name: str, dialect: openai_codec.Dialect
) -> None:
    request = Request(model="local", messages=GOLDENS[name], tools=TOOLS, max_tokens=MAX_TOKENS)
    body = openai_codec.encode_request(request, server.capabilities, dialect)
    wire = json.dumps(body)
    assert '"image_url"' not in wire  # no vision: every image is its placeholder line
    if "image" in name:
        assert "[image: shot.png (image/png)]" in wire
    response = openai_codec.decode_response(_post(http, "/v1/chat/completions", body))
    assert response.message.role == "assistant"
    if not response.message.tool_uses():
        validate_history([*GOLDENS[name], response.message])


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_goldens_accepted_by_anthropic_messages(
    http: httpx2.Client, server: local.LocalServer, name: str
) -> None:
    request = Request(model="local", messages=GOLDENS[name], tools=TOOLS, max_tokens=MAX_TOKENS)
    body = anthropic_codec.encode_request(request, server.capabilities)
    wire = json.dumps(body)
    assert '"type": "image"' not in wire
    response = anthropic_codec.decode_response(_post(http, "/v1/messages", body))
    assert response.message.role == "assistant"
    assert response.stop_reason in {"end_turn", "max_tokens", "tool_use"}


def test_image_sent_anyway_is_refused(http: httpx2.Client, server: local.LocalServer) -> None:
    request = Request(model="local", messages=GOLDENS["image_from_user"], max_tokens=MAX_TOKENS)
    body = openai_codec.encode_request(request, Capabilities(vision=True), "llama-server")
    reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code >= 400
    assert "image input is not supported" in reply.text


def test_image_sent_anyway_is_a_clear_provider_error_from_the_backend(
    server: local.LocalServer,
) -> None:
    # A config that claims vision the server does not have: the request goes
    # out with the image, the server refuses it, and the backend says why.
    config = Config(backends={"llama-server": BackendSettings(vision=True, native_tools=True)})
    backend = open_backend("llama-server", base_url=server.base_url, config=config, max_retries=0)
    try:
        assert backend.capabilities.vision is True
        request = Request(model="", messages=GOLDENS["image_from_user"], max_tokens=MAX_TOKENS)
        with pytest.raises(ProviderError) as caught:
            backend.complete(request)
    finally:
        backend.close()
    assert "image input is not supported" in str(caught.value)
    assert caught.value.status is not None and caught.value.status >= 400


def test_streamed_and_plain_answers_decode_to_the_same_blocks(
    http: httpx2.Client, server: local.LocalServer
) -> None:
    request = Request(model="local", messages=[Message.user("Say hello.")], max_tokens=MAX_TOKENS)
    body = _greedy(openai_codec.encode_request(request, server.capabilities, "llama-server"))
    plain = openai_codec.decode_response(_post(http, "/v1/chat/completions", body))
    streamed = openai_codec.decode_stream(
        _stream(http, "/v1/chat/completions", openai_codec.stream_body(body))
    )
    assert streamed.message == plain.message
    assert streamed.stop_reason == plain.stop_reason


def test_streamed_and_plain_answers_agree_on_anthropic_dialect(
    http: httpx2.Client, server: local.LocalServer
) -> None:
    request = Request(model="local", messages=[Message.user("Say hello.")], max_tokens=MAX_TOKENS)
    body = _greedy(anthropic_codec.encode_request(request, server.capabilities))
    plain = anthropic_codec.decode_response(_post(http, "/v1/messages", body))
    streamed = anthropic_codec.decode_stream(
        _stream(http, "/v1/messages", {**body, "stream": True})
    )
    assert streamed.message == plain.message


def _constrained_turn(
    http: httpx2.Client, server: local.LocalServer, messages: list[Message]
) -> Response:
    request = Request(model="local", messages=messages, tools=TOOLS, max_tokens=128)
    body = _greedy(
        prompt_codec.encode_request(
            request, server.capabilities, dialect="llama-server", constrained=True
        )
    )
    assert "response_format" in body and "tools" not in body
    return prompt_codec.decode_response(_post(http, "/v1/chat/completions", body), constrained=True)


def test_constrained_prompt_mode_makes_a_valid_tool_call_and_completes_a_round(
    http: httpx2.Client, server: local.LocalServer
) -> None:
    history = [Message.user("Use the read_file tool to read the file notes.txt.")]
    first = _constrained_turn(http, server, history)
    calls = first.message.tool_uses()
    assert calls, f"expected a tool call, got {first.message}"
    assert first.stop_reason == "tool_use"
    assert first.malformed_tool_args == 0
    call = calls[0]
    assert isinstance(call, ToolUse) and call.name in {t.name for t in TOOLS}
    assert isinstance(call.input, dict)
    spec = next(t for t in TOOLS if t.name == call.name)
    for key in spec.input_schema["required"]:
        assert isinstance(call.input.get(key), str)

    history.append(first.message)
    history.append(Message.tool_results([ToolResult(c.id, "buy milk") for c in calls]))
    second = _constrained_turn(http, server, history)
    assert second.message.role == "assistant"
    history.append(second.message)
    if not second.message.tool_uses():
        validate_history(history)

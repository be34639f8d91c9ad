"""Usage on recorded answers of every wire: the raw figures kept, and their one meaning.

Every answered exchange of the 2026 collection (`tests/fixtures/recorded/*/2026/`,
streamed and not, on the Anthropic, Chat Completions, Responses, Gemini and
Bedrock wires) and the recorded llama-server answer are decoded; the wire's
usage object must come back on `Response.raw_usage` exactly as the recording
holds it (a stream's final figures), and `Response.usage` must be what the
wire's documented rule makes of those raw figures: input without the cache,
output with reasoning. The rules are written out again here, from the
wires' docs, so a decoder that misread a field cannot agree with itself.
llama-server streams are checked against the real local server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import httpx2
import pytest

from carryall import local
from carryall.providers import Response, Usage
from carryall.providers import openai as openai_codec
from carryall.providers import responses as responses_codec
from tests.support.recorded import ROOT, load
from tests.support.recorded_2026 import Exchange, decoded, exchanges

ANSWERED = [e for e in exchanges() if e.answered]


def _figure(usage: Mapping[str, Any], *path: str) -> int:
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return int(value or 0)


def _final_usage(exchange: Exchange) -> dict[str, Any] | None:
    """The wire's usage object as the recording holds it; for a stream, its final figures."""
    wire, data = exchange.wire, exchange.data
    if "response" in data:
        key = "usageMetadata" if wire == "gemini" else "usage"
        found = data["response"].get(key)
        return dict(found) if found is not None else None
    events = [e for e in data["stream"] if isinstance(e, Mapping)]
    if wire == "anthropic":
        # message_start carries the first figures; message_delta the counted-up
        # ones, a null meaning "no new figure".
        merged: dict[str, Any] = {}
        for event in events:
            usage = (
                event.get("message", {}).get("usage")
                if event.get("type") == "message_start"
                else event.get("usage")
            )
            for key, value in (usage or {}).items():
                if value is not None or key not in merged:
                    merged[key] = value
        return merged or None
    if wire == "responses":
        done = [e for e in events if e.get("type") in ("response.completed", "response.incomplete")]
        return done[-1]["response"].get("usage")
    if wire == "bedrock":
        metadata = [e["metadata"] for e in events if "metadata" in e]
        return metadata[-1].get("usage") if metadata else None
    key = "usageMetadata" if wire == "gemini" else "usage"
    figures = [e[key] for e in events if e.get(key) is not None]
    return figures[-1] if figures else None


def _one_meaning(wire: str, raw: Mapping[str, Any]) -> Usage:
    """The wire's raw figures in carryall's meaning, by each wire's documented rule."""
    if wire == "anthropic":
        return Usage(
            input_tokens=_figure(raw, "input_tokens"),
            output_tokens=_figure(raw, "output_tokens"),
            cache_creation_input_tokens=_figure(raw, "cache_creation_input_tokens"),
            cache_read_input_tokens=_figure(raw, "cache_read_input_tokens"),
        )
    if wire == "bedrock":
        return Usage(
            input_tokens=_figure(raw, "inputTokens"),
            output_tokens=_figure(raw, "outputTokens"),
            cache_creation_input_tokens=_figure(raw, "cacheWriteInputTokens"),
            cache_read_input_tokens=_figure(raw, "cacheReadInputTokens"),
        )
    if wire == "gemini":
        # Cached tokens are part of the prompt count; thoughts are counted apart from it.
        prompt = _figure(raw, "promptTokenCount") + _figure(raw, "toolUsePromptTokenCount")
        cached = _figure(raw, "cachedContentTokenCount")
        thoughts = _figure(raw, "thoughtsTokenCount")
        return Usage(
            input_tokens=prompt - cached,
            output_tokens=_figure(raw, "candidatesTokenCount") + thoughts,
            cache_read_input_tokens=cached,
            reasoning_tokens=thoughts,
        )
    if wire == "responses":
        cached = _figure(raw, "input_tokens_details", "cached_tokens")
        return Usage(
            input_tokens=_figure(raw, "input_tokens") - cached,
            output_tokens=_figure(raw, "output_tokens"),
            cache_read_input_tokens=cached,
            reasoning_tokens=_figure(raw, "output_tokens_details", "reasoning_tokens"),
        )
    # Chat Completions (OpenAI, compatible servers, llama-server): cached inside the prompt.
    cached = _figure(raw, "prompt_tokens_details", "cached_tokens")
    return Usage(
        input_tokens=_figure(raw, "prompt_tokens") - cached,
        output_tokens=_figure(raw, "completion_tokens"),
        cache_read_input_tokens=cached,
        reasoning_tokens=_figure(raw, "completion_tokens_details", "reasoning_tokens"),
    )


def test_the_collection_holds_every_wire_streamed_and_not() -> None:
    # A guard: each wire must have answers of both kinds to check, or the
    # checks below would pass over a wire they never saw.
    kinds = {(e.wire, "stream" in e.data) for e in ANSWERED if _final_usage(e) is not None}
    for wire in ("anthropic", "openai", "openai_compatible", "responses", "gemini", "bedrock"):
        assert {(wire, False), (wire, True)} <= kinds, wire


@pytest.mark.parametrize("exchange", ANSWERED, ids=lambda e: e.id)
def test_raw_usage_is_the_wires_and_usage_its_one_meaning(exchange: Exchange) -> None:
    response = decoded(exchange)
    raw = _final_usage(exchange)
    assert response.raw_usage == raw
    if raw is None:
        assert response.usage == Usage()
        return
    assert response.usage == _one_meaning(exchange.wire, raw)
    # Nothing counted twice or lost: the input figures add up to the wire's total input.
    used = response.usage
    whole_input = used.input_tokens + used.cache_read_input_tokens
    if exchange.wire in ("anthropic", "bedrock"):
        whole_input += used.cache_creation_input_tokens
    assert whole_input == {
        "anthropic": _figure(raw, "input_tokens")
        + _figure(raw, "cache_read_input_tokens")
        + _figure(raw, "cache_creation_input_tokens"),
        "bedrock": _figure(raw, "inputTokens")
        + _figure(raw, "cacheReadInputTokens")
        + _figure(raw, "cacheWriteInputTokens"),
        "gemini": _figure(raw, "promptTokenCount") + _figure(raw, "toolUsePromptTokenCount"),
        "responses": _figure(raw, "input_tokens"),
    }.get(exchange.wire, _figure(raw, "prompt_tokens"))


def test_the_recorded_llama_server_answer_keeps_its_usage() -> None:
    data = load(ROOT / "llama_server" / "reasoning_content_qwen3.json")
    response = openai_codec.decode_response(data["response"], dialect="llama-server")
    assert response.raw_usage == data["response"]["usage"]
    assert response.usage == _one_meaning("llama-server", data["response"]["usage"])


def test_prompt_mode_keeps_the_raw_usage_of_the_answer_it_reads() -> None:
    exchange = next(e for e in ANSWERED if e.wire == "responses" and "response" in e.data)
    response = responses_codec.decode_prompt_response(exchange.data["response"])
    assert response.raw_usage == _final_usage(exchange)


# -- llama-server, live ---------------------------------------------------------------


@pytest.fixture(scope="module")
def http(server: local.LocalServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(
        base_url=server.base_url,
        timeout=300.0,
        trust_env=False,
        limits=httpx2.Limits(max_keepalive_connections=0),
    ) as client:
        yield client


def _chunks(http: httpx2.Client, body: dict[str, Any]) -> list[Any]:
    chunks: list[Any] = []
    with http.stream("POST", "/v1/chat/completions", json=body) as reply:
        assert reply.status_code == 200, reply.read()[:500]
        for line in reply.iter_lines():
            if line.startswith("data:"):
                payload = line[5:].strip()
                chunks.append(payload if payload == "[DONE]" else json.loads(payload))
    return chunks


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_llama_server_usage_streamed_and_whole(http: httpx2.Client) -> None:
    body = {
        "model": "local",
        "messages": [{"role": "user", "content": "Say hi."}],
        "max_tokens": 8,
        "temperature": 0,
        "seed": 1,
    }
    whole = http.post("/v1/chat/completions", json=body).json()
    answers: list[tuple[dict[str, Any], Response]] = [
        (whole["usage"], openai_codec.decode_response(whole, dialect="llama-server"))
    ]
    chunks = _chunks(http, openai_codec.stream_body(body))
    final = [c["usage"] for c in chunks if isinstance(c, dict) and c.get("usage")][-1]
    answers.append((final, openai_codec.decode_stream(chunks, dialect="llama-server")))
    for raw, response in answers:
        assert response.raw_usage == raw
        assert response.usage == _one_meaning("llama-server", raw)
        assert response.usage.output_tokens > 0

"""Request options against a real llama-server: sampling and stop sequences take effect.

A greedy answer (temperature 0, top_k 1, a seed) is asked for twice: once as
it is, once with one of its own lines as a stop sequence. On every endpoint
the server speaks (Chat Completions, Responses, the Messages API) the
second answer is the first cut before that line, so each codec put the
options where the server reads them; the Messages endpoint also names the
sequence, and the Anthropic codec reads it into `Response.stop_sequence`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from carryall import local
from carryall.blocks import Message
from carryall.providers import Capabilities, ModelOptions, Request
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import openai as openai_codec
from carryall.providers import responses as responses_codec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROMPT = Message.user("Count from one to ten, one number per line.")
GREEDY = ModelOptions(temperature=0, top_k=1, seed=1)
CAPS = Capabilities(vision=False, native_tools=False)


@pytest.fixture(scope="module")
def http(server: local.LocalServer) -> Iterator[httpx2.Client]:
    # No keep-alive: llama-server closes idle connections after a few seconds.
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


def _request(options: ModelOptions) -> Request:
    return Request(model="local", messages=(PROMPT,), max_tokens=40, options=options)


@pytest.fixture(scope="module")
def free_and_stop(http: httpx2.Client) -> tuple[str, str]:
    """The greedy answer without a stop sequence, and a stop sequence from inside it."""
    body = openai_codec.encode(_request(GREEDY), CAPS, "llama-server").body
    text = openai_codec.decode_response(_post(http, "/v1/chat/completions", body)).message.text()
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) >= 3, f"the model answered too little to cut: {text!r}"
    return text, lines[2]


def _cut(text: str, stop: str) -> str:
    return text[: text.index(stop)]


def test_chat_completions_stops_where_asked(
    http: httpx2.Client, free_and_stop: tuple[str, str]
) -> None:
    text, stop = free_and_stop
    request = _request(ModelOptions(temperature=0, top_k=1, seed=1, stop=(stop,)))
    encoded = openai_codec.encode(request, CAPS, "llama-server")
    assert encoded.downgrades == ()
    response = openai_codec.decode_response(_post(http, "/v1/chat/completions", encoded.body))
    assert response.message.text() == _cut(text, stop)
    assert response.stop_reason == "end_turn"


def test_responses_on_llama_server_takes_the_chat_options(
    http: httpx2.Client, free_and_stop: tuple[str, str]
) -> None:
    text, stop = free_and_stop
    request = _request(ModelOptions(temperature=0, top_k=1, seed=1, stop=(stop,)))
    encoded = responses_codec.encode(request, CAPS, llama=True)
    assert encoded.downgrades == ()
    answer = responses_codec.decode_response(_post(http, "/v1/responses", encoded.body))
    assert answer.message.text() == _cut(text, stop)


def test_the_messages_endpoint_names_the_stop_sequence_that_ended_it(
    http: httpx2.Client, free_and_stop: tuple[str, str]
) -> None:
    text, stop = free_and_stop
    request = _request(ModelOptions(temperature=0, top_k=1, seed=1, stop=(stop,)))
    encoded = anthropic_codec.encode(request, CAPS)
    # A seed is no field of the Messages API: named, not sent.
    assert [d.reason.split(":")[0] for d in encoded.downgrades] == ["seed"]
    response = anthropic_codec.decode_response(_post(http, "/v1/messages", encoded.body))
    assert response.message.text() == _cut(text, stop)
    assert response.stop_sequence == stop

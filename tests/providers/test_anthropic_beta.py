"""A Messages API request that holds a beta feature is a beta request, end to end.

The advisor tool (a `server_tool_use` named `advisor` and its
`advisor_tool_result`) is typed only in the SDK's beta request type. A
history holding it, read from real recorded traffic (pydantic-ai's advisor
cassettes, `tests/fixtures/recorded/anthropic/2026/`), validates against
that type and is refused by the plain one; it goes back as it came (the
call's `input` as recorded); `hosted.anthropic_betas` names its beta, and
the transport sends it the way the SDK's `client.beta.messages.create`
does: the same path, with the beta in `anthropic-beta`. A plain request
stays plain on every count, so each check can fail. Over every recorded
Anthropic history, carryall's answer (from the blocks) and the SDK types'
answer (`beta_only`, from the body) agree on which requests are beta ones.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from anthropic.types.beta.message_create_params import (
    MessageCreateParamsNonStreaming as BetaParams,
)
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming as PlainParams
from pydantic import TypeAdapter, ValidationError

from carryall.blocks import Message, Origin, ServerToolCall, ServerToolResult
from carryall.providers import HostedTool, Request
from carryall.providers.hosted import (
    ANTHROPIC_ADVISOR_BETA,
    ANTHROPIC_COMPACTION_BETA,
    ANTHROPIC_MCP_BETA,
    anthropic_betas,
    anthropic_headers,
)
from carryall.transport._sdk import endpoint_of
from carryall.transport.anthropic import AnthropicBackend
from tests.support.recorded import anthropic_sdk_check, beta_only
from tests.support.recorded_2026 import WIRES, Exchange, decoded, exchanges, next_turn
from tests.support.scripted import Reply, served

ADVISOR = {
    e.id: e for e in exchanges() if e.id.startswith("anthropic/2026/advisor_tool_") and e.answered
}
"""The recorded advisor exchanges (a whole answer and a stream) that hold an answer."""

ANSWERS = ("anthropic/2026/advisor_tool_replay#0", "anthropic/2026/advisor_tool_stream#0")
"""The exchanges whose answer calls the advisor."""

RECORDED = [e for e in exchanges() if e.wire == "anthropic" and e.request is not None]
"""Every recorded Anthropic exchange with a request: the histories the betas are judged on."""

ANTHROPIC = WIRES["anthropic"]
"""The Anthropic codec as the recorded checks call it (`tests.support.recorded_2026`)."""

PLAIN: TypeAdapter[Any] = TypeAdapter(PlainParams)
BETA: TypeAdapter[Any] = TypeAdapter(BetaParams)


def _answer(exchange: Exchange, endpoint: str) -> Message:
    """The recorded answer as the transport at `endpoint` hands it on (stamped with the model
    the request named)."""
    if "stream" in exchange.data:
        response = ANTHROPIC.decode_stream(exchange.data["stream"], endpoint, exchange.model)
    else:
        response = ANTHROPIC.decode(exchange.data["response"], endpoint, exchange.model)
    return response.as_requested(exchange.model).message


def _continued(exchange: Exchange, endpoint: str = "api.anthropic.com") -> Request:
    history = (
        Message.user("What's 2+2? Consult your advisor first."),
        _answer(exchange, endpoint),
        Message.user("And what is that plus one?"),
    )
    return Request(model=exchange.model, endpoint=endpoint, messages=history)


def _drawn(adapter: TypeAdapter[Any], body: dict[str, Any]) -> None:
    """Validate `body`, drawing every block: the SDK's lists validate item by item as drawn."""
    for message in adapter.validate_python(body)["messages"]:
        content = message["content"]
        if not isinstance(content, str):
            list(content)


def _recorded_blocks(exchange: Exchange, kinds: tuple[str, ...]) -> list[Any]:
    if "stream" in exchange.data:
        blocks = [
            e["content_block"]
            for e in exchange.data["stream"]
            if e.get("type") == "content_block_start"
        ]
    else:
        blocks = exchange.data["response"]["content"]
    return [b for b in blocks if b["type"] in kinds]


def test_the_corpus_holds_the_advisor_recordings() -> None:
    assert set(ANSWERS) <= set(ADVISOR)


@pytest.mark.parametrize("exchange_id", ANSWERS)
def test_an_advisor_history_is_held_to_the_beta_type_and_refused_by_the_plain_one(
    exchange_id: str,
) -> None:
    body = ANTHROPIC.encode(_continued(ADVISOR[exchange_id])).body
    body = json.loads(json.dumps(body))
    found = beta_only(body)
    assert any("advisor_tool_result" in f for f in found), found
    assert any("server_tool_use name 'advisor'" in f for f in found), found
    anthropic_sdk_check(body)  # held to the beta type, every item drawn
    _drawn(BETA, body)
    with pytest.raises(ValidationError, match="advisor"):
        _drawn(PLAIN, body)


def test_a_plain_history_is_held_to_the_plain_type() -> None:
    request = Request(model="claude-sonnet-5", messages=(Message.user("What's 2+2?"),))
    body = ANTHROPIC.encode(request).body
    assert beta_only(body) == []
    assert anthropic_betas(request) == () and anthropic_headers(request) == {}


@pytest.mark.parametrize("exchange_id", ANSWERS)
def test_the_advisor_call_and_result_go_back_as_recorded(exchange_id: str) -> None:
    # A streamed call's only `input_json_delta` is "": its input is still the `{}` it began with.
    exchange = ADVISOR[exchange_id]
    body = ANTHROPIC.encode(_continued(exchange)).body
    kinds = ("server_tool_use", "advisor_tool_result")
    sent = [b for b in body["messages"][1]["content"] if b["type"] in kinds]
    assert sent == _recorded_blocks(exchange, kinds)
    assert sent[0]["input"] == {}


def test_the_advisor_beta_is_named_for_the_blocks_that_go_back_only() -> None:
    request = _continued(ADVISOR[ANSWERS[0]])
    assert anthropic_betas(request) == (ANTHROPIC_ADVISOR_BETA,)
    assert anthropic_headers(request) == {"anthropic-beta": ANTHROPIC_ADVISOR_BETA}
    mcp = HostedTool("mcp", {"server_url": "https://mcp.example.com/sse", "server_label": "d"})
    both = msgspec.structs.replace(request, hosted_tools=(mcp,))
    assert anthropic_headers(both) == {
        "anthropic-beta": f"{ANTHROPIC_MCP_BETA},{ANTHROPIC_ADVISOR_BETA}"
    }
    # The same blocks made by another server or wire are left off (their reading goes
    # instead), so they opt into nothing: a gateway refuses a beta it does not know.
    for elsewhere in (
        Origin("anthropic", "gateway.example", request.model),
        Origin("openai-responses", request.endpoint, request.model),
    ):
        moved = tuple(
            Message(
                m.role,
                tuple(
                    msgspec.structs.replace(b, origin=elsewhere)
                    if isinstance(b, ServerToolCall | ServerToolResult)
                    else b
                    for b in m.content
                ),
            )
            for m in request.messages
        )
        away = msgspec.structs.replace(request, messages=moved)
        body = ANTHROPIC.encode(away).body
        assert beta_only(json.loads(json.dumps(body))) == []
        assert anthropic_betas(away) == ()


def test_the_transport_sends_an_advisor_history_as_the_sdks_beta_call_does() -> None:
    exchange = ADVISOR[ANSWERS[0]]
    with served([Reply(sse="anthropic_text.sse"), Reply(sse="anthropic_text.sse")]) as server:
        endpoint = endpoint_of(server.url)
        backend = AnthropicBackend(model=exchange.model, api_key="k", base_url=server.url)
        try:
            backend.complete(_continued(exchange, endpoint))
            backend.complete(Request(model=exchange.model, messages=(Message.user("Hi"),)))
        finally:
            backend.close()
    beta, plain = server.requests
    assert beta["headers"].get("anthropic-beta") == ANTHROPIC_ADVISOR_BETA
    assert "anthropic-beta" not in plain["headers"]
    # The advisor blocks went (the answer's origin is this server), as only the beta type takes.
    assert beta_only(beta["body"]) and not beta_only(plain["body"])
    anthropic_sdk_check({k: v for k, v in beta["body"].items() if k != "stream"})

    # The SDK's own beta call, against the same server: the same path and the same header.
    import anthropic

    with served([Reply(sse="anthropic_text.sse")]) as server:
        client = anthropic.Anthropic(api_key="k", base_url=server.url)
        try:
            with client.beta.messages.stream(
                model=exchange.model,
                max_tokens=16,
                messages=[{"role": "user", "content": "Hi"}],
                betas=[ANTHROPIC_ADVISOR_BETA],
            ) as stream:
                stream.until_done()
        finally:
            client.close()
    (sdk,) = server.requests
    assert sdk["path"] == beta["path"] == plain["path"]
    assert sdk["headers"]["anthropic-beta"] == beta["headers"]["anthropic-beta"]


def _histories(exchange: Exchange) -> list[Request]:
    """The exchange's request as imported, and (when answered) continued after its answer,
    each addressed to the model and server the recording used."""
    assert exchange.request is not None
    wire = ANTHROPIC
    system, messages = wire.import_history(exchange.request)
    histories = [messages]
    if exchange.answered:
        answer = decoded(exchange).as_requested(exchange.model).message
        histories.append([*messages, answer, next_turn(answer)])
    tools = wire.tools(exchange.request)
    return [
        Request(
            model=exchange.model,
            endpoint=exchange.endpoint,
            messages=tuple(history),
            system=system,
            tools=tools,
        )
        for history in histories
    ]


@pytest.mark.parametrize("exchange", RECORDED, ids=lambda e: e.id)
def test_a_recorded_history_opts_into_a_beta_exactly_when_the_plain_type_cannot_hold_it(
    exchange: Exchange,
) -> None:
    # Two answers to one question, asked apart: carryall's own (`anthropic_betas`, from the
    # blocks) and the SDK's types (`beta_only`, from the body). Real traffic holds both kinds.
    for request in _histories(exchange):
        body = json.loads(json.dumps(ANTHROPIC.encode(request).body))
        assert bool(anthropic_betas(request)) == bool(beta_only(body)), beta_only(body)


def test_the_recorded_histories_hold_beta_and_plain_requests_alike() -> None:
    betas = {b for e in RECORDED for r in _histories(e) for b in anthropic_betas(r)}
    assert betas == {ANTHROPIC_ADVISOR_BETA, ANTHROPIC_MCP_BETA, ANTHROPIC_COMPACTION_BETA}
    assert any(not anthropic_betas(r) for e in RECORDED for r in _histories(e))

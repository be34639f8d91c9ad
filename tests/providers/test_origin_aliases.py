"""An origin names what was asked for and what answered: a continuation on the alias keeps
the model's own signed, opaque and unsigned reasoning, and a move elsewhere names its loss."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from carryall.blocks import Message, Opaque, Origin, Text, Thinking, ToolResult, ToolUse
from carryall.providers import Capabilities, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import bedrock as bedrock_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers import openai as openai_wire
from carryall.providers import responses as responses_wire
from carryall.transport._sdk import addressed, answered, key_fingerprint
from tests.support.histories import sdk_check
from tests.support.sdk_openai import check_openai_request
from tests.support.sdk_wires import (
    check_bedrock_request,
    check_gemini_request,
    check_responses_request,
)

CAPS = Capabilities(vision=True, native_tools=True, thinking=True)
ALIAS = "claude-sonnet-4-5"
DATED = "claude-sonnet-4-5-20250929"
HOST = "api.anthropic.com"


def _request(history: list[Message], model: str, endpoint: str, account: str = "") -> Request:
    return Request(model=model, endpoint=endpoint, account=account, messages=tuple(history))


def _anthropic_round() -> list[Message]:
    answer = anthropic_wire.decode_response(
        {
            "type": "message",
            "role": "assistant",
            "model": DATED,
            "content": [
                {"type": "thinking", "thinking": "look first", "signature": "SIG-1"},
                {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
        endpoint=HOST,
    )
    asked = _request([Message.user("go")], ALIAS, HOST)
    message = answered(answer, asked).message
    return [
        Message.user("go"),
        message,
        Message.tool_results([ToolResult("toolu_1", "seen")]),
    ]


def test_an_origin_records_the_name_asked_for_beside_the_name_that_answered() -> None:
    thinking = _anthropic_round()[1].content[0]
    assert isinstance(thinking, Thinking)
    assert thinking.origin == Origin("anthropic", HOST, DATED, requested=ALIAS)


@pytest.mark.parametrize("model", [ALIAS, DATED])
def test_signed_thinking_goes_back_when_the_request_names_either_model(model: str) -> None:
    encoded = anthropic_wire.encode(_request(_anthropic_round(), model, HOST), CAPS)
    sdk_check(encoded.body)
    sent = encoded.body["messages"][1]["content"][0]
    assert sent == {"type": "thinking", "thinking": "look first", "signature": "SIG-1"}
    assert encoded.downgrades == ()


@pytest.mark.parametrize(
    ("model", "endpoint"),
    [("claude-opus-4-1", HOST), (ALIAS, "anthropic.example.net")],
)
def test_another_model_or_endpoint_leaves_the_signature_off_and_names_both_names(
    model: str, endpoint: str
) -> None:
    encoded = anthropic_wire.encode(_request(_anthropic_round(), model, endpoint), CAPS)
    assert "SIG-1" not in json.dumps(encoded.body)
    [downgrade] = encoded.downgrades
    assert (downgrade.index, downgrade.kind) == (1, "thinking")
    assert DATED in downgrade.reason and ALIAS in downgrade.reason


def _gemini_round(account: str = "") -> list[Message]:
    answer = gemini_wire.decode_response(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "functionCall": {"name": "look", "args": {"at": "x"}},
                                "thoughtSignature": "R0VNSU5JLVNJRw==",
                            }
                        ],
                    },
                    "finishReason": "STOP",
                }
            ],
            "modelVersion": "gemini-3-pro-preview",
        },
        endpoint="generativelanguage.googleapis.com",
    )
    asked = _request([], "gemini-pro-latest", "generativelanguage.googleapis.com", account)
    call = answered(answer, asked).message
    use = call.tool_uses()[0]
    return [Message.user("go"), call, Message.tool_results([ToolResult(use.id, "seen")])]


@pytest.mark.parametrize("model", ["gemini-pro-latest", "gemini-3-pro-preview"])
def test_a_gemini_call_keeps_its_thought_signature_on_the_alias(model: str) -> None:
    history = _gemini_round()
    request = _request(history, model, "generativelanguage.googleapis.com")
    encoded = gemini_wire.encode(request, CAPS)
    check_gemini_request(encoded.body)
    part = encoded.body["contents"][1]["parts"][0]
    assert part["thoughtSignature"] == "R0VNSU5JLVNJRw=="
    assert encoded.downgrades == ()


def test_a_gemini_call_moved_to_another_model_goes_without_its_signature() -> None:
    history = _gemini_round()
    request = _request(history, "gemini-2.5-flash", "generativelanguage.googleapis.com")
    encoded = gemini_wire.encode(request, CAPS)
    assert "R0VNSU5JLVNJRw==" not in json.dumps(encoded.body)
    assert [(d.index, d.kind) for d in encoded.downgrades] == [(1, "tool_use")]


def _responses_round(account: str) -> list[Message]:
    body = {
        "id": "resp_1",
        "model": "gpt-5-2025-08-07",
        "status": "completed",
        "output": [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "plan"}],
                "encrypted_content": "ENC-ACCOUNT-BOUND",
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            },
        ],
    }
    answer = responses_wire.decode_response(body, endpoint="api.openai.com")
    asked = _request([], "gpt-5", "api.openai.com", account)
    return [Message.user("go"), answered(answer, asked).message, Message.user("more")]


def test_encrypted_reasoning_goes_back_to_its_own_account_only() -> None:
    mine, theirs = key_fingerprint("sk-proj-mine-0000"), key_fingerprint("sk-proj-theirs-1111")
    history = _responses_round(mine)
    same = responses_wire.encode(_request(history, "gpt-5", "api.openai.com", mine), CAPS)
    check_responses_request(same.body)
    assert "ENC-ACCOUNT-BOUND" in json.dumps(same.body)
    assert same.downgrades == ()
    other = responses_wire.encode(_request(history, "gpt-5", "api.openai.com", theirs), CAPS)
    assert "ENC-ACCOUNT-BOUND" not in json.dumps(other.body)
    assert [(d.index, d.kind) for d in other.downgrades] == [(1, "opaque")]
    assert theirs not in other.downgrades[0].reason and mine in other.downgrades[0].reason


def test_a_key_fingerprint_is_short_stable_and_never_the_key() -> None:
    key = "sk-ant-api03-secret-value-0123456789"
    print_ = key_fingerprint(key)
    assert print_ == key_fingerprint(key) and len(print_) == 12
    assert print_ not in key and key_fingerprint("another-key-entirely") != print_
    assert key_fingerprint(None) == key_fingerprint("") == ""


def test_addressing_fills_the_account_only_where_the_request_names_none() -> None:
    bare = Request(model="", messages=())
    filled = addressed(bare, "gpt-5", "api.openai.com", "abc123")
    assert (filled.model, filled.endpoint, filled.account) == ("gpt-5", "api.openai.com", "abc123")
    named = msgspec.structs.replace(filled, account="fff000")
    assert addressed(named, "gpt-5", "api.openai.com", "abc123").account == "fff000"


# -- unsigned reasoning goes back to its own model ---------------------------------


def _deepseek_round() -> list[Message]:
    body: dict[str, Any] = {
        "model": "deepseek-reasoner",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "I should look.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "look", "arguments": "{}"},
                        }
                    ],
                },
            }
        ],
    }
    answer = openai_wire.decode_response(body, endpoint="api.deepseek.com")
    asked = _request([], "deepseek-reasoner", "api.deepseek.com")
    message = answered(answer, asked).message
    return [Message.user("go"), message, Message.tool_results([ToolResult("call_1", "seen")])]


def test_deepseek_reasoning_goes_back_to_deepseek_as_reasoning_content() -> None:
    history = _deepseek_round()
    request = _request(history, "deepseek-reasoner", "api.deepseek.com")
    encoded = openai_wire.encode(request, CAPS, "openai")
    check_openai_request(encoded.body)
    assert encoded.body["messages"][1]["reasoning_content"] == "I should look."
    assert encoded.downgrades == ()


def test_deepseek_reasoning_moved_to_another_model_is_named_not_sent() -> None:
    history = _deepseek_round()
    encoded = openai_wire.encode(_request(history, "gpt-4o", "api.openai.com"), CAPS, "openai")
    assert "I should look." not in json.dumps(encoded.body)
    assert [(d.index, d.kind) for d in encoded.downgrades] == [(1, "thinking")]


def _bedrock_round(model: str) -> list[Message]:
    body = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "weighing it"}}},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "look", "input": {}}},
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
    }
    answer = bedrock_wire.decode_response(
        body, endpoint="bedrock-runtime.us-west-2.amazonaws.com", model=model
    )
    use = answer.message.tool_uses()[0]
    return [Message.user("go"), answer.message, Message.tool_results([ToolResult(use.id, "ok")])]


def test_gpt_oss_reasoning_on_bedrock_goes_back_unsigned_to_its_own_model() -> None:
    model = "openai.gpt-oss-120b-1:0"
    history = _bedrock_round(model)
    request = _request(history, model, "bedrock-runtime.us-west-2.amazonaws.com")
    encoded = bedrock_wire.encode(request, CAPS)
    check_bedrock_request(encoded.body, model)
    content = encoded.body["messages"][1]["content"]
    assert content[0] == {"reasoningContent": {"reasoningText": {"text": "weighing it"}}}
    claude = _request(
        history, "anthropic.claude-sonnet-4-5-v1:0", "bedrock-runtime.us-west-2.amazonaws.com"
    )
    moved = bedrock_wire.encode(claude, CAPS)
    assert "weighing it" not in json.dumps(moved.body)
    assert [(d.index, d.kind) for d in moved.downgrades] == [(1, "thinking")]


def test_plain_responses_reasoning_goes_back_to_its_server_as_a_reasoning_item() -> None:
    body = {
        "id": "resp_1",
        "model": "gpt-oss-20b",
        "status": "completed",
        "output": [
            {
                "type": "reasoning",
                "id": "rs_plain",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "thinking aloud"}],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            },
        ],
    }
    answer = responses_wire.decode_response(body, endpoint="127.0.0.1")
    thinking = answer.message.content[0]
    assert thinking == Thinking(
        "thinking aloud", "rs_plain", Origin("responses", "127.0.0.1", "gpt-oss-20b")
    )
    history = [Message.user("hi"), answer.message, Message.user("again")]
    encoded = responses_wire.encode(_request(history, "gpt-oss-20b", "127.0.0.1"), CAPS)
    check_responses_request(encoded.body)
    items = [i for i in encoded.body["input"] if i.get("type") == "reasoning"]
    assert items == [
        {
            "type": "reasoning",
            "id": "rs_plain",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "thinking aloud"}],
        }
    ]
    elsewhere = responses_wire.encode(_request(history, "gpt-5", "api.openai.com"), CAPS)
    assert "rs_plain" not in json.dumps(elsewhere.body)
    assert [(d.index, d.kind) for d in elsewhere.downgrades] == [(1, "thinking")]


# -- old transcripts -----------------------------------------------------------------


def test_an_origin_without_the_new_fields_loads_and_writes_as_it_was_written() -> None:
    old = {
        "type": "thinking",
        "text": "t",
        "signature": "S",
        "origin": {"dialect": "anthropic", "endpoint": HOST, "model": DATED},
    }
    message = Message.from_dict(
        {"role": "assistant", "content": [old, {"type": "text", "text": "a"}]}
    )
    block = message.content[0]
    assert isinstance(block, Thinking) and block.origin == Origin("anthropic", HOST, DATED)
    assert message.to_dict()["content"][0] == old


def test_an_old_origin_still_matches_its_model_and_an_account_it_never_named() -> None:
    old = Origin("responses", "api.openai.com", "gpt-5")
    assert old.same_maker(Origin("responses", "api.openai.com", "gpt-5", account="abc"))
    assert not old.same_maker(Origin("responses", "api.openai.com", "gpt-5-mini"))


def test_stamping_the_request_leaves_blocks_without_origin_untouched() -> None:
    message = Message.assistant([Text("plain"), ToolUse("c1", "look", {}), Opaque("k", "{}")])
    history = [Message.user("go"), message]
    response = anthropic_wire.decode_response(
        {
            "type": "message",
            "model": DATED,
            "content": [{"type": "text", "text": "plain"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    assert answered(response, _request(history, ALIAS, HOST)) is response

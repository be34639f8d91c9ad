"""Structured output on every wire: where the schema lands, checked by each official SDK's type.

Each wire's body for a request with an `OutputSchema` is held to the SDK's
own request type (nothing dropped) and pinned by a golden of the keys the
schema went to; Bedrock's forced answer call reads back as the answer's
text, and constrained prompt mode puts the schema in its `response`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from pydantic import TypeAdapter

from carryall.blocks import Message, Text, Thinking, ToolUse
from carryall.errors import ProviderError
from carryall.providers import Capabilities, OutputSchema, Request, Response
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import bedrock as bedrock_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers import openai as openai_wire
from carryall.providers import prompt as prompt_mode
from carryall.providers import responses as responses_wire
from carryall.providers.structured import FORCED_TOOL_DESCRIPTION, answered
from tests.support.goldens import TOOLS
from tests.support.recorded import _consume
from tests.support.sdk_openai import check_openai_request
from tests.support.sdk_wires import (
    check_bedrock_request,
    check_gemini_request,
    check_responses_request,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "sights": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "sights"],
    "additionalProperties": False,
}
OUTPUT = OutputSchema(SCHEMA, name="city_guide")
CAPS = Capabilities(vision=True, native_tools=True)
PROMPT_CAPS = Capabilities(vision=False, native_tools=False)


def _request(**fields: Any) -> Request:
    given: dict[str, Any] = {
        "model": "model-1",
        "messages": (Message.user("Tell me about Paris."),),
        "output_schema": OUTPUT,
        **fields,
    }
    return Request(**given)


def _without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


# -- where the schema lands, wire by wire ------------------------------------------


def test_chat_completions_asks_by_response_format_json_schema() -> None:
    body = openai_wire.encode_request(_request(), CAPS)
    check_openai_request(body)
    assert _without(body, "messages") == {
        "model": "model-1",
        "max_completion_tokens": 4096,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "city_guide", "schema": SCHEMA, "strict": True},
        },
    }


def test_llama_server_chat_gets_the_same_response_format_its_grammar_reads() -> None:
    body = openai_wire.encode_request(_request(), CAPS, "llama-server")
    check_openai_request(body)
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA


def test_plain_prompt_mode_keeps_the_response_format() -> None:
    # No tools: prompt mode writes a plain request, and the schema still goes.
    body = prompt_mode.encode_request(_request(), PROMPT_CAPS, dialect="llama-server")
    check_openai_request(body)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "city_guide", "schema": SCHEMA, "strict": True},
    }


def test_constrained_prompt_mode_holds_the_response_to_the_schema() -> None:
    request = _request(tools=TOOLS)
    body = prompt_mode.encode_request(
        request, PROMPT_CAPS, dialect="llama-server", constrained=True
    )
    check_openai_request(body)
    schema = body["response_format"]["json_schema"]["schema"]
    [calls, response] = schema["anyOf"]
    assert "tool_calls" in calls["properties"]
    assert response["properties"] == {"response": SCHEMA}


def test_constrained_prompt_mode_rebases_the_schemas_own_references() -> None:
    refs = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}},
        "required": ["item"],
        "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    request = _request(tools=TOOLS, output_schema=OutputSchema(refs))
    schema = prompt_mode.response_schema(request.tools, None, request.output_schema)
    response = schema["anyOf"][1]["properties"]["response"]
    assert response == {"$ref": "#/$defs/answer"}
    item = schema["$defs"]["answer"]["properties"]["item"]
    assert item == {"$ref": "#/$defs/answer/$defs/Item"}


def test_a_constrained_structured_response_reads_back_as_its_json_text() -> None:
    content = json.dumps({"response": {"city": "Paris", "sights": ["Louvre"]}})
    data = {
        "id": "c1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    response = prompt_mode.decode_response(data, constrained=True)
    assert json.loads(response.message.text()) == {"city": "Paris", "sights": ["Louvre"]}
    assert response.stop_reason == "end_turn"


def test_responses_asks_by_text_format() -> None:
    body = responses_wire.encode_request(_request(), CAPS)
    check_responses_request(body)
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "city_guide", "schema": SCHEMA, "strict": True}
    }
    assert "json_schema" not in body


def test_responses_on_llama_server_also_sends_the_json_schema_it_reads() -> None:
    body = responses_wire.encode_request(_request(), CAPS, llama=True)
    check_responses_request(body)
    assert body["json_schema"] == SCHEMA
    assert body["text"]["format"]["schema"] == SCHEMA


def test_responses_constrained_prompt_mode_puts_the_schema_in_the_response_branch() -> None:
    body = responses_wire.encode_request(
        _request(tools=TOOLS), PROMPT_CAPS, constrained=True, llama=True
    )
    check_responses_request(body)
    branches = body["json_schema"]["anyOf"]
    assert branches[1]["properties"] == {"response": SCHEMA}
    assert body["text"]["format"]["schema"] == body["json_schema"]


ANTHROPIC = TypeAdapter(MessageCreateParamsNonStreaming)


def test_anthropic_asks_by_output_config_format() -> None:
    body = anthropic_wire.encode_request(_request(), CAPS)
    validated = ANTHROPIC.validate_python(body)
    _consume(validated)
    # The SDK type keeps the whole format: nothing of it was an unknown key.
    assert validated["output_config"] == body["output_config"]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


def test_anthropic_format_sits_beside_the_effort() -> None:
    body = anthropic_wire.encode_request(_request(effort="low"), CAPS)
    _consume(ANTHROPIC.validate_python(body))
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": SCHEMA},
    }


def test_gemini_asks_by_response_json_schema() -> None:
    body = gemini_wire.encode_request(_request(), CAPS)
    check_gemini_request(body)
    assert body["generationConfig"] == {
        "maxOutputTokens": 4096,
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
    }


def test_bedrock_forces_the_tool_of_the_schema() -> None:
    body = bedrock_wire.encode_request(_request(), CAPS)
    check_bedrock_request(body)
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "city_guide",
                    "description": FORCED_TOOL_DESCRIPTION,
                    "inputSchema": {"json": SCHEMA},
                }
            }
        ],
        "toolChoice": {"tool": {"name": "city_guide"}},
    }


def test_bedrock_with_tools_of_its_own_lets_the_model_call_them_or_answer() -> None:
    # A Claude model on Bedrock takes a cache point after its tools.
    claude = "anthropic.claude-sonnet-4-5-20250929-v1:0"
    body = bedrock_wire.encode_request(_request(model=claude, tools=TOOLS, cache="auto"), CAPS)
    check_bedrock_request(body)
    tools = body["toolConfig"]["tools"]
    names = [t["toolSpec"]["name"] for t in tools if "toolSpec" in t]
    assert names == ["read_file", "screenshot", "city_guide"]
    assert "cachePoint" in tools[-1]  # the cache point stays last
    assert body["toolConfig"]["toolChoice"] == {"any": {}}


def test_bedrock_answer_without_tools_forces_the_answer_tool_again() -> None:
    body = bedrock_wire.encode_request(_request(tools=TOOLS, tool_choice="none"), CAPS)
    check_bedrock_request(body)
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "city_guide"}}


def test_bedrock_wraps_a_schema_that_is_not_an_object() -> None:
    enum = {"type": "string", "enum": ["yes", "no"]}
    body = bedrock_wire.encode_request(_request(output_schema=OutputSchema(enum)), CAPS)
    check_bedrock_request(body)
    [tool] = body["toolConfig"]["tools"]
    assert tool["toolSpec"]["inputSchema"]["json"] == {
        "type": "object",
        "properties": {"value": enum},
        "required": ["value"],
        "additionalProperties": False,
    }


def test_bedrock_refuses_a_forced_answer_with_thinking() -> None:
    request = _request(model="anthropic.claude-x", thinking=True)
    with pytest.raises(ProviderError, match="thinking"):
        bedrock_wire.encode_request(request, Capabilities(thinking=True))


def test_bedrock_refuses_a_schema_named_as_a_tool() -> None:
    clash = OutputSchema(SCHEMA, name="read_file")
    with pytest.raises(ProviderError, match="also a tool's"):
        bedrock_wire.encode_request(_request(tools=TOOLS, output_schema=clash), CAPS)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "naïve"])
def test_a_name_no_wire_takes_is_refused_on_every_wire(name: str) -> None:
    request = _request(output_schema=OutputSchema(SCHEMA, name=name))
    for encode in (
        lambda: openai_wire.encode_request(request, CAPS),
        lambda: responses_wire.encode_request(request, CAPS),
        lambda: anthropic_wire.encode_request(request, CAPS),
        lambda: gemini_wire.encode_request(request, CAPS),
        lambda: bedrock_wire.encode_request(request, CAPS),
    ):
        with pytest.raises(ProviderError, match="output schema name"):
            encode()


def test_without_a_schema_no_wire_writes_any_of_it() -> None:
    request = Request(model="model-1", messages=(Message.user("hi"),))
    assert "response_format" not in openai_wire.encode_request(request, CAPS)
    assert "text" not in responses_wire.encode_request(request, CAPS)
    assert "output_config" not in anthropic_wire.encode_request(request, CAPS)
    config = gemini_wire.encode_request(request, CAPS)["generationConfig"]
    assert "responseJsonSchema" not in config
    assert "toolConfig" not in bedrock_wire.encode_request(request, CAPS)


def test_the_bytes_sent_carry_the_schema_as_the_body_does() -> None:
    for sent, body in (
        (
            openai_wire.encode_sent(_request(), CAPS).data,
            openai_wire.encode_request(_request(), CAPS),
        ),
        (
            anthropic_wire.encode_sent(_request(), CAPS).data,
            anthropic_wire.encode_request(_request(), CAPS),
        ),
        (
            responses_wire.encode_sent(_request(), CAPS).data,
            responses_wire.encode_request(_request(), CAPS),
        ),
    ):
        assert json.loads(sent) == json.loads(json.dumps(body))


# -- Bedrock's forced call, read back -------------------------------------------------


def _forced(*blocks: Any, stop: Any = "tool_use") -> Response:
    return Response(message=Message.assistant(list(blocks)), stop_reason=stop)


def test_the_forced_call_reads_back_as_the_answers_json_text() -> None:
    value = {"city": "Paris", "sights": ["Louvre", "Orsay"]}
    response = answered(
        _forced(Thinking("plan", signature="s"), ToolUse("t1", "city_guide", value)), OUTPUT
    )
    assert response.stop_reason == "end_turn"
    assert isinstance(response.message.content[0], Thinking)
    assert json.loads(response.message.text()) == value
    assert not response.message.tool_uses()


def test_a_wrapped_schemas_value_is_unwrapped() -> None:
    enum = OutputSchema({"type": "string", "enum": ["yes", "no"]})
    response = answered(_forced(ToolUse("t1", "answer", {"value": "yes"})), enum)
    assert response.message.text() == '"yes"'


def test_text_beside_the_forced_call_is_left_off_and_named() -> None:
    response = answered(
        _forced(Text("Here it is:"), ToolUse("t1", "city_guide", {"city": "Rome", "sights": []})),
        OUTPUT,
    )
    assert json.loads(response.message.text()) == {"city": "Rome", "sights": []}
    [lost] = response.downgrades
    assert (lost.index, lost.kind, lost.block) == (0, "text", 0)


def test_another_call_beside_the_answer_keeps_the_round_going() -> None:
    response = answered(
        _forced(
            ToolUse("t1", "read_file", {"path": "a"}),
            ToolUse("t2", "city_guide", {"city": "Rome", "sights": []}),
        ),
        OUTPUT,
    )
    assert response.stop_reason == "tool_use"
    assert [u.name for u in response.message.tool_uses()] == ["read_file"]


def test_an_answer_without_the_forced_call_is_given_back_as_it_is() -> None:
    plain = _forced(Text('{"city": "Oslo", "sights": []}'), stop="end_turn")
    assert answered(plain, OUTPUT) is plain
    assert answered(plain, None) is plain


def test_constrained_prompt_mode_writes_a_past_structured_answer_as_its_value() -> None:
    # The history's examples agree with the schema's response branch: a value, not its text.
    said = '{"city": "Rome", "sights": []}'
    history = (
        Message.user("Rome?"),
        Message.assistant([Text(said)]),
        Message.user("And Paris?"),
    )
    request = _request(tools=TOOLS, messages=history)
    body = prompt_mode.encode_request(
        request, PROMPT_CAPS, dialect="llama-server", constrained=True
    )
    [past] = [m for m in body["messages"] if m["role"] == "assistant"]
    assert json.loads(past["content"]) == {"response": json.loads(said)}
    plain = _request(tools=TOOLS, messages=history, output_schema=None)
    body = prompt_mode.encode_request(plain, PROMPT_CAPS, dialect="llama-server", constrained=True)
    [past] = [m for m in body["messages"] if m["role"] == "assistant"]
    assert json.loads(past["content"]) == {"response": said}

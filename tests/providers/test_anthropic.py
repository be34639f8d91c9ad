"""SPEC §5, Anthropic Messages: requests, responses and imported histories.

Every request built here is checked against the official SDK's own request
type (`MessageCreateParamsNonStreaming`) with every lazily validated
iterable consumed, so the check has teeth; the streaming decoder has its own
file (`test_codec_anthropic_stream.py`).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import msgspec
import pytest
from anthropic.types import Message as SdkMessage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from carryall.blocks import (
    Block,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    validate_history,
)
from carryall.carrier import Marker, MarkerKind
from carryall.errors import HistoryError, ProviderError
from carryall.providers import CachePolicy, Capabilities, Request
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import openai as openai_codec
from carryall.providers._common import prepare
from carryall.providers.anthropic import (
    INVALID_JSON_KEY,
    decode_messages,
    decode_response,
    encode_request,
)
from tests.support.goldens import (
    ENDS_IN_TOOL_ROUND,
    ERROR_RESULT,
    IMAGE_FROM_USER,
    PARALLEL_ROUND_WITH_IMAGE,
    SHOT,
    SIGNED_THINKING,
    TOOLS,
)
from tests.support.histories import (
    histories,
    images,
    json_values,
    sdk_check,
    signatures,
    tool_inputs,
    visible,
)

VISION = Capabilities(vision=True)
BLIND = Capabilities(vision=False)
THINKER = Capabilities(vision=True, thinking=True)

# The 1x1 PNG of the goldens, spelled out: bare base64, no `data:` prefix.
SHOT_DATA = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9"
    "awAAAABJRU5ErkJggg=="
)

# -- the SDK's request type, with teeth ------------------------------------------------


def encode(messages: list[Message], caps: Capabilities = VISION, **options: Any) -> dict[str, Any]:
    """Encode and SDK-check in one step, as every test here wants both."""
    wire = encode_request(Request(model="claude-test", messages=tuple(messages), **options), caps)
    sdk_check(wire)
    return wire


def as_sent(value: Any) -> Any:
    """What goes on the wire: a message the history holds canonically has a tuple for content."""
    return json.loads(json.dumps(value))


def _base(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 16, **extra}


@pytest.mark.parametrize(
    "wire",
    [
        _base(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/tiff", "data": "AA"},
                        }
                    ],
                }
            ]
        ),
        _base(messages=[{"role": "tool", "content": "result"}]),
        _base(messages=[{"role": "user", "content": [{"type": "bogus", "text": "x"}]}]),
        _base(messages=[{"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}]),
        _base(
            messages=[
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a", "name": "b", "input": "{}"}],
                }
            ]
        ),
        _base(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "a",
                            "content": [{"type": "text", "text": 5}],
                        }
                    ],
                }
            ]
        ),
        _base(messages=[{"role": "user", "content": "hi"}], tool_choice={"type": "required"}),
    ],
    ids=[
        "tiff-image",
        "role-tool",
        "unknown-block",
        "unsigned-thinking",
        "string-input",
        "nested-bad-text",
        "bad-tool-choice",
    ],
)
def test_sdk_check_refuses_what_the_api_refuses(wire: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        sdk_check(wire)


def test_sdk_check_accepts_a_plain_request() -> None:
    sdk_check(_base(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]))


# -- goldens ---------------------------------------------------------------------------

ROUND_USER = {
    "role": "user",
    "content": [{"type": "text", "text": "Read notes.txt and take a screenshot of the editor."}],
}
ROUND_CALLS = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "I'll do both."},
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "notes.txt"}},
        {"type": "tool_use", "id": "call_2", "name": "screenshot", "input": {"window": "editor"}},
    ],
}
ROUND_TAIL = [
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "The notes say to buy milk; the editor is shown."}],
    },
    {"role": "user", "content": [{"type": "text", "text": "Thanks."}]},
]
WIRE_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a text file from the workspace.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "screenshot",
        "description": "Take a screenshot of a window and show it.",
        "input_schema": {
            "type": "object",
            "properties": {"window": {"type": "string"}},
            "required": ["window"],
        },
    },
]


def test_golden_parallel_round_with_image() -> None:
    wire = encode(PARALLEL_ROUND_WITH_IMAGE, tools=TOOLS, system="Be brief.")
    assert as_sent(wire) == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "Be brief.",
        "messages": [
            ROUND_USER,
            ROUND_CALLS,
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "buy milk"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "screenshot taken"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": SHOT_DATA},
                    },
                ],
            },
            *ROUND_TAIL,
        ],
        "tools": WIRE_TOOLS,
    }


def test_golden_parallel_round_on_a_blind_model() -> None:
    wire = encode(PARALLEL_ROUND_WITH_IMAGE, BLIND, tools=TOOLS)
    assert wire["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "buy milk"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "screenshot taken"},
            {"type": "text", "text": "[image: shot.png (image/png)]"},
        ],
    }


def test_golden_error_result() -> None:
    wire = encode(ERROR_RESULT, tools=TOOLS)
    assert as_sent(wire["messages"]) == [
        {"role": "user", "content": [{"type": "text", "text": "Read missing.txt."}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_9",
                    "name": "read_file",
                    "input": {"path": "missing.txt"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_9",
                    "content": "no such file: missing.txt",
                    "is_error": True,
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "That file does not exist."}]},
        {"role": "user", "content": [{"type": "text", "text": "Try notes.txt then."}]},
    ]


def test_golden_signed_thinking_goes_back_signed_and_unsigned_stays_off() -> None:
    wire = encode(SIGNED_THINKING, THINKER, tools=TOOLS, thinking=True)
    assert wire["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert as_sent(wire["messages"]) == [
        {"role": "user", "content": [{"type": "text", "text": "What is 2+2? Check with a tool."}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "The user wants arithmetic; I will read the file.",
                    "signature": "sig-abc123==",
                },
                {
                    "type": "tool_use",
                    "id": "call_t",
                    "name": "read_file",
                    "input": {"path": "math.txt"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_t", "content": "2+2=4"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It is 4."}]},
        {"role": "user", "content": [{"type": "text", "text": "And 3+3?"}]},
    ]
    # Not as thinking, and not leaked into text either.
    assert "Unsigned, from another backend." not in json.dumps(wire)


def test_golden_image_from_user_with_and_without_eyes() -> None:
    seeing = encode(IMAGE_FROM_USER)
    assert seeing["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": SHOT_DATA},
                },
            ],
        }
    ]
    blind = encode(IMAGE_FROM_USER, BLIND)
    assert blind["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "text", "text": "[image: shot.png (image/png)]"},
            ],
        }
    ]
    assert "image" not in {b["type"] for m in blind["messages"] for b in m["content"]}


def test_golden_history_ending_in_a_tool_round() -> None:
    wire = encode(ENDS_IN_TOOL_ROUND, tools=TOOLS)
    assert as_sent(wire["messages"][-1]) == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_r", "content": "line one\nline two\n"}
        ],
    }
    assert [m["role"] for m in wire["messages"]] == ["user", "assistant", "user"]


def test_image_data_is_the_blocks_own_string_not_a_copy() -> None:
    wire = encode(PARALLEL_ROUND_WITH_IMAGE)
    assert wire["messages"][2]["content"][2]["source"]["data"] is SHOT.data


def test_tool_schemas_are_referenced_not_copied() -> None:
    wire = encode(PARALLEL_ROUND_WITH_IMAGE, tools=TOOLS)
    assert wire["tools"][0]["input_schema"] is TOOLS[0].input_schema


# -- message shaping ---------------------------------------------------------------------


def test_tool_results_go_first_whatever_order_the_blocks_were_in() -> None:
    history = [
        Message.user("go"),
        Message.assistant([ToolUse("a", "t", {}), ToolUse("b", "t", {})]),
        Message("user", (Text("note"), ToolResult("b", "B"), SHOT, ToolResult("a", "A"))),
    ]
    wire = encode(history)
    assert wire["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "b", "content": "B"},
        {"type": "tool_result", "tool_use_id": "a", "content": "A"},
        {"type": "text", "text": "note"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": SHOT_DATA},
        },
    ]


def test_blank_text_and_emptied_messages_are_left_off() -> None:
    history = [
        Message.user("hi"),
        Message.assistant([Thinking("from elsewhere"), Text("  \n")]),
        Message("user", (Text(""), Text("again"), Text("\t "))),
    ]
    wire = encode(history)
    assert as_sent(wire["messages"]) == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    ]


def test_empty_result_text_leaves_content_out_and_reads_back_empty() -> None:
    history = [
        Message.user("go"),
        Message.assistant([ToolUse("a", "t", {})]),
        Message.tool_results([ToolResult("a", "")]),
    ]
    wire = encode(history)
    assert wire["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "a"}]
    assert decode_messages(wire["messages"])[1] == history


def test_non_object_tool_input_is_wrapped_and_reads_back() -> None:
    history = [
        Message.user("go"),
        Message.assistant([ToolUse("a", "t", '{"path": "no'), ToolUse("b", "t", [1, 2])]),
        Message.tool_results([ToolResult("a", "bad args", True), ToolResult("b", "bad", True)]),
    ]
    wire = encode(history)
    inputs = [b["input"] for b in wire["messages"][1]["content"]]
    assert inputs == [{INVALID_JSON_KEY: '{"path": "no'}, {INVALID_JSON_KEY: "[1, 2]"}]
    _, back = decode_messages(wire["messages"])
    assert back[1].content == (ToolUse("a", "t", '{"path": "no'), ToolUse("b", "t", "[1, 2]"))


def test_image_limit_keeps_the_newest_and_names_the_rest() -> None:
    older = Image.from_bytes("image/png", b"older", "old.png")
    history = [
        Message.user("look", [older]),
        Message.assistant([Text("ok")]),
        Message.user("and", [SHOT]),
    ]
    wire = encode(history, max_images=1)
    assert wire["messages"][0]["content"][1] == {
        "type": "text",
        "text": "[image: old.png (image/png)]",
    }
    assert wire["messages"][2]["content"][1]["type"] == "image"


def test_a_broken_history_fails_before_anything_is_built() -> None:
    history = [Message.user("go"), Message.assistant([ToolUse("a", "t", {})]), Message.user("?")]
    with pytest.raises(HistoryError, match="message 2"):
        encode_request(Request(model="m", messages=tuple(history)), VISION)


# -- request options -------------------------------------------------------------------


def test_no_options_means_no_option_keys() -> None:
    wire = encode([Message.user("hi")])
    assert set(wire) == {"model", "max_tokens", "messages"}


def test_thinking_is_sent_only_to_a_model_that_thinks() -> None:
    assert "thinking" not in encode([Message.user("hi")], VISION, thinking=True)
    wire = encode(
        [Message.user("hi")], THINKER, thinking=True, thinking_budget=5000, max_tokens=9000
    )
    assert wire["thinking"] == {"type": "enabled", "budget_tokens": 5000}
    small = encode([Message.user("hi")], THINKER, thinking=True, max_tokens=1500)
    assert small["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_thinking_without_room_for_a_budget_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match="max_tokens above 1024"):
        encode([Message.user("hi")], THINKER, thinking=True, max_tokens=1024)


def test_required_tool_choice_with_thinking_is_refused_before_sending() -> None:
    with pytest.raises(ProviderError, match="tool_choice 'required'"):
        encode([Message.user("hi")], THINKER, thinking=True, tools=TOOLS, tool_choice="required")


@pytest.mark.parametrize(
    ("choice", "wire_choice"),
    [("auto", {"type": "auto"}), ("required", {"type": "any"}), ("none", {"type": "none"})],
)
def test_tool_choice_maps_to_the_wire(choice: Any, wire_choice: dict[str, str]) -> None:
    assert (
        encode([Message.user("hi")], tools=TOOLS, tool_choice=choice)["tool_choice"] == wire_choice
    )


def test_tool_choice_without_tools_is_left_off() -> None:
    assert "tool_choice" not in encode([Message.user("hi")], tool_choice="none")


def test_effort_goes_in_output_config() -> None:
    assert encode([Message.user("hi")], effort="low")["output_config"] == {"effort": "low"}


def test_prompt_caching_marks_the_system_block_and_the_last_tool() -> None:
    wire = encode([Message.user("hi")], tools=TOOLS, system="Be brief.", cache="auto")
    assert wire["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert "cache_control" not in wire["tools"][0]
    assert wire["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in TOOLS[1].input_schema
    system, _ = decode_messages(wire["messages"], system=wire["system"])
    assert system == "Be brief."


# -- responses ---------------------------------------------------------------------------


def sdk_message(content: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A response body, checked against the SDK's `Message` model so it is a real shape."""
    body: dict[str, Any] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    body.update(fields)
    SdkMessage.model_validate(body)
    return body


def test_response_decodes_every_block_kind() -> None:
    body = sdk_message(
        [
            {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "text", "text": "Reading.", "citations": None},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
        ],
        stop_reason="tool_use",
        usage={
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 3,
            "cache_read_input_tokens": None,
        },
    )
    response = decode_response(body, endpoint="api.anthropic.com")
    origin = Origin("anthropic", "api.anthropic.com", "claude-test")
    assert response.message == Message.assistant(
        [
            Thinking("hmm", "c2ln", origin),
            RedactedThinking("EmwKAhgBEgy3va3pzix/LafPsn4a", origin),
            Text("Reading."),
            ToolUse("toolu_1", "read_file", {"path": "a"}),
        ]
    )
    assert response.stop_reason == "tool_use"
    assert response.usage.input_tokens == 10
    assert response.usage.output_tokens == 5
    assert response.usage.cache_creation_input_tokens == 3
    assert response.usage.cache_read_input_tokens == 0
    assert response.model == "claude-test"
    assert response.refusal is None
    assert response.malformed_tool_args == 0


def test_redacted_thinking_round_trips_byte_for_byte_and_prints_as_nothing() -> None:
    original = {"type": "redacted_thinking", "data": 'EmwKAh\u00e9\\"gBEg==\n'}
    response = decode_response(sdk_message([original, {"type": "text", "text": "ok"}]))
    assert response.message.thinking() == ""
    assert response.message.text() == "ok"
    [block, _] = response.message.content
    assert block == RedactedThinking(original["data"], Origin("anthropic", "", "claude-test"))
    history = [Message.user("hi"), response.message, Message.user("more")]
    wire = encode(history)
    sent = wire["messages"][1]["content"][0]
    assert json.dumps(sent) == json.dumps(original)


def test_legacy_redacted_spelling_reads_as_redacted_thinking() -> None:
    legacy = {"type": "thinking", "text": "", "signature": "redacted_thinking:x"}
    message = Message.from_dict({"role": "assistant", "content": [legacy]})
    assert message.content == (RedactedThinking("x"),)
    assert Message("assistant", (Thinking("t", "c2ln"),)).content == (Thinking("t", "c2ln"),)


@pytest.mark.parametrize(
    ("wire_reason", "reason"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("model_context_window_exceeded", "max_tokens"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        ("something_new", "other"),
        (None, "other"),
    ],
)
def test_stop_reasons_map_to_the_response_set(wire_reason: Any, reason: str) -> None:
    body = sdk_message([{"type": "text", "text": "x"}])
    body["stop_reason"] = wire_reason
    assert decode_response(body).stop_reason == reason


def test_refusal_explanation_is_kept() -> None:
    body = sdk_message(
        [],
        stop_reason="refusal",
        stop_details={"type": "refusal", "category": "cyber", "explanation": "Not that."},
    )
    response = decode_response(body)
    assert response.stop_reason == "refusal"
    assert response.refusal == "Not that."


def test_error_body_is_the_error_it_describes() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ProviderError, match="Overloaded") as info:
        decode_response(body)
    assert info.value.kind == "overloaded_error"
    assert info.value.retryable
    with pytest.raises(ProviderError) as info:
        decode_response(
            {"type": "error", "error": {"type": "invalid_request_error", "message": "x"}}
        )
    assert not info.value.retryable


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ([], "expected an object"),
        ({"type": "message", "content": "hi"}, "response.content"),
        ({"content": [{"type": 7}]}, r"response.content\[0\].type"),
        ({"content": [{"type": "text", "text": None}]}, r"response.content\[0\].text"),
        (
            {"content": [{"type": "tool_use", "id": "a", "name": "b", "input": "{}"}]},
            r"response.content\[0\].input",
        ),
        ({"content": [], "usage": {"input_tokens": "10"}}, "response.usage.input_tokens"),
        ({"content": [], "usage": {"input_tokens": True}}, "response.usage.input_tokens"),
        ({"content": [], "usage": {"output_tokens": -1}}, "response.usage.output_tokens"),
        ({"content": [], "stop_reason": 3}, "response.stop_reason"),
        ({"content": [], "model": 3}, "response.model"),
        ({"content": [], "role": "user"}, "role 'assistant'"),
        ({"type": "completion", "content": []}, "type 'message'"),
        ({"content": [], "stop_details": "refusal"}, "response.stop_details"),
    ],
)
def test_hostile_response_is_a_clear_provider_error(body: Any, where: str) -> None:
    with pytest.raises(ProviderError, match=where):
        decode_response(body)


def test_huge_tool_input_decodes_without_fuss() -> None:
    big = "x" * 10_000_000
    body = sdk_message([{"type": "tool_use", "id": "a", "name": "b", "input": {"blob": big}}])
    [block] = decode_response(body).message.content
    assert isinstance(block, ToolUse)
    assert block.input["blob"] is big


# -- importing histories --------------------------------------------------------------------


def test_importer_reads_strings_system_lists_and_system_messages() -> None:
    system, history = decode_messages(
        [
            {"role": "system", "content": [{"type": "text", "text": "Third."}]},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ],
        system=[{"type": "text", "text": "First."}, {"type": "text", "text": "Second."}],
    )
    assert system == "First.\n\nSecond.\n\nThird."
    assert history == [Message.user("hi"), Message.assistant([Text("hello")])]
    assert decode_messages([], system="S") == ("S", [])
    assert decode_messages([]) == (None, [])


def test_importer_lifts_images_out_of_tool_results_after_the_results() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": SHOT_DATA},
    }
    _, history = decode_messages(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "a", "name": "shot", "input": {}},
                    {"type": "tool_use", "id": "b", "name": "read", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "a",
                        "content": [{"type": "text", "text": "taken"}, image],
                    },
                    {"type": "tool_result", "tool_use_id": "b", "content": [], "is_error": True},
                    {"type": "text", "text": "and?"},
                ],
            },
        ]
    )
    assert history[2] == Message(
        "user",
        (
            ToolResult("a", "taken"),
            ToolResult("b", "", True),
            Image("image/png", SHOT_DATA),
            Text("and?"),
        ),
    )


def test_a_tool_reference_stays_inside_its_result_and_is_a_named_line_elsewhere() -> None:
    reference = {"type": "tool_reference", "tool_name": "search_only_tool"}
    recorded = [
        {"role": "user", "content": "find it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "s", "name": "search_tools", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "s",
                    "content": [{"type": "text", "text": "found"}, reference],
                },
                {"type": "text", "text": "go on"},
            ],
        },
    ]
    _, history = decode_messages(recorded)
    result, inside, text = history[2].content
    # Its text was one text block: so it is written back to this wire alone.
    assert isinstance(result, ToolResult) and result.spelling is not None
    assert result.spelling.form == anthropic_codec.TEXT_BLOCKS
    assert msgspec.structs.replace(result, spelling=None) == ToolResult("s", "found")
    assert isinstance(inside, Opaque) and inside.kind == anthropic_codec.IN_RESULT
    assert json.loads(inside.raw) == [reference]
    assert inside.text == "[tool_reference: search_only_tool]"
    assert text == Text("go on")
    request = Request(model="claude-sonnet-4-6", messages=tuple(history))
    body = encode_request(request, Capabilities())
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "s",
            "content": [{"type": "text", "text": "found"}, reference],
        },
        {"type": "text", "text": "go on"},
    ]
    # The OpenAI wire has no place for it: the tool message keeps its text, the line
    # follows in the user turn, and the loss is named.
    encoded = openai_codec.encode(request, Capabilities())
    assert encoded.body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "s", "content": "found"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[tool_reference: search_only_tool]"},
                {"type": "text", "text": "go on"},
            ],
        },
    ]
    assert [(d.index, d.kind) for d in encoded.downgrades] == [(2, "opaque")]


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        ("hi", "messages: expected an array"),
        ([{"role": "tool", "content": "x"}], r"messages\[0\].role"),
        ([{"role": "user"}], r"messages\[0\].content"),
        ([{"role": "user", "content": [{"type": "document"}]}], r"content\[0\].source"),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/tiff", "data": "AA"},
                        }
                    ],
                }
            ],
            "image/tiff",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "file", "file_id": "file_1"}}],
                }
            ],
            "only base64 and url sources",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": 1}],
                }
            ],
            "is_error",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "system", "content": 7}],
            r"messages\[1\].content",
        ),
        (
            [{"role": "assistant", "content": [{"type": "image"}]}],
            "block type 'image' may only ride a user message",
        ),
    ],
)
def test_hostile_history_is_a_clear_provider_error(messages: Any, where: str) -> None:
    with pytest.raises(ProviderError, match=where):
        decode_messages(messages)


# -- the round-trip property -------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    system=st.none() | visible,
    cache=st.sampled_from(["off", "auto"]),
)
def test_decode_of_encode_gives_the_history_back(
    history: list[Message], system: str | None, cache: CachePolicy
) -> None:
    wire = encode(history, system=system, cache=cache, tools=TOOLS)
    sent = json.loads(json.dumps(wire))
    assert decode_messages(sent["messages"], system=sent.get("system")) == (system, history)


@settings(max_examples=50, deadline=None)
@given(history=histories())
def test_a_blind_model_never_gets_an_image(history: list[Message]) -> None:
    wire = encode(history, BLIND)
    assert all(b["type"] != "image" for m in wire["messages"] for b in m["content"])


wire_blocks = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "image", "tool_result", "tool_use", "thinking", "redacted_thinking"]
        )
    },
    optional={
        k: json_values
        for k in (
            "text",
            "source",
            "content",
            "tool_use_id",
            "is_error",
            "id",
            "name",
            "input",
            "data",
        )
    },
)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.one_of(
        json_values,
        st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant", "system", "tool"])},
                optional={"content": json_values | st.lists(wire_blocks | json_values, max_size=3)},
            )
            | json_values,
            max_size=4,
        ),
    ),
    system=json_values,
)
def test_arbitrary_history_json_imports_or_fails_clearly(messages: Any, system: Any) -> None:
    with contextlib.suppress(ProviderError):
        decode_messages(messages, system=system)


# -- canonical messages: converted in one step, the same as written block by block ---------

loose_assistant = st.one_of(
    st.builds(Text, st.sampled_from(["", " \n", "ok", "two words"])),
    st.builds(Thinking, st.text(max_size=5), st.none() | signatures),
    st.builds(RedactedThinking, st.text(max_size=5)),
)
loose_user = st.one_of(st.builds(Text, st.sampled_from(["", "\t", "next", "hi"])), images)
loose_inputs = st.one_of(tool_inputs, st.sampled_from(['{"path": "no', [1, 2], 7, None]))
AUDIO = (Marker(MarkerKind.AUDIO, "a.wav"),)


@st.composite
def loose_histories(draw: st.DrawFn) -> list[Message]:
    """Valid histories with all the wire rewrites: blanks, thinking, odd inputs, late results."""
    history: list[Message] = []
    calls = 0
    for _ in range(draw(st.integers(1, 4))):
        history.append(Message("user", draw(st.lists(loose_user, min_size=1, max_size=2))))
        blocks: list[Block] = draw(st.lists(loose_assistant, max_size=2))
        called: list[str] = []
        for _ in range(draw(st.integers(0, 2))):
            calls += 1
            called.append(f"toolu_{calls}")
            blocks.append(ToolUse(called[-1], "t", draw(loose_inputs)))
        history.append(Message("assistant", blocks or [Text("ok")]))
        if called:
            results: list[Block] = [
                ToolResult(
                    call,
                    draw(st.sampled_from(["", "done"])),
                    draw(st.booleans()),
                    draw(st.sampled_from([(), AUDIO])),
                )
                for call in draw(st.permutations(called))
            ]
            extras = draw(st.lists(loose_user, max_size=2))
            at = draw(st.integers(0, len(results)))
            history.append(Message("user", (*results[:at], *extras, *results[at:])))
    return history


@settings(max_examples=200, deadline=None)
@given(history=loose_histories(), caps=st.sampled_from([VISION, BLIND]))
def test_canonical_messages_go_out_as_if_written_block_by_block(
    history: list[Message], caps: Capabilities
) -> None:
    request = Request(model="m", messages=tuple(history), max_images=2)
    one_by_one = [anthropic_codec._encode_message(m, str) for m in prepare(request, caps).messages]
    wire = encode_request(request, caps)
    sdk_check(wire)
    assert as_sent(wire["messages"]) == as_sent([m for m in one_by_one if m is not None])


def test_a_tool_input_msgspec_will_not_convert_goes_by_reference() -> None:
    # Not JSON, so a serializer will refuse it later; the encoder itself neither
    # crashes nor drops the call.
    class Opaque:
        pass

    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for odd in ({"thing": Opaque()}, {"deep": deep}):
        history = [
            Message.user("go"),
            Message.assistant([ToolUse("a", "t", odd)]),
            Message.tool_results([ToolResult("a", "ok")]),
        ]
        wire = encode_request(Request(model="m", messages=tuple(history)), VISION)
        assert wire["messages"][1]["content"][0]["input"] is odd
        assert wire["messages"][2] == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}],
        }


def test_an_answer_with_no_blocks_reads_as_one_empty_text_and_the_history_stays_valid() -> None:
    # A stop sequence hit before any output (seen from claude-haiku-4-5).
    response = decode_response(sdk_message([], stop_reason="stop_sequence"))
    assert response.message == Message.assistant([Text("")])
    history = [Message.user("hi"), response.message, Message.user("again")]
    validate_history(history)
    assert [m["role"] for m in encode(history)["messages"]] == ["user", "user"]

"""A block's `Spelling`: how its wire wrote it goes back to that wire, and nowhere else unnamed."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import (
    Message,
    Origin,
    Spelling,
    Text,
    ToolResult,
    ToolUse,
    block_to_dict,
    messages_from_dicts,
    messages_to_dicts,
    survey_history,
)
from carryall.providers import Capabilities, Dialect, Downgrade, Request
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import openai as openai_codec
from carryall.providers import responses as responses_codec
from carryall.providers._common import prepare
from carryall.rounds import from_flat, to_flat
from tests.support.histories import tool_inputs
from tests.support.sdk_openai import check_openai_request
from tests.support.streams import chunk, fragment

CAPS = Capabilities(vision=True, native_tools=True)
RECORDED = [
    {"role": "user", "content": "look"},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "look", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "seen"},
    {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "phase": "final_answer",
        "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": "Done."}],
    },
]


def _request(messages: list[Message], model: str = "gpt-5") -> Request:
    return Request(model=model, endpoint="api.openai.com", messages=tuple(messages))


def test_a_block_with_no_spelling_writes_the_json_it_always_did() -> None:
    assert block_to_dict(Text("x")) == {"type": "text", "text": "x"}
    assert block_to_dict(ToolResult("c", "r")) == {
        "type": "tool_result",
        "tool_use_id": "c",
        "content": "r",
    }


def test_a_spelled_block_makes_its_message_irregular_and_survives_json_and_the_flat_form() -> None:
    spelling = Spelling(Origin("responses", "", ""), "easy", '{"id":"msg_1"}')
    history = [
        Message("user", (Text("hi"),)),
        Message("assistant", (Text("Done.", spelling=spelling),)),
        Message("user", (Text("more", spelling=spelling),)),
    ]
    assert survey_history(history).irregular == [1, 2]
    assert messages_from_dicts(messages_to_dicts(history)) == history
    assert from_flat(to_flat(history)) == (None, history)


def test_an_imported_history_echoes_to_its_own_wire_as_it_was_written() -> None:
    _, imported = responses_codec.decode_messages(RECORDED)
    body = responses_codec.encode(_request(list(imported)), CAPS).body
    assert body["input"] == RECORDED


def test_another_wire_leaves_the_spelling_off_and_names_the_fields_it_held() -> None:
    _, imported = responses_codec.decode_messages(RECORDED)
    encoded = anthropic_codec.encode(
        Request(model="claude-sonnet-4-5", messages=tuple(imported)), CAPS
    )
    text = json.dumps(encoded.body)
    assert "fc_1" not in text and "msg_1" not in text and "final_answer" not in text
    named = {(d.index, d.kind, d.block): d.reason for d in encoded.downgrades}
    assert "(id)" in named[(1, "tool_use", 0)]
    assert "(id, status, phase)" in named[(3, "text", 0)]
    # The first message kept only its layout: nothing to name.
    assert not any(d.index == 0 for d in encoded.downgrades)


def test_a_spelling_goes_back_only_to_its_own_wire() -> None:
    spelling = Spelling(Origin("anthropic", "", ""), "", '{"is_error":false}')
    history = [
        Message("user", (Text("go"),)),
        Message("assistant", (ToolUse("c", "f", {}),)),
        Message("user", (ToolResult("c", "ok", spelling=spelling),)),
    ]
    own = prepare(_request(history, "claude-sonnet-4-5"), CAPS, anthropic_codec.WIRE)
    assert own.messages[2] is history[2] and not own.downgrades
    other = prepare(_request(history), CAPS, responses_codec.WIRE)
    assert other.messages[2] == Message("user", (ToolResult("c", "ok"),))
    assert [(d.index, d.kind) for d in other.downgrades] == [(2, "tool_result")]
    sent = anthropic_codec.encode(Request(model="m", messages=tuple(history)), CAPS).body
    assert sent["messages"][2]["content"][0]["is_error"] is False


# -- the Chat Completions wire: a call's argument text and its message's content ----------

_CANONICAL = msgspec.json.Encoder()


def _chat_call(call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "weather", "arguments": arguments},
    }


def _chat_answer(arguments: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "smollm2",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_chat_call("c1", arguments)],
                },
            }
        ],
    }


CHAT_RECORDED: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris and Lyon?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            # As Python's `json.dumps` writes arguments: a space after each separator.
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": json.dumps({"city": "Paris"})},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "weather", "arguments": json.dumps({"city": "Lyon"})},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "c2", "content": "rain"},
    {"role": "assistant", "content": "", "tool_calls": [_chat_call("c3", '{"day": 2}')]},
    {"role": "tool", "tool_call_id": "c3", "content": "snow"},
    {"role": "assistant"},
    {"role": "user", "content": "Thanks."},
]


@pytest.mark.parametrize("dialect", ["openai", "llama-server"])
def test_a_chat_history_echoes_its_argument_text_and_content_layout_on_either_dialect(
    dialect: Dialect,
) -> None:
    _, imported = openai_codec.decode_messages(CHAT_RECORDED)
    encoded = openai_codec.encode(Request(model="m", messages=tuple(imported)), CAPS, dialect)
    assert encoded.body["messages"] == CHAT_RECORDED
    assert not encoded.downgrades
    check_openai_request(encoded.body)


def test_a_chat_call_written_compact_carries_no_spelling_and_a_spaced_one_keeps_its_text() -> None:
    # Compact, as the codec sends them: nothing extra. Spaced, as `json.dumps` (and the
    # codec's own file export) writes them: kept, so the history goes back as written.
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [_chat_call("c1", '{"city":"Paris"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "again"},
        {"role": "assistant", "tool_calls": [_chat_call("c2", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
    ]
    _, imported = openai_codec.decode_messages(history)
    assert imported[1] == Message("assistant", (ToolUse("c1", "weather", {"city": "Paris"}),))
    assert imported[3] == Message("assistant", (Text(""),))
    spaced = imported[5].content[0]
    assert isinstance(spaced, ToolUse) and spaced.input == {"city": "Paris"}
    assert spaced.spelling is not None
    assert json.loads(spaced.spelling.extra) == {"arguments": '{"city": "Paris"}'}
    sent = openai_codec.encode_request(
        Request(model="m", messages=tuple(imported)), Capabilities(), "openai"
    )
    assert sent["messages"][5]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'
    answer = openai_codec.decode_response(_chat_answer('{"city":"Paris"}'))
    assert answer.message.content == (ToolUse("c1", "weather", {"city": "Paris"}),)
    assert block_to_dict(answer.message.content[0]) == {
        "type": "tool_use",
        "id": "c1",
        "name": "weather",
        "input": {"city": "Paris"},
    }


def test_an_answers_argument_text_goes_back_to_its_own_model_and_is_named_elsewhere() -> None:
    spaced = json.dumps({"city": "Paris", "days": [1, 2]})
    whole = openai_codec.decode_response(_chat_answer(spaced), endpoint="api.example.com")
    streamed = openai_codec.decode_stream(
        [
            chunk({"tool_calls": [fragment(0, id="c1", name="weather", args=spaced[:9])]}),
            chunk({"tool_calls": [fragment(0, args=spaced[9:])]}),
            chunk({}, "tool_calls"),
        ],
        endpoint="api.example.com",
    )
    assert streamed.message == whole.message
    history = (Message.user("go"), whole.message, Message.tool_results([ToolResult("c1", "ok")]))

    def sent(model: str) -> tuple[str, tuple[Downgrade, ...]]:
        request = Request(model=model, endpoint="api.example.com", messages=history)
        encoded = openai_codec.encode(request, CAPS)
        return encoded.body["messages"][1]["tool_calls"][0]["function"]["arguments"], (
            encoded.downgrades
        )

    assert sent("smollm2") == (spaced, ())
    other, named = sent("another-model")
    assert other == '{"city":"Paris","days":[1,2]}'
    assert [(d.index, d.kind, d.block) for d in named] == [(1, "tool_use", 0)]
    assert "(arguments)" in named[0].reason
    foreign = anthropic_codec.encode(Request(model="claude-sonnet-4-5", messages=history), CAPS)
    assert foreign.body["messages"][1]["content"][0]["input"] == {"city": "Paris", "days": [1, 2]}
    assert [(d.index, d.kind, d.block) for d in foreign.downgrades] == [(1, "tool_use", 0)]


@pytest.mark.parametrize(
    ("written", "edited"),
    [
        ('{"city": "Paris"}', {"city": "Lyon"}),
        ('{"flag": true}', {"flag": 1}),  # equal in Python, not in JSON
        ('{"a": 1, "b": 2}', {"b": 2, "a": 1}),  # another order of the same keys
    ],
)
def test_an_edited_input_is_sent_as_the_input_says_not_as_the_kept_text(
    written: str, edited: dict[str, Any]
) -> None:
    _, imported = openai_codec.decode_messages(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1", written)]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    )
    call = imported[1].content[0]
    assert isinstance(call, ToolUse) and call.spelling is not None
    changed = msgspec.structs.replace(call, input=edited)
    history = (imported[0], Message("assistant", (changed,)), imported[2])
    for dialect, every_origin in [("openai", False), ("llama-server", False), ("openai", True)]:
        request = Request(model="m", messages=history)
        body = openai_codec.encode(request, CAPS, dialect, every_origin=every_origin).body
        arguments = body["messages"][1]["tool_calls"][0]["function"]["arguments"]
        assert arguments != written
        assert list(json.loads(arguments).items()) == list(edited.items())
        assert all(type(v) is type(edited[k]) for k, v in json.loads(arguments).items())


def test_a_spelling_cut_by_a_redaction_is_written_from_the_input() -> None:
    # A pattern that cut through the JSON the argument text is held in: the input goes.
    spelling = Spelling(Origin("openai", "", ""), "", '{"arguments":"{\\"key\\": [REDACTED]')
    history = (
        Message.user("go"),
        Message("assistant", (ToolUse("c1", "f", {"key": "[REDACTED]"}, spelling=spelling),)),
        Message.tool_results([ToolResult("c1", "ok")]),
    )
    body = openai_codec.encode(Request(model="m", messages=history), CAPS).body
    sent = body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"key":"[REDACTED]"}'


def test_argument_text_that_parsers_read_differently_is_not_kept() -> None:
    _, imported = openai_codec.decode_messages(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [_chat_call("c1", '{"a": 1, "a": 2}')]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    )
    call = imported[1].content[0]
    assert isinstance(call, ToolUse) and call.spelling is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(held=tool_inputs, written=tool_inputs, ascii_only=st.booleans())
def test_sent_arguments_always_read_as_the_calls_input(
    held: dict[str, Any], written: dict[str, Any], ascii_only: bool
) -> None:
    # Whatever argument text a call's spelling holds, what goes to the model reads as
    # the input the call holds, type for type; and the text itself when it does.
    text = json.dumps(written, ensure_ascii=ascii_only)
    spelling = Spelling(Origin("openai", "", ""), "", json.dumps({"arguments": text}))
    call = ToolUse("c1", "f", held, spelling=spelling)
    history = (
        Message.user("go"),
        Message("assistant", (call,)),
        Message.tool_results([ToolResult("c1", "ok")]),
    )
    body = openai_codec.encode(Request(model="m", messages=history), CAPS).body
    sent = body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert _CANONICAL.encode(json.loads(sent)) == _CANONICAL.encode(held)
    if _CANONICAL.encode(written) == _CANONICAL.encode(held):
        assert sent == text

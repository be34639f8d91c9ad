"""A block's `Spelling`: how its wire wrote it goes back to that wire, and nowhere else unnamed."""

from __future__ import annotations

import json

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
from carryall.providers import Capabilities, Request
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import responses as responses_codec
from carryall.providers._common import prepare
from carryall.rounds import from_flat, to_flat

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

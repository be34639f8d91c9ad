"""What the block model holds survives every wire's reader and writer: one test per way it
used to be lost, bent or refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from carryall.blocks import (
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
from carryall.interchange import read_messages_file
from carryall.providers import Capabilities, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers import openai as openai_wire
from carryall.providers import responses as responses_wire
from carryall.rounds import from_flat, to_flat
from tests.support.goldens import PNG_1x1
from tests.support.histories import sdk_check
from tests.support.sdk_wires import check_responses_request

CAPS = Capabilities(vision=True, native_tools=True, thinking=True)
PNG_B64 = Image.from_bytes("image/png", PNG_1x1).data


# -- Anthropic ------------------------------------------------------------------------


def _server_tool_events(pieces: list[str]) -> list[dict[str, Any]]:
    block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {}}
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"type": "message", "role": "assistant", "model": "claude-x", "content": []},
        },
        {"type": "content_block_start", "index": 0, "content_block": block},
    ]
    for piece in pieces:
        delta = {"type": "input_json_delta", "partial_json": piece}
        events.append({"type": "content_block_delta", "index": 0, "delta": delta})
    events += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        {"type": "message_stop"},
    ]
    return events


def test_a_server_tool_streamed_with_one_empty_piece_keeps_its_empty_object_input() -> None:
    streamed = anthropic_wire.decode_stream(_server_tool_events([""]))
    block = streamed.message.content[0]
    assert isinstance(block, Opaque)
    assert json.loads(block.raw)["input"] == {}
    whole = {
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {}}
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    assert anthropic_wire.decode_response(whole).message == streamed.message


def test_a_compaction_block_streamed_in_pieces_is_kept_whole_for_its_origin() -> None:
    events = _server_tool_events([])
    events[1] = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "compaction", "content": ""},
    }
    for piece in ("Earlier, ", "we read the file."):
        delta = {"type": "compaction_delta", "content": piece}
        events.insert(-3, {"type": "content_block_delta", "index": 0, "delta": delta})
    answer = anthropic_wire.decode_stream(events, endpoint="api.anthropic.com")
    block = answer.message.content[0]
    assert isinstance(block, Opaque) and block.kind == "compaction"
    assert json.loads(block.raw) == {"type": "compaction", "content": "Earlier, we read the file."}
    assert block.origin == Origin("anthropic", "api.anthropic.com", "claude-x")
    history = [Message.user("go"), answer.message, Message.user("on")]
    same = anthropic_wire.encode(
        Request(model="claude-x", endpoint="api.anthropic.com", messages=tuple(history)), CAPS
    )
    assert same.body["messages"][1]["content"][0] == json.loads(block.raw)
    other = anthropic_wire.encode(
        Request(model="claude-y", endpoint="api.anthropic.com", messages=tuple(history)), CAPS
    )
    assert [(d.index, d.kind, d.block) for d in other.downgrades] == [(1, "opaque", 0)]


def test_a_mid_conversation_system_message_goes_as_role_system() -> None:
    history = (
        Message.user("hi"),
        Message.assistant([Text("hello")]),
        Message("system", (Text("Answer in French from now on."),)),
        Message.user("and now?"),
    )
    encoded = anthropic_wire.encode(Request(model="m", messages=history), CAPS)
    sdk_check(encoded.body)
    assert encoded.body["messages"][2] == {
        "role": "system",
        "content": [{"type": "text", "text": "Answer in French from now on."}],
    }
    assert encoded.downgrades == ()


def test_an_anthropic_file_with_a_system_message_reads_as_anthropic(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    call = {"type": "tool_use", "id": "t1", "name": "look", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "seen"}
    messages = [
        {"role": "user", "content": "look"},
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    path.write_text(json.dumps({"messages": messages}))
    imported = read_messages_file(path)
    assert imported.format == "anthropic"
    assert imported.messages[1] == Message("system", (Text("Be brief."),))
    assert imported.messages[2].tool_uses() == [ToolUse("t1", "look", {})]


# -- OpenRouter -----------------------------------------------------------------------


def test_openrouter_reasoning_details_streamed_in_pieces_keep_text_and_signature() -> None:
    def chunk(details: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": {"reasoning_details": details}, "finish_reason": finish}
        return {"model": "anthropic/claude-sonnet-4.5", "choices": [choice]}

    piece = {"type": "reasoning.text", "index": 0, "format": "anthropic-claude-v1"}
    stream = [
        chunk([{**piece, "text": "First "}]),
        chunk([{**piece, "text": "second."}]),
        chunk([{**piece, "signature": "SIG-WHOLE"}], "stop"),
        "[DONE]",
    ]
    answer = openai_wire.decode_stream(stream, endpoint="openrouter.ai")
    [detail] = [b for b in answer.message.content if isinstance(b, Opaque)]
    assert json.loads(detail.raw) == {**piece, "text": "First second.", "signature": "SIG-WHOLE"}
    assert answer.message.thinking() == "First second."


# -- Gemini ---------------------------------------------------------------------------


def test_the_gemini_importer_reads_snake_case_parts() -> None:
    contents = [
        {
            "role": "user",
            "parts": [
                {
                    "file_data": {
                        "mime_type": "image/png",
                        "file_uri": "https://generativelanguage.googleapis.com/v1beta/files/abc",
                    }
                }
            ],
        },
        {
            "role": "model",
            "parts": [
                {
                    "function_call": {"name": "look", "args": {"snake_key": 1}},
                    "thought_signature": "U0lH",
                }
            ],
        },
        {
            "role": "user",
            "parts": [{"function_response": {"name": "look", "response": {"output": "ok"}}}],
        },
    ]
    _, history = gemini_wire.decode_messages(contents)
    image = history[0].content[0]
    assert isinstance(image, Image) and image.url is not None and image.url.endswith("files/abc")
    [call] = history[1].tool_uses()
    assert (call.name, call.input, call.signature) == ("look", {"snake_key": 1}, "U0lH")
    result = history[2].content[0]
    assert isinstance(result, ToolResult) and (result.tool_use_id, result.content) == (
        call.id,
        "ok",
    )
    # Each keeps how it was written (snake_case, no id), for this wire alone.
    assert call.spelling is not None and result.spelling is not None
    assert call.spelling.form.split() == ["function_call", "thought_signature", "no_id"]
    assert result.spelling.form.split() == ["function_response", "no_id"]
    validate_history(history)


def test_a_gemini_function_response_keeps_the_images_in_its_parts() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "shoot"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "shot", "args": {}}}]},
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "shot",
                        "response": {"output": "taken"},
                        "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG_B64}}],
                    }
                }
            ],
        },
    ]
    _, history = gemini_wire.decode_messages(contents)
    result, image = history[2].content
    assert isinstance(result, ToolResult) and result.content == "taken"
    assert image == Image("image/png", PNG_B64)
    validate_history(history)


def test_model_armor_is_a_refusal() -> None:
    answer = gemini_wire.decode_response(
        {"candidates": [{"finishReason": "MODEL_ARMOR"}], "modelVersion": "gemini-3-pro-preview"}
    )
    assert answer.stop_reason == "refusal" and answer.refusal is not None


def test_gemini_arguments_streamed_as_partial_args_make_one_whole_call() -> None:
    def chunk(call: dict[str, Any], **extra: Any) -> dict[str, Any]:
        part = {"functionCall": call, **extra}
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}}],
            "modelVersion": "gemini-3-pro-preview",
        }

    stream = [
        chunk(
            {
                "name": "book",
                "partialArgs": [{"jsonPath": "$.city", "stringValue": "Bos", "willContinue": True}],
                "willContinue": True,
            },
            thoughtSignature="U0lH",
        ),
        chunk(
            {
                "partialArgs": [
                    {"jsonPath": "$.city", "stringValue": "ton"},
                    {"jsonPath": "$.nights", "numberValue": 2},
                    {"jsonPath": "$.tags[0]", "stringValue": "quiet"},
                ],
                "willContinue": True,
            }
        ),
        chunk({"willContinue": False}),
        {"candidates": [{"finishReason": "STOP"}]},
    ]
    answer = gemini_wire.decode_stream(stream, endpoint="aiplatform.googleapis.com")
    [call] = answer.message.tool_uses()
    assert (call.name, call.input) == ("book", {"city": "Boston", "nights": 2, "tags": ["quiet"]})
    assert call.signature == "U0lH"
    assert answer.stop_reason == "tool_use"


# -- Responses ------------------------------------------------------------------------


def test_an_empty_user_message_between_a_call_and_its_output_imports_valid() -> None:
    items = [
        {"type": "message", "role": "user", "content": "look"},
        {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{}"},
        {"type": "message", "role": "user", "content": ""},
        {"type": "function_call_output", "call_id": "call_1", "output": "seen"},
    ]
    _, history = responses_wire.decode_messages(items)
    validate_history(history)
    assert history[2].content == (ToolResult("call_1", "seen"),)


def test_an_image_inside_a_function_call_output_imports_after_the_result() -> None:
    output = [
        {"type": "input_text", "text": "the screen"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}"},
    ]
    items = [
        {"type": "message", "role": "user", "content": "shoot"},
        {"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": output},
    ]
    _, history = responses_wire.decode_messages(items)
    assert history[2].content == (ToolResult("call_1", "the screen"), Image("image/png", PNG_B64))
    validate_history(history)


def test_a_compaction_item_is_kept_for_its_origin_and_named_elsewhere() -> None:
    body = {
        "id": "resp_1",
        "model": "gpt-5",
        "status": "completed",
        "output": [
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC-COMPACTED"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ],
    }
    answer = responses_wire.decode_response(body, endpoint="api.openai.com")
    block = answer.message.content[0]
    assert isinstance(block, Opaque) and block.kind == "compaction"
    assert block.origin == Origin("responses", "api.openai.com", "gpt-5")
    history = (Message.user("go"), answer.message, Message.user("on"))
    same = responses_wire.encode(
        Request(model="gpt-5", endpoint="api.openai.com", messages=history), CAPS
    )
    check_responses_request(same.body)
    assert json.loads(block.raw) in same.body["input"]
    other = responses_wire.encode(
        Request(model="gpt-5", endpoint="example.org", messages=history), CAPS
    )
    assert "ENC-COMPACTED" not in json.dumps(other.body)
    assert [(d.index, d.kind, d.block) for d in other.downgrades] == [(1, "opaque", 0)]


# -- the flat form --------------------------------------------------------------------


def test_the_flat_form_writes_an_image_held_by_url_as_its_url() -> None:
    image = Image.from_url("https://example.com/cat.png")
    history = [Message.user("see", [image])]
    flat = to_flat(history)
    assert "https://example.com/cat.png" in json.dumps(flat)
    assert "data:image/png;base64," not in json.dumps(flat)
    _, back = from_flat(
        flat, load_image=lambda target: (_ for _ in ()).throw(AssertionError(target))
    )
    assert back == history


def test_the_flat_form_round_trips_origins_opaque_redacted_and_system_messages() -> None:
    made = Origin("anthropic", "api.anthropic.com", "claude-x-20250929", requested="claude-x")
    history = [
        Message.user("go"),
        Message.assistant(
            [
                Thinking("plan", "SIG", made),
                RedactedThinking("ENCRYPTED", made),
                Opaque("server_tool_use", '{"type":"server_tool_use"}', made, "[search]"),
                Text("looking"),
                ToolUse("c1", "look", {}, "CALLSIG", made),
            ]
        ),
        Message.tool_results([ToolResult("c1", "seen")]),
        Message("system", (Text("be brief"),)),
        Message.user("so?"),
    ]
    system, back = from_flat(to_flat(history, system="You help."), load_image=None)
    assert system == "You help."
    assert back == history

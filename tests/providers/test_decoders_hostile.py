"""Hostile wire answers: what every decoder must refuse or repair where it enters.

A call id used twice (or empty) would leave the session unable to send again;
NaN is no JSON any wire carries; a lone surrogate is text no stream can
write. Each is met at the decoder, never in the next request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Message, Text, ToolUse, block_to_dict
from carryall.errors import BlockError, ProviderError, TranscriptError
from carryall.interchange import read_messages_file
from carryall.providers import anthropic, bedrock, gemini, openai, prompt, responses
from tests.support.streams import body_of, chunk, fragment, stream_of

LONE = "\ud800"


def _anthropic_calls(*ids: str, raw: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [
        {"type": "tool_use", "id": i, "name": "read_file", "input": {"path": "a"}} for i in ids
    ]
    if raw is not None:
        blocks[0]["raw"] = raw
    return body_of(blocks, stop_reason="tool_use")


def _openai_body(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def _openai_call(call_id: str, args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": args}}


def _encodable(message: Message) -> None:
    from carryall.blocks import block_to_dict

    json.dumps([block_to_dict(b) for b in message.content], ensure_ascii=False).encode("utf-8")


# -- duplicate and empty tool call ids ---------------------------------------------------


@pytest.mark.parametrize("ids", [("dup", "dup"), ("",)], ids=["duplicate", "empty"])
def test_anthropic_response_with_duplicate_or_empty_tool_use_id_is_refused(
    ids: tuple[str, ...],
) -> None:
    with pytest.raises(ProviderError, match=r"used twice|empty id"):
        anthropic.decode_response(_anthropic_calls(*ids))


@pytest.mark.parametrize("ids", [("dup", "dup"), ("",)], ids=["duplicate", "empty"])
def test_anthropic_stream_with_duplicate_or_empty_tool_use_id_is_refused(
    ids: tuple[str, ...],
) -> None:
    with pytest.raises(ProviderError, match=r"used twice|empty id"):
        anthropic.decode_stream(stream_of(_anthropic_calls(*ids)))


# -- NaN and Infinity in Anthropic tool input ---------------------------------------------


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_anthropic_nan_in_tool_input_body_is_refused(constant: str) -> None:
    body = json.loads(
        json.dumps(_anthropic_calls("c1")).replace('"path": "a"', f'"n": {constant}'),
    )
    with pytest.raises(ProviderError, match="NaN or Infinity"):
        anthropic.decode_response(body)


@pytest.mark.parametrize("constant", ["NaN", "Infinity"])
def test_anthropic_nan_in_partial_json_is_malformed_as_for_openai(constant: str) -> None:
    raw = f'{{"n": {constant}}}'
    response = anthropic.decode_stream(stream_of(_anthropic_calls("c1", raw=raw)))
    assert response.malformed_tool_args == 1
    assert response.message.tool_uses() == [ToolUse("c1", "read_file", raw)]
    openai_response = openai.decode_response(
        _openai_body(
            {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1", raw)]}
        )
    )
    assert openai_response.malformed_tool_args == 1


# -- lone surrogates ----------------------------------------------------------------------


def test_lone_surrogate_in_anthropic_response_and_stream_is_repaired() -> None:
    body = body_of(
        [
            {"type": "text", "text": f"a{LONE}b"},
            {"type": "tool_use", "id": "c1", "name": "read_file", "input": {LONE: f"x{LONE}"}},
        ],
        stop_reason="tool_use",
    )
    for response in (anthropic.decode_response(body), anthropic.decode_stream(stream_of(body))):
        _encodable(response.message)
        assert response.message.text() == "a\ufffdb"
        assert response.message.tool_uses()[0].input == {"\ufffd": "x\ufffd"}


def test_lone_surrogate_in_openai_response_and_stream_is_repaired() -> None:
    args = json.dumps({"path": LONE})  # written as the escape \ud800, as a server would
    body = _openai_body(
        {"role": "assistant", "content": f"a{LONE}", "tool_calls": [_openai_call("c1", args)]}
    )
    stream = [
        chunk({"role": "assistant", "content": f"a{LONE}"}),
        chunk({"tool_calls": [fragment(0, id="c1", name="read_file", args=args)]}),
        chunk(finish="tool_calls"),
    ]
    for response in (openai.decode_response(body), openai.decode_stream(stream)):
        _encodable(response.message)
        assert response.message.tool_uses()[0].input == {"path": "\ufffd"}


def test_lone_surrogate_in_prompt_mode_answer_is_repaired() -> None:
    response = prompt.decode_response(_openai_body({"role": "assistant", "content": f"hi{LONE}"}))
    _encodable(response.message)
    assert "\ufffd" in response.message.text()


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_lone_surrogate_in_an_imported_file_is_repaired(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "history.json"
    messages = [{"role": "user", "content": f"hello {LONE}"}]
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")  # \ud800 escaped
    imported = read_messages_file(path, fmt)  # type: ignore[arg-type]
    assert imported.messages[0].text() == "hello \ufffd"
    _encodable(imported.messages[0])


def test_nan_in_an_imported_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text('{"messages": [{"role": "user", "content": "x", "n": NaN}]}')
    with pytest.raises(TranscriptError, match="NaN is not JSON"):
        read_messages_file(path, "openai")


@pytest.mark.parametrize("codec", [openai, anthropic], ids=["openai", "anthropic"])
def test_lone_surrogate_in_decode_messages_is_repaired(codec: Any) -> None:
    system, history = codec.decode_messages(
        [{"role": "user", "content": f"hi {LONE}"}], system=f"be {LONE}"
    )
    assert system == "be \ufffd" and history[0].text() == "hi \ufffd"


# -- found by the long fuzz run (benchmarks/fuzz_decoders.py) ------------------------------


def test_fuzz_lone_surrogate_in_an_anthropic_native_block_is_repaired() -> None:
    # A provider-native block is kept whole as an Opaque: its raw JSON, its
    # kind and its line must be writable, not a UnicodeEncodeError.
    body = _raw_body(
        [
            {"type": f"server_{LONE}", "text": None},
            {"type": "web_search_tool_result", "content": {LONE: f"x{LONE}"}},
            {"type": "text", "text": "done"},
        ]
    )
    response = anthropic.decode_response(body)
    _encodable(response.message)
    kinds = [getattr(b, "kind", None) for b in response.message.content]
    assert kinds[:2] == ["server_\ufffd", "web_search_tool_result"]


@pytest.mark.parametrize("kind", [[None, {}], {"a": 1}], ids=["array", "object"])
def test_fuzz_an_unhashable_anthropic_block_type_is_refused_by_name(kind: Any) -> None:
    body = _raw_body([{"type": kind, "text": "x"}])
    with pytest.raises(ProviderError, match=r"content\[0\]\.type: expected a block type string"):
        anthropic.decode_response(body)
    start = {"type": "message_start", "message": {**body, "content": []}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": kind}}
    with pytest.raises(ProviderError):
        anthropic.decode_stream([start, block, {"type": "message_stop"}])


def _raw_body(content: list[dict[str, Any]]) -> dict[str, Any]:
    # Not checked against the SDK's types: what a fuzzer (or a broken proxy) sends.
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": content,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


# Found by benchmarks/fuzz_decoders.py's Responses and Gemini targets.


def test_lone_surrogate_in_an_encrypted_responses_reasoning_item_is_repaired() -> None:
    # The item is kept whole as an Opaque block's raw JSON: every string of a
    # block is repaired, not only its text.
    item = {"type": "reasoning", "id": f"rs{LONE}", "summary": [], "encrypted_content": "ENC"}
    body = {"id": "r", "model": f"gpt{LONE}", "status": "completed", "output": [item]}
    message = responses.decode_response(body).message
    _encodable(message)
    (opaque,) = message.content
    assert json.loads(opaque.raw)["id"] == "rs\ufffd"  # type: ignore[union-attr]
    assert opaque.origin is not None and opaque.origin.model == "gpt\ufffd"  # type: ignore[union-attr]


def test_lone_surrogate_in_a_gemini_signature_is_repaired() -> None:
    part = {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": f"c2{LONE}"}
    body = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]}
    message = gemini.decode_response(body).message
    _encodable(message)
    assert message.tool_uses()[0].signature == "c2\ufffd"


def test_lone_surrogate_in_gemini_and_responses_decode_messages_is_repaired() -> None:
    call = {"functionCall": {"name": "read_file", "args": {LONE: "a"}}}
    system, history = gemini.decode_messages(
        [{"role": "model", "parts": [call]}], system={"parts": [{"text": LONE}]}
    )
    assert system == "\ufffd" and history[0].tool_uses()[0].input == {"\ufffd": "a"}
    system, history = responses.decode_messages(
        [{"role": "user", "content": f"hi {LONE}"}], system=f"be {LONE}"
    )
    assert system == "be \ufffd" and history[0].text() == "hi \ufffd"


@pytest.mark.parametrize("kind", ["image", "document"])
@pytest.mark.parametrize("shape", [["png"], {"png": 1}])
def test_fuzz_an_unhashable_bedrock_media_format_is_refused_by_name(kind: str, shape: Any) -> None:
    part = {kind: {"format": shape, "source": {"bytes": "aGk="}}}
    messages = [{"role": "user", "content": [part]}]
    with pytest.raises(BlockError, match=rf"messages\[0\]\.content\[0\]\.{kind}\.format must be"):
        bedrock.decode_messages(messages)
    result = {"toolResult": {"toolUseId": "t1", "content": [part]}}
    with pytest.raises(BlockError, match=rf"toolResult\.content\[0\]\.{kind}\.format must be"):
        bedrock.decode_messages([{"role": "user", "content": [result]}])


def test_fuzz_lone_surrogates_in_an_imported_bedrock_history_are_repaired() -> None:
    messages = [
        {"role": "user", "content": [{"text": "a\ud800b"}, {"video": {"format": "\udfff"}}]},
        {"role": "assistant", "content": [{"text": "c\udfffd"}, {"cachePoint": {"t": "\ud800"}}]},
    ]
    system, history = bedrock.decode_messages(messages, system=[{"text": "s\ud800"}])
    assert system == "s\ufffd"
    for message in history:
        # Every string a block holds, raw JSON of the native blocks included, can be written.
        json.dumps([block_to_dict(b) for b in message.content], ensure_ascii=False).encode()
    assert history[0].content[0] == Text("a\ufffdb")
    assert history[1].content[0] == Text("c\ufffdd")

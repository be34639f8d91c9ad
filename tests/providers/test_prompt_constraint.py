"""Prompt mode on llama-server holds an answer to the calls-or-response schema only when
a request offers tools; a plain request goes, and is read, as free text."""

from __future__ import annotations

from typing import Any

import pytest

from carryall.blocks import Message, Text
from carryall.providers import Capabilities, Request, ToolSpec
from carryall.providers.codec import Codec, openai_codec, responses_codec

PROMPT_MODE = Capabilities(vision=False, native_tools=False)
TOOL = ToolSpec(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)


def _request(tools: tuple[ToolSpec, ...] = (), tool_choice: Any = None) -> Request:
    return Request(
        model="m",
        messages=(Message.user("Show me a JSON object."),),
        tools=tools,
        tool_choice=tool_choice,
    )


def _chunk(content: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


LLAMA_CODECS = [
    pytest.param(openai_codec(PROMPT_MODE, "llama-server"), id="chat-completions"),
    pytest.param(responses_codec(PROMPT_MODE, llama=True), id="responses"),
]


@pytest.mark.parametrize("codec", LLAMA_CODECS)
def test_a_request_without_tools_carries_no_schema(codec: Codec) -> None:
    plain = _request()
    body = codec.for_request(plain).encode(plain)
    assert "response_format" not in body and "text" not in body
    # Tools offered, even with tool_choice "none" (the schema is then what
    # holds a small model to an answer without calls): the schema goes.
    for offered in (_request((TOOL,)), _request((TOOL,), "none")):
        assert codec.for_request(offered) is codec
        body = codec.encode(offered)
        assert "response_format" in body or "format" in str(body.get("text"))


def test_a_server_without_a_schema_needs_no_second_codec() -> None:
    codec = openai_codec(PROMPT_MODE, "openai")
    assert codec.for_request(_request()) is codec
    assert "response_format" not in codec.encode(_request((TOOL,)))


def test_a_plain_answer_that_starts_with_a_brace_streams_as_text() -> None:
    # Read as a constrained answer, text beginning with "{" would wait to be
    # seen as JSON of calls or a response, and nothing would be shown.
    codec = openai_codec(PROMPT_MODE, "llama-server").for_request(_request())
    decoder = codec.stream_decoder()
    shown = [decoder.feed(_chunk(part)) for part in ('{"name": ', '"lamp", ', '"lit": true}')]
    decoder.feed(_chunk(None, "stop"))
    decoder.feed("[DONE]")
    assert "".join(shown) == '{"name": "lamp", "lit": true}'
    assert shown[0]  # shown as it came, not held to the end
    response = decoder.response()
    assert response.message.content == (Text('{"name": "lamp", "lit": true}'),)
    assert response.stop_reason == "end_turn"

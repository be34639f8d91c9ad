"""SPEC §5 prompt mode on the OpenAI wire (`carryall.providers.prompt`).

Every request built here is checked against the official SDK's request type,
`CompletionCreateParamsNonStreaming`, with every lazily validated iterable
consumed (pydantic validates the SDK's `Iterable[...]` fields only when they
are iterated) and the validated value required to equal the input, so a key
the SDK does not know fails. The llama-server extras (`chat_template_kwargs`,
assistant `reasoning_content`) are taken off first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carryall.blocks import Message, Text, Thinking, ToolResult, ToolUse
from carryall.carrier import Marker, MarkerKind, parse_prompt_tool_carrier
from carryall.errors import HistoryError, ProviderError
from carryall.providers import Capabilities, Dialect, Request, Response, ToolSpec
from carryall.providers.calling_convention import parse_tool_calls
from carryall.providers.prompt import (
    SCHEMA_NAME,
    StreamDecoder,
    decode_response,
    encode_request,
    response_schema,
)
from carryall.providers.results_body import parse_results_body
from tests.support.goldens import (
    GOLDENS,
    PARALLEL_ROUND_WITH_IMAGE,
    SIGNED_THINKING,
    TOOLS,
    PNG_1x1,
)
from tests.support.sdk_openai import check_openai_request

VISION = Capabilities(vision=True, native_tools=False)
BLIND = Capabilities(vision=False, native_tools=False)
DIALECTS: tuple[Dialect, ...] = ("openai", "llama-server")

# -- the SDK check ----------------------------------------------------------------


def check_sdk(body: Mapping[str, Any]) -> None:
    check_openai_request(body)


def request(history: list[Message], **options: Any) -> Request:
    options.setdefault("tools", TOOLS)
    return Request(model="smollm2", messages=tuple(history), **options)


def texts_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content if part["type"] == "text"]


# -- goldens: every history, both dialects, with and without eyes and constraint --


@pytest.mark.parametrize("name", sorted(GOLDENS))
@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("caps", [VISION, BLIND], ids=["vision", "blind"])
@pytest.mark.parametrize("constrained", [False, True], ids=["free", "constrained"])
def test_golden_encodes_as_plain_messages_the_sdk_accepts(
    name: str, dialect: Dialect, caps: Capabilities, constrained: bool
) -> None:
    history = GOLDENS[name]
    body = encode_request(
        request(history, system="Be brief."), caps, dialect=dialect, constrained=constrained
    )
    check_sdk(body)
    assert "tools" not in body and "tool_choice" not in body
    wire = body["messages"]
    assert wire[0]["role"] == "system" and wire[0]["content"].startswith("Be brief.\n\n# Tools")
    assert [m["role"] for m in wire[1:]] == [m.role for m in history]
    for message, sent in zip(history, wire[1:], strict=True):
        assert "tool_calls" not in sent
        for text in texts_of(sent["content"]):
            assert "data:" not in text, "an image's bytes went into text"
        if message.role == "assistant":
            check_assistant(message, sent["content"], constrained)
        elif message.tool_results_in():
            check_round(message, sent["content"], caps)
    if constrained:
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == SCHEMA_NAME
    else:
        assert "response_format" not in body


def check_assistant(message: Message, content: Any, constrained: bool) -> None:
    assert isinstance(content, str)
    calls = [(c.name, c.input) for c in message.tool_uses()]
    if constrained:
        value = json.loads(content)
        if calls:
            assert value == {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}
        else:
            assert value == {"response": message.text()}
    else:
        parsed = parse_tool_calls(content)
        assert [(c.name, c.input) for c in parsed.calls] == calls
        assert parsed.text == message.text()


def check_round(message: Message, content: Any, caps: Capabilities) -> None:
    text_parts = texts_of(content)
    parts = parse_prompt_tool_carrier(text_parts[0])
    assert parts is not None and parts.declared
    results = message.tool_results_in()
    assert parse_results_body(parts.text) == [
        ToolResult(r.tool_use_id, r.content, r.is_error) for r in results
    ]
    images = message.images()
    if caps.vision:
        assert len(parts.attachments) == len(images)
        assert isinstance(content, list) or not images
        image_parts = [p for p in content if p["type"] == "image_url"] if images else []
        assert len(image_parts) == len(images)
        if images:
            # The images come after the carrier text, in declaration order.
            assert content[0]["type"] == "text"
            assert [p["image_url"]["url"] for p in image_parts] == [i.data_uri() for i in images]
    else:
        assert parts.attachments == ()
        for image in images:
            assert image.placeholder() in text_parts


def test_golden_parallel_round_is_pinned_on_llama_server() -> None:
    body = encode_request(request(PARALLEL_ROUND_WITH_IMAGE), VISION, dialect="llama-server")
    wire = body["messages"]
    assert wire[1:] == [
        {"role": "user", "content": "Read notes.txt and take a screenshot of the editor."},
        {
            "role": "assistant",
            "content": "I'll do both.\n\n"
            '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "screenshot", "arguments": {"window": "editor"}}\n</tool_call>',
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "[Tool results]\n[Tool attachments: 1]\n[IMAGE:shot.png]\n"
                    "[Result 1/2 tool=read_file id=call_1 ok chars=8]\nbuy milk\n\n"
                    "[Result 2/2 tool=screenshot id=call_2 ok chars=16]\nscreenshot taken",
                },
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64," + SHOT_B64},
                },
            ],
        },
        {"role": "assistant", "content": "The notes say to buy milk; the editor is shown."},
        {"role": "user", "content": "Thanks."},
    ]
    assert body["max_tokens"] == 4096
    assert set(body) == {"model", "messages", "max_tokens"}


SHOT_B64 = PARALLEL_ROUND_WITH_IMAGE[2].images()[0].data


def test_golden_parallel_round_on_a_blind_model_names_the_image_after_the_carrier() -> None:
    body = encode_request(request(PARALLEL_ROUND_WITH_IMAGE), BLIND)
    content = body["messages"][3]["content"]
    assert content[0]["text"].startswith("[Tool results]\n[Tool attachments: 0]\n[Result 1/2")
    assert content[1] == {"type": "text", "text": "[image: shot.png (image/png)]"}


def test_golden_error_result_is_flagged_in_its_section_header() -> None:
    body = encode_request(request(GOLDENS["error_result"]), BLIND)
    assert body["messages"][3]["content"] == (
        "[Tool results]\n[Tool attachments: 0]\n"
        "[Result 1/1 tool=read_file id=call_9 error chars=25]\nno such file: missing.txt"
    )


def test_thinking_goes_back_as_reasoning_content_on_llama_server_only() -> None:
    caps = Capabilities(vision=False, native_tools=False, thinking=True)
    llama = encode_request(request(SIGNED_THINKING), caps, dialect="llama-server")
    assert llama["messages"][2]["reasoning_content"] == (
        "The user wants arithmetic; I will read the file."
    )
    assert llama["chat_template_kwargs"] == {"enable_thinking": False}
    openai = encode_request(request(SIGNED_THINKING), caps, dialect="openai")
    assert all("reasoning_content" not in m for m in openai["messages"])
    assert all("arithmetic" not in str(m["content"]) for m in openai["messages"])


def test_the_system_prompt_is_the_request_system_then_the_tool_description() -> None:
    body = encode_request(request(GOLDENS["ends_in_tool_round"], system="S."), BLIND)
    system = body["messages"][0]["content"]
    assert system.startswith("S.\n\n# Tools\n")
    assert "<tool_call>" in system and "### read_file" in system
    without = encode_request(request(GOLDENS["ends_in_tool_round"], tools=()), BLIND)
    assert without["messages"][0]["role"] == "user"


def test_image_names_never_carry_bytes_and_stay_distinct() -> None:
    from carryall.blocks import Image

    images = [
        Image.from_bytes("image/png", PNG_1x1, "a.png"),
        Image.from_bytes("image/png", PNG_1x1, "a.png"),
        Image.from_bytes("image/png", PNG_1x1, "data:image/png;base64,AAAA"),
        Image.from_bytes("image/png", PNG_1x1, "bad]name"),
        Image.from_bytes("image/png", PNG_1x1, "two\nlines"),
        Image.from_bytes("image/png", PNG_1x1),
    ]
    history = [
        Message.user("Shots."),
        Message.assistant([ToolUse("c1", "screenshot", {"window": "all"})]),
        Message.tool_results([ToolResult("c1", "six shots")], images),
    ]
    body = encode_request(request(history), VISION)
    content = body["messages"][3]["content"]
    parts = parse_prompt_tool_carrier(content[0]["text"])
    assert parts is not None
    assert [m.target for m in parts.attachments] == [
        "a.png",
        "image-2",
        "image-3",
        "bad]name",  # a bracket is the target's own (upstream's marker rule)
        "image-5",
        "image-6",
    ]
    assert all(m.kind is MarkerKind.IMAGE for m in parts.attachments)
    assert [p["type"] for p in content] == ["text"] + ["image_url"] * 6


def test_non_image_attachments_of_a_result_have_no_wire() -> None:
    history = [
        Message.user("Go."),
        Message.assistant([ToolUse("c1", "read_file", {"path": "a"})]),
        Message.tool_results(
            [ToolResult("c1", "ok", attachments=(Marker(MarkerKind.AUDIO, "a.wav"),))]
        ),
    ]
    content = encode_request(request(history), VISION)["messages"][3]["content"]
    assert "a.wav" not in content and "[Tool attachments: 0]" in content


def test_a_history_ending_on_an_assistant_turn_is_refused_on_llama_server() -> None:
    history = [Message.user("Hi."), Message.assistant([Text("Hello.")])]
    with pytest.raises(HistoryError):
        encode_request(request(history), BLIND, dialect="llama-server")


def test_a_broken_history_is_refused_before_anything_is_built() -> None:
    history = [Message.user("Hi."), Message.assistant([ToolUse("c1", "read_file", {})])]
    with pytest.raises(HistoryError):
        encode_request(request(history), BLIND)


def test_an_unknown_tool_choice_is_a_provider_error() -> None:
    with pytest.raises(ProviderError):
        encode_request(request([Message.user("Hi.")], tool_choice="maybe"), BLIND)


def test_a_call_input_that_is_not_json_is_a_history_error() -> None:
    history = [
        Message.user("Hi."),
        Message.assistant([ToolUse("c1", "read_file", {"x": float("nan")})]),
        Message.tool_results([ToolResult("c1", "ok")]),
    ]
    with pytest.raises(HistoryError):
        encode_request(request(history), BLIND, constrained=True)


def test_malformed_calls_in_the_history_go_back_as_the_model_wrote_them() -> None:
    raw = '{"name": "read_file", "arguments": {"path": }'
    history = [
        Message.user("Read a."),
        Message.assistant([ToolUse("c1", "read_file", raw)]),
        Message.tool_results([ToolResult("c1", "arguments are not valid JSON", True)]),
    ]
    content = encode_request(request(history), BLIND)["messages"][2]["content"]
    assert content == f"<tool_call>\n{raw}\n</tool_call>"


# -- the constrained schema --------------------------------------------------------


def test_constrained_schema_admits_real_calls_or_a_response() -> None:
    schema = response_schema(TOOLS)
    calls_branch, response_branch = schema["anyOf"]
    assert response_branch == {
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
        "additionalProperties": False,
    }
    items = calls_branch["properties"]["tool_calls"]
    assert items["type"] == "array" and items["minItems"] == 1
    assert [entry["properties"]["name"] for entry in items["items"]["anyOf"]] == [
        {"const": "read_file"},
        {"const": "screenshot"},
    ]
    assert [entry["properties"]["arguments"] for entry in items["items"]["anyOf"]] == [
        tool.input_schema for tool in TOOLS
    ]
    assert all(e["additionalProperties"] is False for e in items["items"]["anyOf"])


def test_tool_choice_narrows_the_constrained_schema() -> None:
    assert set(response_schema(TOOLS, "none")["properties"]) == {"response"}
    assert set(response_schema(TOOLS, "required")["properties"]) == {"tool_calls"}
    assert set(response_schema(())["properties"]) == {"response"}
    single = response_schema(TOOLS[:1])
    entry = single["anyOf"][0]["properties"]["tool_calls"]["items"]
    assert entry["properties"]["name"] == {"const": "read_file"}


def test_constrained_with_tool_choice_none_says_so_and_allows_only_a_response() -> None:
    body = encode_request(
        request([Message.user("Hi.")], tool_choice="none"), BLIND, constrained=True
    )
    check_sdk(body)
    assert "Do not call any tool" in body["messages"][0]["content"]
    schema = body["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"response"}


def test_a_tool_schemas_local_refs_are_rebased_into_the_combined_schema() -> None:
    spec = ToolSpec(
        name="move",
        description="Move a point.",
        input_schema={
            "type": "object",
            "properties": {
                "to": {"$ref": "#/$defs/Point"},
                "again": {"$ref": "#"},
                "tag": {"const": {"$ref": "#/not/a/ref"}},
            },
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        },
    )
    schema = response_schema([spec])
    entry = schema["anyOf"][0]["properties"]["tool_calls"]["items"]
    assert entry["properties"]["arguments"] == {"$ref": "#/$defs/tool0"}
    moved = schema["$defs"]["tool0"]
    assert moved["properties"]["to"] == {"$ref": "#/$defs/tool0/$defs/Point"}
    assert moved["properties"]["again"] == {"$ref": "#/$defs/tool0"}
    assert moved["properties"]["tag"] == {"const": {"$ref": "#/not/a/ref"}}
    # The rebased pointer resolves in the combined schema.
    node: Any = schema
    for key in ["$defs", "tool0", "$defs", "Point"]:
        node = node[key]
    assert node["properties"]["x"] == {"type": "integer"}


def test_a_tool_schema_nested_too_deeply_is_a_provider_error() -> None:
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(5000):
        deep = {"anyOf": [deep]}
    with pytest.raises(ProviderError, match="nested too deeply"):
        response_schema([ToolSpec("deep", "d", deep)])


# -- decoding ----------------------------------------------------------------------


def completion(content: Any, finish: str = "stop", **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "model": "smollm2",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }


def calls_of(response: Response) -> list[tuple[str, Any]]:
    return [(c.name, c.input) for c in response.message.tool_uses()]


def test_decode_reads_several_calls_and_the_prose() -> None:
    content = (
        "I'll do both.\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "screenshot", "arguments": {"window": "editor"}}\n</tool_call>'
    )
    response = decode_response(completion(content))
    assert response.stop_reason == "tool_use"
    assert response.message.content[0] == Text("I'll do both.")
    assert calls_of(response) == [
        ("read_file", {"path": "notes.txt"}),
        ("screenshot", {"window": "editor"}),
    ]
    assert response.malformed_tool_args == 0
    assert response.usage.input_tokens == 120 and response.usage.output_tokens == 30
    assert response.model == "smollm2"


def test_decode_reads_a_call_in_a_fence() -> None:
    content = 'Reading it.\n```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```'
    response = decode_response(completion(content))
    assert calls_of(response) == [("read_file", {"path": "a"})]
    assert response.message.text() == "Reading it."


def test_decode_counts_and_keeps_malformed_calls() -> None:
    content = (
        '<tool_call>{"name": "read_file", "arguments": {"path": }}</tool_call>'
        '<tool_call>{"name": "read_file", "arguments": {"path": "b"}}</tool_call>'
    )
    response = decode_response(completion(content))
    assert response.malformed_tool_args == 1
    assert response.stop_reason == "tool_use"
    bad, good = response.message.tool_uses()
    assert bad.name == "read_file" and isinstance(bad.input, str)
    assert good.input == {"path": "b"}


def test_decode_without_calls_is_the_end_of_the_turn() -> None:
    response = decode_response(completion("The notes say to buy milk."))
    assert response.stop_reason == "end_turn"
    assert response.message == Message.assistant([Text("The notes say to buy milk.")])


def test_decode_keeps_llama_server_reasoning_as_thinking_first() -> None:
    content = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    response = decode_response(completion(content, reasoning_content="Need a."))
    thinking = response.message.content[0]
    assert isinstance(thinking, Thinking)
    assert (thinking.text, thinking.signature) == ("Need a.", None)
    assert calls_of(response) == [("a", {})]


def test_decode_keeps_calls_a_server_parsed_itself() -> None:
    native = {"id": "srv1", "type": "function", "function": {"name": "a", "arguments": "{}"}}
    response = decode_response(completion(None, "tool_calls", tool_calls=[native]))
    assert calls_of(response) == [("a", {})] and response.stop_reason == "tool_use"


def test_call_ids_come_from_the_completion_id_and_are_stable() -> None:
    content = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    one = decode_response(completion(content)).message.tool_uses()[0].id
    assert one == decode_response(completion(content)).message.tool_uses()[0].id
    other = completion(content)
    other["id"] = "chatcmpl-xyz"
    assert decode_response(other).message.tool_uses()[0].id != one


def test_a_truncated_free_call_is_malformed_and_still_a_tool_use() -> None:
    response = decode_response(
        completion('<tool_call>\n{"name": "read_file", "arguments": {"pa', "length")
    )
    assert response.stop_reason == "tool_use" and response.malformed_tool_args == 1


def test_constrained_decode_reads_calls_from_the_json_object() -> None:
    content = json.dumps(
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "notes.txt"}},
                {"name": "screenshot", "arguments": {"window": "editor"}},
            ]
        }
    )
    response = decode_response(completion(content), constrained=True)
    assert response.stop_reason == "tool_use"
    assert calls_of(response) == [
        ("read_file", {"path": "notes.txt"}),
        ("screenshot", {"window": "editor"}),
    ]
    assert len({c.id for c in response.message.tool_uses()}) == 2


def test_constrained_decode_reads_the_response_text() -> None:
    content = '{"response": "Hello, \\u00e9t\\u00e9 \\ud83d\\ude00"}'
    response = decode_response(completion(content), constrained=True)
    assert response.message == Message.assistant([Text("Hello, été 😀")])
    assert response.stop_reason == "end_turn"


def test_constrained_decode_salvages_a_response_cut_short() -> None:
    response = decode_response(completion('{"response": "Half a sen', "length"), constrained=True)
    assert response.message.text() == "Half a sen" and response.stop_reason == "max_tokens"


def test_constrained_decode_reports_a_broken_call_entry() -> None:
    content = '{"tool_calls": [{"name": "read_file", "arguments": "a"}, {"name": "x"}]}'
    response = decode_response(completion(content), constrained=True)
    assert response.malformed_tool_args == 2
    assert [c.name for c in response.message.tool_uses()] == ["read_file", "x"]
    assert all(isinstance(c.input, str) for c in response.message.tool_uses())


def test_constrained_call_cut_by_the_token_limit_is_reported_not_called() -> None:
    content = '{"tool_calls": [{"name": "read_file", "arguments": {"path": "no'
    response = decode_response(completion(content, "length"), constrained=True)
    assert response.malformed_tool_args == 1
    assert response.stop_reason == "max_tokens"
    assert response.message.tool_uses() == []


def test_constrained_broken_call_not_cut_by_the_limit_is_a_malformed_call() -> None:
    content = '{"tool_calls": [{"name": "read_file", "arguments": {"path": "no'
    response = decode_response(completion(content), constrained=True)
    assert response.malformed_tool_args == 1
    (call,) = response.message.tool_uses()
    assert call.name == "read_file" and call.input == content


def test_constrained_decode_of_free_text_reads_it_the_unconstrained_way() -> None:
    content = 'Sure. <tool_call>{"name": "a", "arguments": {}}</tool_call>'
    response = decode_response(completion(content), constrained=True)
    assert calls_of(response) == [("a", {})] and response.message.text() == "Sure."


# -- streaming ---------------------------------------------------------------------


def chunks(content: str, size: int, *, reasoning: str = "") -> Iterator[dict[str, Any]]:
    yield {
        "id": "chatcmpl-s",
        "model": "smollm2",
        "choices": [{"index": 0, "delta": {"role": "assistant"}}],
    }
    if reasoning:
        yield {
            "id": "chatcmpl-s",
            "choices": [{"index": 0, "delta": {"reasoning_content": reasoning}}],
        }
    for start in range(0, len(content), size):
        piece = content[start : start + size]
        yield {"id": "chatcmpl-s", "choices": [{"index": 0, "delta": {"content": piece}}]}
    yield {"id": "chatcmpl-s", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    yield {"id": "chatcmpl-s", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}


def stream(content: str, size: int, constrained: bool = False) -> tuple[str, Response]:
    decoder = StreamDecoder(constrained=constrained)
    shown = "".join(decoder.feed(chunk) for chunk in chunks(content, size))
    return shown, decoder.response()


FREE_REPLIES = [
    "Just an answer.",
    'I\'ll read it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>',
    'Code:\n```python\nprint("<tool")\n```\n'
    'Now <tool_call>{"name": "a", "arguments": {}}</tool_call>',
    'Here:\n```json\n{"name": "read_file", "arguments": {"path": "a"}}\n```\n',
    'Config:\n```json\n{"debug": true}\n```\nThat is all.',
    '```\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n```',
    "A < b and c <tool_ d.",
]


@pytest.mark.parametrize("content", FREE_REPLIES)
@pytest.mark.parametrize("size", [1, 2, 7, 1000])
def test_stream_shows_prose_and_never_a_call(content: str, size: int) -> None:
    shown, response = stream(content, size)
    whole = decode_response(completion(content))
    assert calls_of(response) == calls_of(whole)
    assert response.message.text() == whole.message.text()
    assert "<tool_call>" not in shown and '"arguments"' not in shown
    # What is shown is the start of the prose (whitespace aside), never more.
    assert whole.message.text().replace("\n", "").startswith(shown.strip().replace("\n", ""))


def test_stream_shows_plain_prose_whole() -> None:
    shown, _ = stream("Just an answer.\nOn two lines.", 3)
    assert shown == "Just an answer.\nOn two lines."


def test_stream_shows_the_prose_before_the_first_call() -> None:
    content = 'Reading.\n<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    shown, response = stream(content, 4)
    assert shown == "Reading.\n"
    assert response.stop_reason == "tool_use"


def test_stream_shows_a_fence_that_turned_out_not_to_be_a_call() -> None:
    content = 'Config:\n```json\n{"debug": true}\n```\nDone.'
    shown, _ = stream(content, 2)
    assert shown == content


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_constrained_stream_shows_the_response_text(size: int) -> None:
    shown, response = stream('{ "response" : "Hi \\"you\\" \\u00e9\\ud83d\\ude00\\n" }', size, True)
    assert shown == 'Hi "you" é😀\n'
    assert response.message.text() == shown


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_constrained_stream_shows_nothing_for_calls(size: int) -> None:
    content = '{"tool_calls": [{"name": "a", "arguments": {"response": "no"}}]}'
    shown, response = stream(content, size, True)
    assert shown == ""
    assert calls_of(response) == [("a", {"response": "no"})]


def test_constrained_stream_of_free_text_falls_back_to_the_prose_view() -> None:
    shown, response = stream(
        'Plain. <tool_call>{"name": "a", "arguments": {}}</tool_call>', 3, True
    )
    assert shown == "Plain. "
    assert calls_of(response) == [("a", {})]


def test_stream_and_whole_decode_agree_on_ids_usage_and_thinking() -> None:
    content = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
    decoder = StreamDecoder()
    for chunk in chunks(content, 5, reasoning="Think."):
        decoder.feed(chunk)
    response = decoder.response()
    thinking = response.message.content[0]
    assert isinstance(thinking, Thinking)
    assert (thinking.text, thinking.signature) == ("Think.", None)
    assert response.usage.input_tokens == 9
    whole = completion(content)
    whole["id"] = "chatcmpl-s"
    assert response.message.tool_uses() == decode_response(whole).message.tool_uses()


def test_a_stream_error_chunk_is_a_provider_error() -> None:
    decoder = StreamDecoder()
    with pytest.raises(ProviderError, match="overloaded"):
        decoder.feed({"error": {"message": "overloaded", "type": "server_error", "code": 503}})


def test_a_stream_that_never_finishes_is_a_provider_error() -> None:
    decoder = StreamDecoder()
    decoder.feed({"id": "x", "choices": [{"index": 0, "delta": {"content": "<tool_call>"}}]})
    with pytest.raises(ProviderError, match="truncated"):
        decoder.response()


# -- hostile input -----------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        [],
        "nope",
        {},
        {"choices": []},
        {"choices": [{"message": "x"}]},
        {"choices": [{"message": {"content": 5}}]},
        {"error": {"message": "bad request", "code": 400}},
    ],
)
@pytest.mark.parametrize("constrained", [False, True])
def test_a_body_that_is_not_a_completion_is_a_provider_error(data: Any, constrained: bool) -> None:
    with pytest.raises(ProviderError):
        decode_response(data, constrained=constrained)


hostile_text = st.lists(
    st.sampled_from(
        [
            "<tool_call>",
            "</tool_call>",
            "```",
            "```json\n",
            "\n",
            "{",
            "}",
            "[",
            "]",
            '"',
            '"name"',
            '"arguments"',
            '"tool_calls"',
            '"response"',
            ":",
            ",",
            "\\",
            "\\u",
            "\\ud83d",
            "x",
            " ",
            "NaN",
            "null",
        ]
    ),
    max_size=40,
).map("".join)


@given(hostile_text, st.booleans(), st.integers(min_value=1, max_value=9))
@settings(max_examples=400, deadline=None)
def test_any_content_decodes_whole_or_streamed_without_crashing(
    content: str, constrained: bool, size: int
) -> None:
    whole = decode_response(completion(content), constrained=constrained)
    assert whole.malformed_tool_args <= len(whole.message.tool_uses())
    assert whole.message.content
    _, streamed = stream(content, size, constrained)
    assert calls_of(streamed) == calls_of(
        decode_response({**completion(content), "id": "chatcmpl-s"}, constrained=constrained)
    )


@given(st.text(), st.booleans())
@settings(max_examples=200, deadline=None)
def test_any_text_decodes_without_crashing(content: str, constrained: bool) -> None:
    decode_response(completion(content), constrained=constrained)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("constrained", [False, True])
def test_megabytes_streamed_in_small_chunks_stay_linear(constrained: bool) -> None:
    inner = "```json\n" + "x" * 2_000_000 if not constrained else '{"response": "' + "é" * 2_000_000
    decoder = StreamDecoder(constrained=constrained)
    for chunk in chunks(inner, 1000):
        decoder.feed(chunk)
    decoder.response()


def test_constrained_schema_narrows_a_chosen_path_to_an_enum() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "a file"}},
        "required": ["path"],
    }
    tool = ToolSpec("read_file", "Read a file.", schema, {"path": ("a.txt", "b.txt")})
    built = response_schema([tool])
    entry = built["anyOf"][0]["properties"]["tool_calls"]["items"]
    assert entry["properties"]["arguments"]["properties"]["path"] == {
        "type": "string",
        "description": "a file",
        "enum": ["a.txt", "b.txt"],
    }
    # The tool's own schema is untouched, and no choices means no enum.
    assert "enum" not in schema["properties"]["path"]
    open_entry = response_schema([ToolSpec("read_file", "Read a file.", schema)])
    assert (
        open_entry["anyOf"][0]["properties"]["tool_calls"]["items"]["properties"]["arguments"]
        == schema
    )

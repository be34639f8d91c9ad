"""SPEC §5: the OpenAI Chat Completions and llama-server codec (requests, responses, importer).

Every request built here is checked against the official SDK's own request
type, `CompletionCreateParamsNonStreaming`, by `check_openai_request`. That
check removes the llama-server extra keys first, exactly these:
`chat_template_kwargs` at the top level and `reasoning_content` on assistant
messages (the SDK's `extra_body` notion: keys a client sends beside the
typed ones). It then consumes every lazily validated iterable (pydantic
validates the SDK's `Iterable[...]` fields only when iterated), requires the
validated value to equal the input (so a key the SDK type does not know,
which pydantic would silently drop, fails), and requires every `image_url`
to be a `data:` URL of an allowlisted media type with a base64 payload (the
SDK types take any string there).
"""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from carryall.blocks import (
    IMAGE_MEDIA_TYPES,
    Block,
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    Spelling,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.carrier import Marker, MarkerKind
from carryall.errors import BlockError, HistoryError, ProviderError
from carryall.providers import Capabilities, Dialect, Request, ToolSpec
from carryall.providers.openai import (
    ERROR_PREFIX,
    decode_messages,
    decode_response,
    decode_stream,
    encode,
    encode_request,
    stream_body,
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
from tests.support.sdk_openai import NON_STREAMING, check_openai_request

DIALECTS: tuple[Dialect, ...] = ("openai", "llama-server")
VISION = Capabilities()
BLIND = Capabilities(vision=False)

# -- the SDK check ----------------------------------------------------------------


def test_check_rejects_a_tiff_image() -> None:
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/tiff;base64,AAAA"}}
                ],
            }
        ],
    }
    with pytest.raises(AssertionError, match="image/tiff"):
        check_openai_request(body)


@pytest.mark.parametrize(
    "tool_message",
    [
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url", "image_url": {}}]},
        {"role": "tool", "content": "no call id"},
        {"role": "tool", "tool_call_id": "c", "content": "x", "is_error": True},
    ],
    ids=["image-in-tool", "no-call-id", "unknown-key"],
)
def test_check_rejects_a_bad_tool_message(tool_message: dict[str, Any]) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}, tool_message]}
    with pytest.raises((ValidationError, AssertionError)):
        check_openai_request(body)


def test_unconsumed_sdk_validation_would_pass_a_bad_tool_message() -> None:
    # Why the check consumes every iterator: without it pydantic passes this.
    body = {"model": "m", "messages": [{"role": "tool", "content": [{"type": "image_url"}]}]}
    NON_STREAMING.validate_python(body)
    with pytest.raises(ValidationError):
        check_openai_request(body)


# -- goldens ----------------------------------------------------------------------

PNG_URL = SHOT.data_uri()
SYSTEM = "You are terse."
TOOLS_WIRE = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file from the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "screenshot",
            "description": "Take a screenshot of a window and show it.",
            "parameters": {
                "type": "object",
                "properties": {"window": {"type": "string"}},
                "required": ["window"],
            },
        },
    },
]


def request(history: list[Message], **options: Any) -> Request:
    return Request(model="m1", messages=tuple(history), system=SYSTEM, tools=TOOLS, **options)


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def limit(dialect: Dialect) -> dict[str, int]:
    return {"max_tokens" if dialect == "llama-server" else "max_completion_tokens": 4096}


PARALLEL_WIRE = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Read notes.txt and take a screenshot of the editor."},
    {
        "role": "assistant",
        "content": "I'll do both.",
        "tool_calls": [
            call("call_1", "read_file", '{"path":"notes.txt"}'),
            call("call_2", "screenshot", '{"window":"editor"}'),
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "buy milk"},
    {"role": "tool", "tool_call_id": "call_2", "content": "screenshot taken"},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG_URL}}]},
    {"role": "assistant", "content": "The notes say to buy milk; the editor is shown."},
    {"role": "user", "content": "Thanks."},
]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_parallel_round_puts_the_tool_image_in_a_user_message_after_the_results(
    dialect: Dialect,
) -> None:
    body = encode_request(request(PARALLEL_ROUND_WITH_IMAGE), VISION, dialect)
    assert body == {"model": "m1", "messages": PARALLEL_WIRE, **limit(dialect), "tools": TOOLS_WIRE}
    check_openai_request(body)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_parallel_round_on_a_blind_model_names_the_image(dialect: Dialect) -> None:
    body = encode_request(request(PARALLEL_ROUND_WITH_IMAGE), BLIND, dialect)
    expected = list(PARALLEL_WIRE)
    expected[5] = {"role": "user", "content": "[image: shot.png (image/png)]"}
    assert body == {"model": "m1", "messages": expected, **limit(dialect), "tools": TOOLS_WIRE}
    check_openai_request(body)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_error_result_says_so_in_the_tool_text(dialect: Dialect) -> None:
    body = encode_request(request(ERROR_RESULT), VISION, dialect)
    assert body == {
        "model": "m1",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Read missing.txt."},
            {
                "role": "assistant",
                "tool_calls": [call("call_9", "read_file", '{"path":"missing.txt"}')],
            },
            {
                "role": "tool",
                "tool_call_id": "call_9",
                "content": "Error: no such file: missing.txt",
            },
            {"role": "assistant", "content": "That file does not exist."},
            {"role": "user", "content": "Try notes.txt then."},
        ],
        **limit(dialect),
        "tools": TOOLS_WIRE,
    }
    check_openai_request(body)
    _, history = decode_messages(body["messages"])
    assert history == ERROR_RESULT


def test_golden_signed_thinking_stays_off_the_openai_wire() -> None:
    body = encode_request(request(SIGNED_THINKING), VISION, "openai")
    assert body == {
        "model": "m1",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is 2+2? Check with a tool."},
            {
                "role": "assistant",
                "tool_calls": [call("call_t", "read_file", '{"path":"math.txt"}')],
            },
            {"role": "tool", "tool_call_id": "call_t", "content": "2+2=4"},
            {"role": "assistant", "content": "It is 4."},
            {"role": "user", "content": "And 3+3?"},
        ],
        "max_completion_tokens": 4096,
        "tools": TOOLS_WIRE,
    }
    assert "signature" not in json.dumps(body) and "arithmetic" not in json.dumps(body)
    check_openai_request(body)


def test_golden_signed_thinking_goes_back_to_llama_server_as_reasoning_content() -> None:
    caps = Capabilities(thinking=True)
    body = encode_request(request(SIGNED_THINKING, thinking=True), caps, "llama-server")
    assert body == {
        "model": "m1",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is 2+2? Check with a tool."},
            {
                "role": "assistant",
                "reasoning_content": "The user wants arithmetic; I will read the file.",
                "tool_calls": [call("call_t", "read_file", '{"path":"math.txt"}')],
            },
            {"role": "tool", "tool_call_id": "call_t", "content": "2+2=4"},
            {
                "role": "assistant",
                "reasoning_content": "Unsigned, from another backend.",
                "content": "It is 4.",
            },
            {"role": "user", "content": "And 3+3?"},
        ],
        "max_tokens": 4096,
        "tools": TOOLS_WIRE,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    assert "sig-abc123" not in json.dumps(body)
    check_openai_request(body)


def test_thinking_continues_on_llama_server_then_moves_to_openai() -> None:
    reply = decode_response(
        {
            "model": "smollm2",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "reasoning_content": "3+3 is 6.",
                        "content": "6.",
                    },
                }
            ],
        }
    )
    # Stamped with its origin (this wire, no endpoint named, the answer's model).
    made = Origin("openai", "", "smollm2")
    assert reply.message == Message.assistant([Thinking("3+3 is 6.", origin=made), Text("6.")])
    history = [*SIGNED_THINKING, reply.message, Message.user("And 4+4?")]
    caps = Capabilities(thinking=True)
    same = encode_request(request(history, thinking=True), caps, "llama-server")
    assert same["messages"][6] == {
        "role": "assistant",
        "reasoning_content": "3+3 is 6.",
        "content": "6.",
    }
    check_openai_request(same)
    other = encode_request(request(history, effort="low"), caps, "openai")
    assert other["messages"][6] == {"role": "assistant", "content": "6."}
    assert other["reasoning_effort"] == "low"
    assert "reasoning_content" not in json.dumps(other)
    check_openai_request(other)


def test_reasoning_goes_back_to_openrouter_as_reasoning_and_elsewhere_as_reasoning_content() -> (
    None
):
    answer = {
        "model": "deepseek/deepseek-r1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "reasoning": "2+2 is 4.", "content": "4"},
            }
        ],
    }
    sent: dict[str, dict[str, Any]] = {}
    for endpoint in ("openrouter.ai", "api.deepseek.com"):
        reply = decode_response(answer, endpoint=endpoint)
        history = [Message.user("2+2?"), reply.message, Message.user("And 3+3?")]
        body = Request(model="deepseek/deepseek-r1", messages=tuple(history), endpoint=endpoint)
        sent[endpoint] = encode_request(body, Capabilities(thinking=True), "openai")["messages"][1]
    # OpenRouter's request type names it `reasoning` (and drops a `reasoning_content`).
    assert sent["openrouter.ai"] == {"role": "assistant", "reasoning": "2+2 is 4.", "content": "4"}
    assert sent["api.deepseek.com"] == {
        "role": "assistant",
        "reasoning_content": "2+2 is 4.",
        "content": "4",
    }


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_an_imported_assistants_reasoning_is_read_under_either_name(key: str) -> None:
    _, imported = decode_messages(
        [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", key: "2+2 is 4.", "content": "4"},
        ]
    )
    thinking = imported[1].content[0]
    assert isinstance(thinking, Thinking) and thinking.text == "2+2 is 4."
    assert imported.downgrades == ()


def test_an_imported_reasoning_that_is_not_text_is_a_block_error() -> None:
    with pytest.raises(BlockError, match=r"messages\[1\]\.reasoning must be a string"):
        decode_messages([{"role": "user", "content": "q"}, {"role": "assistant", "reasoning": 3}])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_image_on_a_no_vision_model_is_its_placeholder_line(dialect: Dialect) -> None:
    body = encode_request(request(IMAGE_FROM_USER), BLIND, dialect)
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "text", "text": "[image: shot.png (image/png)]"},
            ],
        },
    ]
    assert "image_url" not in json.dumps(body)
    check_openai_request(body)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_image_from_user_on_a_vision_model_is_a_data_url(dialect: Dialect) -> None:
    body = encode_request(request(IMAGE_FROM_USER), VISION, dialect)
    assert body["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    }
    assert PNG_URL.startswith("data:image/png;base64,iVBOR")
    check_openai_request(body)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_golden_history_ending_in_a_tool_round_ends_on_the_tool_message(dialect: Dialect) -> None:
    body = encode_request(request(ENDS_IN_TOOL_ROUND), VISION, dialect)
    assert body == {
        "model": "m1",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Read notes.txt."},
            {
                "role": "assistant",
                "tool_calls": [call("call_r", "read_file", '{"path":"notes.txt"}')],
            },
            {"role": "tool", "tool_call_id": "call_r", "content": "line one\nline two\n"},
        ],
        **limit(dialect),
        "tools": TOOLS_WIRE,
    }
    check_openai_request(body)


# -- request options --------------------------------------------------------------


def test_llama_server_refuses_a_history_ending_on_an_assistant_message() -> None:
    history = [Message.user("hi"), Message.assistant([Text("Hello")])]
    with pytest.raises(HistoryError, match=r"message 1: .*prefill"):
        encode_request(request(history), VISION, "llama-server")
    body = encode_request(request(history), VISION, "openai")
    assert body["messages"][-1] == {"role": "assistant", "content": "Hello"}


@pytest.mark.parametrize(
    ("caps", "thinking", "expected"),
    [
        (Capabilities(thinking=True), True, {"enable_thinking": True}),
        (Capabilities(thinking=True), False, {"enable_thinking": False}),
        (Capabilities(thinking=False), True, {"enable_thinking": True}),
        (Capabilities(thinking=False), False, None),
    ],
)
def test_llama_server_switches_thinking_with_a_json_boolean(
    caps: Capabilities, thinking: bool, expected: dict[str, bool] | None
) -> None:
    body = encode_request(request([Message.user("hi")], thinking=thinking), caps, "llama-server")
    assert body.get("chat_template_kwargs") == expected
    openai_body = encode_request(request([Message.user("hi")], thinking=thinking), caps, "openai")
    assert "chat_template_kwargs" not in openai_body


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_is_one_of_the_three_strings(dialect: Dialect, choice: str) -> None:
    body = encode_request(request([Message.user("hi")], tool_choice=choice), VISION, dialect)
    assert body["tool_choice"] == choice
    check_openai_request(body)


def test_tool_choice_is_left_out_without_tools() -> None:
    req = Request(model="m", messages=(Message.user("hi"),), tool_choice="required")
    body = encode_request(req, VISION, "openai")
    assert "tool_choice" not in body and "tools" not in body
    check_openai_request(body)


def test_every_llama_server_tool_has_description_and_parameters() -> None:
    spec = ToolSpec(name="noop", description="", input_schema={})
    req = Request(model="m", messages=(Message.user("hi"),), tools=(spec,))
    body = encode_request(req, VISION, "llama-server")
    assert body["tools"] == [
        {"type": "function", "function": {"name": "noop", "description": "", "parameters": {}}}
    ]


def test_an_empty_system_prompt_is_not_sent() -> None:
    req = Request(model="m", messages=(Message.user("hi"),), system="")
    assert encode_request(req, VISION)["messages"] == [{"role": "user", "content": "hi"}]


def test_a_broken_history_is_refused_before_encoding() -> None:
    broken = [Message.user("hi"), Message.assistant([ToolUse("c1", "read_file", {})])]
    with pytest.raises(HistoryError, match="message 1"):
        encode_request(request(broken), VISION, "openai")


def test_a_tool_input_that_is_not_json_is_a_history_error() -> None:
    history = [
        Message.user("hi"),
        Message.assistant([ToolUse("c1", "read_file", {"x": float("nan")})]),
        Message.tool_results([ToolResult("c1", "ok")]),
    ]
    with pytest.raises(HistoryError, match="message 1: tool call 'c1'"):
        encode_request(request(history), VISION, "openai")


def test_an_empty_request_is_refused() -> None:
    with pytest.raises(HistoryError, match="nothing to answer"):
        encode_request(Request(model="m", messages=()), VISION, "openai")


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ProviderError, match="dialect 'anthropic'"):
        encode_request(request([Message.user("hi")]), VISION, "anthropic")  # type: ignore[arg-type]


def test_the_image_limit_keeps_the_newest_images() -> None:
    old = Image.from_bytes("image/png", b"old", "old.png")
    history = [
        Message.user("first", [old]),
        Message.assistant([Text("ok")]),
        Message.user("second", [SHOT]),
    ]
    body = encode_request(request(history, max_images=1), VISION, "openai")
    assert body["messages"][1]["content"][1] == {
        "type": "text",
        "text": "[image: old.png (image/png)]",
    }
    assert body["messages"][3]["content"][1] == {"type": "image_url", "image_url": {"url": PNG_URL}}


def test_the_encoder_shares_image_data_rather_than_copying_it_twice() -> None:
    big = Image.from_bytes("image/png", b"\x89PNG" + bytes(1 << 20))
    body = encode_request(request([Message.user("look", [big])]), VISION, "openai")
    url = body["messages"][1]["content"][1]["image_url"]["url"]
    assert url == big.data_uri() and url.endswith(big.data)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_stream_body_asks_for_usage_and_validates_as_a_streaming_request(dialect: Dialect) -> None:
    body = encode_request(request(PARALLEL_ROUND_WITH_IMAGE), VISION, dialect)
    streamed = stream_body(body)
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"include_usage": True}
    assert streamed["messages"] is body["messages"]
    assert "stream" not in body
    check_openai_request(streamed, streaming=True)


# -- decode_response --------------------------------------------------------------


def completion(message: dict[str, Any], finish: Any = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        **extra,
    }


def test_decode_response_reads_text_tool_calls_usage_and_model() -> None:
    llama_id = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY"  # llama-server: 32 random alphanumerics
    response = decode_response(
        completion(
            {
                "role": "assistant",
                "content": "Reading.",
                "tool_calls": [call(llama_id, "read_file", '{"path":"a.txt"}')],
            },
            "tool_calls",
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 7,
                "total_tokens": 107,
                "prompt_tokens_details": {"cached_tokens": 60},
            },
            timings={"predicted_n": 7},
        )
    )
    assert response.message == Message.assistant(
        [Text("Reading."), ToolUse(llama_id, "read_file", {"path": "a.txt"})]
    )
    assert response.stop_reason == "tool_use"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 7)
    assert response.usage.cache_read_input_tokens == 60
    assert response.model == "gpt-test"
    assert response.malformed_tool_args == 0


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("tool_calls", "tool_use"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
        ("function_call", "other"),
        ("something_new", "other"),
        (None, "other"),
    ],
)
def test_finish_reasons_map_to_stop_reasons(finish: str | None, stop: str) -> None:
    response = decode_response(completion({"role": "assistant", "content": "x"}, finish))
    assert response.stop_reason == stop


def test_stop_with_tool_calls_is_a_tool_use() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [call("c", "f", "{}")]}
    assert decode_response(completion(message, "stop")).stop_reason == "tool_use"


def test_arguments_that_are_not_json_are_counted_and_kept_raw() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            call("c1", "read_file", '{"path": "a.txt"'),
            call("c2", "read_file", '{"path": "b.txt"}'),
            call("c3", "read_file", "[" * 100_000),
            call("c4", "read_file", '{"x": NaN}'),
        ],
    }
    response = decode_response(completion(message, "tool_calls"))
    assert response.malformed_tool_args == 3
    uses = response.message.tool_uses()
    assert uses[0].input == '{"path": "a.txt"'
    assert uses[1].input == {"path": "b.txt"}
    assert uses[2].input == "[" * 100_000
    assert uses[3].input == '{"x": NaN}'


def test_empty_arguments_read_as_an_empty_object() -> None:
    message = {"role": "assistant", "tool_calls": [call("c1", "now", "")]}
    response = decode_response(completion(message, "tool_calls"))
    assert response.message.tool_uses()[0].input == {}
    assert response.malformed_tool_args == 0


def test_reasoning_content_decodes_to_unsigned_thinking_first() -> None:
    message = {"role": "assistant", "content": "4", "reasoning_content": "2+2"}
    response = decode_response(completion(message))
    made = Origin("openai", "", response.model or "")
    assert response.message.content == (Thinking("2+2", None, made), Text("4"))


def test_a_refusal_is_the_response_refusal_and_the_message_text() -> None:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    response = decode_response(completion(message, "stop"))
    assert response.refusal == "I can't help with that."
    assert response.message.content == (Text("I can't help with that."),)


def test_an_empty_answer_is_one_empty_text() -> None:
    response = decode_response(completion({"role": "assistant", "content": ""}))
    assert response.message.content == (Text(""),)


def test_a_tool_call_without_id_gets_one_by_position() -> None:
    tool_call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": "assistant", "tool_calls": [tool_call, tool_call]}
    uses = decode_response(completion(message, "tool_calls")).message.tool_uses()
    assert [u.id for u in uses] == ["call_0", "call_1"]


def test_an_error_body_is_a_provider_error() -> None:
    with pytest.raises(ProviderError) as caught:
        decode_response(
            {
                "error": {
                    "code": 500,
                    "message": "image input is not supported",
                    "type": "server_error",
                }
            }
        )
    assert caught.value.status == 500
    assert caught.value.kind == "server_error"
    assert "image input is not supported" in str(caught.value)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([], "response must be a JSON object"),
        ({"choices": []}, "non-empty array"),
        ({"choices": "x"}, "non-empty array"),
        ({"choices": [None]}, r"choices\[0\] must be a JSON object"),
        ({"choices": [{"message": "hi"}]}, "message must be a JSON object"),
        (completion({"content": 3}), "content must be a string, null or an array"),
        (completion({"content": [{"type": "image_url"}]}), "not text or refusal"),
        (completion({"tool_calls": {}}), "tool_calls must be an array"),
        (completion({"tool_calls": [{"function": {"name": 1}}]}), "name must be a string"),
        (completion({"tool_calls": [{"function": {"arguments": "{}"}}]}), "has no name"),
        (completion({"tool_calls": [{"function": {"name": "f", "arguments": {}}}]}), "arguments"),
        (completion({"tool_calls": [{"type": "custom", "function": {"name": "f"}}]}), "custom"),
        (completion({"tool_calls": [call("a", "f", "{}"), call("a", "g", "{}")]}), "used twice"),
        (completion({"content": "x"}, finish=7), "finish_reason must be a string"),
        (completion({"content": "x"}, usage={"prompt_tokens": "9"}), "prompt_tokens"),
        (completion({"content": "x"}, usage={"prompt_tokens": -1}), "non-negative"),
        (completion({"content": "x"}, usage={"completion_tokens": True}), "completion_tokens"),
        (completion({"content": "x"}, usage={"prompt_tokens_details": 5}), "details"),
        (completion({"content": "x"}, model=5), "model must be a string"),
        (completion({"reasoning_content": ["x"]}), "reasoning_content"),
        ({"error": "overloaded"}, "overloaded"),
        ({"error": 10**5000}, "server reported an error"),
    ],
)
def test_hostile_responses_are_provider_errors(data: Any, match: str) -> None:
    with pytest.raises(ProviderError, match=match):
        decode_response(data)


def test_unknown_response_fields_are_ignored() -> None:
    data = completion({"role": "assistant", "content": "hi", "annotations": [], "audio": None})
    data["system_fingerprint"] = "b1234"
    data["choices"][0]["logprobs"] = None
    data["something_new"] = {"nested": [1, 2]}
    assert decode_response(data).message == Message.assistant([Text("hi")])


def test_a_ten_megabyte_arguments_string_decodes() -> None:
    blob = "x" * (10 * 1024 * 1024)
    message = {"role": "assistant", "tool_calls": [call("c", "write", json.dumps({"text": blob}))]}
    response = decode_response(completion(message, "tool_calls"))
    assert response.message.tool_uses()[0].input == {"text": blob}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
response_keys = st.sampled_from(
    [
        "choices",
        "message",
        "content",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "id",
        "usage",
        "prompt_tokens",
        "finish_reason",
        "reasoning_content",
        "refusal",
        "error",
        "type",
    ]
)
wire_like = st.recursive(
    json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(response_keys, inner, max_size=5),
    max_leaves=30,
)


@given(wire_like)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_json_response_decodes_or_is_a_provider_error(data: Any) -> None:
    with contextlib.suppress(ProviderError):
        decode_response(data)


# -- decode_messages --------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "history", [PARALLEL_ROUND_WITH_IMAGE, ERROR_RESULT, IMAGE_FROM_USER, ENDS_IN_TOOL_ROUND]
)
def test_encoded_goldens_read_back_as_the_same_blocks(
    dialect: Dialect, history: list[Message]
) -> None:
    body = encode_request(request(history), VISION, dialect)
    system, decoded = decode_messages(body["messages"])
    assert system == SYSTEM
    assert decoded == normalize(history, dialect)


def test_an_openai_history_continues_on_llama_server() -> None:
    foreign: list[dict[str, Any]] = [
        {"role": "developer", "content": "Be brief."},
        {"role": "system", "content": [{"type": "text", "text": "Answer in English."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What's this?"},
                {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [call("call_a", "read_file", '{"path": "x"}')],
        },
        {
            "role": "tool",
            "tool_call_id": "call_a",
            "content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}],
        },
        {"role": "user", "content": "Go on."},
    ]
    system, history = decode_messages(foreign)
    assert system == "Be brief.\n\nAnswer in English."
    # The call keeps how the file wrote it (its content null, its spaced arguments) for
    # the Chat Completions wire alone: its spelling.
    arguments = json.dumps({"arguments": '{"path": "x"}'}, separators=(",", ":"))
    spelling = Spelling(Origin("openai", "", ""), "content_null", arguments)
    assert history == [
        Message.user("What's this?", [Image("image/png", SHOT.data)]),
        Message.assistant([ToolUse("call_a", "read_file", {"path": "x"}, spelling=spelling)]),
        Message("user", (ToolResult("call_a", "hello"), Text("Go on."))),
    ]
    req = Request(model="m", messages=tuple(history), system=system)
    body = encode_request(req, BLIND, "llama-server")
    check_openai_request(body)
    assert body["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("call_a", "read_file", '{"path": "x"}')],
    }


def test_tool_messages_before_an_assistant_make_their_own_user_message() -> None:
    _, history = decode_messages(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [call("a", "f", "{}")]},
            {"role": "tool", "tool_call_id": "a", "content": "Error: boom"},
            {"role": "assistant", "content": "It failed."},
        ]
    )
    assert history[2] == Message.tool_results([ToolResult("a", "boom", is_error=True)])
    assert history[3] == Message.assistant([Text("It failed.")])


def test_the_system_argument_comes_before_system_messages() -> None:
    system, _ = decode_messages(
        [{"role": "system", "content": "two"}, {"role": "user", "content": "hi"}],
        system=[{"type": "text", "text": "one"}],
    )
    assert system == "one\n\ntwo"
    assert decode_messages([{"role": "user", "content": "hi"}]) == (None, [Message.user("hi")])


def test_remote_images_are_held_by_url_and_foreign_ones_named() -> None:
    _, history = decode_messages(
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://example.com/a/cat.JPG?x=1"},
                    },
                    {"type": "image_url", "image_url": {"url": "https://example.com/pic"}},
                    {"type": "image_url", "image_url": {"url": "data:image/tiff;base64,AAAA"}},
                ],
            }
        ]
    )
    # A remote image is never fetched: it is held by its URL (the type read off its path,
    # PNG when the path names none), and goes back as that URL to wires that take one.
    assert history[0].content == (
        Image("image/jpeg", "", url="https://example.com/a/cat.JPG?x=1"),
        Image("image/png", "", url="https://example.com/pic"),
        Text("[image: image/tiff]"),
    )
    request = Request(model="m", messages=tuple(history))
    parts = encode_request(request, VISION)["messages"][0]["content"]
    assert [p["image_url"]["url"] for p in parts[:2]] == [
        "https://example.com/a/cat.JPG?x=1",
        "https://example.com/pic",
    ]


def test_assistant_content_parts_and_object_arguments_are_read() -> None:
    _, history = decode_messages(
        [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "reasoning_content": "think",
                "content": [{"type": "text", "text": "a"}, {"type": "refusal", "refusal": "b"}],
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"k": 1}}}],
            },
        ]
    )
    assert history[1].content == (
        Thinking("think"),
        Text("a"),
        Text("b"),
        ToolUse("c", "f", {"k": 1}),
    )


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ("not a list", "messages must be an array"),
        ([3], r"messages\[0\]: a message must be an object"),
        ([{"role": "function", "content": "x"}], "role 'function' has no block form"),
        ([{"content": "x"}], "role null"),
        ([{"role": "user"}], "needs content"),
        ([{"role": "user", "content": 5}], "must be a string or an array"),
        (
            [{"role": "user", "content": [{"type": "input_audio"}]}],
            "input_audio must be an object",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": None}]}], "text must be a string"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": "u"}]}], "url string"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,x"}}]}],
            "not a base64 data: URL",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}}
                    ],
                }
            ],
            "not canonical base64",
        ),
        ([{"role": "tool", "content": "x"}], "tool_call_id"),
        ([{"role": "tool", "tool_call_id": "c"}], "needs content"),
        (
            [{"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url"}]}],
            "is not text",
        ),
        ([{"role": "system", "content": None}], "must be a string or an array of text parts"),
        ([{"role": "assistant", "function_call": {"name": "f"}}], "legacy function_call"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}], "needs an id"),
        ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}], "needs a name"),
        ([{"role": "assistant", "tool_calls": [{"id": "c", "type": "custom"}]}], "custom"),
        ([{"role": "assistant", "tool_calls": "x"}], "tool_calls must be an array"),
        ([{"role": "assistant", "reasoning_content": 1}], "reasoning_content must be a string"),
        ([{"role": "assistant", "refusal": 1}], "refusal must be a string"),
    ],
)
def test_hostile_message_arrays_are_block_errors(messages: Any, match: str) -> None:
    with pytest.raises(BlockError, match=match):
        decode_messages(messages)


@given(
    st.lists(
        wire_like
        | st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "tool", "system", "developer"])},
            optional={
                "content": wire_like,
                "tool_calls": wire_like,
                "tool_call_id": wire_like,
                "reasoning_content": wire_like,
            },
        ),
        max_size=5,
    )
)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_message_array_decodes_or_is_a_block_error(messages: list[Any]) -> None:
    with contextlib.suppress(BlockError):
        decode_messages(messages)


# -- the round trip property ------------------------------------------------------


def normalize(history: list[Message], dialect: Dialect) -> list[Message]:
    """Exactly the module docstring's list of what the wire cannot hold, items 1 to 10."""
    out: list[Message] = []
    for message in history:
        if message.role == "assistant":
            thinking = "".join(b.text for b in message.content if isinstance(b, Thinking))
            blocks: list[Block] = []
            if dialect == "llama-server" and thinking:  # 1, 2
                blocks.append(Thinking(thinking))
            blocks += [b for b in message.content if isinstance(b, Text) and b.text]  # 3
            blocks += [
                ToolUse(b.id, b.name, json.loads(json.dumps(b.input)))  # 9
                for b in message.content
                if isinstance(b, ToolUse)
            ]
            out.append(Message("assistant", tuple(blocks or [Text("")])))  # 3
            continue
        results: list[Block] = []
        rest: list[Block] = []
        for block in message.content:
            if isinstance(block, ToolResult):  # 4, 5, 10
                error = block.is_error or block.content.startswith(ERROR_PREFIX)
                text = block.content
                if not block.is_error and error:
                    text = text[len(ERROR_PREFIX) :]
                results.append(ToolResult(block.tool_use_id, text, error))
            elif isinstance(block, Image):  # 6
                rest.append(Image(block.media_type, block.data))
            else:
                rest.append(block)
        previous = out[-1] if out else None
        if (  # 7
            previous is not None
            and previous.role == "user"
            and all(isinstance(b, ToolResult) for b in previous.content)
            and not results
        ):
            out[-1] = Message("user", (*previous.content, *rest))
        else:
            out.append(Message("user", (*results, *rest)))
    return out


texts = st.text(max_size=12) | st.sampled_from(["", "Error: ", "Error: no", "line\n"])
images = st.builds(
    Image.from_bytes,
    st.sampled_from(sorted(IMAGE_MEDIA_TYPES)),
    st.binary(max_size=12),
    st.none() | st.sampled_from(["a.png", "shot.jpg"]),
)
tool_inputs = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
user_part = st.builds(Text, texts) | images


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    counter = iter(range(1_000_000))
    messages = [Message("user", tuple(draw(st.lists(user_part, min_size=1, max_size=3))))]
    for _ in range(draw(st.integers(0, 3))):
        calls = [
            ToolUse(
                f"call_{next(counter)}",
                draw(st.sampled_from(["read_file", "f"])),
                draw(tool_inputs),
            )
            for _ in range(draw(st.integers(0, 3)))
        ]
        others: list[Block] = draw(
            st.lists(
                st.builds(Text, texts) | st.builds(Thinking, texts, st.none() | st.just("sig")),
                max_size=3,
            )
        )
        blocks = draw(st.permutations([*others, *calls])) or [Text("")]
        messages.append(Message("assistant", tuple(blocks)))
        if calls:
            results = [
                ToolResult(
                    c.id,
                    draw(texts),
                    draw(st.booleans()),
                    (Marker(MarkerKind.AUDIO, "a.wav"),) if draw(st.booleans()) else (),
                )
                for c in calls
            ]
            extra = draw(st.lists(user_part, max_size=2))
            messages.append(Message("user", tuple(draw(st.permutations([*results, *extra])))))
            if draw(st.booleans()):
                messages.append(
                    Message("user", tuple(draw(st.lists(user_part, min_size=1, max_size=2))))
                )
        elif draw(st.booleans()):
            messages.append(
                Message("user", tuple(draw(st.lists(user_part, min_size=1, max_size=2))))
            )
    return messages


@pytest.mark.parametrize("dialect", DIALECTS)
@given(history=histories(), system=st.none() | texts)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_decode_of_encode_is_the_history_minus_what_the_wire_cannot_hold(
    dialect: Dialect, history: list[Message], system: str | None
) -> None:
    req = Request(model="m", messages=tuple(history), system=system, tools=TOOLS)
    if dialect == "llama-server" and history[-1].role == "assistant":
        with pytest.raises(HistoryError, match="prefill"):
            encode_request(req, VISION, dialect)
        return
    body = encode_request(req, VISION, dialect)
    check_openai_request(body)
    decoded_system, decoded = decode_messages(body["messages"])
    assert decoded_system == (system or None)  # 8
    assert decoded == normalize(history, dialect)


def test_a_refusal_with_finish_stop_reports_refusal_as_anthropic_does() -> None:
    response = decode_response(completion({"content": None, "refusal": "I can't help with that."}))
    assert response.stop_reason == "refusal"
    assert response.refusal == "I can't help with that."
    assert response.message.text() == "I can't help with that."


# -- issue 12: files, audio, and what only an answer's maker may read back ----------------

_PDF_BYTES = b"%PDF-1.4\n%fake\n"


def test_a_pdf_file_part_imports_as_a_document_and_goes_back_as_a_file() -> None:
    pdf = "data:application/pdf;base64," + base64.b64encode(_PDF_BYTES).decode()
    part = {"type": "file", "file": {"file_data": pdf, "filename": "report.pdf"}}
    _, history = decode_messages([{"role": "user", "content": [part]}])
    assert history[0].content == (Document.from_bytes("application/pdf", _PDF_BYTES, "report.pdf"),)
    body = encode_request(Request(model="m", messages=tuple(history)), VISION)
    check_openai_request(body)
    assert body["messages"][0]["content"] == [part]


def test_a_file_id_and_input_audio_stay_whole_for_this_wire_and_are_named_elsewhere() -> None:
    file_part = {"type": "file", "file": {"file_id": "file-2bkCwDLR2p8cDXfT9he8tV"}}
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    _, history = decode_messages([{"role": "user", "content": [file_part, audio]}])
    native = history[0].content
    assert [type(b) for b in native] == [Opaque, Opaque]
    assert [json.loads(b.raw) for b in native if isinstance(b, Opaque)] == [file_part, audio]
    assert [b.text for b in native if isinstance(b, Opaque)] == [
        "[file: file-2bkCwDLR2p8cDXfT9he8tV]",
        "[audio]",
    ]
    request = Request(model="gpt-4o", messages=tuple(history))
    assert encode_request(request, VISION)["messages"][0]["content"] == [file_part, audio]
    # llama-server is another wire: it gets the lines, and the loss is reported.
    encoded = encode(request, VISION, "llama-server")
    assert encoded.body["messages"][0]["content"] == [
        {"type": "text", "text": "[file: file-2bkCwDLR2p8cDXfT9he8tV]"},
        {"type": "text", "text": "[audio]"},
    ]
    assert [(d.index, d.kind) for d in encoded.downgrades] == [(0, "opaque"), (0, "opaque")]


def test_a_bad_file_part_is_a_block_error_naming_it() -> None:
    part = {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA$A"}}
    with pytest.raises(BlockError, match=r"messages\[0\]\.content\[0\]\.file.*base64"):
        decode_messages([{"role": "user", "content": [part]}])
    with pytest.raises(BlockError, match=r"content\[0\]\.file must be an object"):
        decode_messages([{"role": "user", "content": [{"type": "file", "file": "x"}]}])


_ENCRYPTED = {
    "type": "reasoning.encrypted",
    "data": "gAAAAB-secret",
    "format": "openai-responses-v1",
}


def _routed(model: str = "openai/o3") -> dict[str, Any]:
    return {
        "model": model,
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "hi",
                    "reasoning_details": [_ENCRYPTED],
                },
                "finish_reason": "stop",
            }
        ],
    }


def test_encrypted_reasoning_is_stamped_and_echoed_only_to_its_origin() -> None:
    answer = decode_response(_routed(), endpoint="openrouter.ai").message
    native = [b for b in answer.content if isinstance(b, Opaque)]
    assert native == [
        Opaque(
            "reasoning.encrypted", json.dumps(_ENCRYPTED, separators=(",", ":")), native[0].origin
        )
    ]
    assert native[0].origin == Origin("openai", "openrouter.ai", "openai/o3")
    history = (Message.user("q"), answer, Message.user("more"))
    home = encode(Request(model="openai/o3", endpoint="openrouter.ai", messages=history), VISION)
    assert home.body["messages"][1]["reasoning_details"] == [_ENCRYPTED]
    assert home.downgrades == ()
    for model, endpoint in (("openai/o3", "api.openai.com"), ("openai/o4-mini", "openrouter.ai")):
        away = encode(Request(model=model, endpoint=endpoint, messages=history), VISION)
        assert "reasoning_details" not in away.body["messages"][1]
        assert [(d.index, d.kind) for d in away.downgrades] == [(1, "opaque")]


def test_streamed_encrypted_reasoning_is_the_same_as_the_body() -> None:
    chunks: list[Any] = [
        {"model": "openai/o3", "choices": [{"delta": {"reasoning_details": [_ENCRYPTED]}}]},
        {"model": "openai/o3", "choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]},
        "[DONE]",
    ]
    streamed = decode_stream(chunks, endpoint="openrouter.ai")
    assert streamed == decode_response(_routed(), endpoint="openrouter.ai")

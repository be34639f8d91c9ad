"""OpenAI Responses (issue 13): requests, answers, streams and imported histories.

Every request is checked against the official SDK's own type,
`ResponseCreateParamsNonStreaming` (or the streaming one), through a pydantic
`TypeAdapter` with every lazy iterator consumed (`check_responses_request`).
What the wire cannot hold, and so what a round trip through
`decode_messages` normalizes, is `expected_back`.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from carryall.blocks import (
    Block,
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Spelling,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.errors import BlockError, HistoryError, ProviderError
from carryall.providers import Capabilities, Request
from carryall.providers.openai import ERROR_PREFIX
from carryall.providers.responses import (
    StreamDecoder,
    decode_messages,
    decode_response,
    decode_stream,
    encode,
    encode_request,
    encode_request_bytes,
)
from tests.support.goldens import GOLDENS, SHOT, TOOLS
from tests.support.histories import histories
from tests.support.sdk_wires import check_responses_request

SEES = Capabilities(vision=True)


def request(history: list[Message], **options: Any) -> Request:
    return Request(model="gpt-5", messages=tuple(history), tools=TOOLS, **options)


def expected_back(history: list[Message]) -> list[Message]:
    """A history as this wire gives it back: what the module docstring says it cannot hold."""
    out: list[Message] = []
    for message in history:
        if message.role == "assistant":
            kept = [
                b
                for b in message.content
                if not isinstance(b, Thinking | RedactedThinking)
                and not (isinstance(b, Text) and not b.text)
            ]
            out.append(Message("assistant", tuple(kept or [Text("")])))
            continue
        results: list[Block] = []
        rest: list[Block] = []
        for b in message.content:
            if isinstance(b, ToolResult):
                if not b.is_error and b.content.startswith(ERROR_PREFIX):
                    b = ToolResult(b.tool_use_id, b.content[len(ERROR_PREFIX) :], True)
                results.append(ToolResult(b.tool_use_id, b.content, b.is_error))
            elif isinstance(b, Image):
                rest.append(Image(b.media_type, b.data))
            else:
                rest.append(b)
        previous = out[-1] if out else None
        if (
            previous is not None
            and previous.role == "user"
            and all(isinstance(b, ToolResult) for b in previous.content)
        ):
            out[-1] = Message("user", (*previous.content, *results, *rest))
        else:
            out.append(Message("user", (*results, *rest)))
    return out


# -- the SDK check -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [
        {"type": "function_call_output", "call_id": "c", "output": 3},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": {"not": "a string"}},
        {"type": "message", "role": "user", "content": "x", "is_error": True},
    ],
    ids=["number-output", "output-message-without-id", "object-arguments", "unknown-key"],
)
def test_the_sdk_check_rejects_a_broken_request(item: dict[str, Any]) -> None:
    body = {"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}, item]}
    with pytest.raises((ValidationError, AssertionError)):
        check_responses_request(body)


@pytest.mark.parametrize("name", sorted(GOLDENS))
@pytest.mark.parametrize("stream", [False, True])
def test_every_golden_request_validates_against_the_sdk_type(name: str, stream: bool) -> None:
    body = json.loads(
        encode_request_bytes(
            request(GOLDENS[name], system="Be brief.", effort="low", thinking=True),
            SEES,
            stream=stream,
        )
    )
    check_responses_request(body, streaming=stream)


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_every_golden_history_comes_back_from_its_input_items(name: str) -> None:
    body = encode_request(request(GOLDENS[name], system="sys"), SEES)
    system, back = decode_messages(body["input"], system=body["instructions"])
    assert system == "sys"
    assert back == expected_back(GOLDENS[name])


# -- encoding ------------------------------------------------------------------------------


def test_tool_images_ride_the_user_message_after_the_results() -> None:
    body = encode_request(request(GOLDENS["parallel_round_with_image"]), SEES)
    kinds = [(item["type"], item.get("call_id")) for item in body["input"]]
    assert kinds[4:7] == [
        ("function_call_output", "call_1"),
        ("function_call_output", "call_2"),
        ("message", None),
    ]
    images = body["input"][6]["content"]
    assert images == [{"type": "input_image", "image_url": SHOT.data_uri(), "detail": "auto"}]


def test_calls_and_their_outputs_pair_by_call_id_and_errors_say_so() -> None:
    body = encode_request(request(GOLDENS["error_result"]), SEES)
    calls = {i["call_id"]: i for i in body["input"] if i["type"] == "function_call"}
    outputs = [i for i in body["input"] if i["type"] == "function_call_output"]
    assert outputs and all(o["call_id"] in calls for o in outputs)
    assert outputs[0]["output"].startswith(ERROR_PREFIX)


def test_thinking_from_another_wire_stays_off_this_one() -> None:
    body = encode_request(request(GOLDENS["signed_thinking"]), SEES)
    assert all(item["type"] != "reasoning" for item in body["input"])
    assert "sig-abc123==" not in json.dumps(body)


def test_a_blind_model_gets_the_placeholder_line() -> None:
    body = encode_request(request(GOLDENS["image_from_user"]), Capabilities(vision=False))
    parts = body["input"][0]["content"]
    assert [p["type"] for p in parts] == ["input_text", "input_text"]
    assert parts[1]["text"] == SHOT.placeholder()


def test_store_is_off_and_the_options_have_their_names() -> None:
    body = encode_request(
        request(
            [Message.user("hi")],
            system="s",
            max_tokens=77,
            tool_choice="required",
            effort="high",
            thinking=True,
        ),
        SEES,
    )
    assert body["store"] is False
    assert body["instructions"] == "s"
    assert body["max_output_tokens"] == 77
    assert body["tool_choice"] == "required"
    assert body["reasoning"] == {"effort": "high"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert all(tool["strict"] is False for tool in body["tools"])


def test_no_tool_choice_without_tools_and_no_empty_instructions() -> None:
    body = encode_request(
        Request(model="m", messages=(Message.user("hi"),), system="", tool_choice="auto"), SEES
    )
    assert "tool_choice" not in body and "tools" not in body and "instructions" not in body


def test_a_broken_history_is_refused_before_encoding() -> None:
    broken = [Message.user("x"), Message.assistant([ToolUse("c", "f", {})]), Message.user("y")]
    with pytest.raises(HistoryError):
        encode_request(request(broken), SEES)


def test_a_bad_tool_choice_is_refused() -> None:
    with pytest.raises(ProviderError, match="tool_choice"):
        encode_request(request([Message.user("x")], tool_choice="any"), SEES)  # type: ignore[arg-type]


def _continued(endpoint: str, model: str) -> Any:
    first = decode_response(
        {
            "model": "gpt-5",
            "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "ENC"},
                {"type": "function_call", "call_id": "c", "name": "read_file", "arguments": "{}"},
            ],
        },
        endpoint="api.openai.com",
    )
    history = [
        Message.user("go"),
        first.message,
        Message.tool_results([ToolResult("c", "ok")]),
    ]
    return encode(
        Request(model=model, endpoint=endpoint, messages=tuple(history), tools=TOOLS), SEES
    )


def test_encrypted_reasoning_goes_back_to_its_origin_right_before_its_call() -> None:
    encoded = _continued("api.openai.com", "gpt-5")
    kinds = [item["type"] for item in encoded.body["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
    assert encoded.body["input"][1]["encrypted_content"] == "ENC"
    assert encoded.downgrades == ()
    check_responses_request(encoded.body)


@pytest.mark.parametrize(
    ("endpoint", "model"), [("example.com", "gpt-5"), ("api.openai.com", "o3")]
)
def test_encrypted_reasoning_never_crosses_to_another_origin(endpoint: str, model: str) -> None:
    encoded = _continued(endpoint, model)
    assert "ENC" not in json.dumps(encoded.body)
    assert [(d.index, d.kind) for d in encoded.downgrades] == [(1, "opaque")]


# -- decoding answers ----------------------------------------------------------------------


def answer(output: list[Any], **extra: Any) -> dict[str, Any]:
    return {"id": "resp_1", "model": "gpt-5", "status": "completed", "output": output, **extra}


def test_reasoning_text_and_calls_keep_their_order_with_the_encrypted_content() -> None:
    response = decode_response(
        answer(
            [
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "encrypted_content": "gAAAA==",
                    "summary": [{"type": "summary_text", "text": "thought"}],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Let me look."}],
                },
                {
                    "type": "function_call",
                    "call_id": "call_9",
                    "name": "read_file",
                    "arguments": '{"path": "a"}',
                },
            ],
            usage={
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 40},
                "output_tokens": 30,
                "output_tokens_details": {"reasoning_tokens": 20},
            },
        )
    )
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thought"}],
        "encrypted_content": "gAAAA==",
    }
    assert response.message.content == (
        Opaque("reasoning", json.dumps(reasoning), Origin("responses", "", "gpt-5"), "thought"),
        Text("Let me look."),
        ToolUse("call_9", "read_file", {"path": "a"}),
    )
    assert response.stop_reason == "tool_use"
    assert (response.usage.input_tokens, response.usage.cache_read_input_tokens) == (60, 40)
    assert response.usage.output_tokens == 30


def test_incomplete_for_the_token_limit_is_max_tokens() -> None:
    data = answer(
        [{"type": "message", "content": [{"type": "output_text", "text": "cut"}]}],
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
    )
    assert decode_response(data).stop_reason == "max_tokens"


def test_a_refusal_part_is_the_refusal_and_its_text() -> None:
    data = answer([{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}])
    response = decode_response(data)
    assert (response.stop_reason, response.refusal) == ("refusal", "No.")
    assert response.message.content == (Text("No."),)


def test_an_empty_answer_is_one_empty_text() -> None:
    assert decode_response(answer([])).message.content == (Text(""),)


def test_arguments_that_are_not_json_are_counted_and_kept() -> None:
    data = answer([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{oops"}])
    response = decode_response(data)
    assert response.malformed_tool_args == 1
    assert response.message.content == (ToolUse("c", "f", "{oops"),)


def test_an_error_body_is_a_provider_error_with_the_server_message() -> None:
    with pytest.raises(ProviderError, match="over quota") as caught:
        decode_response(
            {"error": {"message": "over quota", "type": "insufficient_quota", "code": 429}}
        )
    assert caught.value.status == 429


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"output": "not a list"},
        {"output": [42]},
        {"output": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]},
        {"output": [{"type": "message", "content": [{"type": "output_text", "text": 3}]}]},
        {"output": [{"type": "reasoning", "summary": "x"}]},
        {"output": [{"no": "type"}]},
        {"output": [], "usage": {"input_tokens": -1}},
        {"status": "failed", "output": []},
    ],
)
def test_hostile_answers_are_provider_errors(data: Any) -> None:
    with pytest.raises(ProviderError):
        decode_response(data)


# -- streams ---------------------------------------------------------------------------------


def _stream_of(final: dict[str, Any]) -> list[Any]:
    return [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "role": "assistant", "content": []},
        },
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "lo"},
        {"type": "response.completed", "response": final},
    ]


def test_a_stream_shows_its_text_and_ends_as_its_completed_response() -> None:
    final = answer([{"type": "message", "content": [{"type": "output_text", "text": "Hello"}]}])
    decoder = StreamDecoder()
    seen = "".join(decoder.feed(event) for event in _stream_of(final))
    assert seen == "Hello"
    assert decoder.response() == decode_response(final)


def test_a_completed_event_without_items_is_built_from_the_deltas() -> None:
    events = _stream_of({"id": "r", "status": "completed", "output": []})
    events[3:3] = [
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": " 1}"},
    ]
    assert decode_stream(events).message.content == (Text("Hello"), ToolUse("c1", "f", {"a": 1}))


def test_a_stream_without_its_end_is_a_retryable_error() -> None:
    events = _stream_of(answer([]))[:-1]
    with pytest.raises(ProviderError, match="truncated") as caught:
        decode_stream(events)
    assert caught.value.retryable


def test_an_error_event_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="slow down"):
        decode_stream([{"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}])


def test_an_event_after_the_end_is_refused() -> None:
    events = [
        *_stream_of(answer([])),
        {"type": "response.output_text.delta", "delta": "x", "output_index": 0},
    ]
    with pytest.raises(ProviderError, match="after the response finished"):
        decode_stream(events)


@pytest.mark.parametrize(
    "event",
    [
        "not json",
        {"type": "response.output_text.delta", "output_index": 0, "delta": 5},
        {"type": "response.output_item.added", "output_index": -1, "item": {}},
        {"type": "response.completed", "response": "x"},
    ],
)
def test_hostile_events_are_provider_errors(event: Any) -> None:
    with pytest.raises(ProviderError):
        StreamDecoder().feed(event)


# -- importing histories --------------------------------------------------------------------


def test_import_groups_a_turn_as_the_block_model_does() -> None:
    system, messages = decode_messages(
        [
            {"role": "developer", "content": "be kind"},
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "e"},
            {"type": "message", "role": "assistant", "content": "looking"},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "1"},
            {"type": "function_call_output", "call_id": "b", "output": "Error: no"},
            {"role": "user", "content": [{"type": "input_text", "text": "and?"}]},
        ],
        system="sys",
    )
    assert system == "sys\n\nbe kind"
    # The items written in the easy form keep it, for this wire alone.
    easy, untyped = messages[0].content[0], messages[2].content[-1]
    assert isinstance(easy, Text) and easy.spelling == Spelling(Origin("responses", "", ""), "easy")
    assert isinstance(untyped, Text) and untyped.spelling is not None
    assert untyped.spelling.form == "untyped"
    messages = [
        Message(m.role, [msgspec.structs.replace(b, spelling=None) for b in m.content])  # type: ignore[type-var]
        if m.role == "user"
        else m
        for m in messages
    ]
    assert messages == [
        Message.user("hi"),
        Message.assistant(
            [
                Opaque(
                    "reasoning",
                    '{"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "e"}',
                    Origin("responses", "", ""),
                ),
                Text("looking"),
                ToolUse("a", "f", {}),
                ToolUse("b", "f", {}),
            ]
        ),
        Message("user", (ToolResult("a", "1"), ToolResult("b", "no", True), Text("and?"))),
    ]


@pytest.mark.parametrize(
    "items",
    [
        b"x",
        [3],
        [{"type": 7}],
        [{"type": "function_call", "name": "f", "arguments": "{}"}],
        [{"type": "function_call_output", "call_id": "c", "output": 3}],
        [{"role": "tool", "content": "x"}],
        [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;x"}]}],
    ],
)
def test_hostile_imports_are_block_errors(items: Any) -> None:
    with pytest.raises(BlockError):
        decode_messages(items)


# -- properties ------------------------------------------------------------------------------


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), system=st.none() | st.text(min_size=1, max_size=20))
def test_any_history_validates_and_comes_back_as_the_wire_holds_it(
    history: list[Message], system: str | None
) -> None:
    body = json.loads(encode_request_bytes(request(history, system=system), SEES))
    check_responses_request(body)
    back_system, back = decode_messages(body["input"], system=body.get("instructions"))
    assert back_system == (system or None)
    assert back == expected_back(history)


PDF = Document.from_bytes("application/pdf", b"%PDF-1.4\n%fake\n", title="report.pdf")
PDF_URL = Document("application/pdf", url="https://example.com/paper.pdf")
NOTES = Document.from_bytes("text/plain", b"plain notes", source="notes.txt")
REMOTE = Image("image/png", "", url="https://example.com/remote.png")


def test_images_by_url_and_pdfs_go_as_input_image_and_input_file_parts() -> None:
    history = [Message("user", (Text("read these"), REMOTE, PDF, PDF_URL, NOTES))]
    encoded = encode(request(history), SEES)
    check_responses_request(encoded.body)
    (item,) = encoded.body["input"]
    assert item["content"] == [
        {"type": "input_text", "text": "read these"},
        {"type": "input_image", "image_url": REMOTE.url, "detail": "auto"},
        {"type": "input_file", "filename": "report.pdf", "file_data": PDF.data_uri()},
        {"type": "input_file", "file_url": PDF_URL.url},
        {"type": "input_text", "text": f"{NOTES.placeholder()}\nplain notes"},
    ]
    # Only the plain-text document was not sent as it is held, and the report says so.
    (left,) = encoded.downgrades
    assert (left.index, left.kind) == (0, "document") and "text documents" in left.reason
    _, back = decode_messages(encoded.body["input"])
    assert back[0].content[2:4] == (
        Document("application/pdf", PDF.data, title="report.pdf"),
        PDF_URL,
    )


def test_a_remote_input_image_imports_as_an_image_held_by_its_url() -> None:
    # The model must not lose the image: it goes back as the same URL on the
    # wires that take one, as a Chat Completions `image_url` already does.
    url = "https://example.com/shots/cat.JPG?size=large"
    part = {"type": "input_image", "image_url": url, "detail": "auto"}
    _, (message,) = decode_messages([{"role": "user", "content": [part]}])
    assert message.content == (Image("image/jpeg", "", url=url),)
    body = encode(request([message]), SEES).body
    check_responses_request(body)
    assert body["input"][0]["content"] == [part]
    # A data: URL still reads as the image it holds, and a URL no block can hold
    # (no http scheme) is still named in its placeholder line, not lost.
    _, (inline,) = decode_messages(
        [{"role": "user", "content": [{"type": "input_image", "image_url": SHOT.data_uri()}]}]
    )
    assert inline.content == (Image(SHOT.media_type, SHOT.data),)
    _, (other,) = decode_messages(
        [{"role": "user", "content": [{"type": "input_image", "image_url": "ftp://h/a.png"}]}]
    )
    assert other.content == (Text("[image: ftp://h/a.png (image/png)]"),)


def test_an_uploaded_file_id_imports_as_its_placeholder_and_a_bad_file_is_refused() -> None:
    _, (message,) = decode_messages(
        [{"role": "user", "content": [{"type": "input_file", "file_id": "file-abc"}]}]
    )
    assert message.content == (Text("[document: file-abc (application/pdf)]"),)
    with pytest.raises(BlockError, match=r"input\[0\].*content\[0\].*input_file needs"):
        decode_messages([{"role": "user", "content": [{"type": "input_file"}]}])
    with pytest.raises(BlockError, match="file_data: not a base64 data: URL"):
        decode_messages(
            [{"role": "user", "content": [{"type": "input_file", "file_data": "%PDF"}]}]
        )

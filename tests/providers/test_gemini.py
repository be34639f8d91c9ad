"""Google Gemini (issue 13): requests, answers, streams and imported histories.

Every request is checked against the `google-genai` SDK's own pydantic types
(`check_gemini_request`): each of `contents` as `types.Content`, the tools as
`types.Tool`, and the configuration as `types.GenerateContentConfig`, each
dumped back and compared, so a key the SDK does not know fails rather than
vanishing. What the wire cannot hold is `expected_back`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from carryall.blocks import (
    Block,
    Document,
    Image,
    Message,
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
from carryall.providers.gemini import (
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
from tests.support.sdk_wires import check_gemini_request

types = pytest.importorskip("google.genai.types")

SEES = Capabilities(vision=True)


def request(history: list[Message], **options: Any) -> Request:
    return Request(model="gemini-2.5-flash", messages=tuple(history), tools=TOOLS, **options)


def expected_back(history: list[Message]) -> list[Message]:
    """A history as this wire gives it back (see the module docstring)."""
    out: list[Message] = []
    for message in history:
        if message.role == "assistant":
            kept: list[Block] = []
            for b in message.content:
                if isinstance(b, Thinking | RedactedThinking) or (
                    isinstance(b, Text) and not b.text
                ):
                    continue
                if isinstance(b, ToolUse):
                    b = ToolUse(b.id, b.name, json.loads(json.dumps(b.input)))
                kept.append(b)
            out.append(Message("assistant", tuple(kept or [Text("")])))
            continue
        results = [
            ToolResult(b.tool_use_id, b.content, b.is_error)
            for b in message.content
            if isinstance(b, ToolResult)
        ]
        rest = [
            Image(b.media_type, b.data) if isinstance(b, Image) else b
            for b in message.content
            if not isinstance(b, ToolResult)
        ]
        out.append(Message("user", (*results, *rest)))
    return out


# -- the SDK check -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"contents": [{"role": "user", "parts": [{"txt": "typo"}]}]},
        {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": 3}}]}]},
        {"contents": [], "generationConfig": {"maxOutputTokens": "lots"}},
        {"contents": [], "tools": [{"functionDeclarations": [{"nam": "f"}]}]},
    ],
    ids=["unknown-part-key", "number-name", "string-token-limit", "unknown-tool-key"],
)
def test_the_sdk_check_rejects_a_broken_request(body: dict[str, Any]) -> None:
    with pytest.raises((ValidationError, AssertionError)):
        check_gemini_request(body)


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_every_golden_request_validates_against_the_sdk_types(name: str) -> None:
    body = json.loads(
        encode_request_bytes(
            request(
                GOLDENS[name],
                system="Be brief.",
                tool_choice="auto",
                thinking=True,
                thinking_budget=256,
            ),
            SEES,
        )
    )
    check_gemini_request(body)


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_every_golden_history_comes_back_from_its_contents(name: str) -> None:
    body = encode_request(request(GOLDENS[name], system="sys"), SEES)
    system, back = decode_messages(body["contents"], system=body["systemInstruction"])
    assert system == "sys"
    assert back == expected_back(GOLDENS[name])


# -- encoding ------------------------------------------------------------------------------


def test_tool_images_ride_the_user_turn_after_the_function_responses() -> None:
    body = encode_request(request(GOLDENS["parallel_round_with_image"]), SEES)
    parts = body["contents"][2]["parts"]
    assert [next(iter(p)) for p in parts] == ["functionResponse", "functionResponse", "inlineData"]
    assert parts[0]["functionResponse"] == {
        "id": "call_1",
        "name": "read_file",
        "response": {"output": "buy milk"},
    }
    assert parts[2]["inlineData"] == {"mimeType": "image/png", "data": SHOT.data}


def test_an_error_result_goes_as_the_error_response() -> None:
    body = encode_request(request(GOLDENS["error_result"]), SEES)
    responses = [
        p["functionResponse"]
        for c in body["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert any(set(r["response"]) == {"error"} for r in responses)


def test_thinking_from_another_wire_stays_off_this_one() -> None:
    body = encode_request(request(GOLDENS["signed_thinking"]), SEES)
    text = json.dumps(body)
    assert "sig-abc123==" not in text and '"thought"' not in text


def test_options_have_their_gemini_names() -> None:
    body = encode_request(
        request(
            [Message.user("hi")],
            system="s",
            max_tokens=77,
            tool_choice="required",
            thinking=True,
            thinking_budget=512,
        ),
        SEES,
    )
    assert body["systemInstruction"] == {"parts": [{"text": "s"}]}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["generationConfig"] == {
        "maxOutputTokens": 77,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 512},
    }


def test_a_non_object_tool_input_is_wrapped_and_unwrapped() -> None:
    for value in ([1, 2], {"input": 3}):
        history = [
            Message.user("x"),
            Message.assistant([ToolUse("c", "f", value)]),
            Message.tool_results([ToolResult("c", "ok")]),
        ]
        body = encode_request(request(history), SEES)
        assert body["contents"][1]["parts"][0]["functionCall"]["args"] == {"input": value}
        assert decode_messages(body["contents"])[1] == history


def test_a_tool_input_that_is_not_json_is_refused_by_name_on_both_paths() -> None:
    history = [
        Message.user("x"),
        Message.assistant([ToolUse("c", "f", {"when": object()})]),
        Message.tool_results([ToolResult("c", "ok")]),
    ]
    with pytest.raises(ProviderError, match="Gemini request: a tool input is not a JSON value"):
        encode_request(request(history), SEES)
    with pytest.raises(TypeError, match="object"):
        encode_request_bytes(request(history), SEES)


def test_a_broken_history_is_refused_before_encoding() -> None:
    broken = [Message.user("x"), Message.assistant([ToolUse("c", "f", {})]), Message.user("y")]
    with pytest.raises(HistoryError):
        encode_request(request(broken), SEES)


def _signed_round(endpoint: str, model: str) -> Any:
    first = decode_response(
        answer(
            [
                {"text": "plan", "thought": True, "thoughtSignature": "VGhvdWdodA=="},
                {"functionCall": {"name": "read_file", "args": {}}, "thoughtSignature": "Q2FsbA=="},
            ]
        ),
        endpoint="generativelanguage.googleapis.com",
    )
    call = first.message.tool_uses()[0]
    history = [Message.user("go"), first.message, Message.tool_results([ToolResult(call.id, "ok")])]
    return encode(
        Request(model=model, endpoint=endpoint, messages=tuple(history), tools=TOOLS), SEES
    )


def test_thought_and_call_signatures_go_back_to_their_origin() -> None:
    encoded = _signed_round("generativelanguage.googleapis.com", "gemini-2.5-flash")
    parts = encoded.body["contents"][1]["parts"]
    assert parts[0] == {"text": "plan", "thought": True, "thoughtSignature": "VGhvdWdodA=="}
    assert parts[1]["thoughtSignature"] == "Q2FsbA=="
    assert encoded.downgrades == ()
    check_gemini_request(encoded.body)


@pytest.mark.parametrize(
    ("endpoint", "model"),
    [("aiplatform.googleapis.com", "gemini-2.5-flash"), ("generativelanguage.googleapis.com", "x")],
)
def test_signatures_never_cross_to_another_origin(endpoint: str, model: str) -> None:
    encoded = _signed_round(endpoint, model)
    text = json.dumps(encoded.body)
    assert "VGhvdWdodA==" not in text and "Q2FsbA==" not in text
    assert sorted(d.kind for d in encoded.downgrades) == ["thinking", "tool_use"]
    assert encoded.body["contents"][1]["parts"][0]["functionCall"]["name"] == "read_file"


# -- decoding answers ----------------------------------------------------------------------


def answer(parts: list[Any], finish: str = "STOP", **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
        "modelVersion": "gemini-2.5-flash",
        **extra,
    }


def test_thoughts_text_and_calls_keep_their_order_and_signatures() -> None:
    response = decode_response(
        answer(
            [
                {"text": "pondering", "thought": True, "thoughtSignature": "c2ln"},
                {"text": "Let me look."},
                {"functionCall": {"name": "read_file", "args": {"path": "a"}}},
                {"functionCall": {"id": "x9", "name": "read_file", "args": {"path": "b"}}},
            ],
            usageMetadata={
                "promptTokenCount": 100,
                "toolUsePromptTokenCount": 5,
                "cachedContentTokenCount": 40,
                "candidatesTokenCount": 7,
                "thoughtsTokenCount": 20,
            },
        )
    )
    assert response.message.content == (
        Thinking("pondering", "c2ln", Origin("gemini", "", "gemini-2.5-flash")),
        Text("Let me look."),
        ToolUse("call_1", "read_file", {"path": "a"}),
        ToolUse("x9", "read_file", {"path": "b"}),
    )
    assert response.stop_reason == "tool_use"
    assert response.usage.input_tokens == 65
    assert response.usage.cache_read_input_tokens == 40
    assert response.usage.output_tokens == 27
    assert response.model == "gemini-2.5-flash"


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("MAX_TOKENS", "max_tokens"),
        ("SAFETY", "refusal"),
        ("RECITATION", "refusal"),
        ("BLOCKLIST", "refusal"),
        ("PROHIBITED_CONTENT", "refusal"),
        ("SPII", "refusal"),
        ("IMAGE_SAFETY", "refusal"),
        ("MALFORMED_FUNCTION_CALL", "other"),
        ("STOP", "end_turn"),
    ],
)
def test_finish_reasons_map_to_stop_reasons(finish: str, stop: str) -> None:
    assert decode_response(answer([{"text": "x"}], finish)).stop_reason == stop


def test_a_blocked_prompt_is_a_refusal_with_its_reason() -> None:
    response = decode_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert response.stop_reason == "refusal"
    assert response.refusal and "SAFETY" in response.refusal


def test_an_empty_answer_is_one_empty_text() -> None:
    assert decode_response(answer([])).message.content == (Text(""),)


def test_an_error_body_is_a_provider_error_with_status_and_message() -> None:
    with pytest.raises(ProviderError, match="API key not valid") as caught:
        decode_response(
            {"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}
        )
    assert (caught.value.status, caught.value.kind) == (400, "INVALID_ARGUMENT")


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"candidates": "x"},
        {"candidates": [{"content": {"parts": [3]}}]},
        {"candidates": [{"content": {"parts": [{"text": 3}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": 3}}]}}]},
        {"candidates": [], "usageMetadata": {"promptTokenCount": -1}},
        {},
    ],
)
def test_hostile_answers_are_provider_errors(data: Any) -> None:
    with pytest.raises(ProviderError):
        decode_response(data)


# -- streams ---------------------------------------------------------------------------------


def test_a_stream_joins_its_text_and_ends_on_the_finish() -> None:
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}}]},
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"functionCall": {"name": "f", "args": {}}}],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
        },
    ]
    decoder = StreamDecoder()
    assert "".join(decoder.feed(c) for c in chunks) == "Hello"
    response = decoder.response()
    assert response.message.content == (Text("Hello"), ToolUse("call_1", "f", {}))
    assert (response.stop_reason, response.usage.output_tokens) == ("tool_use", 2)


def test_a_stream_without_its_finish_is_a_retryable_error() -> None:
    with pytest.raises(ProviderError, match="truncated") as caught:
        decode_stream([{"candidates": [{"content": {"parts": [{"text": "x"}]}}]}])
    assert caught.value.retryable


def test_a_candidate_after_the_finish_is_refused() -> None:
    done = answer([{"text": "x"}])
    with pytest.raises(ProviderError, match="after the finish"):
        decode_stream([done, done])


# -- importing histories --------------------------------------------------------------------


def test_a_function_response_without_id_answers_the_call_of_its_name() -> None:
    system, messages = decode_messages(
        [
            {"role": "user", "parts": [{"text": "weather?"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "w", "args": {"c": "a"}}},
                    {"functionCall": {"name": "w", "args": {"c": "b"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "w", "response": {"t": 1}}},
                    {"functionResponse": {"name": "w", "response": {"output": "2"}}},
                ],
            },
        ],
        system={"parts": [{"text": "sys"}]},
    )
    assert system == "sys"
    # Each keeps that it was written with no id, so this wire gets it back so.
    no_id = Spelling(Origin("gemini", "", ""), "no_id")
    assert messages[2] == Message(
        "user",
        (
            ToolResult("call_1", '{"t": 1}', spelling=no_id),
            ToolResult("call_2", "2", spelling=no_id),
        ),
    )


@pytest.mark.parametrize(
    "contents",
    [
        "x",
        [3],
        [{"role": "tool", "parts": []}],
        [{"role": "user", "parts": "x"}],
        [{"role": "user", "parts": [{"functionResponse": {"name": "nobody"}}]}],
        [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "%%"}}]}],
        [{"role": "user", "parts": [{}]}],
    ],
)
def test_hostile_imports_are_block_errors(contents: Any) -> None:
    with pytest.raises(BlockError):
        decode_messages(contents)


def test_a_pdf_imports_as_a_document_and_audio_as_its_placeholder_line() -> None:
    _, messages = decode_messages(
        [
            {
                "role": "user",
                "parts": [
                    {"inlineData": {"mimeType": "application/pdf", "data": "AA=="}},
                    {"inlineData": {"mimeType": "audio/wav", "data": "AA=="}},
                ],
            }
        ]
    )
    assert messages == [
        Message("user", (Document("application/pdf", "AA=="), Text("[image: audio/wav]")))
    ]


# -- properties ------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), system=st.none() | st.text(min_size=1, max_size=20))
def test_any_history_validates_and_comes_back_as_the_wire_holds_it(
    history: list[Message], system: str | None
) -> None:
    body = json.loads(encode_request_bytes(request(history, system=system), SEES))
    check_gemini_request(body)
    back_system, back = decode_messages(body["contents"], system=body.get("systemInstruction"))
    assert back_system == system
    assert back == expected_back(history)


UPLOADED = "https://generativelanguage.googleapis.com/v1beta/files/abc123"
PDF = Document.from_bytes("application/pdf", b"%PDF-1.4\n%fake\n", title="report")
NOTES = Document.from_bytes("text/plain", b"plain notes", source="notes.txt")


def test_documents_go_inline_and_files_api_uris_as_file_data() -> None:
    shot_uri = Image("image/png", "", url=UPLOADED)
    paper_uri = Document("application/pdf", url=UPLOADED + "-pdf")
    history = [Message("user", (Text("read these"), PDF, NOTES, shot_uri, paper_uri))]
    encoded = encode(request(history), SEES)
    check_gemini_request(encoded.body)
    assert encoded.downgrades == ()
    (content,) = encoded.body["contents"]
    assert content["parts"] == [
        {"text": "read these"},
        {"inlineData": {"mimeType": "application/pdf", "data": PDF.data}},
        {"inlineData": {"mimeType": "text/plain", "data": NOTES.data}},
        {"fileData": {"mimeType": "image/png", "fileUri": UPLOADED}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": UPLOADED + "-pdf"}},
    ]
    _, (back,) = decode_messages(encoded.body["contents"])
    assert back.content == (
        Text("read these"),
        Document("application/pdf", PDF.data),
        Document("text/plain", NOTES.data),
        shot_uri,
        paper_uri,
    )


def test_a_url_gemini_does_not_fetch_is_its_placeholder_and_reported() -> None:
    remote = Image("image/png", "", url="https://example.com/remote.png")
    paper = Document("application/pdf", url="https://example.com/paper.pdf")
    encoded = encode(request([Message("user", (Text("look"), remote, paper))]), SEES)
    check_gemini_request(encoded.body)
    assert encoded.body["contents"][0]["parts"] == [
        {"text": "look"},
        {"text": remote.placeholder()},
        {"text": paper.placeholder()},
    ]
    assert [(d.kind, d.index) for d in encoded.downgrades] == [("image", 0), ("document", 0)]
    assert all(
        "https://generativelanguage.googleapis.com/..." in d.reason for d in encoded.downgrades
    )


def test_a_signature_on_a_streamed_empty_text_part_is_kept_and_echoed_alone() -> None:
    stream = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}}]},
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"text": "", "thoughtSignature": "AAAA"}],
                    },
                    "finishReason": "STOP",
                }
            ],
            "modelVersion": "gemini-3-pro-preview",
        },
    ]
    answer = decode_stream(stream, endpoint="generativelanguage.googleapis.com")
    assert answer.message.text() == "Hi"
    history = [Message.user("hello"), answer.message, Message.user("again")]
    home = Request(
        model="gemini-3-pro-preview",
        endpoint="generativelanguage.googleapis.com",
        messages=tuple(history),
    )
    body = encode_request(home, SEES)
    check_gemini_request(body)
    assert body["contents"][1]["parts"] == [{"text": "Hi", "thoughtSignature": "AAAA"}]
    anthropic_bound = Request(model="claude", messages=tuple(history))
    from carryall.providers import anthropic as anthropic_wire

    elsewhere = anthropic_wire.encode(anthropic_bound, SEES)
    assert "AAAA" not in json.dumps(elsewhere.body)
    assert [d.kind for d in elsewhere.downgrades] == ["opaque"]

"""AWS Bedrock Converse (issue 13): requests, answers, streams and imported histories.

Every request is checked by botocore's own `ParamValidator` against the
`bedrock-runtime` service model's `Converse` and `ConverseStream` input
shapes, in the form boto3 is handed (blobs as bytes, `sdk_params`), and then
serialized by botocore's own REST-JSON serializer, which must give back the
codec's JSON body exactly (`sdk_wires.check_bedrock_request`): so the body
is what the SDK would send, and no key the service model does not know can
hide in it. What the wire cannot hold is `expected_back`.
"""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import (
    Block,
    Document,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.errors import BlockError, CarryallError, HistoryError, ProviderError
from carryall.providers import Capabilities, Request, Target
from carryall.providers.bedrock import (
    DIALECT,
    StreamDecoder,
    decode_messages,
    decode_response,
    decode_stream,
    document_name,
    encode,
    encode_request,
    encode_request_bytes,
    wire_id,
)
from tests.support.goldens import GOLDENS, SHOT, TOOLS
from tests.support.histories import histories
from tests.support.sdk_wires import BEDROCK_MODEL, check_bedrock_request

botocore_session = pytest.importorskip("botocore.session")

from botocore.exceptions import ParamValidationError  # noqa: E402

from carryall.transport.bedrock import sdk_params  # noqa: E402

SEES = Capabilities(vision=True, thinking=True)
MODEL = BEDROCK_MODEL
ENDPOINT = "bedrock-runtime.us-east-1.amazonaws.com"
ORIGIN = Origin(DIALECT, ENDPOINT, MODEL)
SERVICE = botocore_session.get_session().get_service_model("bedrock-runtime")


def request(history: list[Message], **options: Any) -> Request:
    return Request(model=MODEL, endpoint=ENDPOINT, messages=tuple(history), tools=TOOLS, **options)


def expected_back(history: list[Message]) -> list[Message]:
    """A history as this wire gives it back (see the module docstring)."""
    out: list[Message] = []
    merge = False
    for message in history:
        if message.role == "assistant":
            kept: list[Block] = []
            for b in message.content:
                if isinstance(b, Thinking | RedactedThinking) or (
                    isinstance(b, Text) and (not b.text or b.text.isspace())
                ):
                    continue
                if isinstance(b, ToolUse):
                    b = ToolUse(b.id, b.name, json.loads(json.dumps(b.input)))
                kept.append(b)
            if kept:
                out.append(Message("assistant", tuple(kept)))
            else:
                merge = True  # left off: the user turns around it are joined
            continue
        results = [
            ToolResult(b.tool_use_id, b.content, b.is_error)
            for b in message.content
            if isinstance(b, ToolResult)
        ]
        rest = [
            (Image(b.media_type, b.data) if b.data else Text(b.placeholder()))
            if isinstance(b, Image)
            else b
            for b in message.content
            if not isinstance(b, ToolResult)
        ]
        if merge and out and out[-1].role == "user":
            out[-1] = Message("user", (*out[-1].content, *results, *rest))
        else:
            out.append(Message("user", (*results, *rest)))
        merge = False
    return out


# -- the SDK check -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": [{"txt": "typo"}]}]},
        {"messages": [{"role": "user", "content": [{"toolResult": {"content": []}}]}]},
        {"messages": [{"role": "user", "content": [{"text": "a", "image": {}}]}]},
        {"messages": [], "inferenceConfig": {"maxTokens": "lots"}},
        {"messages": [], "toolConfig": {"tools": [{"toolSpec": {"nam": "f"}}]}},
        {"messages": [{"role": "assistant", "content": [{"toolUse": {"toolUseId": "a"}}]}]},
    ],
    ids=[
        "unknown-block-key",
        "result-without-id",
        "two-kinds-in-one-union",
        "string-token-limit",
        "unknown-tool-key",
        "call-without-name-or-input",
    ],
)
def test_botocore_rejects_a_broken_request(body: dict[str, Any]) -> None:
    with pytest.raises(ParamValidationError):
        check_bedrock_request(body)


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_every_golden_request_validates_against_botocore(name: str) -> None:
    body = json.loads(
        encode_request_bytes(
            request(
                GOLDENS[name],
                system="Be brief.",
                tool_choice="auto",
                thinking=True,
                max_tokens=4096,
                cache="auto",
            ),
            SEES,
        )
    )
    check_bedrock_request(body)


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_every_golden_history_comes_back_from_its_messages(name: str) -> None:
    body = encode_request(request(GOLDENS[name], system="sys"), SEES)
    system, back = decode_messages(body["messages"], system=body["system"])
    assert system == "sys"
    assert back == expected_back(GOLDENS[name])


def test_the_json_body_holds_blobs_as_base64_and_boto3_gets_the_bytes() -> None:
    body = encode_request(request(GOLDENS["image_from_user"]), SEES)
    image = body["messages"][0]["content"][1]["image"]
    assert image == {"format": "png", "source": {"bytes": SHOT.data}}
    params = sdk_params(body, MODEL, SERVICE.operation_model("Converse").input_shape)
    assert params["modelId"] == MODEL
    assert params["messages"][0]["content"][1]["image"]["source"]["bytes"] == SHOT.to_bytes()
    assert body["messages"][0]["content"][1]["image"]["source"]["bytes"] == SHOT.data


# -- encoding ------------------------------------------------------------------------------


def test_tool_images_ride_the_user_turn_after_the_results() -> None:
    body = encode_request(request(GOLDENS["parallel_round_with_image"]), SEES)
    kinds = [next(iter(b)) for b in body["messages"][2]["content"]]
    assert kinds == ["toolResult", "toolResult", "image"]
    assert body["messages"][2]["content"][0] == {
        "toolResult": {"toolUseId": "call_1", "content": [{"text": "buy milk"}]}
    }
    assert body["messages"][1]["content"][1] == {
        "toolUse": {"toolUseId": "call_1", "name": "read_file", "input": {"path": "notes.txt"}}
    }


def test_an_error_result_has_status_error() -> None:
    body = encode_request(request(GOLDENS["error_result"]), SEES)
    assert body["messages"][2]["content"][0] == {
        "toolResult": {
            "toolUseId": "call_9",
            "content": [{"text": "no such file: missing.txt"}],
            "status": "error",
        }
    }


def test_options_have_their_converse_names() -> None:
    body = encode_request(
        request(
            [Message.user("hi")],
            system="Be brief.",
            tool_choice="required",
            thinking=True,
            thinking_budget=2048,
            max_tokens=5000,
            cache="auto",
        ),
        SEES,
    )
    assert body["system"] == [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}]
    assert body["inferenceConfig"] == {"maxTokens": 5000}
    assert body["toolConfig"]["toolChoice"] == {"any": {}}
    assert body["toolConfig"]["tools"][0] == {
        "toolSpec": {
            "name": "read_file",
            "description": TOOLS[0].description,
            "inputSchema": {"json": TOOLS[0].input_schema},
        }
    }
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 2048}
    }
    auto = encode_request(request([Message.user("hi")], tool_choice="auto"), SEES)
    assert auto["toolConfig"]["toolChoice"] == {"auto": {}}
    none = encode_request(request([Message.user("hi")], tool_choice="none"), SEES)
    assert "toolChoice" not in none["toolConfig"] and none["toolConfig"]["tools"]


def test_thinking_is_asked_of_anthropic_models_only() -> None:
    other = Request(model="amazon.nova-pro-v1:0", messages=(Message.user("hi"),), thinking=True)
    assert "additionalModelRequestFields" not in encode_request(other, SEES)


def test_own_signed_and_redacted_reasoning_go_back_and_nobody_elses() -> None:
    history = [
        Message.user("q"),
        Message.assistant(
            [
                Thinking("mine", "sig-1", ORIGIN),
                RedactedThinking("cmVkYWN0ZWQ=", ORIGIN),
                Thinking("theirs", "sig-2", Origin("anthropic", "api.anthropic.com", MODEL)),
                Thinking("unsigned"),
                Text("answer"),
            ]
        ),
        Message.user("more"),
    ]
    encoded = encode(request(history), SEES)
    assert encoded.body["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "mine", "signature": "sig-1"}}},
        {"reasoningContent": {"redactedContent": "cmVkYWN0ZWQ="}},
        {"text": "answer"},
    ]
    assert [d.kind for d in encoded.downgrades] == ["thinking", "thinking"]
    check_bedrock_request(encoded.body)
    elsewhere = encode(
        Request(model="other-model", endpoint=ENDPOINT, messages=tuple(history)), SEES
    )
    assert elsewhere.body["messages"][1]["content"] == [{"text": "answer"}]
    assert len(elsewhere.downgrades) == 4


def test_documents_go_as_bytes_with_a_name_the_service_takes() -> None:
    pdf = Document.from_bytes("application/pdf", b"%PDF-1.4 x", source="report.v2.pdf")
    text = Document.from_bytes("text/plain", b"hello", title="notes  (draft)")
    body = encode_request(request([Message("user", (Text("read"), pdf, text))]), SEES)
    assert body["messages"][0]["content"][1:] == [
        {"document": {"format": "pdf", "name": "report-v2-pdf", "source": {"bytes": pdf.data}}},
        {"document": {"format": "txt", "name": "notes (draft)", "source": {"bytes": text.data}}},
    ]
    check_bedrock_request(body)
    assert document_name("...") == "-"
    assert document_name("\n\t") == "document"


def test_images_and_documents_by_url_are_placeholders_reported() -> None:
    image = Image("image/png", "", url="https://example.com/a.png")
    doc = Document("application/pdf", url="https://example.com/a.pdf")
    encoded = encode(request([Message("user", (Text("see"), image, doc))]), SEES)
    assert encoded.body["messages"][0]["content"] == [
        {"text": "see"},
        {"text": image.placeholder()},
        {"text": doc.placeholder()},
    ]
    assert sorted(d.kind for d in encoded.downgrades) == ["document", "image"]


def test_an_image_of_no_bytes_is_its_placeholder_reported() -> None:
    empty = Image("image/png", "")
    encoded = encode(request([Message("user", (Text("see"), empty))]), SEES)
    assert encoded.body["messages"][0]["content"][1] == {"text": empty.placeholder()}
    assert [d.kind for d in encoded.downgrades] == ["image"]
    check_bedrock_request(encoded.body)


def test_native_blocks_go_back_to_their_origin_only() -> None:
    raw = json.dumps({"citationsContent": {"content": [{"text": "cited"}], "citations": []}})
    history = [
        Message.user("q"),
        Message.assistant([Opaque("citationsContent", raw, ORIGIN, "cited")]),
        Message.user("more"),
    ]
    assert encode_request(request(history), SEES)["messages"][1]["content"] == [json.loads(raw)]
    foreign = Request(model="other", endpoint=ENDPOINT, messages=tuple(history))
    assert encode_request(foreign, SEES)["messages"][1]["content"] == [{"text": "cited"}]


def test_an_empty_assistant_turn_is_left_off_and_the_user_turns_joined() -> None:
    history = [
        Message.user("one"),
        Message.assistant([Thinking("only thought")]),
        Message.user("two"),
    ]
    encoded = encode(request(history), SEES)
    assert encoded.body["messages"] == [
        {"role": "user", "content": [{"text": "one"}, {"text": "two"}]}
    ]
    assert {d.kind for d in encoded.downgrades} == {"thinking", "assistant"}


def test_call_ids_the_wire_refuses_are_rewritten_alike_for_call_and_result() -> None:
    odd = "functions.read file:0/ü" + "x" * 80
    history = [
        Message.user("q"),
        Message.assistant([ToolUse(odd, "read_file", {"path": "a"})]),
        Message.tool_results([ToolResult(odd, "ok")]),
    ]
    body = encode_request(request(history), SEES)
    call = body["messages"][1]["content"][0]["toolUse"]["toolUseId"]
    assert call == body["messages"][2]["content"][0]["toolResult"]["toolUseId"]
    assert len(call) <= 64 and call == wire_id(odd)
    assert wire_id("toolu_01.a:b-c") == "toolu_01.a:b-c"
    assert wire_id(odd + "y") != call


def test_a_non_object_tool_input_is_wrapped_and_unwrapped() -> None:
    history = [
        Message.user("q"),
        Message.assistant([ToolUse("c1", "read_file", "not json {")]),
        Message.tool_results([ToolResult("c1", "bad arguments", is_error=True)]),
    ]
    body = encode_request(request(history), SEES)
    assert body["messages"][1]["content"][0]["toolUse"]["input"] == {"INVALID_JSON": "not json {"}
    assert decode_messages(body["messages"])[1] == history


def test_a_broken_history_is_refused_before_encoding() -> None:
    with pytest.raises(HistoryError):
        encode(request([Message.assistant([ToolUse("c", "read_file", {})])]), SEES)


# -- decoding ------------------------------------------------------------------------------


def answer(content: list[Any], stop: str = "end_turn", **usage: int) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15, **usage},
        "metrics": {"latencyMs": 100},
    }


def test_an_answer_keeps_its_order_signatures_and_usage() -> None:
    response = decode_response(
        answer(
            [
                {"reasoningContent": {"reasoningText": {"text": "think", "signature": "s1"}}},
                {"reasoningContent": {"redactedContent": "AAEC"}},
                {"text": "Let me look."},
                {"toolUse": {"toolUseId": "tooluse_1", "name": "read_file", "input": {"p": 1}}},
            ],
            "tool_use",
            cacheReadInputTokens=7,
            cacheWriteInputTokens=3,
        ),
        endpoint=ENDPOINT,
        model=MODEL,
    )
    assert response.message.content == (
        Thinking("think", "s1", ORIGIN),
        RedactedThinking("AAEC", ORIGIN),
        Text("Let me look."),
        ToolUse("tooluse_1", "read_file", {"p": 1}),
    )
    assert response.stop_reason == "tool_use"
    assert response.model == MODEL
    assert (response.usage.input_tokens, response.usage.output_tokens) == (10, 5)
    assert response.usage.cache_read_input_tokens == 7
    assert response.usage.cache_creation_input_tokens == 3


def test_redacted_content_as_boto3_bytes_reads_as_its_base64() -> None:
    response = decode_response(answer([{"reasoningContent": {"redactedContent": b"\x00\x01\x02"}}]))
    assert response.message.content == (RedactedThinking("AAEC", Origin(DIALECT, "", "")),)


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("model_context_window_exceeded", "max_tokens"),
        ("guardrail_intervened", "refusal"),
        ("content_filtered", "refusal"),
        ("something_new", "other"),
    ],
)
def test_stop_reasons_map_to_stop_reasons(stop: str, expected: str) -> None:
    assert decode_response(answer([{"text": "x"}], stop)).stop_reason == expected


def test_a_filtered_answer_with_no_text_is_a_refusal_saying_so() -> None:
    response = decode_response(answer([], "content_filtered"))
    assert response.refusal == "the answer was stopped (content_filtered)"
    assert response.message.content == (Text(response.refusal),)


def test_an_empty_answer_is_one_empty_text() -> None:
    assert decode_response(answer([])).message.content == (Text(""),)


def test_unknown_blocks_are_kept_whole_as_native_blocks() -> None:
    block = {"futureContent": {"content": [{"text": "later"}]}}
    response = decode_response(answer([block]), endpoint=ENDPOINT, model=MODEL)
    (opaque,) = response.message.content
    assert type(opaque) is Opaque
    assert (opaque.kind, json.loads(opaque.raw), opaque.origin, opaque.text) == (
        "futureContent",
        block,
        ORIGIN,
        "",
    )


def test_an_error_body_is_a_provider_error_with_status_and_message() -> None:
    with pytest.raises(ProviderError, match="The model returned") as caught:
        decode_response({"message": "The model returned the following errors"}, status=400)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"output": 3},
        {"output": {"message": {"content": 3}}},
        {"output": {"message": {"content": [3]}}},
        {"output": {"message": {"content": [{"text": 3}]}}},
        {"output": {"message": {"content": [{"toolUse": {"name": "f"}}]}}},
        {"output": {"message": {"content": [{"a": 1, "b": 2}]}}},
        {"output": {"message": {"content": []}}, "usage": {"inputTokens": -1}},
        {"output": {"message": {"content": [{"reasoningContent": {"reasoningText": 3}}]}}},
    ],
)
def test_hostile_answers_are_provider_errors(data: Any) -> None:
    with pytest.raises(ProviderError):
        decode_response(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(data=json_values)
def test_any_json_answer_decodes_or_is_a_provider_error(data: Any) -> None:
    for attempt in (
        lambda: decode_response(data),
        lambda: decode_response({"output": {"message": {"content": data}}}),
        lambda: decode_stream([data, {"messageStop": {"stopReason": "end_turn"}}]),
        lambda: decode_stream([{"contentBlockDelta": data}]),
    ):
        with contextlib.suppress(ProviderError):
            attempt()


@settings(max_examples=200, deadline=None)
@given(data=json_values)
def test_any_json_history_imports_or_is_a_block_error(data: Any) -> None:
    for messages in (data, [data], [{"role": "user", "content": [data]}]):
        try:
            decode_messages(messages)  # type: ignore[arg-type]
        except CarryallError as exc:
            assert isinstance(exc, BlockError)


# -- streams ---------------------------------------------------------------------------------


def stream_of(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """The ConverseStream events a whole answer arrives as, cut into small deltas."""
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    for i, block in enumerate(whole["output"]["message"]["content"]):
        if "toolUse" in block:
            call = block["toolUse"]
            events.append(
                {
                    "contentBlockStart": {
                        "contentBlockIndex": i,
                        "start": {"toolUse": {k: call[k] for k in ("toolUseId", "name")}},
                    }
                }
            )
            text = json.dumps(call["input"])
            for piece in (text[:3], text[3:]):
                delta = {"toolUse": {"input": piece}}
                events.append({"contentBlockDelta": {"contentBlockIndex": i, "delta": delta}})
        elif "text" in block:
            for piece in (block["text"][:2], block["text"][2:]):
                delta = {"text": piece}
                events.append({"contentBlockDelta": {"contentBlockIndex": i, "delta": delta}})
        elif "citationsContent" in block:
            # Cited text streams as its text, then one `citation` delta per citation.
            cited = block["citationsContent"]
            (part,) = cited["content"]
            deltas = [{"text": part["text"][:4]}, {"text": part["text"][4:]}]
            deltas += [{"citation": citation} for citation in cited["citations"]]
            for delta in deltas:
                events.append({"contentBlockDelta": {"contentBlockIndex": i, "delta": delta}})
        else:
            reasoning = block["reasoningContent"]
            if "redactedContent" in reasoning:
                deltas = [reasoning]
            else:
                text = reasoning["reasoningText"]["text"]
                deltas = [{"text": text[:2]}, {"text": text[2:]}]
                deltas.append({"signature": reasoning["reasoningText"]["signature"]})
            for delta in deltas:
                events.append(
                    {
                        "contentBlockDelta": {
                            "contentBlockIndex": i,
                            "delta": {"reasoningContent": delta},
                        }
                    }
                )
        events.append({"contentBlockStop": {"contentBlockIndex": i}})
    events.append({"messageStop": {"stopReason": whole["stopReason"]}})
    events.append({"metadata": {"usage": whole["usage"], "metrics": whole["metrics"]}})
    return events


def test_a_stream_decodes_to_the_same_answer_as_the_whole() -> None:
    whole = answer(
        [
            {"reasoningContent": {"reasoningText": {"text": "think", "signature": "s1"}}},
            {"reasoningContent": {"redactedContent": "AAEC"}},
            {"text": "Let me look."},
            {"toolUse": {"toolUseId": "tooluse_1", "name": "read_file", "input": {"p": [1]}}},
        ],
        "tool_use",
        cacheReadInputTokens=7,
    )
    decoder = StreamDecoder(Target(endpoint=ENDPOINT, model=MODEL))
    shown = "".join(decoder.feed(event) for event in stream_of(whole))
    assert shown == "Let me look."
    assert decoder.response() == decode_response(whole, endpoint=ENDPOINT, model=MODEL)


CITED = {
    "citationsContent": {
        "content": [{"text": "The office opens at nine."}],
        "citations": [
            {
                "title": "hours.pdf",
                "sourceContent": [{"text": "Opening hours: 9:00"}],
                "location": {"documentChar": {"documentIndex": 0, "start": 0, "end": 19}},
            },
            {"title": "faq.txt", "location": {"documentPage": {"documentIndex": 1, "start": 2}}},
        ],
    }
}


def test_streamed_citations_are_kept_as_the_whole_answer_keeps_them() -> None:
    whole = answer([{"text": "Checking."}, CITED, {"text": "Anything else?"}])
    decoder = StreamDecoder(Target(endpoint=ENDPOINT, model=MODEL))
    shown = "".join(decoder.feed(event) for event in stream_of(whole))
    assert shown == "Checking.The office opens at nine.Anything else?"
    response = decoder.response()
    assert response == decode_response(whole, endpoint=ENDPOINT, model=MODEL)
    cited = response.message.content[1]
    assert isinstance(cited, Text) and cited.text == "The office opens at nine."
    assert [c.title for c in cited.citations] == ["hours.pdf", "faq.txt"]
    raws = [json.loads(c.raw) for c in cited.citations]
    assert raws == CITED["citationsContent"]["citations"]


def test_a_streamed_server_tool_round_keeps_its_input_and_result() -> None:
    # A server tool's call and result stream as native blocks: the call's input
    # in `toolUse` deltas, the result's content in `toolResult` deltas.
    call = {"toolUseId": "tooluse_s1", "name": "nova_grounding", "type": "server_tool_use"}
    result = {"toolUseId": "tooluse_s1", "type": "nova_grounding_result", "status": "success"}
    content = [{"text": "Found 2 pages."}, {"json": {"urls": ["https://europa.eu/112"]}}]
    whole = answer(
        [
            {"toolUse": {**call, "input": {"query": "112"}}},
            {"toolResult": {**result, "content": content}},
            {"text": "Call 112."},
        ]
    )
    events: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]
    starts = [{"toolUse": call}, {"toolResult": result}]
    deltas: list[list[dict[str, Any]]] = [
        [{"toolUse": {"input": '{"que'}}, {"toolUse": {"input": 'ry": "112"}'}}],
        [{"toolResult": content[:1]}, {"toolResult": content[1:]}],
    ]
    for i, (start, pieces) in enumerate(zip(starts, deltas, strict=True)):
        events.append({"contentBlockStart": {"contentBlockIndex": i, "start": start}})
        for delta in pieces:
            events.append({"contentBlockDelta": {"contentBlockIndex": i, "delta": delta}})
        events.append({"contentBlockStop": {"contentBlockIndex": i}})
    delta = {"text": "Call 112."}
    events.append({"contentBlockDelta": {"contentBlockIndex": 2, "delta": delta}})
    events.append({"messageStop": {"stopReason": "end_turn"}})
    events.append({"metadata": {"usage": whole["usage"], "metrics": whole["metrics"]}})
    decoder = StreamDecoder(Target(endpoint=ENDPOINT, model=MODEL))
    assert "".join(decoder.feed(event) for event in events) == "Call 112."
    response = decoder.response()
    assert response == decode_response(whole, endpoint=ENDPOINT, model=MODEL)
    kinds = [type(b).__name__ for b in response.message.content]
    assert kinds == ["ServerToolCall", "ServerToolResult", "Text"]
    call, result = response.message.content[:2]
    assert result.call_id == call.id  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("delta", "named"),
    [
        ({"citation": ["x"]}, r"\.delta\.citation must be a JSON object"),
        ({"toolResult": {"text": "x"}}, r"\.delta\.toolResult must be a list"),
        ({"toolResult": ["7006652"]}, r"\.delta\.toolResult\[0\] must be a JSON object"),
        ({"toolResult": [{"text": "x"}]}, ": a tool result's content before its contentBlockStart"),
    ],
)
def test_a_malformed_citation_or_result_delta_is_named(delta: Any, named: str) -> None:
    decoder = StreamDecoder(Target(endpoint=ENDPOINT, model=MODEL))
    with pytest.raises(ProviderError, match=r"stream event 1\.contentBlockDelta" + named):
        decoder.feed({"contentBlockDelta": {"contentBlockIndex": 0, "delta": delta}})


def _result_started(*deltas: dict[str, Any]) -> list[dict[str, Any]]:
    start = {"toolUseId": "tooluse_c1", "type": "nova_code_interpreter_result", "status": "success"}
    events: list[dict[str, Any]] = [
        {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolResult": start}}}
    ]
    for delta in deltas:
        events.append({"contentBlockDelta": {"contentBlockIndex": 0, "delta": delta}})
    return [*events, {"contentBlockStop": {"contentBlockIndex": 0}}]


@pytest.mark.parametrize(
    ("delta", "named"),
    [
        ({"text": "7006652"}, "text in a toolResult block"),
        ({"toolUse": {"input": "{}"}}, "a call's input in a toolResult block"),
    ],
)
def test_a_piece_of_another_kind_in_a_streamed_result_is_a_clear_error(
    delta: dict[str, Any], named: str
) -> None:
    with pytest.raises(ProviderError, match=r"stream event 2\.contentBlockDelta: " + named):
        decode_stream(_result_started(delta))


def test_a_result_piece_in_a_text_block_is_a_clear_error() -> None:
    events = [
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "The answer"}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolResult": [{"text": "7"}]}}},
    ]
    with pytest.raises(ProviderError, match="a tool result's content in a text block"):
        decode_stream(events)


def test_a_streamed_code_result_is_the_whole_answers_and_an_unknown_delta_is_named() -> None:
    output = {"json": {"stdOut": "7006652", "stdErr": "", "exitCode": 0, "isError": False}}
    events = _result_started({"toolResult": [output]}, {"video": {"frame": 1}})
    events.append({"messageStop": {"stopReason": "end_turn"}})
    streamed = decode_stream(events, endpoint=ENDPOINT, model=MODEL)
    start = events[0]["contentBlockStart"]["start"]["toolResult"]
    whole = answer([{"toolResult": {**start, "content": [output]}}])
    assert streamed.message == decode_response(whole, endpoint=ENDPOINT, model=MODEL).message
    assert streamed.message.content[0].output == "7006652"  # type: ignore[attr-defined]
    (lost,) = streamed.downgrades
    assert "video, a delta carryall does not model" in lost.reason


def test_a_malformed_streamed_call_is_counted_and_kept_as_its_text() -> None:
    events = [
        {
            "contentBlockStart": {
                "contentBlockIndex": 0,
                "start": {"toolUse": {"toolUseId": "t1", "name": "read_file"}},
            }
        },
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"p": '}}}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]
    response = decode_stream(events)
    assert response.malformed_tool_args == 1
    assert response.message.content == (ToolUse("t1", "read_file", '{"p": '),)


def test_a_stream_without_its_message_stop_is_a_retryable_error() -> None:
    decoder = StreamDecoder()
    decoder.feed({"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "hi"}}})
    with pytest.raises(ProviderError, match="truncated") as caught:
        decoder.response()
    assert caught.value.retryable


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [
        ("throttlingException", True),
        ("modelStreamErrorException", True),
        ("internalServerException", True),
        ("validationException", False),
    ],
)
def test_an_exception_event_is_a_provider_error(kind: str, retryable: bool) -> None:
    with pytest.raises(ProviderError, match="slow down") as caught:
        StreamDecoder().feed({kind: {"message": "slow down"}})
    assert (caught.value.kind, caught.value.retryable) == (kind, retryable)


def test_a_block_after_the_message_stop_is_refused() -> None:
    decoder = StreamDecoder()
    decoder.feed({"messageStop": {"stopReason": "end_turn"}})
    with pytest.raises(ProviderError, match="after messageStop"):
        decoder.feed({"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "x"}}})


# -- importing -------------------------------------------------------------------------------


def test_images_inside_a_result_are_lifted_after_the_results() -> None:
    messages = [
        {"role": "user", "content": [{"text": "shoot"}]},
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "t1", "name": "screenshot", "input": {}}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "t1",
                        "content": [
                            {"text": "taken"},
                            {"json": {"w": 1}},
                            {"image": {"format": "png", "source": {"bytes": SHOT.data}}},
                        ],
                    }
                },
                {"text": "what is it?"},
            ],
        },
    ]
    system, back = decode_messages(messages, system=[{"text": "a"}, {"text": "b"}])
    assert system == "a\n\nb"
    assert back[2] == Message(
        "user",
        (ToolResult("t1", 'taken\n{"w": 1}'), Image("image/png", SHOT.data), Text("what is it?")),
    )


def test_an_s3_image_is_kept_as_this_wires_native_block() -> None:
    block = {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/k.png"}}}}
    _, back = decode_messages([{"role": "user", "content": [block]}])
    (opaque,) = back[0].content
    assert isinstance(opaque, Opaque) and json.loads(opaque.raw) == block
    assert encode_request(Request(model=MODEL, messages=tuple(back)), SEES)["messages"] == [
        {"role": "user", "content": [block]}
    ]


def test_hostile_imports_are_block_errors() -> None:
    for messages in (
        3,
        [{"role": "system", "content": []}],
        [{"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": "a"}}}]}],
        [{"role": "user", "content": [{"toolResult": {"toolUseId": "", "content": []}}]}],
    ):
        with pytest.raises(BlockError):
            decode_messages(messages)  # type: ignore[arg-type]


# -- properties ------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), system=st.none() | st.text(min_size=1, max_size=20))
def test_any_history_validates_and_comes_back_as_the_wire_holds_it(
    history: list[Message], system: str | None
) -> None:
    body = json.loads(encode_request_bytes(request(history, system=system), SEES))
    check_bedrock_request(body)
    back_system, back = decode_messages(body["messages"], system=body.get("system"))
    assert back_system == system
    assert back == expected_back(history)


def test_base64_in_the_body_is_what_botocore_writes_for_the_bytes() -> None:
    data = bytes(range(256))
    image = Image.from_bytes("image/png", data)
    body = encode_request(Request(model=MODEL, messages=(Message.user("x", [image]),)), SEES)
    check_bedrock_request(body)
    assert base64.b64decode(body["messages"][0]["content"][1]["image"]["source"]["bytes"]) == data

"""Real recorded Gemini exchanges (issue 13): decoded, stream-decoded, re-encoded, replayed.

`tests/fixtures/recorded/gemini/pydantic_ai.json` holds 15 exchanges
recorded against the live Gemini API by pydantic-ai's test suite (sources in
`SOURCES.md` beside it). Each answer must decode with every text, thought,
`thoughtSignature` (on a thought, a call or a text part), call and usage
figure intact, read off the recording independently of the codec; each
request's history must import and encode again into an equivalent request
that the SDK's own types accept; and each exchange replayed through the
Gemini backend (the real `google-genai` SDK, a local server answering with
the recording) must give the same answer.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Message, Opaque, Origin, Text, Thinking, ToolUse
from carryall.providers import Capabilities, Request, ToolSpec
from carryall.providers.gemini import (
    SIGNATURE,
    StreamDecoder,
    decode_messages,
    decode_response,
    decode_stream,
    encode,
    encode_request,
)
from tests.support.scripted import Reply, served
from tests.support.sdk_wires import check_gemini_request

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "gemini"
CASSETTES = json.loads((FIXTURES / "pydantic_ai.json").read_text(encoding="utf-8"))
EXCHANGES = [
    pytest.param(exchange, id=f"{Path(c['source']['path']).stem}-{i}")
    for c in CASSETTES
    for i, exchange in enumerate(c["exchanges"])
]
STREAMED = [p for p in EXCHANGES if "stream" in p.values[0]]

# What each recorded finishReason means in the block model (the table).
STOPS = {"STOP": "end_turn", "MAX_TOKENS": "max_tokens", "SAFETY": "refusal", None: "other"}


def test_there_are_at_least_fifteen_recorded_exchanges_each_with_its_source() -> None:
    assert len(EXCHANGES) >= 15
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    for cassette in CASSETTES:
        source = cassette["source"]
        assert source["repo"] and source["path"] and len(source["commit"]) == 40
        assert source["path"].rsplit("/", 1)[-1] in sources


def chunks(exchange: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer as the chunks it came in (a whole answer is one)."""
    return exchange["stream"] if "stream" in exchange else [exchange["response"]]


def model_of(exchange: dict[str, Any]) -> str:
    return str(exchange["uri"]).rsplit("/", 1)[-1].split(":", 1)[0]


def unpadded(signature: str) -> bytes:
    """A signature's bytes, whichever base64 alphabet it was written in."""
    return base64.b64decode(signature.replace("-", "+").replace("_", "/"))


def figures(exchange: dict[str, Any]) -> dict[str, Any]:
    """What the recording says, read straight off its JSON, for the decoded answer to match."""
    text, thought, calls, signatures = [], [], [], []
    finish, usage, model = None, {}, None
    for data in chunks(exchange):
        model = data.get("modelVersion", model)
        usage = data.get("usageMetadata", usage)
        for candidate in data.get("candidates", [])[:1]:
            finish = candidate.get("finishReason", finish)
            for part in candidate.get("content", {}).get("parts", []):
                if "functionCall" in part:
                    call = part["functionCall"]
                    calls.append((call["name"], call.get("args", {})))
                    kind = "call"
                elif part.get("thought"):
                    thought.append(part["text"])
                    kind = "thought"
                else:
                    text.append(part["text"])
                    kind = "text"
                if "thoughtSignature" in part:
                    signatures.append((kind, part["thoughtSignature"]))
    cached = usage.get("cachedContentTokenCount", 0)
    prompt = usage.get("promptTokenCount", 0) + usage.get("toolUsePromptTokenCount", 0)
    output = usage.get("candidatesTokenCount", 0) + usage.get("thoughtsTokenCount", 0)
    stop = "tool_use" if calls and finish in ("STOP", None) else STOPS[finish]
    # A stop with nothing said reads as one line saying why (never an empty answer).
    refusal = f"the answer was stopped ({finish})" if stop == "refusal" and not text else None
    return {
        "text": refusal or "".join(text),
        "refusal": refusal,
        "thought": "".join(thought),
        "calls": calls,
        "signatures": signatures,
        "usage": (prompt - cached, output, cached),
        "model": model,
        "stop": stop,
    }


def decoded_figures(message: Message, response: Any) -> dict[str, Any]:
    signatures: list[tuple[str, str]] = []
    for block in message.content:
        if isinstance(block, ToolUse) and block.signature:
            signatures.append(("call", block.signature))
        elif isinstance(block, Thinking) and block.signature:
            signatures.append(("thought", block.signature))
        elif isinstance(block, Opaque) and block.kind == SIGNATURE:
            signatures.append(("text", json.loads(block.raw)["thoughtSignature"]))
    return {
        "text": message.text(),
        "refusal": response.refusal,
        "thought": message.thinking(),
        "calls": [(b.name, b.input) for b in message.tool_uses()],
        "signatures": signatures,
        "usage": (
            response.usage.input_tokens,
            response.usage.output_tokens,
            response.usage.cache_read_input_tokens,
        ),
        "model": response.model,
        "stop": response.stop_reason,
    }


def test_the_recordings_hold_every_kind_of_signature_and_stop() -> None:
    """The collection is worth its place: each signature kind and stop is in it."""
    seen = [figures(p.values[0]) for p in EXCHANGES]
    kinds = {kind for f in seen for kind, _ in f["signatures"]}
    assert {"call", "text"} <= kinds
    assert {f["stop"] for f in seen} >= {"end_turn", "tool_use", "max_tokens", "refusal", "other"}
    assert any(f["thought"] for f in seen) and STREAMED


@pytest.mark.parametrize("exchange", EXCHANGES)
def test_every_recorded_answer_decodes_with_every_figure_intact(exchange: dict[str, Any]) -> None:
    endpoint = "generativelanguage.googleapis.com"
    if "stream" in exchange:
        response = decode_stream(exchange["stream"], endpoint=endpoint)
    else:
        response = decode_response(exchange["response"], endpoint=endpoint)
    assert decoded_figures(response.message, response) == figures(exchange)
    # Every signature is stamped with where it was made.
    for block in response.message.content:
        if isinstance(block, Opaque | Thinking | ToolUse) and getattr(block, "origin", None):
            assert block.origin == Origin("gemini", endpoint, figures(exchange)["model"])


@pytest.mark.parametrize("exchange", STREAMED)
def test_a_recorded_stream_shows_exactly_its_text(exchange: dict[str, Any]) -> None:
    decoder = StreamDecoder()
    shown = "".join(decoder.feed(chunk) for chunk in exchange["stream"])
    assert shown == figures(exchange)["text"]
    assert decoder.response().message.text() == shown


def test_a_signed_text_part_goes_back_on_its_part_to_its_origin_only() -> None:
    (exchange,) = [
        p.values[0]
        for p in EXCHANGES
        if any(k == "text" for k, _ in figures(p.values[0])["signatures"])
        and not figures(p.values[0])["calls"]
        and figures(p.values[0])["thought"] == ""
    ]
    sent = exchange["request"]
    answer = decode_response(exchange["response"], endpoint="generativelanguage.googleapis.com")
    _, history = decode_messages(sent["contents"])
    history.append(answer.message)
    history.append(Message.user("And of Spain?"))
    (part,) = exchange["response"]["candidates"][0]["content"]["parts"]
    home = Request(
        model=answer.model or "",
        endpoint="generativelanguage.googleapis.com",
        messages=tuple(history),
    )
    body = encode_request(home, Capabilities(vision=True))
    check_gemini_request(body)
    assert body["contents"][-2]["parts"] == [part]
    # Vertex is another endpoint: the text goes, its signature does not, and the report says so.
    abroad = encode(
        Request(
            model=answer.model or "", endpoint="aiplatform.googleapis.com", messages=home.messages
        ),
        Capabilities(vision=True),
    )
    assert abroad.body["contents"][-2]["parts"] == [{"text": part["text"]}]
    (left,) = abroad.downgrades
    assert left.kind == "opaque" and left.index == len(history) - 2
    assert "thoughtSignature" in left.reason


def seen(content: dict[str, Any]) -> tuple[Any, ...]:
    """What the model is shown of one content, whichever form it was written in."""
    parts: list[tuple[Any, ...]] = []
    for part in content["parts"]:
        if "functionCall" in part:
            call = part["functionCall"]
            signature = part.get("thoughtSignature")
            parts.append(("call", call.get("id"), call["name"], call.get("args", {}), signature))
        elif "functionResponse" in part:
            answer = part["functionResponse"]
            response = answer["response"]
            # A result is text in the block model: an object that is not the
            # wire's own {"output"} or {"error"} goes as its JSON text.
            if set(response) in ({"output"}, {"error"}):
                (key,) = response
                value = response[key]
            else:
                key, value = "output", json.dumps(response, ensure_ascii=False)
            parts.append(("response", answer["id"], answer["name"], key, value))
        else:
            parts.append(("text", part["text"], part.get("thought", False)))
    return (content.get("role", "user"), tuple(parts))


def test_seen_tells_a_changed_history_apart() -> None:
    call = {"functionCall": {"id": "c", "name": "f", "args": {}}, "thoughtSignature": "AAAA"}
    assert seen({"role": "model", "parts": [call]}) != seen(
        {"role": "model", "parts": [{**call, "thoughtSignature": "BBBB"}]}
    )
    answer = {"functionResponse": {"id": "c", "name": "f", "response": {"return_value": "x"}}}
    assert seen({"parts": [answer]}) == seen(
        {
            "parts": [
                {
                    "functionResponse": {
                        "id": "c",
                        "name": "f",
                        "response": {"output": '{"return_value": "x"}'},
                    }
                }
            ]
        }
    )


@pytest.mark.parametrize("exchange", EXCHANGES)
def test_every_recorded_history_imports_and_encodes_into_an_equivalent_request(
    exchange: dict[str, Any],
) -> None:
    sent = exchange["request"]
    system, messages = decode_messages(sent["contents"], system=sent.get("systemInstruction"))
    tools = tuple(
        ToolSpec(d["name"], d.get("description") or "", d["parameters_json_schema"])
        for tool in sent.get("tools", ())
        for d in tool["functionDeclarations"]
    )
    mode = sent.get("toolConfig", {}).get("functionCallingConfig", {}).get("mode")
    config = sent.get("generationConfig", {})
    options: dict[str, Any] = {}
    if "maxOutputTokens" in config:
        options["max_tokens"] = config["maxOutputTokens"]
    body = encode_request(
        Request(
            model=model_of(exchange),
            messages=tuple(messages),
            system=system,
            tools=tools,
            tool_choice={"ANY": "required", "AUTO": "auto", "NONE": "none", None: None}[mode],
            **options,
        ),
        Capabilities(vision=True),
    )
    check_gemini_request(body)
    assert [seen(c) for c in body["contents"]] == [seen(c) for c in sent["contents"]]
    if "systemInstruction" in sent:
        assert body["systemInstruction"]["parts"] == [
            {"text": p["text"]} for p in sent["systemInstruction"]["parts"]
        ]
    declared = [d for tool in body.get("tools", ()) for d in tool["functionDeclarations"]]
    assert [(d["name"], d["description"], d["parametersJsonSchema"]) for d in declared] == [
        (t.name, t.description, t.input_schema) for t in tools
    ]
    if mode is not None:
        assert body["toolConfig"]["functionCallingConfig"]["mode"] == mode
    if "maxOutputTokens" in config:
        assert body["generationConfig"]["maxOutputTokens"] == config["maxOutputTokens"]


@pytest.mark.parametrize("exchange", EXCHANGES)
def test_every_recorded_exchange_replays_through_the_gemini_backend(
    exchange: dict[str, Any],
) -> None:
    pytest.importorskip("google.genai")
    from carryall.transport.gemini import GeminiBackend

    if "stream" in exchange:
        sse = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in exchange["stream"])
        reply = Reply(sse=sse)
    else:
        reply = Reply(status=exchange["status"], body=exchange["response"])
    sent = exchange["request"]
    system, messages = decode_messages(sent["contents"], system=sent.get("systemInstruction"))
    with served([reply]) as server:
        backend = GeminiBackend(
            model=model_of(exchange),
            base_url=server.url,
            api_key="k",
            stream="stream" in exchange,
            max_retries=0,
        )
        try:
            response = backend.complete(Request(model="", messages=tuple(messages), system=system))
        finally:
            backend.close()
    got = decoded_figures(response.message, response)
    want = figures(exchange)
    # The SDK holds a signature as bytes and writes it back URL-safe: the bytes must agree.
    got["signatures"] = [(k, unpadded(s)) for k, s in got["signatures"]]
    want["signatures"] = [(k, unpadded(s)) for k, s in want["signatures"]]
    assert got == want
    (posted,) = server.requests
    method = "streamGenerateContent" if "stream" in exchange else "generateContent"
    assert f"/models/{model_of(exchange)}:{method}" in posted["path"]


def test_a_recorded_signed_text_is_plain_text_to_every_reader() -> None:
    answers = [
        decode_response(p.values[0]["response"])
        for p in EXCHANGES
        if "response" in p.values[0]
        and any(k == "text" for k, _ in figures(p.values[0])["signatures"])
    ]
    assert answers
    for answer in answers:
        (text,) = [b for b in answer.message.content if isinstance(b, Text)]
        assert answer.message.text() == text.text and text.text

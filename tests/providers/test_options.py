"""Request options on every wire: where each lands, what each wire leaves off and names.

One request asks for every option (`ModelOptions`), a strict tool, parallel
calls turned off, thinking with a budget and an effort. On every wire the
body validates against the official SDK's request type, a golden
(`goldens/options_<wire>.json`: the body without its history, and the
reasons of the option downgrades) shows where each option landed, and the
options the wire has no field for are exactly the ones its downgrades name.
`CARRYALL_UPDATE_GOLDENS=1` rewrites the goldens.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from pydantic import TypeAdapter

from carryall.blocks import Downgrade, Message
from carryall.errors import ProviderError
from carryall.providers import Capabilities, Encoded, ModelOptions, Request, ToolSpec
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import bedrock as bedrock_codec
from carryall.providers import gemini as gemini_codec
from carryall.providers import openai as openai_codec
from carryall.providers import prompt as prompt_codec
from carryall.providers import responses as responses_codec
from carryall.providers.options import NO_OPTIONS, OPTION_NAMES, REQUEST
from tests.support.sdk_openai import _materialize, check_openai_request
from tests.support.sdk_wires import (
    BEDROCK_MODEL,
    check_bedrock_request,
    check_gemini_request,
    check_responses_request,
)

GOLDENS = Path(__file__).parent / "goldens"

EVERY = ModelOptions(
    temperature=0.2,
    top_p=0.9,
    top_k=40,
    seed=7,
    stop=("END",),
    presence_penalty=0.5,
    frequency_penalty=0.25,
    parallel_tool_calls=False,
    service_tier="flex",
    store=True,
)

TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        strict=True,
    ),
    ToolSpec("list_dir", "List a folder.", {"type": "object", "properties": {}}),
)

NOVA = "amazon.nova-pro-v1:0"


def _request(model: str, options: ModelOptions = EVERY, **fields: Any) -> Request:
    base: dict[str, Any] = {
        "system": "Be brief.",
        "tools": TOOLS,
        "thinking": True,
        "thinking_budget": 2048,
        "effort": "low",
    }
    return Request(
        model=model,
        messages=(Message.user("Read notes.txt."),),
        options=options,
        **{**base, **fields},
    )


_ANTHROPIC = TypeAdapter(MessageCreateParamsNonStreaming)
ANTHROPIC_SAMPLING = ("temperature", "top_p", "top_k")
"""The Messages API's sampling fields, gone from the SDK's typed parameters (its migration
guide sends them as body fields, `extra_body`) but read by the models that still sample."""
LLAMA_OWN = ("top_k", "thinking_budget_tokens", "seed", "stop")
"""Body fields llama-server reads that the OpenAI SDK types have no place for (on
Chat Completions only `top_k` and `thinking_budget_tokens`; on Responses all four)."""


def _check_anthropic(body: dict[str, Any]) -> None:
    plain = _json({k: v for k, v in body.items() if k not in ANTHROPIC_SAMPLING})
    validated = _materialize(_ANTHROPIC.validate_python(plain))
    assert validated == plain, "the SDK type dropped or changed something: an unknown key?"


def _json(value: Any) -> Any:
    """`value` as JSON reads it back (a tuple the codec shares is a list on the wire)."""
    return json.loads(json.dumps(value))


def _without(body: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


THINKING = Capabilities(thinking=True)
PROMPT = Capabilities(native_tools=False, thinking=True)

# wire name -> (encode, SDK check, the options it leaves off and names)
WIRES: dict[str, tuple[Callable[[], Encoded], Callable[[dict[str, Any]], None], set[str]]] = {
    "anthropic": (
        lambda: anthropic_codec.encode(_request("claude-sonnet-4-5"), THINKING),
        _check_anthropic,
        # "flex" is no tier of Anthropic's (auto, standard_only).
        {"seed", "presence_penalty", "frequency_penalty", "store", "service_tier"},
    ),
    "openai": (
        lambda: openai_codec.encode(_request("gpt-5"), THINKING, "openai"),
        check_openai_request,
        {"top_k", "thinking_budget"},
    ),
    "llama-server": (
        lambda: openai_codec.encode(_request("smollm2"), THINKING, "llama-server"),
        lambda body: check_openai_request(_without(body, LLAMA_OWN[:2])),
        {"service_tier", "store"},
    ),
    "responses": (
        lambda: responses_codec.encode(_request("gpt-5"), THINKING),
        check_responses_request,
        {"top_k", "seed", "stop", "presence_penalty", "frequency_penalty", "thinking_budget"},
    ),
    "responses_llama": (
        lambda: responses_codec.encode(_request("smollm2"), THINKING, llama=True),
        lambda body: check_responses_request(
            _without(body, (*LLAMA_OWN, "presence_penalty", "frequency_penalty"))
        ),
        {"service_tier", "store"},
    ),
    "gemini": (
        lambda: gemini_codec.encode(_request("gemini-2.5-flash"), THINKING),
        check_gemini_request,
        {"parallel_tool_calls", "effort"},
    ),
    "bedrock": (
        lambda: bedrock_codec.encode(_request(BEDROCK_MODEL), THINKING),
        lambda body: check_bedrock_request(body, BEDROCK_MODEL),
        {"seed", "presence_penalty", "frequency_penalty", "store", "parallel_tool_calls"}
        | {"effort"},
    ),
    "bedrock_nova": (
        lambda: bedrock_codec.encode(_request(NOVA), THINKING),
        lambda body: check_bedrock_request(body, NOVA),
        {"seed", "presence_penalty", "frequency_penalty", "store", "parallel_tool_calls"}
        | {"effort", "top_k", "thinking"},
    ),
    "prompt_responses": (
        lambda: responses_codec.encode(_request("gpt-5"), PROMPT),
        check_responses_request,
        {"top_k", "seed", "stop", "presence_penalty", "frequency_penalty", "thinking_budget"}
        | {"strict", "parallel_tool_calls"},
    ),
    "prompt_openai": (
        lambda: prompt_codec.encode(_request("gpt-5"), PROMPT, dialect="openai"),
        check_openai_request,
        {"top_k", "thinking_budget", "strict", "parallel_tool_calls"},
    ),
    "prompt_llama_constrained": (
        lambda: prompt_codec.encode(
            _request("smollm2"), PROMPT, dialect="llama-server", constrained=True
        ),
        lambda body: check_openai_request(_without(body, LLAMA_OWN[:2])),
        # The schema holds every call to its tool's: strict is kept, not named.
        {"service_tier", "store", "parallel_tool_calls"},
    ),
}

HISTORY_KEYS = ("messages", "input", "contents")
WIRE_LABELS = {
    "responses_llama": "llama-server",
    "bedrock_nova": "bedrock",
    "prompt_openai": "openai",
    "prompt_responses": "responses",
    "prompt_llama_constrained": "llama-server",
}
"""How each case's downgrades name its wire, where that is not the case's own name."""


def _named(downgrades: tuple[Downgrade, ...]) -> list[str]:
    """The reasons of the request-wide `option` downgrades, in order."""
    return [d.reason for d in downgrades if d.kind == "option" and d.index == REQUEST]


def _golden(name: str, encoded: Encoded) -> dict[str, Any]:
    body = {k: v for k, v in encoded.body.items() if k not in HISTORY_KEYS}
    return json.loads(json.dumps({"body": body, "left_off": _named(encoded.downgrades)}))


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_every_option_lands_where_the_golden_shows_and_validates(wire: str) -> None:
    encode, check, _ = WIRES[wire]
    encoded = encode()
    check(encoded.body)
    path = GOLDENS / f"options_{wire}.json"
    got = _golden(wire, encoded)
    if os.environ.get("CARRYALL_UPDATE_GOLDENS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text()), f"differs from {path}"


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_each_option_the_wire_lacks_is_named_by_its_downgrade(wire: str) -> None:
    encode, _, lacking = WIRES[wire]
    reasons = _named(encode().downgrades)
    names = [reason.split(":", 1)[0] for reason in reasons]
    assert sorted(names) == sorted(lacking), reasons
    label = WIRE_LABELS.get(wire, wire)
    for reason in reasons:
        assert f"the {label} wire" in reason or reason.startswith("extra."), reason


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_every_option_left_at_its_default_sends_and_names_nothing(wire: str) -> None:
    encode, _, _ = WIRES[wire]
    body = encode().body
    # The same request with no options: none of their keys, no option downgrade.
    plain = _request("m", NO_OPTIONS, tools=(), thinking=False, thinking_budget=None, effort=None)
    for encoded in (
        anthropic_codec.encode(plain, THINKING),
        openai_codec.encode(plain, THINKING, "llama-server"),
        responses_codec.encode(plain, THINKING),
        gemini_codec.encode(plain, THINKING),
        bedrock_codec.encode(plain, THINKING),
    ):
        assert _named(encoded.downgrades) == []
        flat = json.dumps(encoded.body)
        for key in ("temperature", "top_p", "topP", "seed", "stop", "service_tier", "serviceTier"):
            assert f'"{key}"' not in flat
    assert body  # the full request still encodes


def test_the_option_names_are_the_fields_of_model_options() -> None:
    assert set(OPTION_NAMES) == set(ModelOptions.__struct_fields__)
    assert "extra" in OPTION_NAMES


def test_anthropic_takes_its_own_tiers_and_parallel_calls_on_the_tool_choice() -> None:
    options = ModelOptions(service_tier="auto", parallel_tool_calls=True)
    encoded = anthropic_codec.encode(
        _request("claude-sonnet-4-5", options, tool_choice="required", thinking=False),
        Capabilities(),
    )
    assert encoded.body["service_tier"] == "auto"
    assert encoded.body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": False}
    assert _named(encoded.downgrades) == []
    _check_anthropic(encoded.body)


def test_gemini_effort_is_the_thinking_level_without_a_budget() -> None:
    request = _request("gemini-3-pro", NO_OPTIONS, thinking_budget=None, effort="high")
    encoded = gemini_codec.encode(request, THINKING)
    assert encoded.body["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingLevel": "HIGH",
    }
    assert _named(encoded.downgrades) == []
    check_gemini_request(encoded.body)


def test_gemini_strict_tools_with_a_required_choice_keep_any() -> None:
    request = _request("gemini-2.5-flash", NO_OPTIONS, tool_choice="required", effort=None)
    body = gemini_codec.encode(request, THINKING).body
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}


def test_an_unknown_tier_is_named_with_the_tiers_the_wire_has() -> None:
    options = ModelOptions(service_tier="gold")
    encoded = openai_codec.encode(_request("gpt-5", options, thinking=False), Capabilities())
    (reason,) = _named(encoded.downgrades)
    assert reason.startswith("service_tier: the openai wire names no tier 'gold' (only auto,")
    assert "service_tier" not in encoded.body


# -- extra ---------------------------------------------------------------------


def test_extra_is_merged_into_its_own_wire_and_named_on_the_others() -> None:
    options = ModelOptions(
        extra={
            "openai": {"user": "abc", "metadata": {"run": "7"}},
            "gemini": {"labels": {"team": "a"}},
        }
    )
    request = _request("gpt-5", options, thinking=False)
    encoded = openai_codec.encode(request, Capabilities())
    assert encoded.body["user"] == "abc"
    assert encoded.body["metadata"] == {"run": "7"}
    check_openai_request(encoded.body)
    (reason,) = _named(encoded.downgrades)
    assert (
        reason
        == "extra.gemini: settings for the gemini wire (labels); left off this openai request"
    )
    gemini = gemini_codec.encode(request, Capabilities())
    assert "abc" not in json.dumps(gemini.body)
    assert [r.split(":")[0] for r in _named(gemini.downgrades)] == ["extra.openai"]


def test_extra_objects_merge_key_by_key_into_what_carryall_writes() -> None:
    options = ModelOptions(extra={"gemini": {"generationConfig": {"candidateCount": 1}}})
    body = gemini_codec.encode(_request("gemini-2.5-flash", options), THINKING).body
    assert body["generationConfig"]["candidateCount"] == 1
    assert body["generationConfig"]["maxOutputTokens"] == 4096
    check_gemini_request(body)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"openai": {"model": "other"}}, "options.extra.openai.model: carryall already sets"),
        (
            {"openai": {"tools": [{"type": "function"}]}},
            "options.extra.openai.tools: carryall already sets",
        ),
        ({"openai": {"stream": False}}, "options.extra.openai.stream: carryall sets 'stream'"),
        ({"mistral": {"safe_prompt": True}}, "options.extra: 'mistral' is not a wire"),
    ],
)
def test_extra_never_overwrites_what_carryall_sets(
    extra: dict[str, dict[str, Any]], message: str
) -> None:
    request = _request("gpt-5", ModelOptions(extra=extra), thinking=False)
    with pytest.raises(ProviderError, match=message.replace(".", r"\.")):
        openai_codec.encode(request, Capabilities())


def test_the_bytes_carry_the_same_options_and_report_as_the_body() -> None:
    request = _request("claude-sonnet-4-5", EVERY)
    encoded = anthropic_codec.encode(request, THINKING)
    sent = anthropic_codec.encode_sent(request, THINKING)
    assert json.loads(sent.data) == _json(encoded.body)
    assert sent.downgrades == encoded.downgrades
    request = _request("gpt-5", EVERY)
    encoded = openai_codec.encode(request, THINKING)
    sent = openai_codec.encode_sent(request, THINKING)
    assert json.loads(sent.data) == _json(encoded.body)
    assert sent.downgrades == encoded.downgrades
    encoded = responses_codec.encode(request, THINKING)
    sent = responses_codec.encode_sent(request, THINKING)
    assert json.loads(sent.data) == _json(encoded.body)
    assert sent.downgrades == encoded.downgrades


# -- which stop sequence ended the answer ------------------------------------------


def test_anthropic_names_the_stop_sequence_plain_and_streamed() -> None:
    answer = {
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "one two"}],
        "stop_reason": "stop_sequence",
        "stop_sequence": "END",
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    response = anthropic_codec.decode_response(answer)
    assert (response.stop_reason, response.stop_sequence) == ("end_turn", "END")
    events = [
        {
            "type": "message_start",
            "message": {**answer, "content": [], "stop_reason": None, "stop_sequence": None},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "stop_sequence", "stop_sequence": "END"},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    streamed = anthropic_codec.decode_stream(events)
    assert streamed.stop_sequence == "END"
    ended = anthropic_codec.decode_response(
        {**answer, "stop_reason": "end_turn", "stop_sequence": None}
    )
    assert ended.stop_sequence is None


def test_a_chat_server_that_names_the_stop_string_is_read_plain_and_streamed() -> None:
    # vLLM's choice `stop_reason`: the matched string, or a stop token's number.
    answer = {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "one two"},
                "finish_reason": "stop",
                "stop_reason": "END",
            }
        ],
    }
    assert openai_codec.decode_response(answer).stop_sequence == "END"
    token = {**answer, "choices": [{**answer["choices"][0], "stop_reason": 128001}]}
    assert openai_codec.decode_response(token).stop_sequence is None
    chunks: list[Any] = [
        {"choices": [{"index": 0, "delta": {"content": "one"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": "END"}]},
        "[DONE]",
    ]
    assert openai_codec.decode_stream(chunks).stop_sequence == "END"


def test_bedrock_asks_an_anthropic_model_for_the_stop_sequence_and_reads_it() -> None:
    body = bedrock_codec.encode(
        _request(BEDROCK_MODEL, ModelOptions(stop=("END",))), Capabilities()
    ).body
    assert body["additionalModelResponseFieldPaths"] == ["/stop_sequence"]
    answer = {
        "output": {"message": {"role": "assistant", "content": [{"text": "one"}]}},
        "stopReason": "stop_sequence",
        "additionalModelResponseFields": {"stop_sequence": "END"},
        "usage": {"inputTokens": 3, "outputTokens": 1},
    }
    response = bedrock_codec.decode_response(answer, model=BEDROCK_MODEL)
    assert (response.stop_reason, response.stop_sequence) == ("end_turn", "END")
    events: list[Any] = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "one"}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {
            "messageStop": {
                "stopReason": "stop_sequence",
                "additionalModelResponseFields": {"stop_sequence": "END"},
            }
        },
    ]
    assert bedrock_codec.decode_stream(events, model=BEDROCK_MODEL).stop_sequence == "END"

"""What a Gemini answer holds beside its parts, and what it streams in pieces, all kept or named.

Vertex streams a call's arguments as `partialArgs` (each a value at a
`jsonPath`); Gemini and Vertex give token probabilities
(`logprobsResult`, `avgLogprobs`) when asked; grounding
(`groundingMetadata`) has no place in a request, so sending an answer
back names it left off.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from carryall.blocks import Message, ServerToolCall, ServerToolResult
from carryall.errors import ProviderError
from carryall.providers import Capabilities, Logprobs, Request, Target, TokenLogprob
from carryall.providers.gemini import decode_response, decode_stream, encode, encode_bytes
from tests.support.sdk_wires import check_gemini_request

VERTEX = "us-central1-aiplatform.googleapis.com"


def chunk(part: dict[str, Any], **candidate: Any) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, **candidate}],
        "modelVersion": "gemini-3-pro-preview",
    }


def streamed_call(*pieces: list[dict[str, Any]], name: str = "plan") -> list[dict[str, Any]]:
    """A call announced by name, then one chunk for each list of pieces, then its end."""
    stream = [chunk({"functionCall": {"name": name, "willContinue": True}})]
    for given in pieces:
        stream.append(chunk({"functionCall": {"partialArgs": given, "willContinue": True}}))
    stream.append(chunk({"functionCall": {}}, finishReason="STOP"))
    return stream


# -- streamed call arguments (partialArgs) ------------------------------------------------------


def test_streamed_arguments_of_every_kind_take_their_places_in_the_order_written() -> None:
    stream = streamed_call(
        [{"jsonPath": "$.trip['from city']", "stringValue": "Bos", "willContinue": True}],
        [
            {"jsonPath": "$.trip['from city']", "stringValue": "ton"},
            {"jsonPath": "$.trip.nights", "numberValue": 2.5},
            {"jsonPath": "$.trip.legs[1].by", "stringValue": "rail"},
            {"jsonPath": "$.trip.legs[0]", "nullValue": "NULL_VALUE"},
            {"jsonPath": '$["refundable"]', "boolValue": False},
        ],
    )
    answer = decode_stream(stream, endpoint=VERTEX)
    [call] = answer.message.tool_uses()
    assert call.input == {
        "trip": {"from city": "Boston", "nights": 2.5, "legs": [None, {"by": "rail"}]},
        "refundable": False,
    }
    # The order the model wrote them in, a string's place taken at its first piece.
    assert list(call.input["trip"]) == ["from city", "nights", "legs"]
    assert answer.stop_reason == "tool_use" and answer.downgrades == ()


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("$.a[*]", "breaks at character 3"),
        ("$..a", "breaks at character 1"),
        ("$.a['b'", "breaks at character 3"),
        ("$.a b", "breaks at character 3"),
        ("a.b", "does not begin at the root"),
        ("$", "names no argument"),
        ("$.a[5000]", "indexes past 4096"),
        ('$["a\\q"]', "broken escape"),
    ],
)
def test_a_malformed_json_path_is_a_provider_error_naming_it_and_its_place(
    path: str, says: str
) -> None:
    stream = streamed_call([{"jsonPath": path, "stringValue": "x"}])
    with pytest.raises(ProviderError, match="jsonPath") as caught:
        decode_stream(stream)
    message = str(caught.value)
    assert says in message and "partialArgs[0]" in message and "chunk 2" in message


@pytest.mark.parametrize(
    ("pieces", "says"),
    [
        ([{"jsonPath": "$.a", "stringValue": 5}], "stringValue must be a string"),
        ([{"jsonPath": "$.a", "numberValue": "5"}], "numberValue must be a number"),
        ([{"jsonPath": "$.a", "numberValue": True}], "numberValue must be a number"),
        ([{"jsonPath": "$.a", "boolValue": "yes"}], "boolValue must be true or false"),
        ([{"jsonPath": "$.a", "boolValue": True, "numberValue": 1}], "a piece is one value"),
        ([{"stringValue": "x"}], "needs a jsonPath string"),
        (
            [{"jsonPath": "$.a", "numberValue": 1}, {"jsonPath": "$.a.b", "numberValue": 2}],
            "runs through a value of another shape",
        ),
    ],
)
def test_a_piece_of_the_wrong_shape_is_a_provider_error(
    pieces: list[dict[str, Any]], says: str
) -> None:
    with pytest.raises(ProviderError, match=says):
        decode_stream(streamed_call(pieces))


def test_a_stream_that_finishes_mid_call_is_a_retryable_error_not_a_short_call() -> None:
    stream = streamed_call([{"jsonPath": "$.a", "stringValue": "half"}])
    stream[-1] = chunk({"functionCall": {"willContinue": True}}, finishReason="MAX_TOKENS")
    with pytest.raises(ProviderError, match="'plan' still said willContinue") as caught:
        decode_stream(stream)
    assert caught.value.retryable


def test_what_a_piece_carries_beside_its_value_is_named() -> None:
    stream = streamed_call([{"jsonPath": "$.a", "stringValue": "x", "confidence": 0.9}])
    answer = decode_stream(stream)
    [call] = answer.message.tool_uses()
    assert call.input == {"a": "x"}
    assert any("partialArgs[0].confidence" in d.reason for d in answer.downgrades)


# -- token probabilities ---------------------------------------------------------------------


def candidate(chosen: list[dict[str, Any]], top: list[list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "chosenCandidates": chosen,
        "topCandidates": [{"candidates": c} for c in top],
    }


def test_token_probabilities_are_kept_with_their_likeliest_alternatives() -> None:
    two = {"token": "2", "tokenId": 236778, "logProbability": -0.02}
    body = chunk(
        {"text": "2 ="},
        finishReason="STOP",
        avgLogprobs=-1.08,
        logprobsResult={
            **candidate(
                [two, {"token": " =", "tokenId": 578}],
                [[two, {"token": "4", "tokenId": 236812, "logProbability": -4.13}]],
            ),
            "logProbabilitySum": -0.02,
        },
    )
    answer = decode_response(body)
    assert answer.logprobs == Logprobs(
        tokens=(
            TokenLogprob(
                token="2",
                logprob=-0.02,
                token_id=236778,
                top=(
                    TokenLogprob(token="2", logprob=-0.02, token_id=236778),
                    TokenLogprob(token="4", logprob=-4.13, token_id=236812),
                ),
            ),
            # The wire's JSON leaves a zero out: no logProbability is a certain token.
            TokenLogprob(token=" =", logprob=0.0, token_id=578),
        ),
        average=-1.08,
        total=-0.02,
    )
    assert answer.downgrades == ()


def test_a_streams_token_probabilities_add_up_in_order() -> None:
    stream = [
        chunk({"text": "a"}, logprobsResult=candidate([{"token": "a", "logProbability": -1}], [])),
        chunk(
            {"text": "b"},
            finishReason="STOP",
            avgLogprobs=-1.5,
            logprobsResult=candidate([{"token": "b", "logProbability": -2}], []),
        ),
    ]
    kept = decode_stream(stream).logprobs
    assert kept is not None and kept.average == -1.5
    assert [(t.token, t.logprob) for t in kept.tokens] == [("a", -1.0), ("b", -2.0)]


def test_an_answer_without_token_probabilities_has_none() -> None:
    assert decode_response(chunk({"text": "x"}, finishReason="STOP")).logprobs is None


@pytest.mark.parametrize(
    ("result", "says"),
    [
        ({"chosenCandidates": "x"}, "chosenCandidates must be an array"),
        ({"chosenCandidates": [{"token": 3}]}, "token must be a string"),
        ({"chosenCandidates": [{"logProbability": "low"}]}, "logProbability must be a number"),
        ({"chosenCandidates": [{"tokenId": 1.5}]}, "tokenId must be an integer"),
        (candidate([], [[{"token": "a"}]]), "1 topCandidates for 0 chosenCandidates"),
    ],
)
def test_malformed_token_probabilities_are_provider_errors(
    result: dict[str, Any], says: str
) -> None:
    with pytest.raises(ProviderError, match=says):
        decode_response(chunk({"text": "x"}, finishReason="STOP", logprobsResult=result))


def test_what_token_probabilities_carry_beyond_the_form_is_named() -> None:
    result = candidate([{"token": "a", "logProbability": -1, "bytes": [97]}], [])
    answer = decode_response(chunk({"text": "a"}, finishReason="STOP", logprobsResult=result))
    assert answer.logprobs is not None and answer.logprobs.tokens[0].token == "a"
    assert any("chosenCandidates[0].bytes" in d.reason for d in answer.downgrades)


# -- grounding goes back named ---------------------------------------------------------------


def test_grounding_sent_back_to_its_own_model_is_named_as_left_off() -> None:
    passage = "Paris is the capital of France."
    body = chunk(
        {"text": "The capital is Paris."},
        finishReason="STOP",
        groundingMetadata={
            "groundingChunks": [
                {"retrievedContext": {"text": passage, "fileSearchStore": "fileSearchStores/x"}}
            ],
            "groundingSupports": [
                {
                    "segment": {"endIndex": 21, "text": "The capital is Paris."},
                    "groundingChunkIndices": [0],
                }
            ],
        },
    )
    answer = decode_response(body, endpoint="generativelanguage.googleapis.com")
    answer = answer.as_requested("gemini-3-pro-preview")
    history = [Message.user("Capital?"), answer.message, Message.user("Thanks.")]
    request = Request(
        model="gemini-3-pro-preview",
        endpoint="generativelanguage.googleapis.com",
        messages=tuple(history),
    )
    encoded = encode(request, Capabilities())
    check_gemini_request(encoded.body)
    assert passage not in json.dumps(encoded.body)
    grounded = [
        at
        for at, block in enumerate(answer.message.content)
        if isinstance(block, ServerToolCall | ServerToolResult)
    ]
    named = [d for d in encoded.downgrades if d.reason.startswith("groundingMetadata:")]
    assert [(d.index, d.block) for d in named] == [(1, at) for at in grounded]
    # The bytes a transport sends carry the same report.
    sent = encode_bytes(request, Target(caps=Capabilities()))
    assert sent.downgrades == encoded.downgrades

"""Token probabilities on the OpenAI-family wires, whole and streamed, kept in `Response.logprobs`.

Chat Completions (every dialect: OpenAI, OpenAI-compatible servers,
llama-server) gives them on the choice, `logprobs.content` and
`logprobs.refusal`, a stream chunk by chunk; Responses on each
`output_text` part and on each text delta. The shapes follow the openai
SDK's `ChoiceLogprobs`, `ChatCompletionTokenLogprob`,
`ResponseOutputText.Logprob` and `ResponseTextDeltaEvent.Logprob`;
llama-server adds each token's vocabulary `id`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Message
from carryall.errors import ProviderError
from carryall.providers import (
    Capabilities,
    Logprobs,
    ModelOptions,
    Request,
    TokenLogprob,
    responses,
)
from carryall.providers import openai as chat
from carryall.providers import prompt as prompt_mode
from tests.support.recorded import openai_sdk_check
from tests.support.sdk_wires import check_responses_request

RECORDED = Path(__file__).parent.parent / "fixtures" / "recorded" / "responses" / "2026"


def token(text: str, logprob: float, *top: dict[str, Any], **more: Any) -> dict[str, Any]:
    """A chosen token as the wire writes it: its UTF-8 bytes, and its likeliest rivals."""
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode()),
        "top_logprobs": list(top),
        **more,
    }


def rival(text: str, logprob: float, **more: Any) -> dict[str, Any]:
    return {"token": text, "logprob": logprob, "bytes": list(text.encode()), **more}


def completion(logprobs: Any, content: str | None = "Hi!", **message: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "logprobs": logprobs,
                "finish_reason": "stop",
            }
        ],
    }


def chunk(delta: dict[str, Any], logprobs: Any = None, finish: str | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}


HI = token("Hi", -0.25, rival("Hi", -0.25), rival("Hello", -1.75))
BANG = token("!", -0.5, rival("!", -0.5), rival(".", -1.0))


def test_a_whole_chat_answer_keeps_each_token_with_its_bytes_and_rivals() -> None:
    answer = chat.decode_response(completion({"content": [HI, BANG], "refusal": None}))
    assert answer.logprobs == Logprobs(
        tokens=(
            TokenLogprob(
                token="Hi",
                logprob=-0.25,
                token_bytes=(72, 105),
                top=(
                    TokenLogprob(token="Hi", logprob=-0.25, token_bytes=(72, 105)),
                    TokenLogprob(token="Hello", logprob=-1.75, token_bytes=tuple(b"Hello")),
                ),
            ),
            TokenLogprob(
                token="!",
                logprob=-0.5,
                token_bytes=(33,),
                top=(
                    TokenLogprob(token="!", logprob=-0.5, token_bytes=(33,)),
                    TokenLogprob(token=".", logprob=-1.0, token_bytes=(46,)),
                ),
            ),
        )
    )
    assert answer.downgrades == ()


def test_a_refusal_keeps_its_tokens_apart_from_the_answer() -> None:
    sorry = token("No", -0.1)
    body = completion({"content": None, "refusal": [sorry]}, content=None, refusal="No")
    answer = chat.decode_response(body)
    assert answer.refusal == "No" and answer.stop_reason == "refusal"
    assert answer.logprobs == Logprobs(
        refusal=(TokenLogprob(token="No", logprob=-0.1, token_bytes=(78, 111)),)
    )


@pytest.mark.parametrize(
    "logprobs", [None, {"content": None, "refusal": None}, {"content": [], "refusal": []}]
)
def test_an_answer_without_token_probabilities_has_none(logprobs: Any) -> None:
    answer = chat.decode_response(completion(logprobs))
    assert answer.logprobs is None and answer.downgrades == ()


def test_a_token_with_no_bytes_says_so_rather_than_inventing_them() -> None:
    # The SDK: bytes "can be null if there is no bytes representation for the token".
    raw = {"token": "<eot>", "logprob": -0.01, "bytes": None, "top_logprobs": []}
    answer = chat.decode_response(completion({"content": [raw]}))
    assert answer.logprobs is not None
    assert answer.logprobs.tokens == (TokenLogprob(token="<eot>", logprob=-0.01),)


def test_a_stream_adds_each_chunks_tokens_in_order_and_agrees_with_the_whole_answer() -> None:
    stream: list[dict[str, Any] | str] = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hi"}, {"content": [HI], "refusal": None}),
        chunk({"content": "!"}, {"content": [BANG], "refusal": None}),
        chunk({}, finish="stop"),
        "[DONE]",
    ]
    streamed = chat.decode_stream(stream)
    whole = chat.decode_response(completion({"content": [HI, BANG], "refusal": None}))
    assert streamed.logprobs == whole.logprobs
    assert streamed.logprobs is not None
    assert [t.token for t in streamed.logprobs.tokens] == ["Hi", "!"]
    assert "".join(t.token for t in streamed.logprobs.tokens) == streamed.message.text()


def test_llama_server_token_ids_are_kept_and_a_field_not_modelled_is_named() -> None:
    # llama-server writes each token's vocabulary id; `prob` stands for a field added later.
    first = token("Hi", -0.25, rival("Hi", -0.25, id=26843, prob=0.78), id=26843)
    body = completion({"content": [first]})
    answer = chat.decode_response(body, dialect="llama-server")
    assert answer.logprobs is not None
    [kept] = answer.logprobs.tokens
    assert kept.token_id == 26843 and kept.top[0].token_id == 26843
    [named] = answer.downgrades
    assert named.kind == "field"
    assert named.reason.startswith("response.choices[0].logprobs.content[0].top_logprobs[0].prob:")
    streamed = chat.decode_stream(
        [chunk({"content": "Hi"}, {"content": [first]}), chunk({}, finish="stop")],
        dialect="llama-server",
    )
    assert streamed.logprobs == answer.logprobs
    assert [d.reason.split(":")[0] for d in streamed.downgrades] == [
        "stream chunk 1.choices[0].logprobs.content[0].top_logprobs[0].prob"
    ]


def test_a_field_beside_content_and_refusal_is_named() -> None:
    answer = chat.decode_response(completion({"content": [HI], "text_offset": [0]}))
    assert answer.logprobs is not None and len(answer.logprobs.tokens) == 1
    assert [d.reason.split(":")[0] for d in answer.downgrades] == [
        "response.choices[0].logprobs.text_offset"
    ]


MALFORMED = [
    ("not an object", r"response.choices\[0\].logprobs must be a JSON object"),
    ({"content": "Hi"}, r"response.choices\[0\].logprobs.content must be an array"),
    ({"refusal": {"token": "x"}}, r"logprobs.refusal must be an array"),
    ({"content": [{"token": "Hi"}]}, r"logprobs.content\[0\].logprob must be a number, got null"),
    ({"content": [{"token": "Hi", "logprob": "-1"}]}, r"content\[0\].logprob must be a number"),
    ({"content": [{"token": "Hi", "logprob": True}]}, r"content\[0\].logprob must be a number"),
    ({"content": [{"logprob": -1.0}]}, r"content\[0\].token must be a string, got null"),
    ({"content": ["Hi"]}, r"content\[0\] must be a JSON object"),
    ({"content": [{**HI, "bytes": [72, 300]}]}, r"content\[0\].bytes must be an array of bytes"),
    ({"content": [{**HI, "bytes": "Hi"}]}, r"content\[0\].bytes must be an array of bytes"),
    ({"content": [{**HI, "id": "7"}]}, r"content\[0\].id must be an integer"),
    ({"content": [{**HI, "top_logprobs": {}}]}, r"content\[0\].top_logprobs must be an array"),
    (
        {"content": [{**HI, "top_logprobs": [{"token": "Hello"}]}]},
        r"content\[0\].top_logprobs\[0\].logprob must be a number",
    ),
]


@pytest.mark.parametrize(("logprobs", "says"), MALFORMED)
def test_malformed_token_probabilities_are_a_provider_error_naming_the_place(
    logprobs: Any, says: str
) -> None:
    with pytest.raises(ProviderError, match=says):
        chat.decode_response(completion(logprobs))
    # The stream says which chunk.
    stream = [chunk({"content": "Hi"}, logprobs), chunk({}, finish="stop")]
    where = says.replace("response.choices", "stream chunk 1.choices")
    with pytest.raises(ProviderError, match=where):
        chat.decode_stream(stream)


def test_prompt_mode_keeps_the_token_probabilities_of_the_answer_it_reads_calls_from() -> None:
    answer = prompt_mode.decode_response(completion({"content": [HI, BANG]}, content="Hi!"))
    assert answer.logprobs == chat.decode_response(completion({"content": [HI, BANG]})).logprobs


# -- Responses ------------------------------------------------------------------------------


def output(*parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-4o-mini-2024-07-18",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": list(parts),
            }
        ],
    }


def text(value: str, logprobs: Any) -> dict[str, Any]:
    return {"type": "output_text", "text": value, "annotations": [], "logprobs": logprobs}


def test_a_responses_answer_keeps_the_tokens_of_each_text_part_in_order() -> None:
    answer = responses.decode_response(output(text("Hi", [HI]), text("!", [BANG])))
    assert answer.logprobs is not None
    assert [(t.token, t.logprob) for t in answer.logprobs.tokens] == [("Hi", -0.25), ("!", -0.5)]
    assert [t.token for t in answer.logprobs.tokens[0].top] == ["Hi", "Hello"]
    assert answer.logprobs.tokens[1].token_bytes == (33,)
    assert answer.downgrades == ()
    assert responses.decode_response(output(text("Hi", []))).logprobs is None


def test_a_malformed_responses_token_is_a_provider_error_naming_the_part() -> None:
    with pytest.raises(ProviderError, match=r"output\[0\].content\[0\].logprobs must be an array"):
        responses.decode_response(output(text("Hi", {"token": "Hi"})))
    bad = [{"token": "Hi", "bytes": [72, 105]}]
    with pytest.raises(ProviderError, match=r"content\[1\].logprobs\[0\].logprob must be a number"):
        responses.decode_response(output(text("Hi", [HI]), text("!", bad)))


def delta(piece: str, logprobs: Any, sequence: int) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": piece,
        "logprobs": logprobs,
        "sequence_number": sequence,
    }


def test_a_responses_stream_whose_final_answer_lists_no_items_keeps_the_deltas_tokens() -> None:
    # A server that leaves the finished response's output out: the answer is rebuilt
    # from the deltas, and so are its token probabilities (the SDK's delta type has no bytes).
    final = {**output(), "output": []}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": output()["output"][0]},
        delta("Hi", [{"token": "Hi", "logprob": -0.25, "top_logprobs": []}], 1),
        delta("!", [{"token": "!", "logprob": -0.5}], 2),
        {"type": "response.completed", "response": final},
    ]
    answer = responses.decode_stream(events)
    assert answer.message.text() == "Hi!"
    assert answer.logprobs == Logprobs(
        tokens=(TokenLogprob(token="Hi", logprob=-0.25), TokenLogprob(token="!", logprob=-0.5))
    )
    with pytest.raises(ProviderError, match=r"stream event 2.logprobs must be an array"):
        responses.decode_stream([events[0], delta("Hi", "Hi", 1), events[-1]])


def test_the_recorded_responses_stream_agrees_with_the_answer_it_finished_with() -> None:
    """pydantic-ai's recording of gpt-4o-mini asked for logprobs, streamed (see SOURCES.md).

    Each delta carries its token; the finished response carries them all,
    rounded. The stream decodes to the finished response's, as the whole
    answer would give them, in the order of the deltas' tokens.
    """
    doc = json.loads((RECORDED / "logprobs_stream.json").read_text(encoding="utf-8"))
    events = doc["exchanges"][0]["stream"]
    streamed = responses.decode_stream(events)
    finished = next(e["response"] for e in events if e["type"] == "response.completed")
    assert streamed.logprobs is not None
    assert streamed.logprobs == responses.decode_response(finished).logprobs
    deltas = [t["token"] for e in events if "delta" in e for t in e["logprobs"]]
    assert [t.token for t in streamed.logprobs.tokens] == deltas
    assert "".join(deltas) == streamed.message.text()
    # Without the finished items, the deltas' own (unrounded) figures stand in.
    bare = copy.deepcopy(events)
    for event in bare:
        if event["type"] == "response.completed":
            event["response"]["output"] = []
    rebuilt = responses.decode_stream(
        [e for e in bare if e["type"] != "response.output_item.done"]
    ).logprobs
    assert rebuilt is not None
    assert [t.logprob for t in rebuilt.tokens] == [
        t["logprob"] for e in events if "delta" in e for t in e["logprobs"]
    ]


# -- asking for them --------------------------------------------------------------------------


def test_the_request_asks_for_them_through_extra_as_each_sdk_type_takes_it() -> None:
    # No option of carryall's own: as on Gemini, the wire's own fields go through `extra`.
    asked = ModelOptions(
        extra={
            "openai": {"logprobs": True, "top_logprobs": 2},
            "responses": {"include": ["message.output_text.logprobs"], "top_logprobs": 2},
        }
    )
    request = Request(model="gpt-4.1-mini", messages=(Message.user("Hi"),), options=asked)
    body = chat.encode(request, Capabilities()).body
    assert (body["logprobs"], body["top_logprobs"]) == (True, 2)
    openai_sdk_check(body)
    body = responses.encode(request, Capabilities()).body
    assert body["include"] == ["message.output_text.logprobs"] and body["top_logprobs"] == 2
    check_responses_request(body)


def test_a_responses_history_names_the_token_probabilities_it_cannot_hold() -> None:
    # A past answer sent back as input, as the API gave it: its text goes on, its
    # probabilities have no block to live in, so the import names them by their place.
    answer = output(text("Hi", [HI]), text("!", []))["output"][0]
    _, history = responses.decode_messages([{"role": "user", "content": "Hello"}, answer])
    assert [m.text() for m in history] == ["Hello", "Hi!"]
    [named] = history.downgrades
    assert (named.index, named.kind) == (1, "field")
    assert named.reason.startswith("input[1].content[0].logprobs:")

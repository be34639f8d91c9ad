"""SPEC §5 and §10: decoding OpenAI and llama-server `chat.completion.chunk` streams."""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import Message, Origin, Spelling, Text, Thinking, ToolUse
from carryall.errors import ProviderError
from carryall.providers import Usage
from carryall.providers.openai import StreamDecoder, decode_response, decode_stream
from tests.support.streams import chunk, fragment

LLAMA_ID = "Xq7Lm2Np9Rt4Vw1Yz6Bc3Df8Gh5Jk0Ms"  # llama-server: 32 random alphanumerics


USAGE_CHUNK = {
    "id": "chatcmpl-x",
    "object": "chat.completion.chunk",
    "model": "smollm2",
    "choices": [],
    "usage": {
        "completion_tokens": 12,
        "prompt_tokens": 30,
        "total_tokens": 42,
        "prompt_tokens_details": {"cached_tokens": 10},
    },
    "timings": {"predicted_n": 12},
}

LLAMA_STREAM: list[Any] = [
    chunk({"role": "assistant", "content": None}),
    chunk({"reasoning_content": "The user wants "}),
    chunk({"reasoning_content": "a file."}),
    chunk({"content": "Let me "}),
    chunk({"content": "look."}),
    chunk({"tool_calls": [fragment(0, id=LLAMA_ID, name="read_file", args="")]}),
    chunk({"tool_calls": [fragment(0, args='{"path": ')]}),
    chunk({"tool_calls": [fragment(0, args='"notes.txt"}')]}),
    chunk({}, "tool_calls"),
    USAGE_CHUNK,
    "[DONE]",
]


def test_a_llama_server_stream_decodes_to_thinking_text_and_a_tool_call() -> None:
    response = decode_stream(LLAMA_STREAM)
    assert response.message == Message.assistant(
        [
            Thinking("The user wants a file.", origin=Origin("openai", "", "smollm2")),
            Text("Let me look."),
            # The model wrote a space after the colon: that text goes back to it as it came.
            ToolUse(
                LLAMA_ID,
                "read_file",
                {"path": "notes.txt"},
                spelling=Spelling(
                    Origin("openai", "", "smollm2"),
                    extra=json.dumps({"arguments": '{"path": "notes.txt"}'}, separators=(",", ":")),
                ),
            ),
        ]
    )
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(input_tokens=20, output_tokens=12, cache_read_input_tokens=10)
    assert response.model == "smollm2"
    assert response.malformed_tool_args == 0


def test_feed_returns_only_the_newly_visible_text() -> None:
    decoder = StreamDecoder()
    shown = [decoder.feed(c) for c in LLAMA_STREAM]
    assert shown == ["", "", "", "Let me ", "look.", "", "", "", "", "", ""]


def test_parallel_tool_calls_assemble_by_index_even_when_interleaved() -> None:
    response = decode_stream(
        [
            chunk({"tool_calls": [fragment(0, id="call_a", name="read_file", args='{"pa')]}),
            chunk({"tool_calls": [fragment(1, id="call_b", name="screenshot", args='{"win')]}),
            chunk(
                {"tool_calls": [fragment(1, args='dow":"editor"}'), fragment(0, args='th":"a"}')]}
            ),
            chunk({}, "tool_calls"),
        ]
    )
    assert response.message.tool_uses() == [
        ToolUse("call_a", "read_file", {"path": "a"}),
        ToolUse("call_b", "screenshot", {"window": "editor"}),
    ]


def test_fragments_out_of_order_still_assemble_by_index() -> None:
    response = decode_stream(
        [
            chunk({"tool_calls": [fragment(1, id="call_b", name="g", args="{}")]}),
            chunk({"tool_calls": [fragment(0, id="call_a", name="f", args="[1]")]}),
            chunk({}, "tool_calls"),
        ]
    )
    assert [(u.id, u.input) for u in response.message.tool_uses()] == [
        ("call_a", [1]),
        ("call_b", {}),
    ]


def test_malformed_streamed_arguments_are_counted_and_kept_raw() -> None:
    response = decode_stream(
        [
            chunk({"tool_calls": [fragment(0, id="c1", name="f", args='{"a": ')]}),
            chunk({"tool_calls": [fragment(1, id="c2", name="f", args='{"b": 1}')]}),
            chunk({}, "tool_calls"),
        ]
    )
    assert response.malformed_tool_args == 1
    assert [u.input for u in response.message.tool_uses()] == ['{"a": ', {"b": 1}]


def test_a_refusal_stream_sets_the_refusal() -> None:
    response = decode_stream(
        [chunk({"refusal": "I can't "}), chunk({"refusal": "do that."}, "stop")]
    )
    assert response.refusal == "I can't do that."
    assert response.message.content == (Text("I can't do that."),)


def test_a_stream_with_nothing_in_it_is_one_empty_text() -> None:
    response = decode_stream([chunk({"role": "assistant"}), chunk({}, "stop")])
    assert response.message.content == (Text(""),)
    assert response.stop_reason == "end_turn"
    assert response.usage == Usage()


def test_a_mid_stream_error_chunk_is_a_provider_error() -> None:
    decoder = StreamDecoder()
    decoder.feed(chunk({"content": "Hel"}))
    with pytest.raises(ProviderError) as caught:
        decoder.feed(
            {"error": {"code": 500, "message": "context size exceeded", "type": "server_error"}}
        )
    assert caught.value.status == 500
    assert caught.value.kind == "server_error"
    assert "stream chunk 2" in str(caught.value)
    assert "context size exceeded" in str(caught.value)


def test_a_truncated_stream_is_a_retryable_provider_error() -> None:
    decoder = StreamDecoder()
    for c in LLAMA_STREAM[:6]:
        decoder.feed(c)
    with pytest.raises(ProviderError, match="without a finish_reason") as caught:
        decoder.response()
    assert caught.value.retryable


def test_done_without_a_finish_reason_is_complete_not_truncated() -> None:
    # Audio models end at [DONE] and never send a finish_reason.
    response = decode_stream([chunk({"content": "whole"}), "[DONE]"])
    assert response.message == Message.assistant([Text("whole")])
    assert response.stop_reason == "end_turn"


def test_streamed_refusal_is_shown_and_reported_as_a_refusal() -> None:
    decoder = StreamDecoder()
    shown = [
        decoder.feed(c)
        for c in [chunk({"refusal": "I can't "}), chunk({"refusal": "help."}), chunk({}, "stop")]
    ]
    assert "".join(shown) == "I can't help."
    response = decoder.response()
    assert response.message.text() == "I can't help."
    assert response.refusal == "I can't help."
    assert response.stop_reason == "refusal"


@pytest.mark.parametrize(
    "delta",
    [
        {"reasoning": "Weighing it."},
        # OpenRouter sends the same text twice in one delta: read once.
        {
            "reasoning": "Weighing it.",
            "reasoning_details": [{"type": "reasoning.text", "text": "Weighing it."}],
        },
        {"reasoning_details": [{"type": "reasoning.summary", "summary": "Weighing it."}]},
    ],
)
def test_reasoning_under_every_servers_name_is_read_once(delta: dict[str, Any]) -> None:
    response = decode_stream([chunk(delta), chunk({"content": "Yes."}, "stop"), "[DONE]"])
    made = Origin("openai", "", response.model or "")
    assert response.message == Message.assistant(
        [Thinking("Weighing it.", origin=made), Text("Yes.")]
    )
    whole = decode_response(
        {
            "model": response.model,
            "choices": [{"message": {"content": "Yes.", **delta}, "finish_reason": "stop"}],
        }
    )
    assert whole.message == response.message


def test_a_chunk_after_done_is_refused() -> None:
    with pytest.raises(ProviderError, match=r"stream chunk 3: a chunk after \[DONE\]"):
        decode_stream([chunk({}, "stop"), "[DONE]", chunk({"content": "late"})])


def test_content_after_the_finish_is_refused() -> None:
    with pytest.raises(ProviderError, match="after the finish_reason"):
        decode_stream([chunk({}, "stop"), chunk({"content": "late"})])


def test_unknown_fields_are_ignored() -> None:
    stream = [
        chunk({"content": "hi", "annotations": [], "audio": None}, None, new_top_level={"x": [1]}),
        {
            **chunk({}, "stop"),
            "system_fingerprint": "b1",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": None}],
        },
    ]
    assert decode_stream(stream).message == Message.assistant([Text("hi")])


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (None, "must be a JSON object"),
        ([1, 2], "must be a JSON object"),
        ("data: {}", "must be a JSON object"),
        ({"choices": "x"}, "'choices' must be an array"),
        ({"choices": [7]}, r"choices\[0\] must be a JSON object"),
        ({"choices": [{"index": 1, "delta": {}}]}, "choice index int 1"),
        ({"choices": [{"index": True, "delta": {}}]}, "choice index"),
        (chunk({"content": 5}), "content must be a string or null"),
        (chunk({"reasoning_content": {}}), "reasoning_content must be a string"),
        ({"choices": [{"index": 0, "delta": []}]}, r"delta must be a JSON object"),
        (chunk({"tool_calls": {"index": 0}}), "tool_calls must be an array"),
        (chunk({"tool_calls": [5]}), r"tool_calls\[0\] must be a JSON object"),
        (chunk({"tool_calls": [{"function": {}}]}), "index must be an integer"),
        (chunk({"tool_calls": [{"index": "0"}]}), "index must be an integer"),
        (chunk({"tool_calls": [{"index": False}]}), "index must be an integer"),
        (chunk({"tool_calls": [{"index": -1}]}), "index must be an integer"),
        (chunk({"tool_calls": [{"index": 10**9}]}), "index must be an integer"),
        (chunk({"tool_calls": [{"index": 10**5000}]}), "index must be an integer"),
        (chunk({"tool_calls": [{"index": 0, "id": 3}]}), "id must be a string"),
        (chunk({"tool_calls": [{"index": 0, "type": "custom"}]}), "'custom' is not 'function'"),
        (chunk({"tool_calls": [{"index": 0, "function": "f"}]}), "function must be a JSON object"),
        (chunk({"tool_calls": [{"index": 0, "function": {"arguments": 1}}]}), "arguments must be"),
        (chunk({}, 3), "finish_reason must be a string"),  # type: ignore[arg-type]
        (chunk({}, usage={"prompt_tokens": 1.5}), "prompt_tokens must be a non-negative integer"),
        (chunk({}, usage=[]), "usage must be a JSON object"),
        (chunk({}, model=["m"]), "model must be a string"),
    ],
)
def test_wrong_json_types_are_provider_errors_naming_the_place(bad: Any, match: str) -> None:
    decoder = StreamDecoder()
    decoder.feed(chunk({"content": "ok"}))
    with pytest.raises(ProviderError, match=match) as caught:
        decoder.feed(bad)
    assert "stream chunk 2" in str(caught.value)


def test_a_tool_call_that_changes_its_id_is_refused() -> None:
    with pytest.raises(ProviderError, match="changed its id from 'a' to 'b'"):
        decode_stream(
            [
                chunk({"tool_calls": [fragment(0, id="a", name="f")]}),
                chunk({"tool_calls": [fragment(0, id="b", args="{}")]}),
            ]
        )


def test_a_tool_call_that_changes_its_name_is_refused() -> None:
    with pytest.raises(ProviderError, match="changed its name"):
        decode_stream(
            [
                chunk({"tool_calls": [fragment(0, id="a", name="f")]}),
                chunk({"tool_calls": [fragment(0, name="g")]}),
            ]
        )


def test_a_repeated_id_and_name_are_tolerated() -> None:
    response = decode_stream(
        [
            chunk({"tool_calls": [fragment(0, id="a", name="f", args='{"x"')]}),
            chunk({"tool_calls": [fragment(0, id="a", name="f", args=":1}")]}),
            chunk({}, "tool_calls"),
        ]
    )
    assert response.message.tool_uses() == [ToolUse("a", "f", {"x": 1})]


def test_a_tool_call_that_never_gets_a_name_is_refused() -> None:
    with pytest.raises(ProviderError, match="tool call 2 never got a name"):
        decode_stream([chunk({"tool_calls": [fragment(2, args="{}")]}), chunk({}, "tool_calls")])


def test_a_tool_call_without_id_gets_one_and_duplicates_are_refused() -> None:
    response = decode_stream(
        [chunk({"tool_calls": [fragment(0, name="f")]}), chunk({}, "tool_calls")]
    )
    assert response.message.tool_uses() == [ToolUse("call_0", "f", {})]
    with pytest.raises(ProviderError, match="used twice"):
        decode_stream(
            [
                chunk(
                    {
                        "tool_calls": [
                            fragment(0, id="same", name="f"),
                            fragment(1, id="same", name="g"),
                        ]
                    }
                ),
                chunk({}, "tool_calls"),
            ]
        )


def test_a_second_different_finish_reason_is_refused() -> None:
    with pytest.raises(ProviderError, match="finish_reason 'length' after 'stop'"):
        decode_stream([chunk({}, "stop"), chunk({}, "length")])


def test_ten_megabytes_of_arguments_in_ten_thousand_fragments_assemble() -> None:
    payload = json.dumps({"text": "y" * (10 * 1024 * 1024)})
    step = len(payload) // 10_000 + 1
    pieces = [payload[i : i + step] for i in range(0, len(payload), step)]
    decoder = StreamDecoder()
    decoder.feed(chunk({"tool_calls": [fragment(0, id="big", name="write")]}))
    for piece in pieces:
        decoder.feed(chunk({"tool_calls": [fragment(0, args=piece)]}))
    decoder.feed(chunk({}, "tool_calls"))
    response = decoder.response()
    assert response.message.tool_uses()[0].input == {"text": "y" * (10 * 1024 * 1024)}
    assert len(pieces) >= 9_000


def test_ten_megabytes_of_broken_arguments_are_one_malformed_call() -> None:
    pieces = ["[" * 1024] * (10 * 1024)
    stream = [chunk({"tool_calls": [fragment(0, id="deep", name="f")]})]
    stream += [chunk({"tool_calls": [fragment(0, args=piece)]}) for piece in pieces]
    stream.append(chunk({}, "tool_calls"))
    response = decode_stream(stream)
    assert response.malformed_tool_args == 1
    assert response.message.tool_uses()[0].input == "[" * (10 * 1024 * 1024)


# -- properties -------------------------------------------------------------------


@st.composite
def split(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=4)))
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if text[a:b]]


arguments = st.one_of(
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3).map(
        json.dumps
    ),
    st.text(max_size=10),
)


@st.composite
def streamed_answers(draw: st.DrawFn) -> tuple[dict[str, Any], list[Any]]:
    """A whole chat.completion and a stream of the same answer, cut and interleaved anyhow."""
    reasoning = draw(st.text(max_size=20))
    content = draw(st.text(max_size=20))
    calls = [
        {
            "id": f"call_{i}",
            "name": draw(st.sampled_from(["f", "read_file"])),
            "arguments": draw(arguments),
        }
        for i in range(draw(st.integers(0, 3)))
    ]
    queues: list[list[dict[str, Any]]] = [
        [{"reasoning_content": piece} for piece in draw(split(reasoning))],
        [{"content": piece} for piece in draw(split(content))],
    ]
    for index, c in enumerate(calls):
        pieces = draw(split(c["arguments"]))
        head = fragment(index, id=c["id"], name=c["name"], args=pieces[0] if pieces else "")
        queues.append(
            [{"tool_calls": [head]}]
            + [{"tool_calls": [fragment(index, args=p)]} for p in pieces[1:]]
        )
    deltas: list[dict[str, Any]] = []
    while any(queues):
        queue = draw(st.sampled_from([q for q in queues if q]))
        deltas.append(queue.pop(0))
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    stream: list[Any] = [chunk(d) for d in deltas] + [chunk({}, finish), USAGE_CHUNK, "[DONE]"]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "reasoning_content": reasoning,
    }
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    whole = {
        "model": "smollm2",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE_CHUNK["usage"],
    }
    return whole, stream


@given(streamed_answers())
@settings(max_examples=200, deadline=None)
def test_a_stream_decodes_to_the_same_response_as_the_whole_answer(
    case: tuple[dict[str, Any], list[Any]],
) -> None:
    whole, stream = case
    decoder = StreamDecoder()
    shown = "".join(decoder.feed(c) for c in stream)
    assert decoder.response() == decode_response(whole)
    assert shown == whole["choices"][0]["message"]["content"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
chunk_keys = st.sampled_from(
    [
        "choices",
        "delta",
        "index",
        "content",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "id",
        "finish_reason",
        "usage",
        "error",
        "reasoning_content",
        "refusal",
        "type",
        "model",
    ]
)
chunk_like = st.recursive(
    json_values | st.just("[DONE]"),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(chunk_keys, inner, max_size=4),
    max_leaves=25,
)


@given(st.lists(chunk_like, max_size=8))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_chunk_sequence_decodes_or_is_a_provider_error(chunks: list[Any]) -> None:
    with contextlib.suppress(ProviderError):
        decode_stream(chunks)


# -- OpenRouter reasoning_details in pieces ------------------------------------------------

CLAUDE_PIECE = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}


def _details_chunk(*details: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    delta = {"role": "assistant", "content": "", "reasoning_details": list(details)}
    return {**chunk(delta, finish), "model": "anthropic/claude-sonnet-4.5"}


def test_reasoning_detail_pieces_make_the_whole_answers_one_signed_entry() -> None:
    # As OpenRouter streams a Claude thinking block: an empty opening piece,
    # the text in pieces, the signature alone in a later piece.
    stream = [
        _details_chunk({**CLAUDE_PIECE, "text": "", "signature": ""}),
        _details_chunk({**CLAUDE_PIECE, "text": "Two and "}),
        _details_chunk({**CLAUDE_PIECE, "text": "two make four."}),
        _details_chunk({**CLAUDE_PIECE, "signature": "RXQwQkNrZ0lD"}),
        {**chunk({"content": "4"}, "stop"), "model": "anthropic/claude-sonnet-4.5"},
        "[DONE]",
    ]
    entry = {**CLAUDE_PIECE, "text": "Two and two make four.", "signature": "RXQwQkNrZ0lD"}
    message = {"role": "assistant", "content": "4", "reasoning_details": [entry]}
    whole = {
        "model": "anthropic/claude-sonnet-4.5",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    streamed = decode_stream(stream, endpoint="openrouter.ai")
    assert streamed.message == decode_response(whole, endpoint="openrouter.ai").message
    signed = [b for b in streamed.message.content if not isinstance(b, Thinking | Text)]
    assert [json.loads(getattr(b, "raw", "{}")) for b in signed] == [
        {"type": "reasoning.text", "text": "Two and two make four."}
        | {"signature": "RXQwQkNrZ0lD", "format": "anthropic-claude-v1", "index": 0}
    ]


def test_a_summary_and_its_encrypted_reasoning_at_one_index_stay_two_entries() -> None:
    # An OpenAI model through OpenRouter numbers its summary and its encrypted
    # reasoning both 0: the type tells them apart, as in the whole answer.
    summary = {"type": "reasoning.summary", "format": "openai-responses-v1", "index": 0}
    encrypted = {"type": "reasoning.encrypted", "id": "rs_1", "format": "openai-responses-v1"}
    encrypted |= {"index": 0, "data": "gAAAAB"}
    stream = [
        _details_chunk({**summary, "summary": "Weighing "}),
        _details_chunk({**summary, "summary": "it."}),
        _details_chunk(encrypted),
        {**chunk({"content": "Yes."}, "stop"), "model": "openai/o3"},
    ]
    details = [{**summary, "summary": "Weighing it."}, encrypted]
    message = {"role": "assistant", "content": "Yes.", "reasoning_details": details}
    whole = {"model": "anthropic/claude-sonnet-4.5", "choices": [{"index": 0, "message": message}]}
    whole["choices"][0]["finish_reason"] = "stop"
    streamed = decode_stream(stream, endpoint="openrouter.ai")
    assert streamed.message == decode_response(whole, endpoint="openrouter.ai").message
    assert streamed.message.thinking() == "Weighing it."
    kept = [json.loads(getattr(b, "raw", "{}")) for b in streamed.message.content[1:-1]]
    assert kept == [encrypted]


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        ([{**CLAUDE_PIECE, "text": 5}], r"reasoning_details\[0\]\.text must be a string"),
        ([{**CLAUDE_PIECE, "signature": ["x"]}], r"\.signature must be a string"),
        (
            [{**CLAUDE_PIECE, "text": "a"}, {**CLAUDE_PIECE, "format": "openai-responses-v1"}],
            "reasoning detail 0 changed its format from 'anthropic-claude-v1'",
        ),
        ([{**CLAUDE_PIECE, "text": "a"}, "not a piece"], r"reasoning_details\[0\] must be"),
        ([{**CLAUDE_PIECE, "text": "a"}, None], r"reasoning_details\[0\] must be"),
    ],
)
def test_a_malformed_reasoning_detail_piece_is_a_clear_provider_error(
    pieces: list[Any], message: str
) -> None:
    stream = [_details_chunk(piece) for piece in pieces]
    with pytest.raises(ProviderError, match=message):
        decode_stream([*stream, chunk({}, "stop")])


detail_pieces = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["reasoning.text", "reasoning.summary", None, 3]),
            "index": st.sampled_from([0, 1, None, True, "0"]),
            "text": st.text(max_size=4) | st.none() | st.integers(),
            "signature": st.text(max_size=4) | st.none(),
            "format": st.sampled_from(["a", "b", None]),
        },
    )
    | json_values,
    max_size=6,
)


@given(detail_pieces)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_any_reasoning_detail_pieces_decode_or_are_a_provider_error(pieces: list[Any]) -> None:
    stream = [_details_chunk(piece) for piece in pieces]
    with contextlib.suppress(ProviderError):
        decode_stream([*stream, chunk({}, "stop")])

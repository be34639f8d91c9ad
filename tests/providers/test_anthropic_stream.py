"""SPEC §5 and §10, Anthropic Messages streams: the same `Response` as the plain call, and
hostile event streams as a clear `ProviderError`, never a crash or a hang.

Events are what the SDK's raw stream events give as dicts (the JSON of each
SSE `data:` line); the synthetic ones here are checked against the SDK's own
event models so they stay the real shapes.
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.blocks import Message, Origin, RedactedThinking, Text, Thinking, ToolUse
from carryall.errors import ProviderError
from carryall.providers.anthropic import (
    StreamDecoder,
    decode_response,
    decode_stream,
)
from tests.support.streams import SDK_EVENT, body_of, every, stream_of

ORIGIN = Origin("anthropic", "", "claude-test")
"""What a decoder with no endpoint stamps on the test bodies' signed blocks."""


TOOL_BODY = body_of(
    [
        {"type": "thinking", "thinking": "I should read it.", "signature": "c2lnbmF0dXJl"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "Let me read that file."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a b.txt"}},
        {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}},
    ],
    stop_reason="tool_use",
)


# -- the same Response as the plain call ------------------------------------------------------


def test_stream_gives_the_plain_calls_response() -> None:
    streamed = decode_stream(stream_of(TOOL_BODY))
    assert streamed == decode_response(TOOL_BODY)
    assert streamed.message == Message.assistant(
        [
            Thinking("I should read it.", "c2lnbmF0dXJl", ORIGIN),
            RedactedThinking("EmwKAhgBEgy3va3pzix/LafPsn4a", ORIGIN),
            Text("Let me read that file."),
            ToolUse("toolu_1", "read_file", {"path": "a b.txt"}),
            ToolUse("toolu_2", "list", {}),
        ]
    )
    assert streamed.stop_reason == "tool_use"
    assert streamed.usage.input_tokens == 12
    assert streamed.usage.output_tokens == 34
    assert streamed.usage.cache_creation_input_tokens == 5
    assert streamed.usage.cache_read_input_tokens == 6
    assert streamed.model == "claude-test"


def test_feed_returns_only_newly_visible_text() -> None:
    decoder = StreamDecoder()
    shown = [decoder.feed(e) for e in stream_of(TOOL_BODY, every(4))]
    assert "".join(shown) == "Let me read that file."
    assert "I should" not in "".join(shown)
    assert decoder.response().message.text() == "Let me read that file."


def test_refusal_in_a_stream_is_kept() -> None:
    body = body_of(
        [{"type": "text", "text": "I"}],
        stop_reason="refusal",
        stop_details={"type": "refusal", "category": None, "explanation": "Not that."},
    )
    response = decode_stream(stream_of(body))
    assert response == decode_response(body)
    assert (response.stop_reason, response.refusal) == ("refusal", "Not that.")


def test_the_sdks_own_accumulator_agrees() -> None:
    # The SDK builds the final message from the same events; both roads must meet.
    streaming = pytest.importorskip("anthropic.lib.streaming._messages")
    events = stream_of(TOOL_BODY)
    snapshot = None
    buffers: dict[int, bytes] = {}
    for event in events:
        if event["type"] != "ping":
            snapshot = streaming.accumulate_event(
                event=event, current_snapshot=snapshot, json_bufs=buffers
            )
    assert snapshot is not None
    sdk_body = snapshot.model_dump(mode="json", exclude_none=True)
    assert decode_response(sdk_body) == decode_stream(events)


texts = st.text(max_size=40)
response_blocks = st.one_of(
    texts.map(lambda t: {"type": "text", "text": t}),
    st.tuples(texts, st.text("abcXYZ019+/=", min_size=1, max_size=20)).map(
        lambda p: {"type": "thinking", "thinking": p[0], "signature": p[1]}
    ),
    st.text(max_size=20).map(lambda d: {"type": "redacted_thinking", "data": d}),
    st.tuples(
        st.text(min_size=1, max_size=8),
        st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=10), max_size=3),
    ).map(lambda p: {"type": "tool_use", "id": "toolu_x", "name": p[0], "input": p[1]}),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # Each call its own id: a repeated one is refused by both (tested on its own).
    content=st.lists(response_blocks, max_size=5).map(
        lambda blocks: [
            {**b, "id": f"toolu_{i}"} if b["type"] == "tool_use" else b
            for i, b in enumerate(blocks)
        ]
    ),
    size=st.integers(1, 9),
    reason=st.sampled_from(["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn"]),
)
def test_any_stream_gives_the_plain_calls_response(
    content: list[dict[str, Any]], size: int, reason: str
) -> None:
    body = body_of(content, stop_reason=reason)
    assert decode_stream(stream_of(body, every(size))) == decode_response(body)


# -- malformed arguments ------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ['{"path": "a', "[1, 2]", '"text"', "{}{}", "nul"])
def test_arguments_that_are_not_a_json_object_are_kept_raw_and_counted(raw: str) -> None:
    body = body_of(
        [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "ok"}},
        ],
        stop_reason="tool_use",
    )
    body["content"][0]["raw"] = raw
    response = decode_stream(stream_of(body))
    assert response.malformed_tool_args == 1
    assert response.message.tool_uses() == [
        ToolUse("toolu_1", "read_file", raw),
        ToolUse("toolu_2", "read_file", {"path": "ok"}),
    ]


def test_a_tool_call_with_no_argument_deltas_takes_its_start_input() -> None:
    events = stream_of(body_of([{"type": "tool_use", "id": "t", "name": "n", "input": {}}]))
    events = [e for e in events if e.get("delta", {}).get("type") != "input_json_delta"]
    assert decode_stream(events).message.tool_uses() == [ToolUse("t", "n", {})]


def _tool_stream(deltas: list[str]) -> list[dict[str, Any]]:
    events = stream_of(body_of([{"type": "tool_use", "id": "t", "name": "n", "input": {}}]))
    head = events[:3]
    tail = [e for e in events[3:] if e["type"] != "content_block_delta"]
    body = [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": d},
        }
        for d in deltas
    ]
    return head + body + tail


def test_ten_megabyte_arguments_in_small_deltas_decode_in_linear_time() -> None:
    # 10,000 deltas of 1 KiB: joining by concatenation would copy ~50 GB.
    blob = "y" * 10_000_000
    raw = json.dumps({"blob": blob})
    response = decode_stream(_tool_stream(every(1024)(raw)))
    assert response.malformed_tool_args == 0
    assert response.message.tool_uses()[0].input == {"blob": blob}


@pytest.mark.parametrize("raw", ['{"blob": "' + "z" * 10_000_000, "[" * 10_000_000])
def test_ten_megabyte_broken_arguments_are_counted_not_crashed(raw: str) -> None:
    response = decode_stream(_tool_stream(every(65536)(raw)))
    assert response.malformed_tool_args == 1
    assert response.message.tool_uses()[0].input == raw


# -- hostile streams --------------------------------------------------------------------------


def test_error_event_is_raised_with_its_kind() -> None:
    events = stream_of(TOOL_BODY)[:4]
    events.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    with pytest.raises(ProviderError, match="Overloaded") as info:
        decode_stream(events)
    assert info.value.kind == "overloaded_error"
    assert info.value.retryable


def test_pings_are_skipped_and_unknown_event_types_named_anywhere() -> None:
    events = stream_of(TOOL_BODY)
    noisy: list[dict[str, Any]] = [{"type": "ping"}]
    for event in events:
        noisy += [event, {"type": "ping"}, {"type": "future_event", "x": [1]}]
    decoded, plain = decode_stream(noisy), decode_stream(events)
    assert decoded.message == plain.message and plain.downgrades == ()
    assert len(decoded.downgrades) == len(events)
    assert all("future_event" in d.reason and d.kind == "event" for d in decoded.downgrades)


@pytest.mark.parametrize("keep", range(len(stream_of(TOOL_BODY)) - 1))
def test_every_truncated_stream_is_a_clear_error(keep: int) -> None:
    with pytest.raises(ProviderError, match="truncated"):
        decode_stream(stream_of(TOOL_BODY)[:keep])


def _edit(
    events: list[dict[str, Any]], at: int, path: list[Any], value: Any
) -> list[dict[str, Any]]:
    events = copy.deepcopy(events)
    target: Any = events[at]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return events


SIMPLE = stream_of(
    body_of(
        [{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "t", "name": "n", "input": {}}]
    ),
    every(10),
)
# SIMPLE: 0 message_start, 1 ping, 2 start text, 3 delta, 4 stop, 5 start tool, 6 delta,
#         7 stop, 8 message_delta, 9 message_stop


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([SIMPLE[2], *SIMPLE], "before message_start"),
        ([SIMPLE[0], *SIMPLE], "second message_start"),
        ([*SIMPLE[:2], SIMPLE[3], *SIMPLE[2:]], "block 0 is not started"),
        ([*SIMPLE[:5], SIMPLE[3], *SIMPLE[5:]], "block 0 is already stopped"),
        ([*SIMPLE[:5], *SIMPLE[6:]], "block 1 is not started"),
        ([*SIMPLE[:2], SIMPLE[5], *SIMPLE[2:]], "block 1 started, expected block 0"),
        ([*SIMPLE[:4], *SIMPLE[8:]], "block.* 0 never stopped"),
        ([*SIMPLE[:4], SIMPLE[9]], "0 never stopped"),
        ([*SIMPLE, SIMPLE[3]], "after message_stop"),
        (
            [*SIMPLE[:3], {**SIMPLE[6], "index": 0}, *SIMPLE[4:]],
            "input_json_delta for a text block",
        ),
        (
            _edit(SIMPLE, 2, ["content_block", "type"], "server_tool_use"),
            "text_delta for a server_tool_use block",
        ),
        (_edit(SIMPLE, 2, ["content_block", "type"], None), "content_block.type"),
        (_edit(SIMPLE, 3, ["delta", "type"], "future_delta"), "unknown delta type"),
        (_edit(SIMPLE, 3, ["index"], "0"), "index: expected a block index"),
        (_edit(SIMPLE, 3, ["index"], True), "index: expected a block index"),
        (_edit(SIMPLE, 3, ["index"], -1), "index: expected a block index"),
        (_edit(SIMPLE, 3, ["delta", "text"], 5), "delta.text: expected a string"),
        (_edit(SIMPLE, 3, ["delta"], "hi"), "delta: expected an object"),
        (_edit(SIMPLE, 5, ["content_block", "input"], "{}"), "input: expected an object"),
        (_edit(SIMPLE, 5, ["content_block", "id"], 1), "content_block.id"),
        (_edit(SIMPLE, 0, ["message"], []), "message: expected an object"),
        (_edit(SIMPLE, 0, ["message", "usage", "input_tokens"], "12"), "usage.input_tokens"),
        (_edit(SIMPLE, 8, ["usage", "output_tokens"], 1.5), "usage.output_tokens"),
        (_edit(SIMPLE, 8, ["delta", "stop_reason"], 7), "stop_reason"),
        (_edit(SIMPLE, 0, ["type"], None), "type: expected an event type"),
        ([*SIMPLE[:3], ["not", "an", "event"]], "expected an object"),
    ],
)
def test_hostile_stream_is_a_clear_provider_error(events: list[Any], message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        decode_stream(events)


def test_response_before_the_end_names_the_state() -> None:
    decoder = StreamDecoder()
    with pytest.raises(ProviderError, match="before message_start"):
        decoder.response()
    decoder.feed(SIMPLE[0])
    with pytest.raises(ProviderError, match="before message_stop"):
        decoder.response()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
KEYS = [
    "type",
    "index",
    "delta",
    "content_block",
    "message",
    "usage",
    "text",
    "partial_json",
    "input",
]


@st.composite
def mangled(draw: st.DrawFn) -> list[Any]:
    """A real stream with a few events dropped, repeated, swapped or corrupted."""
    events: list[Any] = copy.deepcopy(stream_of(TOOL_BODY, every(draw(st.integers(1, 6)))))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(events) - 1))
        action = draw(st.sampled_from(["drop", "repeat", "swap", "field", "replace"]))
        if action == "drop":
            del events[at]
        elif action == "repeat":
            events.insert(at, copy.deepcopy(events[at]))
        elif action == "swap":
            other = draw(st.integers(0, len(events) - 1))
            events[at], events[other] = events[other], events[at]
        elif action == "replace":
            events[at] = draw(json_values)
        elif isinstance(events[at], dict):
            target = events[at]
            for key in ("delta", "content_block", "message"):
                if key in target and isinstance(target[key], dict) and draw(st.booleans()):
                    target = target[key]
            target[draw(st.sampled_from(KEYS))] = draw(json_values)
        if not events:
            break
    return events


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=mangled())
def test_mangled_streams_decode_or_fail_clearly(events: list[Any]) -> None:
    with contextlib.suppress(ProviderError):
        decode_stream(events)


@settings(max_examples=300, deadline=None)
@given(
    body=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {
                "content": st.lists(
                    json_values
                    | st.fixed_dictionaries(
                        {
                            "type": st.sampled_from(
                                ["text", "thinking", "redacted_thinking", "tool_use"]
                            )
                        },
                        optional={
                            k: json_values
                            for k in (
                                "text",
                                "thinking",
                                "signature",
                                "data",
                                "id",
                                "name",
                                "input",
                            )
                        },
                    ),
                    max_size=3,
                )
            },
            optional={
                k: json_values
                for k in ("type", "role", "usage", "stop_reason", "stop_details", "model")
            },
        ),
    )
)
def test_arbitrary_response_json_decodes_or_fails_clearly(body: Any) -> None:
    with contextlib.suppress(ProviderError):
        decode_response(body)


def test_a_stream_with_no_blocks_reads_as_the_plain_call_does() -> None:
    body = body_of([], stop_reason="stop_sequence")
    assert decode_stream(stream_of(body)) == decode_response(body)
    assert decode_response(body).message == Message.assistant([Text("")])


SEARCH_RESULT = {
    "type": "web_search_result",
    "title": "Paris weather",
    "url": "https://example.com/paris",
    "encrypted_content": "EqgfCioIARgBIiQ3YTAw",
    "page_age": None,
}
CITATION = {
    "type": "web_search_result_location",
    "url": "https://example.com/paris",
    "title": "Paris weather",
    "encrypted_index": "Eo8BCioIAhgBIiQ",
    "cited_text": "Sunny, 21 C",
}
SERVER_TOOL_BODY = body_of(
    [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01",
            "name": "web_search",
            "input": {"query": "paris weather"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": [SEARCH_RESULT],
        },
        {"type": "text", "text": "It is sunny.", "citations": [CITATION]},
    ],
    stop_reason="pause_turn",
)


def _server_tool_stream() -> list[dict[str, Any]]:
    start = {
        "type": "message_start",
        "message": {
            **{k: v for k, v in SERVER_TOOL_BODY.items() if k not in ("content", "usage")},
            "content": [],
            "stop_reason": None,
            "usage": {**SERVER_TOOL_BODY["usage"], "output_tokens": 1},
        },
    }
    use = {**SERVER_TOOL_BODY["content"][0], "input": {}}
    return [
        start,
        {"type": "content_block_start", "index": 0, "content_block": use},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "paris'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": ' weather"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": SERVER_TOOL_BODY["content"][1],
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "text_delta", "text": "It is"},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "citations_delta", "citation": CITATION},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "text_delta", "text": " sunny."},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "pause_turn"},
            "usage": {"output_tokens": 34},
        },
        {"type": "message_stop"},
    ]


def test_server_tool_blocks_and_citations_are_kept_not_refused_and_go_back_byte_for_byte() -> None:
    from carryall.blocks import ServerToolCall, ServerToolResult
    from carryall.providers import Capabilities, Request
    from carryall.providers.anthropic import encode

    events = _server_tool_stream()
    for event in events:
        SDK_EVENT.validate_python(event)
    streamed = decode_stream(events)
    assert streamed == decode_response(SERVER_TOOL_BODY)
    assert streamed.stop_reason == "pause_turn"
    assert streamed.usage.output_tokens == 34
    assert streamed.message.text() == "It is sunny."
    use, result, text = streamed.message.content
    assert text.text == "It is sunny." and len(text.citations) == 1
    assert text.citations[0].origin == ORIGIN
    assert isinstance(use, ServerToolCall) and use.origin == ORIGIN
    assert (use.tool, use.input) == ("web_search", {"query": "paris weather"})
    assert use.text == "[web_search: paris weather]"
    assert isinstance(result, ServerToolResult) and result.call_id == use.id
    assert [s.title for s in result.sources] == ["Paris weather"]
    history = [Message.user("Weather in Paris?"), streamed.message, Message.user("Thanks.")]
    home = encode(Request(model="claude-test", messages=tuple(history)), Capabilities())
    assert home.downgrades == ()
    assert home.body["messages"][1]["content"] == SERVER_TOOL_BODY["content"]
    elsewhere = encode(Request(model="claude-other", messages=tuple(history)), Capabilities())
    assert [d.kind for d in elsewhere.downgrades] == ["opaque", "opaque", "citations"]
    assert elsewhere.body["messages"][1]["content"] == [
        {"type": "text", "text": "[web_search: paris weather]"},
        {
            "type": "text",
            "text": "[web_search result]\n1. Paris weather <https://example.com/paris>",
        },
        {"type": "text", "text": "It is sunny. [1]"},
        {"type": "text", "text": "[1] Paris weather <https://example.com/paris>"},
    ]


# -- compaction (context management) ---------------------------------------------------

COMPACTED = "The user asked for a summary of the file; it was read."
ENCRYPTED = "ZW5jcnlwdGVkIG1ldGFkYXRh"


def _compaction_stream(*deltas: dict[str, Any]) -> list[dict[str, Any]]:
    """A beta stream whose first block is a compaction block, given in `deltas`, then a text."""
    message = {"type": "message", "role": "assistant", "model": "claude-test", "content": []}
    message |= {"id": "msg_01", "stop_reason": None, "stop_sequence": None}
    message["usage"] = {"input_tokens": 10, "output_tokens": 1}
    start = {"type": "compaction", "content": None}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": start},
        *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    return events


def test_a_streamed_compaction_block_is_the_whole_answers_and_goes_back_to_its_origin() -> None:
    from anthropic.lib.streaming._beta_messages import accumulate_event
    from anthropic.types.beta import BetaRawMessageStreamEvent
    from pydantic import TypeAdapter

    from carryall.blocks import Opaque
    from carryall.providers import Capabilities, Request
    from carryall.providers.anthropic import encode, encode_sent
    from tests.support.recorded import anthropic_sdk_check

    delta = {"type": "compaction_delta", "content": COMPACTED, "encrypted_content": ENCRYPTED}
    events = _compaction_stream(delta)
    beta_event = TypeAdapter(BetaRawMessageStreamEvent)
    for event in events:
        beta_event.validate_python(event)
    streamed = decode_stream(events)
    block = {"type": "compaction", "content": COMPACTED, "encrypted_content": ENCRYPTED}
    whole = {
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [block, {"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    assert streamed.message == decode_response(whole).message
    # The SDK's own beta accumulator builds the same block from the same events.
    snapshot = None
    buffers: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(
            event=beta_event.validate_python(event),
            current_snapshot=snapshot,
            json_bufs=buffers,
            request_headers={},  # read only for a beta header
        )
    assert snapshot is not None
    assert snapshot.content[0].model_dump(exclude_none=True) == block
    kept = streamed.message.content[0]
    assert isinstance(kept, Opaque) and kept.origin == ORIGIN
    history = [Message.user("Go on."), streamed.message, Message.user("And then?")]
    home = encode(Request(model="claude-test", messages=tuple(history)), Capabilities())
    assert home.body["messages"][1]["content"][0] == block
    assert json.dumps(block, separators=(",", ":")) == kept.raw
    sent = encode_sent(Request(model="claude-test", messages=tuple(history)), Capabilities())
    assert kept.raw.encode() in sent.data
    anthropic_sdk_check(home.body)
    elsewhere = encode(Request(model="claude-other", messages=tuple(history)), Capabilities())
    assert [d.kind for d in elsewhere.downgrades] == ["opaque"]
    assert ENCRYPTED not in json.dumps(elsewhere.body)


def test_compaction_pieces_join_field_by_field_and_a_null_piece_adds_nothing() -> None:
    events = _compaction_stream(
        {"type": "compaction_delta", "content": "The user asked ", "encrypted_content": None},
        {"type": "compaction_delta", "content": "for a summary.", "encrypted_content": "ZW5j"},
    )
    (kept, _) = decode_stream(events).message.content
    assert json.loads(getattr(kept, "raw", "")) == {
        "type": "compaction",
        "content": "The user asked for a summary.",
        "encrypted_content": "ZW5j",
    }


@pytest.mark.parametrize(
    ("delta", "message"),
    [
        ({"type": "compaction_delta", "content": 5}, r"delta\.content: expected a string or null"),
        ({"type": "compaction_delta", "encrypted_content": ["x"]}, "encrypted_content: expected"),
    ],
)
def test_a_malformed_compaction_piece_is_a_clear_provider_error(
    delta: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProviderError, match=message):
        decode_stream(_compaction_stream(delta))


def test_a_compaction_piece_for_a_field_the_block_started_as_no_text_is_refused() -> None:
    events = _compaction_stream({"type": "compaction_delta", "content": "more"})
    events[1]["content_block"]["content"] = {"summary": "x"}
    with pytest.raises(ProviderError, match="'content', which the block started as an object"):
        decode_stream(events)
    text_block = _compaction_stream({"type": "compaction_delta", "content": "more"})
    text_block[1]["content_block"] = {"type": "text", "text": ""}
    with pytest.raises(ProviderError, match="a compaction_delta for a text block"):
        decode_stream(text_block)

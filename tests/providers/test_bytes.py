"""The bytes entry point of every codec: the same JSON as its dict, written once, compactly."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall._json import KeptItems
from carryall.blocks import Message, Origin, Text, Thinking, ToolResult, ToolUse
from carryall.errors import HistoryError
from carryall.providers import Capabilities, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import openai as openai_wire
from carryall.providers import responses as responses_wire
from carryall.providers.codec import Codec, anthropic_codec, openai_codec, responses_codec
from tests.support.fidelity import histories as fidelity_histories
from tests.support.goldens import GOLDENS, TOOLS

SEES_AND_CALLS = Capabilities(vision=True, native_tools=True, thinking=True)
PROMPT_MODE = Capabilities(vision=True, native_tools=False, thinking=False)

CODECS = [
    pytest.param(anthropic_codec(SEES_AND_CALLS), {"stream": True}, id="anthropic"),
    pytest.param(
        openai_codec(SEES_AND_CALLS, "openai"),
        {"stream": True, "stream_options": {"include_usage": True}},
        id="openai",
    ),
    pytest.param(
        openai_codec(SEES_AND_CALLS, "llama-server"),
        {"stream": True, "stream_options": {"include_usage": True}},
        id="llama-server",
    ),
    pytest.param(
        openai_codec(PROMPT_MODE, "llama-server"),
        {"stream": True, "stream_options": {"include_usage": True}},
        id="prompt-constrained",
    ),
    pytest.param(
        openai_codec(PROMPT_MODE, "openai"),
        {"stream": True, "stream_options": {"include_usage": True}},
        id="prompt",
    ),
    pytest.param(responses_codec(SEES_AND_CALLS), {"stream": True}, id="responses"),
    pytest.param(responses_codec(PROMPT_MODE, llama=True), {"stream": True}, id="responses-prompt"),
]


def request_for(history: list[Message]) -> Request:
    return Request(
        model="m",
        system="Be brief.",
        messages=tuple(history),
        tools=TOOLS,
        max_tokens=256,
        cache="auto",
    )


@pytest.mark.parametrize("name", sorted(GOLDENS))
@pytest.mark.parametrize(("codec", "asks_for_stream"), CODECS)
def test_bytes_are_the_same_json_as_the_dict(
    codec: Codec, asks_for_stream: dict[str, Any], name: str
) -> None:
    request = request_for(GOLDENS[name])
    body = json.loads(json.dumps(codec.encode(request)))
    assert json.loads(codec.encode_bytes(request, False)) == body
    assert json.loads(codec.encode_bytes(request, True)) == {**body, **asks_for_stream}


@pytest.mark.parametrize(("codec", "asks_for_stream"), CODECS)
def test_bytes_are_compact_utf8_with_non_ascii_kept(
    codec: Codec, asks_for_stream: dict[str, Any]
) -> None:
    raw = codec.encode_bytes(request_for([Message.user("héllo ✓")]), True)
    assert "héllo ✓".encode() in raw
    compact = json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":"))
    assert raw == compact.encode()


def test_anthropic_bytes_refuse_a_broken_history_like_the_dict() -> None:
    broken = Request(
        model="m", messages=(Message.assistant([ToolUse("c1", "read_file", {})]),), max_tokens=9
    )
    with pytest.raises(HistoryError) as from_dict:
        anthropic_wire.encode_request(broken, SEES_AND_CALLS)
    with pytest.raises(type(from_dict.value)) as from_bytes:
        anthropic_wire.encode_request_bytes(broken, SEES_AND_CALLS)
    assert str(from_bytes.value) == str(from_dict.value)


def test_openai_bytes_keep_tool_arguments_as_a_json_string() -> None:
    request = request_for(GOLDENS["parallel_round_with_image"])
    sent = json.loads(openai_wire.encode_request_bytes(request, SEES_AND_CALLS))
    calls = sent["messages"][2]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "notes.txt"},
        {"window": "editor"},
    ]


@pytest.mark.parametrize("name", sorted(GOLDENS))
@pytest.mark.parametrize(("codec", "asks_for_stream"), CODECS)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_sent_is_the_dict_bodys_bytes_exactly_with_its_downgrades(
    codec: Codec, asks_for_stream: dict[str, Any], name: str, stream: bool
) -> None:
    request = request_for(GOLDENS[name])
    encoded = codec.encode_reported(request)
    sent = codec.sent(request, stream)
    assert sent.data == codec.sent_bytes(encoded.body, stream)
    assert sent.downgrades == encoded.downgrades


def test_sent_reports_what_the_wire_could_not_take_like_encode() -> None:
    other = Origin("anthropic", "api.anthropic.com", "claude-opus-4-1")
    history = [
        Message.user("Hi"),
        Message.assistant([Thinking("old", "SIG-OTHER", other), Text("Hi!")]),
        Message.user("Again?"),
    ]
    request = request_for(history)
    for codec in (anthropic_codec(SEES_AND_CALLS), openai_codec(SEES_AND_CALLS, "openai")):
        sent = codec.sent(request, False)
        assert sent.downgrades == codec.encode_reported(request).downgrades != ()
        assert b"SIG-OTHER" not in sent.data


def _text_rounds(rounds: int) -> list[Message]:
    history: list[Message] = []
    for n in range(rounds):
        history.append(Message.user(f"question {n}"))
        history.append(
            Message.assistant([Text("Looking."), ToolUse(f"c{n}", "read_file", {"path": f"{n}"})])
        )
        history.append(Message.tool_results([ToolResult(f"c{n}", "line one\nline two")]))
        history.append(Message.assistant([Text(f"answer {n}")]))
    return history


@pytest.mark.parametrize(
    ("module", "sent"),
    [
        pytest.param(
            anthropic_wire,
            lambda r: anthropic_wire.encode_sent(r, SEES_AND_CALLS),
            id="anthropic",
        ),
        pytest.param(
            openai_wire, lambda r: openai_wire.encode_sent(r, SEES_AND_CALLS), id="openai"
        ),
        pytest.param(
            responses_wire,
            lambda r: responses_wire.encode_sent(r, SEES_AND_CALLS),
            id="responses",
        ),
    ],
)
def test_the_sent_body_holds_no_tracked_container_per_message(
    module: Any, sent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long history's body, at the moment it is written, costs the collector a few objects.

    Containers the collector tracks and that live until the body is written
    are what made full collections over the whole heap (issue 14): the
    tracked objects made and still alive when the last `body_bytes` runs
    (on the whole body) must not grow with the history.
    """
    import gc

    alive: list[int] = []
    write = module.body_bytes

    def counted(body: Any) -> bytes:
        alive.append(len(gc.get_objects(generation=0)))
        return write(body)

    request = request_for(_text_rounds(500))  # 2,000 messages
    sent(request)  # what a message keeps once checked (its shape) is made the first time
    monkeypatch.setattr(module, "body_bytes", counted)
    old = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1_000_000, old[1], old[2])  # what is made tracked stays young until counted
    try:
        before = len(gc.get_objects(generation=0))
        sent(request)
    finally:
        gc.set_threshold(*old)
    assert alive[-1] - before < 100


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"path": ("a", "b"), 3: None}, id="tuple-and-int-key"),
        pytest.param({"when": object()}, id="not-json"),
    ],
)
def test_sent_writes_an_odd_tool_input_as_the_dict_path_does(value: Any) -> None:
    history = [
        Message.user("hi"),
        Message.assistant([ToolUse("c1", "read_file", value)]),
        Message.tool_results([ToolResult("c1", "ok")]),
    ]
    request = request_for(history)
    codec = anthropic_codec(SEES_AND_CALLS)
    try:
        expected: Any = codec.sent_bytes(codec.encode(request), False)
    except TypeError as exc:
        expected = TypeError(str(exc))
    if isinstance(expected, TypeError):
        with pytest.raises(TypeError, match=re.escape(str(expected))):
            codec.sent(request, False)
    else:
        assert codec.sent(request, False).data == expected


# -- the messages the last body began with, kept as JSON (`KeptItems`) ---------------


class _SmallChunks(KeptItems):
    CHUNK = 3  # type: ignore[misc]  # chunk edges and merges on short histories


def _sent_both(kind: str, request: Request, kept: KeptItems) -> tuple[Any, Any]:
    """`encode_sent` through `kept`, and without it: each a `Sent` or the error raised."""

    def sent(with_kept: KeptItems | None) -> Any:
        try:
            if kind == "anthropic":
                return anthropic_wire.encode_sent(request, SEES_AND_CALLS, kept=with_kept)
            if kind == "responses":
                return responses_wire.encode_sent(request, SEES_AND_CALLS, kept=with_kept)
            return openai_wire.encode_sent(request, SEES_AND_CALLS, kind, kept=with_kept)  # type: ignore[arg-type]
        except Exception as exc:  # the same refusal either way, compared below
            return (type(exc), str(exc))

    return sent(kept), sent(None)


def _agent_steps(history: list[Message], other: list[Message]) -> list[list[Message]]:
    """Histories one codec sends in turn: growing, switching, shrinking, copied, edited."""
    copied = msgspec.json.decode(msgspec.json.encode(history), type=list[Message])
    edited = [*history]
    if len(edited) > 2:
        edited[len(edited) // 2] = Message.user("edited in place of the middle message")
    return [
        *(history[:cut] for cut in range(1, len(history) + 1)),
        other,
        history,
        copied,  # equal messages, not the same objects
        edited,
        history[: len(history) // 2 or 1],
        [*history, *other[1:]],
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fidelity_histories(),
    fidelity_histories(),
    st.sampled_from(["anthropic", "openai", "llama-server", "responses"]),
)
def test_kept_json_sends_the_very_bytes_a_fresh_encode_does(
    history: list[Message], other: list[Message], kind: str
) -> None:
    """Whatever a codec sent before, what it sends now is the body written whole, or its error."""
    kept = _SmallChunks()
    for step in _agent_steps(history, other):
        for max_images in (100, 1):  # an image limit turns earlier images into placeholders
            request = Request(
                model="m", system="Be brief.", messages=tuple(step), tools=TOOLS,
                max_tokens=256, max_images=max_images,
            )  # fmt: skip
            with_kept, fresh = _sent_both(kind, request, kept)
            assert with_kept == fresh


def test_kept_json_writes_only_what_is_new_and_never_keeps_a_payload() -> None:
    """A step that adds messages writes those alone; a message with an image, every time."""
    written: list[tuple[int, int]] = []
    history: list[Any] = [f"m{n}" for n in range(10)]

    def write(start: int, end: int) -> list[Any]:
        written.append((start, end))
        return history[start:end]

    kept = _SmallChunks()
    first = kept.items(history, {4}, write)
    assert written == [(0, 10)]  # nothing to go on from: written whole, only remembered
    assert msgspec.json.encode(first) == msgspec.json.encode(history)
    written.clear()
    history = [*history, "m10", "m11"]
    second = kept.items(history, {4}, write)
    # It goes on: now written in chunks, cut before and after the payload message.
    assert written == [(0, 3), (3, 4), (4, 5), (5, 8), (8, 11), (11, 12)]
    assert msgspec.json.encode(second) == msgspec.json.encode(history)
    written.clear()
    history = [*history, "m12", "m13"]
    third = kept.items(history, {4}, write)
    # The payload message again, then only the two new messages (joined to the short last chunk).
    assert written == [(4, 5), (12, 14)]
    assert msgspec.json.encode(third) == msgspec.json.encode(history)
    written.clear()
    changed = [*history[:6], "changed", *history[7:]]
    kept.items(changed, {4}, write)
    assert written == [(4, 5), (5, 8), (8, 11), (11, 14)]
    written.clear()
    kept.items(["other", *history[1:]], {4}, write)
    assert written == [(0, 14)]


def test_kept_json_is_not_fooled_by_an_object_equal_to_anything() -> None:
    class Agreeable:
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    written: list[tuple[int, int]] = []

    def write(start: int, end: int) -> list[Any]:
        written.append((start, end))
        return [f"m{n}" for n in range(start, end)]

    kept = KeptItems()
    history = [Message.user("a"), Message.user("b")]
    kept.items(history, (), write)
    kept.items(history, (), write)  # it went on: its JSON is kept now
    written.clear()
    kept.items([Agreeable(), Agreeable()], (), write)
    assert written == [(0, 2)]


def test_a_backend_codec_keeps_its_last_messages_and_sends_the_same_bytes() -> None:
    """Through `Codec.sent`, as a transport calls it: an agent's growing history, step by step."""
    for codec, kind in (
        (anthropic_codec(SEES_AND_CALLS), "anthropic"),
        (openai_codec(SEES_AND_CALLS, "openai"), "openai"),
        (responses_codec(SEES_AND_CALLS), "responses"),
    ):
        history = _text_rounds(300)
        for cut in (400, 403, 404, 800, 1200):
            request = request_for(history[:cut])
            fresh = _sent_both(kind, request, KeptItems())[1]
            assert codec.sent(request, False) == fresh


def test_one_codec_shared_by_threads_sends_each_its_own_bytes() -> None:
    """Two conversations sent through one codec from two threads: each body is its own, whole."""
    import sys
    import threading

    codec = openai_codec(SEES_AND_CALLS, "openai")
    histories = [_text_rounds(60), [Message.user("other"), *_text_rounds(40)[1:]]]
    expected = [
        [
            _sent_both("openai", request_for(h[:cut]), KeptItems())[1]
            for cut in range(4, len(h) + 1, 4)
        ]
        for h in histories
    ]
    failures: list[str] = []

    def converse(which: int) -> None:
        history = histories[which]
        for _ in range(20):
            for step, cut in enumerate(range(4, len(history) + 1, 4)):
                if codec.sent(request_for(history[:cut]), False) != expected[which][step]:
                    failures.append(f"conversation {which}, {cut} messages")

    threads = [threading.Thread(target=converse, args=(which,)) for which in (0, 1)]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns as often as they can
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    assert failures == []


# -- payloads: written once, gathered into one body --------------------------------


_BASE64 = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_ANY_TEXT = st.text(max_size=40)  # a "payload" that is not base64 after all: escaped as any text


@given(
    st.lists(
        st.tuples(st.one_of(_BASE64, _ANY_TEXT), st.sampled_from(["", "data:image/png;base64,"])),
        max_size=6,
    ),
    st.lists(st.one_of(st.text(max_size=20), st.integers()), max_size=6),
)
@settings(max_examples=300, deadline=None)
def test_a_body_with_payloads_is_the_json_of_its_dict_form(
    payloads: list[tuple[str, str]], around: list[Any]
) -> None:
    # Payloads gathered between the marks give the bytes msgspec writes for
    # the dict form (each payload's text in place), wherever they stand.
    from carryall._json import Payload, body_bytes, builtins

    items: list[Any] = []
    for i, (data, prefix) in enumerate(payloads):
        items.append({"data": Payload(data, prefix), "n": around[i] if i < len(around) else i})
        items.extend(around[i : i + 1])
    body = {"model": "m", "messages": items, "tail": Payload("QUJD")}
    expected = msgspec.json.encode(builtins(body))
    assert body_bytes(body) == expected
    assert json.loads(expected)["tail"] == "QUJD"


def test_a_nul_the_encoder_did_not_write_falls_back_to_writing_each_payload_in_place() -> None:
    # Only a Raw holding invalid JSON can bring one; the body is still what
    # msgspec writes, not pieces gathered at the wrong marks.
    from carryall._json import Payload, body_bytes

    body = {"odd": msgspec.Raw(b'"a\x00b"'), "image": Payload("QUJD"), "after": [1, 2]}
    assert body_bytes(body) == b'{"odd":"a\x00b","image":"QUJD","after":[1,2]}'


def test_a_payload_body_is_written_without_copying_the_payload_first() -> None:
    # The payload's text is gathered straight into the body: no quoted copy
    # of it is made on the way (tracemalloc sees one body-sized block at most).
    import tracemalloc

    from carryall._json import Payload, body_bytes

    data = "QUJD" * 2_000_000  # 8 MB of base64
    body = {"messages": [{"image": Payload(data)}, {"text": "after"}]}
    body_bytes(body)  # the payload's text is then known to need no escape
    tracemalloc.start()
    try:
        written = body_bytes(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written == msgspec.json.encode({"messages": [{"image": data}, {"text": "after"}]})
    assert peak < 1.2 * len(written)

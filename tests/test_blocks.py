"""SPEC §1: blocks, messages, images, the JSON form and the history validator."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from carryall.blocks import (
    Block,
    Image,
    Message,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    block_from_dict,
    block_to_dict,
    image_media_type,
    image_placeholder,
    messages_from_dicts,
    messages_to_dicts,
    validate_history,
)
from carryall.carrier import Marker, MarkerKind
from carryall.errors import BlockError, CarryallError, HistoryError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
images = st.builds(
    Image.from_bytes,
    st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
    st.binary(max_size=40),
    st.none() | st.text(max_size=10),
)
blocks = st.one_of(
    st.builds(Text, st.text(max_size=20)),
    st.builds(Thinking, st.text(max_size=20), st.none() | st.text(max_size=10)),
    st.builds(ToolUse, st.text(max_size=8), st.text(max_size=8), json_values),
    st.builds(
        ToolResult,
        st.text(max_size=8),
        st.text(max_size=20),
        st.booleans(),
        st.lists(
            st.builds(Marker, st.sampled_from(list(MarkerKind)), st.text(min_size=1, max_size=8)),
            max_size=2,
        ).map(tuple),
    ),
    images,
)


@given(block=blocks)
def test_block_json_round_trips(block: Block) -> None:
    data = block_to_dict(block)
    assert data["type"] in {"text", "thinking", "tool_use", "tool_result", "image"}
    assert block_from_dict(json.loads(json.dumps(data))) == block


@given(
    content=st.lists(blocks, min_size=1, max_size=4), role=st.sampled_from(["user", "assistant"])
)
def test_message_json_round_trips(content: list[Block], role: Any) -> None:
    message = Message(role, content)
    assert Message.from_dict(json.loads(json.dumps(message.to_dict()))) == message


def test_optional_fields_left_out_when_absent() -> None:
    assert block_to_dict(Thinking("t")) == {"type": "thinking", "text": "t"}
    assert block_to_dict(Image("image/png", "AAAA")) == {
        "type": "image",
        "media_type": "image/png",
        "data": "AAAA",
    }
    assert block_from_dict(
        {"type": "tool_result", "tool_use_id": "a", "content": "b"}
    ) == ToolResult("a", "b", False)


def test_blocks_compare_by_value_and_are_immutable() -> None:
    assert Message.user("hi") == Message("user", [Text("hi")])
    assert ToolUse("a", "b", {"x": [1]}) == ToolUse("a", "b", {"x": [1]})
    with pytest.raises(AttributeError):
        Text("a").text = "b"  # type: ignore[misc]
    message = Message.user("hi")
    assert isinstance(message.content, tuple)


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"role": "user", "content": [{"type": "text"}]}, "$.content[0]"),
        ({"role": "user", "content": [{"type": "video", "x": 1}]}, "$.content[0].type"),
        ({"role": "user", "content": [{"type": "text", "text": 3}]}, "$.content[0].text"),
        ({"role": "robot", "content": []}, "$.role"),
        ({"role": "user"}, "content"),
        ({"role": "user", "content": "hi"}, "$.content"),
        (
            {
                "role": "user",
                "content": [
                    {"type": "image", "media_type": "image/png", "data": "data:image/png;base64,AA"}
                ],
            },
            "$.content[0]",
        ),
        (
            {
                "role": "user",
                "content": [{"type": "image", "media_type": "image/tiff", "data": "AA"}],
            },
            "$.content[0]",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "b", "is_error": "yes"}
                ],
            },
            "$.content[0].is_error",
        ),
        ([1, 2], "object"),
    ],
)
def test_hostile_json_is_a_clear_error_naming_the_position(data: Any, where: str) -> None:
    with pytest.raises(CarryallError) as info:
        Message.from_dict(data)
    assert isinstance(info.value, BlockError)
    assert where in str(info.value)


def test_history_decode_names_message_index() -> None:
    with pytest.raises(BlockError, match=r"\$\[1\]\.content\[0\]"):
        messages_from_dicts(
            [
                {"role": "user", "content": [{"type": "text", "text": "a"}]},
                {"role": "user", "content": [{"type": "nope"}]},
            ]
        )


def test_history_json_round_trip() -> None:
    history = [Message.user("a"), Message.assistant([Text("b")])]
    assert messages_from_dicts(messages_to_dicts(history)) == history


# -- images --------------------------------------------------------------------


def test_from_bytes_is_bare_base64() -> None:
    image = Image.from_bytes("image/png", b"\x89PNG\r\n", "shot.png")
    assert image.data == base64.b64encode(b"\x89PNG\r\n").decode()
    assert not image.data.startswith("data:")
    assert image.to_bytes() == b"\x89PNG\r\n"
    assert image.data_uri() == f"data:image/png;base64,{image.data}"


def test_data_prefix_refused_in_constructor() -> None:
    with pytest.raises(BlockError):
        Image("image/png", "data:image/png;base64,AAAA")
    with pytest.raises(BlockError):
        Image("image/png", "DATA:image/png;base64,AAAA")


def test_media_type_allowlist() -> None:
    with pytest.raises(BlockError):
        Image.from_bytes("image/svg+xml", b"<svg/>")


def test_image_placeholder_wording() -> None:
    assert image_placeholder("image/png", "shot.png") == "[image: shot.png (image/png)]"
    assert image_placeholder("image/png") == "[image: image/png]"
    assert image_placeholder("image/png", None) == "[image: image/png]"
    assert (
        Image.from_bytes("image/gif", b"x", "a.gif").placeholder() == "[image: a.gif (image/gif)]"
    )


def test_image_placeholder_stays_one_line() -> None:
    assert "\n" not in image_placeholder("image/png", "evil\nname.png")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.png", "image/png"),
        ("A.PNG", "image/png"),
        ("x/y.jpg", "image/jpeg"),
        ("y.JPEG", "image/jpeg"),
        ("z.gif", "image/gif"),
        ("w.WebP", "image/webp"),
        ("t.tiff", None),
        ("s.svg", None),
        ("noext", None),
        ("png", None),
        (".png.txt", None),
    ],
)
def test_image_media_type(name: str, expected: str | None) -> None:
    assert image_media_type(name) == expected


# -- message helpers -----------------------------------------------------------


def test_message_helpers() -> None:
    turn = Message.assistant(
        [Thinking("hmm", "sig"), Text("a"), ToolUse("1", "f", {}), Text("b"), ToolUse("2", "g", {})]
    )
    assert turn.text() == "ab"
    assert turn.thinking() == "hmm"
    assert [u.id for u in turn.tool_uses()] == ["1", "2"]
    results = Message.tool_results(
        [ToolResult("1", "x"), ToolResult("2", "y")], [Image("image/png", "AA")]
    )
    assert [type(b) for b in results.content] == [ToolResult, ToolResult, Image]
    assert not results.is_plain_user_text()
    assert Message.user("hi").is_plain_user_text()
    assert not turn.is_plain_user_text()


# -- validate_history ----------------------------------------------------------


def _round(*ids: str) -> list[Message]:
    return [
        Message.user("go"),
        Message.assistant([ToolUse(i, "f", {}) for i in ids]),
        Message.tool_results([ToolResult(i, "ok") for i in ids]),
    ]


def test_valid_history_passes() -> None:
    validate_history(_round("a", "b") + [Message.assistant([Text("done")])])


@pytest.mark.parametrize(
    ("history", "index", "reason"),
    [
        ([Message("user", [])], 0, "no content"),
        ([Message.assistant([Image("image/png", "AA")])], 0, "image"),
        (_round("a", "b")[:2] + [Message.tool_results([ToolResult("a", "ok")])], 2, "not answered"),
        (
            _round("a")[:2] + [Message.tool_results([ToolResult("a", "1"), ToolResult("a", "2")])],
            2,
            "twice",
        ),
        (
            _round("a")[:2] + [Message.tool_results([ToolResult("a", "1"), ToolResult("z", "2")])],
            2,
            "answers no call",
        ),
        ([Message.user("x"), Message.tool_results([ToolResult("q", "r")])], 1, "answers no call"),
        (_round("a")[:2], 1, "never answered"),
        (_round("a")[:2] + [Message.assistant([Text("x")])], 1, "not answered"),
        ([Message("user", [ToolUse("a", "f", {})])], 0, "assistant"),
        ([Message("user", [Thinking("t")])], 0, "thinking"),
        ([Message.assistant([ToolUse("a", "f", {}), ToolUse("a", "g", {})])], 0, "twice"),
    ],
)
def test_broken_history_names_the_index(history: list[Message], index: int, reason: str) -> None:
    with pytest.raises(HistoryError) as info:
        validate_history(history)
    assert info.value.index == index
    assert f"message {index}" in str(info.value)
    assert reason in str(info.value)


def test_messages_are_msgspec_json_encodable() -> None:
    # Session recording encodes messages with msgspec directly.
    message = Message.tool_results([ToolResult("a", "b")], [Image("image/png", "AA", "s.png")])
    assert msgspec.json.decode(msgspec.json.encode(message), type=Message) == message

"""SPEC §1: blocks, messages, images, the JSON form and the history validator."""

from __future__ import annotations

import base64
import copy
import gc
import json
import pickle
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carryall.blocks as blocks_module
from carryall.blocks import (
    Block,
    HistorySurvey,
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
    survey_history,
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


# -- survey_history: what the check notes on its way ---------------------------------

AUDIO = (Marker(MarkerKind.AUDIO, "a.wav"),)


def test_survey_counts_images_and_names_every_irregular_message() -> None:
    history = [
        Message.user("look", [Image("image/png", "AA")]),  # 0: an image
        Message.assistant([Text("fine"), ToolUse("a", "f", {"p": 1})]),  # 1
        Message.tool_results([ToolResult("a", "ok")]),  # 2
        Message.assistant([Thinking("hm", "sig"), ToolUse("b", "f", {})]),  # 3: thinking
        Message("user", (Text("first"), ToolResult("b", "ok"))),  # 4: a result after text
        Message.assistant([ToolUse("c", "f", "not json")]),  # 5: input not an object
        Message.tool_results([ToolResult("c", "")]),  # 6: an empty result
        Message.assistant([ToolUse("d", "f", {})]),  # 7
        Message.tool_results([ToolResult("d", "ok", attachments=AUDIO)]),  # 8: an attachment
        Message.assistant([Text(" \n")]),  # 9: blank text
        Message.user("bye", [Image("image/gif", "AA"), Image("image/png", "AA")]),  # 10
    ]
    assert survey_history(history) == HistorySurvey(3, [0, 3, 4, 5, 6, 8, 9, 10])


def _outcome(check: Any, history: Any) -> Any:
    try:
        return check(history)
    except HistoryError as exc:
        return ("refused", exc.index, str(exc))


def test_a_valid_history_is_surveyed() -> None:
    history = [
        Message.user("go"),
        Message.assistant([Text("two"), ToolUse("a", "f", {}), ToolUse("b", "g", [1])]),
        Message.tool_results(
            [ToolResult("b", "2"), ToolResult("a", "1")], [Image("image/png", "A")]
        ),
        Message.assistant([Thinking("t"), Text("done")]),
    ]
    assert survey_history(history) == HistorySurvey(1, [1, 2, 3])


def test_a_message_copied_without_post_init_is_surveyed_the_same() -> None:
    call = Message.assistant([ToolUse("a", "f", {})])
    answer = Message.tool_results([ToolResult("a", "ok")], [Image("image/png", "AA")])
    copies = [
        copy.copy(answer),
        copy.deepcopy(answer),
        pickle.loads(pickle.dumps(answer)),
        msgspec.json.decode(msgspec.json.encode(answer), type=Message),
        msgspec.structs.replace(answer, content=answer.content),
    ]
    for again in copies:
        assert survey_history([Message.user("go"), call, again]) == HistorySurvey(1, [2])
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        copy.copy(answer).nope  # noqa: B018


def test_a_message_is_its_value_and_nothing_more() -> None:
    message = Message.assistant([Text("hi"), ToolUse("a", "f", {"k": 1})])
    assert json.loads(msgspec.json.encode(message)) == message.to_dict()
    assert set(msgspec.to_builtins(message)) == {"role", "content"}
    assert message == copy.copy(message)
    assert "_shape" not in repr(message)


def test_messages_and_blocks_are_not_tracked_by_the_collector() -> None:
    # A long history is hundreds of thousands of messages and blocks, none in
    # a cycle: untracked, a collection never rescans them, so loading one
    # needs no pause and sets off no full collection as it grows.
    history = [
        Message.user("look", [Image("image/png", "AA")]),
        Message.assistant([Thinking("t", "s"), Text("x"), ToolUse("a", "f", {"k": [1]})]),
        Message.tool_results([ToolResult("a", "ok", attachments=AUDIO)]),
    ]
    decoded = msgspec.json.decode(msgspec.json.encode(history), type=list[Message])
    for message in [*history, *decoded, *messages_from_dicts(messages_to_dicts(history))]:
        assert not gc.is_tracked(message)
        assert not any(gc.is_tracked(block) for block in message.content)


def test_a_shape_is_worked_out_afresh_and_kept_nowhere() -> None:
    # Every check reads the message again (nothing is cached on it, so it has
    # no instance dict to hold a cache); a message refused once is refused
    # the same again.
    call = Message.assistant([ToolUse("a", "f", {}), ToolUse("a", "g", {})])
    history = [Message.user("go"), call]
    for _ in range(2):
        with pytest.raises(HistoryError, match="message 1: tool call id 'a' is used twice"):
            survey_history(history)
    assert call._shape == call._shape
    assert not hasattr(call, "__dict__")


ids = st.sampled_from(["a", "b", "c", ""])
any_block = st.one_of(
    st.builds(Text, st.sampled_from(["hi", "", "  ", "x\n"])),
    st.builds(Thinking, st.sampled_from(["t", ""]), st.none() | st.just("sig")),
    st.builds(ToolUse, ids, st.just("f"), st.sampled_from([{}, {"k": 1}, "raw", [1]])),
    st.builds(
        ToolResult, ids, st.sampled_from(["ok", ""]), st.booleans(), st.sampled_from([(), AUDIO])
    ),
    st.builds(Image, st.sampled_from(["image/png", "image/gif"]), st.just("AA")),
)
stray = st.one_of(
    st.builds(Message, st.sampled_from(["user", "assistant"]), st.lists(any_block, max_size=3)),
    st.sampled_from([None, "a string", {"role": "user", "content": []}]),
)


@st.composite
def rough_histories(draw: st.DrawFn) -> list[Any]:
    """Histories built valid round by round, then sometimes knocked out of true."""
    history: list[Any] = []
    calls = 0
    for _ in range(draw(st.integers(0, 5))):
        history.append(
            Message("user", draw(st.lists(any_block.filter(_user_kind), min_size=1, max_size=2)))
        )
        called: list[str] = []
        blocks: list[Block] = draw(st.lists(any_block.filter(_talk_kind), max_size=2))
        for _ in range(draw(st.integers(0, 3))):
            calls += 1
            called.append(f"call_{calls}")
            blocks.append(ToolUse(called[-1], "f", draw(st.sampled_from([{}, {"k": 1}, "raw"]))))
        history.append(Message("assistant", blocks or [Text("ok")]))
        if called:
            results = [
                ToolResult(
                    i,
                    draw(st.sampled_from(["ok", ""])),
                    attachments=draw(st.sampled_from([(), AUDIO])),
                )
                for i in draw(st.permutations(called))
            ]
            if draw(st.integers(0, 9)) == 0:
                results.pop()  # a call left unanswered
            extras = draw(st.lists(any_block.filter(_user_kind), max_size=2))
            at = draw(st.integers(0, len(results)))
            history.append(Message("user", [*results[:at], *extras, *results[at:]]))
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.integers(0, len(history)))
        if draw(st.booleans()) and history:
            history[min(where, len(history) - 1)] = draw(stray)
        else:
            history.insert(where, draw(stray))
    return history


def _user_kind(block: Block) -> bool:
    return isinstance(block, Text | Image)


def _talk_kind(block: Block) -> bool:
    return isinstance(block, Text | Thinking)


def _oracle(history: list[Any]) -> Any:
    """What `survey_history` should say, from the rules as written, without its walk.

    The index of the first message at fault (an assistant's unanswered calls
    are its own fault, unless the next message is a user message, which is
    then at fault for not answering them), else the images and the
    messages that are not canonical.
    """
    user_kinds, talk_kinds = {Text, Image, ToolResult}, {Text, Thinking, ToolUse}

    def calls_of(message: Any) -> list[str]:
        if type(message) is not Message or message.role != "assistant":
            return []
        return [b.id for b in message.content if type(b) is ToolUse]

    def at_fault(index: int, message: Any) -> bool:
        if type(message) is not Message or not message.content:
            return True
        kinds = {type(b) for b in message.content}
        if message.role == "assistant":
            calls = calls_of(message)
            last = index + 1 == len(history)
            following = None if last else history[index + 1]
            unanswered = bool(calls) and (
                last
                or (
                    type(following) is Message
                    and following.role == "assistant"
                    and bool(following.content)  # else that message is at fault first
                )
            )
            duplicated = "" in calls or len(set(calls)) < len(calls)
            return not kinds <= talk_kinds or duplicated or unanswered
        answers = [b.tool_use_id for b in message.content if type(b) is ToolResult]
        called = calls_of(history[index - 1]) if index else []
        return not kinds <= user_kinds or sorted(answers) != sorted(called)

    for index, message in enumerate(history):
        if at_fault(index, message):
            return ("refused", index)
    images = sum(type(b) is Image for m in history for b in m.content)
    irregular = [i for i, m in enumerate(history) if not _canonical(m)]
    return HistorySurvey(images, irregular)


def _canonical(message: Message) -> bool:
    def blank(block: Block) -> bool:
        return type(block) is Text and not block.text.strip()

    if any(blank(b) or type(b) in (Thinking, Image) for b in message.content):
        return False
    if any(type(b) is ToolUse and not isinstance(b.input, dict) for b in message.content):
        return False
    results = [b for b in message.content if type(b) is ToolResult]
    if list(message.content[: len(results)]) != results:  # results ahead of everything else
        return False
    return all(r.content and not r.attachments for r in results)


# Generation builds whole messages, which is slow on a loaded machine: the
# health check would time the machine, not the strategy.
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(history=rough_histories())
def test_the_survey_agrees_with_the_rules_as_written(history: list[Any]) -> None:
    got = _outcome(survey_history, history)
    if isinstance(got, tuple) and got[0] == "refused":
        got = got[:2]
    assert got == _oracle(history)


# -- the survey goes on from the last history it read --------------------------------


def _fresh_survey(history: list[Any]) -> Any:
    """`survey_history` with nothing held, so it reads every message."""
    held = blocks_module._SURVEYED.held
    blocks_module._SURVEYED.held = ()
    try:
        return _outcome(survey_history, history)
    finally:
        blocks_module._SURVEYED.held = held


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(history=rough_histories(), data=st.data())
def test_a_survey_that_goes_on_from_a_prefix_says_what_a_whole_one_says(
    history: list[Any], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(history)))
    blocks_module._SURVEYED.held = ()
    _outcome(survey_history, history[:cut])  # held when it passed to its end
    assert _outcome(survey_history, history) == _fresh_survey(history)
    # Again, now that the whole one may be held, and as a tuple.
    assert _outcome(survey_history, tuple(history)) == _fresh_survey(history)


def test_a_growing_history_is_surveyed_from_where_the_last_one_ended() -> None:
    blocks_module._SURVEYED.held = ()
    history: list[Message] = [Message.user("go")]
    for turn in range(50):
        call = f"call_{turn}"
        history += [
            Message.assistant([Text("on it"), ToolUse(call, "f", {"n": turn})]),
            Message.tool_results([ToolResult(call, "")], [Image("image/png", "A")]),
        ]
        assert survey_history(history) == _fresh_survey(history)
    held = blocks_module._SURVEYED.held
    assert len(held) == 1 and len(held[0][0]) == len(history)  # each step took the last's place
    # A step that breaks the rules after a held history is refused as a whole read refuses it.
    broken = [*history, Message.assistant([ToolUse("x", "f", {})]), Message.user("no answer")]
    assert _outcome(survey_history, broken) == _fresh_survey(broken)
    assert isinstance(_outcome(survey_history, broken), tuple)


def test_a_held_prefix_does_not_let_an_object_that_equals_anything_through() -> None:
    class Anything:
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    history = [Message.user("go"), Message.assistant([Text("ok")])]
    survey_history(history)
    sneaky: list[Any] = [Anything(), Message.assistant([Text("ok")]), Message.user("more")]
    with pytest.raises(HistoryError, match="expected a Message"):
        survey_history(sneaky)


def test_equal_messages_that_are_not_the_same_objects_go_on_from_the_held_history() -> None:
    blocks_module._SURVEYED.held = ()
    history = [Message.user("go"), Message.assistant([Text("ok")])]
    survey_history(history)
    again = [Message.from_dict(m.to_dict()) for m in history] + [Message.user("next")]
    assert again[0] is not history[0]
    assert survey_history(again) == _fresh_survey(again)
    assert len(blocks_module._SURVEYED.held[0][0]) == 3

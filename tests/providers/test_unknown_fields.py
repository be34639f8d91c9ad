"""Nothing a wire sends is dropped without a word: every decoder, stream decoder and
importer, fed an unknown item, part or field at each level it reads, keeps it in an
`Opaque` block or names it in its loss report (`Response.downgrades`, `Imported.downgrades`).

Each case starts from a small valid payload of its wire, adds one thing no
codec models (a field with a made-up name, or an item or part of a made-up
type) at one place, and looks for that name in the blocks' raw JSON and in
the report. The first test shows the checker failing on a payload that
carries nothing unknown, so a pass is not a checker that always says yes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carryall.blocks import Message, Opaque, Text
from carryall.providers import Response
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import bedrock as bedrock_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers import openai as openai_wire
from carryall.providers import responses as responses_wire
from carryall.providers._common import UNKEPT

Path = tuple[Any, ...]
"""Keys and indices from a payload's root to the object (or list) that gets the unknown thing."""


def _reached(name: str, messages: list[Message], downgrades: Any) -> bool:
    kept = any(
        (isinstance(block, Opaque) and name in block.raw)
        or (getattr(block, "spelling", None) is not None and name in block.spelling.extra)
        for message in messages
        for block in message.content
    )
    return kept or any(name in d.reason for d in downgrades)


# -- each wire's samples ------------------------------------------------------------------

ANTHROPIC = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "thinking", "thinking": "hm", "signature": "SIG"},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"at": "x"}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def _anthropic_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    start = {**body, "content": [], "stop_reason": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(body["content"]):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": body["stop_reason"]}})
    events.append({"type": "message_stop"})
    return events


ANTHROPIC_HISTORY = [
    {"role": "user", "content": [{"type": "text", "text": "look"}]},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "seen"}],
    },
]

OPENAI = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "deepseek-reasoner",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Hi.", "reasoning_content": "hm"},
        }
    ],
}
OPENAI_CHUNKS: list[Any] = [
    {
        "id": "c",
        "model": "deepseek-reasoner",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi."}}],
    },
    {
        "id": "c",
        "model": "deepseek-reasoner",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    },
    "[DONE]",
]
OPENAI_HISTORY = [
    {"role": "user", "content": "look"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "seen"},
]

RESPONSES = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "look",
            "arguments": "{}",
        },
    ],
}
RESPONSES_HISTORY = [
    {"type": "message", "role": "user", "content": "look"},
    {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "seen"},
]

GEMINI = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Hi."},
                    {"functionCall": {"name": "look", "args": {}}, "thoughtSignature": "U0lH"},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "modelVersion": "gemini-3-pro-preview",
}
GEMINI_HISTORY = [
    {"role": "user", "parts": [{"text": "look"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "look", "args": {}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "look", "response": {}}}]},
]

BEDROCK = {
    "output": {"message": {"role": "assistant", "content": [{"text": "Hi."}]}},
    "stopReason": "end_turn",
    "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
}
BEDROCK_EVENTS: list[Any] = [
    {"messageStart": {"role": "assistant"}},
    {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi."}}},
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "end_turn"}},
]
BEDROCK_HISTORY = [
    {"role": "user", "content": [{"text": "look"}]},
    {"role": "assistant", "content": [{"text": "seen"}]},
]


def _decoded(response: Response) -> tuple[list[Message], Any]:
    return [response.message], response.downgrades


def _imported(result: tuple[Any, Any]) -> tuple[list[Message], Any]:
    history = result[1]
    return list(history), history.downgrades


Reader = Callable[[Any], tuple[list[Message], Any]]


class Case:
    """One entry point of one wire, its sample, and where an unknown thing can go in it."""

    def __init__(
        self,
        name: str,
        sample: Any,
        read: Reader,
        fields: list[Path],
        items: list[tuple[Path, Callable[[str], Any]]] = (),  # type: ignore[assignment]
    ) -> None:
        self.name, self.sample, self.read = name, sample, read
        self.fields, self.items = fields, list(items)


def _typed(kind: str) -> Callable[[str], Any]:
    """An item or part of a made-up type, written the way its wire tags one."""
    if kind == "type":
        return lambda name: {"type": name, "payload": {"deep": [1, 2]}}
    return lambda name: {name: {"payload": [1]}}  # a wire that tags by the key (Gemini, Bedrock)


CASES = [
    Case(
        "anthropic decode",
        ANTHROPIC,
        lambda d: _decoded(anthropic_wire.decode_response(d)),
        [(), ("content", 0), ("content", 1), ("content", 2)],
        [(("content",), _typed("type"))],
    ),
    Case(
        "anthropic stream",
        _anthropic_events(ANTHROPIC),
        lambda d: _decoded(anthropic_wire.decode_stream(d)),
        [(0, "message"), (1, "content_block"), (3, "content_block"), (5, "content_block")],
        [((), _typed("type"))],
    ),
    Case(
        "anthropic import",
        ANTHROPIC_HISTORY,
        lambda d: _imported(anthropic_wire.decode_messages(d)),
        [(0,), (1,), (2,), (0, "content", 0), (1, "content", 0), (2, "content", 0)],
        [((0, "content"), _typed("type")), ((1, "content"), _typed("type"))],
    ),
    Case(
        "openai decode",
        OPENAI,
        lambda d: _decoded(openai_wire.decode_response(d)),
        [(), ("choices", 0), ("choices", 0, "message")],
    ),
    Case(
        "openai stream",
        OPENAI_CHUNKS,
        lambda d: _decoded(openai_wire.decode_stream(d)),
        [(0,), (0, "choices", 0), (0, "choices", 0, "delta")],
    ),
    Case(
        "openai import",
        OPENAI_HISTORY,
        lambda d: _imported(openai_wire.decode_messages(d)),
        [(0,), (1,), (2,)],
    ),
    Case(
        "llama-server decode",
        OPENAI,
        lambda d: _decoded(openai_wire.decode_response(d, dialect="llama-server")),
        [(), ("choices", 0), ("choices", 0, "message")],
    ),
    Case(
        "responses decode",
        RESPONSES,
        lambda d: _decoded(responses_wire.decode_response(d)),
        [(), ("output", 0), ("output", 0, "content", 0), ("output", 1)],
        [(("output",), _typed("type")), (("output", 0, "content"), _typed("type"))],
    ),
    Case(
        "responses stream",
        [{"type": "response.completed", "response": RESPONSES}],
        lambda d: _decoded(responses_wire.decode_stream(d)),
        [(0, "response"), (0, "response", "output", 0), (0, "response", "output", 1)],
        [((0, "response", "output"), _typed("type"))],
    ),
    Case(
        "responses import",
        RESPONSES_HISTORY,
        lambda d: _imported(responses_wire.decode_messages(d)),
        [(0,), (1,)],
        [((), _typed("type"))],
    ),
    Case(
        "gemini decode",
        GEMINI,
        lambda d: _decoded(gemini_wire.decode_response(d)),
        [
            (),
            ("candidates", 0),
            ("candidates", 0, "content"),
            ("candidates", 0, "content", "parts", 0),
            ("candidates", 0, "content", "parts", 1),
        ],
        [(("candidates", 0, "content", "parts"), _typed("key"))],
    ),
    Case(
        "gemini stream",
        [GEMINI],
        lambda d: _decoded(gemini_wire.decode_stream(d)),
        [(0,), (0, "candidates", 0), (0, "candidates", 0, "content", "parts", 0)],
        [((0, "candidates", 0, "content", "parts"), _typed("key"))],
    ),
    Case(
        "gemini import",
        GEMINI_HISTORY,
        lambda d: _imported(gemini_wire.decode_messages(d)),
        [(0,), (1,), (2,)],
        [((0, "parts"), _typed("key")), ((1, "parts"), _typed("key"))],
    ),
    Case(
        "bedrock decode",
        BEDROCK,
        lambda d: _decoded(bedrock_wire.decode_response(d, model="m")),
        [(), ("output",), ("output", "message")],
        [(("output", "message", "content"), _typed("key"))],
    ),
    Case(
        "bedrock stream",
        BEDROCK_EVENTS,
        lambda d: _decoded(bedrock_wire.decode_stream(d, model="m")),
        [],
        [((), _typed("key"))],
    ),
    Case(
        "bedrock import",
        BEDROCK_HISTORY,
        lambda d: _imported(bedrock_wire.decode_messages(d)),
        [(0,), (1,)],
        [((0, "content"), _typed("key")), ((1, "content"), _typed("key"))],
    ),
]

SPOTS = [
    pytest.param(case, "field", at, None, id=f"{case.name}: field at {'/'.join(map(str, at))}")
    for case in CASES
    for at in case.fields
] + [
    pytest.param(case, "item", at, make, id=f"{case.name}: item in {'/'.join(map(str, at))}")
    for case in CASES
    for at, make in case.items
]

names = st.from_regex(r"\Azz[a-z]{3,10}\Z")
values = st.one_of(
    st.integers(min_value=1),
    st.text(min_size=1, max_size=8),
    st.lists(st.integers(), min_size=1, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), min_size=1),
)


def _at(data: Any, path: Path) -> Any:
    for step in path:
        data = data[step]
    return data


def _insert(case: Case, what: str, at: Path, make: Any, name: str, value: Any) -> Any:
    data = copy.deepcopy(case.sample)
    target = _at(data, at)
    if what == "field":
        target[name] = value
    else:
        # An unknown event goes before the stream's end; any other thing at the end of its list.
        target.insert(
            len(target) - 1 if at == () and "stream" in case.name else len(target), make(name)
        )
    return data


_READ_PAST = UNKEPT.format(path="")


def test_the_checker_fails_on_a_name_that_is_nowhere() -> None:
    messages, downgrades = CASES[0].read(copy.deepcopy(CASES[0].sample))
    assert not _reached("zzabsent", messages, downgrades)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_every_sample_reads_with_nothing_to_report(case: Case) -> None:
    # A field a codec knows and reads past (a Responses item's own id) is named
    # in its own words wherever it appears; nothing else of a sample is a loss.
    _, downgrades = case.read(copy.deepcopy(case.sample))
    assert [d.reason for d in downgrades if not d.reason.endswith(_READ_PAST)] == []


@pytest.mark.parametrize(("case", "what", "at", "make"), SPOTS)
@settings(max_examples=8, deadline=None)
@given(name=names, value=values)
def test_an_unknown_thing_reaches_a_block_or_the_report(
    case: Case, what: str, at: Path, make: Any, name: str, value: Any
) -> None:
    messages, downgrades = case.read(_insert(case, what, at, make, name, value))
    assert _reached(name, messages, downgrades), (case.name, what, at, name)


def test_a_field_read_past_is_named_in_its_own_words() -> None:
    """A known field no block keeps (an item's id, a server's note) is named, not passed over."""
    # An output message's id is kept on its text, as its wire spelled it, for its origin.
    body = copy.deepcopy(RESPONSES)
    body["output"][0]["id"] = "msg_kept"
    decoded = responses_wire.decode_response(body)
    spelt = [b.spelling for b in decoded.message.content if isinstance(b, Text) and b.spelling]
    assert [json.loads(s.extra)["id"] for s in spelt] == ["msg_kept"]
    assert not any("output[0].id" in d.reason for d in decoded.downgrades)
    # An imported item's id is kept, as its wire spelled the call, for that wire.
    history = copy.deepcopy(RESPONSES_HISTORY)
    history[1]["id"] = "fc_kept"
    imported = responses_wire.decode_messages(history)[1]
    [call] = imported[1].tool_uses()
    assert call.spelling is not None and json.loads(call.spelling.extra) == {"id": "fc_kept"}
    assert not imported.downgrades
    answer = copy.deepcopy(GEMINI)
    answer["candidates"][0]["finishMessage"] = "Model generated function call(s)."
    reasons = [d.reason for d in gemini_wire.decode_response(answer).downgrades]
    assert reasons == [UNKEPT.format(path="response.candidates[0].finishMessage")], reasons

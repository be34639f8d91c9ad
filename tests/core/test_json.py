"""`carryall._json`: a body written ahead, or with payloads, is the same bytes as its dict.

The Gemini and Bedrock encoders write a long history's items ahead in
chunks when the body is only for `body_bytes` (`WrittenAhead`), so their
dicts die young; nothing a request says may change by it (Responses, which
builds its body whole, is held to the same line). Every
history here is longer than a few chunks and puts what could go wrong at
the chunk boundaries: an image or document (its chunk stays as dicts), and
an assistant turn the wire leaves off (Bedrock then joins the user turns
around it, extending the item written last).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from carryall import _json
from carryall._json import Payload, WrittenAhead, body_bytes, builtins
from carryall.blocks import Document, Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.providers import (
    Capabilities,
    Request,
    anthropic,
    bedrock,
    gemini,
    openai,
    responses,
)
from tests.support.goldens import SHOT, TOOLS

CHUNK = WrittenAhead.CHUNK
SEES = Capabilities(vision=True, native_tools=True, thinking=True)
PDF = Document.from_bytes("application/pdf", b"%PDF-1.4\n%fake\n", title="report.pdf")


def long_history(rounds: int, odd_at: set[int], payload_at: set[int]) -> list[Message]:
    """Tool rounds; at each round in `odd_at` an assistant turn of unsigned thinking only."""
    out = [Message.user("Look at every file.")]
    for n in range(rounds):
        call = f"call_{n}"
        out.append(Message.assistant([Text(f"Reading {n}."), ToolUse(call, "read_file", {"n": n})]))
        shown = [SHOT if n % 2 else PDF] if n in payload_at else []
        out.append(Message.tool_results([ToolResult(call, f'line {n}\n"quoted" é')], shown))
        if n in odd_at:
            out.append(Message.assistant([Thinking("hmm")]))
            out.append(Message.user(f"Go on after {n}."))
    out.append(Message.assistant([Text("Done.")]))
    return out


WIRES = [
    pytest.param(responses.encode_request, responses.encode_request_bytes, id="responses"),
    pytest.param(gemini.encode_request, gemini.encode_request_bytes, id="gemini"),
    pytest.param(bedrock.encode_request, bedrock.encode_request_bytes, id="bedrock"),
]
SHAPES = [
    pytest.param(set(), set(), id="plain"),
    # Around the first boundaries: a left-off turn and payloads in both positions.
    pytest.param({CHUNK // 2 - 2, CHUNK // 2 - 1, CHUNK // 2, CHUNK - 1}, set(), id="left-off"),
    pytest.param(set(), {CHUNK // 2 - 1, CHUNK // 2, CHUNK + 3}, id="payloads"),
    pytest.param({5, CHUNK // 2, CHUNK + 2}, {CHUNK // 2, CHUNK}, id="both"),
]


@pytest.mark.parametrize(("odd", "payloads"), SHAPES)
@pytest.mark.parametrize(("as_dict", "as_bytes"), WIRES)
def test_a_long_history_written_ahead_is_the_bytes_of_its_dict(
    as_dict: Any, as_bytes: Any, odd: set[int], payloads: set[int]
) -> None:
    history = long_history(2 * CHUNK, odd, payloads)
    request = Request(model="m", system="Be brief.", messages=tuple(history), tools=TOOLS)
    body = as_dict(request, SEES)
    sent = as_bytes(request, SEES)
    assert sent == body_bytes(body)
    assert json.loads(sent) == json.loads(json.dumps(body))


def test_prompt_mode_on_the_responses_wire_is_the_bytes_of_its_dict() -> None:
    history = long_history(CHUNK, {3}, {7})
    request = Request(model="m", messages=tuple(history), tools=TOOLS)
    caps = Capabilities(vision=True, native_tools=False)
    body = responses.encode_request(request, caps, constrained=True, llama=True)
    sent = responses.encode_request_bytes(request, caps, constrained=True, llama=True)
    assert sent == body_bytes(body)


def test_written_ahead_leaves_the_last_item_and_a_chunk_with_a_payload_as_dicts() -> None:
    items: list[Any] = []
    ahead = WrittenAhead({CHUNK + 10})
    for index in range(3 * CHUNK + 5):
        ahead.step(items, index)
        items.append({"n": index})
    kinds = [type(item).__name__ for item in items]
    # The first chunk written ahead, the one holding the payload left as dicts,
    # then the next written ahead; the last item is always a dict.
    assert kinds[0] == "Raw" and kinds[-1] == "dict"
    assert kinds[1 : CHUNK + 1] == ["dict"] * CHUNK
    assert "Raw" in kinds[CHUNK + 1 :]
    assert body_bytes({"items": items}) == msgspec.json.encode(
        {"items": [{"n": i} for i in range(3 * CHUNK + 5)]}
    )


# -- payloads: an image's or a document's base64, copied into the body as it is --------

PAYLOAD_WIRES = [
    pytest.param(anthropic.encode_request, anthropic.encode_request_bytes, id="anthropic"),
    pytest.param(
        lambda r, c: openai.encode_request(r, c, "openai"),
        lambda r, c: openai.encode_request_bytes(r, c, "openai"),
        id="openai",
    ),
    *WIRES,
]
# Texts no encoder made: what a hand-built or hostile block may hold.
ODD_DATA = ['iVBOR"w0K', "iVBOR\\w0K", "iVBOR\nw0K", "iVBORé0K", "iVBOR\x00w0K", ""]


@pytest.mark.parametrize(("as_dict", "as_bytes"), PAYLOAD_WIRES)
@pytest.mark.parametrize("data", [SHOT.data, PDF.data, *ODD_DATA])
def test_a_payload_is_the_bytes_its_text_would_be_escaped_or_not(
    as_dict: Any, as_bytes: Any, data: str
) -> None:
    # Held and sent twice: the second request knows the text, the bytes stay the same.
    shown = [Image("image/png", data)] if data else [SHOT]
    history = [Message.user("Look.", shown), Message.user("Read.", [PDF])]
    request = Request(model="m", messages=tuple(history), tools=TOOLS, max_tokens=64)
    expected = body_bytes(as_dict(request, SEES))
    assert as_bytes(request, SEES) == expected
    assert as_bytes(request, SEES) == expected
    json.loads(expected)


def test_a_payload_writes_as_its_text_and_builtins_gives_the_text() -> None:
    plain = Payload.data_url("image/png", "QUJD")
    assert body_bytes({"url": plain}) == b'{"url":"data:image/png;base64,QUJD"}'
    assert builtins([{"url": plain}]) == [{"url": "data:image/png;base64,QUJD"}]
    for written in (
        lambda: body_bytes({"odd": Payload("a\ud800")}),
        lambda: body_bytes({"odd": "a\ud800"}),
    ):
        with pytest.raises(UnicodeEncodeError):  # a lone surrogate: refused, as its text is
            written()
    assert body_bytes({"odd": Payload('a"b\n')}) == msgspec.json.encode({"odd": 'a"b\n'})


def test_payload_texts_found_plain_are_held_up_to_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = _json._Plain()
    monkeypatch.setattr(_json._Plain, "LIMIT", 10)
    first, second, third = ("A" * 4 + str(n) for n in range(3))  # 5 characters each
    assert first in plain and second in plain
    assert plain._held == 10 and len(plain._known) == 2
    assert third in plain  # the earliest found goes
    assert list(plain._known.values()) == [second, third] and plain._held == 10
    assert 'A"' not in plain and "é" not in plain
    assert len(plain._known) == 2


def test_an_unknown_object_in_a_body_is_refused_by_its_type() -> None:
    with pytest.raises(TypeError, match="Encoding objects of type object is unsupported"):
        body_bytes({"x": object()})
    with pytest.raises(TypeError, match="type object"):
        builtins({"x": object()})

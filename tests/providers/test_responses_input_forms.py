"""The server's own Responses items go back in the API's input form, and what is left off is named.

An output item (a web search call, a file search call, an MCP call) holds
fields the input form of the same item has no place for. The encoder keeps
a table of what each input form takes (`responses._INPUT_FIELDS`); here it
is derived afresh from the `openai` SDK's `ResponseInputItemParam` types and
compared, so a field the SDK gains or loses fails this test until the table
follows. Then a history holding such items is encoded for its own origin:
the body validates against the SDK's request type, and each field left off
is named by a downgrade with its message and block.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

import pytest
from openai.types.responses.response_input_item_param import ResponseInputItemParam
from pydantic import ValidationError
from typing_extensions import is_typeddict

from carryall.blocks import Message, Opaque
from carryall.providers import Capabilities, Request
from carryall.providers import responses as responses_wire
from tests.support.sdk_wires import check_responses_request

CAPS = Capabilities(vision=True, native_tools=True, thinking=True)
ENDPOINT = "api.openai.com"

# -- the table, derived from the SDK ----------------------------------------------------


def _bare(hint: Any) -> Any:
    """A hint without `Required`, `NotRequired`, `Annotated` around it."""
    while get_origin(hint) in (Required, NotRequired, typing.Annotated):
        hint = get_args(hint)[0]
    return hint


def _objects(hint: Any) -> list[Any]:
    """The TypedDicts a value of `hint` may be: through unions, `Optional` and iterables."""
    hint = _bare(hint)
    origin = get_origin(hint)
    if origin is Union or str(origin) == "<class 'types.UnionType'>":
        return [found for arg in get_args(hint) for found in _objects(arg)]
    if origin is not None and getattr(origin, "__name__", "") in ("Iterable", "list", "Sequence"):
        return _objects(get_args(hint)[0])
    return [hint] if is_typeddict(hint) else []


def _tag(form: Any) -> str | None:
    """The one `type` a TypedDict is told apart by, if its `type` is a single literal."""
    hint = typing.get_type_hints(form, include_extras=True).get("type")
    if hint is None:
        return None
    hint = _bare(hint)
    if get_origin(hint) is Union:
        hint = next(a for a in get_args(hint) if a is not type(None))
    if get_origin(hint) is Literal and len(get_args(hint)) == 1:
        tag = get_args(hint)[0]
        return tag if isinstance(tag, str) else None
    return None


def _shape(hint: Any) -> Any:
    """What the SDK lets a value of `hint` hold, in the plain form `_plain` gives the table."""
    forms = _objects(hint)
    if not forms:
        return None
    tags = [_tag(form) for form in forms]
    if all(tags):
        grouped: dict[str, dict[str, Any]] = {}
        for tag, form in zip(tags, forms, strict=True):
            fields = grouped.setdefault(str(tag), {})
            for name, value in _fields_of(form).items():
                fields.setdefault(name, value)
        return ("one of", grouped)
    merged: dict[str, Any] = {}
    for form in forms:
        for name, value in _fields_of(form).items():
            merged.setdefault(name, value)
    return merged


def _fields_of(form: Any) -> dict[str, Any]:
    hints = typing.get_type_hints(form, include_extras=True)
    return {name: _shape(hint) for name, hint in hints.items()}


def sdk_input_forms() -> dict[str, Any]:
    """Every input item type of the SDK, with the fields its form takes, nested."""
    shape = _shape(ResponseInputItemParam)
    assert isinstance(shape, tuple), "the SDK's input items are no longer told apart by type"
    forms: dict[str, Any] = shape[1]
    return forms


def _plain(shape: Any) -> Any:
    """The codec's table in the form `_shape` derives: dicts, and ("one of", forms)."""
    if shape is None:
        return None
    if isinstance(shape, responses_wire._OneOf):
        return ("one of", {tag: _plain(fields) for tag, fields in shape.forms.items()})
    assert isinstance(shape, Mapping)
    return {name: _plain(value) for name, value in shape.items()}


def differences(table: Mapping[str, Any], sdk: Mapping[str, Any]) -> list[str]:
    """Each item type whose table entry is not what the SDK's input form takes."""
    out = []
    for kind, fields in table.items():
        if kind not in sdk:
            out.append(f"{kind}: the SDK has no input item of this type")
        elif _plain(fields) != sdk[kind]:
            out.append(f"{kind}: table {_plain(fields)} != SDK {sdk[kind]}")
    return out


def test_the_input_table_is_the_sdks_input_forms() -> None:
    assert differences(responses_wire._INPUT_FIELDS, sdk_input_forms()) == []


def test_the_table_comparison_can_fail() -> None:
    sdk = sdk_input_forms()
    widened = dict(responses_wire._INPUT_FIELDS)
    widened["file_search_call"] = {**widened["file_search_call"], "vector_store_id": None}
    assert differences(widened, sdk) == [
        f"file_search_call: table {_plain(widened['file_search_call'])} "
        f"!= SDK {sdk['file_search_call']}"
    ]
    assert differences({"nothing_call": {}}, sdk) == [
        "nothing_call: the SDK has no input item of this type"
    ]


def test_every_hosted_item_the_decoder_keeps_has_its_input_form() -> None:
    assert set(responses_wire._HOSTED) <= set(responses_wire._INPUT_FIELDS)


# -- encoding ---------------------------------------------------------------------------

WEB_SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {
        "type": "search",
        "query": "weather: Mexico City",
        "sources": [
            {"type": "api", "name": "oai-weather"},
            {"type": "url", "url": "https://weather.example/mx"},
        ],
    },
}
FILE_SEARCH = {
    "id": "fs_1",
    "type": "file_search_call",
    "status": "completed",
    "queries": ["capital of France"],
    "results": [
        {
            "file_id": "file_1",
            "filename": "notes.txt",
            "score": 0.9,
            "text": "Paris is the capital.",
            "attributes": {},
            "vector_store_id": "vs_1",
        }
    ],
}
ONLY_API = {
    **WEB_SEARCH,
    "id": "ws_2",
    "action": {"type": "search", "query": "q", "sources": [{"type": "api", "name": "x"}]},
}


def _answer(items: Sequence[Mapping[str, Any]]) -> Message:
    body = {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-5-2025-08-07",
        "status": "completed",
        "output": [
            *items,
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            },
        ],
    }
    return responses_wire.decode_response(body, endpoint=ENDPOINT).as_requested("gpt-5").message


def _request(answer: Message) -> Request:
    return Request(
        model="gpt-5",
        endpoint=ENDPOINT,
        messages=(Message.user("Look it up."), answer, Message.user("Thanks.")),
    )


def _sent_items(body: Mapping[str, Any]) -> dict[str, Any]:
    return {item["id"]: item for item in body["input"] if "id" in item}


def _at(answer: Message, kind: str) -> int:
    return next(i for i, b in enumerate(answer.content) if isinstance(b, Opaque) and b.kind == kind)


def test_fields_the_input_form_lacks_are_left_off_and_each_is_named() -> None:
    answer = _answer([WEB_SEARCH, FILE_SEARCH])
    encoded = responses_wire.encode(_request(answer), CAPS)
    body = json.loads(json.dumps(encoded.body))
    check_responses_request(body)
    sent = _sent_items(body)
    assert sent["ws_1"]["action"]["sources"] == [
        {"type": "url", "url": "https://weather.example/mx"}
    ]
    assert "vector_store_id" not in sent["fs_1"]["results"][0]
    assert sent["fs_1"]["results"][0]["text"] == "Paris is the capital."
    named = [(d.index, d.block, d.reason) for d in encoded.downgrades if "input form" in d.reason]
    web, files = _at(answer, "web_search_call"), _at(answer, "file_search_call")
    assert [(index, block) for index, block, _ in named] == [(1, web), (1, files)]
    assert "action.sources[0]" in named[0][2] and "oai-weather" in named[0][2]
    assert "results[0].vector_store_id" in named[1][2] and "vs_1" in named[1][2]


def test_a_list_left_with_nothing_is_left_off_whole() -> None:
    encoded = responses_wire.encode(_request(_answer([ONLY_API])), CAPS)
    body = json.loads(json.dumps(encoded.body))
    check_responses_request(body)
    assert "sources" not in _sent_items(body)["ws_2"]["action"]
    assert [d.reason for d in encoded.downgrades if "input form" in d.reason] != []


def test_an_item_the_input_form_takes_goes_back_byte_for_byte_unreported() -> None:
    fits = {**WEB_SEARCH, "action": {"type": "search", "query": "weather: Mexico City"}}
    answer = _answer([fits])
    encoded = responses_wire.encode(_request(answer), CAPS)
    assert _sent_items(encoded.body)["ws_1"] == fits
    assert not [d for d in encoded.downgrades if "input form" in d.reason]


@pytest.mark.parametrize("stream", [False, True])
def test_the_bytes_sent_hold_the_input_form_and_the_same_report(stream: bool) -> None:
    request = _request(_answer([WEB_SEARCH, FILE_SEARCH]))
    encoded = responses_wire.encode(request, CAPS)
    kept = responses_wire.KeptItems()
    for _ in range(2):  # the second body copies the first one's kept items
        sent = responses_wire.encode_sent(request, CAPS, stream=stream, kept=kept)
        assert sent.downgrades == encoded.downgrades
        assert json.loads(sent.data) == {**encoded.body, **({"stream": True} if stream else {})}


def test_the_sdk_refuses_the_output_form_the_encoder_leaves_behind() -> None:
    # The check the table answers to: the item as the API sent it is not an input item.
    answer_body: dict[str, Any] = {
        "model": "gpt-5",
        "input": [{"role": "user", "content": "Look it up."}, WEB_SEARCH],
        "store": False,
    }
    with pytest.raises(ValidationError, match="oai-weather"):
        check_responses_request(answer_body)

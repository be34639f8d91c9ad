"""A Chat Completions body for OpenRouter is held to OpenRouter's own official SDK types.

OpenRouter's `cache_control` on a text part and its `reasoning_details`
are in no `openai` SDK type; OpenRouter's SDK (`openrouter`,
`components.ChatRequest`) has them. `chat_sdk_check` picks the request type
by the server a body goes to; these tests prove the OpenRouter check takes
what OpenRouter takes, and refuses a wrong value and an unknown key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from carryall.providers import Capabilities, Request
from carryall.providers import openai as openai_wire
from tests.support.recorded import chat_sdk_check, openai_sdk_check
from tests.support.sdk_openai import OPENROUTER, check_openrouter_request

CACHE_POINT = (
    Path(__file__).parent.parent
    / "fixtures"
    / "recorded"
    / "openai_compatible"
    / "2026"
    / "openrouter_cache_point_alias.json"
)


def _recorded_body() -> dict[str, Any]:
    """The recorded OpenRouter request with a cached text part, as carryall writes it back."""
    request = json.loads(CACHE_POINT.read_text(encoding="utf-8"))["exchanges"][0]["request"]
    imported = openai_wire.decode_messages(request["messages"])[1]
    encoded = openai_wire.encode(
        Request(model=request["model"], endpoint=OPENROUTER, messages=tuple(imported)),
        Capabilities(vision=True, native_tools=True),
        "openai",
    )
    body: dict[str, Any] = json.loads(json.dumps(encoded.body))
    return body


def _cached_part(body: dict[str, Any]) -> dict[str, Any]:
    for message in body["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else ():
            if "cache_control" in part:
                found: dict[str, Any] = part
                return found
    raise AssertionError("no part with cache_control in the body")


def test_an_openrouter_body_with_cache_control_passes_openrouters_type_not_openais() -> None:
    body = _recorded_body()
    assert _cached_part(body)["cache_control"]["type"] == "ephemeral"
    check_openrouter_request(body)
    chat_sdk_check(body, OPENROUTER)
    with pytest.raises(AssertionError, match="dropped or changed"):
        openai_sdk_check(body)  # the openai type has no cache_control on a text part
    with pytest.raises(AssertionError, match="dropped or changed"):
        chat_sdk_check(body, "api.openai.com")


@pytest.mark.parametrize("cache_control", [{"type": "persistent"}, "ephemeral"])
def test_a_wrong_cache_control_is_refused_by_the_openrouter_check(cache_control: Any) -> None:
    # The SDK reads a part no form of it takes as its catch-all "unknown" part, which does
    # not dump back as the part: refused either way, and the place is named.
    body = _recorded_body()
    _cached_part(body)["cache_control"] = cache_control
    with pytest.raises((AssertionError, ValidationError), match="cache_control"):
        chat_sdk_check(body, OPENROUTER)


def test_a_key_openrouters_type_does_not_know_is_named() -> None:
    body = _recorded_body()
    _cached_part(body)["cache_point"] = {"type": "default"}
    with pytest.raises(AssertionError, match=r"messages\[0\]\.content\[0\]\.cache_point"):
        check_openrouter_request(body)


def test_reasoning_content_is_not_openrouters_field() -> None:
    # OpenRouter's assistant message names a model's reasoning `reasoning`.
    body = {
        "model": "deepseek/deepseek-r1",
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello", "reasoning": "greet back"},
            {"role": "user", "content": "Thanks"},
        ],
    }
    check_openrouter_request(body)
    body["messages"][1]["reasoning_content"] = body["messages"][1].pop("reasoning")
    with pytest.raises(AssertionError, match=r"messages\[1\]\.reasoning_content"):
        check_openrouter_request(body)

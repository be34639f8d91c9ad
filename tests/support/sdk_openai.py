"""The SDK checks of a Chat Completions body every OpenAI-wire test shares.

A request passes only if the official SDK's own type accepts it with every
lazily validated iterable consumed, nothing dropped, and every image a
`data:` URL of an allowlisted media type or a remote `https:` URL
(`check_openai_request`). A body for OpenRouter is held to OpenRouter's
own official SDK instead (`check_openrouter_request`): its request type
is the one that knows OpenRouter's fields (`cache_control` on a part,
`reasoning_details`).
"""

from __future__ import annotations

import base64
import functools
import json
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, Final

from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from pydantic import TypeAdapter

from carryall.blocks import IMAGE_MEDIA_TYPES

NON_STREAMING = TypeAdapter(CompletionCreateParamsNonStreaming)
STREAMING = TypeAdapter(CompletionCreateParamsStreaming)
LLAMA_EXTRA_KEYS = ("chat_template_kwargs",)
LLAMA_EXTRA_MESSAGE_KEYS = ("reasoning_content", "reasoning_details")
"""Assistant keys the SDK has no type for: llama-server's reasoning, OpenRouter's signed entries."""


def _materialize(value: Any) -> Any:
    """The validated value with every lazy iterator consumed (which validates its items)."""
    if isinstance(value, Mapping):
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple | Iterator):
        # pydantic's ValidatorIterator validates each item as it is drawn.
        return [_materialize(item) for item in value]
    raise AssertionError(f"unexpected validated value {type(value).__name__}")


def _without_extras(body: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k not in LLAMA_EXTRA_KEYS}
    out["messages"] = [
        {k: v for k, v in m.items() if k not in LLAMA_EXTRA_MESSAGE_KEYS}
        if m.get("role") == "assistant"
        else m
        for m in body["messages"]
    ]
    return out


def _check_images(body: Mapping[str, Any]) -> None:
    for message in body["messages"]:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if part.get("type") != "image_url":
                continue
            url = part["image_url"]["url"]
            if url.startswith("https://"):
                continue  # a remote image, sent as the URL it is
            head, sep, payload = url.partition(",")
            assert sep and head.startswith("data:") and head.endswith(";base64"), url[:40]
            assert head[5:-7] in IMAGE_MEDIA_TYPES, f"media type {head[5:-7]!r} not allowlisted"
            base64.b64decode(payload, validate=True)


def check_openai_request(body: Mapping[str, Any], *, streaming: bool = False) -> None:
    """Fail unless the body is a request the official SDK's type accepts, fully checked."""
    plain = _without_extras(body)
    adapter = STREAMING if streaming else NON_STREAMING
    validated = _materialize(adapter.validate_python(plain))
    assert validated == plain, "the SDK type dropped or changed something: an unknown key?"
    _check_images(plain)


OPENROUTER: Final = "openrouter.ai"
"""The endpoint whose Chat Completions bodies are held to OpenRouter's own request type."""


@functools.cache
def _openrouter_request() -> Any:
    # Imported when first asked for: the SDK's models take a third of a second to load.
    from openrouter.components import ChatRequest

    return ChatRequest


def check_openrouter_request(body: Mapping[str, Any]) -> None:
    """Fail unless OpenRouter's official SDK (`openrouter`) takes the body whole, nothing dropped.

    The body is validated as the SDK's chat completions request model
    (`openrouter.components.ChatRequest`, what `client.chat.send` sends) and
    dumped back as the SDK writes a request (by alias, as JSON), only what
    the body set: a key the model does not know is dropped by it, and a
    value it does not take is refused, either way failing here.
    """
    plain = json.loads(json.dumps(body))
    model = _openrouter_request().model_validate(plain)
    with warnings.catch_warnings():
        # A part the SDK read as its catch-all "unknown" form warns as it is dumped; the
        # comparison below is the verdict.
        warnings.simplefilter("ignore", UserWarning)
        sent = model.model_dump(by_alias=True, mode="json", exclude_unset=True)
    if sent != plain:
        lost = sorted(_differences(plain, sent, ""))
        raise AssertionError(f"OpenRouter's ChatRequest dropped or changed {', '.join(lost)}")


def _differences(given: Any, kept: Any, path: str) -> Iterator[str]:
    """Where `kept` (the SDK's dump) differs from `given` (the body), by JSON path."""
    if isinstance(given, dict) and isinstance(kept, dict):
        for key in given.keys() | kept.keys():
            yield from _differences(given.get(key), kept.get(key), f"{path}.{key}")
    elif isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        for i, (a, b) in enumerate(zip(given, kept, strict=True)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif given != kept:
        yield path or "the body"

"""Recorded requests' options (from other projects' test suites) are expressible and land as sent.

Every recorded request body (`tests/fixtures/recorded`, sources beside each
fixture) that carries a sampling or wire setting is read back into
`ModelOptions`: the fields carryall models by their names, anything else of
Gemini's `generationConfig` as `extra`. Encoded again on the same wire, each
lands at the path and with the value the recording holds, and nothing is
named as left off.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Message
from carryall.providers import Capabilities, Encoded, ModelOptions, Request
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import bedrock as bedrock_codec
from carryall.providers import gemini as gemini_codec
from carryall.providers import openai as openai_codec

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"

# What carryall models, by the path each wire writes it at (tuples) and the option it is.
MAPS: dict[str, dict[tuple[str, ...], str]] = {
    "anthropic": {
        ("temperature",): "temperature",
        ("top_p",): "top_p",
        ("top_k",): "top_k",
        ("stop_sequences",): "stop",
        ("service_tier",): "service_tier",
    },
    "openai": {
        (name,): name
        for name in ("temperature", "top_p", "seed", "stop", "presence_penalty")
        + ("frequency_penalty", "parallel_tool_calls", "service_tier", "store")
    },
    "gemini": {
        ("generationConfig", "temperature"): "temperature",
        ("generationConfig", "topP"): "top_p",
        ("generationConfig", "topK"): "top_k",
        ("generationConfig", "seed"): "seed",
        ("generationConfig", "stopSequences"): "stop",
        ("generationConfig", "presencePenalty"): "presence_penalty",
        ("generationConfig", "frequencyPenalty"): "frequency_penalty",
        ("serviceTier",): "service_tier",
        ("store",): "store",
    },
    "bedrock": {
        ("inferenceConfig", "temperature"): "temperature",
        ("inferenceConfig", "topP"): "top_p",
        ("inferenceConfig", "stopSequences"): "stop",
    },
}
GEMINI_OWN = frozenset({"maxOutputTokens", "thinkingConfig"})
"""`generationConfig` keys carryall writes from the request itself, not from options."""


def _bodies() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path in sorted(RECORDED.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            continue
        if "exchanges" in data:
            wire = data.get("wire")
            requests = [e.get("request") for e in data["exchanges"] if isinstance(e, dict)]
        else:
            wire, requests = data.get("dialect"), [data.get("request")]
        for i, request in enumerate(requests):
            if isinstance(request, dict) and wire in MAPS:
                yield f"{path.relative_to(RECORDED)}#{i}", str(wire), request


def _at(body: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = body
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _options(wire: str, body: dict[str, Any]) -> tuple[ModelOptions, dict[tuple[str, ...], Any]]:
    """The options a recorded body asked for, and the recorded value at each of their paths."""
    fields: dict[str, Any] = {}
    recorded: dict[tuple[str, ...], Any] = {}
    for path, name in MAPS[wire].items():
        value = _at(body, path)
        if value is not None:
            fields[name] = tuple(value) if name == "stop" else value
            recorded[path] = value
    extra: dict[str, dict[str, Any]] = {}
    if wire == "gemini":
        named = GEMINI_OWN | {path[1] for path in MAPS["gemini"] if len(path) == 2}
        config = body.get("generationConfig") or {}
        rest = {k: v for k, v in config.items() if k not in named}
        if rest:
            extra["gemini"] = {"generationConfig": rest}
            recorded.update({("generationConfig", k): v for k, v in rest.items()})
    return ModelOptions(**fields, extra=extra), recorded


def _encode(wire: str, request: Request) -> Encoded:
    caps = Capabilities()
    if wire == "anthropic":
        return anthropic_codec.encode(request, caps)
    if wire == "openai":
        return openai_codec.encode(request, caps, "openai")
    if wire == "gemini":
        return gemini_codec.encode(request, caps)
    return bedrock_codec.encode(request, caps)


CASES = [
    pytest.param(wire, body, id=name) for name, wire, body in _bodies() if _options(wire, body)[1]
]


def test_the_recordings_carry_options_on_several_wires() -> None:
    assert {case.values[0] for case in CASES} >= {"anthropic", "openai", "gemini", "bedrock"}


@pytest.mark.parametrize(("wire", "body"), CASES)
def test_a_recorded_requests_options_land_where_and_as_it_sent_them(
    wire: str, body: dict[str, Any]
) -> None:
    options, recorded = _options(wire, body)
    model = body.get("model") if isinstance(body.get("model"), str) else "m"
    request = Request(model=model, messages=(Message.user("Hi."),), options=options)
    encoded = _encode(wire, request)
    for path, value in recorded.items():
        assert _at(encoded.body, path) == value, ".".join(path)
    assert [d.reason for d in encoded.downgrades if d.kind == "option"] == []

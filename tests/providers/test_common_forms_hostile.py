"""Hostile answers to the readers of citations and provider-run tools.

Every field the common forms read may arrive as any JSON value: a decoder
either keeps what it can or refuses with a `ProviderError` naming the
place, never another exception.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carryall.errors import ProviderError
from carryall.providers import anthropic, bedrock, gemini, openai, responses

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
"""Any JSON value, small."""


def _gemini(value: Any, kind: str) -> Any:
    candidate = {"content": {"role": "model", "parts": [{"text": "hi"}]}, kind: value}
    return gemini.decode_response({"candidates": [candidate], "modelVersion": "g"})


def _gemini_grounding(value: Any) -> Any:
    shaped = {
        "groundingChunks": value,
        "groundingSupports": [{"segment": value, "groundingChunkIndices": value}],
        "webSearchQueries": value,
    }
    return _gemini(shaped, "groundingMetadata")


def _gemini_url_context(value: Any) -> Any:
    return _gemini({"urlMetadata": value}, "urlContextMetadata")


def _gemini_part(value: Any) -> Any:
    parts = [{"executableCode": value}, {"codeExecutionResult": value}, {"toolCall": value}]
    candidate = {"content": {"role": "model", "parts": parts}}
    return gemini.decode_response({"candidates": [candidate], "modelVersion": "g"})


def _responses(value: Any) -> Any:
    output = [
        {"type": kind, "id": "x", "action": value, "results": value, "outputs": value}
        | {"arguments": value, "output": value, "queries": value}
        for kind in ("web_search_call", "file_search_call", "code_interpreter_call", "mcp_call")
    ]
    text = {"type": "output_text", "text": "hi", "annotations": value}
    output.append({"type": "message", "role": "assistant", "content": [text]})
    return responses.decode_response({"model": "m", "status": "completed", "output": output})


def _chat(value: Any) -> Any:
    message = {"role": "assistant", "content": "hi", "annotations": value}
    if isinstance(value, list):
        message["executed_tools"] = [{"type": value, "arguments": value, "search_results": value}]
    body = {"model": "m", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    return openai.decode_response(body)


def _anthropic(value: Any) -> Any:
    content = [
        {"type": "server_tool_use", "id": "s", "name": value, "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "s", "content": value},
        {"type": "text", "text": "hi", "citations": [value]},
    ]
    body = {"type": "message", "role": "assistant", "model": "c", "content": content}
    return anthropic.decode_response(body | {"stop_reason": "end_turn", "usage": {}})


def _bedrock(value: Any) -> Any:
    cited = {
        "content": [{"text": "hi"}],
        "citations": [{"sourceContent": value, "location": value}],
    }
    content = [{"citationsContent": cited}, {"toolResult": {"content": value, "toolUseId": "t"}}]
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "end_turn",
    }
    return bedrock.decode_response(body | {"usage": {}}, model="m")


READERS = [
    _gemini_grounding,
    _gemini_url_context,
    _gemini_part,
    _responses,
    _chat,
    _anthropic,
    _bedrock,
]


@pytest.mark.parametrize("reader", READERS, ids=lambda f: f.__name__.strip("_"))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON)
def test_any_value_in_a_common_form_field_is_kept_or_refused_by_name(
    reader: Any, value: Any
) -> None:
    with contextlib.suppress(ProviderError):
        reader(value)

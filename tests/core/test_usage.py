"""Usage in one meaning on every wire, and its price from `genai-prices`.

The answers are recordings from other projects' test suites, taken against
the live APIs (tests/fixtures/recorded, each with its source and commit);
`genai-prices` is the oracle for prices, so what is pinned here is that
carryall hands it the right figures, not what a token costs this month.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from carryall.providers import Usage
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import bedrock as bedrock_codec
from carryall.providers import gemini as gemini_codec
from carryall.providers import openai as openai_codec
from carryall.providers import responses as responses_codec
from carryall.usage import UNPRICED, Cost, Totals, format_cost, price

RECORDED = Path(__file__).parent.parent / "fixtures" / "recorded"


def _recording(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())
    return data


def test_anthropic_input_excludes_the_cache_as_the_wire_does() -> None:
    raw = _recording("anthropic/usage_cache_read")["response"]
    usage = anthropic_codec.decode_response(raw).usage
    figures = raw["usage"]
    assert usage.input_tokens == figures["input_tokens"]
    assert usage.cache_read_input_tokens == figures["cache_read_input_tokens"] > 0
    assert usage.cache_creation_input_tokens == figures["cache_creation_input_tokens"]
    assert usage.output_tokens == figures["output_tokens"]


def test_chat_completions_cached_tokens_come_out_of_input_and_reasoning_stays_in_output() -> None:
    raw = _recording("openai/reasoning_effort_gpt_5_nano")["response"]
    usage = openai_codec.decode_response(raw).usage
    figures = raw["usage"]
    cached = figures["prompt_tokens_details"]["cached_tokens"]
    assert usage.input_tokens == figures["prompt_tokens"] - cached
    assert usage.cache_read_input_tokens == cached
    assert usage.output_tokens == figures["completion_tokens"]
    assert usage.reasoning_tokens == figures["completion_tokens_details"]["reasoning_tokens"] > 0


def test_responses_usage_in_the_same_meaning() -> None:
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "o3-mini",
        "output": [],
        "usage": {
            "input_tokens": 300,
            "input_tokens_details": {"cached_tokens": 200},
            "output_tokens": 90,
            "output_tokens_details": {"reasoning_tokens": 64},
        },
    }
    usage = responses_codec.decode_response(body).usage
    assert usage == Usage(
        input_tokens=100, output_tokens=90, cache_read_input_tokens=200, reasoning_tokens=64
    )


def test_gemini_thoughts_are_added_to_output_and_the_cache_taken_out_of_input() -> None:
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}}],
        "usageMetadata": {
            "promptTokenCount": 500,
            "cachedContentTokenCount": 400,
            "candidatesTokenCount": 10,
            "thoughtsTokenCount": 30,
        },
        "modelVersion": "gemini-2.5-pro",
    }
    usage = gemini_codec.decode_response(body).usage
    assert usage == Usage(
        input_tokens=100, output_tokens=40, cache_read_input_tokens=400, reasoning_tokens=30
    )


def test_bedrock_cache_reads_and_writes_are_apart_from_input() -> None:
    body = {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {
            "inputTokens": 7,
            "outputTokens": 3,
            "cacheReadInputTokens": 50,
            "cacheWriteInputTokens": 20,
        },
    }
    usage = bedrock_codec.decode_response(body, model="amazon.nova-pro-v1:0").usage
    assert usage == Usage(
        input_tokens=7, output_tokens=3, cache_read_input_tokens=50, cache_creation_input_tokens=20
    )


genai_prices = pytest.importorskip("genai_prices", reason="prices need carryall[cost]")


def _oracle(usage: Usage, model: str, provider: str) -> Decimal:
    """What genai-prices itself says, from figures in its own meaning (input includes the cache)."""
    figures = genai_prices.Usage(
        input_tokens=usage.input_tokens
        + usage.cache_read_input_tokens
        + usage.cache_creation_input_tokens,
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
        output_tokens=usage.output_tokens,
    )
    return Decimal(genai_prices.calc_price(figures, model, provider_id=provider).total_price)


def test_a_cached_anthropic_request_is_priced_with_cheap_reads() -> None:
    raw = _recording("anthropic/usage_cache_read")["response"]
    response = anthropic_codec.decode_response(raw)
    assert response.model is not None
    cost = price(response.usage, response.model, "anthropic")
    assert cost is not None and cost.usd == _oracle(response.usage, response.model, "anthropic")
    # The same tokens all sent uncached would cost more: reads are priced as reads.
    uncached = Usage(
        input_tokens=response.usage.input_tokens + response.usage.cache_read_input_tokens,
        output_tokens=response.usage.output_tokens,
    )
    full = price(uncached, response.model, "anthropic")
    assert full is not None and full.usd > cost.usd
    assert format_cost(cost).startswith("$")


def test_an_openai_request_with_reasoning_is_priced_on_all_its_output() -> None:
    raw = _recording("openai/reasoning_effort_gpt_5_nano")["response"]
    response = openai_codec.decode_response(raw)
    assert response.model is not None and response.usage.reasoning_tokens > 0
    cost = price(response.usage, response.model, "openai")
    assert cost is not None and cost.usd == _oracle(response.usage, response.model, "openai")
    without_reasoning = Usage(
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens - response.usage.reasoning_tokens,
    )
    cheaper = price(without_reasoning, response.model, "openai")
    assert cheaper is not None and cheaper.usd < cost.usd


def test_an_unpriced_model_is_a_dash_never_zero() -> None:
    usage = Usage(input_tokens=10, output_tokens=10)
    assert price(usage, "my-finetune-7b", "openai") is None
    assert format_cost(None) == UNPRICED == "—"
    totals = Totals()
    totals.add(usage, price(usage, "claude-sonnet-4-5", "anthropic"))
    totals.add(usage, None)
    assert totals.cost is None and "cost —" in totals.line()


def test_a_local_model_is_free_and_says_so() -> None:
    cost = price(Usage(input_tokens=1000, output_tokens=1000), "SmolLM2", "local")
    assert cost == Cost(free=True) and format_cost(cost) == "free (local model)"


def test_a_price_is_taken_at_the_time_of_the_request() -> None:
    usage = Usage(input_tokens=1_000_000)
    then = datetime(2025, 10, 1, tzinfo=UTC)
    cost = price(usage, "claude-sonnet-4-5", "anthropic", then)
    assert cost is not None
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1_000_000),
        "claude-sonnet-4-5",
        provider_id="anthropic",
        genai_request_timestamp=then,
    ).total_price
    assert cost.usd == Decimal(expected)


def test_totals_add_up_and_give_the_cache_read_share() -> None:
    totals = Totals()
    first = Usage(input_tokens=100, output_tokens=10, cache_read_input_tokens=300)
    second = Usage(input_tokens=100, output_tokens=20, cache_creation_input_tokens=100)
    for usage in (first, second):
        totals.add(usage, price(usage, "claude-sonnet-4-5", "anthropic"))
    assert (totals.requests, totals.input_tokens, totals.output_tokens) == (2, 200, 30)
    assert totals.cache_read_share == pytest.approx(300 / 600)
    assert totals.line().startswith("usage: 2 requests, 200 in, 30 out, 300 cache read")

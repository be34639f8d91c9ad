"""What a run used and cost, as `run -u`, `run --json` and chat's `/usage` show it.

The Anthropic wire answers from the scripted server (tests/support), with
an answer written in the API's shape carrying cache figures; prices come
from `genai-prices`, asked again here for the expected figure.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from carryall.providers import Usage
from carryall.usage import format_cost, price
from tests.support.cli import invoke
from tests.support.scripted import Reply, served

pytest.importorskip("genai_prices", reason="prices need carryall[cost]")

MODEL = "claude-sonnet-4-5-20250929"
USAGE = {
    "input_tokens": 40,
    "output_tokens": 12,
    "cache_read_input_tokens": 3000,
    "cache_creation_input_tokens": 500,
}


def _answer() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "Hello."}],
        "stop_reason": "end_turn",
        "usage": USAGE,
    }


def _run(url: str, *argv: str) -> Any:
    return invoke(
        "run", "hi", "-b", "anthropic", "--base-url", url, "-m", "claude-sonnet-4-5",
        "--no-record", *argv,
    )  # fmt: skip


def test_run_usage_prints_tokens_cache_and_the_price_of_the_model_that_answered(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with served([Reply(body=_answer())]) as server:
        result = _run(server.url, "-u")
    assert result.exit_code == 0, result.stderr
    expected = price(Usage(**USAGE), MODEL, "anthropic")
    assert expected is not None and expected.usd > Decimal(0)
    line = " ".join(result.stderr.split())
    assert "usage: 1 request, 40 in, 12 out, 3,000 cache read, 500 cache write" in line
    assert f"cost {format_cost(expected)}" in line


def test_run_json_has_every_figure_and_the_cost(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with served([Reply(body=_answer())]) as server:
        result = _run(server.url, "--json")
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["usage"] == {**USAGE, "reasoning_tokens": 0}
    assert printed["cost"] == format_cost(price(Usage(**USAGE), MODEL, "anthropic"))


def test_a_model_with_no_price_costs_a_dash(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    answer = {**_answer(), "model": "my-own-finetune"}
    with served([Reply(body=answer)]) as server:
        result = _run(server.url, "-u")
    assert result.exit_code == 0, result.stderr
    assert "cost —" in result.stderr and "$0.00" not in result.stderr


def test_chat_usage_command_sums_the_turns_so_far(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with served([Reply(body=_answer()), Reply(body=_answer())]) as server:
        result = invoke(
            "chat", "-b", "anthropic", "--base-url", server.url, "--no-record",
            input="hi\nagain\n/usage\n/exit\n",
        )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "usage: 2 requests, 80 in, 24 out" in " ".join(result.stderr.split())

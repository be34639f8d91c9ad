"""Usage in sessions: what the agent loop records, and every reader's form of it.

The round trip through both stores is in the conformance suite
(`test_conformance.py`); the fast reading of events with usage beside the
transcript format's other tests (`test_jsonl.py`). Here: the loop records
one `RequestUsage` per answered request, each export format shows the
figures and their total, and `usage_stats` adds them up over a window.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from carryall.agent import Agent
from carryall.blocks import Message, Text, ToolUse
from carryall.errors import ProviderError
from carryall.providers import Response
from carryall.sessions import Store, render
from carryall.sessions._transcript import format_time
from carryall.sessions.render import USAGE_HEADING, usage_dict
from carryall.sessions.stats import usage_stats
from carryall.tools import tool
from carryall.usage import RequestUsage, Usage, format_cost, records_total
from tests.support.agent import ScriptedBackend, call


def _answer(text: str, n: int, *, model: str = "scripted-1-20260101") -> Response:
    """An answer whose usage differs with `n`, its raw figures as a wire would send them."""
    usage = Usage(input_tokens=n, output_tokens=2 * n, cache_read_input_tokens=3 * n)
    raw = {"prompt_tokens": 4 * n, "completion_tokens": 2 * n}
    return Response(
        message=Message.assistant([Text(text)]),
        stop_reason="end_turn",
        usage=usage,
        raw_usage=raw,
        model=model,
    )


@tool
def echo(text: str) -> str:
    """Say `text` back."""
    return text


def test_the_loop_records_each_answered_request_with_its_wire_figures(tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions")
    session = store.create(backend="scripted", model="scripted-1")
    first = call(ToolUse("c1", "echo", {"text": "x"}))
    first = Response(
        message=first.message,
        stop_reason="tool_use",
        usage=Usage(input_tokens=7, output_tokens=1),
        raw_usage={"prompt_tokens": 7, "completion_tokens": 1},
    )
    backend = ScriptedBackend(first, _answer("done", 5))
    before = datetime.now(UTC)
    Agent(backend, tools=[echo], session=session).send("go")
    after = datetime.now(UTC)

    recorded = store.open(session.id).usage()
    assert [r.usage for r in recorded] == [first.usage, _answer("", 5).usage]
    assert [r.raw for r in recorded] == [first.raw_usage, _answer("", 5).raw_usage]
    assert {(r.backend, r.wire, r.model) for r in recorded} == {
        ("scripted", "scripted", "scripted-1")
    }
    assert [r.answered for r in recorded] == ["", "scripted-1-20260101"]
    assert all(before <= r.time <= after and r.duration >= 0 for r in recorded)
    assert recorded[0].time <= recorded[1].time


def test_a_request_whose_answer_is_refused_still_counts_and_a_failed_one_does_not(
    tmp_path: Path,
) -> None:
    # The first turn fails on its second request: the first request was
    # answered (and paid) and its usage is kept with the completed step.
    store = Store(tmp_path / "sessions")
    session = store.create(backend="scripted", model="scripted-1")
    backend = ScriptedBackend(
        call(ToolUse("c1", "echo", {"text": "x"})), ProviderError("overloaded"), _answer("ok", 3)
    )
    agent = Agent(backend, tools=[echo], session=session)
    with pytest.raises(ProviderError):
        agent.send("go")
    assert len(store.open(session.id).usage()) == 1
    agent.resume()
    assert [r.usage for r in store.open(session.id).usage()][1:] == [_answer("", 3).usage]


def test_a_recorder_without_a_usage_reader_is_never_handed_usage() -> None:
    class Lookalike:
        def __init__(self) -> None:
            self.held: list[Message] = []

        def messages(self) -> list[Message]:
            return list(self.held)

        def record(self, started_from: list[Message], left_behind: list[Message]) -> str:
            self.held = list(left_behind)
            return "append"

    recorder = Lookalike()
    Agent(ScriptedBackend(_answer("hi", 1)), session=recorder).send("hello")
    assert [m.role for m in recorder.held] == ["user", "assistant"]


# Requests are sent before the session records them: times in the past.
START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)


def _records() -> list[RequestUsage]:
    start = START
    local = RequestUsage(
        time=start,
        backend="local",
        wire="llama-server",
        model="SmolLM2-135M",
        usage=Usage(input_tokens=120, output_tokens=30),
        raw={"prompt_tokens": 120, "completion_tokens": 30},
        duration=2.5,
    )
    unpriced = RequestUsage(
        time=start + timedelta(minutes=1),
        backend="openai",
        wire="openai",
        model="<b>my-finetune</b>",
        usage=Usage(input_tokens=1_000, output_tokens=10, cache_read_input_tokens=3_000),
        raw={"prompt_tokens": 4_000, "prompt_tokens_details": {"cached_tokens": 3_000}},
        duration=1.0,
    )
    return [local, unpriced]


def _session(tmp_path: Path) -> tuple[Store, str]:
    store = Store(tmp_path / "sessions")
    session = store.create(backend="local", model="SmolLM2-135M")
    history = [Message.user("ask"), Message.assistant([Text("answer")])]
    session.record([], history, usage=_records())
    return store, session.id


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_every_export_format_shows_each_request_and_the_total(tmp_path: Path, fmt: str) -> None:
    store, session_id = _session(tmp_path)
    session = store.open(session_id)
    out = render(
        fmt,  # type: ignore[arg-type]
        session.meta,
        session.messages(),
        session.times(),
        usage=session.usage(),
    )
    totals, costs = records_total(_records())
    assert costs[0] is not None and costs[0].free and costs[1] is None
    if fmt == "json":
        data = json.loads(out)["usage"]
        assert [r["usage"] for r in data["requests"]] == [
            {
                "input_tokens": r.usage.input_tokens,
                "output_tokens": r.usage.output_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": r.usage.cache_read_input_tokens,
                "reasoning_tokens": 0,
            }
            for r in _records()
        ]
        assert [r["raw"] for r in data["requests"]] == [r.raw for r in _records()]
        assert [r["cost"] for r in data["requests"]] == ["free (local model)", "—"]
        assert data["total"]["requests"] == 2
        assert data["total"]["input_tokens"] == 1_120
        assert data["total"]["cost_usd"] is None and data["total"]["cost"] == "—"
        assert data["total"]["cache_read_share"] == round(3_000 / 4_120, 4)
        return
    assert USAGE_HEADING in out
    assert "120 in, 30 out" in out
    assert "1,000 in, 10 out, 3,000 cache read, 0 cache write" in out
    assert "free (local model)" in out
    assert "Total: " + totals.summary() in out
    assert "$0.00" not in out
    if fmt != "text":
        # A model name comes off the wire: shown, never markup.
        assert "<b>my-finetune</b>" not in out


def test_a_session_without_usage_renders_as_it_did(tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions")
    session = store.create(backend="local", model="m")
    session.record([], [Message.user("ask"), Message.assistant([Text("answer")])])
    opened = store.open(session.id)
    for fmt in ("text", "markdown", "html", "json"):
        with_none = render(fmt, opened.meta, opened.messages(), opened.times(), usage=[])  # type: ignore[arg-type]
        assert with_none == render(fmt, opened.meta, opened.messages(), opened.times())  # type: ignore[arg-type]
        assert USAGE_HEADING not in with_none and '"usage"' not in with_none


def test_usage_dict_prices_what_genai_prices_prices(tmp_path: Path) -> None:
    pytest.importorskip("genai_prices", reason="prices need carryall[cost]")
    record = RequestUsage(
        time=datetime(2026, 3, 1, tzinfo=UTC),
        backend="anthropic",
        wire="anthropic",
        model="claude-sonnet-4-5",
        answered="claude-sonnet-4-5-20250929",
        usage=Usage(input_tokens=40, output_tokens=12, cache_read_input_tokens=3_000),
    )
    cost = record.cost()
    assert cost is not None and not cost.free and cost.usd > 0
    data = usage_dict([record])
    assert data["requests"][0]["cost"] == format_cost(cost)
    assert data["total"]["cost_usd"] == str(cost.usd)


def test_stats_add_up_per_session_model_and_backend_inside_the_window(tmp_path: Path) -> None:
    store, session_id = _session(tmp_path)
    other = store.create(backend="openai", model="gpt")
    later = RequestUsage(
        time=START + timedelta(hours=2),
        backend="openai",
        wire="openai",
        model="<b>my-finetune</b>",
        usage=Usage(input_tokens=5, output_tokens=5),
    )
    other.record([], [Message.user("q"), Message.assistant([Text("a")])], usage=[later])

    everything = usage_stats(store)
    assert everything.total.requests == 3
    assert everything.total.input_tokens == 1_125
    assert {s.id: s.totals.requests for s in everything.sessions} == {session_id: 2, other.id: 1}
    assert everything.models[("openai", "<b>my-finetune</b>")].requests == 2
    assert everything.backends["local"].cost is not None
    assert everything.backends["local"].cost.free
    assert everything.backends["openai"].cost is None

    window = usage_stats(
        store,
        since=START + timedelta(seconds=30),
        until=START + timedelta(hours=1),
    )
    assert window.total.requests == 1
    assert [s.id for s in window.sessions] == [session_id]
    assert set(window.backends) == {"openai"}
    data = window.as_dict()
    assert data["since"] == format_time(START + timedelta(seconds=30))
    assert data["total"]["input_tokens"] == 1_000

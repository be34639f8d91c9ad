"""OpenTelemetry spans of an agent turn, on every wire, through the real transports.

Each wire's backend talks through its official SDK to a scripted local
server (tests/support: answers written by the test in the wire's shape,
not recordings) that first asks for a tool and then answers. The spans go
to the OpenTelemetry SDK's in-memory exporter, or over OTLP/HTTP to a
loopback receiver that decodes them with `opentelemetry-proto`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from carryall.agent import Agent
from carryall.backends import open_backend
from carryall.config import Config
from carryall.sessions.redact import REDACTED, Redactor, compile_pattern
from carryall.tools import tool
from carryall.transport import Backend
from tests.support import bedrock_peer
from tests.support.otlp import exported_spans, otlp_receiver
from tests.support.scripted import Reply, served

pytest.importorskip("opentelemetry.sdk.trace", reason="tracing needs carryall[otel]")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from carryall.tracing import AgentTracer

SECRET = "sk-ant-api03-" + "Zq8" * 30


@tool
def lookup(city: str) -> str:
    """Look up the weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}, token {SECRET}"


def _anthropic(call: bool) -> dict[str, Any]:
    content: list[dict[str, Any]] = (
        [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"city": "Oslo"}}]
        if call
        else [{"type": "text", "text": "It is sunny."}]
    )
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        },
    }


def _chat(call: bool, model: str = "gpt-4.1-mini-2025-04-14") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if call else "It is sunny."}
    if call:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
            }
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
        ],
        "usage": {
            "prompt_tokens": 130,
            "completion_tokens": 5,
            "total_tokens": 135,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    }


def _responses(call: bool) -> dict[str, Any]:
    output: list[dict[str, Any]] = (
        [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "lookup",
                "arguments": '{"city": "Oslo"}',
                "status": "completed",
            }
        ]
        if call
        else [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
            }
        ]
    )
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-4.1-mini-2025-04-14",
        "output": output,
        "usage": {
            "input_tokens": 130,
            "input_tokens_details": {"cached_tokens": 100},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 135,
        },
    }


def _gemini(call: bool) -> dict[str, Any]:
    part: dict[str, Any] = (
        {"functionCall": {"name": "lookup", "args": {"city": "Oslo"}}}
        if call
        else {"text": "It is sunny."}
    )
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
        "usageMetadata": {
            "promptTokenCount": 110,
            "cachedContentTokenCount": 100,
            "candidatesTokenCount": 5,
        },
        "modelVersion": "gemini-2.5-flash",
    }


def _bedrock(call: bool) -> dict[str, Any]:
    content: list[dict[str, Any]] = (
        [{"toolUse": {"toolUseId": "tooluse_1", "name": "lookup", "input": {"city": "Oslo"}}}]
        if call
        else [{"text": "It is sunny."}]
    )
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use" if call else "end_turn",
        "usage": {
            "inputTokens": 10,
            "outputTokens": 5,
            "cacheReadInputTokens": 100,
            "cacheWriteInputTokens": 20,
            "totalTokens": 135,
        },
        "metrics": {"latencyMs": 5},
    }


Opener = Callable[[], contextlib.AbstractContextManager[Backend]]


@contextlib.contextmanager
def _scripted(
    name: str, answer: Callable[[bool], dict[str, Any]], **extra: Any
) -> Iterator[Backend]:
    replies = [Reply(body=answer(True)), Reply(body=answer(False))]
    with served(replies, **extra) as server:
        backend = open_backend(
            name,
            base_url=server.url + ("/v1" if name in ("openai", "responses") else ""),
            api_key="k",
            max_retries=0,
            stream=False,
            config=Config(),
        )
        try:
            yield backend
        finally:
            backend.close()


@contextlib.contextmanager
def _bedrock_backend() -> Iterator[Backend]:
    replies = [bedrock_peer.Reply(body=_bedrock(True)), bedrock_peer.Reply(body=_bedrock(False))]
    with converse(replies) as server:
        backend = open_backend(
            "bedrock",
            base_url=server.url,
            max_retries=0,
            stream=False,
            model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            config=Config(),
        )
        try:
            yield backend
        finally:
            backend.close()


converse = bedrock_peer.converse_server

LLAMA_PROPS = {
    "model_path": "/models/qwen3.gguf",
    "n_ctx": 8192,
    "modalities": {"vision": False},
    "chat_template_caps": {"supports_tool_calls": True},
}

WIRES: dict[str, tuple[Opener, str, str, int, int]] = {
    # name: (opener, provider name, answered model, input tokens with cache, cache reads)
    "anthropic": (
        lambda: _scripted("anthropic", _anthropic),
        "anthropic",
        "claude-sonnet-4-5-20250929",
        130,
        100,
    ),
    "openai": (lambda: _scripted("openai", _chat), "openai", "gpt-4.1-mini-2025-04-14", 130, 100),
    "responses": (
        lambda: _scripted("responses", _responses),
        "openai",
        "gpt-4.1-mini-2025-04-14",
        130,
        100,
    ),
    "gemini": (lambda: _scripted("gemini", _gemini), "gcp.gemini", "gemini-2.5-flash", 110, 100),
    "bedrock": (
        _bedrock_backend,
        "aws.bedrock",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        130,
        100,
    ),
    "llama-server": (
        lambda: _scripted("llama-server", lambda c: _chat(c, "qwen3"), props=LLAMA_PROPS),
        "llama.cpp",
        "qwen3",
        130,
        100,
    ),
}


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory, provider
    provider.shutdown()


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in bedrock_peer.CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


def _turn(opener: Opener, tracer: AgentTracer) -> None:
    with opener() as backend:
        agent = Agent(backend, tools=[lookup], tracer=tracer)
        agent.send("What is the weather in Oslo?")


def _by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        named.setdefault(span.name.split(" ")[0], []).append(span)
    return named


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_a_two_step_tool_turn_is_one_agent_span_over_two_requests_and_a_tool_call(
    wire: str, exporter: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    memory, provider = exporter
    opener, provider_name, answered, input_tokens, cache_read = WIRES[wire]
    _turn(opener, AgentTracer(session_id="s-123", tracer_provider=provider))
    spans = memory.get_finished_spans()
    named = _by_name(spans)
    [turn] = named["invoke_agent"]
    operation = "generate_content" if wire == "gemini" else "chat"
    requests = named[operation]
    [call] = named["execute_tool"]
    assert len(requests) == 2 and len(spans) == 4
    assert turn.parent is None
    for child in (*requests, call):
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id
    # The tool ran between the two requests.
    first, second = sorted(requests, key=lambda s: s.start_time or 0)
    assert (first.end_time or 0) <= (call.start_time or 0)
    assert (call.end_time or 0) <= (second.start_time or 0)
    for span in spans:
        assert span.attributes is not None
        assert span.attributes["gen_ai.conversation.id"] == "s-123"
    assert turn.attributes is not None and call.attributes is not None
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.provider.name"] == provider_name
    for span in requests:
        attributes = span.attributes
        assert attributes is not None
        assert attributes["gen_ai.operation.name"] == operation
        assert attributes["gen_ai.provider.name"] == provider_name
        assert attributes["gen_ai.response.model"] == answered
        assert attributes["gen_ai.request.model"] == span.name.split(" ", 1)[1]
        assert attributes["gen_ai.usage.input_tokens"] == input_tokens
        assert attributes["gen_ai.usage.output_tokens"] == 5
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == cache_read
        assert "gen_ai.input.messages" not in attributes  # content is opt-in
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert call.attributes["gen_ai.tool.name"] == "lookup"
    assert call.attributes["gen_ai.tool.call.id"]
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"


def test_a_failed_request_ends_its_spans_as_errors(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    memory, provider = exporter
    tracer = AgentTracer(tracer_provider=provider)
    with served([Reply(status=400, body={"error": {"message": "no", "type": "bad"}})]) as server:
        backend = open_backend(
            "openai", base_url=server.url + "/v1", api_key="k", max_retries=0, config=Config()
        )
        with pytest.raises(Exception, match="no"):
            Agent(backend, tracer=tracer).send("Hello")
        backend.close()
    spans = _by_name(memory.get_finished_spans())
    [turn], [request] = spans["invoke_agent"], spans["chat"]
    assert turn.status.is_ok is False and request.status.is_ok is False


def test_content_is_captured_only_when_asked_and_never_holds_a_secret(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    memory, provider = exporter
    redactor = Redactor([compile_pattern("Oslo", "the test")])
    tracer = AgentTracer(tracer_provider=provider, capture_content=True, redactor=redactor)
    _turn(WIRES["anthropic"][0], tracer)
    spans = memory.get_finished_spans()
    text = repr([dict(span.attributes or {}) for span in spans])
    assert "gen_ai.input.messages" in text and "gen_ai.tool.call.result" in text
    assert SECRET not in text and "Oslo" not in text
    assert REDACTED in text


def test_without_a_tracer_the_agent_loads_no_opentelemetry() -> None:
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from carryall.agent import Agent\n"
        "from tests.support.agent import ScriptedBackend, say\n"
        "Agent(ScriptedBackend(say('hi'))).send('hello')\n"
        "print(any(m.startswith('opentelemetry') for m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"


def test_spans_export_over_otlp_http_to_a_loopback_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from carryall.tracing import configure_from_environment

    with otlp_receiver() as (url, bodies):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
        provider = configure_from_environment()
        assert provider is not None
        _turn(WIRES["openai"][0], AgentTracer(session_id="s-9", tracer_provider=provider))
        provider.shutdown()  # flushes the batch
    spans = exported_spans(bodies)
    assert sorted(span.name.split(" ")[0] for span in spans) == [
        "chat",
        "chat",
        "execute_tool",
        "invoke_agent",
    ]
    attributes = {kv.key: kv.value for span in spans for kv in span.attributes}
    assert attributes["gen_ai.conversation.id"].string_value == "s-9"
    assert attributes["gen_ai.usage.cache_read.input_tokens"].int_value == 100


def test_carryall_run_exports_its_spans_with_the_session_id(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from carryall.sessions import Store
    from tests.support.cli import invoke

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with otlp_receiver() as (url, bodies), served([Reply(body=_chat(False))]) as server:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        result = invoke("run", "hi", "-b", "openai", "--base-url", f"{server.url}/v1")
    assert result.exit_code == 0, result.stderr
    [info] = Store(home / "sessions").list()
    spans = exported_spans(bodies)
    assert sorted(span.name.split(" ")[0] for span in spans) == ["chat", "invoke_agent"]
    for span in spans:
        ids = [
            kv.value.string_value for kv in span.attributes if kv.key == "gen_ai.conversation.id"
        ]
        assert ids == [info.meta.id]


def test_no_endpoint_means_no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    from carryall.tracing import configure_from_environment

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert configure_from_environment() is None

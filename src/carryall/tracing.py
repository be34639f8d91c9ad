"""OpenTelemetry spans for agent turns, model requests and tool calls (the GenAI conventions).

An `AgentTracer` handed to `Agent(tracer=...)` opens one `invoke_agent`
span per turn, a `chat {model}` span for each request the turn sends and an
`execute_tool {name}` span for each tool call, all children of the turn.
Attribute names come from the `opentelemetry-semantic-conventions` package
(`gen_ai.*`), at the version that package ships, so a backend that reads
the GenAI conventions (Jaeger, Grafana Tempo, Langfuse, Logfire, ...) shows
them without a mapping. Every span carries the session id as
`gen_ai.conversation.id`, so a trace and a transcript find each other.

Tracing is an optional extra (`carryall[otel]`): without a tracer nothing
here is imported and an agent pays nothing. carryall writes no exporter:
spans go to whatever `TracerProvider` the program set up (the OpenTelemetry
SDK's OTLP exporter, its in-memory one in tests), or to the one
`configure_from_environment` builds from the standard `OTEL_*` variables.

Message content (prompts, answers, tool arguments and results) is left out
unless `capture_content` is set, and when it is, it passes through the
session's redaction first: a trace is as shareable as the transcript.

Token figures follow the conventions: `gen_ai.usage.input_tokens` counts
every input token, cached ones included, and the cache reads and writes are
also given alone; carryall's own `Usage` keeps input without the cache
(see `carryall.providers.Usage`), so the sum is made here, once.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from carryall.backend_specs import BACKENDS
from carryall.errors import CarryallError

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from carryall.agent import AgentEvent
    from carryall.providers import Request, Response
    from carryall.sessions.redact import Redactor
    from carryall.transport import Backend

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "INSTRUMENTATION_NAME",
    "PROVIDER_NAMES",
    "AgentTracer",
    "configure_from_environment",
    "missing_extra",
]

INSTRUMENTATION_NAME: Final = "carryall"
"""The instrumentation scope every carryall span is made under."""

CAPTURE_CONTENT_VARIABLE: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The variable GenAI instrumentations read to put message content on spans (`true` to opt in)."""

PROVIDER_NAMES: Final = {spec.name: spec.otel_provider for spec in BACKENDS.values()}
"""`gen_ai.provider.name` for each backend, as its row of `BACKENDS` states it."""

_OPERATION: Final = {"gemini": "generate_content"}
"""The conventions' operation name where a provider's API is not called `chat`."""


def missing_extra() -> str | None:
    """Why tracing cannot run here (the `otel` extra is not installed), or None when it can."""
    try:
        import opentelemetry.sdk.trace
        import opentelemetry.semconv  # noqa: F401
    except ImportError:
        return "tracing needs the otel extra: pip install 'carryall[otel]'"
    return None


def configure_from_environment() -> TracerProvider | None:
    """A tracer provider exporting over OTLP/HTTP, when the `OTEL_*` variables ask for one.

    Tracing is on when `OTEL_EXPORTER_OTLP_ENDPOINT` or
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (the exporter reads those,
    its headers and timeouts itself), and off when `OTEL_SDK_DISABLED` is
    `true` or nothing is set. Raises `CarryallError` when it is asked for but
    the `otel` extra is missing: a trace a person expected must not vanish.
    """
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not (
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return None
    why = missing_extra()
    if why is not None:
        raise CarryallError(f"OTEL_EXPORTER_OTLP_ENDPOINT is set, but {why}")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = SdkTracerProvider(resource=Resource.create({"service.name": "carryall"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


class AgentTracer:
    """Spans for one agent's turns, requests and tool calls.

    `session_id` goes on every span (`gen_ai.conversation.id`); set it, or
    assign `session_id` later, once the session exists. `capture_content`
    (default: the `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
    variable) adds the messages, passed through `redactor` (default: the
    built-in secret shapes) first. `tracer_provider` defaults to the global
    one OpenTelemetry was set up with.
    """

    def __init__(
        self,
        *,
        session_id: str | None = None,
        capture_content: bool | None = None,
        redactor: Redactor | None = None,
        tracer_provider: TracerProvider | None = None,
        agent_name: str = "carryall",
    ) -> None:
        why = missing_extra()
        if why is not None:
            raise CarryallError(why)
        from opentelemetry import trace

        from carryall.sessions.redact import Redactor

        self.session_id = session_id
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_CONTENT_VARIABLE, "").lower() == "true"
        self.capture_content = capture_content
        self.redactor = redactor if redactor is not None else Redactor()
        self.agent_name = agent_name
        self._provider = tracer_provider
        self._tracer: Tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, tracer_provider=tracer_provider
        )
        self._turn: Span | None = None
        self._tools: dict[str, Span] = {}
        self._lock = threading.Lock()

    def shutdown(self) -> None:
        """Flush and stop the tracer provider this tracer was given (the global one is left be)."""
        shutdown = getattr(self._provider, "shutdown", None)
        if shutdown is not None:
            shutdown()

    # -- the agent's hooks ------------------------------------------------------

    @contextlib.contextmanager
    def turn(self, backend: Backend) -> Iterator[None]:
        """The span of one turn (`invoke_agent`); requests and tool calls nest under it."""
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

        attributes = self._common(backend)
        attributes[gen_ai.GEN_AI_OPERATION_NAME] = "invoke_agent"
        attributes[gen_ai.GEN_AI_AGENT_NAME] = self.agent_name
        with self._tracer.start_as_current_span(
            f"invoke_agent {self.agent_name}", attributes=attributes
        ) as span:
            self._turn = span
            try:
                yield
            finally:
                self._end_tools("the turn ended before the call was answered")
                self._turn = None

    def request(
        self,
        backend: Backend,
        request: Request,
        send: Callable[[Request], Response],
    ) -> Response:
        """Send `request` through `send` inside its `chat {model}` span, and return the answer."""
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
        from opentelemetry.trace import SpanKind

        model = request.model or backend.model
        operation = _OPERATION.get(backend.name, "chat")
        attributes = self._common(backend)
        attributes[gen_ai.GEN_AI_OPERATION_NAME] = operation
        attributes[gen_ai.GEN_AI_REQUEST_MODEL] = model
        if request.max_tokens is not None:
            attributes[gen_ai.GEN_AI_REQUEST_MAX_TOKENS] = request.max_tokens
        if self.capture_content:
            attributes[gen_ai.GEN_AI_INPUT_MESSAGES] = self._messages_json(request.messages)
            if request.system:
                attributes[gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS] = self._json(
                    [{"type": "text", "content": request.system}]
                )
        with self._tracer.start_as_current_span(
            f"{operation} {model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            response = send(request)
            self._answered(span, response)
            return response

    def on_event(self, event: AgentEvent) -> None:
        """Open and close tool-call spans from the agent's `ToolCallStarted`/`ToolCallFinished`."""
        from carryall.agent import ToolCallFinished, ToolCallStarted

        if isinstance(event, ToolCallStarted):
            self._tool_started(event.call.id, event.call.name, event.call.input)
        elif isinstance(event, ToolCallFinished):
            self._tool_finished(event.call.id, event.result.content, event.result.is_error)

    # -- spans ------------------------------------------------------------------

    def _common(self, backend: Backend) -> dict[str, Any]:
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

        attributes: dict[str, Any] = {
            gen_ai.GEN_AI_PROVIDER_NAME: PROVIDER_NAMES.get(backend.name, backend.name),
        }
        if self.session_id:
            attributes[gen_ai.GEN_AI_CONVERSATION_ID] = self.session_id
        return attributes

    def _answered(self, span: Span, response: Response) -> None:
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

        usage = response.usage
        if response.model:
            span.set_attribute(gen_ai.GEN_AI_RESPONSE_MODEL, response.model)
        span.set_attribute(gen_ai.GEN_AI_RESPONSE_FINISH_REASONS, [response.stop_reason])
        span.set_attribute(
            gen_ai.GEN_AI_USAGE_INPUT_TOKENS,
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens,
        )
        span.set_attribute(gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)
        span.set_attribute(
            gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cache_read_input_tokens
        )
        span.set_attribute(
            gen_ai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_creation_input_tokens
        )
        if self.capture_content:
            span.set_attribute(
                gen_ai.GEN_AI_OUTPUT_MESSAGES, self._messages_json((response.message,))
            )

    def _tool_started(self, call_id: str, name: str, arguments: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

        attributes: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
            gen_ai.GEN_AI_TOOL_NAME: name,
            gen_ai.GEN_AI_TOOL_CALL_ID: call_id,
            gen_ai.GEN_AI_TOOL_TYPE: "function",
        }
        if self.session_id:
            attributes[gen_ai.GEN_AI_CONVERSATION_ID] = self.session_id
        if self.capture_content:
            attributes[gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS] = self._json(arguments)
        parent = trace.set_span_in_context(self._turn) if self._turn is not None else None
        span = self._tracer.start_span(
            f"execute_tool {name}", context=parent, attributes=attributes
        )
        with self._lock:
            self._tools[call_id] = span

    def _tool_finished(self, call_id: str, content: str, is_error: bool) -> None:
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
        from opentelemetry.trace import Status, StatusCode

        with self._lock:
            span = self._tools.pop(call_id, None)
        if span is None:
            return
        if self.capture_content:
            span.set_attribute(gen_ai.GEN_AI_TOOL_CALL_RESULT, self.redactor.text(content))
        if is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def _end_tools(self, why: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        with self._lock:
            spans, self._tools = list(self._tools.values()), {}
        for span in spans:
            span.set_status(Status(StatusCode.ERROR, why))
            span.end()

    # -- content ----------------------------------------------------------------

    def _json(self, value: Any) -> str:
        return self.redactor.text(json.dumps(value, ensure_ascii=False, default=str))

    def _messages_json(self, messages: Any) -> str:
        """Messages in the conventions' shape (role and parts), images named, never inlined."""
        from carryall.blocks import Image, Text, Thinking, ToolResult, ToolUse

        shaped: list[dict[str, Any]] = []
        for message in messages:
            parts: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, Text):
                    parts.append({"type": "text", "content": block.text})
                elif isinstance(block, Thinking):
                    parts.append({"type": "reasoning", "content": block.text})
                elif isinstance(block, ToolUse):
                    parts.append(
                        {
                            "type": "tool_call",
                            "id": block.id,
                            "name": block.name,
                            "arguments": block.input,
                        }
                    )
                elif isinstance(block, ToolResult):
                    parts.append(
                        {
                            "type": "tool_call_response",
                            "id": block.tool_use_id,
                            "response": block.content,
                        }
                    )
                elif isinstance(block, Image):
                    parts.append({"type": "image", "mime_type": block.media_type})
                else:
                    parts.append({"type": type(block).__name__.lower()})
            shaped.append({"role": message.role, "parts": parts})
        return self._json(shaped)

"""The agent loop: send the history, run the round's tools, repeat, keep the history whole.

One turn is several steps: the history goes to the backend, the assistant's
message is appended, the tool calls of that round run concurrently (each
with its own timeout), and one user message carrying every result, then any
images the tools made, is appended. The turn ends when the model stops
calling tools; after `max_steps` rounds it is asked to answer without them
(with a small output budget: that answer is a summary, not new work), so a
turn ends on the model's word rather than on a dangling round. A call made
again and again with the same arguments and failing the same way each time
stops the turn early: a model that repeats a mistake three times will not
learn from the twentieth. A call that succeeded and is made again with the
same result has nothing more to give, so the model is asked to answer
without tools at once. The budgets default to what the backend can
carry: the embedded 135M model gets a short answer and few steps.

The history is the thing worth protecting. A request that fails (or is
interrupted) leaves it exactly as it was before that request, and a round
whose tools are interrupted still answers every call, so whatever is left
behind can be sent again and recorded as it stands.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, overload

import msgspec

from carryall.blocks import (
    Document,
    Image,
    Message,
    ToolResult,
    ToolUse,
    validate_history,
)
from carryall.context import (
    ContextFitter,
    Fitted,
    known_context_window,
)
from carryall.errors import CarryallError, HistoryError, ProviderError, ToolError
from carryall.providers import (
    CachePolicy,
    Downgrade,
    Effort,
    HostedTool,
    ModelOptions,
    OutputSchema,
    Request,
    Response,
    ToolChoice,
)
from carryall.providers.caching import conversation_key
from carryall.providers.options import NO_OPTIONS
from carryall.tools import Tool, ToolFunction, ToolOutput
from carryall.transport import Backend
from carryall.usage import RequestUsage

if TYPE_CHECKING:
    from carryall.schema import SchemaSpec

T = TypeVar("T")

__all__ = [
    "DEFAULT_MAX_REPEATS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TOOL_TIMEOUT",
    "LOCAL_MAX_STEPS",
    "LOCAL_MAX_TOKENS",
    "WRAP_UP_TOKENS",
    "Agent",
    "AgentEvent",
    "ContextFitted",
    "Recorder",
    "RepeatedCall",
    "RequestStarted",
    "ResponseReceived",
    "SessionMerged",
    "StepLimitReached",
    "ToolCallFinished",
    "ToolCallStarted",
    "Tracer",
]

DEFAULT_MAX_STEPS = 20
"""Tool rounds one turn may run before the model is asked to answer without tools."""

DEFAULT_TOOL_TIMEOUT = 120.0
"""Seconds one tool call may run before it is answered with a timeout error."""

DEFAULT_MAX_TOKENS = 4096
"""Output tokens asked for per request."""

LOCAL_MAX_STEPS = 4
"""Tool rounds per turn on the embedded `local` backend: a 135M model that has
not got it right in four rounds is repeating itself, and each round costs
seconds on a small CPU."""

LOCAL_MAX_TOKENS = 512
"""Output tokens per request on the embedded `local` backend: room for a few
calls' JSON or a short answer; a tiny model given 4,096 tokens rambles for
minutes on two cores."""

WRAP_UP_TOKENS = 256
"""Output tokens for the answer without tools after the step limit (or less,
when `max_tokens` is less): a summary of what was found, not new work."""

DEFAULT_MAX_REPEATS = 3
"""Times the same call may fail the same way in one turn before the turn stops."""

_SUCCESS_REPEATS = 2
"""Times the same call may give the same successful result before the model
is asked to answer: the second time already told it nothing new."""


def default_budget(backend_name: str) -> tuple[int, int]:
    """`(max_steps, max_tokens)` for a backend: short on the embedded one, else today's."""
    if backend_name == "local":
        return LOCAL_MAX_STEPS, LOCAL_MAX_TOKENS
    return DEFAULT_MAX_STEPS, DEFAULT_MAX_TOKENS


class Recorder(Protocol):
    """Where a turn's history is recorded: a `carryall.sessions` session, or any lookalike."""

    def messages(self) -> list[Message]: ...

    def record(
        self,
        started_from: Sequence[Message],
        left_behind: Sequence[Message],
        downgrades: Sequence[Downgrade] = (),
        *,
        usage: Sequence[RequestUsage] = (),
    ) -> str:
        """Record a run; `downgrades` and `usage` are passed only when there are some.

        `usage` (each request's `RequestUsage`) goes only to a recorder that
        reads it back, one with a `usage()` method, as a session has.
        """
        ...


# -- events -------------------------------------------------------------------


class RequestStarted(msgspec.Struct, frozen=True):
    """A request is about to go out; `step` counts from 1 within the turn."""

    step: int


class ResponseReceived(msgspec.Struct, frozen=True):
    """The backend answered step `step` whole; its message goes into the history next."""

    step: int
    response: Response


class ToolCallStarted(msgspec.Struct, frozen=True):
    """A tool call of the current round was handed to a worker."""

    call: ToolUse


class ToolCallFinished(msgspec.Struct, frozen=True):
    """A tool call was answered (success, error, timeout or interruption)."""

    call: ToolUse
    result: ToolResult
    images: tuple[Image, ...] = ()


class StepLimitReached(msgspec.Struct, frozen=True):
    """The turn has run `max_steps` tool rounds and the model is still calling tools.

    With `wrapping_up`, one more request follows that asks the model to
    answer without tools, so the turn ends on its word. Without, the turn
    stops here; every call has been answered, so the history is valid and
    `Agent.resume()` (or the next `send`) carries on from it.
    """

    max_steps: int
    wrapping_up: bool = True


class ContextFitted(msgspec.Struct, frozen=True):
    """The history was cut to fit the model's context before a request (`carryall.context`).

    The cut shapes the requests only: `fitted.messages` is what was sent,
    `fitted.summary` the marked line it carries, and the requests after it
    go on from it (see `Agent._fitted_request`). `Agent.messages` and the
    session keep the whole history, so nothing said is lost to a window and
    a step near the window writes no more than one far below it.
    """

    step: int
    context_window: int
    fitted: Fitted


class RepeatedCall(msgspec.Struct, frozen=True):
    """`call` was made `times` times in this turn with the same arguments and result.

    When `result.is_error`, the turn stops here: every call has been
    answered, so the history is valid and ends on the round's results, and
    the next `send` (or `resume()`) carries on from it. When it succeeded,
    the next request asks the model to answer without tools.
    """

    call: ToolUse
    result: ToolResult
    times: int


class SessionMerged(msgspec.Struct, frozen=True):
    """Another writer recorded in the session during this turn; this turn went after its turn.

    The session holds both, in the order they were recorded (see
    `carryall.sessions.protocol`); this agent's history goes on without
    the other writer's messages. A write that could not go after them
    raises `carryall.errors.SessionConflict` instead.
    """

    messages: int
    """How many messages of this agent's history the merge recorded."""


AgentEvent: TypeAlias = (
    RequestStarted
    | ResponseReceived
    | ToolCallStarted
    | ToolCallFinished
    | StepLimitReached
    | RepeatedCall
    | ContextFitted
    | SessionMerged
)


class Tracer(Protocol):
    """Where a turn's spans go: a `carryall.tracing.AgentTracer`, or any lookalike.

    The loop names only the three hooks it calls, so the tracer (which
    reads the loop's events) depends on the loop and never the other way.
    """

    def turn(self, backend: Backend) -> contextlib.AbstractContextManager[None]:
        """Enclose one turn; its requests and tool calls happen inside."""
        ...

    def request(
        self, backend: Backend, request: Request, send: Callable[[Request], Response]
    ) -> Response:
        """Send `request` through `send`, observed, and return the answer."""
        ...

    def on_event(self, event: AgentEvent) -> None:
        """Hear each of the loop's events (tool calls start and finish here)."""
        ...


# -- the loop -----------------------------------------------------------------


class Agent:
    """A conversation with one backend and a set of tools.

    `messages` is the history: a plain list you may read, and edit between
    turns (a rewrite is recorded as one). `send(prompt)` runs one turn.
    `on_text` receives assistant text as it streams; `on_event` receives
    `AgentEvent`s (requests, tool calls, the step limit) for a display.
    After `max_steps` tool rounds in one turn, the next request asks the
    model to answer without tools (`tool_choice="none"`), so a turn ends on
    the model's word; with `wrap_up=False` the turn stops after the last
    round instead, every call answered. When one call (same tool, same
    arguments) has failed with the same result `max_repeats` times in a
    turn, the turn stops after that round with a `RepeatedCall` event; one
    that succeeded twice with the same result has the model answer next.
    `max_steps` and `max_tokens` default to `default_budget(backend.name)`.
    `options` (temperature, stop sequences, ... and a per-wire `extra`), `effort`,
    `thinking` and `thinking_budget` go on every request as given; what the
    backend's wire cannot take is named in `turn_downgrades`.
    A `tracer` (`carryall.tracing.AgentTracer`) puts each turn, request and
    tool call on an OpenTelemetry span; without one nothing of it is loaded.
    `cache` is the prompt-caching policy of every request (`auto`: each
    wire's cache markers, `carryall.providers.caching`; `off`: none), and
    `cache_key` the conversation's name where a wire routes by one (default:
    a digest of the session's id, else of the system prompt and tools).
    A `schema` asks every turn for an answer of that shape (structured
    output; see `send`), unless a turn names its own.
    With a `session`, the history is recorded after every tool round and every turn, and after a
    failed or interrupted one with whatever whole messages it left; when no
    `messages` are given, the session's own history is the starting point.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        tools: Iterable[Tool | ToolFunction] = (),
        system: str | None = None,
        max_steps: int | None = None,
        tool_timeout: float = DEFAULT_TOOL_TIMEOUT,
        session: Recorder | None = None,
        on_text: Callable[[str], None] | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
        messages: Iterable[Message] | None = None,
        max_tokens: int | None = None,
        wrap_up: bool = True,
        max_repeats: int = DEFAULT_MAX_REPEATS,
        context_window: int | None = None,
        tracer: Tracer | None = None,
        cache: CachePolicy = "auto",
        cache_key: str | None = None,
        options: ModelOptions = NO_OPTIONS,
        effort: Effort | None = None,
        thinking: bool = False,
        thinking_budget: int | None = None,
        schema: SchemaSpec | None = None,
        hosted_tools: Iterable[HostedTool] = (),
    ) -> None:
        steps_default, tokens_default = default_budget(backend.name)
        max_steps = steps_default if max_steps is None else max_steps
        max_tokens = tokens_default if max_tokens is None else max_tokens
        if max_steps < 1:
            raise CarryallError(f"agent max_steps must be at least 1, got {max_steps}")
        if max_tokens < 1:
            raise CarryallError(f"agent max_tokens must be at least 1, got {max_tokens}")
        if max_repeats < 1:
            raise CarryallError(f"agent max_repeats must be at least 1, got {max_repeats}")
        if not tool_timeout > 0:
            raise CarryallError(f"agent tool_timeout must be positive, got {tool_timeout}")
        if cache not in ("auto", "off"):
            raise CarryallError(f"agent cache must be 'auto' or 'off', got {cache!r}")
        self.backend = backend
        self.tools: dict[str, Tool] = {}
        for item in tools:
            t = item if isinstance(item, Tool) else Tool.from_function(item)
            if t.name in self.tools:
                raise ToolError(f"two tools are named {t.name!r}; tool names must be unique")
            self.tools[t.name] = t
        self.system = system
        self.options = options
        """How the model samples and stops (`ModelOptions`), sent with every request."""
        self.effort = effort
        self.thinking = thinking
        self.thinking_budget = thinking_budget
        self.max_steps = max_steps
        self.wrap_up = wrap_up
        self.tool_timeout = tool_timeout
        self.max_tokens = max_tokens
        self.max_repeats = max_repeats
        # Tools the provider runs (web search, code execution, ...): declared
        # with every request, answered inside the model's own turn.
        self.hosted_tools = tuple(hosted_tools)
        # The model's context in tokens: given, else what the backend knows
        # (llama-server's /props), else the published limit of a hosted
        # model, else None and the history is sent whole (until a server's
        # overflow error names its context).
        if context_window is None:
            context_window = backend.context_window
        if context_window is None:
            context_window = known_context_window(backend.model)
        if context_window is not None and context_window < 1:
            raise CarryallError(f"agent context_window must be positive, got {context_window}")
        # Every request's history is fitted into that context by one fitter,
        # which keeps its cut for the requests after it.
        self._fitter = ContextFitter(context_window)
        self.session = session
        self.on_text = on_text
        self.on_event = on_event
        self.tracer = tracer
        self.cache: CachePolicy = cache
        # One name for every request of the conversation: the session's id
        # (as a digest) when there is a session, so a resumed one keeps it.
        if cache_key is None:
            session_id = getattr(session, "id", None)
            cache_key = conversation_key(session_id) if isinstance(session_id, str) else ""
        self.cache_key = cache_key
        self.schema = schema
        """What every turn's answer must match (`send`'s `schema` when it names none)."""
        if messages is None and session is not None:
            messages = session.messages()
        self.messages: list[Message] = list(messages or ())
        # What the session last recorded, so an edit between turns is seen
        # as a rewrite rather than mistaken for an unchanged prefix.
        self._recorded: list[Message] = list(self.messages)
        self._downgrades: list[Downgrade] = []  # noted since the last record
        # The schema the turn under way asks for (`send`'s), None between turns.
        self._output_schema: OutputSchema | None = None
        self.turn_downgrades: list[Downgrade] = []
        """What the last turn's requests could not send as held, each once (`Encoded.downgrades`).

        The codec's own report, for a caller that tells a person (`run
        --json`, its `note:` lines); empty for a backend that cannot say.
        """
        recorded = getattr(session, "downgrades", None)
        self._downgrades_seen: set[Downgrade] = set(recorded() if recorded is not None else ())
        # Each answered request's usage since the last record, for a session
        # that keeps it (one with a `usage()` reader): a bill is never lost
        # with the process, and a resumed run adds to the same record.
        self._usage: list[RequestUsage] | None = (
            [] if callable(getattr(session, "usage", None)) else None
        )

    # -- public ---------------------------------------------------------------

    def send(
        self,
        prompt: str,
        images: Sequence[Image | Document] = (),
        *,
        schema: SchemaSpec | None = None,
    ) -> Response:
        """Run one turn for `prompt` (and any images) and return the last response.

        Raises what the backend raised (a `ProviderError`), with the history
        as it was before the failed request; when that was the turn's first
        request, the prompt is withdrawn too, so the history is exactly what
        it was before `send`. A `KeyboardInterrupt` stops the turn the same
        way, after answering any running tool call as interrupted.

        With a `schema` (a JSON Schema dict, a msgspec Struct, a TypedDict,
        a dataclass or a pydantic model: `carryall.schema`), every request of
        the turn asks for an answer matching it, natively on each wire, and
        the turn's answer is checked on receipt: one that does not match
        raises `StructuredOutputError` naming the first mismatch, the answer
        kept in the history (it was said). `ask` gives the parsed value.
        """
        schema = self.schema if schema is None else schema
        if schema is None:
            start = len(self.messages)
            self.messages.append(Message.user(prompt, images))
            return self._turn(rollback_to=start)
        from carryall.schema import output_schema, parse

        # A schema no wire could send is refused before the prompt joins the history.
        wanted = output_schema(schema)
        start = len(self.messages)
        self.messages.append(Message.user(prompt, images))
        self._output_schema = wanted
        try:
            response = self._turn(rollback_to=start)
        finally:
            self._output_schema = None
        # Checked against what was asked for: the type by its own validator.
        parse(response, schema)
        return response

    @overload
    def ask(self, prompt: str, schema: type[T], images: Sequence[Image | Document] = ()) -> T: ...

    @overload
    def ask(
        self,
        prompt: str,
        schema: dict[str, Any] | OutputSchema,
        images: Sequence[Image | Document] = (),
    ) -> Any: ...

    def ask(self, prompt: str, schema: SchemaSpec, images: Sequence[Image | Document] = ()) -> Any:
        """Run one turn asking for an answer matching `schema`; return the answer parsed.

        `send(prompt, images, schema=schema)`, then the answer as the
        caller's type: an instance of a Struct, dataclass or pydantic model,
        the decoded JSON for a TypedDict or a schema dict. A mismatch raises
        `StructuredOutputError` (see `send`).
        """
        from carryall.schema import parse

        return parse(self.send(prompt, images, schema=schema), schema)

    def resume(self) -> Response:
        """Carry on a turn from the history as it stands, adding no prompt.

        For a history that ends on a user message: after the step limit, or
        after a request failed mid-turn and the completed steps were kept.
        """
        if not self.messages or self.messages[-1].role != "user":
            raise CarryallError(
                "nothing to resume: the history must end on a user message "
                f"(it has {len(self.messages)} message(s))"
            )
        return self._turn(rollback_to=len(self.messages))

    @property
    def context_window(self) -> int | None:
        """The model's context in tokens; None while unknown (the history then goes whole)."""
        return self._fitter.context_window

    @context_window.setter
    def context_window(self, tokens: int | None) -> None:
        self._fitter.context_window = tokens

    @property
    def token_scale(self) -> float:
        """How many tokens the server was seen to count for one of the estimate's (1.0 until
        a server answers that a request overflowed its context)."""
        return self._fitter.token_scale

    def record(self) -> None:
        """Record the history as it stands, after an edit between turns (a kept prompt)."""
        self._record()

    def request(self, *, tool_choice: ToolChoice | None = None) -> Request:
        """The request the next step would send for the current history.

        An answer without tools (`tool_choice="none"`, the wrap-up after the
        step limit) asks for at most `WRAP_UP_TOKENS`.
        """
        max_tokens = self.max_tokens
        if tool_choice == "none":
            max_tokens = min(max_tokens, WRAP_UP_TOKENS)
        return Request(
            model=self.backend.model,
            system=self.system,
            messages=tuple(self.messages),
            tools=tuple(t.spec for t in self.tools.values()),
            max_tokens=max_tokens,
            tool_choice=tool_choice,
            cache=self.cache,
            cache_key=self.cache_key,
            options=self.options,
            effort=self.effort,
            thinking=self.thinking,
            thinking_budget=self.thinking_budget,
            output_schema=self._output_schema,
            hosted_tools=self.hosted_tools,
        )

    def _fitted_request(self, step: int, tool_choice: ToolChoice | None) -> Request:
        """The next request, its history fitted into the context window (`ContextFitter`)."""
        request = self.request(tool_choice=tool_choice)
        fit = self._fitter.fit(
            self.messages, max_tokens=request.max_tokens, system=request.system, tools=request.tools
        )
        if fit.fitted is not None and self.context_window is not None:
            self._emit(ContextFitted(step, self.context_window, fit.fitted))
        if fit.max_tokens != request.max_tokens:
            request = msgspec.structs.replace(request, max_tokens=fit.max_tokens)
        if fit.messages is self.messages:
            return request
        return msgspec.structs.replace(request, messages=tuple(fit.messages))

    def _send(self, step: int, tool_choice: ToolChoice | None) -> Response:
        """Fit, send and answer one request; fitted again once if the server counts more."""
        request = self._fitted_request(step, tool_choice)
        sent, clock = datetime.now(UTC), time.monotonic()
        try:
            response = self._complete(request)
        except ProviderError as exc:
            if not self._fitter.learn(exc.message, request.messages, request.system, request.tools):
                raise
            request = self._fitted_request(step, tool_choice)
            sent, clock = datetime.now(UTC), time.monotonic()
            response = self._complete(request)
        if self._usage is not None:
            model = request.model or self.backend.model
            elapsed = time.monotonic() - clock
            self._usage.append(RequestUsage.of(response, self.backend.name, model, sent, elapsed))
        self._note_downgrades(response)
        return response

    # -- the turn -------------------------------------------------------------

    def _turn(self, rollback_to: int) -> Response:
        self.turn_downgrades = []
        traced = contextlib.nullcontext() if self.tracer is None else self.tracer.turn(self.backend)
        with traced:
            return self._traced_turn(rollback_to)

    def _traced_turn(self, rollback_to: int) -> Response:
        try:
            response = self._steps(rollback_to)
        except BaseException as exc:
            self._record_after_failure(exc)
            raise
        self._record()
        return response

    def _steps(self, rollback_to: int) -> Response:
        step = 0
        rounds = 0
        seen: dict[tuple[str, str, str, bool], int] = {}
        settled = False
        while True:
            step += 1
            before = len(self.messages)
            # Past the limit, the tools stay described (the history is full
            # of their calls) but the model is told to answer without them.
            limit = self.wrap_up and rounds >= self.max_steps
            final = limit or settled
            try:
                if limit and not settled:
                    self._emit(StepLimitReached(self.max_steps, wrapping_up=True))
                self._emit(RequestStarted(step))
                response = self._send(step, "none" if final else None)
                self._check_answer(response.message)
                self._emit(ResponseReceived(step, response))
            except BaseException:
                # Nothing of a failed request may stay behind; on the turn's
                # first request the prompt goes too, so the caller can simply
                # send it again.
                del self.messages[rollback_to if step == 1 else before :]
                raise
            if response.message.content:
                # An empty assistant message would fail validation on the
                # next request; with nothing said there is nothing to keep.
                self.messages.append(response.message)
            calls = response.message.tool_uses()
            if final:
                if calls:
                    # A backend that ignored tool_choice: the calls are
                    # answered, not run, so the history stays valid.
                    note = f"not run: this turn reached its limit of {self.max_steps} tool rounds"
                    self._append_results(calls, [ToolOutput(note, is_error=True)] * len(calls))
                return response
            if not calls and response.stop_reason != "pause_turn":
                return response
            if calls:
                outputs = self._run_round(calls)
                # Each whole round is recorded as it lands, so a process
                # killed in a long turn loses at most the step under way. A
                # failure here is not the turn's: the record at the turn's
                # end tries again and reports it.
                with contextlib.suppress(Exception):
                    self._record()
                repeated = self._repeated_call(calls, outputs, seen)
                if repeated is not None:
                    self._emit(repeated)
                    if repeated.result.is_error:
                        return response
                    settled = True
            rounds += 1
            if rounds >= self.max_steps and not self.wrap_up:
                self._emit(StepLimitReached(self.max_steps, wrapping_up=False))
                return response

    def _run_round(self, calls: list[ToolUse]) -> list[ToolOutput]:
        """Run every call of a round concurrently and append one message with all results.

        Returns each call's output, in the calls' order.

        A call made again in the same round with the same arguments (small
        models write one call four times) runs once: its output answers
        every id, and it is shown once, as it was run once.

        Workers are daemon threads: a call that times out, or that is
        abandoned by Ctrl-C, cannot be killed, but it must not keep the
        process alive or hold up the answer to the calls that did finish.
        """
        first_of: dict[tuple[str, str], int] = {}
        runs = [first_of.setdefault((c.name, _canonical(c.input)), i) for i, c in enumerate(calls)]
        futures: dict[int, concurrent.futures.Future[ToolOutput]] = {}
        outputs: list[ToolOutput | None] = [None] * len(calls)
        try:
            for i, call in enumerate(calls):
                if runs[i] != i:
                    continue
                future: concurrent.futures.Future[ToolOutput] = concurrent.futures.Future()
                futures[i] = future
                self._emit(ToolCallStarted(call))
                tool = self.tools.get(call.name)
                if tool is None:
                    future.set_exception(ToolError(self._unknown_tool(call.name)))
                    continue
                worker = threading.Thread(
                    target=_run_call,
                    args=(tool, call, future),
                    name=f"carryall-tool-{call.name}",
                    daemon=True,
                )
                worker.start()
            index_of = {id(f): i for i, f in futures.items()}
            pending = set(futures.values())
            deadline = time.monotonic() + self.tool_timeout
            while pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                done, pending = concurrent.futures.wait(
                    pending, timeout=remaining, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in sorted(done, key=lambda f: index_of[id(f)]):
                    i = index_of[id(future)]
                    outputs[i] = _output_of(future)
                    self._finished(calls[i], outputs[i])
        except BaseException:
            # Ctrl-C (or a failing display) mid-round: answer every call that
            # has no result yet, so the history left behind stays valid.
            for i in sorted(set(runs)):
                if outputs[i] is None:
                    outputs[i] = ToolOutput("interrupted before the tool finished", is_error=True)
                    self._finished(calls[i], outputs[i], quiet=True)
            self._append_results(calls, [outputs[first] for first in runs])
            raise
        for i in futures:
            if outputs[i] is None:
                outputs[i] = ToolOutput(
                    f"timed out after {_seconds(self.tool_timeout)}", is_error=True
                )
                self._finished(calls[i], outputs[i])
        answered = [outputs[first] for first in runs]
        self._append_results(calls, answered)
        return [output for output in answered if output is not None]

    def _repeated_call(
        self,
        calls: list[ToolUse],
        outputs: list[ToolOutput],
        seen: dict[tuple[str, str, str, bool], int],
    ) -> RepeatedCall | None:
        """Count this round's calls; the first repeated enough to act on, if any.

        A call is the same when its tool, its arguments (as canonical JSON)
        and its result are: a call that fails differently each time is still
        exploring. A failure counts to `max_repeats`, a success to two.
        """
        found: RepeatedCall | None = None
        for call, output in zip(calls, outputs, strict=True):
            result = ToolResult(call.id, output.text, output.is_error)
            key = (call.name, _canonical(call.input), result.content, result.is_error)
            seen[key] = seen.get(key, 0) + 1
            enough = self.max_repeats if result.is_error else _SUCCESS_REPEATS
            if seen[key] >= enough and (found is None or result.is_error):
                found = RepeatedCall(call, result, seen[key])
        return found

    def _check_answer(self, answer: Message) -> None:
        """Refuse an answer the history could not hold, while the history is still whole.

        Every decoder refuses what it can see (`answer_message`), but a
        backend is anything with a `complete`: an answer kept with a call id
        used twice, or an image, would make every later request and every
        resume fail. So the check the next request makes runs here first, on
        the history as it would stand with the answer and its round's results.
        """
        if not answer.content:
            return  # not kept at all (see `_steps`)
        after = [*self.messages, answer]
        calls = answer.tool_uses()
        if calls:
            after.append(Message.tool_results([ToolResult(c.id, "(checked)") for c in calls]))
        try:
            validate_history(after)
        except HistoryError as exc:
            raise ProviderError(
                f"the backend's answer was refused, not kept: with it the history would break "
                f"({exc}); the history is left as it was"
            ) from None

    def _append_results(self, calls: list[ToolUse], outputs: list[ToolOutput | None]) -> None:
        """Append the round's results (and what its tools made, after them) as one message.

        A call made again in one round with the same arguments and the same
        output (small models do this) answers every later time with a line
        naming the first: the model reads the output once, in a context that
        may have room for it only once, and what the tool made goes once.
        """
        results: list[ToolResult] = []
        images: list[Image | Document] = []
        first_of: dict[tuple[str, str, str, bool], str] = {}
        kept: list[ToolOutput] = []
        for call, output in zip(calls, outputs, strict=True):
            assert output is not None  # every slot is filled before this is called
            text = output.text
            key = (call.name, _canonical(call.input), text, output.is_error)
            if key in first_of:
                text = f"(the same output as for {first_of[key]}: the same call in this round)"
            else:
                first_of[key] = call.id
                kept.append(output)
                images.extend(output.images)
            results.append(ToolResult(call.id, text, output.is_error, structured=output.structured))
        images.extend(d for output in kept for d in output.documents)
        self.messages.append(Message.tool_results(results, images))

    def _finished(self, call: ToolUse, output: ToolOutput | None, *, quiet: bool = False) -> None:
        if output is None:
            return
        event = ToolCallFinished(
            call,
            ToolResult(call.id, output.text, output.is_error, structured=output.structured),
            output.images,
        )
        if quiet:
            # While unwinding from Ctrl-C a display error must not mask it.
            with contextlib.suppress(Exception):
                self._emit(event)
        else:
            self._emit(event)

    def _unknown_tool(self, name: str) -> str:
        available = ", ".join(self.tools) if self.tools else "none"
        return f"unknown tool {name!r}; available tools: {available}"

    def _complete(self, request: Request) -> Response:
        if self.tracer is None:
            return self.backend.complete(request, on_text=self.on_text)
        return self.tracer.request(
            self.backend, request, lambda r: self.backend.complete(r, on_text=self.on_text)
        )

    def _emit(self, event: AgentEvent) -> None:
        if self.tracer is not None:
            self.tracer.on_event(event)
        if self.on_event is not None:
            self.on_event(event)

    # -- recording ------------------------------------------------------------

    def _note_downgrades(self, response: Response) -> None:
        # What the request could not send as held, for the turn's report and
        # the session: a loss is never silent. The backend says so on the
        # answer, from the one encode it sent (`Response.downgrades`), so the
        # request is never encoded a second time to learn it. The session
        # records each once, not again with every later request that makes
        # it too; the turn reports what its own requests lost.
        for downgrade in response.downgrades:
            if downgrade not in self.turn_downgrades:
                self.turn_downgrades.append(downgrade)
            if self.session is not None and downgrade not in self._downgrades_seen:
                self._downgrades_seen.add(downgrade)
                self._downgrades.append(downgrade)

    def _record(self) -> None:
        # A paid request whose answer was not kept (it failed its check)
        # still has its usage recorded, on an event of no messages.
        if self.session is None or (self.messages == self._recorded and not self._usage):
            return
        left_behind = list(self.messages)
        if self._usage:
            # Only a session keeps usage (see `__init__`), and it takes downgrades too.
            kind = self.session.record(
                self._recorded, left_behind, self._downgrades, usage=self._usage
            )
            self._usage = []
        elif self._downgrades:
            kind = self.session.record(self._recorded, left_behind, self._downgrades)
        else:
            kind = self.session.record(self._recorded, left_behind)
        self._downgrades = []
        added = len(left_behind) - len(self._recorded)
        self._recorded = left_behind
        if kind == "merge":
            self._emit(SessionMerged(added))

    def _record_after_failure(self, exc: BaseException) -> None:
        try:
            self._record()
        except Exception as record_exc:
            # The turn's own failure is what the caller must see; the
            # recording failure rides along on it rather than replacing it.
            exc.add_note(f"and recording the session failed too: {record_exc}")


def _run_call(tool: Tool, call: ToolUse, future: concurrent.futures.Future[ToolOutput]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(tool.invoke(call.input))
    except BaseException as exc:
        future.set_exception(exc)


def _output_of(future: concurrent.futures.Future[ToolOutput]) -> ToolOutput:
    exc = future.exception()
    if exc is None:
        return future.result()
    if isinstance(exc, ToolError):
        return ToolOutput(str(exc), is_error=True)
    detail = str(exc)
    text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return ToolOutput(text, is_error=True)


def _canonical(value: object) -> str:
    """Arguments as one comparable string: sorted keys, so `{a, b}` is `{b, a}`."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _seconds(value: float) -> str:
    return f"{value:g}s"

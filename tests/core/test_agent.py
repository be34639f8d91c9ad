"""The agent loop against a scripted backend: loop logic only (real servers: test_e2e_local)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from carryall.agent import (
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TOKENS,
    LOCAL_MAX_STEPS,
    LOCAL_MAX_TOKENS,
    WRAP_UP_TOKENS,
    Agent,
    AgentEvent,
    RepeatedCall,
    RequestStarted,
    ResponseReceived,
    StepLimitReached,
    ToolCallFinished,
    ToolCallStarted,
)
from carryall.blocks import Image, Message, Text, ToolResult, ToolUse, validate_history
from carryall.context import MIN_ANSWER_TOKENS
from carryall.errors import CarryallError, HistoryError, ProviderError, ToolError
from carryall.providers import Request, Response
from carryall.tools import Tool, ToolOutput
from tests.support.agent import ScriptedBackend, call, say

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


class Recorder:
    def __init__(self, history: Sequence[Message] = ()) -> None:
        self.calls: list[tuple[list[Message], list[Message]]] = []
        self.history = list(history)

    def messages(self) -> list[Message]:
        return list(self.history)

    def record(self, started_from: Sequence[Message], left_behind: Sequence[Message]) -> str:
        self.calls.append((list(started_from), list(left_behind)))
        return "append"


def echo(text: str) -> str:
    """Echo the text back."""
    return text


def boom() -> str:
    """Always fails."""
    raise ValueError("boom")


# -- one turn ---------------------------------------------------------------------


def test_plain_turn_appends_user_and_assistant_and_streams_text() -> None:
    chunks: list[str] = []
    agent = Agent(ScriptedBackend(say("hello there")), on_text=chunks.append)
    response = agent.send("hi")
    assert response.message.text() == "hello there"
    assert agent.messages == [Message.user("hi"), Message.assistant([Text("hello there")])]
    assert "".join(chunks) == "hello there" and len(chunks) > 1


def test_request_carries_model_system_tools_and_max_tokens() -> None:
    backend = ScriptedBackend(say("ok"))
    Agent(backend, tools=[echo], system="be brief", max_tokens=77).send("hi")
    request = backend.requests[0]
    assert request.model == "scripted-1"
    assert request.system == "be brief"
    assert request.max_tokens == 77
    assert [t.name for t in request.tools] == ["echo"]
    assert request.tools[0].input_schema["required"] == ["text"]


def test_prompt_images_ride_the_user_message_after_the_text() -> None:
    image = Image.from_bytes("image/png", PNG, "a.png")
    agent = Agent(ScriptedBackend(say("seen")))
    agent.send("look", images=[image])
    assert agent.messages[0] == Message("user", (Text("look"), image))


def test_tool_round_then_final_answer() -> None:
    backend = ScriptedBackend(
        call(ToolUse("c1", "echo", {"text": "ping"}), text="let me check"), say("it said ping")
    )
    agent = Agent(backend, tools=[echo])
    response = agent.send("echo ping")
    assert response.message.text() == "it said ping"
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[2] == Message.tool_results([ToolResult("c1", "ping")])
    assert backend.requests[1].messages == tuple(agent.messages[:3])
    validate_history(agent.messages)


def test_results_keep_call_order_and_images_follow_all_results() -> None:
    second_done = threading.Event()
    image_a = Image.from_bytes("image/png", PNG, "a.png")
    image_b = Image.from_bytes("image/png", PNG, "b.png")

    def first() -> ToolOutput:
        """Finishes last."""
        second_done.wait(5)
        return ToolOutput("first", (image_a,))

    def second() -> tuple[str, list[Image]]:
        """Finishes first."""
        second_done.set()
        return "second", [image_b]

    agent = Agent(
        ScriptedBackend(call(ToolUse("a", "first", {}), ToolUse("b", "second", {})), say("done")),
        tools=[first, second],
    )
    agent.send("go")
    assert agent.messages[2].content == (
        ToolResult("a", "first"),
        ToolResult("b", "second"),
        image_a,
        image_b,
    )


def test_a_rounds_calls_run_concurrently() -> None:
    # Each call waits for the other at a barrier: run one after the other,
    # the barrier times out and both results are errors.
    barrier = threading.Barrier(2, timeout=10)

    def meet(who: str) -> str:
        """Meet the other call."""
        barrier.wait()
        return f"{who} met"

    agent = Agent(
        ScriptedBackend(
            call(ToolUse("a", "meet", {"who": "a"}), ToolUse("b", "meet", {"who": "b"})),
            say("done"),
        ),
        tools=[meet],
    )
    agent.send("go")
    assert agent.messages[2].tool_results_in() == [
        ToolResult("a", "a met"),
        ToolResult("b", "b met"),
    ]


def test_a_slow_call_times_out_as_an_error_result_and_others_still_answer() -> None:
    release = threading.Event()

    def stuck() -> str:
        """Never finishes in time."""
        release.wait(30)
        return "late"

    try:
        agent = Agent(
            ScriptedBackend(
                call(ToolUse("s", "stuck", {}), ToolUse("e", "echo", {"text": "quick"})),
                say("done"),
            ),
            tools=[stuck, echo],
            tool_timeout=1.0,
        )
        agent.send("go")
    finally:
        release.set()
    assert agent.messages[2].tool_results_in() == [
        ToolResult("s", "timed out after 1s", is_error=True),
        ToolResult("e", "quick"),
    ]


# -- bad calls become error results ---------------------------------------------------


def _one_round(tools: Sequence[Any], use: ToolUse) -> ToolResult:
    agent = Agent(ScriptedBackend(call(use), say("ok")), tools=tools)
    agent.send("go")
    validate_history(agent.messages)
    [result] = agent.messages[2].tool_results_in()
    return result


def test_unknown_tool_is_an_error_naming_the_available_tools() -> None:
    result = _one_round([echo, boom], ToolUse("x", "shell", {"cmd": "ls"}))
    assert result == ToolResult(
        "x", "unknown tool 'shell'; available tools: echo, boom", is_error=True
    )


def test_unparsable_arguments_are_an_error_showing_what_came() -> None:
    result = _one_round([echo], ToolUse("x", "echo", '{"text": "unterminated'))
    assert result.is_error
    assert result.content == (
        "invalid arguments for echo: arguments must be a JSON object, "
        'got string: {"text": "unterminated'
    )


def test_arguments_breaking_the_schema_are_an_error_listing_the_problems() -> None:
    result = _one_round([echo], ToolUse("x", "echo", {"txt": "hi"}))
    assert result.is_error
    assert result.content == (
        "invalid arguments for echo: text: required argument is missing; "
        "txt: unknown argument (known arguments: text)"
    )


def test_a_raised_exception_is_an_error_naming_it() -> None:
    result = _one_round([boom], ToolUse("x", "boom", {}))
    assert result == ToolResult("x", "ValueError: boom", is_error=True)


def test_a_bad_return_value_is_an_error() -> None:
    def number() -> int:
        """Returns the wrong type."""
        return 3

    result = _one_round([number], ToolUse("x", "number", {}))
    assert result.is_error and "returned int" in result.content


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ToolError, match="two tools are named 'echo'"):
        Agent(ScriptedBackend(), tools=[echo, Tool.from_function(echo)])


# -- step limit --------------------------------------------------------------------


def test_after_the_step_limit_the_model_is_asked_to_answer_without_tools() -> None:
    events: list[AgentEvent] = []
    backend = ScriptedBackend(
        call(ToolUse("c0", "echo", {"text": "0"})),
        call(ToolUse("c1", "echo", {"text": "1"})),
        say("here is what I found"),
    )
    agent = Agent(backend, tools=[echo], max_steps=2, on_event=events.append)
    response = agent.send("loop forever")
    assert response.message.text() == "here is what I found"
    assert [r.tool_choice for r in backend.requests] == [None, None, "none"]
    assert [t.name for t in backend.requests[2].tools] == ["echo"]
    assert StepLimitReached(2, wrapping_up=True) in events
    assert events.index(StepLimitReached(2)) < events.index(RequestStarted(3))
    assert agent.messages[-1].role == "assistant"
    validate_history(agent.messages)


def test_calls_made_despite_tool_choice_none_are_answered_not_run() -> None:
    ran: list[str] = []

    def track(text: str) -> str:
        """Track."""
        ran.append(text)
        return text

    backend = ScriptedBackend(
        call(ToolUse("c0", "track", {"text": "first"})),
        call(ToolUse("c1", "track", {"text": "second"})),
    )
    agent = Agent(backend, tools=[track], max_steps=1)
    agent.send("go")
    assert ran == ["first"]
    assert agent.messages[-1].tool_results_in() == [
        ToolResult("c1", "not run: this turn reached its limit of 1 tool rounds", is_error=True)
    ]
    validate_history(agent.messages)


def test_without_wrap_up_the_turn_stops_with_every_call_answered() -> None:
    events: list[AgentEvent] = []
    backend = ScriptedBackend(*(call(ToolUse(f"c{i}", "echo", {"text": str(i)})) for i in range(3)))
    agent = Agent(backend, tools=[echo], max_steps=3, wrap_up=False, on_event=events.append)
    response = agent.send("loop forever")
    assert response.stop_reason == "tool_use"
    assert len(backend.requests) == 3
    assert events[-1] == StepLimitReached(3, wrapping_up=False)
    assert agent.messages[-1].tool_results_in() == [ToolResult("c2", "2")]
    validate_history(agent.messages)


def test_the_answer_without_tools_gets_the_small_wrap_up_budget() -> None:
    backend = ScriptedBackend(call(ToolUse("c0", "echo", {"text": "0"})), say("done"))
    Agent(backend, tools=[echo], max_steps=1, max_tokens=4096).send("go")
    assert [r.max_tokens for r in backend.requests] == [4096, WRAP_UP_TOKENS]


def test_the_wrap_up_budget_never_exceeds_max_tokens() -> None:
    backend = ScriptedBackend(call(ToolUse("c0", "echo", {"text": "0"})), say("done"))
    Agent(backend, tools=[echo], max_steps=1, max_tokens=40).send("go")
    assert [r.max_tokens for r in backend.requests] == [40, 40]


def test_budgets_default_to_the_backend() -> None:
    local = ScriptedBackend()
    local.name = "local"
    assert (Agent(local).max_steps, Agent(local).max_tokens) == (LOCAL_MAX_STEPS, LOCAL_MAX_TOKENS)
    remote = Agent(ScriptedBackend())
    assert (remote.max_steps, remote.max_tokens) == (DEFAULT_MAX_STEPS, DEFAULT_MAX_TOKENS)
    assert Agent(local, max_steps=9, max_tokens=99).max_tokens == 99


def test_budgets_below_one_are_refused() -> None:
    with pytest.raises(CarryallError, match="max_tokens must be at least 1, got 0"):
        Agent(ScriptedBackend(), max_tokens=0)
    with pytest.raises(CarryallError, match="max_repeats must be at least 1, got 0"):
        Agent(ScriptedBackend(), max_repeats=0)


# -- repeated failures --------------------------------------------------------------


def test_the_same_failing_call_three_times_stops_the_turn() -> None:
    def list_dir(path: str) -> str:
        """Fails like a path that is not there."""
        raise FileNotFoundError(path)

    events: list[AgentEvent] = []
    bogus = {"path": "nowhere.png"}
    backend = ScriptedBackend(*(call(ToolUse(f"c{i}", "list_dir", bogus)) for i in range(20)))
    agent = Agent(backend, tools=[list_dir], max_steps=20, on_event=events.append)
    response = agent.send("list the files")
    assert len(backend.requests) == 3
    assert response.stop_reason == "tool_use"
    assert events[-1] == RepeatedCall(
        ToolUse("c2", "list_dir", bogus),
        ToolResult("c2", "FileNotFoundError: nowhere.png", is_error=True),
        3,
    )
    assert not any(isinstance(e, StepLimitReached) for e in events)
    assert agent.messages[-1].tool_results_in()[0].tool_use_id == "c2"
    validate_history(agent.messages)


def test_max_repeats_is_configurable_and_argument_order_does_not_matter() -> None:
    def two(a: str, b: str) -> str:
        """Fails."""
        raise ValueError("no")

    backend = ScriptedBackend(
        call(ToolUse("c0", "two", {"a": "1", "b": "2"})),
        call(ToolUse("c1", "two", {"b": "2", "a": "1"})),
    )
    events: list[AgentEvent] = []
    Agent(backend, tools=[two], max_repeats=2, on_event=events.append).send("go")
    assert len(backend.requests) == 2
    assert isinstance(events[-1], RepeatedCall) and events[-1].times == 2


def test_different_arguments_or_results_are_not_repeats() -> None:
    backend = ScriptedBackend(
        *(call(ToolUse(f"b{i}", "boom", {"n": i})) for i in range(3)),
        *(call(ToolUse(f"e{i}", "echo", {"text": str(i)})) for i in range(3)),
        say("done"),
    )
    events: list[AgentEvent] = []
    response = Agent(backend, tools=[boom, echo], on_event=events.append).send("go")
    assert response.message.text() == "done"
    assert not any(isinstance(e, RepeatedCall) for e in events)
    assert all(r.tool_choice is None for r in backend.requests)


def test_a_success_repeated_with_the_same_result_has_the_model_answer() -> None:
    same = {"text": "same"}
    backend = ScriptedBackend(
        call(ToolUse("e0", "echo", same)), call(ToolUse("e1", "echo", same)), say("it says same")
    )
    events: list[AgentEvent] = []
    response = Agent(backend, tools=[echo], on_event=events.append).send("go")
    assert response.message.text() == "it says same"
    assert [r.tool_choice for r in backend.requests] == [None, None, "none"]
    assert backend.requests[2].max_tokens == WRAP_UP_TOKENS
    assert RepeatedCall(ToolUse("e1", "echo", same), ToolResult("e1", "same"), 2) in events
    assert not any(isinstance(e, StepLimitReached) for e in events)
    validate_history(agent_messages := list(backend.requests[2].messages))
    assert agent_messages[-1].tool_results_in() == [ToolResult("e1", "same")]


def test_resume_carries_on_after_the_step_limit() -> None:
    backend = ScriptedBackend(call(ToolUse("c1", "echo", {"text": "x"})), say("finished"))
    agent = Agent(backend, tools=[echo], max_steps=1, wrap_up=False)
    agent.send("go")
    assert agent.resume().message.text() == "finished"
    assert backend.requests[1].messages == tuple(agent.messages[:3])


def test_pause_turn_is_continued_without_a_prompt() -> None:
    paused = Response(message=Message.assistant([Text("working")]), stop_reason="pause_turn")
    backend = ScriptedBackend(paused, say("done"))
    agent = Agent(backend)
    assert agent.send("go").message.text() == "done"
    assert backend.requests[1].messages[-1] == Message.assistant([Text("working")])


def test_resume_needs_a_history_ending_on_a_user_message() -> None:
    agent = Agent(ScriptedBackend(say("hi")))
    agent.send("hello")
    with pytest.raises(CarryallError, match="nothing to resume"):
        agent.resume()


def test_events_tell_the_story_of_a_turn() -> None:
    events: list[AgentEvent] = []
    agent = Agent(
        ScriptedBackend(call(ToolUse("c1", "echo", {"text": "x"})), say("ok")),
        tools=[echo],
        on_event=events.append,
    )
    agent.send("go")
    assert [type(e) for e in events] == [
        RequestStarted,
        ResponseReceived,
        ToolCallStarted,
        ToolCallFinished,
        RequestStarted,
        ResponseReceived,
    ]
    finished = events[3]
    assert isinstance(finished, ToolCallFinished)
    assert finished.result == ToolResult("c1", "x")


# -- failures leave the history whole -------------------------------------------------


def test_failed_first_request_leaves_the_history_as_before_send() -> None:
    backend = ScriptedBackend(say("one"), ProviderError("server went away", status=503))
    agent = Agent(backend)
    agent.send("first")
    before = list(agent.messages)
    with pytest.raises(ProviderError, match="server went away"):
        agent.send("second")
    assert agent.messages == before


def test_failed_later_request_keeps_the_completed_steps() -> None:
    backend = ScriptedBackend(
        call(ToolUse("c1", "echo", {"text": "x"})), ProviderError("overloaded"), say("back")
    )
    agent = Agent(backend, tools=[echo])
    with pytest.raises(ProviderError):
        agent.send("go")
    assert [m.role for m in agent.messages] == ["user", "assistant", "user"]
    validate_history(agent.messages)
    assert agent.resume().message.text() == "back"


def test_interrupted_request_leaves_the_history_as_before_send() -> None:
    agent = Agent(ScriptedBackend(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        agent.send("hi")
    assert agent.messages == []


def test_interrupt_while_tools_run_answers_every_call() -> None:
    release = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def interrupt() -> str:
        """Presses Ctrl-C, then hangs."""
        signal.pthread_kill(main, signal.SIGINT)
        release.wait(30)
        return "never seen"

    backend = ScriptedBackend(
        call(ToolUse("i", "interrupt", {}), ToolUse("e", "echo", {"text": "fine"}))
    )
    agent = Agent(backend, tools=[interrupt, echo])
    try:
        with pytest.raises(KeyboardInterrupt):
            agent.send("go")
    finally:
        release.set()
    validate_history(agent.messages)
    results = {r.tool_use_id: r for r in agent.messages[-1].tool_results_in()}
    assert results["i"] == ToolResult("i", "interrupted before the tool finished", is_error=True)
    assert results["e"].content in ("fine", "interrupted before the tool finished")


def test_empty_assistant_message_is_not_kept() -> None:
    empty = Response(message=Message.assistant([]), stop_reason="end_turn")
    agent = Agent(ScriptedBackend(empty))
    agent.send("hi")
    assert agent.messages == [Message.user("hi")]


def test_a_broken_history_fails_before_any_request_and_is_left_alone() -> None:
    dangling = [Message.user("hi"), Message.assistant([ToolUse("c1", "echo", {"text": "x"})])]
    backend = ScriptedBackend(say("never"))

    def complete(request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        validate_history(request.messages)
        return ScriptedBackend.complete(backend, request, on_text)

    backend.complete = complete  # type: ignore[method-assign]
    agent = Agent(backend, messages=dangling)
    with pytest.raises(CarryallError, match="message 2: tool call"):
        agent.send("next")
    assert agent.messages == dangling


# -- recording ------------------------------------------------------------------------


def test_each_turn_is_recorded_against_what_was_last_recorded() -> None:
    session = Recorder()
    agent = Agent(ScriptedBackend(say("a"), say("b")), session=session)
    agent.send("one")
    first = list(agent.messages)
    agent.send("two")
    assert session.calls == [([], first), (first, list(agent.messages))]


def test_an_edit_between_turns_is_recorded_as_starting_from_the_old_history() -> None:
    session = Recorder()
    agent = Agent(ScriptedBackend(say("a"), say("b")), session=session)
    agent.send("one")
    recorded = list(agent.messages)
    agent.messages.clear()
    agent.send("two")
    assert session.calls[1] == (recorded, [Message.user("two"), Message.assistant([Text("b")])])


def test_a_failed_turn_records_the_whole_messages_it_left() -> None:
    session = Recorder()
    agent = Agent(
        ScriptedBackend(call(ToolUse("c1", "echo", {"text": "x"})), ProviderError("gone")),
        tools=[echo],
        session=session,
    )
    with pytest.raises(ProviderError):
        agent.send("go")
    assert session.calls == [([], list(agent.messages))]
    assert len(agent.messages) == 3


def test_a_turn_that_changed_nothing_records_nothing() -> None:
    session = Recorder()
    agent = Agent(ScriptedBackend(ProviderError("down")), session=session)
    with pytest.raises(ProviderError):
        agent.send("go")
    assert session.calls == []


def test_the_sessions_history_is_the_starting_point() -> None:
    earlier = [Message.user("before"), Message.assistant([Text("yes")])]
    session = Recorder(earlier)
    backend = ScriptedBackend(say("again"))
    agent = Agent(backend, session=session)
    agent.send("more")
    assert backend.requests[0].messages[:2] == tuple(earlier)
    assert session.calls[0][0] == earlier


def test_a_recording_failure_rides_on_the_turns_own_error() -> None:
    class Broken(Recorder):
        def record(self, started_from: Sequence[Message], left_behind: Sequence[Message]) -> str:
            raise OSError("disk full")

    agent = Agent(
        ScriptedBackend(call(ToolUse("c1", "echo", {"text": "x"})), ProviderError("gone")),
        tools=[echo],
        session=Broken(),
    )
    with pytest.raises(ProviderError) as info:
        agent.send("go")
    assert any("disk full" in note for note in info.value.__notes__)


def test_every_round_is_recorded_as_it_lands() -> None:
    lengths: list[int] = []

    class Log(Recorder):
        def record(self, started_from: Sequence[Message], left_behind: Sequence[Message]) -> str:
            lengths.append(len(left_behind))
            return "append"

    agent = Agent(
        ScriptedBackend(
            call(ToolUse("c1", "echo", {"text": "a"})),
            call(ToolUse("c2", "echo", {"text": "b"})),
            ProviderError("gone"),
        ),
        tools=[echo],
        session=Log(),
    )
    with pytest.raises(ProviderError):
        agent.send("go")
    # Both whole rounds were recorded before the third request failed.
    assert lengths[:2] == [3, 5]
    assert len(agent.messages) == 5


def test_an_answer_budget_larger_than_the_context_gives_way_before_the_history() -> None:
    # `--max-tokens 4000` on a 4,096-token context: the answer budget shrinks
    # to what the window leaves; nothing of the history is cut for room the
    # answer could never use, and the request is sent instead of refused.
    backend = ScriptedBackend(say("ok"))
    history = [Message.user("an earlier question " * 20), Message.assistant([Text("an answer")])]
    agent = Agent(backend, tools=[], messages=history, max_tokens=4000, context_window=4096)
    agent.send("Write a very long story")
    (request,) = backend.requests
    assert MIN_ANSWER_TOKENS <= request.max_tokens < 4000
    assert list(request.messages[:2]) == history


def test_a_context_too_small_even_for_the_least_answer_is_refused_before_sending() -> None:
    backend = ScriptedBackend(say("ok"))
    agent = Agent(backend, tools=[], max_tokens=4000, context_window=MIN_ANSWER_TOKENS)
    with pytest.raises(HistoryError, match="free in the context"):
        agent.send("hi")
    assert backend.requests == []


def test_a_servers_context_overflow_is_fitted_again_by_its_own_count() -> None:
    # The estimate thinks the history fits; the server counts twice as many
    # tokens (a listing full of digits) and says so. The loop fits again by
    # the server's measure and the turn goes on, instead of failing.
    listing = "file.py (12345 bytes)\n" * 300
    history = [
        Message.user("List the files."),
        Message.assistant([ToolUse("c1", "list_dir", {"path": "."})]),
        Message.tool_results([ToolResult("c1", listing)]),
        Message.assistant([Text("Those are the files.")]),
    ]

    def server(request: Request) -> Response:
        counted = 2 * sum(len(m.text()) + len(str(m.tool_results_in())) for m in request.messages)
        counted //= 3
        if counted > 3000:
            raise ProviderError(
                f"request ({counted} tokens) exceeds the available context size (3000 tokens)",
                status=400,
                kind="exceed_context_size_error",
            )
        return say("fitted and answered")

    backend = ScriptedBackend(server, server)
    agent = Agent(backend, tools=[], messages=history, max_tokens=64, context_window=3000)
    response = agent.send("And now?")
    assert response.message.text() == "fitted and answered"
    first, second = backend.requests

    def outputs(request: Request) -> list[str]:
        return [r.content for m in request.messages for r in m.tool_results_in()]

    assert outputs(first) == [listing] and outputs(second) != [listing]
    assert agent.token_scale > 1.0
    validate_history(agent.messages)


def test_a_context_overflow_without_anything_new_to_learn_is_raised() -> None:
    error = ProviderError(
        "request (10 tokens) exceeds the available context size (4096 tokens)", status=400
    )
    backend = ScriptedBackend(error)
    agent = Agent(backend, tools=[], context_window=4096)
    with pytest.raises(ProviderError, match="exceeds the available context"):
        agent.send("hi")
    assert len(backend.requests) == 1 and agent.messages == []


def test_a_hosted_models_context_is_learnt_from_its_overflow_error() -> None:
    error = ProviderError("prompt is too long: 250000 tokens > 200000 maximum", status=400)
    history = [Message.user("old " * 2000), Message.assistant([Text("ok")])]
    backend = ScriptedBackend(error, say("ok"))
    agent = Agent(backend, tools=[], messages=history)
    assert agent.context_window is None
    agent.send("hi")
    assert agent.context_window == 200000 and len(backend.requests) == 2


def test_the_same_call_twice_in_a_round_answers_the_second_by_naming_the_first() -> None:
    long_text = "a long output " * 40
    same = {"text": long_text}
    backend = ScriptedBackend(
        call(ToolUse("e0", "echo", same), ToolUse("e1", "echo", same)), say("done")
    )
    events: list[AgentEvent] = []
    agent = Agent(backend, tools=[echo], on_event=events.append)
    agent.send("go")
    results = agent.messages[2].tool_results_in()
    assert results[0] == ToolResult("e0", long_text)
    assert results[1].tool_use_id == "e1" and "same output as for e0" in results[1].content
    # It is still seen as the same call made twice: the model is asked to answer.
    assert [e.times for e in events if isinstance(e, RepeatedCall)] == [2]
    assert backend.requests[-1].tool_choice == "none"


def test_identical_calls_in_a_round_run_once_are_shown_once_and_answer_every_id() -> None:
    ran: list[str] = []

    def list_things(path: str) -> str:
        """List the things at path."""
        ran.append(path)
        return "a.txt b.txt"

    same = {"path": "."}
    uses = [ToolUse(f"c{i}", "list_things", same) for i in range(4)]
    backend = ScriptedBackend(call(*uses, ToolUse("c4", "list_things", {"path": "x"})), say("ok"))
    events: list[AgentEvent] = []
    agent = Agent(backend, tools=[list_things], on_event=events.append)
    agent.send("go")
    assert sorted(ran) == [".", "x"]
    started = [e.call.id for e in events if isinstance(e, ToolCallStarted)]
    finished = [e.call.id for e in events if isinstance(e, ToolCallFinished)]
    assert started == finished == ["c0", "c4"]
    results = agent.messages[2].tool_results_in()
    assert [r.tool_use_id for r in results] == ["c0", "c1", "c2", "c3", "c4"]
    # The model reads the short listing once, not four times.
    assert [r.content.count("a.txt b.txt") for r in results] == [1, 0, 0, 0, 1]


def test_a_hosted_models_context_comes_from_the_table_and_a_given_one_wins() -> None:
    assert Agent(ScriptedBackend(model="claude-haiku-4-5")).context_window == 200_000
    assert Agent(ScriptedBackend(model="scripted-1")).context_window is None
    given = Agent(ScriptedBackend(model="claude-haiku-4-5"), context_window=50_000)
    assert given.context_window == 50_000


# -- an answer that would break the history ------------------------------------------


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (
            (ToolUse("dup", "echo", {"text": "a"}), ToolUse("dup", "echo", {"text": "b"})),
            "tool call id 'dup' is used twice",
        ),
        ((ToolUse("", "echo", {"text": "a"}),), "empty id"),
        ((Text("look"), Image.from_bytes("image/png", PNG)), "image may only ride a user message"),
    ],
    ids=["duplicate-call-id", "empty-call-id", "assistant-image"],
)
def test_an_answer_that_would_break_validation_is_refused_and_never_appended(
    answer: tuple[Any, ...], why: str
) -> None:
    # The decoder stubbed: a backend handing back what no real decoder lets
    # through (`answer_message` refuses it), so only the agent's guard stands.
    broken = Response(message=Message("assistant", answer), stop_reason="tool_use")
    ran: list[str] = []

    def echo(text: str) -> str:
        """Echo the text back."""
        ran.append(text)
        return text

    session = Recorder()
    agent = Agent(ScriptedBackend(say("one"), broken, say("fine")), tools=[echo], session=session)
    agent.send("first")
    kept = list(agent.messages)
    with pytest.raises(ProviderError, match="answer was refused") as caught:
        agent.send("second")
    assert why in str(caught.value)
    assert agent.messages == kept  # the prompt withdrawn, nothing of the answer kept
    assert ran == []  # no call of the broken answer ran
    assert session.calls[-1][1] == kept
    # The session can go on: the next turn sends a history that validates.
    agent.send("third")
    validate_history(agent.messages)
    assert agent.messages[-1].text() == "fine"


def test_a_broken_answer_later_in_a_turn_keeps_the_completed_rounds() -> None:
    duplicate = Response(
        message=Message("assistant", (ToolUse("c", "echo", {"text": "x"}),) * 2),
        stop_reason="tool_use",
    )
    agent = Agent(
        ScriptedBackend(call(ToolUse("c1", "echo", {"text": "x"})), duplicate, say("back")),
        tools=[echo],
    )
    with pytest.raises(ProviderError, match="used twice"):
        agent.send("go")
    assert [m.role for m in agent.messages] == ["user", "assistant", "user"]
    validate_history(agent.messages)
    assert agent.resume().message.text() == "back"

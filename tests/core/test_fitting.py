"""Fitting shapes the request only, and each message is estimated once per conversation."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from carryall.agent import Agent, ContextFitted
from carryall.blocks import Message, Text, ToolResult, ToolUse, validate_history
from carryall.context import FIT_MARK, TokenEstimates, estimate_tokens, fit_history
from carryall.providers import Request, Response


class ScriptedBackend:
    """A backend double that answers every request with the same text and keeps the requests."""

    name = "scripted"
    model = "scripted-1"
    context_window: int | None = None

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        self.requests.append(request)
        return Response(message=Message.assistant([Text("noted")]), stop_reason="end_turn")


class Recorder:
    """A session double that keeps what each record started from and left behind."""

    def __init__(self, history: Sequence[Message]) -> None:
        self.history = list(history)
        self.calls: list[tuple[list[Message], list[Message]]] = []

    def messages(self) -> list[Message]:
        return list(self.history)

    def record(self, started_from: Sequence[Message], left_behind: Sequence[Message]) -> str:
        self.calls.append((list(started_from), list(left_behind)))
        return "append"


def _rounds(count: int, output: str) -> list[Message]:
    history = [Message.user("Read every file.")]
    for n in range(count):
        history += [
            Message.assistant([ToolUse(f"call_{n}", "read_file", {"path": f"f{n}.txt"})]),
            Message.tool_results([ToolResult(f"call_{n}", output)]),
        ]
    return [*history, Message.assistant([Text("Read them all.")])]


def test_a_fitted_step_sends_the_cut_and_the_session_keeps_the_whole_history() -> None:
    history = _rounds(30, "line of a long file\n" * 40)
    session = Recorder(history)
    backend = ScriptedBackend()
    events: list[object] = []
    window = estimate_tokens(history) // 2 + 64
    agent = Agent(backend, session=session, context_window=window, max_tokens=64)
    agent.on_event = events.append
    agent.send("What did they say?")
    agent.send("And the first one?")
    assert len(backend.requests) == 2
    fitted = [e for e in events if isinstance(e, ContextFitted)]
    # The second request goes on from the first one's cut: no second cut.
    assert len(fitted) == 1
    first, second = (list(r.messages) for r in backend.requests)
    assert second[: len(first)] == first and len(second) == len(first) + 2
    assert first[-1].text().endswith("What did they say?")
    assert any(m.text().startswith(FIT_MARK) for m in first)
    validate_history(second)
    # A turn that no longer fits beside the last cut is fitted again.
    agent.send("Say it again: " + "and again " * (window // 8))
    assert len([e for e in events if isinstance(e, ContextFitted)]) == 2
    validate_history(backend.requests[2].messages)
    # Nothing marked as cut reaches the history or the session: every record
    # goes on from the last one (an append, never a rewrite).
    assert agent.messages[: len(history)] == history
    assert not any(FIT_MARK in m.text() for m in agent.messages)
    recorded = history
    for started_from, left_behind in session.calls:
        assert started_from == recorded and left_behind[: len(recorded)] == recorded
        recorded = left_behind
    assert recorded == agent.messages


def test_kept_estimates_of_a_growing_and_edited_history_match_a_whole_estimate() -> None:
    estimates = TokenEstimates()
    history = _rounds(5, "x" * 300)
    for _ in range(3):
        history += _rounds(2, "y" * 100)
        assert estimate_tokens(history, estimates=estimates) == estimate_tokens(history)
    edited = [*history[:3], Message.user("a different word"), *history[4:]]
    assert estimate_tokens(edited, estimates=estimates) == estimate_tokens(edited)
    shorter = edited[5:]
    assert estimate_tokens(shorter, scale=1.3, estimates=estimates) == estimate_tokens(
        shorter, scale=1.3
    )


def test_fitting_with_kept_estimates_cuts_what_fitting_without_them_cuts() -> None:
    estimates = TokenEstimates()
    history = _rounds(40, "z" * 600)
    for fraction in (0.9, 0.5, 0.1):
        budget = int(estimate_tokens(history) * fraction)
        assert fit_history(history, budget=budget, estimates=estimates) == fit_history(
            history, budget=budget
        )


def test_an_edit_between_turns_sends_the_edited_history_not_the_last_cut() -> None:
    history = _rounds(30, "line of a long file\n" * 40)
    backend = ScriptedBackend()
    window = estimate_tokens(history) // 2 + 64
    agent = Agent(backend, messages=history, context_window=window, max_tokens=64)
    agent.send("What did they say?")
    assert any(m.text().startswith(FIT_MARK) for m in backend.requests[0].messages)
    agent.messages[:] = history[:3]  # a person took the history back to its first round
    agent.messages.append(Message.assistant([Text("Read one.")]))
    agent.send("Only that one?")
    assert list(backend.requests[1].messages[:4]) == agent.messages[:4]
    assert not any(FIT_MARK in m.text() for m in backend.requests[1].messages)

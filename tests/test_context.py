"""Fitting a history into a context window: what is cut, in which order, and what never is."""

from __future__ import annotations

import pytest

from carryall.blocks import Image, Message, Text, ToolResult, ToolUse, validate_history
from carryall.context import FIT_MARK, estimate_tokens, fit_history
from carryall.errors import HistoryError

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _round(n: int, output: str, *, image: bool = False) -> list[Message]:
    images = [Image.from_bytes("image/png", PNG, source=f"shot{n}.png")] if image else []
    return [
        Message.assistant([ToolUse(f"call_{n}", "read_file", {"path": f"f{n}.txt"})]),
        Message.tool_results([ToolResult(f"call_{n}", output)], images),
    ]


def _history(rounds: int, size: int) -> list[Message]:
    history = [Message.user("Read every file.")]
    for n in range(rounds):
        history += _round(n, "x" * size, image=n == 0)
    return history


def test_a_history_that_fits_is_returned_as_it_is() -> None:
    history = _history(2, 30)
    fitted = fit_history(history, budget=10_000)
    assert fitted.messages == history and not fitted.changed and fitted.summary is None


def test_oldest_tool_outputs_and_images_go_first_and_the_newest_round_stays() -> None:
    history = _history(4, 3000)
    budget = estimate_tokens(history) - 1500
    fitted = fit_history(history, budget=budget)
    validate_history(fitted.messages)
    assert fitted.tokens_after <= budget < fitted.tokens_before
    assert fitted.shortened_outputs >= 1 and fitted.dropped_images == 1
    assert fitted.dropped_messages == 0
    first = fitted.messages[2].tool_results_in()[0]
    assert first.content.startswith(FIT_MARK) and "3000 characters" in first.content
    assert fitted.messages[-2:] == history[-2:]
    assert fitted.messages[0].text().startswith(FIT_MARK)
    assert fitted.messages[0].text().endswith("Read every file.")


def test_whole_rounds_go_with_their_results_and_are_summarised() -> None:
    history = _history(8, 3000)
    fitted = fit_history(history, budget=1500)
    validate_history(fitted.messages)  # no call orphaned from its result
    assert fitted.dropped_messages >= 2 and fitted.dropped_messages % 2 == 0
    assert fitted.messages[-2:] == history[-2:]
    assert fitted.summary is not None and "read_file x" in fitted.summary
    assert fitted.messages[0].content[0] == Text(fitted.summary + "\n")


def test_earlier_turns_go_before_the_current_turn_is_touched() -> None:
    old = [
        Message.user("An old question " * 200),
        Message.assistant([Text("An old answer " * 200)]),
    ]
    history = [*old, *_history(1, 50)]
    fitted = fit_history(history, budget=estimate_tokens(history[2:]) + 60)
    validate_history(fitted.messages)
    assert fitted.dropped_messages == 2
    assert fitted.messages[1:] == history[3:]


def test_a_prompt_too_long_alone_is_refused_before_sending() -> None:
    with pytest.raises(HistoryError, match="only 50 are free"):
        fit_history([Message.user("word " * 2000)], budget=50)

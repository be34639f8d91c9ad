"""Fitting a history into a context window: what is cut, in which order, and what never is."""

from __future__ import annotations

import pytest

from carryall.blocks import Image, Message, Text, ToolResult, ToolUse, validate_history
from carryall.context import (
    FIT_MARK,
    MIN_ANSWER_TOKENS,
    ContextFitter,
    context_overflow,
    estimate_tokens,
    fit_history,
    known_context_window,
)
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


def test_the_newest_rounds_outputs_are_cut_to_their_beginning_as_the_last_resort() -> None:
    # A wrap-up request whose newest round alone overflows (three listings of
    # one folder): the outputs are cut, the model keeps their first part.
    listing = "".join(f"file_{n}.py ({n * 97} bytes)\n" for n in range(400))
    history = [
        Message.user("List the files."),
        Message.assistant([ToolUse(f"c{n}", "list_dir", {"path": f"d{n}"}) for n in range(3)]),
        Message.tool_results([ToolResult(f"c{n}", listing) for n in range(3)]),
    ]
    budget = estimate_tokens(history) // 3
    fitted = fit_history(history, budget=budget)
    validate_history(fitted.messages)
    assert fitted.tokens_after <= budget and fitted.cut_outputs >= 1
    assert fitted.dropped_messages == 0
    results = fitted.messages[-1].tool_results_in()
    assert [r.tool_use_id for r in results] == ["c0", "c1", "c2"]
    cut = [r for r in results if FIT_MARK in r.content]
    assert cut and all(r.content.startswith("file_0.py (0 bytes)\n") for r in cut)
    assert f"of {len(listing)} characters" in cut[0].content
    assert fitted.summary is not None and "newest tool outputs" in fitted.summary


def test_fitting_a_turn_again_keeps_one_marked_line_that_counts_everything() -> None:
    history = _history(8, 3000)
    first = fit_history(history, budget=estimate_tokens(history) - 3000)
    again = fit_history([*first.messages, *_round(9, "y" * 3000)], budget=first.tokens_after)
    prompt = again.messages[0]
    marked = [b for b in prompt.content if isinstance(b, Text) and b.text.startswith(FIT_MARK)]
    assert len(marked) == 1 and prompt.text().endswith("Read every file.")
    total = first.shortened_outputs + again.shortened_outputs
    assert f"replaced {total} older tool outputs" in marked[0].text
    assert "dropped 1 older images" in marked[0].text  # counted once, from the first fit
    # A third fit that changes nothing more keeps the line as it was counted.
    third = fit_history(again.messages, budget=again.tokens_after)
    assert not third.changed


def test_a_scale_fits_by_the_servers_own_count() -> None:
    history = _history(4, 3000)
    budget = estimate_tokens(history) + 10
    assert not fit_history(history, budget=budget).changed
    scaled = fit_history(history, budget=budget, scale=1.5)
    assert scaled.changed and scaled.tokens_after <= budget
    assert estimate_tokens(history, scale=1.5) == scaled.tokens_before


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "request (4341 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
            (4341, 4096),
        ),
        ("prompt is too long: 210012 tokens > 200000 maximum", (210012, 200000)),
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9001 tokens. Please reduce the length of the messages.",
            (9001, 8192),
        ),
        (
            "This model's maximum context length is 4097 tokens, however you requested "
            "5000 tokens (4500 in the messages, 500 in the completion).",
            (4500, 4097),
        ),
        ("rate limit reached for requests", None),
    ],
)
def test_context_overflow_reads_the_servers_count(
    message: str, expected: tuple[int, int] | None
) -> None:
    assert context_overflow(message) == expected


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("claude-sonnet-4-5", 200_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1-nano", 1_047_576),
        ("openai/gpt-4o", 128_000),
        ("gemini-2.5-flash", 1_048_576),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", None),
        (None, None),
    ],
)
def test_hosted_models_context_windows_are_known(model: str | None, tokens: int | None) -> None:
    assert known_context_window(model) == tokens


def test_the_fitter_keeps_its_cut_for_the_requests_after_it_and_cuts_anew_after_an_edit() -> None:
    history = _history(30, 2000)
    fitter = ContextFitter(estimate_tokens(history) // 2)
    first = fitter.fit(history, max_tokens=256, system=None, tools=())
    assert first.fitted is not None and first.fitted.changed
    # A step later: the same cut, with what was said since after it.
    grown = [*history, *_round(30, "short")]
    second = fitter.fit(grown, max_tokens=256, system=None, tools=())
    assert second.fitted is None
    assert second.messages == [*first.messages, *grown[len(history) :]]
    # An edit between turns: the history no longer goes on from the cut.
    edited = [Message.user("Read every file, please."), *grown[1:]]
    third = fitter.fit(edited, max_tokens=256, system=None, tools=())
    assert third.fitted is not None and third.messages[0] != first.messages[0]


def test_the_fitter_sends_the_history_whole_until_a_server_names_its_context() -> None:
    history = _history(30, 2000)
    fitter = ContextFitter(None)
    whole = fitter.fit(history, max_tokens=256, system=None, tools=())
    assert whole.messages is history and whole.fitted is None
    counted = 2 * (estimate_tokens(history) + 64)  # the server counts twice the estimate
    error = f"request ({counted} tokens) exceeds the available context size (4096 tokens)"
    assert fitter.learn(error, history, None, ())
    assert fitter.context_window == 4096 and fitter.token_scale > 2.0
    assert not fitter.learn(error, history, None, ())  # nothing new: no second try
    assert not fitter.learn("rate limited", history, None, ())
    assert fitter.fit(history, max_tokens=256, system=None, tools=()).fitted is not None


def test_an_answer_budget_over_the_room_gives_way_before_the_history_is_cut() -> None:
    history = _history(2, 100)
    need = estimate_tokens(history)
    fitter = ContextFitter(need + 64 + MIN_ANSWER_TOKENS + 100)
    fit = fitter.fit(history, max_tokens=10_000, system=None, tools=())
    assert fit.fitted is None and fit.messages is history
    assert MIN_ANSWER_TOKENS <= fit.max_tokens < 10_000

"""Fitting a history into a model's context window before it is sent.

A pure function over messages: `fit_history` estimates the request's size
and, when it would not fit beside the output budget, cuts in the order
that costs the model least. First the oldest tool outputs and images are
replaced by a marked line saying what was there (the model keeps the call
and knows it was answered); then the oldest whole parts go: earlier turns
entire, then the current turn's oldest tool rounds, each call always with
its result, so no call is ever orphaned. The newest round and the turn's
prompt are never cut. What went is summarised in one marked line at the
head of the turn's prompt. A history that still does not fit is a
`HistoryError`: a request that would overflow is never sent.

The size is an estimate (the JSON form's characters over `CHARS_PER_TOKEN`,
which is cautious for the English, code and JSON a tool-using agent
carries), because the exact count needs the model's tokenizer and a round
trip; a server that counts more than the estimate still answers its own
`exceed_context_size` error rather than a silent cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from carryall.blocks import Block, Image, Message, Text, ToolResult
from carryall.errors import HistoryError

__all__ = ["CHARS_PER_TOKEN", "FIT_MARK", "Fitted", "estimate_tokens", "fit_history"]

CHARS_PER_TOKEN: Final = 3
"""Characters of JSON counted as one token: fewer than the 4 or so of English
text, so the estimate errs towards cutting early rather than overflowing."""

FIT_MARK: Final = "[carryall: context fitted]"
"""How every line this module writes into a history begins, so a reader (or
a person reading the session) can tell it from what was said."""

_PER_MESSAGE: Final = 8
"""Tokens a chat template adds around each message (role markers, separators)."""


@dataclass(frozen=True)
class Fitted:
    """A history fitted to a context, and what was cut to fit it.

    `messages` is the history to send (the input itself when nothing was
    cut); `summary` is the marked line added to it, None when nothing was.
    """

    messages: list[Message]
    tokens_before: int
    tokens_after: int
    shortened_outputs: int = 0
    dropped_images: int = 0
    dropped_messages: int = 0
    summary: str | None = None

    @property
    def changed(self) -> bool:
        """Something was cut."""
        return self.summary is not None


def estimate_tokens(messages: Sequence[Message]) -> int:
    """About how many tokens `messages` take in a prompt (cautiously rounded up)."""
    encode = msgspec.json.encode
    return sum(len(encode(m)) // CHARS_PER_TOKEN + _PER_MESSAGE for m in messages)


def fit_history(messages: Sequence[Message], *, budget: int) -> Fitted:
    """Fit `messages` into `budget` tokens (the context less the fixed part and the output).

    Raises `HistoryError` when even the turn's prompt and its newest round
    alone do not fit.
    """
    history = list(messages)
    before = estimate_tokens(history)
    if before <= budget:
        return Fitted(history, before, before)
    prompt = _turn_prompt(history)
    # The newest round (the last two messages) and the prompt are the model's
    # current work: never cut.
    protected_from = max(prompt + 1, len(history) - 2)
    shortened = images = 0
    for index in range(prompt + 1, protected_from):
        if estimate_tokens(history) <= budget:
            break
        message = history[index]
        content, cut_outputs, cut_images = _shorten(message)
        if cut_outputs or cut_images:
            history[index] = Message(message.role, content)
            shortened += cut_outputs
            images += cut_images
    # Earlier turns' tool outputs are older still: shorten them first too.
    for index in range(prompt):
        if estimate_tokens(history) <= budget:
            break
        message = history[index]
        content, cut_outputs, cut_images = _shorten(message)
        if cut_outputs or cut_images:
            history[index] = Message(message.role, content)
            shortened += cut_outputs
            images += cut_images
    dropped: list[Message] = []
    while estimate_tokens(history) + _summary_tokens() > budget:
        span = _oldest_span(history, _turn_prompt(history))
        if span is None:
            break
        start, end = span
        dropped.extend(history[start:end])
        del history[start:end]
    summary = _summary(budget, shortened, images, dropped)
    prompt = _turn_prompt(history)
    history[prompt] = Message("user", (Text(summary + "\n"), *history[prompt].content))
    after = estimate_tokens(history)
    if after > budget:
        raise HistoryError(
            prompt,
            f"the history needs about {after} tokens but only {budget} are free in the "
            "context, even with every older part cut; the newest round and the turn's "
            "prompt alone are too long (shorten the prompt, or use a model with a larger context)",
        )
    return Fitted(
        history,
        before,
        after,
        shortened_outputs=shortened,
        dropped_images=images,
        dropped_messages=len(dropped),
        summary=summary,
    )


def _turn_prompt(history: Sequence[Message]) -> int:
    """The index of the current turn's prompt: the last user message that answers no call."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "user" and not message.tool_results_in():
            return index
    # A history that is all tool rounds: its first message stands in.
    return 0


def _shorten(message: Message) -> tuple[tuple[Block, ...], int, int]:
    """The message's blocks with tool outputs marked as removed and images dropped."""
    content: list[Block] = []
    outputs = images = 0
    for block in message.content:
        if isinstance(block, Image):
            images += 1
            continue
        if isinstance(block, ToolResult) and not block.content.startswith(FIT_MARK):
            outputs += 1
            note = f"{FIT_MARK} tool output removed ({len(block.content)} characters)"
            block = msgspec.structs.replace(block, content=note)
        content.append(block)
    return tuple(content), outputs, images


def _oldest_span(history: Sequence[Message], prompt: int) -> tuple[int, int] | None:
    """The oldest part that can go whole: an earlier turn, else the turn's oldest round."""
    if prompt > 0:
        # Everything before the turn's prompt: whole turns, calls with results.
        # Drop the oldest turn only: from the start to the next plain prompt.
        for index in range(1, prompt + 1):
            message = history[index]
            if message.role == "user" and not message.tool_results_in():
                return 0, index
    # Within the turn: an assistant message with calls and the results after it,
    # never the newest round.
    start = prompt + 1
    if (
        start + 1 < len(history) - 2
        and history[start].tool_uses()
        and history[start + 1].tool_results_in()
    ):
        return start, start + 2
    return None


def _summary_tokens() -> int:
    return 80 // CHARS_PER_TOKEN + 40


def _summary(budget: int, shortened: int, images: int, dropped: Sequence[Message]) -> str:
    parts = []
    if dropped:
        calls: dict[str, int] = {}
        for message in dropped:
            for call in message.tool_uses():
                calls[call.name] = calls.get(call.name, 0) + 1
        named = ", ".join(f"{name} x{count}" for name, count in calls.items())
        parts.append(
            f"removed the {len(dropped)} oldest messages"
            + (f" (tool calls: {named})" if named else "")
        )
    if shortened:
        parts.append(f"replaced {shortened} older tool outputs by a note")
    if images:
        parts.append(f"dropped {images} older images")
    if not parts:
        parts.append("nothing older could be removed")
    return f"{FIT_MARK} to fit {budget} tokens, " + "; ".join(parts) + "."

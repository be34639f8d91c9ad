"""Fitting a history into a model's context window before it is sent.

A pure function over messages: `fit_history` estimates the request's size
and, when it would not fit beside the output budget, cuts in the order
that costs the model least. First the oldest tool outputs and images are
replaced by a marked line saying what was there (the model keeps the call
and knows it was answered); then the oldest whole parts go: earlier turns
entire, then the current turn's oldest tool rounds, each call always with
its result, so no call is ever orphaned. The newest round and the turn's
prompt are never dropped; as a last resort the newest round's longest
outputs are cut to their beginning, so the model can still answer from
what it asked for. What went is summarised in one marked line at the head
of the turn's prompt; fitting the same turn again replaces that line with
one that counts everything cut so far (the line never stacks). A history
that still does not fit is a `HistoryError`: a request that would overflow
is never sent.

The size is an estimate (the JSON form's characters over `CHARS_PER_TOKEN`,
which is cautious for the English, code and JSON a tool-using agent
carries), because the exact count needs the model's tokenizer and a round
trip. A server that counts more than the estimate answers its own
context error rather than a silent cut; `context_overflow` reads the
server's own count from that error, and the caller fits again with
`scale`, the ratio of the server's count to the estimate (digits, for one,
are a token each for many tokenizers: a directory listing with file sizes
runs at about 2 characters a token).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

import msgspec

from carryall.blocks import Block, Image, Message, Text, ToolResult, _shared_start
from carryall.errors import HistoryError

__all__ = [
    "CHARS_PER_TOKEN",
    "FIT_MARK",
    "FIT_SLACK",
    "KNOWN_CONTEXT_WINDOWS",
    "MIN_ANSWER_TOKENS",
    "ContextFitter",
    "Fit",
    "Fitted",
    "TokenEstimates",
    "context_overflow",
    "estimate_fixed_tokens",
    "estimate_tokens",
    "fit_history",
    "known_context_window",
]

CHARS_PER_TOKEN: Final = 3
"""Characters of JSON counted as one token: fewer than the 4 or so of English
text, so the estimate errs towards cutting early rather than overflowing."""

FIT_MARK: Final = "[carryall: context fitted]"
"""How every line this module writes into a history begins, so a reader (or
a person reading the session) can tell it from what was said."""

KNOWN_CONTEXT_WINDOWS: Final[tuple[tuple[str, int], ...]] = (
    # The providers' published input limits for their hosted models, by the
    # model name's start; the first match wins, so a longer prefix comes
    # first. A model not here has no known limit until a server names its
    # own in an overflow error (`context_overflow`), or the config's
    # `context_window` says it.
    ("claude-", 200_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("gemini-", 1_048_576),
)
"""Context windows in tokens of hosted models, as `(model name prefix, tokens)`."""

MIN_ANSWER_TOKENS: Final = 256
"""The least answer budget a request keeps when the context is tight (`ContextFitter`)."""

FIT_SLACK: Final = 0.05
"""The share of the history's room a fit leaves free, so the next steps fit without a new cut."""

_PER_MESSAGE: Final = 8
"""Tokens a chat template adds around each message (role markers, separators)."""

_KEEP_AT_LEAST: Final = 200
"""Characters of a newest-round output kept when it must be cut to fit."""

_OVERFLOWS: Final = (
    # llama-server: "request (4341 tokens) exceeds the available context size (4096 tokens)"
    re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"),
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"),
)
_OPENAI_OVERFLOW: Final = (
    # OpenAI: "This model's maximum context length is 8192 tokens. However, your
    # messages resulted in 8500 tokens." (or "... you requested 9000 tokens (8500
    # in the messages, 500 in the completion)")
    re.compile(r"maximum context length is (\d+) tokens"),
    re.compile(r"resulted in (\d+) tokens|\((\d+) in the messages"),
)


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
    cut_outputs: int = 0
    summary: str | None = None

    @property
    def changed(self) -> bool:
        """Something was cut."""
        return self.summary is not None


def estimate_tokens(
    messages: Sequence[Message], *, scale: float = 1.0, estimates: TokenEstimates | None = None
) -> int:
    """About how many tokens `messages` take in a prompt (cautiously rounded up).

    `scale` corrects the estimate by what a server was seen to count (see
    `context_overflow`); 1.0 is the estimate as it stands. `estimates` keeps
    each message's share from one call to the next (`TokenEstimates`).
    """
    tokens = estimates.of(messages) if estimates is not None else map(_estimate, messages)
    return math.ceil(sum(tokens) * scale)


def _estimate(message: Message) -> int:
    """One message's share of `estimate_tokens` before `scale` (a history's is the sum)."""
    return len(msgspec.json.encode(message)) // CHARS_PER_TOKEN + _PER_MESSAGE


class TokenEstimates:
    """The token estimate of each message of one growing history, each written to JSON once.

    An agent estimates its whole history before every request, and each
    step's history is the last one with a few messages added; writing every
    message to JSON again each time would make a step's cost grow with
    everything said before it. One conversation holds one of these (`Agent` does): it
    keeps the last history it was asked about and the estimate of each of
    its messages, and answers a history that goes on from it by estimating
    only what was added (`blocks._shared_start` says how much repeats).
    Held per conversation, not per process, so it keeps only the messages
    its history holds anyway.
    """

    __slots__ = ("_held", "_tokens")

    def __init__(self) -> None:
        self._held: Sequence[Message] = ()
        self._tokens: list[int] = []

    def of(self, messages: Sequence[Message]) -> list[int]:
        """The estimate of each of `messages`, in order (a new list, the caller's to change)."""
        shared = _shared_start(self._held, messages)
        tokens = self._tokens[:shared]
        tokens.extend(map(_estimate, messages[shared:]))
        self._held = list(messages)
        self._tokens = tokens
        return list(tokens)


def known_context_window(model: str | None) -> int | None:
    """The context window of hosted `model` from `KNOWN_CONTEXT_WINDOWS`; None when unknown."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]  # "openai/gpt-4o" as a router names it
    for prefix, tokens in KNOWN_CONTEXT_WINDOWS:
        if name.startswith(prefix):
            return tokens
    return None


def context_overflow(message: str) -> tuple[int, int] | None:
    """`(prompt_tokens, context_tokens)` when `message` is a server's context-overflow error.

    Reads the three forms servers answer with (llama-server's
    `exceed_context_size_error`, Anthropic's "prompt is too long", OpenAI's
    "maximum context length"); None for any other error.
    """
    for pattern in _OVERFLOWS:
        match = pattern.search(message)
        if match:
            return int(match.group(1)), int(match.group(2))
    limit = _OPENAI_OVERFLOW[0].search(message)
    used = _OPENAI_OVERFLOW[1].search(message)
    if limit and used:
        return int(used.group(1) or used.group(2)), int(limit.group(1))
    return None


def fit_history(
    messages: Sequence[Message],
    *,
    budget: int,
    scale: float = 1.0,
    estimates: TokenEstimates | None = None,
) -> Fitted:
    """Fit `messages` into `budget` tokens (the context less the fixed part and the output).

    `scale` and `estimates` are passed on to `estimate_tokens`. Raises
    `HistoryError` when even the turn's prompt and its newest round, its
    outputs cut to their first characters, do not fit. The work is linear in
    the history: each message is estimated once (and a message changed by a
    cut once more), the running total is kept as parts go, and the oldest
    parts are counted off in one pass and cut away at once.
    """
    history = list(messages)
    tokens = estimates.of(history) if estimates is not None else list(map(_estimate, history))
    total = sum(tokens)

    def size(raw: int) -> int:
        return math.ceil(raw * scale)

    def replace(index: int, message: Message) -> None:
        nonlocal total
        history[index] = message
        estimate = _estimate(message)
        total += estimate - tokens[index]
        tokens[index] = estimate

    before = size(total)
    if before <= budget:
        return Fitted(history, before, before)
    prompt = _turn_prompt(history)
    earlier = _take_summary(history, prompt)
    if history:
        replace(prompt, history[prompt])
    # The newest round (the last two messages) and the prompt are the model's
    # current work: never dropped (its outputs are cut only as the last resort).
    protected_from = max(prompt + 1, len(history) - 2)
    shortened = images = 0
    # The current turn's older outputs first, then earlier turns' (older still).
    for index in (*range(prompt + 1, protected_from), *range(prompt)):
        if size(total) <= budget:
            break
        message = history[index]
        content, cut_outputs, cut_images = _shorten(message)
        if cut_outputs or cut_images:
            replace(index, Message(message.role, content))
            shortened += cut_outputs
            images += cut_images
    # Then whole parts, oldest first: earlier turns entire (from the start to
    # the next plain prompt), then the turn's oldest rounds, each call with
    # its results, never the newest round. The history kept is
    # `history[start:prompt + 1] + history[resume:]`.
    room = budget - _summary_tokens()
    start, resume = 0, prompt + 1
    for index in range(1, prompt + 1):
        if size(total) <= room:
            break
        if _is_prompt(history[index]):
            total -= sum(tokens[start:index])
            start = index
    if start == prompt:
        # The turn's prompt leads what is kept: its rounds may go next.
        while (
            size(total) > room
            and resume + 3 < len(history)
            and history[resume].tool_uses()
            and history[resume + 1].tool_results_in()
        ):
            total -= tokens[resume] + tokens[resume + 1]
            resume += 2
    dropped = history[:start] + history[prompt + 1 : resume]
    history = history[start : prompt + 1] + history[resume:]
    tokens = tokens[start : prompt + 1] + tokens[resume:]
    prompt -= start
    cut = 0
    if size(total) > room:
        cut, total = _cut_newest(history, tokens, max(prompt + 1, len(history) - 2), room, scale)
    totals = _Counts(shortened, images, len(dropped), cut, _calls_in(dropped)) + earlier
    summary = _summary(budget, totals)
    replace(prompt, Message("user", (Text(summary + "\n"), *history[prompt].content)))
    after = size(total)
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
        cut_outputs=cut,
        summary=summary,
    )


class Fit(NamedTuple):
    """What one request sends after `ContextFitter.fit`: the history and the answer's budget."""

    messages: list[Message]
    """The history to send: the caller's own list when nothing of it was cut."""
    max_tokens: int
    """The answer's budget, lowered where the context leaves less (to `MIN_ANSWER_TOKENS`)."""
    fitted: Fitted | None
    """The cut made for this request; None when it goes on from an earlier cut, or needs none."""


class ContextFitter:
    """Fits every request of one conversation into a model's context window.

    A fit is kept for the requests after it: the next one sends the fitted
    history and what was said since, while that fits. Only when it does
    not is the history fitted again, to `FIT_SLACK` under the room, so the
    requests after that go on from it too. A request that goes on from the
    last one keeps the server's prompt cache and the transport's kept JSON,
    and the cut moves once every so often instead of a little at every step.

    `context_window` is None while the model's context is unknown: the
    history is then sent whole, until a server's overflow error names its
    context (`learn`). `token_scale` is how many tokens the server was seen
    to count for one of the estimate's, raised by `learn`, so the next fit
    is by the server's measure.
    """

    def __init__(self, context_window: int | None) -> None:
        self.context_window = context_window
        self.token_scale = 1.0
        # Each message's share of the estimate, kept from one request's
        # fitting to the next (the history grows by a few messages a step).
        self._estimates = TokenEstimates()
        # The history the last fit was made from, and what it became.
        self._last_fit: tuple[list[Message], list[Message]] | None = None

    def fit(
        self,
        history: list[Message],
        *,
        max_tokens: int,
        system: str | None,
        tools: Sequence[object],
    ) -> Fit:
        """`history` and an answer of `max_tokens` fitted beside `system` and `tools` (the specs).

        With no context known, `history` goes whole and nothing is estimated.

        Raises `HistoryError` when even the newest round and its prompt do
        not fit (`fit_history`): a request that would overflow is not sent.
        """
        if self.context_window is None:
            return Fit(history, max_tokens, None)
        scale = self.token_scale
        # The system prompt, the tools' descriptions and the answer's budget
        # take their room first; the history gets the rest.
        room = self.context_window - math.ceil(estimate_fixed_tokens(system, tools) * scale)
        messages = self._after_last_fit(history)
        # An answer budget larger than the context leaves (a `--max-tokens`
        # near the window) gives way first, down to `MIN_ANSWER_TOKENS`: the
        # server would stop at the window's end anyway, and cutting the
        # history for room the answer cannot use would lose it for nothing.
        answer = max_tokens
        need = estimate_tokens(messages, scale=scale, estimates=self._estimates)
        if need + answer > room and answer > MIN_ANSWER_TOKENS:
            answer = max(MIN_ANSWER_TOKENS, room - need)
        budget = room - answer
        if need <= budget:
            return Fit(messages, answer, None)
        try:
            fitted = fit_history(
                messages,
                budget=budget - math.floor(budget * FIT_SLACK),
                scale=scale,
                estimates=self._estimates,
            )
        except HistoryError:
            # Too long for the slack: the room itself decides what is refused.
            fitted = fit_history(messages, budget=budget, scale=scale, estimates=self._estimates)
        self._last_fit = (fitted.messages, list(history))
        return Fit(fitted.messages, answer, fitted)

    def learn(
        self, error: str, sent: Sequence[Message], system: str | None, tools: Sequence[object]
    ) -> bool:
        """Take a server's own count from its context-overflow `error`; whether to fit again.

        `sent`, `system` and `tools` are those of the request it refused. The scale of the
        server's count to the estimate, with a tenth to spare, and the
        context it named when none was known (a hosted model not in any
        table) shape the fits after it.
        """
        overflow = context_overflow(error)
        if overflow is None:
            return False
        counted, context = overflow
        estimated = estimate_fixed_tokens(system, tools) + estimate_tokens(sent)
        scale = counted / max(estimated, 1) * 1.1
        learned = False
        if scale > self.token_scale * 1.01:
            self.token_scale = scale
            learned = True
        if self.context_window is None or context < self.context_window:
            self.context_window = context
            learned = True
        # Nothing new (the estimate already had this measure): fitting again
        # would send the same request.
        return learned

    def forget(self) -> None:
        """Fit the next request from the whole history, not from the last fit."""
        self._last_fit = None

    def _after_last_fit(self, history: list[Message]) -> list[Message]:
        """The last fitted history and what was said since; `history` itself when it changed.

        An edit between turns, a failed step taken back or a compaction: the
        history does not go on from what was fitted, so it is fitted anew.
        """
        if self._last_fit is None:
            return history
        fitted, source = self._last_fit
        if len(history) < len(source) or _shared_start(source, history) < len(source):
            self._last_fit = None
            return history
        return [*fitted, *history[len(source) :]]


def estimate_fixed_tokens(system: str | None, tools: Sequence[object]) -> int:
    """The estimate, in tokens, of what every request carries besides the history.

    `tools` are the tools' specs as the request declares them.
    """
    fixed = len(msgspec.json.encode(tools))
    fixed += len(system or "")
    # 64 more for the chat template around the system prompt and a prompt
    # mode's rendering of the tools.
    return fixed // CHARS_PER_TOKEN + 64


def _is_prompt(message: Message) -> bool:
    """A user message that answers no call: where a turn begins."""
    return message.role == "user" and not message.tool_results_in()


def _turn_prompt(history: Sequence[Message]) -> int:
    """The index of the current turn's prompt: the last user message that answers no call."""
    for index in range(len(history) - 1, -1, -1):
        if _is_prompt(history[index]):
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


def _summary_tokens() -> int:
    return 80 // CHARS_PER_TOKEN + 40


@dataclass(frozen=True)
class _Counts:
    """What fitting has cut from one turn: added up when the turn is fitted again."""

    shortened: int = 0
    images: int = 0
    dropped: int = 0
    cut: int = 0
    calls: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: _Counts) -> _Counts:
        calls = dict(self.calls)
        for name, count in other.calls:
            calls[name] = calls.get(name, 0) + count
        return _Counts(
            self.shortened + other.shortened,
            self.images + other.images,
            self.dropped + other.dropped,
            self.cut + other.cut,
            tuple(calls.items()),
        )


_COUNTED: Final = (
    ("dropped", re.compile(r"removed the (\d+) oldest messages")),
    ("shortened", re.compile(r"replaced (\d+) older tool outputs")),
    ("images", re.compile(r"dropped (\d+) older images")),
    ("cut", re.compile(r"cut (\d+) newest tool outputs")),
)
_CALLS: Final = re.compile(r"\(tool calls: ([^)]*)\)")


def _take_summary(history: list[Message], prompt: int) -> _Counts:
    """Remove the marked line an earlier fit left at the turn's `prompt`, and what it counted."""
    content = history[prompt].content if history else ()
    if not content or not isinstance(content[0], Text):
        return _Counts()
    line = content[0].text
    if not line.startswith(FIT_MARK):
        return _Counts()
    history[prompt] = Message(history[prompt].role, content[1:])
    found = {name: int(m.group(1)) for name, rx in _COUNTED if (m := rx.search(line))}
    calls: list[tuple[str, int]] = []
    if (m := _CALLS.search(line)) is not None:
        for item in m.group(1).split(", "):
            name, _, count = item.rpartition(" x")
            if name and count.isdigit():
                calls.append((name, int(count)))
    return _Counts(calls=tuple(calls), **found)


def _calls_in(dropped: Sequence[Message]) -> tuple[tuple[str, int], ...]:
    calls: dict[str, int] = {}
    for message in dropped:
        for call in message.tool_uses():
            calls[call.name] = calls.get(call.name, 0) + 1
    return tuple(calls.items())


def _cut_newest(
    history: list[Message], tokens: list[int], start: int, budget: int, scale: float
) -> tuple[int, int]:
    """Cut the newest round's longest outputs to their beginning until the history fits.

    `tokens` holds each message's estimate and is kept up to date with the
    cuts. Returns how many outputs were cut and the history's new estimate
    before `scale`. Each output keeps at least `_KEEP_AT_LEAST` characters
    and says how much of it is left.
    """
    total = sum(tokens)
    cut: set[tuple[int, str]] = set()
    while (tokens_now := math.ceil(total * scale)) > budget:
        longest: tuple[int, int, ToolResult] | None = None
        for index in range(start, len(history)):
            for block in history[index].tool_results_in():
                length = len(block.content)
                if length > 2 * _KEEP_AT_LEAST and (longest is None or length > longest[1]):
                    longest = (index, length, block)
        if longest is None:
            break
        index, length, result = longest
        excess = (tokens_now - budget) * CHARS_PER_TOKEN
        keep = max(_KEEP_AT_LEAST, length - excess - 120)
        original = _original_length(result.content)
        note = f"\n{FIT_MARK} output cut to fit: the first {keep} of {original} characters."
        replaced = msgspec.structs.replace(result, content=result.content[:keep] + note)
        history[index] = Message(
            history[index].role,
            tuple(replaced if b is result else b for b in history[index].content),
        )
        estimate = _estimate(history[index])
        total += estimate - tokens[index]
        tokens[index] = estimate
        cut.add((index, result.tool_use_id))
    return len(cut), total


_CUT_NOTE: Final = re.compile(re.escape(FIT_MARK) + r" output cut to fit: the first \d+ of (\d+)")


def _original_length(content: str) -> int:
    """The length of the output before any earlier cut (which says it at its end)."""
    match = _CUT_NOTE.search(content)
    return int(match.group(1)) if match else len(content)


def _summary(budget: int, counts: _Counts) -> str:
    parts = []
    if counts.dropped:
        named = ", ".join(f"{name} x{count}" for name, count in counts.calls)
        parts.append(
            f"removed the {counts.dropped} oldest messages"
            + (f" (tool calls: {named})" if named else "")
        )
    if counts.shortened:
        parts.append(f"replaced {counts.shortened} older tool outputs by a note")
    if counts.images:
        parts.append(f"dropped {counts.images} older images")
    if counts.cut:
        parts.append(f"cut {counts.cut} newest tool outputs to their beginning")
    if not parts:
        parts.append("nothing older could be removed")
    return f"{FIT_MARK} to fit {budget} tokens, " + "; ".join(parts) + "."

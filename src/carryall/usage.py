"""What requests used and what they cost: token totals and prices from `genai-prices`.

Token figures are carryall's one meaning across the six wires (`Usage`,
also `carryall.providers.Usage`): `input_tokens` excludes cache reads and
cache writes, which are counted alone, and `output_tokens` includes
reasoning (`reasoning_tokens` says how much of it was). A session records
each request's figures as a `RequestUsage`, the wire's own beside them.
Prices come from pydantic's `genai-prices` data (the `cost` extra), priced
at the time of each request, so a price change never rewrites an old
session's bill.

An honest bill has three kinds of line: a price, "free" for a model that runs
on this machine (the `local` and `llama-server` backends), and "—" where the
model or its price is unknown. Never "$0.00" for what nobody priced.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Final, Protocol

import msgspec

__all__ = [
    "FREE_BACKENDS",
    "UNPRICED",
    "WIRES",
    "Answer",
    "Cost",
    "RequestUsage",
    "Totals",
    "Usage",
    "format_cost",
    "missing_extra",
    "price",
    "records_total",
    "request_line",
    "responses_total",
    "tokens_text",
]

FREE_BACKENDS: Final = frozenset({"local", "llama-server"})
"""Backends whose model runs on a machine the user holds: nothing to pay per token."""

UNPRICED: Final = "—"
"""How an unknown price is shown: never as zero."""

_PROVIDERS: Final = {
    "anthropic": "anthropic",
    "openai": "openai",
    "responses": "openai",
    "gemini": "google",
    "bedrock": "aws",
}
"""`genai-prices` provider ids of the hosted backends."""

WIRES: Final = {"local": "llama-server"}
"""The wire a backend speaks where it is not the backend's own name (`RequestUsage.wire`)."""


class Usage(msgspec.Struct, frozen=True):
    """Token counts of one response, in one meaning on every wire.

    `input_tokens` excludes the cache: tokens read from it and written to it
    are `cache_read_input_tokens` and `cache_creation_input_tokens` (wires
    that count cached tokens inside their input figure have them taken
    out). `output_tokens` includes reasoning, and `reasoning_tokens` says
    how many of them it was where the wire tells (Gemini counts thoughts
    apart, so they are added in). Figures a backend does not give are zero.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    reasoning_tokens: int = 0


class Answer(Protocol):
    """What this module reads of a model's answer: `carryall.providers.Response` is one.

    Named by what it reads rather than by the codecs' class, so usage sits
    below the codecs (which carry a `Usage` on every answer) and a session
    reader that imports this module loads none of them.
    """

    @property
    def usage(self) -> Usage:
        """The answer's token counts."""
        ...

    @property
    def model(self) -> str | None:
        """The model the answer named, where the wire names one."""
        ...

    @property
    def raw_usage(self) -> dict[str, Any] | None:
        """The wire's usage object as it came."""
        ...


class RequestUsage(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """What one model request used, as a session records it (`AnySession.usage`).

    One per answered request, on the event written after it. `usage` is in
    carryall's one meaning and `raw` is the wire's usage object as it came
    (`Response.raw_usage`), so a figure read wrongly can be read again. The
    time is when the request was sent; it prices the request (`cost`), so a
    later price change never rewrites an old session's bill.
    """

    time: Annotated[datetime, msgspec.Meta(tz=True)]
    """When the request was sent (with its zone, so every reader compares it with any other)."""
    backend: str
    """The backend it went to (`anthropic`, `local`, ...): what prices it, and `local` is free."""
    wire: str
    """The wire it spoke (`anthropic`, `openai` for Chat Completions, `responses`, `gemini`,
    `bedrock`, `llama-server`)."""
    model: str
    """The model asked for."""
    answered: str = ""
    """The model the answer named, where the wire names one (often a dated version)."""
    usage: Usage = Usage()
    raw: dict[str, Any] | None = None
    """The wire's usage object exactly as it was sent; None where the wire sent none."""
    duration: float = 0.0
    """Seconds from sending the request to holding the whole answer."""

    @classmethod
    def of(
        cls, response: Answer, backend: str, model: str, sent: datetime, duration: float
    ) -> RequestUsage:
        """The record of `response`, an answer from `backend` to a request for `model`."""
        return cls(
            time=sent.astimezone(UTC),
            backend=backend,
            wire=WIRES.get(backend, backend),
            model=model,
            answered=response.model or "",
            usage=response.usage,
            raw=response.raw_usage,
            duration=round(duration, 3),
        )

    def cost(self) -> Cost | None:
        """What this request cost when it was sent (`price`): by the model that answered, else
        the one asked for; None when neither has a known price."""
        if self.answered and self.answered != self.model:
            cost = price(self.usage, self.answered, self.backend, self.time)
            if cost is not None:
                return cost
        return price(self.usage, self.model, self.backend, self.time)


class Cost(msgspec.Struct, frozen=True):
    """The price of some requests in US dollars; `free` for a model run locally."""

    usd: Decimal = Decimal(0)
    free: bool = False


def missing_extra() -> str | None:
    """Why prices cannot be looked up here (the `cost` extra is missing), or None."""
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        return "prices need the cost extra: pip install 'carryall[cost]'"
    return None


def price(usage: Usage, model: str, backend: str, at: datetime | None = None) -> Cost | None:
    """What one request of `model` on `backend` cost at `at` (default: now), or None if unknown.

    None when the model, its provider or its price is not in the data, or
    when the `cost` extra is not installed; a local model is `Cost(free=True)`.
    """
    if backend in FREE_BACKENDS:
        return Cost(free=True)
    provider = _PROVIDERS.get(backend)
    if provider is None or not model or missing_extra() is not None:
        return None
    import genai_prices

    figures = genai_prices.Usage(
        input_tokens=usage.input_tokens
        + usage.cache_read_input_tokens
        + usage.cache_creation_input_tokens,
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
        output_tokens=usage.output_tokens,
    )
    try:
        calculated = genai_prices.calc_price(
            figures, model, provider_id=provider, genai_request_timestamp=at
        )
    except LookupError:
        return None
    return Cost(usd=Decimal(calculated.total_price))


def format_cost(cost: Cost | None) -> str:
    """`$0.0195`, `free (local model)` or `—`: the one wording of a price for every reader."""
    if cost is None:
        return UNPRICED
    if cost.free:
        return "free (local model)"
    if cost.usd and cost.usd < Decimal("0.0001"):
        return "<$0.0001"
    return f"${cost.usd:.4f}"


class Totals(msgspec.Struct):
    """Usage and cost added up over requests; `priced` is false once one request had no price."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    reasoning_tokens: int = 0
    usd: Decimal = Decimal(0)
    priced: bool = True
    free: bool = True
    seconds: float = 0.0
    """The requests' durations added up (where they were measured)."""

    def add(self, usage: Usage, cost: Cost | None, seconds: float = 0.0) -> None:
        """Count one request in."""
        self.requests += 1
        self.seconds += seconds
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_input_tokens += usage.cache_read_input_tokens
        self.cache_creation_input_tokens += usage.cache_creation_input_tokens
        self.reasoning_tokens += usage.reasoning_tokens
        if cost is None:
            self.priced = False
            self.free = False
        elif not cost.free:
            self.free = False
            self.usd += cost.usd

    @property
    def cost(self) -> Cost | None:
        """The whole bill: None if any request could not be priced."""
        if not self.priced:
            return None
        if self.free and self.requests:
            return Cost(free=True)
        return Cost(usd=self.usd)

    @property
    def cache_read_share(self) -> float | None:
        """What share of all input tokens came from the cache (None with no input at all)."""
        total = self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
        return self.cache_read_input_tokens / total if total else None

    def line(self) -> str:
        """One line for the end of a run: `usage: ` and the `summary`."""
        return f"usage: {self.summary()}"

    def summary(self) -> str:
        """Requests, tokens, the cache-read share of input (where any was read) and the cost."""
        requests = f"{self.requests} request" + ("" if self.requests == 1 else "s")
        share = self.cache_read_share
        cached = f"; {share:.0%} of input read from the cache" if share else ""
        return f"{requests}, {tokens_text(self)}{cached}; cost {format_cost(self.cost)}"

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON values: every count, the cache-read share, and the cost.

        `cost_usd` is the exact dollar figure as a string (None when some
        request had no price), `cost` the shown wording (`format_cost`).
        """
        cost = self.cost
        share = self.cache_read_share
        return {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "seconds": round(self.seconds, 3),
            "cache_read_share": None if share is None else round(share, 4),
            "cost_usd": None if cost is None or cost.free else str(cost.usd),
            "free": cost is not None and cost.free,
            "cost": format_cost(cost),
        }


def tokens_text(figures: Usage | Totals) -> str:
    """`1,200 in, 80 out, 3,000 cache read, 0 cache write, 20 reasoning`: the one wording.

    The cache and reasoning figures are named only where there are some.
    """
    parts = [f"{figures.input_tokens:,} in", f"{figures.output_tokens:,} out"]
    if figures.cache_read_input_tokens or figures.cache_creation_input_tokens:
        parts.append(
            f"{figures.cache_read_input_tokens:,} cache read, "
            f"{figures.cache_creation_input_tokens:,} cache write"
        )
    if figures.reasoning_tokens:
        parts.append(f"{figures.reasoning_tokens:,} reasoning")
    return ", ".join(parts)


def request_line(record: RequestUsage, cost: Cost | None) -> str:
    """One recorded request as every reader shows it: when, where, which model, tokens, cost."""
    model = record.model
    if record.answered and record.answered != record.model:
        model += f" (answered {record.answered})"
    when = record.time.astimezone().strftime("%Y-%m-%d %H:%M:%S")  # local, as readers show times
    return (
        f"{when} {record.backend} {model}: {tokens_text(record.usage)}; "
        f"{record.duration:.1f}s; {format_cost(cost)}"
    )


def records_total(records: Iterable[RequestUsage]) -> tuple[Totals, list[Cost | None]]:
    """`Totals` of recorded requests, each priced when it was sent, and each one's cost."""
    totals = Totals()
    costs: list[Cost | None] = []
    for record in records:
        cost = record.cost()
        costs.append(cost)
        totals.add(record.usage, cost, record.duration)
    return totals, costs


def responses_total(responses: Iterable[Answer], backend: str, model: str) -> Totals:
    """`Totals` of a run's answers, each priced now as the model that answered (else `model`)."""
    totals = Totals()
    for response in responses:
        answered = response.model or model
        totals.add(response.usage, price(response.usage, answered, backend))
    return totals

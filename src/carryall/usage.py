"""What requests used and what they cost: token totals and prices from `genai-prices`.

Token figures are carryall's one meaning across the six wires
(`carryall.providers.Usage`): `input_tokens` excludes cache reads and cache
writes, which are counted alone, and `output_tokens` includes reasoning
(`reasoning_tokens` says how much of it was). Prices come from pydantic's
`genai-prices` data (the `cost` extra), priced at the time of each request,
so a price change never rewrites an old session's bill.

An honest bill has three kinds of line: a price, "free" for a model that runs
on this machine (the `local` and `llama-server` backends), and "—" where the
model or its price is unknown. Never "$0.00" for what nobody priced.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Final

import msgspec

from carryall.providers import Response, Usage

__all__ = [
    "FREE_BACKENDS",
    "UNPRICED",
    "Cost",
    "Totals",
    "format_cost",
    "missing_extra",
    "price",
    "responses_total",
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

    def add(self, usage: Usage, cost: Cost | None) -> None:
        """Count one request in."""
        self.requests += 1
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
        """One line for the end of a run: tokens, cache share, cost."""
        parts = [f"{self.input_tokens:,} in", f"{self.output_tokens:,} out"]
        if self.cache_read_input_tokens or self.cache_creation_input_tokens:
            parts.append(
                f"{self.cache_read_input_tokens:,} cache read, "
                f"{self.cache_creation_input_tokens:,} cache write"
            )
        if self.reasoning_tokens:
            parts.append(f"{self.reasoning_tokens:,} reasoning")
        requests = f"{self.requests} request" + ("" if self.requests == 1 else "s")
        return f"usage: {requests}, " + ", ".join(parts) + f"; cost {format_cost(self.cost)}"


def responses_total(responses: Iterable[Response], backend: str, model: str) -> Totals:
    """`Totals` of a run's answers, each priced now as the model that answered (else `model`)."""
    totals = Totals()
    for response in responses:
        answered = response.model or model
        totals.add(response.usage, price(response.usage, answered, backend))
    return totals

"""Token usage and per-token prices: what metering, providers and the request log share.

Reported counts are untrusted input (docs/metering.md): every :class:`TokenUsage`, however
it was built, holds counts in ``0 .. MAX_REPORTED_TOKENS`` and a cost that is finite,
not negative and at most ``MAX_REPORTED_COST_USD`` (a cost that is not a number, or is
negative, is dropped: the request is priced from our table instead). Prices are integer
pico-USD per token, so sums are exact.
"""

from __future__ import annotations

import math
from decimal import Decimal

import msgspec

MAX_REPORTED_TOKENS = 100_000_000
"""The most tokens of one kind one request may be said to use; a count above is clamped."""
MAX_REPORTED_COST_USD = 10_000.0
"""The most one request may be said to cost; a reported cost above is clamped."""
_PICO_PER_TOKEN_PER_USD_PER_M = Decimal(10**6)


def reported_count(value: int) -> int:
    """A count an upstream reported, within ``0 .. MAX_REPORTED_TOKENS``; providers clamp
    each raw count before adding counts up (a negative one must not cancel others)."""
    return min(max(value, 0), MAX_REPORTED_TOKENS)


class TokenUsage(msgspec.Struct):
    """Provider-neutral usage. ``prompt_tokens`` includes cache reads and writes."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    provider_cost: float | None = None
    estimated: bool = False

    def __post_init__(self) -> None:
        self.prompt_tokens = reported_count(self.prompt_tokens)
        self.completion_tokens = reported_count(self.completion_tokens)
        self.cached_tokens = reported_count(self.cached_tokens)
        self.cache_write_tokens = reported_count(self.cache_write_tokens)
        self.reasoning_tokens = reported_count(self.reasoning_tokens)
        cost = self.provider_cost
        if cost is not None:
            if not math.isfinite(cost) or cost < 0:
                self.provider_cost = None
            elif cost > MAX_REPORTED_COST_USD:
                self.provider_cost = MAX_REPORTED_COST_USD

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def pico_per_token(usd_per_million: float) -> int:
    """Exact conversion of a configured price (decimal text, not binary float noise)."""
    return int(Decimal(repr(usd_per_million)) * _PICO_PER_TOKEN_PER_USD_PER_M)


class Price(msgspec.Struct, frozen=True):
    """Per-token rates in pico-USD."""

    input: int
    output: int
    cache_read: int
    cache_write: int

    @classmethod
    def per_million(
        cls,
        input: float,
        output: float,
        cache_read: float | None = None,
        cache_write: float | None = None,
    ) -> Price:
        return cls(
            input=pico_per_token(input),
            output=pico_per_token(output),
            cache_read=pico_per_token(input if cache_read is None else cache_read),
            cache_write=pico_per_token(input if cache_write is None else cache_write),
        )

"""Cost of a request, in integer pico-dollars (1e-12 USD) so sums are exact.

Prices are configured in USD per million tokens; ``X`` USD/M is ``X * 1e6`` pico-USD per
token, exact for any price with up to six decimals. Cached prompt tokens are priced
at the cache-read rate, cache writes at the cache-write rate (both default to the
input rate when a model does not list them), the rest of the prompt at the input rate.
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.config import PriceConfig
from sluice.core.usage import Price, TokenUsage
from sluice.wire.chunks import CompletionTokensDetails, PriceSource, PromptTokensDetails, Usage

PICO_PER_USD = 10**12


def prices_from_config(confs: Mapping[str, PriceConfig]) -> dict[str, Price]:
    """Configured prices (USD per million tokens) by model id, as :class:`Price` s."""
    return {model: conf.price() for model, conf in confs.items()}


def cost_pico(usage: TokenUsage, price: Price) -> int:
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    written = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
    fresh = usage.prompt_tokens - cached - written
    return (
        fresh * price.input
        + cached * price.cache_read
        + written * price.cache_write
        + usage.completion_tokens * price.output
    )


def usd(pico: int) -> float:
    return pico / PICO_PER_USD


def priced_usage(
    usage: TokenUsage,
    price: Price | None,
    source: PriceSource = "list",
    *,
    price_estimate: bool = False,
) -> Usage:
    """The wire ``usage`` object: counts plus cost and where its rate came from.

    ``cost`` is null when the model is unpriced, and when the counts are our own
    estimate of a finished answer (docs/api.md#usage-and-cost: null when the provider reported no
    usage). A stream cut short prices its estimate (``price_estimate``), so the error
    event can say what the partial answer cost (docs/api.md#errors-in-the-middle-of-a-stream).
    """
    cost: float | None = None
    price_source: PriceSource | None = None
    if usage.estimated and not price_estimate:
        pass
    elif usage.provider_cost is not None:
        cost, price_source = usage.provider_cost, "provider"
    elif price is not None:
        cost, price_source = usd(cost_pico(usage, price)), source
    return Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens),
        completion_tokens_details=CompletionTokensDetails(reasoning_tokens=usage.reasoning_tokens),
        cost=cost,
        price_source=price_source,
    )

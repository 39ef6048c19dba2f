"""What a request may cost before it runs (the hold) and what it costs after (the charge).

Which price applies, most specific first (docs/metering.md):

1. ``provider`` — a cost the upstream reported for this request;
2. ``custom_provider`` — the price configured on the serving connection for the model;
3. ``custom`` — the account's own price for the model;
4. ``list`` — the catalog's list price.

A ``provider`` cost counts only on the operator's own connections: an account's own
connection is an upstream the account controls, so what it reports is not a price.

Amounts are integer nano-dollars; a cost in pico-dollars is rounded up to the next
nano-dollar, so an account is never charged less than the cost it was shown. A charge
is never below zero (:class:`~sluice.metering.meter.Ticket` caps it to its hold too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

import msgspec

from sluice.core.connection import ConnectionSettings
from sluice.core.demand import Demand
from sluice.core.money import NANO_PER_USD
from sluice.core.usage import Price, TokenUsage
from sluice.errors import InvalidRequestError
from sluice.metering.pricing import cost_pico
from sluice.routing.catalog import CatalogModel
from sluice.routing.plan import Attempt, Plan
from sluice.wire.chunks import PriceSource

PICO_PER_NANO = 1000
DEFAULT_OUTPUT_CEILING = 4096
"""Output tokens held for when neither the request nor the catalog sets a ceiling."""


class Rate(msgspec.Struct, frozen=True):
    price: Price | None
    source: PriceSource
    honours_provider_cost: bool = True
    """False on an account's own connection: a cost its upstream reports is ignored."""


def resolve_rate(
    model: CatalogModel, connection: ConnectionSettings, account_prices: Mapping[str, Price]
) -> Rate:
    honour = connection.owner is None
    price = connection.prices.get(model.id)
    if price is not None:
        return Rate(price, "custom_provider", honour)
    price = account_prices.get(model.id)
    if price is not None:
        return Rate(price, "custom", honour)
    return Rate(model.price, "list", honour)


def cache_rate(rate: Rate, share: float) -> Rate:
    """A cache hit's rate: ``share`` of ``rate``'s price (rounded down to the pico-USD),
    never a cost an upstream reported (none was asked)."""
    price = rate.price
    if price is not None:
        price = Price(
            input=int(price.input * share),
            output=int(price.output * share),
            cache_read=int(price.cache_read * share),
            cache_write=int(price.cache_write * share),
        )
    return Rate(price, "cache", honours_provider_cost=False)


def as_priced(usage: TokenUsage, rate: Rate) -> TokenUsage:
    """The usage the rate prices: without a reported cost the rate does not honour."""
    if rate.honours_provider_cost or usage.provider_cost is None:
        return usage
    return msgspec.structs.replace(usage, provider_cost=None)


def nano_from_pico(pico: int) -> int:
    return -(-pico // PICO_PER_NANO)


def nano_from_usd(usd: float) -> int:
    return int((Decimal(repr(usd)) * NANO_PER_USD).to_integral_value(rounding="ROUND_CEILING"))


def charge(usage: TokenUsage, rate: Rate) -> int:
    """What the account pays for this usage (a provider-reported cost wins where the
    rate honours it); never negative, as :class:`TokenUsage` keeps its numbers."""
    usage = as_priced(usage, rate)
    if usage.provider_cost is not None:
        return nano_from_usd(usage.provider_cost)
    if rate.price is None:
        return 0
    return nano_from_pico(cost_pico(usage, rate.price))


def hold_amount(demand: Demand, candidates: Sequence[tuple[CatalogModel, Rate]]) -> int:
    """The most a request of this demand can cost on any target it may be served by:
    the prompt's token ceiling plus the output ceiling (the request's, lowered to the
    model's as the request sent there is, else the model's) per answer, at that
    target's rate, the prompt at its dearest (a cache write may cost more than input).
    Unpriced targets cost nothing."""
    prompt = demand.prompt_ceiling
    most = 0
    for model, rate in candidates:
        price = rate.price
        if price is None:
            continue
        ceiling = demand.output_ceiling
        if ceiling is None:
            ceiling = model.max_output_tokens or DEFAULT_OUTPUT_CEILING
        elif model.max_output_tokens is not None:
            ceiling = min(ceiling, model.max_output_tokens)
        usage = TokenUsage(
            prompt_tokens=prompt,
            cache_write_tokens=prompt if price.cache_write > price.input else 0,
            completion_tokens=ceiling * demand.answers,
        )
        most = max(most, nano_from_pico(cost_pico(usage, price)))
    return most


UNPRICED = "model_unpriced"
"""The code of a credit-metered request whose every target is unpriced."""


def priced_plan(plan: Plan, account_prices: Mapping[str, Price]) -> Plan:
    """For a credit-metered account: the plan without the attempts it would be served
    for free (no price anywhere, on an operator's connection that does not
    ``allow_unpriced``); a 400 naming the model when none is left."""
    kept = tuple(a for a in plan.attempts if _chargeable(a, account_prices))
    if len(kept) == len(plan.attempts):
        return plan
    if not kept:
        model = plan.attempts[0].model.id
        raise InvalidRequestError(
            f"The model '{model}' has no price, and this account pays per use: the "
            "operator can price it (the connection's `prices`) or let accounts use it "
            "unpriced (`allow_unpriced` on the connection).",
            code=UNPRICED,
            param="model",
        )
    return msgspec.structs.replace(plan, attempts=kept)


def _chargeable(attempt: Attempt, account_prices: Mapping[str, Price]) -> bool:
    conn = attempt.target.connection
    if conn.owner is not None or conn.allow_unpriced:
        return True  # an account's own upstream, or free by the operator's word
    return resolve_rate(attempt.model, conn, account_prices).price is not None

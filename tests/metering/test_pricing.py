from __future__ import annotations

import pytest

from sluice.core.demand import chat_demand
from sluice.core.money import nano_from_usd_text
from sluice.core.tokens import estimate_prompt_tokens, prompt_token_ceiling, tokens_for_chars
from sluice.core.usage import MAX_REPORTED_COST_USD, MAX_REPORTED_TOKENS, Price, TokenUsage
from sluice.frontdoors.chat import decode_chat_request
from sluice.metering.charges import Rate, as_priced, charge, hold_amount, nano_from_pico
from sluice.metering.meter import Ticket
from sluice.metering.pricing import cost_pico, priced_usage, usd
from sluice.routing.catalog import CatalogModel

SONNET = Price.per_million(3.0, 15.0, cache_read=0.3, cache_write=3.75)


def test_prices_convert_exactly_to_pico_dollars_per_token() -> None:
    assert (
        Price(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=3_750_000)
        == SONNET
    )
    assert Price.per_million(0.028, 0.42).input == 28_000  # no binary-float noise
    assert Price.per_million(0.075, 0.6).cache_read == 75_000  # defaults to the input rate


def test_cost_with_cache_reads_and_writes() -> None:
    usage = TokenUsage(
        prompt_tokens=1000, completion_tokens=100, cached_tokens=600, cache_write_tokens=300
    )
    # 100 fresh at $3/M, 600 cached at $0.30/M, 300 written at $3.75/M, 100 out at $15/M
    expected = 100 * 3_000_000 + 600 * 300_000 + 300 * 3_750_000 + 100 * 15_000_000
    assert cost_pico(usage, SONNET) == expected
    assert usd(expected) == pytest.approx(0.003105)


def test_seed_example_cost() -> None:
    usage = TokenUsage(prompt_tokens=24, completion_tokens=118)
    assert usd(cost_pico(usage, SONNET)) == 0.001842


def test_sums_are_exact_where_floats_drift() -> None:
    one = TokenUsage(prompt_tokens=1, completion_tokens=0)
    tenth = Price.per_million(0.1, 0.1)
    total = sum(cost_pico(one, tenth) for _ in range(10))
    assert total == 10 * 100_000 and usd(total) == 1e-6


def test_priced_usage_sources() -> None:
    reported = TokenUsage(prompt_tokens=10, completion_tokens=5, cached_tokens=2)
    wire = priced_usage(reported, SONNET)
    assert (wire.total_tokens, wire.prompt_tokens_details.cached_tokens) == (15, 2)
    assert wire.price_source == "list" and wire.cost == usd(cost_pico(reported, SONNET))
    by_provider = TokenUsage(prompt_tokens=10, completion_tokens=5, provider_cost=0.5)
    assert (
        priced_usage(by_provider, SONNET).cost,
        priced_usage(by_provider, SONNET).price_source,
    ) == (0.5, "provider")
    assert priced_usage(reported, None).cost is None
    estimate = TokenUsage(prompt_tokens=10, completion_tokens=5, estimated=True)
    assert priced_usage(estimate, SONNET).cost is None  # a finished answer without usage
    cut = priced_usage(estimate, SONNET, price_estimate=True)  # a stream cut short
    assert cut.cost == usd(cost_pico(estimate, SONNET)) and cut.price_source == "list"


def test_estimator() -> None:
    assert [tokens_for_chars(n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
    req = decode_chat_request(
        b'{"model": "m", "messages": [{"role": "system", "content": '
        b'"12345678"}, {"role": "user", "content": "abcd"}]}'
    )
    assert estimate_prompt_tokens(req) == 3 + (4 + 2) + (4 + 1)


def test_operator_amounts_are_exact_nano_dollars_or_refused() -> None:
    assert nano_from_usd_text("25") == 25 * 10**9
    assert nano_from_usd_text("0.000000001") == 1
    assert nano_from_usd_text("-3") == -3 * 10**9
    for bad, why in [
        ("1e-10", "9 decimals"),
        ("x", "not an amount"),
        ("inf", "not an amount"),
        ("NaN", "not an amount"),
    ]:
        with pytest.raises(ValueError, match=why):
            nano_from_usd_text(bad)


def test_a_hold_prices_the_prompt_at_its_dearest_rate() -> None:
    """A prompt written to the cache may cost more than plain input: the hold covers it."""
    req = decode_chat_request(
        b'{"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}'
    )
    model = CatalogModel("m", {}, None, None, (), None, "x")
    plain = Price.per_million(3.0, 15.0)
    writes = Price.per_million(3.0, 15.0, cache_write=3.75)
    prompt = prompt_token_ceiling(req)

    def held(price: Price) -> int:
        return hold_amount(chat_demand(req), [(model, Rate(price, "list"))])

    assert held(plain) == nano_from_pico(
        cost_pico(TokenUsage(prompt_tokens=prompt, completion_tokens=100), plain)
    )
    assert (
        held(writes)
        == nano_from_pico(prompt * writes.cache_write + 100 * writes.output)
        > held(plain)
    )


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        (
            TokenUsage(prompt_tokens=-5, completion_tokens=-(10**6), cached_tokens=-1),
            TokenUsage(prompt_tokens=0, completion_tokens=0, cached_tokens=0),
        ),
        (
            TokenUsage(prompt_tokens=10**18, reasoning_tokens=10**18, cache_write_tokens=10**18),
            TokenUsage(
                prompt_tokens=MAX_REPORTED_TOKENS,
                reasoning_tokens=MAX_REPORTED_TOKENS,
                cache_write_tokens=MAX_REPORTED_TOKENS,
            ),
        ),
        (TokenUsage(provider_cost=-300.0), TokenUsage(provider_cost=None)),
        (TokenUsage(provider_cost=float("nan")), TokenUsage(provider_cost=None)),
        (TokenUsage(provider_cost=float("inf")), TokenUsage(provider_cost=None)),
        (TokenUsage(provider_cost=1e300), TokenUsage(provider_cost=MAX_REPORTED_COST_USD)),
        (TokenUsage(provider_cost=0.25), TokenUsage(provider_cost=0.25)),
    ],
    ids=["negative", "huge", "negative-cost", "nan", "inf", "absurd-cost", "sane"],
)
def test_reported_usage_is_kept_within_bounds(reported: TokenUsage, expected: TokenUsage) -> None:
    assert reported == expected


def test_a_charge_is_never_negative_nor_above_its_hold() -> None:
    rate = Rate(SONNET, "list")
    assert charge(TokenUsage(prompt_tokens=-(10**9), completion_tokens=-1), rate) == 0
    assert charge(TokenUsage(completion_tokens=1, provider_cost=-5.0), rate) == 15_000  # table
    ticket = Ticket("hold_1", "acct", "key", "req", amount=1000)
    assert (ticket.capped(-305), ticket.capped(400), ticket.capped(10**12)) == (0, 400, 1000)


def test_a_cost_reported_by_an_accounts_own_connection_is_not_charged() -> None:
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=1000, provider_cost=0.0)
    operators = Rate(SONNET, "list")
    tenants = Rate(SONNET, "list", honours_provider_cost=False)
    assert charge(usage, operators) == 0  # the operator's router said it was free
    assert charge(usage, tenants) == 18_000_000  # $3 + $15 per million, from our table
    assert as_priced(usage, tenants).provider_cost is None
